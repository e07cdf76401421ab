//! An agent's echo of its commands' output, counted once.
//!
//! Under `tether agent` the agent is a command of its session too (`01-claude`), and its own
//! terminal shows what its commands printed: a line one command wrote is in that command's
//! stream and again in the agent's, each time the agent draws it. Claude Code (2.1.197, in
//! a terminal) draws the tool's result when it comes and again when the next answer is
//! drawn: one line, three hits. And a line of its terminal stream is rarely one row: a
//! redraw moves the cursor between rows without a line break, so the echo is one part of a
//! long line. `tether grep` searches the agent last in its session and folds a selected
//! line of the agent's stream when each of its rows where the pattern matches is an echo:
//! with the lines the commands of the session selected (as a terminal shows each, leading
//! decoration such as `⎿` set aside, 4 characters or more) taken out where they stand
//! whole, nothing but decoration is left, or the row is the call the agent drew
//! (`● Bash(WORDS)`, WORDS in the command's words); and the agent wrote it from
//! [`ECHO_BEFORE_MS`] before that command started to [`ECHO_AFTER_MS`] after it ended.
//! A line of the agent's that only draws again rows it drew a moment before (a redraw) is
//! folded too ([`Echoes::redraws`]). Under `-v` nothing is folded.

use std::collections::HashMap;
use std::path::Path;

use regex::bytes::Regex;

use crate::journal::CommandRecord;
use crate::protocol::CommandSpec;

/// How long after the agent last drew a row the same row is a redraw of it, not a new hit:
/// a terminal program redraws at frames well apart from that (a spinner's, a second's).
pub const REDRAW_WITHIN_MS: u64 = 5_000;
/// How long after a command ends the agent may still be showing its output for the first
/// time: it reads the result when the command exits, then draws it.
pub const ECHO_AFTER_MS: u64 = 5_000;
/// How long before a command starts the agent may show it: it draws the call it is about
/// to make (Claude Code's `● Bash(echo …)`, some 200 ms before the command's broker
/// started, as recorded), which holds the same words when the pattern is in the command.
pub const ECHO_BEFORE_MS: u64 = 2_000;

/// A command's words as an agent draws its call: its argv joined by spaces, or its shell
/// line.
pub fn call_words(dir: &Path) -> Option<String> {
    crate::journal::reader::read_request(dir).map(|request| match request.command {
        CommandSpec::Argv(argv) => argv.join(" "),
        CommandSpec::Shell(line) => line,
    })
}

/// When a command ran, from its journal: its first event to its last, wall clock.
pub fn lifetime(dir: &Path) -> Option<(u64, u64)> {
    let record = CommandRecord::load(dir);
    let first = record.events.first()?.ts_ms;
    let last = record.events.last()?.ts_ms;
    Some((first, last))
}

/// What a terminal prints of `bytes`, every piece of it, for comparing texts: escape
/// sequences dropped, a cursor move to the right (how a drawing program spaces words) a
/// space, any other cursor move, a carriage return or a control a line break (the text
/// went elsewhere on the screen), runs of blanks one space. Not what a terminal would
/// show in the end (a redraw overwrites itself), but all it was given to show.
pub fn printed(bytes: &[u8]) -> String {
    let mut kept = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == 0x1b {
            let (len, shown) = escape(&bytes[i..]);
            kept.extend_from_slice(shown);
            i += len;
            continue;
        }
        kept.push(match bytes[i] {
            b'\t' => b' ',
            byte if byte < 0x20 || byte == 0x7f => b'\n',
            byte => byte,
        });
        i += 1;
    }
    let text = String::from_utf8_lossy(&kept);
    text.split('\n')
        .map(|row| row.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The length of the escape sequence `bytes` starts with (the attention detector's reading
/// of it; one cut short, the rest), and what it stands for in [`printed`]'s text.
fn escape(bytes: &[u8]) -> (usize, &'static [u8]) {
    let end = tether_core::attention::shown::escape_length(bytes).unwrap_or(bytes.len());
    let shown: &[u8] = match (bytes.get(1), bytes.get(end - 1)) {
        // CSI: colours are nothing, a move along the row a space, any other move a new row.
        (Some(b'['), Some(b'm')) => b"",
        (Some(b'['), Some(b'C' | b'G' | b'`')) => b" ",
        (Some(b'['), _) => b"\n",
        _ => b"",
    };
    (end, shown)
}

/// The selected lines of a session's commands, by what they show, with when each could be
/// echoed.
#[derive(Debug, Default)]
pub struct Echoes {
    seen: HashMap<String, Vec<(u64, u64)>>,
    /// The session's commands' words, with when the agent may draw them.
    calls: Vec<(String, (u64, u64))>,
    /// Agent lines folded so far.
    pub folded: u64,
    /// The agent's rows shown so far, each with when it was last drawn (see
    /// [`Echoes::redraws`]).
    shown: HashMap<String, Option<u64>>,
    /// Agent lines folded as redraws so far.
    pub redrawn: u64,
}

/// At most this many distinct texts are remembered per session: past it, a line is still
/// shown once per stream it is in, as before folding.
const MAX_REMEMBERED: usize = 100_000;

/// A text shorter than this (visible characters) is not remembered: `ok`, `yes`, `1` stand
/// in too many of an agent's own sentences.
const MIN_REMEMBERED: usize = 4;

impl Echoes {
    /// A command's selected line, showing `text`, written while it ran over `window`
    /// (`None`: unknown, any time).
    pub fn remember(&mut self, text: &str, window: Option<(u64, u64)>) {
        // Each piece a terminal would put somewhere else (after a `\r`, a cursor move).
        for piece in text.split('\n').map(core) {
            if piece.chars().filter(|c| !c.is_whitespace()).count() < MIN_REMEMBERED
                || self.seen.len() >= MAX_REMEMBERED && !self.seen.contains_key(piece)
            {
                continue;
            }
            self.seen
                .entry(piece.to_string())
                .or_default()
                .push(echo_window(window));
        }
    }

    /// A command of the session, as the agent draws the call it makes: its words (argv
    /// joined by spaces, or its shell line), run over `window` (`None`: any time).
    pub fn remember_call(&mut self, words: String, window: Option<(u64, u64)>) {
        self.calls.push((words, echo_window(window)));
    }

    /// Whether the agent's line showing `text`, written over `at`, only draws again what it
    /// showed a moment before: a terminal program redraws its screen (Gemini CLI's box
    /// around a call came 102 times for one `Password:` prompt). Every row of it where
    /// `regex` matches was in a line of the agent's drawn at most [`REDRAW_WITHIN_MS`]
    /// before (or when either time is unknown), each such drawing renewing the row's time;
    /// a row under [`MIN_REMEMBERED`] visible characters is never a redraw. The same row
    /// drawn again later (a second prompt) is a hit again. A folded line is counted.
    pub fn redraws(&mut self, text: &str, at: Option<(u64, u64)>, regex: &Regex) -> bool {
        let rows: Vec<&str> = (text.split('\n'))
            .filter(|row| regex.is_match(row.as_bytes()))
            .map(core)
            .collect();
        let short =
            |row: &&str| row.chars().filter(|c| !c.is_whitespace()).count() < MIN_REMEMBERED;
        if rows.is_empty() || rows.iter().any(short) {
            return false;
        }
        let recent = |row: &&str| match (self.shown.get(*row), at) {
            (Some(&Some(last)), Some((first, _))) => first <= last + REDRAW_WITHIN_MS,
            (Some(_), _) => true,
            (None, _) => false,
        };
        let redrawn = rows.iter().all(recent);
        for row in rows {
            if self.shown.len() < MAX_REMEMBERED || self.shown.contains_key(row) {
                self.shown.insert(row.to_string(), at.map(|(_, last)| last));
            }
        }
        self.redrawn += u64::from(redrawn);
        redrawn
    }

    /// Whether the agent's line showing `text`, written over `at` (first to last byte), is
    /// only an echo: every row of it (a line of an agent's terminal is often a whole
    /// redraw, cursor moves between its rows and no line break) where `regex` matches is
    /// an echo row, and there is one. A row is an echo row when, with the remembered texts
    /// it holds (of a command that ran around `at`) taken out where they stand whole (not
    /// inside a word), nothing but decoration is left (the agent said nothing more), or
    /// when it is the call the agent drew (`● Bash(WORDS)`, WORDS in a command's words). A
    /// folded line is counted.
    pub fn folds(&mut self, text: &str, at: Option<(u64, u64)>, regex: &Regex) -> bool {
        let around = |windows: &[(u64, u64)]| {
            windows
                .iter()
                .any(|&(from, to)| at.is_none_or(|(first, last)| first <= to && from <= last))
        };
        let mut held: Vec<&str> = self
            .seen
            .iter()
            .filter(|(seen, windows)| text.contains(seen.as_str()) && around(windows))
            .map(|(seen, _)| seen.as_str())
            .collect();
        // The longest first: a text that holds a shorter one goes whole.
        held.sort_by_key(|seen| std::cmp::Reverse(seen.len()));
        let calls: Vec<&str> = self
            .calls
            .iter()
            .filter(|(_, window)| around(std::slice::from_ref(window)))
            .map(|(words, _)| words.as_str())
            .collect();
        let mut rows = text
            .split('\n')
            .filter(|row| regex.is_match(row.as_bytes()))
            .peekable();
        let echoed = rows.peek().is_some()
            && rows.all(|row| only_echoes(row, &held) || is_call(row, &calls));
        self.folded += u64::from(echoed);
        echoed
    }
}

/// When the agent may echo what a command did over `window` (`None`: unknown, any time).
fn echo_window(window: Option<(u64, u64)>) -> (u64, u64) {
    let (start, end) = window.unwrap_or((0, u64::MAX - ECHO_AFTER_MS));
    (start.saturating_sub(ECHO_BEFORE_MS), end + ECHO_AFTER_MS)
}

/// Whether `row` holds one of `held` standing whole (the characters either side of it are
/// not alphanumeric) and, those taken out, nothing alphanumeric is left.
fn only_echoes(row: &str, held: &[&str]) -> bool {
    let mut rest = row.to_string();
    let mut found = false;
    for seen in held {
        let mut kept = String::with_capacity(rest.len());
        let mut from = 0;
        while let Some(at) = rest[from..].find(seen).map(|at| from + at) {
            let end = at + seen.len();
            let alnum = |c: Option<char>| c.is_some_and(char::is_alphanumeric);
            if alnum(rest[..at].chars().next_back()) || alnum(rest[end..].chars().next()) {
                kept.push_str(&rest[from..end]);
            } else {
                kept.push_str(&rest[from..at]);
                kept.push(' ');
                found = true;
            }
            from = end;
        }
        kept.push_str(&rest[from..]);
        rest = kept;
    }
    found && !rest.chars().any(char::is_alphanumeric)
}

/// Whether `row` is a call as an agent draws it, `Tool(WORDS)` after its decoration, with
/// WORDS (at least [`MIN_REMEMBERED`] characters) in one of `calls`.
fn is_call(row: &str, calls: &[&str]) -> bool {
    let row = core(row);
    let Some((tool, rest)) = row.split_once('(') else {
        return false;
    };
    let Some(words) = rest.strip_suffix(')') else {
        return false;
    };
    !tool.is_empty()
        && tool.chars().all(char::is_alphanumeric)
        && words.trim().chars().count() >= MIN_REMEMBERED
        && calls.iter().any(|call| call.contains(words.trim()))
}

/// The text without the blanks and the decoration an agent's terminal puts before a
/// tool's output (`⎿`, `│`, `●`) nor trailing blanks.
fn core(text: &str) -> &str {
    text.trim_start_matches(|c: char| c.is_whitespace() || !(c.is_ascii() || c.is_alphanumeric()))
        .trim_end()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn regex(pattern: &str) -> Regex {
        crate::grep::search::build(pattern, false).unwrap()
    }

    #[test]
    fn an_echo_is_the_same_text_while_the_command_ran_or_just_after() {
        let passed = regex("passed");
        let mut echoes = Echoes::default();
        echoes.remember("test result: ok. 12 passed", Some((1_000, 2_000)));
        assert!(echoes.folds(
            "  ⎿  test result: ok. 12 passed  ",
            Some((2_500, 2_500)),
            &passed
        ));
        assert!(echoes.folds(
            "│ test result: ok. 12 passed",
            Some((1_000, 1_000)),
            &passed
        ));
        assert!(
            !echoes.folds(
                "test result: ok. 12 passed",
                Some((2_000 + ECHO_AFTER_MS + 1, 2_000 + ECHO_AFTER_MS + 1)),
                &passed
            ),
            "too late: the agent printed it again on its own"
        );
        assert!(!echoes.folds("test result: ok. 13 passed", Some((1_500, 1_500)), &passed));
        assert!(
            !echoes.folds("12 passed", Some((1_500, 1_500)), &passed),
            "a part is not an echo"
        );
        assert_eq!(echoes.folded, 2);
    }

    /// A redraw of Claude Code's terminal (as recorded: its rows joined by cursor moves,
    /// which [`printed`] makes line breaks): the echo is some rows of it.
    #[test]
    fn an_echo_inside_a_redraw_folds_unless_the_agent_said_more() {
        let pattern = regex("UNIQUE|second");
        let mut echoes = Echoes::default();
        echoes.remember("UNIQUE-LINE-42", Some((1_000, 1_010)));
        echoes.remember("second-line-77", Some((1_000, 1_010)));
        echoes.remember_call(
            "/bin/bash -c eval 'echo UNIQUE-LINE-42; echo second-line-77'".into(),
            Some((1_000, 1_010)),
        );
        // The call it draws holds the same words: a call of the session's command.
        let redraw = "● Bash(echo UNIQUE-LINE-42; echo second-line-77)\n⎿  UNIQUE-LINE-42 second-line-77\n● All done.";
        assert!(echoes.folds(redraw, Some((900, 1_200)), &pattern));
        let result_only = "⎿  UNIQUE-LINE-42   second-line-77\n● All done.";
        assert!(echoes.folds(result_only, Some((900, 1_200)), &pattern));
        let and_more = "⎿  UNIQUE-LINE-42\n● the UNIQUE thing is done";
        assert!(!echoes.folds(and_more, Some((900, 1_200)), &pattern));
        let other_call = "● Bash(echo UNIQUE-LINE-42 > notes)";
        assert!(!echoes.folds(other_call, Some((900, 1_200)), &pattern));
        assert_eq!(echoes.folded, 2);
    }

    /// A command printed `warnings`; the agent's sentence holding the word is its own.
    #[test]
    fn a_remembered_text_inside_the_agents_own_words_does_not_fold() {
        let warnings = regex("warnings");
        let mut echoes = Echoes::default();
        echoes.remember("warnings", None);
        echoes.remember("3 warnings", None);
        assert!(!echoes.folds("I fixed the warnings in main.rs", None, &warnings));
        assert!(!echoes.folds("● 3 warnings, all fixed", None, &warnings));
        assert!(echoes.folds("  ⎿  3 warnings", None, &warnings));
        // Inside a word is not where it stands whole.
        let mut echoes = Echoes::default();
        echoes.remember("warn", None);
        assert!(!echoes.folds("⎿ warnings: warn", None, &regex("warn")));
        assert!(echoes.folds("⎿ warn: warn", None, &regex("warn")));
    }

    #[test]
    fn a_short_text_is_not_remembered() {
        let ok = regex("ok");
        let mut echoes = Echoes::default();
        echoes.remember("ok", None);
        echoes.remember("⎿ ok", None);
        assert!(!echoes.folds("ok", None, &ok));
        assert!(!echoes.folds("⎿ ok", None, &ok));
    }

    /// Bytes as Claude Code 2.1.197 drew a tool's result in its terminal (recorded): rows
    /// joined by cursor moves, words spaced by them.
    #[test]
    fn printed_keeps_every_piece_of_a_redraw() {
        let bytes = b"\x1b[2C\x1b[3A\r\x1b[38;5;246m\xe2\x97\x8f\x1b[3G\x1b[39m\x1b[1mBash\x1b[22m(echo UNIQUE-LINE-42;\x1b[29Gecho\x1b[34Gsecond-line-77)\r\n";
        assert_eq!(
            printed(bytes),
            "\n\n● Bash(echo UNIQUE-LINE-42; echo second-line-77)\n\n"
        );
        assert_eq!(printed(b"\x1b]0;title\x07a \t  b"), "a b");
    }

    #[test]
    fn a_line_begun_before_the_command_and_ended_during_it_is_in_its_window() {
        let unique = regex("UNIQUE");
        let mut echoes = Echoes::default();
        echoes.remember("UNIQUE-LINE-42", Some((10_000, 10_010)));
        echoes.remember_call("sh -c echo UNIQUE-LINE-42".into(), Some((10_000, 10_010)));
        assert!(echoes.folds("spinner\n⎿ UNIQUE-LINE-42", Some((9_000, 10_100)), &unique));
        // The call, drawn just before the command started.
        assert!(echoes.folds("● Bash(echo UNIQUE-LINE-42)", Some((9_800, 9_810)), &unique));
        assert!(!echoes.folds("⎿ UNIQUE-LINE-42", Some((100, 200)), &unique));
        assert!(!echoes.folds("● Bash(echo UNIQUE-LINE-42)", Some((100, 200)), &unique));
    }

    #[test]
    fn a_row_drawn_again_a_moment_later_is_a_redraw_and_an_hour_later_a_hit() {
        let mut echoes = Echoes::default();
        let re = regex("Password");
        let box_row = "│ Shell python3 -c input('Password: ') │";
        assert!(
            !echoes.redraws(box_row, Some((1_000, 1_010)), &re),
            "first drawn"
        );
        for frame in 1..50 {
            let at = 1_000 + frame * 200;
            assert!(echoes.redraws(box_row, Some((at, at + 10)), &re));
        }
        assert_eq!(echoes.redrawn, 49);
        // A second prompt an hour later is a hit again, and its redraws fold.
        assert!(!echoes.redraws(box_row, Some((3_600_000, 3_600_010)), &re));
        assert!(echoes.redraws(box_row, Some((3_600_100, 3_600_110)), &re));
        // A short row (`ok`) is never a redraw.
        let ok = regex("ok");
        assert!(!echoes.redraws("ok", Some((1, 1)), &ok));
        assert!(!echoes.redraws("ok", Some((2, 2)), &ok));
    }

    /// Escape sequences are read as the attention detector reads them: a character set's
    /// final byte is no text, and an OSC broken off by another sequence ends there.
    #[test]
    fn escapes_are_skipped_whole() {
        assert_eq!(printed(b"\x1b(Bok"), "ok");
        assert!(printed(b"\x1b]0;t\x1b[31mRed\x07").starts_with("Red"));
        assert_eq!(printed(b"a\x1b[2Cb"), "a b");
    }

    #[test]
    fn blank_lines_are_never_folded() {
        let mut echoes = Echoes::default();
        echoes.remember("   ", None);
        assert!(!echoes.folds("", None, &regex("^")));
    }
}
