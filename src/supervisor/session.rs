//! A session directory: `sessions/<id>/session.json` and one directory per command.

use std::io;
use std::path::{Path, PathBuf};

use crate::clock::now_ms;
use crate::journal::secure::{JournalDir, lossy};
use crate::journal::writer::SESSION_FILE;
use crate::journal::{SessionInfo, command_dir_name, new_session_id};

pub struct Session {
    pub id: String,
    pub dir: JournalDir,
    commands: usize,
}

/// Attempts at a free session id before giving up: ids hold the pid, which processes in
/// different PID namespaces can share at the same second.
const ID_ATTEMPTS: u32 = 100;

impl Session {
    /// Creates a new session under `state_dir` (checked and made private first) and records
    /// who started it. The error says what failed and what to do.
    pub fn create(state_dir: &Path) -> anyhow::Result<Session> {
        let state = JournalDir::open_state(state_dir)?;
        let sessions = state.open_or_create("sessions")?;
        let started_ms = now_ms();
        let pid = std::process::id();
        let base = new_session_id(started_ms, pid);
        let mut attempt = 1;
        let (id, dir) = loop {
            let id = match attempt {
                1 => base.clone(),
                n => format!("{base}.{n}"),
            };
            // mkdir is atomic: a directory made by another process is never shared.
            match sessions.create_dir(&id) {
                Ok(dir) => break (id, dir),
                Err(err) if err.kind() == io::ErrorKind::AlreadyExists && attempt < ID_ATTEMPTS => {
                    attempt += 1;
                }
                Err(err) => {
                    anyhow::bail!(
                        "cannot create a session directory in {}: {err}; check that the disk is writable, or set --state-dir",
                        sessions.path().display()
                    )
                }
            }
        };
        let info = SessionInfo {
            id: id.clone(),
            started_ms,
            cwd: std::env::current_dir()
                .map(|d| lossy(&d))
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
            // Lossy: an argument need not be UTF-8 (a --state-dir path, say).
            argv: std::env::args_os()
                .map(|a| a.to_string_lossy().into_owned())
                .collect(),
        };
        if let Err(err) = dir.write_json_atomic(SESSION_FILE, &info) {
            // An empty session directory would be listed as a session that never started.
            drop(dir);
            let _ = sessions.remove_dir(&id);
            anyhow::bail!(
                "cannot write {} in {}: {err}; check that the disk is not full, or set --state-dir",
                SESSION_FILE,
                sessions.path().display()
            );
        }
        Ok(Session {
            id,
            dir,
            commands: 0,
        })
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Creates the directory of the next command of this session (`03-build`).
    pub fn next_command_dir(&mut self, name: &str) -> io::Result<JournalDir> {
        self.commands += 1;
        self.dir.create_dir(&command_dir_name(self.commands, name))
    }

    pub fn dir_path(&self) -> PathBuf {
        self.dir.path().to_path_buf()
    }
}
