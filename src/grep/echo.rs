//! An agent's echo of its commands' output, counted once.
//!
//! Under `tether agent` the agent is a command of its session too (`01-claude`), and its own
//! terminal shows what its commands printed: a line one command wrote is in that command's
//! stream and again, once or more (the agent draws a tool's result, then redraws it), in the
//! agent's. `tether grep` searches the agent last in its session and folds a hit of the
//! agent's stream into a command's hit when the two show the same text (what a terminal
//! shows of each, the agent's decoration before it, `⎿`, `│`, spaces, set aside) and the
//! agent wrote it while that command ran or within [`ECHO_AFTER`] of its end.

use std::collections::HashMap;
use std::path::Path;

use crate::journal::CommandRecord;
use crate::protocol::{CommandSpec, EventKind, Stream};

/// How long after a command ends the agent may still be showing its output for the first
/// time: it reads the result when the command exits, then draws it.
pub const ECHO_AFTER_MS: u64 = 5_000;

/// Whether the command journaled in `dir` is the agent of a `tether agent` session.
pub fn is_agent(dir: &Path) -> bool {
    crate::journal::reader::read_request(dir).is_some_and(|request| match &request.command {
        CommandSpec::Argv(argv) => crate::config::naming::agent_argv(argv).is_some(),
        CommandSpec::Shell(_) => false,
    })
}

/// When a command ran, from its journal: its first event to its last, wall clock.
pub fn lifetime(dir: &Path) -> Option<(u64, u64)> {
    let record = CommandRecord::load(dir);
    let first = record.events.first()?.ts_ms;
    let last = record.events.last()?.ts_ms;
    Some((first, last))
}

/// When each piece of a stream was written, from the journal's `output` events: the
/// time of the line that starts at an offset.
#[derive(Debug, Default)]
pub struct WriteTimes {
    /// (offset, ts_ms), by offset.
    pieces: Vec<(u64, u64)>,
}

impl WriteTimes {
    pub fn load(dir: &Path, stream: Stream) -> WriteTimes {
        let record = CommandRecord::load(dir);
        let mut pieces: Vec<(u64, u64)> = record
            .events
            .iter()
            .filter_map(|e| match e.kind {
                EventKind::Output {
                    stream: s, offset, ..
                } if s == stream => Some((offset, e.ts_ms)),
                _ => None,
            })
            .collect();
        pieces.sort_unstable();
        WriteTimes { pieces }
    }

    /// When the byte at `offset` was written; `None` when the journal does not say.
    pub fn at(&self, offset: u64) -> Option<u64> {
        let after = self.pieces.partition_point(|&(o, _)| o <= offset);
        after.checked_sub(1).map(|i| self.pieces[i].1)
    }
}

/// The selected lines of a session's commands, by what they show, with when each could be
/// echoed.
#[derive(Debug, Default)]
pub struct Echoes {
    seen: HashMap<String, Vec<(u64, u64)>>,
    /// Agent lines folded so far.
    pub folded: u64,
}

/// At most this many distinct texts are remembered per session: past it, a line is still
/// shown once per stream it is in, as before folding.
const MAX_REMEMBERED: usize = 100_000;

impl Echoes {
    /// A command's selected line, showing `text`, written while it ran over `window`
    /// (`None`: unknown, any time).
    pub fn remember(&mut self, text: &str, window: Option<(u64, u64)>) {
        let core = core(text);
        if core.is_empty() || self.seen.len() >= MAX_REMEMBERED && !self.seen.contains_key(core) {
            return;
        }
        let (start, end) = window.unwrap_or((0, u64::MAX - ECHO_AFTER_MS));
        self.seen
            .entry(core.to_string())
            .or_default()
            .push((start, end + ECHO_AFTER_MS));
    }

    /// Whether the agent's line showing `text`, written at `at`, echoes a remembered line
    /// (and is then counted as folded).
    pub fn folds(&mut self, text: &str, at: Option<u64>) -> bool {
        let echoed = self.seen.get(core(text)).is_some_and(|windows| {
            at.is_none_or(|at| windows.iter().any(|&(from, to)| (from..=to).contains(&at)))
        });
        self.folded += u64::from(echoed);
        echoed
    }
}

/// The text without the decoration an agent's terminal puts before a tool's output (`⎿`,
/// `│`, `●`, indentation) nor trailing blanks.
fn core(text: &str) -> &str {
    text.trim_start_matches(|c: char| c.is_whitespace() || !(c.is_ascii() || c.is_alphanumeric()))
        .trim_end()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_echo_is_the_same_text_while_the_command_ran_or_just_after() {
        let mut echoes = Echoes::default();
        echoes.remember("test result: ok. 12 passed", Some((1_000, 2_000)));
        assert!(echoes.folds("  ⎿  test result: ok. 12 passed  ", Some(2_500)));
        assert!(echoes.folds("│ test result: ok. 12 passed", Some(1_000)));
        assert!(
            !echoes.folds(
                "test result: ok. 12 passed",
                Some(2_000 + ECHO_AFTER_MS + 1)
            ),
            "too late: the agent printed it again on its own"
        );
        assert!(!echoes.folds("test result: ok. 13 passed", Some(1_500)));
        assert!(
            !echoes.folds("test result", Some(1_500)),
            "a part is not an echo"
        );
        assert_eq!(echoes.folded, 2);
    }

    #[test]
    fn blank_lines_are_never_folded() {
        let mut echoes = Echoes::default();
        echoes.remember("   ", None);
        assert!(!echoes.folds("", None));
    }

    #[test]
    fn write_times_find_the_piece_holding_an_offset() {
        let times = WriteTimes {
            pieces: vec![(0, 10), (100, 20), (250, 30)],
        };
        assert_eq!(times.at(0), Some(10));
        assert_eq!(times.at(99), Some(10));
        assert_eq!(times.at(100), Some(20));
        assert_eq!(times.at(1_000), Some(30));
        assert_eq!(WriteTimes::default().at(5), None);
    }
}
