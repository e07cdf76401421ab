//! A session directory: `sessions/<id>/session.json` and one directory per command.
//!
//! A session is either fresh (a timestamped id, one process) or named (`TETHER_SESSION`,
//! `--session`), which any number of processes join at any moment, concurrently. So nothing
//! here assumes that this process is alone in a session directory: the directory is created
//! atomically or joined, and each command directory's number is reserved atomically.

use std::io;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{RenameFlags, renameat, renameat2};

use tether_os::clock::now_ms;
use tether_os::journal::secure::{JournalDir, lossy};
use tether_os::journal::writer::SESSION_FILE;
use tether_os::journal::{CommandId, SessionInfo, SessionName, new_session_id};
use tether_protocol::protocol::SessionRef;

pub struct Session {
    pub id: String,
    pub dir: JournalDir,
    /// The state directory, absolute, if its path is text (see [`SessionRef::state_dir`]).
    state_dir: Option<PathBuf>,
}

/// Attempts at a free session id before giving up: ids hold the pid, which processes in
/// different PID namespaces can share at the same second.
const ID_ATTEMPTS: u32 = 100;

/// Attempts at a free command number before giving up. Each failed attempt means another
/// process took that number meanwhile; this many in a row means something else is wrong.
const NUMBER_ATTEMPTS: u32 = 10_000;

impl Session {
    /// Creates a new session under `state_dir` (checked and made private first) and records
    /// who started it, or, given a `name`, joins that session, creating it if it does not
    /// exist yet. The error says what failed and what to do.
    pub fn create(state_dir: &Path, name: Option<&SessionName>) -> anyhow::Result<Session> {
        let state = JournalDir::open_state(state_dir)?;
        let absolute = std::path::absolute(state_dir)
            .ok()
            .filter(|p| p.to_str().is_some());
        let sessions = state.open_or_create("sessions")?;
        let started_ms = now_ms();
        let (id, dir, created) = match name {
            Some(name) => join(&sessions, name.as_str())?,
            None => create_fresh(&sessions, started_ms)?,
        };
        if created
            && let Err(err) = dir.write_json_once(SESSION_FILE, &session_info(&id, started_ms))
        {
            // An empty session directory would be listed as a session that never started.
            // (A named one that others joined meanwhile is not empty, and stays.)
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
            state_dir: absolute,
        })
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Creates the directory of the next command of this session (`03-build`), with a number
    /// no other command of the session has, whichever process created it.
    ///
    /// The number is reserved by creating the bare directory `NN`, which is atomic; holding
    /// it, a process checks that no `NN-other` exists (made by one that held `NN` earlier),
    /// then renames `NN` to `NN-name`. Two processes can never both hold `NN` at once, and a
    /// later holder always sees the earlier one's `NN-name`, so no number is given twice.
    /// No lock is involved: a crash leaves at worst an empty `NN` directory.
    pub fn next_command_dir(&mut self, name: &str) -> io::Result<(CommandId, JournalDir)> {
        let mut number = self.highest_number()? + 1;
        for _ in 0..NUMBER_ATTEMPTS {
            let reserved = CommandId::new(&self.id, number, "").dir_name();
            let held = match self.dir.create_dir(&reserved) {
                Ok(held) => held,
                Err(err) if err.kind() == io::ErrorKind::AlreadyExists => {
                    number += 1;
                    continue;
                }
                Err(err) => return Err(err),
            };
            if self.number_taken(number, &reserved)? {
                drop(held);
                self.dir.remove_dir(&reserved)?;
                number += 1;
                continue;
            }
            let id = CommandId::new(&self.id, number, name);
            let wanted = id.dir_name();
            if wanted == reserved {
                return Ok((id, held));
            }
            self.rename_reserved(&reserved, &wanted)?;
            let dir = JournalDir::from_fd(held.try_clone_fd()?, self.dir.join(&wanted))
                .map_err(io::Error::other)?;
            return Ok((id, dir));
        }
        Err(io::Error::other(format!(
            "no free command number after {NUMBER_ATTEMPTS} attempts"
        )))
    }

    /// What a broker exports to `command` of this session (as [`Self::next_command_dir`]
    /// made it), so that nested tether calls join the session.
    pub fn reference(&self, command: &CommandId) -> SessionRef {
        SessionRef {
            command: command.clone(),
            state_dir: self.state_dir.clone(),
        }
    }

    /// The names in the session directory, read through its descriptor.
    fn entries(&self) -> io::Result<Vec<String>> {
        // rustix: its `Dir` reads through a borrowed descriptor; nix's takes it over.
        rustix::fs::Dir::read_from(&self.dir)?
            .map(|entry| Ok(entry?.file_name().to_string_lossy().into_owned()))
            .collect()
    }

    fn highest_number(&self) -> io::Result<u64> {
        Ok(self
            .entries()?
            .iter()
            .filter_map(|n| CommandId::number_of(n))
            .max()
            .unwrap_or(0))
    }

    /// Whether an entry other than `reserved` already carries `number`.
    fn number_taken(&self, number: u64, reserved: &str) -> io::Result<bool> {
        Ok(self
            .entries()?
            .iter()
            .any(|n| n != reserved && CommandId::number_of(n) == Some(number)))
    }

    fn rename_reserved(&self, from: &str, to: &str) -> io::Result<()> {
        let renamed = renameat2(
            &self.dir,
            from,
            &self.dir,
            to,
            RenameFlags::RENAME_NOREPLACE,
        );
        match renamed {
            Ok(()) => Ok(()),
            // A file system without RENAME_NOREPLACE: `to` was just seen not to exist, and
            // nobody else may create it while we hold the number.
            Err(Errno::EINVAL) => Ok(renameat(&self.dir, from, &self.dir, to)?),
            Err(err) => {
                let _ = self.dir.remove_dir(from);
                Err(err.into())
            }
        }
    }
}

/// Creates or opens the named session's directory. mkdir is atomic, so of processes joining
/// at the same instant exactly one creates it (and records the session), the others open it.
/// Its id, its directory, and whether this process created it: then it writes
/// `session.json`; one another process created is opened and checked like any journal
/// directory.
fn join(sessions: &JournalDir, name: &str) -> anyhow::Result<(String, JournalDir, bool)> {
    match sessions.create_dir(name) {
        Ok(dir) => Ok((name.to_string(), dir, true)),
        Err(err) if err.kind() == io::ErrorKind::AlreadyExists => {
            Ok((name.to_string(), sessions.open_or_create(name)?, false))
        }
        Err(err) => anyhow::bail!(
            "cannot create the session directory {}: {err}; check that the disk is writable, or set --state-dir",
            sessions.join(name).display()
        ),
    }
}

fn create_fresh(
    sessions: &JournalDir,
    started_ms: u64,
) -> anyhow::Result<(String, JournalDir, bool)> {
    let base = new_session_id(started_ms, std::process::id());
    let mut attempt = 1;
    loop {
        let id = match attempt {
            1 => base.clone(),
            n => format!("{base}.{n}"),
        };
        // mkdir is atomic: a directory made by another process is never shared.
        match sessions.create_dir(&id) {
            Ok(dir) => return Ok((id, dir, true)),
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
    }
}

fn session_info(id: &str, started_ms: u64) -> SessionInfo {
    SessionInfo {
        id: id.to_string(),
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
        pid: std::process::id(),
        tether_version: env!("CARGO_PKG_VERSION").into(),
        // Lossy: an argument need not be UTF-8 (a --state-dir path, say).
        argv: std::env::args_os()
            .map(|a| a.to_string_lossy().into_owned())
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;
    use std::sync::{Arc, Barrier};

    fn name(n: &str) -> SessionName {
        SessionName::parse(n).unwrap()
    }

    #[test]
    fn a_named_session_is_created_once_and_joined() {
        let tmp = tether_os::testing::private_tempdir();
        let state = tmp.path().join("state");
        let mut first = Session::create(&state, Some(&name("agent-1"))).unwrap();
        let mut second = Session::create(&state, Some(&name("agent-1"))).unwrap();
        assert_eq!(
            (first.id.as_str(), second.id.as_str()),
            ("agent-1", "agent-1")
        );
        assert_eq!(first.path(), state.join("sessions/agent-1"));
        let (_, a) = first.next_command_dir("build").unwrap();
        let (b_id, b) = second.next_command_dir("build").unwrap();
        let (_, c) = first.next_command_dir("").unwrap();
        assert_eq!(a.path(), state.join("sessions/agent-1/01-build"));
        assert_eq!(b.path(), state.join("sessions/agent-1/02-build"));
        assert_eq!(c.path(), state.join("sessions/agent-1/03"));
        assert_eq!(first.reference(&b_id).broker_id(), "agent-1/02-build");
        // The descriptor is the renamed directory's.
        b.create_file("probe", false).unwrap();
        assert!(state.join("sessions/agent-1/02-build/probe").exists());
        let info: SessionInfo = serde_json::from_slice(
            &std::fs::read(state.join("sessions/agent-1/session.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(info.id, "agent-1");
    }

    #[test]
    fn a_planted_link_is_not_joined() {
        let tmp = tether_os::testing::private_tempdir();
        let state = tmp.path().join("state");
        Session::create(&state, None).unwrap();
        std::os::unix::fs::symlink(tmp.path(), state.join("sessions/evil")).unwrap();
        let err = Session::create(&state, Some(&name("evil")))
            .err()
            .expect("a link is refused");
        assert!(err.to_string().contains("symbolic link"), "{err}");
    }

    /// Many processes (threads here, each with its own descriptor, as processes would have)
    /// taking command numbers in one session at the same instant: every number once, none
    /// skipped, nothing left behind.
    #[test]
    fn command_numbers_are_unique_under_contention() {
        const WORKERS: usize = 8;
        const EACH: usize = 25;
        let tmp = tether_os::testing::private_tempdir();
        let state = tmp.path().join("state");
        let barrier = Arc::new(Barrier::new(WORKERS));
        let workers: Vec<_> = (0..WORKERS)
            .map(|w| {
                let (state, barrier) = (state.clone(), barrier.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    let mut session = Session::create(&state, Some(&name("busy"))).unwrap();
                    (0..EACH)
                        .map(|i| {
                            // Names differ, so only the number can collide.
                            let (_, dir) = session.next_command_dir(&format!("w{w}-{i}")).unwrap();
                            dir.path()
                                .file_name()
                                .unwrap()
                                .to_string_lossy()
                                .into_owned()
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let made: Vec<String> = workers
            .into_iter()
            .flat_map(|w| w.join().unwrap())
            .collect();
        let numbers: BTreeSet<u64> = made
            .iter()
            .filter_map(|n| CommandId::number_of(n))
            .collect();
        assert_eq!(numbers.len(), WORKERS * EACH, "a number was given twice");
        assert_eq!(
            numbers,
            (1..=(WORKERS * EACH) as u64).collect(),
            "numbers run from 1 without gaps"
        );
        let mut on_disk: Vec<String> = std::fs::read_dir(state.join("sessions/busy"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n != SESSION_FILE)
            .collect();
        on_disk.sort();
        let mut expected = made.clone();
        expected.sort();
        assert_eq!(on_disk, expected, "no reservation is left behind");
        // Exactly one worker wrote session.json (the others joined).
        assert!(state.join("sessions/busy/session.json").exists());
    }
}
