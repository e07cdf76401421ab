//! The table `tether ps` prints: each column as wide as what it shows now (not the longest
//! state ever seen), the command text last, taking what is left of the width. Every cell
//! from outside (ids, names, states, command lines) is made one safe line first, then
//! measured in columns.

use tether_model::output::truncate;
use tether_model::output::{column_widths, one_line, text_width};

/// The columns, in the order shown; which read right-aligned.
const HEADER: [&str; 12] = [
    "ID", "NAME", "BROKER", "PID", "STATE", "RUNTIME", "CPU%", "RSS", "PROCS", "CONTAIN",
    "CONTROL", "COMMAND",
];
const RIGHT: [bool; 11] = [
    false, false, true, true, false, true, true, true, true, false, false,
];
const COMMAND: usize = 11;
/// A name longer than this is cut: the command text says the rest.
const MAX_NAME: usize = 24;
/// The command text keeps at least this much, else a column to its left goes.
const MIN_COMMAND: usize = 20;
/// What goes first when the command would get less: where it is held, by which broker,
/// how many processes, how it is reached.
const DROP_ORDER: [usize; 4] = [9, 2, 8, 10];

/// One command's cells, as `ps` shows them (the command text last).
pub type PsCells = [String; 12];

/// The table's lines, the header first, each at most `width` columns (a line whose fixed
/// columns alone are wider is not cut: the id and the state are never lost); without a
/// width, every cell whole (stdout is a file or a pipe).
pub fn ps_lines(rows: &[PsCells], width: Option<usize>) -> Vec<String> {
    let rows: Vec<PsCells> = rows
        .iter()
        .map(|r| r.clone().map(|c| one_line(&c)))
        .collect();
    let mut widths = column_widths(&rows, &HEADER, COMMAND);
    let width = match width {
        Some(width) => {
            widths[1] = widths[1].min(MAX_NAME);
            width
        }
        None => usize::MAX,
    };
    let mut shown = [true; COMMAND];
    let used = |shown: &[bool; COMMAND]| -> usize {
        (0..COMMAND)
            .filter(|&i| shown[i])
            .map(|i| widths[i] + 1)
            .sum()
    };
    let widest_command = rows
        .iter()
        .map(|r| text_width(&r[COMMAND]))
        .max()
        .unwrap_or(0);
    for column in DROP_ORDER {
        let room = width.saturating_sub(used(&shown) + 1);
        if room >= MIN_COMMAND.min(widest_command) {
            break;
        }
        shown[column] = false;
    }
    // The command takes what is left, or (on a very narrow terminal) its minimum.
    let room = width
        .saturating_sub(used(&shown) + 1)
        .max(MIN_COMMAND.min(widest_command));
    widths[1] = widths[1].max(text_width(HEADER[1]));
    let line = |cells: &[String; 12]| {
        let mut out: Vec<String> = (0..COMMAND)
            .filter(|&i| shown[i])
            .map(|i| {
                let cell = truncate(&cells[i], widths[i]);
                let pad = " ".repeat(widths[i].saturating_sub(text_width(&cell)));
                if RIGHT[i] {
                    format!("{pad}{cell}")
                } else {
                    format!("{cell}{pad}")
                }
            })
            .collect();
        out.push(truncate(&cells[COMMAND], room));
        out.join(" ").trim_end().to_string()
    };
    let header = HEADER.map(String::from);
    std::iter::once(line(&header))
        .chain(rows.iter().map(line))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: &str, state: &str, command: &str) -> PsCells {
        [
            id, "srv", "4242", "4245", state, "1m02s", "0.3", "18.0M", "2", "cgroup", "socket",
            command,
        ]
        .map(String::from)
    }

    #[test]
    fn columns_are_as_wide_as_what_they_show_and_the_command_takes_the_rest() {
        let rows = [
            row("agent/01", "running", "python3 -m http.server 8765"),
            row("agent/02", "left running (3)", "npm run dev (cd /repo)"),
        ];
        let lines = ps_lines(&rows, Some(120));
        assert_eq!(
            lines[0],
            "ID       NAME BROKER  PID STATE            RUNTIME CPU%   RSS PROCS CONTAIN CONTROL COMMAND"
        );
        assert!(
            lines[1].ends_with("socket  python3 -m http.server 8765"),
            "{}",
            lines[1]
        );
        assert!(lines.iter().all(|l| text_width(l) <= 120));
    }

    #[test]
    fn a_narrow_terminal_drops_columns_before_the_command_goes_under_its_minimum() {
        let rows = [row("agent/01", "running", &"x".repeat(100))];
        let wide = ps_lines(&rows, Some(200));
        assert!(wide[0].contains("CONTAIN") && wide[0].contains("BROKER"));
        let narrow = ps_lines(&rows, Some(80));
        assert!(!narrow[0].contains("CONTAIN"), "{}", narrow[0]);
        assert!(narrow.iter().all(|l| text_width(l) <= 80), "{narrow:?}");
        assert!(
            narrow[1].contains(&"x".repeat(MIN_COMMAND - 1)),
            "{}",
            narrow[1]
        );
    }

    #[test]
    fn outside_text_is_one_safe_line() {
        let rows = [row("a/01", "running", "echo \x1b[2Jhi\nthere")];
        let lines = ps_lines(&rows, Some(120));
        assert!(!lines[1].chars().any(|c| c.is_control()), "{:?}", lines[1]);
    }

    /// Printed to a file or a pipe (no width): no column dropped, no name or command cut.
    #[test]
    fn without_a_width_every_cell_is_whole() {
        let name = "a-very-long-command-name-indeed-longer-than-the-cap";
        let command = format!("echo '{}'", "y".repeat(300));
        let mut long = row("agent/01", "running", &command);
        long[1] = name.to_string();
        let lines = ps_lines(&[long], None);
        assert!(lines[0].contains("CONTAIN") && lines[0].contains("BROKER"));
        assert!(lines[1].contains(name), "{}", lines[1]);
        assert!(lines[1].ends_with(&command), "{}", lines[1]);
    }
}
