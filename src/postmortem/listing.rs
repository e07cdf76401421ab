//! The lines `tether sessions` prints, fitted to a width, or whole without one (stdout a file
//! or a pipe): one per session (counts and the first failures, never one word per command),
//! and with `--long` one per command. Every
//! piece that came from outside (ids, names, command lines) is made one safe line first,
//! then measured in columns.

use crate::journal::SessionRecord;
use crate::journal::paths::format_utc;
use crate::model::output::truncate;
use crate::model::output::{column_widths, one_line, text_width};
use crate::model::{CommandState, Model};
use crate::units::{duration_ms, format_size, offset_ms};

use super::tally::{Outcome, Tally};

/// Columns between two cells.
const GAP: usize = 2;
/// The widest an id column gets: a longer id is cut (it is still a prefix that
/// `tether open` takes).
const MAX_ID: usize = 40;
/// The narrowest an id is cut to before anything else gives way.
const MIN_ID: usize = 8;
/// The narrowest the state column of `--long` gets: `left running (12)`, `SIGTERM (timed
/// out)` whole.
const MIN_STATE: usize = 20;

/// What one line says of a session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionLine {
    pub id: String,
    pub started_ms: Option<u64>,
    /// From its start to its last moment; while a command of it runs, to `now_ms`.
    pub duration_ms: Option<u64>,
    pub tally: Tally,
    /// The command directories (`03-build`) of its failures, in order.
    pub failures: Vec<String>,
    pub cut_short: bool,
}

impl SessionLine {
    /// The line for `record`, whose model (replayed) is `model`, read at `now_ms`.
    pub fn of(record: &SessionRecord, model: &Model, now_ms: u64) -> SessionLine {
        let known = record.info.is_some() || !model.commands.is_empty();
        let tally = Tally::of(&model.commands);
        // While one of them runs (the line says so), it lasts until now.
        let ended = if tally.running > 0 {
            Some(now_ms)
        } else {
            (model.commands.iter().zip(&record.commands))
                .filter_map(|(state, journal)| {
                    state.ended_ms.max(journal.events.last().map(|e| e.ts_ms))
                })
                .max()
        };
        let cut_short = record.commands.iter().any(|c| {
            c.damage
                .iter()
                .any(|d| !matches!(d, crate::journal::Damage::MissingResult))
        });
        SessionLine {
            id: one_line(&model.session_id),
            started_ms: record.info.as_ref().map(|i| i.started_ms),
            duration_ms: known.then(|| {
                ended
                    .unwrap_or(model.started_ms)
                    .saturating_sub(model.started_ms)
            }),
            tally,
            failures: model
                .commands
                .iter()
                .zip(&record.commands)
                .filter(|(state, _)| Outcome::of(state).is_failure())
                .map(|(_, journal)| one_line(&journal.id.dir_name()))
                .collect(),
            cut_short,
        }
    }

    fn start_cell(&self) -> String {
        match self.started_ms {
            // To the second: the milliseconds say nothing in a list of sessions.
            Some(ms) => format_utc(ms).chars().take(19).collect(),
            None => "start unknown".into(),
        }
    }

    fn duration_cell(&self) -> String {
        self.duration_ms.map_or_else(|| "-".into(), duration_ms)
    }

    fn counts_cell(&self) -> String {
        let mut words = self.tally.words();
        if self.cut_short {
            words.push_str(", cut short");
        }
        words
    }
}

/// One row per session, each at most `width` columns: the id, start and duration columns
/// as wide as their widest cell; start, then duration, give way when the counts would not
/// fit; the first failures take what is left of each row, then `+N more`. Without a width,
/// every cell whole and every failure named.
pub fn session_rows(lines: &[SessionLine], width: Option<usize>) -> Vec<String> {
    let widest = |cell: &dyn Fn(&SessionLine) -> String| {
        lines
            .iter()
            .map(|l| text_width(&cell(l)))
            .max()
            .unwrap_or(0)
    };
    // Fitted to a width, a long id is cut; unfitted, every cell is whole.
    let mut id_w = widest(&|l| l.id.clone());
    if width.is_some() {
        id_w = id_w.min(MAX_ID);
    }
    let width = width.unwrap_or(usize::MAX);
    let start_w = widest(&SessionLine::start_cell);
    let duration_w = widest(&SessionLine::duration_cell);
    let counts_w = widest(&SessionLine::counts_cell);
    let fixed = |id_w: usize, start: bool, duration: bool| {
        id_w + usize::from(start) * (GAP + start_w)
            + usize::from(duration) * (GAP + duration_w)
            + GAP
            + counts_w
    };
    // The start gives way to the first failure (and its `+N more`) before anything else:
    // which commands failed says more than when the session began.
    let failure_w = lines
        .iter()
        .map(|l| match l.failures.as_slice() {
            [] => 0,
            [one] => GAP + text_width(one),
            [first, rest @ ..] => GAP + text_width(&format!("{first} +{} more", rest.len())),
        })
        .max()
        .unwrap_or(0)
        .min(MAX_ID);
    let show_start = fixed(id_w, true, true) + failure_w <= width;
    let show_duration = fixed(id_w, show_start, true) <= width;
    if fixed(id_w, show_start, show_duration) > width {
        id_w = width.saturating_sub(GAP + counts_w).max(MIN_ID).min(id_w);
    }
    lines
        .iter()
        .map(|line| {
            let mut cells = vec![pad(&truncate(&line.id, id_w), id_w)];
            if show_start {
                cells.push(pad(&line.start_cell(), start_w));
            }
            if show_duration {
                cells.push(pad_left(&line.duration_cell(), duration_w));
            }
            cells.push(pad(&line.counts_cell(), counts_w));
            let mut row = cells.join(&" ".repeat(GAP));
            let room = width.saturating_sub(text_width(&row) + GAP);
            // Unfitted (a pipe), the first failures all the same, not thousands: `--long` and
            // `--json` name them all.
            let cap = if width == usize::MAX {
                UNFITTED_FAILURES
            } else {
                line.failures.len()
            };
            let failures = &line.failures[..line.failures.len().min(cap)];
            let beyond = line.failures.len() - failures.len();
            if let Some(failures) = fitted_list(failures, beyond, room) {
                row.push_str(&" ".repeat(GAP));
                row.push_str(&failures);
            }
            truncate(row.trim_end(), width)
        })
        .collect()
}

/// The most failures a session's line names where nothing fits it to a width.
const UNFITTED_FAILURES: usize = 20;

/// As many of `items` as fit in `room` columns, then `+N more` for the rest and the
/// `beyond` not given; `None` when there is none, or not even the first fits.
fn fitted_list(items: &[String], beyond: usize, room: usize) -> Option<String> {
    let mut best = None;
    let mut shown = String::new();
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            shown.push(' ');
        }
        shown.push_str(item);
        let left = items.len() - i - 1 + beyond;
        let candidate = match left {
            0 => shown.clone(),
            n => format!("{shown} +{n} more"),
        };
        if text_width(&candidate) > room {
            break;
        }
        best = Some(candidate);
    }
    best
}

/// One command's cells in `--long`: id, start, duration, state, CPU, peak, command line.
pub type CommandCells = [String; 7];

/// The cells of each command of `model`, whose journal ids are `ids`, read at `now_ms` (the
/// duration of one that runs: so far); a command the launcher spoke of that never ran (after
/// those) has no id: its name stands there.
pub fn command_cells_of(model: &Model, ids: &[String], now_ms: u64) -> Vec<CommandCells> {
    model
        .commands
        .iter()
        .enumerate()
        .map(|(i, command)| {
            let id = ids.get(i).unwrap_or(&command.config.name);
            command_cells(model, command, id, now_ms)
        })
        .collect()
}

/// One table per session (a header row, then a row per command), each row at most `width`
/// columns: id, start (from the session's start), duration, state, CPU time, peak memory,
/// then the command line cut to what is left. Peak memory, CPU, start and duration give
/// way, in that order, when the command line would get no room. The columns are as wide as
/// the widest cell of any session: the tables of a `tether sessions --long` line up.
/// Without a width, every cell whole.
pub fn command_tables(sessions: &[Vec<CommandCells>], width: Option<usize>) -> Vec<Vec<String>> {
    const HEADER: [&str; 7] = ["#", "START", "DURATION", "STATE", "CPU", "PEAK", "COMMAND"];
    // Room the command line needs before a column is dropped for it.
    const MIN_TEXT: usize = 12;
    let rows: Vec<&CommandCells> = sessions.iter().flatten().collect();
    let mut widths = column_widths(&rows, &HEADER, 6);
    if width.is_some() {
        widths[0] = widths[0].min(MAX_ID);
    }
    let width = width.unwrap_or(usize::MAX);
    // A journal from before tether recorded the cost has none to show.
    let mut shown = [true; 6];
    for column in [4, 5] {
        shown[column] = rows.iter().any(|r| r[column] != "-");
    }
    let used = |shown: &[bool; 6], widths: &[usize]| -> usize {
        (0..6).filter(|&i| shown[i]).map(|i| widths[i] + GAP).sum()
    };
    // Peak, CPU, start, duration: the least telling first.
    for column in [5, 4, 1, 2] {
        if used(&shown, &widths) + MIN_TEXT <= width {
            break;
        }
        shown[column] = false;
    }
    if used(&shown, &widths) + MIN_TEXT > width {
        widths[0] = widths[0]
            .saturating_sub(used(&shown, &widths) + MIN_TEXT - width)
            .max(MIN_ID.min(widths[0]));
    }
    // One long state (`exit 0, kept 3 until its session owner exited`) does not take the
    // command text's room from every row: past half the line for the text, the state
    // column narrows to what most states need, and the long one is cut.
    let widest_text = rows.iter().map(|r| text_width(&r[6])).max().unwrap_or(0);
    let wanted = widest_text.min(width / 2);
    let room = width.saturating_sub(used(&shown, &widths));
    if room < wanted {
        widths[3] = widths[3]
            .saturating_sub(wanted - room)
            .max(MIN_STATE.min(widths[3]));
    }
    let row = |cells: &CommandCells| {
        let mut out: Vec<String> = Vec::new();
        for i in (0..6).filter(|&i| shown[i]) {
            let cell = truncate(&cells[i], widths[i]);
            // Times and sizes read best right-aligned.
            out.push(match i {
                1 | 2 | 4 | 5 => pad_left(&cell, widths[i]),
                _ => pad(&cell, widths[i]),
            });
        }
        let mut line = out.join(&" ".repeat(GAP));
        let room = width.saturating_sub(text_width(&line) + GAP);
        line.push_str(&" ".repeat(GAP));
        line.push_str(&truncate(&cells[6], room));
        truncate(line.trim_end(), width)
    };
    let header = HEADER.map(String::from);
    sessions
        .iter()
        .map(|cells| {
            std::iter::once(row(&header))
                .chain(cells.iter().map(row))
                .collect()
        })
        .collect()
}

fn command_cells(model: &Model, command: &CommandState, id: &str, now_ms: u64) -> CommandCells {
    let mut state = command.outcome_words();
    if let Some(words) = command.leftovers.and_then(|l| l.words()) {
        state.push_str(", ");
        state.push_str(&words);
    }
    [
        one_line(id),
        command.started_ms.map_or_else(
            || "-".into(),
            |ms| offset_ms(ms.saturating_sub(model.started_ms)),
        ),
        (command.runtime_ms(now_ms)).map_or_else(|| "-".into(), duration_ms),
        one_line(&state),
        command.cpu_ms.map_or_else(|| "-".into(), duration_ms),
        command
            .peak_rss_bytes
            .map_or_else(|| "-".into(), format_size),
        one_line(&if command.is_setup() {
            format!("(set-up) {}", command.command_line())
        } else {
            command.command_line()
        }),
    ]
}

fn pad(cell: &str, width: usize) -> String {
    format!(
        "{cell}{}",
        " ".repeat(width.saturating_sub(text_width(cell)))
    )
}

fn pad_left(cell: &str, width: usize) -> String {
    format!(
        "{}{cell}",
        " ".repeat(width.saturating_sub(text_width(cell)))
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One command table, for one session.
    fn command_rows(model: &Model, ids: &[String], width: Option<usize>) -> Vec<String> {
        command_tables(&[command_cells_of(model, ids, 0)], width)
            .pop()
            .unwrap_or_default()
    }

    fn line(id: &str, failures: usize) -> SessionLine {
        SessionLine {
            id: id.into(),
            started_ms: Some(1_767_323_045_000),
            duration_ms: Some(754_000),
            tally: Tally {
                total: 1000,
                running: 2,
                ok: 1000 - 2 - failures,
                failed: failures,
                killed: 0,
                stopped: 0,
                blocked: 0,
            },
            failures: (1..=failures).map(|i| format!("{i:02}-test")).collect(),
            cut_short: false,
        }
    }

    /// Unfitted (a pipe), a line names its first twenty failures and counts the rest.
    #[test]
    fn an_unfitted_line_names_twenty_failures_then_how_many_more() {
        let rows = session_rows(&[line("agent-1", 40)], None);
        let expected: Vec<String> = (1..=20).map(|i| format!("{i:02}-test")).collect();
        assert!(
            rows[0].ends_with(&format!("{} +20 more", expected.join(" "))),
            "{}",
            rows[0]
        );
    }

    #[test]
    fn failures_fill_the_row_then_say_how_many_more() {
        let rows = session_rows(&[line("agent-1", 40)], Some(120));
        let row = &rows[0];
        assert!(text_width(row) <= 120, "{row}");
        assert!(
            row.starts_with("agent-1  2026-01-02 03:04:05  12m34s  1000 cmds: 958 ok, 40 failed, 2 running  01-test 02-test"),
            "{row}"
        );
        assert!(row.ends_with(" more"), "{row}");
        let more: usize = row
            .rsplit('+')
            .next()
            .unwrap()
            .trim_end_matches(" more")
            .parse()
            .unwrap();
        let named = row.matches("-test").count();
        assert_eq!(named + more, 40, "{row}");
    }

    /// Printed to a file or a pipe (no width): the start, the first twenty failures and a
    /// long id whole, nothing cut.
    #[test]
    fn without_a_width_nothing_is_cut_or_dropped() {
        let id = "session-with-a-name-longer-than-forty-columns-which-is-kept";
        let row = &session_rows(&[line(id, 20)], None)[0];
        assert!(
            row.starts_with(&format!("{id}  2026-01-02 03:04:05  12m34s  ")),
            "{row}"
        );
        assert!(row.ends_with("19-test 20-test"), "{row}");
        assert_eq!(row.matches("-test").count(), 20, "{row}");
        assert!(!row.contains('…') && !row.contains("more"), "{row}");
    }

    #[test]
    fn narrow_rows_drop_the_start_then_the_duration() {
        let lines = [line("20261130T064143Z-12", 3), line("x", 0)];
        for width in [20, 40, 60, 80, 100] {
            for row in session_rows(&lines, Some(width)) {
                assert!(text_width(&row) <= width, "{width}: {row}");
            }
        }
        let at_60 = session_rows(&lines, Some(60));
        assert!(!at_60[0].contains("2026-"), "{}", at_60[0]);
        assert!(at_60[0].contains("1000 cmds"), "{}", at_60[0]);
    }

    #[test]
    fn one_long_state_leaves_the_command_text_its_room() {
        use crate::config::CommandConfig;
        use crate::model::{CommandState, KeptLeftovers, Mode, Model, Status};
        use crate::protocol::{CommandSpec, ExitStatus, LeftoversEnd};
        let command = |text: &str| {
            let mut c = CommandState::new(CommandConfig::new("c", CommandSpec::Shell(text.into())));
            c.status = Status::Exited(ExitStatus {
                code: Some(0),
                signal: None,
                core_dumped: false,
            });
            c
        };
        let mut kept =
            command("python3 -m http.server 8765 --bind 127.0.0.1 --directory /srv/www/site");
        kept.leftovers = Some(KeptLeftovers {
            kept: 3,
            end: Some(LeftoversEnd::SessionOwnerExited),
            until_ms: Some(90_000),
        });
        let model = Model {
            session_id: "s".into(),
            session_dir: "/s".into(),
            started_ms: 0,
            commands: vec![
                command("cargo test --workspace -- --nocapture --test-threads 1"),
                kept,
            ],
            mode: Mode::Recorded(None),
        };
        let ids = ["01-cargo".to_string(), "02-python3".to_string()];
        let lines = command_rows(&model, &ids, Some(120));
        let header = &lines[0];
        let text_at = header.find("COMMAND").expect("a command column");
        assert!(
            120 - text_at >= 60,
            "the command text gets half the line:\n{}",
            lines.join("\n")
        );
        assert!(lines[1].contains("cargo test --workspace -- --nocapture --test-threads 1"));
        assert!(lines[2].contains("exit 0, kept 3"), "{}", lines[2]);
        assert!(lines.iter().all(|l| text_width(l) <= 120));
    }

    #[test]
    fn outside_text_is_one_safe_line() {
        let mut evil = line("a\x1b[2Jb", 1);
        evil.failures = vec![one_line("01-x\x1b]0;t\x07")];
        evil.id = one_line(&evil.id);
        let rows = session_rows(&[evil], Some(200));
        assert!(!rows[0].chars().any(|c| c.is_control()), "{:?}", rows[0]);
    }
}
