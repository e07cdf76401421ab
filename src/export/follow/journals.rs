//! The follower's side of the journals: `sessions/`, each session and each command that
//! runs watched by inotify, and what changed read again and handed to the machine as a scan.
//! A command's broker that dies leaves no result: commands that run are looked at again
//! every [`super::run::LIVENESS`] (the only timer while nothing is pending but a command
//! runs).

use std::path::{Path, PathBuf};

use super::run::Follow;
use super::scan::{self, number_of};
use crate::clock::now_ms;
use crate::journal::secure::JournalDir;
use crate::journal::session_dirs;
use crate::journal::watcher::{Change, JournalFile, JournalWatcher, WatchError, Watched};
use crate::model::replay::dir_name;

impl Follow {
    /// Watches `sessions/` and reads every session once.
    pub(super) fn start(&mut self) -> Result<(), String> {
        let sessions = JournalDir::open_state(&self.options.state)
            .and_then(|state| state.open_or_create("sessions"))
            .map_err(|err| err.to_string())?;
        if !self.options.once {
            match JournalWatcher::new() {
                Ok(watcher) => self.watcher = Some(watcher),
                Err(err) => eprintln!("tether: {err}: looking for changes every 0.5 s"),
            }
            self.watch(Watched::Sessions(sessions.path().to_path_buf()));
        }
        self.scan_all();
        Ok(())
    }

    fn watch(&mut self, watched: Watched) {
        let Some(watcher) = self.watcher.as_mut() else {
            return;
        };
        if let Err(err) = watcher.watch(watched)
            && !matches!(err, WatchError::Gone { .. })
        {
            eprintln!("tether: {err}: looking for changes every 0.5 s");
            self.watcher = None;
        }
    }

    fn unwatch(&mut self, dir: &Path) {
        if let Some(watcher) = self.watcher.as_mut() {
            watcher.unwatch(dir);
        }
    }

    /// Every session, one listing each (a session whose cursor says all is sent costs no
    /// more).
    pub(super) fn scan_all(&mut self) {
        match session_dirs(&self.sessions_dir) {
            Ok(dirs) => {
                for dir in dirs {
                    self.scan_session(&dir);
                }
            }
            Err(err) => eprintln!("tether: cannot list {}: {err}", self.sessions_dir.display()),
        }
    }

    fn scan_session(&mut self, dir: &Path) {
        let id = dir_name(dir);
        if !self.machine.knows(&id) {
            let (cursor, damaged) = self.dir.load(&id);
            if let Some(damaged) = damaged {
                eprintln!("tether: {damaged}");
            }
            self.machine.handle_cursor(&id, cursor);
        }
        if !self.options.once {
            self.watch(Watched::Session(dir.to_path_buf()));
        }
        let cursor = self.machine.cursor(&id).cloned().unwrap_or_default();
        match scan::scan_session(dir, &cursor, now_ms()) {
            Ok(scan) => {
                for running in scan.commands.iter().filter(|c| !c.ended) {
                    self.follow_running(&id, running.number, &running.dir);
                }
                self.machine.handle_session(scan);
            }
            // Gone meanwhile (pruned): what was followed of it is dropped.
            Err(_) => self.machine.handle_session_gone(&id),
        }
    }

    fn follow_running(&mut self, session: &str, number: u64, dir: &Path) {
        if !self.options.once {
            self.watch(Watched::Ending(dir.to_path_buf()));
        }
        self.running
            .insert(dir.to_path_buf(), (session.to_string(), number));
    }

    /// Looks at one command again (it appeared, got its request or its result).
    fn scan_command(&mut self, dir: &Path) {
        let Some(session_dir) = dir.parent() else {
            return;
        };
        let session = dir_name(session_dir);
        let Some(number) = number_of(dir) else {
            return;
        };
        if !self.machine.knows(&session) {
            self.scan_session(session_dir);
            return;
        }
        // `None`: renamed to its final name (or removed), that name looked at in its turn.
        let command = scan::scan_command(dir, number, now_ms());
        match &command {
            Some(command) if !command.ended => self.follow_running(&session, number, dir),
            _ => {
                self.running.remove(dir);
                self.unwatch(dir);
            }
        }
        if let Some(command) = command {
            self.machine.handle_command(&session, command);
        }
    }

    /// Commands that run, looked at again: a broker killed leaves no result.
    pub(super) fn check_running(&mut self) {
        let dirs: Vec<PathBuf> = self.running.keys().cloned().collect();
        for dir in dirs {
            self.scan_command(&dir);
        }
    }

    pub(super) fn on_changes(&mut self) {
        let changes = self
            .watcher
            .as_mut()
            .map(JournalWatcher::drain)
            .unwrap_or_default();
        for change in changes {
            match change {
                Change::Rescan => self.scan_all(),
                // The launcher's word is read from a finished session only (`export`).
                Change::Launcher(_) => {}
                Change::SessionAppeared(dir) => self.scan_session(&dir),
                Change::SessionGone(dir) => self.session_gone(&dir),
                Change::CommandAppeared(dir) => self.scan_command(&dir),
                Change::CommandGone(dir) => {
                    self.unwatch(&dir);
                    self.running.remove(&dir);
                }
                Change::Journal {
                    dir,
                    file: JournalFile::Result | JournalFile::Command,
                } => self.scan_command(&dir),
                Change::Journal {
                    file: JournalFile::Events,
                    ..
                } => {}
            }
        }
    }

    /// A session removed or renamed away (`tether prune` renames before removing): it is
    /// no longer followed, and its cursor goes, or cursors would pile up for every session
    /// ever pruned. One that a failed prune puts back is sent again from its start.
    fn session_gone(&mut self, dir: &Path) {
        let id = dir_name(dir);
        self.unwatch(dir);
        self.running.retain(|_, (session, _)| *session != id);
        self.machine.handle_session_gone(&id);
        if !dir.exists()
            && let Err(err) = self.dir.remove(&id)
        {
            eprintln!(
                "tether: cannot remove the cursor of {id} in {}: {err}",
                self.dir.path().display()
            );
        }
    }
}
