//! The bottom line: the last message, else the main keys that apply here.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::style;
use crate::app::action::Action;
use crate::app::update::refusal;
use crate::app::view::ViewState;
use crate::model::Model;
use crate::model::output::one_line;

const KEYS: [(&str, &str, Action); 11] = [
    ("q", "quit", Action::Quit),
    ("?", "help", Action::Help),
    ("a", "add", Action::NewCommand),
    ("t", "TERM", Action::Term),
    ("K", "KILL", Action::Kill),
    ("s", "stop", Action::Stop),
    ("r", "restart", Action::Restart),
    ("d", "dismiss", Action::Dismiss),
    ("/", "search", Action::Search),
    ("Tab", "focus", Action::FocusNext),
    ("z", "zoom", Action::Zoom),
];

pub fn draw(frame: &mut Frame, area: Rect, model: &Model, view: &ViewState) {
    let line = match &view.message {
        Some(message) => Line::from(Span::raw(format!(" {}", one_line(message)))),
        None => Line::from(
            KEYS.iter()
                .filter(|(_, _, action)| refusal(model, action).is_none())
                .flat_map(|(key, what, _)| {
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
