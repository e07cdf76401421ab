//! A session directory: `sessions/<id>/session.json` and one directory per command.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::clock::now_ms;
use crate::journal::writer::{SESSION_FILE, write_json_atomic};
use crate::journal::{SessionInfo, command_dir_name, new_session_id, sessions_dir};

pub struct Session {
    pub id: String,
    pub dir: PathBuf,
    commands: usize,
}

impl Session {
    /// Creates a new session under `state_dir` and records who started it.
    pub fn create(state_dir: &Path) -> io::Result<Session> {
        let started_ms = now_ms();
        let pid = std::process::id();
        let id = new_session_id(started_ms, pid);
        let dir = sessions_dir(state_dir).join(&id);
        fs::create_dir_all(sessions_dir(state_dir))?;
        // Never share a directory with another session.
        fs::create_dir(&dir)?;
        let info = SessionInfo {
            id: id.clone(),
            started_ms,
            // Lossy: JSON holds text, and a session must start whatever its directory is called.
            cwd: std::env::current_dir()
                .map(|d| PathBuf::from(d.to_string_lossy().into_owned()))
                .unwrap_or_default(),
            user: nix::unistd::User::from_uid(nix::unistd::getuid())
                .ok()
                .flatten()
                .map_or_else(|| nix::unistd::getuid().to_string(), |u| u.name),
            host: nix::unistd::gethostname()
                .map(|h| h.to_string_lossy().into_owned())
                .unwrap_or_default(),
            pid,
            tether_version: env!("CARGO_PKG_VERSION").into(),
            argv: std::env::args().collect(),
        };
        write_json_atomic(&dir.join(SESSION_FILE), &info)?;
        Ok(Session {
            id,
            dir,
            commands: 0,
        })
    }

    /// A fresh directory path for the next command of this session.
    pub fn next_command_dir(&mut self, name: &str) -> PathBuf {
        self.commands += 1;
        self.dir.join(command_dir_name(self.commands, name))
    }
}
