//! The timeline: the selected command's events with their times (with the time cursor set,
//! its entry marked and the next ones dimmed), above the all-commands strip (`strip`).

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::{Scene, format, pane_block, style};
use crate::app::layout;
use crate::app::view::{Pane, ToldEvent};
use tether_model::Mode;
use tether_model::describe::{Tone, describe_in};
use tether_model::output::one_line;
use tether_model::plan::Plan;
use tether_protocol::protocol::EventKind;

pub fn draw(frame: &mut Frame, area: Rect, Scene(model, view, content): Scene) {
    let block = pane_block("Timeline", view.focus == Pane::Timeline, area.width);
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let strip_rows = layout::strip_rows(inner.height, model.commands.len());
    let [events_area, strip_area] =
        Layout::vertical([Constraint::Min(1), Constraint::Length(strip_rows)]).areas(inner);

    let Some(command) = model.commands.get(view.selected) else {
        return;
    };
    // A notice (a fallback taken, a broker that could not start) stays in sight.
    let mut height = events_area.height as usize;
    let notice = command.notice.as_ref().filter(|_| height > 1).map(|text| {
        height -= 1;
        Line::styled(format!("! {}", one_line(text)), Style::new().fg(Color::Red))
    });
    // What the launcher waits for, or why it will not start it (again). A dependency the
    // operator starts is started with `r` where the launcher is this front end's own.
    let plan = command.plan.as_ref().filter(|_| height > 1).map(|plan| {
        height -= 1;
        let label = match plan {
            Plan::Waiting {
                on,
                not_started: true,
            } if matches!(model.mode, Mode::Live) => {
                format!("waiting for {on} (not started: press r on it)")
            }
            _ => plan.label(content.now_ms),
        };
        Line::styled(format!("· {}", one_line(&label)), style::state(command))
    });
    // At the time cursor the model holds the entries up to it; the next few follow,
    // dimmed, so that `]` and `}` show where they lead, told as their whole run tells them.
    let cursor = content.cursor.as_ref();
    let past = &command.timeline;
    let later: &[ToldEvent] = cursor.map_or(&[], |c| &c.later);
    let line = |i: usize| {
        let clock = Clock {
            session_start: model.session_start_of(command),
            absolute: view.absolute_times,
        };
        let line = match past.get(i) {
            Some(entry) => {
                let (text, tone) = describe_in(command, &entry.kind);
                entry_line(entry.ts_ms, &entry.kind, &text, tone, clock)
            }
            None => {
                let told = &later[i - past.len()];
                entry_line(told.ts_ms, &told.kind, &told.text, told.tone, clock)
            }
        };
        match cursor {
            None => line,
            Some(_) => at_cursor(line, i + 1 == past.len(), i >= past.len()),
        }
    };
    let shown_end = past.len() + later.len().min(height / 3);
    let mut lines: Vec<Line> = if view.wrap {
        let width = events_area.width as usize;
        let back = view.timeline_back.min(shown_end.saturating_sub(1));
        wrapped(shown_end - back, shown_end, height, |i| {
            format::wrap_spans(&line(i).spans, width)
        })
    } else {
        let back = view.timeline_back.min(shown_end.saturating_sub(height));
        let end = shown_end - back;
        // An entry wider than the pane ends in `…`, so that a cut reads as one (`w` wraps).
        let width = events_area.width as usize;
        (end.saturating_sub(height)..end)
            .map(|i| Line::from(format::cut_spans(line(i).spans, width)))
            .collect()
    };
    let below: Vec<Line> = plan.into_iter().chain(notice).collect();
    if !below.is_empty() {
        lines.resize(height, Line::raw(""));
        lines.extend(below);
    }
    frame.render_widget(Paragraph::new(lines), events_area);
    if strip_rows > 0 {
        super::strip::draw(frame, strip_area, Scene(model, view, content));
    }
}

/// An entry's line with the time cursor set: `▶` on the cursor's entry (the last one at or
/// before it), the entries after it dimmed.
fn at_cursor(line: Line<'static>, current: bool, later: bool) -> Line<'static> {
    let gutter = if current {
        Span::styled("▶ ", CURSOR)
    } else {
        Span::raw("  ")
    };
    let spans = line.spans.into_iter().map(|span| match later {
        true => Span::styled(span.content, style::DIM),
        false => span,
    });
    Line::from(std::iter::once(gutter).chain(spans).collect::<Vec<_>>())
}

pub const CURSOR: Style = Style::new().fg(Color::Cyan);

/// The rows of wrapped entries that fill `height` rows and end with entry `end - 1`: as
/// many entries before it as fit whole, and once the first entry is in, the entries after
/// `end` that fit below. `rows(i)` wraps entry `i`.
fn wrapped(
    end: usize,
    count: usize,
    height: usize,
    rows: impl Fn(usize) -> Vec<Vec<Span<'static>>>,
) -> Vec<Line<'static>> {
    let mut picked: std::collections::VecDeque<Vec<Vec<Span<'static>>>> = Default::default();
    let mut used = 0;
    let mut start = end;
    while start > 0 {
        let entry = rows(start - 1);
        if used > 0 && used + entry.len() > height {
            break;
        }
        used += entry.len();
        start -= 1;
        picked.push_front(entry);
    }
    let mut next = end;
    while start == 0 && next < count {
        let entry = rows(next);
        if used + entry.len() > height {
            break;
        }
        used += entry.len();
        next += 1;
        picked.push_back(entry);
    }
    let mut lines: Vec<Line<'static>> = picked.into_iter().flatten().map(Line::from).collect();
    // An entry longer than the whole pane shows its beginning.
    lines.truncate(height);
    lines
}

/// How the timeline writes a moment: from the session's start, or on the wall clock.
#[derive(Clone, Copy)]
struct Clock {
    session_start: u64,
    absolute: bool,
}

impl Clock {
    fn show(self, ts_ms: u64) -> String {
        if self.absolute {
            // `2026-01-02 03:04:05.678`: the time of day, as wide as an offset of an hour.
            tether_os::journal::paths::format_utc(ts_ms)
                .get(11..)
                .map(str::to_string)
                .unwrap_or_default()
        } else {
            format::offset_ms(ts_ms.saturating_sub(self.session_start))
        }
    }
}

fn entry_line(ts_ms: u64, kind: &EventKind, text: &str, tone: Tone, clock: Clock) -> Line<'static> {
    let time = Span::styled(clock.show(ts_ms), style::DIM);
    let color = tone_color(tone);
    Line::from(vec![
        time,
        Span::raw(" "),
        Span::styled(kind.name().to_string(), Style::new().fg(color)),
        Span::raw(" "),
        Span::raw(one_line(text)),
    ])
}

/// The colour the timeline gives each tone of event.
pub fn tone_color(tone: Tone) -> Color {
    match tone {
        Tone::Quiet => Color::DarkGray,
        Tone::Started => Color::Green,
        Tone::Success => Color::Blue,
        Tone::Warning => Color::Yellow,
        Tone::Signal => Color::Magenta,
        Tone::Error => Color::Red,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tether_protocol::protocol::{CapReason, CappedKind, ExitStatus, Stream};

    /// An event's details in the model's words, and the colour the timeline gives its tone.
    fn describe(kind: &EventKind) -> (String, Color) {
        let (text, tone) = tether_model::describe::describe(kind);
        (text, tone_color(tone))
    }

    #[test]
    fn wrapped_entries_fill_the_pane_from_the_end_or_from_the_top() {
        // Entry i takes i + 1 rows, each row saying which entry it is.
        let rows = |i: usize| vec![vec![Span::raw(i.to_string())]; i + 1];
        let shown = |end, height| -> String {
            wrapped(end, 4, height, rows)
                .iter()
                .map(|l| l.spans[0].content.to_string())
                .collect()
        };
        // 0, 11, 222, 3333: the last entries that fit end the pane.
        assert_eq!(shown(4, 4), "3333");
        assert_eq!(shown(4, 7), "2223333");
        assert_eq!(shown(4, 8), "2223333", "only whole entries");
        assert_eq!(shown(3, 6), "011222");
        // Scrolled back to the top: what follows fills the rest.
        assert_eq!(shown(1, 6), "011222");
        // Longer than the pane: its beginning.
        assert_eq!(shown(4, 2), "33");
    }

    #[test]
    fn an_exit_says_exit_once() {
        let (text, _) = describe(&EventKind::Exit {
            pid: 1,
            status: ExitStatus {
                code: Some(0),
                signal: None,
                core_dumped: false,
            },
        });
        assert_eq!(text, "code 0");
    }

    #[test]
    fn events_capped_stands_out_as_output_capped_does() {
        let output = describe(&EventKind::OutputCapped {
            stream: Stream::Stdout,
            reason: CapReason::Limit,
            stored: 1024,
            message: "stdout.log reached its cap".into(),
        });
        let (text, color) = describe(&EventKind::EventsCapped {
            kind_capped: CappedKind::Tree,
            budget: 65536,
            message: "events.jsonl no longer records the process tree".into(),
        });
        assert_eq!(text, "events.jsonl no longer records the process tree");
        assert_eq!(color, output.1);
        assert_ne!(color, Color::DarkGray);
    }
}
