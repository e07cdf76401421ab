//! Telling the operator, from a front end (the TUI, `tether watch`), that a command needs
//! them: which `attention` marks are news ([`AttentionNews`]), the words of the notice
//! ([`Notice`]), and the two ways it goes out: a terminal notification written to the front
//! end's own terminal ([`terminal`]) and a desktop one over D-Bus ([`desktop`]).
//!
//! A front end tells only what happened while it was open (a watch lists sessions of the
//! past hour: their marks are history, not news), only when its window may not be looked at
//! (the terminal said it lost focus, or never says), and at most one notice every
//! [`MIN_GAP_MS`]: what arrives meanwhile is told together, as the latest and a count.
//! The broker's `[notify] command` is the way that needs no front end at all.

pub mod desktop;
pub mod terminal;

use std::collections::HashMap;
use std::ffi::OsString;

use tether_model::command::AttentionMark;
use tether_model::output::one_line;
use tether_model::{CommandState, Model};

/// The shortest time between two notices.
pub const MIN_GAP_MS: u64 = 2_000;
/// The most characters of a notice's title or body: a notification is a glance.
const MAX_CHARS: usize = 200;

/// One thing to tell: a title that names the command as `SESSION/NN` (what `tether stop`
/// takes) and what about it needs the operator, and a body with its name and what was seen.
/// Both are one line of text with no control character: the detail may come from a
/// command's argv, and a notice is written inside an escape sequence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    pub title: String,
    pub body: String,
}

impl Notice {
    /// `every-kind/02 needs input`, `fail: sh read(0) blocked; tether stop every-kind/02`.
    pub fn of(command: &CommandState, mark: &AttentionMark) -> Notice {
        let target = command
            .id()
            .map_or_else(|| command.config.name.clone(), |id| id.target());
        let mut body = command.config.name.clone();
        if !mark.detail.is_empty() {
            body.push_str(": ");
            body.push_str(&mark.detail);
        }
        if mark.kind.is_episode() {
            body.push_str(&format!("; tether stop {target}"));
        }
        Notice {
            title: clean(&format!("{target} {}", mark.words())),
            body: clean(&body),
        }
    }

    /// The latest of several notices, saying how many more there were.
    fn with_more(mut self, more: usize) -> Notice {
        if more > 0 {
            self.title = clean(&format!("{} (+{more} more)", self.title));
        }
        self
    }
}

/// One line, controls and bidi marks replaced, at most [`MAX_CHARS`].
pub fn clean(text: &str) -> String {
    let line = one_line(text);
    match line.char_indices().nth(MAX_CHARS) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line,
    }
}

/// Which attention marks are news to the operator, and when to tell them.
#[derive(Debug, Default)]
pub struct AttentionNews {
    /// Marks older than this were there before the front end opened.
    since_ms: u64,
    /// Each command's latest mark already told (or seen on screen), by journal directory:
    /// rows come and go (a watch dismisses them), directories stay. Keyed by the bytes of
    /// the path (a `Path` hashes component by component, several times slower).
    told: HashMap<OsString, u64>,
    /// New marks not told yet: the latest, and how many.
    pending: Option<(Notice, u64, usize)>,
    last_told_ms: Option<u64>,
    /// Whether the front end's window is looked at, as the terminal's focus reports say.
    /// False until a report comes: many terminals (and tmux without `focus-events`) never
    /// send one, and then a window may well not be looked at.
    focused: bool,
}

impl AttentionNews {
    pub fn new(since_ms: u64) -> AttentionNews {
        AttentionNews {
            since_ms,
            ..AttentionNews::default()
        }
    }

    pub fn set_focus(&mut self, focused: bool) {
        self.focused = focused;
        if focused {
            // Looked at now: what was waiting is on screen.
            self.pending = None;
        }
    }

    /// Looks at every command's mark (a comparison each) at `now_ms`, and returns what to
    /// tell now: `None` when nothing is new, when the window is looked at (the news is then
    /// seen, not kept for later), or when the last notice was under [`MIN_GAP_MS`] ago
    /// (then it waits, and [`AttentionNews::due_ms`] says until when).
    pub fn look(&mut self, model: &Model, now_ms: u64) -> Option<Notice> {
        for command in &model.commands {
            let (Some(mark), Some(dir)) = (command.newest_need(), command.journal_dir.as_ref())
            else {
                continue;
            };
            let dir = dir.as_os_str();
            if mark.at_ms < self.since_ms || self.told.get(dir) >= Some(&mark.at_ms) {
                continue;
            }
            self.told.insert(dir.to_os_string(), mark.at_ms);
            let notice = Notice::of(command, mark);
            self.pending = Some(match self.pending.take() {
                Some((latest, at, count)) if at > mark.at_ms => (latest, at, count + 1),
                Some((_, _, count)) => (notice, mark.at_ms, count + 1),
                None => (notice, mark.at_ms, 1),
            });
        }
        if self.focused {
            self.pending = None;
            return None;
        }
        if self.due_ms().is_some_and(|due| now_ms < due) {
            return None;
        }
        let (notice, _, count) = self.pending.take()?;
        self.last_told_ms = Some(now_ms);
        Some(notice.with_more(count - 1))
    }

    /// When waiting news may be told, if some waits.
    pub fn due_ms(&self) -> Option<u64> {
        self.pending.as_ref()?;
        Some(self.last_told_ms.map_or(0, |at| at + MIN_GAP_MS))
    }
}

#[cfg(test)]
mod tests;
