//! The bottom line: the last message, else the main keys.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::style;
use crate::app::view::ViewState;
use crate::model::output::one_line;

const KEYS: [(&str, &str); 10] = [
    ("q", "quit"),
    ("?", "help"),
    ("a", "add"),
    ("t", "TERM"),
    ("K", "KILL"),
    ("s", "stop"),
    ("r", "restart"),
    ("/", "search"),
    ("Tab", "focus"),
    ("z", "zoom"),
];

pub fn draw(frame: &mut Frame, area: Rect, view: &ViewState) {
    let line = match &view.message {
        Some(message) => Line::from(Span::raw(format!(" {}", one_line(message)))),
        None => Line::from(
            KEYS.iter()
                .flat_map(|(key, what)| {
                    [
                        Span::styled(format!(" {key} "), style::KEY),
                        Span::raw(format!(" {what} ")),
                    ]
                })
                .collect::<Vec<_>>(),
        ),
    };
    frame.render_widget(Paragraph::new(line), area);
}
