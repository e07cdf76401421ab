//! What the watch has yet to read, read a little at a time. A full look (at start, after the
//! kernel dropped events, now and then as a safety net, every 0.5 s while polling) only lists
//! the session directories; the event loop then lets the watch read [`STEP_BUDGET`] journals
//! at a time between frames, the most recently changed sessions first. So the first frame is
//! drawn at once over any number of sessions (5,001 recent ones kept it blank for seconds),
//! and the rows fill in as they are read.

use std::cmp::Ordering;
use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};

use super::listing::insert_index;
use super::{SessionSeen, Watch};
use crate::app::App;
use crate::app::list::{number_of, session_of};
use tether_model::CommandState;
use tether_os::journal::command_dirs;

/// Journals read in one step at most (a session looked at counts one, a command's row one):
/// a few milliseconds, so keys and frames are never held up by a long backlog.
pub const STEP_BUDGET: usize = 32;

/// Something still to be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Pending {
    /// A session directory: followed or not, as its journals say.
    Session(PathBuf),
    /// A command directory of a followed session: its row.
    Command(PathBuf),
}

impl Watch {
    /// Whether anything listed is still to be read.
    pub fn pending(&self) -> bool {
        !self.backlog.is_empty()
    }

    /// Reads up to [`STEP_BUDGET`] of what is pending, newest first, and puts the rows read
    /// on the list. Returns whether a row changed.
    pub fn step(&mut self, app: &mut App) -> bool {
        let mut rows = Vec::new();
        let mut changed = false;
        for _ in 0..STEP_BUDGET {
            let Some(next) = self.backlog.pop() else {
                break;
            };
            match next {
                Pending::Session(dir) => self.look_at_session(&dir),
                Pending::Command(dir) => rows.extend(self.read_command(&dir)),
            }
        }
        changed |= !rows.is_empty();
        place(rows, app);
        changed |= self.settle_plans(app);
        if self.backlog.is_empty() && std::mem::take(&mut self.relist) {
            self.rescan(app);
        }
        changed
    }

    /// Queues `sessions` to be looked at, the most recently changed first.
    pub(super) fn queue_sessions(&mut self, sessions: Vec<PathBuf>) {
        let mut keyed: Vec<_> = sessions
            .into_iter()
            .map(|dir| {
                (
                    fs::symlink_metadata(&dir).and_then(|m| m.modified()).ok(),
                    dir,
                )
            })
            .collect();
        // Taken from the end.
        keyed.sort();
        self.backlog
            .extend(keyed.into_iter().map(|(_, dir)| Pending::Session(dir)));
    }

    /// Queues the commands of a followed session that are not listed yet, its last first.
    pub(super) fn queue_commands(&mut self, session: &Path) {
        for command in command_dirs(session).unwrap_or_default() {
            if !self.known.contains(&command) {
                self.backlog.push(Pending::Command(command));
            }
        }
    }

    fn look_at_session(&mut self, dir: &Path) {
        // Removed since it was listed: its removal is (or was) told on its own.
        if !fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir()) {
            return;
        }
        if self.sessions.get(dir) == Some(&SessionSeen::Followed) {
            self.queue_commands(dir);
        } else {
            self.consider_session(dir);
        }
    }

    /// Sessions whose directory went (removed, or renamed away by a prune): their rows go,
    /// and so does everything the watch kept of them. Returns whether a row went.
    pub(super) fn drop_sessions(&mut self, gone: &HashSet<PathBuf>, app: &mut App) -> bool {
        if gone.is_empty() {
            return false;
        }
        for dir in gone {
            self.sessions.remove(dir);
            self.unwatch(dir);
        }
        let in_gone = |dir: &Path| dir.parent().is_some_and(|s| gone.contains(s));
        let commands: HashSet<PathBuf> = self
            .known
            .iter()
            .filter(|dir| in_gone(dir))
            .cloned()
            .collect();
        for dir in &commands {
            self.known.remove(dir);
            if self.open.remove(dir).is_some() {
                self.unwatch(dir);
            }
        }
        self.backlog.retain(|pending| match pending {
            Pending::Session(dir) => !gone.contains(dir),
            Pending::Command(dir) => !in_gone(dir),
        });
        // Only rows the watch listed: a command this TUI runs is its own to show.
        let removed = app.remove_commands(|_, row| {
            row.journal_dir
                .as_ref()
                .is_some_and(|dir| commands.contains(dir))
        });
        removed + self.drop_plans(gone, app) > 0
    }
}

/// Puts the rows read in one step on the list, in their places. Rows read newest first go
/// above everything listed so far, all in one place: then the list is moved once for the
/// block, not once for each row.
fn place(mut rows: Vec<CommandState>, app: &mut App) {
    rows.sort_by(order);
    let (Some(first), Some(last)) = (rows.first(), rows.last()) else {
        return;
    };
    let listed = &app.model.commands;
    let at = insert_index(listed, first);
    if insert_index(listed, last) == at {
        app.insert_commands(at, rows);
        return;
    }
    for row in rows {
        let at = insert_index(&app.model.commands, &row);
        app.insert_commands(at, vec![row]);
    }
}

/// The list's order: sessions as they started (as `list_sessions` has them; one without a
/// `session.json` last), a session's commands by number.
pub(super) fn order(a: &CommandState, b: &CommandState) -> Ordering {
    let (a_dir, b_dir) = (a.journal_dir.as_deref(), b.journal_dir.as_deref());
    // A command its launcher has not started goes after its session's runs.
    let (a_session, b_session) = (session_of(a), session_of(b));
    let number = |dir: Option<&Path>| dir.and_then(number_of).unwrap_or(u64::MAX);
    if a_session.is_some() && a_session == b_session {
        // One session, whatever its start was read as for each row.
        return number(a_dir).cmp(&number(b_dir));
    }
    let started = |row: &CommandState| row.session_started_ms.unwrap_or(u64::MAX);
    (started(a), a_session, number(a_dir)).cmp(&(started(b), b_session, number(b_dir)))
}
