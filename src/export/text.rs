//! `--format text`: a report a person pastes into a bug. A summary table of the commands,
//! then each command's timeline (in the TUI timeline's words) and the last lines of its
//! stderr. Everything a command could have put in it (names, command lines, messages, its
//! output) is sanitized: no escape sequence or control character gets through.

use std::fmt::Write as _;

use super::session::{CommandExport, SessionExport};
use super::summary::{CommandSummary, iso_utc};
use crate::journal::reader::stream_tail;
use crate::model::describe::describe_in;
use crate::model::output::{one_line, plain_text, render_line};
use crate::protocol::{EventKind, Stream};
use crate::units::{duration_ms, format_size, offset_ms};

/// How many lines of each command's stderr the report ends with.
pub const STDERR_TAIL_LINES: usize = 20;

/// The most of a stderr log read to find its last lines: a log of long lines shows what
/// fits in it.
const TAIL_WINDOW: u64 = 256 * 1024;

/// The longest output line shown; the rest is cut.
const MAX_LINE_CHARS: usize = 400;

pub fn report(session: &SessionExport) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "tether session {}", one_line(&session.id));
    let mut about = format!(
        "started {}, ended {} ({})",
        iso_utc(session.started_ms),
        iso_utc(session.ended_ms),
        duration_ms(session.ended_ms - session.started_ms)
    );
    if let Some(info) = &session.info {
        let _ = write!(
            about,
            ", on {} by {}, tether {}",
            info.host, info.user, info.tether_version
        );
    }
    let _ = writeln!(out, "{}", one_line(&about));
    let _ = writeln!(
        out,
        "directory {}",
        one_line(&session.dir.to_string_lossy())
    );
    for damage in &session.damage {
        let _ = writeln!(out, "! {}", one_line(damage));
    }
    let cut: Vec<String> = session.cut_short().map(|c| c.id.dir_name()).collect();
    if !cut.is_empty() {
        let _ = writeln!(
            out,
            "! journal cut short for {}: what is missing is said below",
            one_line(&cut.join(", "))
        );
    }
    out.push('\n');
    out.push_str(&summary_table(session));
    for command in &session.commands {
        out.push('\n');
        command_section(session, command, &mut out);
    }
    for never in &session.not_started {
        let _ = writeln!(
            out,
            "\n== {} (never ran): {}\n   {}  {}",
            one_line(never.name()),
            one_line(&never.state.command_line()),
            offset_ms(never.since_ms.saturating_sub(session.started_ms)),
            one_line(&never.words())
        );
    }
    out
}

/// One row per command, in columns as wide as their widest cell.
fn summary_table(session: &SessionExport) -> String {
    let header = [
        "COMMAND", "STATE", "EXIT", "DURATION", "CPU", "PEAK RSS", "STDOUT", "STDERR", "BADGES",
    ];
    let mut rows: Vec<[String; 9]> = vec![header.map(String::from)];
    for command in &session.commands {
        let s = CommandSummary::of(command);
        let bytes = |b: super::summary::StreamBytes| {
            if b.stored < b.written {
                format!(
                    "{} ({} kept)",
                    format_size(b.written),
                    format_size(b.stored)
                )
            } else {
                format_size(b.written)
            }
        };
        let mut badges: Vec<String> = command.badges.list().iter().map(|b| b.label()).collect();
        if command.cut_short {
            badges.push("cut-short".into());
        }
        rows.push([
            one_line(&command.id.dir_name()),
            // The words every view names the ending with (`stopped (SIGKILL)`, `exit 3`,
            // `failed to start`), the exit status among them, and the launcher's last word
            // (`gave up after 3 restarts`).
            one_line(&command.state.outcome_words()),
            // The status itself, which some words do not carry (`finished`, `lost`,
            // `over budget (max_cpu)`).
            match (s.exit_code, &s.signal_name) {
                (Some(code), _) => code.to_string(),
                (None, Some(signal)) => signal.clone(),
                (None, None) => "-".into(),
            },
            s.duration_ms.map_or_else(|| "-".into(), duration_ms),
            s.cpu_ms.map_or_else(|| "-".into(), duration_ms),
            s.peak_rss_bytes.map_or_else(|| "-".into(), format_size),
            bytes(s.stdout),
            bytes(s.stderr),
            badges.join(" "),
        ]);
    }
    for never in &session.not_started {
        let mut row = ["-"; 9].map(String::from);
        row[0] = one_line(never.name());
        row[1] = one_line(&never.words());
        // No badges.
        row[8] = String::new();
        rows.push(row);
    }
    let widths: Vec<usize> = (0..header.len())
        .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for row in rows {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect();
        let _ = writeln!(out, "{}", cells.join("  ").trim_end());
    }
    out
}

fn command_section(session: &SessionExport, command: &CommandExport, out: &mut String) {
    let _ = writeln!(
        out,
        "== {} ({}{}): {}",
        one_line(&command.id.dir_name()),
        one_line(command.name()),
        match command.state.run {
            run @ 2.. => format!(", run {run}"),
            _ => String::new(),
        },
        one_line(&command.state.command_line())
    );
    let _ = writeln!(
        out,
        "   ended: {}",
        one_line(&command.state.outcome_words())
    );
    for damage in &command.damage {
        let _ = writeln!(out, "   ! {}", one_line(damage));
    }
    if let Some(notice) = command
        .state
        .notice
        .as_ref()
        .filter(|_| command.damage.is_empty())
    {
        let _ = writeln!(out, "   ! {}", one_line(notice));
    }
    for event in &command.events {
        if matches!(
            event.kind,
            EventKind::Output { .. } | EventKind::Tree { .. } | EventKind::Pong
        ) {
            continue;
        }
        let (text, _) = describe_in(&command.state, &event.kind);
        let _ = writeln!(
            out,
            "   {}  {} {}",
            offset_ms(event.ts_ms.saturating_sub(session.started_ms)),
            event.kind.name(),
            one_line(&text)
        );
    }
    if command.cut_short {
        let _ = writeln!(out, "   (the journal ends here: it was cut short)");
    }
    match stream_tail(&command.dir, Stream::Stderr, TAIL_WINDOW) {
        Ok((bytes, _)) => {
            let lines = last_lines(&bytes, STDERR_TAIL_LINES);
            let _ = match lines.len() {
                0 => Ok(()),
                1 => writeln!(out, "   stderr, last line:"),
                n => writeln!(out, "   stderr, last {n} lines:"),
            };
            for line in lines {
                let _ = writeln!(out, "   | {line}");
            }
        }
        Err(err) => {
            let _ = writeln!(
                out,
                "   ! cannot read {}: {err}",
                Stream::Stderr.file_name()
            );
        }
    }
}

/// The last `count` lines of `bytes` (a stderr log's end), each as a terminal would show
/// it (colours and escapes dropped, `\r` applied) and cut to [`MAX_LINE_CHARS`].
fn last_lines(bytes: &[u8], count: usize) -> Vec<String> {
    let mut lines: Vec<&[u8]> = bytes.split(|&b| b == b'\n').collect();
    if lines.last().is_some_and(|l| l.is_empty()) {
        lines.pop();
    }
    let start = lines.len().saturating_sub(count);
    lines[start..]
        .iter()
        .map(|line| super::cut(&one_line(&plain_text(&render_line(line))), MAX_LINE_CHARS))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_lines_are_whole_and_clean() {
        let log = b"first\n\x1b[31mred\x1b[0m\r\nbell\x07 \x1b]0;title\x07x\nlast";
        assert_eq!(last_lines(log, 10), ["first", "red", "bell x", "last"]);
        assert_eq!(last_lines(log, 2), ["bell x", "last"]);
        assert_eq!(last_lines(b"", 3), Vec::<String>::new());
        let long = "é".repeat(MAX_LINE_CHARS * 2);
        let shown = &last_lines(long.as_bytes(), 1)[0];
        assert_eq!(shown.chars().count(), MAX_LINE_CHARS);
        assert!(shown.ends_with('…'));
    }
}
