//! The help overlay, generated from the key map so it cannot disagree with it.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph};

use super::{centered, format, pane_block, style};
use crate::app::keymap::{Binding, KeyContext};

pub fn draw(frame: &mut Frame, area: Rect, bindings: &[Binding]) {
    let entries: Vec<&Binding> = bindings
        .iter()
        .filter(|b| b.context == KeyContext::Normal && !b.description.is_empty())
        .collect();
    // Two columns, so that the whole key map fits the smallest terminal (80×24).
    let half = entries.len().div_ceil(2);
    let cell = |b: Option<&&Binding>| -> Vec<Span<'static>> {
        match b {
            Some(b) => vec![
                Span::styled(format!(" {:<7}", b.label), style::KEY),
                Span::raw(format!(" {:<30}", format::truncate(b.description, 30))),
            ],
            None => Vec::new(),
        }
    };
    let rows: Vec<Line> = (0..half)
        .map(|i| {
            let mut spans = cell(entries.get(i));
            spans.extend(cell(entries.get(half + i)));
            Line::from(spans)
        })
        .chain([
            Line::raw(""),
            Line::styled(
                " Mouse: the wheel scrolls the pane under it; a click focuses a pane.",
                style::DIM,
            ),
            Line::styled(" Esc, ? or q closes this help.", style::DIM),
        ])
        .collect();
    let height = rows.len() as u16 + 2;
    let popup = centered(area, 80, height);
    frame.render_widget(Clear, popup);
    frame.render_widget(Paragraph::new(rows).block(pane_block("Help", true)), popup);
}
