//! The help overlay, generated from the key map so it cannot disagree with it.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph};

use super::{centered, format, pane_block, style};
use crate::app::keymap::{Binding, KeyContext};
use crate::app::update::{READ_ONLY, refusal};
use crate::model::Model;

pub fn draw(frame: &mut Frame, area: Rect, model: &Model, bindings: &[Binding]) {
    // Only the keys that do something here: a recorded session refuses to launch or signal.
    let entries: Vec<&Binding> = bindings
        .iter()
        .filter(|b| b.context == KeyContext::Normal && !b.description.is_empty())
        .filter(|b| refusal(model, &b.action).is_none())
        .collect();
    let read_only = refusal(model, &crate::app::action::Action::Term) == Some(READ_ONLY);
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
                " Mouse: the wheel scrolls the pane under the pointer; a click focuses it and,",
                style::DIM,
            ),
            Line::styled(
                " in the command list, also selects the command clicked.",
                style::DIM,
            ),
        ])
        .chain(read_only.then(|| {
            Line::styled(
                " A recorded session: nothing here launches or signals a command.",
                style::DIM,
            )
        }))
        .chain([Line::styled(" Esc, ? or q closes this help.", style::DIM)])
        .collect();
    let height = rows.len() as u16 + 2;
    let popup = centered(area, 80, height);
    frame.render_widget(Clear, popup);
    frame.render_widget(Paragraph::new(rows).block(pane_block("Help", true)), popup);
}
