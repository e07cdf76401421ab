//! The bottom line: the last message, else the main keys; while typing into a command,
//! first of all that the keys go to it; with the time cursor set, first of all its moment;
//! then the latest moment that needs the operator, if one does (`SESSION/NN name: needs
//! input`).

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::strip::cursor_time;
use super::timeline::describe;
use super::{Scene, format, style};
use crate::app::action::Action;
use crate::app::update::refusal;
use crate::app::view::{CursorContent, ViewState};
use tether_model::output::one_line;
use tether_model::recording::step_label;
use tether_model::{CommandState, Model};
use tether_protocol::protocol::{AttentionKind, EventKind};

const KEYS: [(&str, &str, Action); 14] = [
    ("q", "quit", Action::Quit),
    ("?", "help", Action::Help),
    ("[ ]", "event", Action::TimePrevEvent),
    ("{ }", "notable", Action::TimePrevNotable),
    ("< >", "step", Action::TimeStepBack),
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

/// The time cursor's moment: hard to miss, as every pane shows the past.
const CURSOR: Style = Style::new()
    .fg(Color::Black)
    .bg(Color::Cyan)
    .add_modifier(Modifier::BOLD);

/// `compact`: the screen is small, and the list and the command's panes take it in turn
/// (`crate::app::layout::is_compact`): the way from one to the other comes first.
pub fn draw(frame: &mut Frame, area: Rect, Scene(model, view, content): Scene, compact: bool) {
    let cursor = content.cursor.as_ref();
    // A finished recording is the past: nothing in it waits for anyone any more.
    let attention = (content.list.latest_attention)
        .filter(|_| !model.mode.is_finished())
        .and_then(|id| model.commands.get(id));
    if let Some(id) = view.typing {
        frame.render_widget(Paragraph::new(typing_line(model, id, view)), area);
        return;
    }
    // The event's details give way to the keys on a narrow screen.
    let details = (area.width as usize / 4).min(40);
    let mut spans = cursor.map_or_else(Vec::new, |c| cursor_spans(model, c, details));
    // Not twice: `g`'s message names the same command already.
    let told = |c: &CommandState| {
        let target = c.id().map(|id| id.target());
        (view.message.as_deref()).is_some_and(|m| target.is_some_and(|t| m.starts_with(&t)))
    };
    let attention = attention.filter(|c| !told(c));
    spans.extend(attention.and_then(|c| attention_span(c, details)));
    match &view.message {
        Some(message) => spans.push(Span::raw(format!(" {}", one_line(message)))),
        None => {
            let step = format!("step {}", step_label(view.time.step_ms()));
            let keys = KEYS
                .iter()
                .filter(|(_, _, action)| refusal(model, action).is_none());
            // Set, the cursor's own keys come first, and the way back to the end.
            let mut keys: Vec<(&str, &str, Action)> = if cursor.is_some() {
                let (time, rest): (Vec<_>, Vec<_>) = keys.partition(|(_, _, a)| a.moves_in_time());
                time.into_iter()
                    .chain(&[("End", "live", Action::TimeOff)])
                    .chain(rest)
                    .cloned()
                    .collect()
            } else {
                keys.cloned().collect()
            };
            if compact && !model.commands.is_empty() {
                keys.insert(
                    0,
                    if view.focus == crate::app::view::Pane::Commands {
                        ("Enter", "open", Action::Open)
                    } else {
                        ("Esc", "list", Action::Cancel)
                    },
                );
            }
            let keys = keys.into_iter().map(|(key, what, action)| match action {
                Action::TimeStepBack => (key, step.as_str()),
                _ => (key, what),
            });
            spans.extend(keys.into_iter().flat_map(|(key, what)| {
                [
                    Span::styled(format!(" {key} "), style::KEY),
                    Span::raw(format!(" {what} ")),
                ]
            }));
        }
    }
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}

/// ` ⏱ 03:04:07.250 (+0:02.300)  runaway exit SIGKILL `: the moment, in UTC and since the
/// session started, and what was journaled then.
fn cursor_spans(model: &Model, cursor: &CursorContent, details: usize) -> Vec<Span<'static>> {
    let mut spans = vec![Span::styled(
        format!(" {} ", cursor_time(model, cursor.at_ms)),
        CURSOR,
    )];
    if let Some((name, kind)) = cursor.events.first() {
        let (text, color) = match kind {
            // The timeline leaves these out; at the cursor they are what happened.
            EventKind::Output { stream, len, .. } => (
                format!("{} +{len} B", stream.name()),
                style::DIM.fg.unwrap_or_default(),
            ),
            EventKind::Tree { processes } => (
                format::count(processes.len(), "process", "processes"),
                style::DIM.fg.unwrap_or_default(),
            ),
            kind => describe(kind),
        };
        spans.push(Span::raw(format!(" {} ", one_line(name))));
        spans.push(Span::styled(
            kind.name().to_string(),
            Style::new().fg(color),
        ));
        if !text.is_empty() {
            spans.push(Span::raw(format!(
                " {}",
                format::truncate(&one_line(&text), details)
            )));
        }
        if cursor.events.len() > 1 {
            spans.push(Span::styled(
                format!(" +{} more", cursor.events.len() - 1),
                style::DIM,
            ));
        }
        spans.push(Span::raw(" "));
    }
    spans
}

/// An episode that needs the operator now, and the mark that says keys go to a command:
/// hard to miss. A failure or a long run's end is said in its own colour, less loudly.
const ATTENTION: Style = Style::new()
    .fg(Color::Black)
    .bg(Color::Yellow)
    .add_modifier(Modifier::BOLD);
const ATTENTION_FAILED: Style = Style::new().fg(Color::Red).add_modifier(Modifier::BOLD);
const ATTENTION_FINISHED: Style = Style::new().fg(Color::Green);

/// ` 20260102-0304-abcd/02 build: needs input `: the command as `tether stop` names it,
/// its name cut to `room`, and what about it needs the operator.
fn attention_span(command: &CommandState, room: usize) -> Option<Span<'static>> {
    let mark = command.needs_you()?;
    let target = command.id().map(|id| id.target()).unwrap_or_default();
    let name = format::truncate(&one_line(&command.config.name), room.max(8));
    let style = match mark.kind {
        AttentionKind::Failed => ATTENTION_FAILED,
        AttentionKind::Finished => ATTENTION_FINISHED,
        _ => ATTENTION,
    };
    Some(Span::styled(
        format!(" {} {name}: {} ", one_line(&target), mark.words()),
        style,
    ))
}

const ENDED: Style = Style::new().fg(Color::Red);

/// `INPUT → build · Ctrl-a to leave`, and what became of the command if it ended.
fn typing_line<'a>(model: &Model, id: usize, view: &ViewState) -> Line<'a> {
    let (name, state) = model.commands.get(id).map_or_else(
        || ("?".to_string(), Some("gone".to_string())),
        |c| {
            let ended = (!c.status.is_active()).then(|| c.state_words());
            (one_line(&c.config.name), ended)
        },
    );
    let mut spans = vec![
        Span::styled(" INPUT ", ATTENTION),
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
