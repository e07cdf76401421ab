//! The help overlay, generated from the key map so it cannot disagree with it.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph};

use super::{centered, pane_block, style};
use crate::app::keymap::{Binding, KeyContext};

pub fn draw(frame: &mut Frame, area: Rect, bindings: &[Binding]) {
    let rows: Vec<Line> = bindings
        .iter()
        .filter(|b| b.context == KeyContext::Normal && !b.description.is_empty())
        .map(|b| {
            Line::from(vec![
                Span::styled(format!(" {:<8}", b.label), style::KEY),
                Span::raw(format!("  {}", b.description)),
            ])
        })
        .chain([
            Line::raw(""),
            Line::styled(
                " Mouse: wheel scrolls the pane under it; click focuses a pane.",
                style::DIM,
            ),
            Line::styled(" Esc, ? or q closes this help.", style::DIM),
        ])
        .collect();
    let height = rows.len() as u16 + 2;
    let popup = centered(area, 60, height);
    frame.render_widget(Clear, popup);
    frame.render_widget(Paragraph::new(rows).block(pane_block("Help", true)), popup);
}
