//! The help overlay, generated from the key map so it cannot disagree with it.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph};

use super::{centered, format, pane_block, style};
use crate::app::action::Action;
use crate::app::keymap::{Binding, KeyContext, keys_label};
use crate::app::update::{OnScreen, READ_ONLY, refusal, refusal_on};
use tether_model::Model;

pub fn draw(frame: &mut Frame, area: Rect, model: &Model, on: OnScreen, bindings: &[Binding]) {
    // Only the keys that do something here, by the rule the keys are refused by: a recorded
    // session launches and signals nothing, a watch types into nothing, one session listed
    // has nothing to fold.
    let applies = |action: &Action| refusal_on(model, on, action).is_none();
    let entries: Vec<(String, &Binding)> = bindings
        .iter()
        .filter(|b| b.context == KeyContext::Normal && !b.description.is_empty())
        .filter(|b| applies(&b.action))
        .map(|b| (keys_label(bindings, b, &applies), b))
        .collect();
    let read_only = refusal(model, &Action::Term) == Some(READ_ONLY);
    // On a screen read from journals (`tether watch`, `tether open`) `q` does less than in
    // the tether that runs the commands: it quits at once, since what runs belongs to
    // whoever started it.
    let describe = |b: &Binding| match b.action {
        Action::Quit if model.mode.from_journals() => "quit",
        _ => b.description,
    };
    // Two columns, so that the whole key map fits the smallest terminal (80×24).
    let half = entries.len().div_ceil(2);
    let cell = |b: Option<&(String, &Binding)>| -> Vec<Span<'static>> {
        match b {
            Some((label, b)) => vec![
                Span::styled(format!(" {label:<7}"), style::KEY),
                Span::raw(format!(" {:<30}", format::truncate(describe(b), 30))),
            ],
            None => Vec::new(),
        }
    };
    let closing = Line::styled(
        if read_only {
            " A recorded session: nothing here launches or signals a command. Esc closes."
        } else {
            " Esc, ? or q closes this help."
        },
        style::DIM,
    );
    let mouse = [
        Line::raw(""),
        Line::styled(
            " Mouse: the wheel scrolls the pane under the pointer; a click focuses it and,",
            style::DIM,
        ),
        Line::styled(
            " in the command list, also selects the command clicked.",
            style::DIM,
        ),
    ];
    // Every key and how to close always fit; the note on the mouse only where there is room
    // (a recorded session's time keys take the rows of an 80×24 terminal).
    let room = (area.height as usize).saturating_sub(2);
    let with_mouse = half + mouse.len() < room;
    // Where even the closing line has no row, the title says how to close.
    let with_closing = half < room;
    let title = if with_closing {
        "Help"
    } else {
        "Help · Esc closes"
    };
    let rows: Vec<Line> = (0..half)
        .map(|i| {
            let mut spans = cell(entries.get(i));
            spans.extend(cell(entries.get(half + i)));
            Line::from(spans)
        })
        .chain(mouse.into_iter().filter(|_| with_mouse))
        .chain([closing].into_iter().filter(|_| with_closing))
        .collect();
    let height = rows.len() as u16 + 2;
    let popup = centered(area, 80, height);
    frame.render_widget(Clear, popup);
    frame.render_widget(
        Paragraph::new(rows).block(pane_block(title, true, popup.width)),
        popup,
    );
}
