//! The bottom line: the last message, else the main keys; while typing into a command,
//! first of all that the keys go to it.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
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
    if let Some(id) = view.typing {
        frame.render_widget(Paragraph::new(typing_line(model, id, view)), area);
        return;
    }
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

/// The mark that says keys go to a command: hard to miss.
const TYPING: Style = Style::new()
    .fg(Color::Black)
    .bg(Color::Yellow)
    .add_modifier(Modifier::BOLD);
const ENDED: Style = Style::new().fg(Color::Red);

/// `INPUT → build · Ctrl-a to leave`, and what became of the command if it ended.
fn typing_line<'a>(model: &Model, id: usize, view: &ViewState) -> Line<'a> {
    let (name, state) = model.commands.get(id).map_or_else(
        || ("?".to_string(), Some("gone".to_string())),
        |c| {
            let ended = (!c.status.is_active()).then(|| c.status.label());
            (one_line(&c.config.name), ended)
        },
    );
    let mut spans = vec![
        Span::styled(" INPUT ", TYPING),
        Span::raw(format!(" → {name} ")),
    ];
    if let Some(state) = state {
        spans.push(Span::styled(format!("({state}: keys go nowhere) "), ENDED));
    }
    spans.push(Span::raw("· "));
    spans.push(Span::styled(" Ctrl-a ", style::KEY));
    spans.push(Span::raw(" to leave "));
    if let Some(message) = &view.message {
        spans.push(Span::raw(format!("· {}", one_line(message))));
    }
    Line::from(spans)
}
