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
use super::timeline::tone_color;
use super::{Scene, format, style};
use crate::app::action::Action;
use crate::app::update::{OnScreen, refusal_on};
use crate::app::view::{CursorContent, Pane, ViewState};
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
    // The whole stop (TERM, grace, KILL) before its parts: on a narrow bar beside a
    // runaway's name it is the key that stays.
    ("s", "stop", Action::Stop),
    ("t", "TERM", Action::Term),
    ("K", "KILL", Action::Kill),
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
        frame.render_widget(
            Paragraph::new(typing_line(model, id, view, area.width.into())),
            area,
        );
        return;
    }
    // The event's details give way to the keys on a narrow screen.
    let details = (area.width as usize / 4).min(40);
    // A command opened on a small screen hides the list: the way back to it comes first,
    // before the moment, what needs you or a message, which a narrow bar cuts instead.
    let opened = compact && view.focus != Pane::Commands && !model.commands.is_empty();
    let mut spans = if opened {
        hint("Esc", "list").to_vec()
    } else {
        Vec::new()
    };
    spans.extend(cursor.map_or_else(Vec::new, |c| cursor_spans(model, c, details)));
    // Not twice: `g`'s message names the same command already.
    let told = |c: &CommandState| {
        let target = c.id().map(|id| id.target());
        (view.message.as_deref()).is_some_and(|m| target.is_some_and(|t| m.starts_with(&t)))
    };
    let attention = attention.filter(|c| !told(c));
    spans.extend(attention.and_then(|c| attention_span(c, details)));
    let width = usize::from(area.width);
    match &view.message {
        // A message wins over the key hints: it is what just happened.
        Some(message) => {
            let room = width.saturating_sub(spans.iter().map(Span::width).sum());
            spans.push(Span::raw(format!(
                " {}",
                cut_message(&one_line(message), room.saturating_sub(1))
            )));
        }
        None => {
            let step = format!("step {}", step_label(view.time.step_ms()));
            let keys = KEYS.iter().filter(|(_, _, action)| {
                let on = OnScreen {
                    list: &content.list,
                    compact,
                };
                refusal_on(model, on, action).is_none()
            });
            // Set, the cursor's own keys come first, and the way back to the end: what is
            // live now, or the end of a session that has ended.
            let back = match model.mode {
                tether_model::Mode::Recorded(_) => ("End", "end", Action::TimeOff),
                _ => ("End", "live", Action::TimeOff),
            };
            let mut keys: Vec<(&str, &str, Action)> = if cursor.is_some() {
                let (time, rest): (Vec<_>, Vec<_>) = keys.partition(|(_, _, a)| a.moves_in_time());
                time.into_iter()
                    .chain(std::iter::once(&back))
                    .chain(rest)
                    .cloned()
                    .collect()
            } else {
                keys.cloned().collect()
            };
            if compact && !model.commands.is_empty() && !opened {
                keys.insert(0, ("Enter", "open", Action::Open));
            }
            let keys = keys.into_iter().map(|(key, what, action)| match action {
                Action::TimeStepBack => (key, step.as_str()),
                _ => (key, what),
            });
            // As many hints as fit, each whole: a key without its word says nothing.
            let mut left = width.saturating_sub(spans.iter().map(Span::width).sum());
            for (key, what) in keys {
                let hint = hint(key, what);
                let needs: usize = hint.iter().map(Span::width).sum();
                if needs > left {
                    break;
                }
                left -= needs;
                spans.extend(hint);
            }
        }
    }
    // What comes before the message (the moment, what needs you) is cut too on a narrow bar.
    let spans = format::cut_spans(spans, width);
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}

/// ` Esc  list`: a key, highlighted, and what it does.
fn hint(key: &str, what: &str) -> [Span<'static>; 2] {
    [
        Span::styled(format!(" {key} "), style::KEY),
        Span::raw(format!(" {what} ")),
    ]
}

/// `message` cut to `width` columns, ending in `…`. A command it names for the operator to
/// type (in backticks, starting with `tether`) is kept whole, with the clause it ends (from
/// the ` · ` before it) where that fits, and the explanation before it is cut instead:
/// `mywork/03 build: needs inp… · from a shell: `tether stop mywork/03``.
fn cut_message(message: &str, width: usize) -> String {
    if format::text_width(message) <= width {
        return message.to_string();
    }
    let Some(command) = command_to_type(message) else {
        return cut(message, width);
    };
    // The plain cut keeps the command whole anyway.
    if format::text_width(&message[..command.end]) < width {
        return cut(message, width);
    }
    let after = &message[command.end..];
    // What follows the command, if anything, is marked as cut by one `…` after it.
    let tail = if after.is_empty() { "" } else { "…" };
    let clause = message[..command.start]
        .rfind(" · ")
        .unwrap_or(command.start);
    for start in [clause, command.start] {
        let kept = &message[start..command.end];
        let room = width.checked_sub(format::text_width(kept) + format::text_width(tail));
        if let Some(room) = room.filter(|&room| room >= 2) {
            return format!("{}{kept}{tail}", cut(&message[..start], room));
        }
    }
    // Not even the command fits with something before it: its start is better than nothing.
    cut(&message[command.start..], width)
}

/// `text` cut to `width` columns with `…`, with no space left before the `…`.
fn cut(text: &str, width: usize) -> String {
    let cut = format::truncate(text, width);
    match cut.strip_suffix('…') {
        Some(kept) if kept.ends_with(' ') => format!("{}…", kept.trim_end()),
        _ => cut,
    }
}

/// Where `message` names a command for the operator to type: its last backticked text that
/// starts with `tether`, backticks included.
fn command_to_type(message: &str) -> Option<std::ops::Range<usize>> {
    let ticks: Vec<usize> = message.match_indices('`').map(|(at, _)| at).collect();
    ticks
        .chunks_exact(2)
        .map(|pair| pair[0]..pair[1] + 1)
        .rfind(|range| {
            let inside = &message[range.start + 1..range.end - 1];
            inside == "tether" || inside.starts_with("tether ")
        })
}

/// ` ⏱ 03:04:07.250 (+0:02.300)  runaway exit SIGKILL `: the moment, in UTC and since the
/// session started, and what was journaled then.
fn cursor_spans(model: &Model, cursor: &CursorContent, details: usize) -> Vec<Span<'static>> {
    let mut spans = vec![Span::styled(
        format!(" {} ", cursor_time(model, cursor.at_ms)),
        CURSOR,
    )];
    if let Some((name, told)) = &cursor.first {
        let kind = &told.kind;
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
            // As its whole run tells it, as the timeline does.
            _ => (told.text.clone(), tone_color(told.tone)),
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
        if cursor.events > 1 {
            spans.push(Span::styled(
                format!(" +{} more", cursor.events - 1),
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
fn typing_line<'a>(model: &Model, id: usize, view: &ViewState, width: usize) -> Line<'a> {
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
    Line::from(format::cut_spans(spans, width))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_message_ends_in_an_ellipsis() {
        let said = "select a process in the tree first (Tab, ↑ ↓)";
        assert_eq!(cut_message(said, 60), said);
        assert_eq!(cut_message(said, 30), "select a process in the tree…");
        assert_eq!(
            cut_message("`abc` is not a time in the session; write it as…", 32),
            "`abc` is not a time in the sess…"
        );
    }

    #[test]
    fn a_command_to_type_is_kept_whole_and_the_explanation_before_it_cut() {
        let said = "mywork/03 build: needs input (sh read(0) blocked on a pipe) · g: the next \
                    (2 in all) · from a shell: `tether stop mywork/03`";
        let cut = cut_message(said, 60);
        assert!(text_width(&cut) <= 60);
        assert!(cut.starts_with("mywork/03 build: ne…"), "{cut}");
        assert!(
            cut.ends_with("… · from a shell: `tether stop mywork/03`"),
            "{cut}"
        );
        // Narrower, the command alone.
        let cut = cut_message(said, 30);
        assert!(cut.ends_with("…`tether stop mywork/03`"), "{cut}");
        // What follows the command is cut, and said to be.
        let read_only = cut_message(crate::app::update::READ_ONLY, 40);
        assert!(read_only.ends_with("…`tether`…"), "{read_only}");
        assert!(text_width(&read_only) <= 40);
        // Where the plain cut keeps the command, it is the plain cut.
        assert_eq!(
            cut_message("run `tether run` to launch one, it is simple", 30),
            "run `tether run` to launch on…"
        );
        // A quoted word that is no command is cut as any text.
        assert_eq!(cut_message("`zzz` not found here", 10), "`zzz` not…");
        // Narrower than the command itself: its start.
        assert_eq!(cut_message(said, 12), "`tether sto…");
    }

    fn text_width(text: &str) -> usize {
        format::text_width(text)
    }
}
