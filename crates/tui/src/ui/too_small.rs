//! What a terminal too small for the layout shows instead of a broken one.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::{Paragraph, Wrap};

use crate::app::layout::{MIN_HEIGHT, MIN_WIDTH};

pub fn draw(frame: &mut Frame, area: Rect, running: usize) {
    let text = vec![
        Line::raw("Terminal too small"),
        Line::raw(format!(
            "{}×{} here; tether needs {MIN_WIDTH}×{MIN_HEIGHT}.",
            area.width, area.height
        )),
        Line::raw("Enlarge the window, or press q to quit."),
        Line::raw(format!(
            "{} running.",
            super::format::count(running, "command", "commands")
        )),
    ];
    frame.render_widget(Paragraph::new(text).wrap(Wrap { trim: true }), area);
}
