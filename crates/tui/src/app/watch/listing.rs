//! How the watch's rows follow the journals: which sessions are followed, a row for every
//! command directory of them, each row read again when its journal changes, until its result.

use std::cmp::Ordering;
use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};

use super::backlog::order;
use super::{SessionSeen, Watch};
use crate::app::App;
use tether_frontend::control::discover::{journaled_broker_alive, session_is_followed};
use tether_frontend::prune::scan::STARTING_GRACE_MS;
use tether_model::replay::{broker_alive, command_from_record, command_so_far};
use tether_model::{CommandState, Status};
use tether_os::clock::now_ms;
use tether_os::journal::secure::check_for_reading;
use tether_os::journal::watcher::{Change, JournalFile, Watched};
use tether_os::journal::writer::RESULT_FILE;
use tether_os::journal::{CommandId, CommandRecord, session_dirs, sessions_dir};
use tether_protocol::protocol::{CommandSpec, EventKind};

impl Watch {
    /// Applies one change; returns whether a row changed.
    pub(super) fn apply(&mut self, change: Change, app: &mut App) -> bool {
        match change {
            Change::Rescan => {
                self.rescan(app);
                true
            }
            Change::SessionAppeared(dir) => {
                self.consider_session(&dir);
                false
            }
            Change::SessionGone(dir) => self.drop_sessions(&HashSet::from([dir]), app),
            Change::CommandAppeared(dir) => {
                let Some(session) = dir.parent().map(Path::to_path_buf) else {
                    return false;
                };
                if self.sessions.get(&session) == Some(&SessionSeen::Followed) {
                    return self.add_command(&dir, app);
                }
                self.follow(&session);
                false
            }
            Change::CommandGone(dir) => self.drop_unfinished(&dir, app),
            Change::Journal { dir, file } => self.refresh(&dir, file, app),
            Change::Launcher(session) => {
                if self.sessions.get(&session) == Some(&SessionSeen::Followed) {
                    self.plans_changed(&session);
                }
                false
            }
        }
    }

    /// Looks at everything again: lists the sessions, whose commands not listed yet are then
    /// read a step at a time ([`Watch::step`]), drops the rows of sessions gone since the
    /// last look (polling sees no event of it), and reads the listed commands that have no
    /// result. A look already under way goes on rather than start over;
    /// the sessions are listed again once it is done.
    pub(super) fn rescan(&mut self, app: &mut App) {
        self.last_rescan = std::time::Instant::now();
        if let Err(err) = check_for_reading(&self.state_dir) {
            self.say(err.to_string());
            return;
        }
        if self.pending() {
            self.relist = true;
        } else {
            let sessions = match session_dirs(&sessions_dir(&self.state_dir)) {
                Ok(sessions) => sessions,
                Err(err) => {
                    self.say(format!("cannot list the sessions: {err}"));
                    return;
                }
            };
            let present: HashSet<&PathBuf> = sessions.iter().collect();
            let gone: HashSet<PathBuf> = self
                .sessions
                .keys()
                .filter(|dir| !present.contains(dir))
                .cloned()
                .collect();
            self.drop_sessions(&gone, app);
            // Polling sees no event of a launcher's word either: read again at each look.
            if self.polling() {
                let followed = (self.sessions.iter())
                    .filter(|(_, seen)| **seen == SessionSeen::Followed)
                    .map(|(dir, _)| dir.clone())
                    .collect::<Vec<_>>();
                for session in followed {
                    self.plans_changed(&session);
                }
            }
            self.queue_sessions(sessions);
        }
        self.check_open(app);
    }

    /// Rows without a result whose journal says more than the row does: a result written, a
    /// broker that died without one, a directory renamed away (polling sees no event).
    pub(super) fn check_open(&mut self, app: &mut App) {
        let open: Vec<PathBuf> = self.open.keys().cloned().collect();
        for dir in open {
            if !dir.exists() {
                self.drop_unfinished(&dir, app);
                continue;
            }
            if dir.join(RESULT_FILE).exists() {
                self.refresh(&dir, JournalFile::Result, app);
                continue;
            }
            if self.polling() {
                self.refresh(&dir, JournalFile::Events, app);
            }
            let Some(index) = position(app, &dir) else {
                continue;
            };
            let row = &app.model.commands[index];
            // Starting: its broker may have been named since, or never will be.
            let starting = row.status == Status::Starting && row.broker_pid.is_none();
            if starting || (row.status.is_active() && !broker_alive(row)) {
                self.reload(index, &dir, app);
            }
        }
    }

    /// A session seen for the first time, or one not followed whose directory changed: its
    /// commands are queued to be read if it is followed now (no row changes yet).
    pub(super) fn consider_session(&mut self, dir: &Path) {
        let name = dir.file_name().map(|n| n.to_string_lossy().into_owned());
        if self
            .session
            .as_deref()
            .is_some_and(|wanted| Some(wanted) != name.as_deref())
        {
            return;
        }
        let modified = fs::symlink_metadata(dir).and_then(|m| m.modified()).ok();
        match self.sessions.get(dir) {
            Some(SessionSeen::Followed) => return,
            Some(SessionSeen::Idle(seen)) if *seen == modified => return,
            _ => {}
        }
        self.watch(Watched::Session(dir.to_path_buf()));
        if self.session.is_some() || session_is_followed(dir, now_ms()) {
            self.follow(dir);
        } else {
            self.sessions
                .insert(dir.to_path_buf(), SessionSeen::Idle(modified));
        }
    }

    /// Follows a session: its commands are queued to be listed (its last first), and what
    /// joins it is listed as it comes.
    fn follow(&mut self, dir: &Path) {
        self.sessions
            .insert(dir.to_path_buf(), SessionSeen::Followed);
        self.watch(Watched::Session(dir.to_path_buf()));
        self.queue_commands(dir);
        self.plans_changed(dir);
    }

    fn add_command(&mut self, dir: &Path, app: &mut App) -> bool {
        let Some(row) = self.read_command(dir) else {
            return false;
        };
        let index = insert_index(&app.model.commands, &row);
        app.insert_commands(index, vec![row]);
        true
    }

    /// The row of a command not listed yet, read from its journal (which is watched from
    /// then on while it may change); `None` if it is listed, or its directory is gone.
    pub(super) fn read_command(&mut self, dir: &Path) -> Option<CommandState> {
        if !self.known.insert(dir.to_path_buf()) {
            return None;
        }
        // Watched before it is read: nothing written in between is missed.
        self.watch(Watched::Command(dir.to_path_buf()));
        if !fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir()) {
            // A reserved number renamed to its command's name already: listed under that.
            self.unwatch(dir);
            self.known.remove(dir);
            return None;
        }
        Some(self.load(dir))
    }

    /// Reads a row's journal again after `file` changed.
    fn refresh(&mut self, dir: &Path, file: JournalFile, app: &mut App) -> bool {
        let Some(index) = position(app, dir) else {
            // Dismissed, or never listed: nothing to keep up to date.
            self.open.remove(dir);
            self.unwatch(dir);
            return false;
        };
        match (file, self.open.get_mut(dir)) {
            (JournalFile::Events, Some(tail)) => {
                // Whole lines only: a line being written is read once it ends.
                let Ok((events, _)) = tail.poll() else {
                    return false;
                };
                let row = &mut app.model.commands[index];
                for event in &events {
                    row.apply(event);
                }
                !events.is_empty()
            }
            _ => {
                self.reload(index, dir, app);
                true
            }
        }
    }

    /// Builds row `index` again from its whole journal.
    pub(super) fn reload(&mut self, index: usize, dir: &Path, app: &mut App) {
        let mut row = self.load(dir);
        let old = &app.model.commands[index];
        // The name it is shown under (made unique among its session's) stays, once it is a
        // command's and not yet its directory's.
        if !unnamed(old) {
            row.config.name = old.config.name.clone();
        }
        app.model.commands[index] = row;
    }

    /// The row of the command journaled in `dir`, read whole; its journal is followed from
    /// there while it may change.
    fn load(&mut self, dir: &Path) -> CommandState {
        // Whether its broker runs, asked before its journal is read: see `row_of`.
        let alive = journaled_broker_alive(dir);
        let (record, tail) = CommandRecord::load_following(dir);
        let (row, may_run) = self.row_of(&record, alive);
        self.settle(dir, !may_run, tail);
        if let Some(session) = dir.parent() {
            self.rows_changed(session);
        }
        row
    }

    /// A finished command's journal (a result, or a broker gone without one) changes no
    /// more: its watch and tail go.
    fn settle(&mut self, dir: &Path, finished: bool, tail: tether_os::journal::EventTail) {
        if finished {
            self.open.remove(dir);
            self.unwatch(dir);
        } else {
            self.open.insert(dir.to_path_buf(), tail);
        }
    }

    /// A row whose directory went before the command had a result: a reserved number
    /// renamed to the command's name (listed again under it), or a reservation removed.
    /// An ended row stays (`tether prune` may remove its journal; the row is still news).
    fn drop_unfinished(&mut self, dir: &Path, app: &mut App) -> bool {
        // Never listed (a reserved number renamed before it was read, as most are): no row
        // to look for among thousands.
        if !self.known.contains(dir) && !self.open.contains_key(dir) {
            return false;
        }
        let open = self.open.remove(dir).is_some();
        let index = position(app, dir);
        // Read once, when it was already going: it never had a command.json.
        let unnamed = index.is_some_and(|i| unnamed(&app.model.commands[i]));
        if !open && !unnamed {
            return false;
        }
        self.unwatch(dir);
        self.known.remove(dir);
        match index {
            Some(index) => {
                app.remove_commands(|i, _| i == index);
                true
            }
            None => false,
        }
    }

    /// The row for a journal, and whether it may still change: live while its broker runs
    /// (or, no broker named yet, while the directory is new enough to be starting); as the
    /// journal ends, otherwise.
    ///
    /// `alive` is whether the broker `command.json` names ran, asked before the journal was
    /// read: a broker that writes its result and exits between the two reads would otherwise
    /// leave a journal read without its result beside a broker found gone, taken as ended
    /// for good (`failed to start`) and never read again.
    fn row_of(&self, record: &CommandRecord, alive: Option<bool>) -> (CommandState, bool) {
        let dir = &record.dir;
        let closed = record
            .events
            .iter()
            .any(|e| matches!(e.kind, EventKind::Close { .. }));
        let created_ms = modified_ms(dir);
        let may_run = record.result.is_none()
            && !closed
            && alive.unwrap_or_else(|| {
                created_ms.is_some_and(|ms| now_ms().saturating_sub(ms) < STARTING_GRACE_MS)
            });
        let mut row = if may_run {
            // A restart's run (`worker (run 3)`) and an agent's call (`(command #5)` in its
            // tree) while it runs, as once it ended.
            command_so_far(record)
        } else {
            command_from_record(record)
        };
        if record.request.is_none() {
            // Until its broker writes command.json, a command goes by its directory's name
            // (`03-build`: the number, then its name made file-safe).
            if let Some(id) = CommandId::of_dir(dir).filter(|id| !id.name.is_empty()) {
                row.config.name = id.name;
            }
        }
        if record.events.is_empty() {
            // Nothing journaled yet: it began when its directory was made.
            row.started_ms = created_ms.or(row.started_ms);
            if !may_run {
                row.ended_ms = row.started_ms;
            }
        }
        if let Some(result) = &record.result {
            // The result has the last word: an event log cut short (or capped) does not end
            // in `exit`, and the broker that wrote it is gone by now.
            let unended = matches!(row.status, Status::Lost | Status::FailedToStart);
            if let (Some(exit), true) = (result.exit, unended || row.status.is_active()) {
                row.status = Status::Exited(exit);
                row.ended_ms = Some(result.ended_ms);
                row.notice = None;
            }
        }
        // Its offsets count from its session's start, not from the watch's.
        row.session_started_ms = dir
            .parent()
            .and_then(tether_os::journal::session_started_ms);
        (row, may_run)
    }
}

/// A row read before its broker wrote `command.json`: it has no command yet.
fn unnamed(row: &CommandState) -> bool {
    matches!(&row.config.command, CommandSpec::Argv(argv) if argv.is_empty())
}

fn modified_ms(path: &Path) -> Option<u64> {
    let modified = fs::symlink_metadata(path).and_then(|m| m.modified()).ok()?;
    let since = modified.duration_since(std::time::UNIX_EPOCH).ok()?;
    Some(since.as_millis() as u64)
}

/// The row of the command journaled in `dir`; searched from the end, where the commands that
/// still change are.
fn position(app: &App, dir: &Path) -> Option<usize> {
    app.model
        .commands
        .iter()
        .rposition(|c| c.journal_dir.as_deref() == Some(dir))
}

/// Where `new` goes in the list, in [`order`]: after the last row, as a command that just
/// appeared does, or before the first row that goes after it (rows read newest first go at
/// the top), each found without a walk of the whole list in those two cases.
pub(super) fn insert_index(rows: &[CommandState], new: &CommandState) -> usize {
    let after = |row: &CommandState| {
        (row.journal_dir.is_some() || row.unstarted_in.is_some())
            .then(|| order(row, new) == Ordering::Greater)
    };
    if rows.iter().rev().find_map(after) != Some(true) {
        return rows.len();
    }
    rows.iter()
        .position(|row| after(row) == Some(true))
        .unwrap_or(rows.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tether_config::CommandConfig;

    fn row(dir: &str) -> CommandState {
        let mut row = CommandState::new(CommandConfig::new(
            dir,
            CommandSpec::Argv(vec!["true".into()]),
        ));
        row.journal_dir = Some(PathBuf::from(dir));
        row
    }

    #[test]
    fn a_command_goes_among_its_session_by_number() {
        let rows = [row("/s/a/01-x"), row("/s/a/03-x"), row("/s/b/01-y")];
        assert_eq!(insert_index(&rows, &row("/s/a/02-z")), 1);
        assert_eq!(insert_index(&rows, &row("/s/a/10-z")), 2);
        assert_eq!(insert_index(&rows, &row("/s/b/02-z")), 3);
        assert_eq!(insert_index(&rows, &row("/s/c/01-z")), 3);
        assert_eq!(insert_index(&rows[1..], &row("/s/a/01-z")), 0);
    }

    /// A command its launcher has not started stays after its session's runs, however late
    /// they are read.
    #[test]
    fn a_run_goes_before_its_sessions_commands_not_started() {
        let mut web = row("web");
        web.journal_dir = None;
        web.unstarted_in = Some(PathBuf::from("/s/a"));
        let rows = [row("/s/a/01-x"), web, row("/s/b/01-y")];
        assert_eq!(insert_index(&rows, &row("/s/a/02-z")), 1);
        assert_eq!(insert_index(&rows[1..], &row("/s/a/01-x")), 0);
        assert_eq!(insert_index(&rows, &row("/s/b/02-z")), 3);
    }

    #[test]
    fn sessions_go_in_the_order_they_started_whatever_order_they_are_read_in() {
        let started = |dir: &str, ms: Option<u64>| {
            let mut row = row(dir);
            row.session_started_ms = ms;
            row
        };
        let rows = [
            started("/s/b/01-x", Some(20)),
            started("/s/a/01-x", Some(30)),
        ];
        // Read newest first: an older session goes at the top.
        assert_eq!(insert_index(&rows, &started("/s/z/01-x", Some(10))), 0);
        assert_eq!(insert_index(&rows, &started("/s/c/01-x", Some(25))), 1);
        assert_eq!(insert_index(&rows, &started("/s/c/01-x", Some(40))), 2);
        // Without a session.json: last.
        assert_eq!(insert_index(&rows, &started("/s/c/01-x", None)), 2);
        // Among its own session's rows, by number.
        assert_eq!(insert_index(&rows, &started("/s/b/02-x", Some(20))), 1);
        assert_eq!(insert_index(&rows, &started("/s/b/00-x", Some(20))), 0);
    }
}
