//! The timeline: the selected command's events with their times, and a strip of every
//! command over the session with markers for signals, timeouts and exits.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};

use super::{format, pane_block, style};
use crate::app::layout;
use crate::app::view::{Pane, ViewState};
use crate::model::output::one_line;
use crate::model::{CommandState, Marker, Model, TimelineEntry};
use crate::protocol::{EventKind, ExitStatus};

pub fn draw(frame: &mut Frame, area: Rect, model: &Model, view: &ViewState, now_ms: u64) {
    let block = pane_block("Timeline", view.focus == Pane::Timeline);
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
    let entries = &command.timeline;
    let line = |e: &TimelineEntry| entry_line(command, e, model.started_ms);
    let mut lines: Vec<Line> = if view.wrap {
        let width = events_area.width as usize;
        let back = view.timeline_back.min(entries.len().saturating_sub(1));
        wrapped(entries.len() - back, entries.len(), height, |i| {
            format::wrap_spans(&line(&entries[i]).spans, width)
        })
    } else {
        let back = view.timeline_back.min(entries.len().saturating_sub(height));
        let end = entries.len() - back;
        entries[end.saturating_sub(height)..end]
            .iter()
            .map(line)
            .collect()
    };
    if let Some(notice) = notice {
        lines.resize(height, Line::raw(""));
        lines.push(notice);
    }
    frame.render_widget(Paragraph::new(lines), events_area);
    if strip_rows > 0 {
        draw_strip(frame, strip_area, model, view, now_ms);
    }
}

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

fn entry_line(command: &CommandState, entry: &TimelineEntry, session_start: u64) -> Line<'static> {
    let time = Span::styled(
        format::offset_ms(entry.ts_ms.saturating_sub(session_start)),
        style::DIM,
    );
    let (text, color) = match &entry.kind {
        EventKind::OrphanReaped {
            pid,
            status,
            escaped,
        } => orphan(command, *pid, *status, *escaped),
        kind => describe(kind),
    };
    Line::from(vec![
        time,
        Span::raw(" "),
        Span::styled(entry.kind.name().to_string(), Style::new().fg(color)),
        Span::raw(" "),
        Span::raw(one_line(&text)),
    ])
}

/// The details of an event, in a few words, and the colour of its kind.
pub fn describe(kind: &EventKind) -> (String, Color) {
    match kind {
        EventKind::BrokerStarted { broker_pid, .. } => {
            (format!("broker {broker_pid}"), Color::DarkGray)
        }
        EventKind::Spawned { pid, .. } => (format!("pid {pid}"), Color::Green),
        EventKind::SpawnError { message, .. } => (message.clone(), Color::Red),
        EventKind::Terminal { streams } => {
            let names: Vec<&str> = crate::protocol::Stream::BOTH
                .into_iter()
                .filter(|s| streams.has(*s))
                .map(|s| s.name())
                .collect();
            let size = streams.size;
            (
                format!("{} {}×{}", names.join(", "), size.cols, size.rows),
                Color::DarkGray,
            )
        }
        EventKind::TerminalUnavailable { message, .. } => (message.clone(), Color::Yellow),
        EventKind::Input { bytes, dropped } => (
            match dropped {
                0 => format!("{bytes} B typed"),
                d => format!("{bytes} B typed, {d} B not delivered"),
            },
            if *dropped == 0 {
                Color::DarkGray
            } else {
                Color::Yellow
            },
        ),
        EventKind::Resize { size } => (format!("{}×{}", size.cols, size.rows), Color::DarkGray),
        EventKind::OutputCapped { message, .. } => (message.clone(), Color::Yellow),
        EventKind::EventsCapped { message, .. } => (message.clone(), Color::Yellow),
        EventKind::ResponseTimeout { silent_ms } => (
            format!("silent {}", format::duration_ms(*silent_ms)),
            Color::Yellow,
        ),
        EventKind::SignalSent {
            signal,
            origin,
            targets,
            ..
        } => (
            format!(
                "SIG{signal} by {} → {} process{}",
                snake(origin),
                targets.len(),
                if targets.len() == 1 { "" } else { "es" }
            ),
            Color::Magenta,
        ),
        EventKind::HardKill { after_ms } => (
            format!("after {}", format::duration_ms(*after_ms)),
            Color::Red,
        ),
        EventKind::OrphanReaped { pid, status, .. } => (
            format!("pid {pid} {}", crate::model::command::exit_label(*status)),
            Color::Magenta,
        ),
        EventKind::ParentLost { cause } => (snake(cause), Color::Red),
        EventKind::ParentUnresponsive { silent_ms } => (
            format!("silent {}", format::duration_ms(*silent_ms)),
            Color::Yellow,
        ),
        // The kind already says `exit`: `exit code 0`, `exit SIGKILL`.
        EventKind::Exit { status, .. } => (
            match status.code {
                Some(code) => format!("code {code}"),
                None => crate::model::command::exit_label(*status),
            },
            if status.code == Some(0) {
                Color::Blue
            } else {
                Color::Red
            },
        ),
        EventKind::Close {
            stdout_bytes,
            stderr_bytes,
        } => (
            format!("stdout {stdout_bytes} B, stderr {stderr_bytes} B"),
            Color::DarkGray,
        ),
        EventKind::BrokerFailure { message, .. } => (message.clone(), Color::Red),
        EventKind::ControlRefused { uid, pid, .. } => {
            (format!("uid {uid} (pid {pid}) refused"), Color::Yellow)
        }
        EventKind::ControlUnavailable { message, .. } => (message.clone(), Color::Yellow),
        EventKind::Containment { mode, path, reason } => (
            // After the kind's own name: `containment cgroup PATH`, `containment procfs (WHY)`.
            crate::protocol::containment_line(*mode, path.as_deref(), reason.as_deref())
                .trim_start_matches("containment: ")
                .to_string(),
            match mode {
                crate::protocol::ContainmentMode::Cgroup => Color::DarkGray,
                crate::protocol::ContainmentMode::Procfs => Color::Yellow,
            },
        ),
        EventKind::LimitUnavailable { message, .. } => (message.clone(), Color::Yellow),
        EventKind::ControlError { message, .. } => (message.clone(), Color::Red),
        EventKind::ControlAck { request, .. } => (request.clone(), Color::DarkGray),
        EventKind::Output { .. } | EventKind::Tree { .. } | EventKind::Pong => {
            (String::new(), Color::DarkGray)
        }
    }
}

/// A reaped orphan: which process (its pid and command line), and whether it had escaped
/// the command's group (what the `orphans:N` badge counts) or was only re-parented to the
/// broker when its parent ended.
fn orphan(
    command: &CommandState,
    pid: i32,
    status: ExitStatus,
    escaped: Option<bool>,
) -> (String, Color) {
    let how = crate::model::command::exit_label(status);
    let argv = command
        .seen_process(pid)
        .map(|p| p.argv.join(" "))
        .filter(|argv| !argv.is_empty())
        .map_or_else(String::new, |argv| format!(": {argv}"));
    if command.reaped_escapee(pid, escaped) {
        (format!("pid {pid} escaped, {how}{argv}"), Color::Magenta)
    } else {
        (
            format!("pid {pid} re-parented, {how}{argv}"),
            Color::DarkGray,
        )
    }
}

/// How an enum is written in the journal (`stdin_eof`, `parent_lost`).
fn snake(value: &impl serde::Serialize) -> String {
    serde_json::to_value(value)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

fn draw_strip(frame: &mut Frame, area: Rect, model: &Model, view: &ViewState, now_ms: u64) {
    let [rule, rows] = Layout::vertical([Constraint::Length(1), Constraint::Min(0)]).areas(area);
    frame.render_widget(
        Block::new()
            .borders(Borders::TOP)
            .border_style(style::BORDER)
            .title(Span::styled(" all commands ", style::DIM)),
        rule,
    );
    let label_width = 10usize;
    let bar_width = (rows.width as usize).saturating_sub(label_width + 1).max(1);
    let span_ms = now_ms.saturating_sub(model.started_ms).max(1);
    let column = |ts: u64| -> usize {
        (((ts.saturating_sub(model.started_ms)) as f64 / span_ms as f64) * (bar_width - 1) as f64)
            .round() as usize
    };
    let lines: Vec<Line> = model
        .commands
        .iter()
        .enumerate()
        .skip(
            view.selected
                .saturating_sub((rows.height as usize).max(1) - 1),
        )
        .take(rows.height as usize)
        .map(|(i, c)| {
            // Padded by columns, not characters, so every bar starts in the same column
            // whatever the name holds.
            let label = format::fit(&one_line(&c.config.name), label_width);
            let label_style = if i == view.selected {
                style::SELECTED
            } else {
                Style::new()
            };
            let mut spans = vec![Span::styled(label, label_style), Span::raw(" ")];
            spans.extend(bar(c, bar_width, now_ms, &column));
            Line::from(spans)
        })
        .collect();
    frame.render_widget(Paragraph::new(lines), rows);
}

/// One command's bar: `─` while it ran, `▪` where it printed, and markers.
fn bar(
    c: &CommandState,
    width: usize,
    now_ms: u64,
    column: &dyn Fn(u64) -> usize,
) -> Vec<Span<'static>> {
    let mut cells: Vec<(char, Color)> = vec![(' ', Color::Reset); width];
    if let Some(start) = c.started_ms {
        let end = c.ended_ms.unwrap_or(now_ms);
        for cell in cells
            .iter_mut()
            .take(column(end).min(width - 1) + 1)
            .skip(column(start))
        {
            *cell = ('─', Color::DarkGray);
        }
    }
    for ts in &c.activity {
        if let Some(cell) = cells.get_mut(column(*ts)) {
            *cell = ('▪', Color::Green);
        }
    }
    // Markers that fall in one column would hide each other: the end of the run keeps its
    // column, and each other marker takes the nearest free one before it (else after it), so
    // a watchdog's `T` and its signal stay in sight next to the exit they caused.
    let mut marked = vec![false; width];
    for rank in [
        Marker::Exit,
        Marker::Failure,
        Marker::Timeout,
        Marker::Signal,
    ] {
        for (ts, marker) in c.markers.iter().filter(|(_, m)| *m == rank) {
            let mark = match marker {
                Marker::Signal => ('!', Color::Magenta),
                Marker::Timeout => ('T', Color::Yellow),
                Marker::Exit => ('|', Color::Blue),
                Marker::Failure => ('x', Color::Red),
            };
            let at = column(*ts).min(width - 1);
            let free = (0..=at).rev().chain(at + 1..width).find(|&i| !marked[i]);
            if let Some(i) = free {
                marked[i] = true;
                cells[i] = mark;
            }
        }
    }
    let mut spans: Vec<(String, Color)> = Vec::new();
    for (ch, color) in cells {
        match spans.last_mut() {
            Some((text, c)) if *c == color => text.push(ch),
            _ => spans.push((ch.to_string(), color)),
        }
    }
    spans
        .into_iter()
        .map(|(text, color)| Span::styled(text, Style::new().fg(color)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{CapReason, CappedKind, Stream};

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
    fn markers_in_one_column_all_stay_in_sight() {
        let mut c = CommandState::new(crate::config::CommandConfig::new(
            "silent",
            crate::protocol::CommandSpec::Shell("sleep 9".into()),
        ));
        c.begin_run("/nonexistent".into(), 0);
        c.ended_ms = Some(5_010);
        c.markers = vec![
            (5_000, Marker::Timeout),
            (5_001, Marker::Signal),
            (5_010, Marker::Exit),
        ];
        let column = |ts: u64| (ts / 1000) as usize;
        let text: String = bar(&c, 8, 6_000, &column)
            .iter()
            .map(|s| s.content.as_ref())
            .collect();
        assert_eq!(text, "───!T|  ");
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
