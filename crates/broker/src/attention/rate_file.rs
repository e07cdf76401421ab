//! Where the user's notify rate (see `rate`) is kept: `notify-rate` in the state directory,
//! shared by every broker that journals there. Private and opened safely: never through a
//! link (`O_NOFOLLOW`), a regular file of the user's with no group or other bits, or it is not
//! used; never blocking the broker: opened `O_NONBLOCK` (a FIFO planted there opens at once
//! and is refused), locked with a non-blocking `flock` tried a few times over a few
//! milliseconds (each holder keeps it for a read and a write of a few hundred bytes).
//!
//! A burst of brokers can keep the lock longer than that (the holder preempted on a loaded
//! machine): an event that finds it busy is held back all the same, and counted without the
//! lock, as one byte appended to `notify-rate.held` (an `O_APPEND` write is atomic), which
//! the next holder of the lock takes in from where the last one stopped (the state keeps the
//! offset): the file is never cut or renamed while it is short, so a byte appended while a
//! holder reads it is counted by the next holder, never lost. A burst is counted whole.

use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rustix::fs::FlockOperation;
use thiserror::Error;

use super::rate::{RateState, Verdict, add_held, decide, kind_index, kind_of};
use tether_os::journal::secure::{PrivateFileError, open_private};
use tether_protocol::protocol::AttentionKind;

/// The file's name in the state directory.
pub const RATE_FILE: &str = "notify-rate";
/// Events held back while the lock was busy, a byte each (the kind's index, see `rate`).
pub const HELD_FILE: &str = "notify-rate.held";
/// The most of the file read: the state is a few hundred bytes; more is not ours.
const READ_CAP: usize = 4096;
/// Tries at the lock, a millisecond apart.
const LOCK_TRIES: u32 = 20;

/// Why the rate file was not used (the broker's own limit stays; the reason is not shown).
#[derive(Debug, Error)]
pub enum RateFileError {
    /// It or its held file cannot be opened, or is not a private regular file of ours.
    #[error(transparent)]
    Private(#[from] PrivateFileError),
    #[error("cannot update {path}: {source}")]
    Write { path: PathBuf, source: io::Error },
}

/// The user's notify rate, kept in a file.
#[derive(Debug, Clone)]
pub struct RateFile {
    path: PathBuf,
    held: PathBuf,
}

impl RateFile {
    pub fn in_state_dir(state_dir: &Path) -> RateFile {
        RateFile {
            path: state_dir.join(RATE_FILE),
            held: state_dir.join(HELD_FILE),
        }
    }

    /// Decides whether a run starts for an event of `kind` at `now_ms` (wall clock), and
    /// keeps the new state.
    pub fn admit(&self, kind: AttentionKind, now_ms: u64) -> Result<Verdict, RateFileError> {
        let file = open_private(&self.path, false)?;
        if !locked(&file) {
            // Held back, and counted for the next holder.
            let held = open_private(&self.held, true)?;
            let byte = [b'0' + kind_index(kind)];
            let _ = (&held).write_all(&byte);
            return Ok(Verdict::Hold);
        }
        let mut buf = vec![0u8; READ_CAP];
        let n = file.read_at(&mut buf, 0).unwrap_or(0);
        // Unreadable or torn (a broker killed mid-write): a fresh state.
        let mut state: RateState = serde_json::from_slice(&buf[..n]).unwrap_or_default();
        self.take_in_held(&mut state, now_ms);
        let (verdict, next) = decide(&state, kind, now_ms);
        let text = serde_json::to_vec(&next).unwrap_or_default();
        let written = file.set_len(0).and_then(|()| file.write_all_at(&text, 0));
        written.map_err(|source| RateFileError::Write {
            path: self.path.clone(),
            source,
        })?;
        // The lock goes with the descriptor.
        Ok(verdict)
    }

    /// Under the lock: the events counted in [`HELD_FILE`] since the last holder's turn join
    /// `state`'s held ones.
    fn take_in_held(&self, state: &mut RateState, now_ms: u64) {
        let Ok(held) = open_private(&self.held, false) else {
            return;
        };
        let len = held.metadata().map_or(0, |m| m.len());
        if len < state.held_taken {
            // Not the file the offset was kept for (removed by hand): all of it is new.
            state.held_taken = 0;
        }
        let mut bytes = vec![0; len.saturating_sub(state.held_taken).min(TAKEN_CAP) as usize];
        let n = held.read_at(&mut bytes, state.held_taken).unwrap_or(0);
        bytes.truncate(n);
        state.held_taken += n as u64;
        // Bounded: a mebibyte counted, the file starts anew (an append racing this removal
        // is the one event it may miss, once a million were counted).
        if state.held_taken >= TAKEN_CAP {
            let _ = std::fs::remove_file(&self.held);
            state.held_taken = 0;
        }
        for byte in bytes {
            if let Some(kind) = byte.checked_sub(b'0').and_then(kind_of) {
                add_held(state, kind, now_ms);
            }
        }
    }
}

/// Whether `file`'s lock could be had within [`LOCK_TRIES`]; it goes with the descriptor.
fn locked(file: &File) -> bool {
    (0..LOCK_TRIES).any(|_| {
        let taken = rustix::fs::flock(file, FlockOperation::NonBlockingLockExclusive).is_ok();
        if !taken {
            std::thread::sleep(Duration::from_millis(1));
        }
        taken
    })
}

/// The most of [`HELD_FILE`] taken in at once: a count, not a log.
const TAKEN_CAP: u64 = 1 << 20;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attention::rate::RUNS_PER_WINDOW;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn the_state_is_shared_through_the_file_and_private() {
        let tmp = tether_os::testing::private_tempdir();
        let file = RateFile::in_state_dir(tmp.path());
        let now = 1_700_000_000_000;
        let verdicts: Vec<Verdict> = (0..RUNS_PER_WINDOW + 3)
            .map(|i| {
                file.admit(AttentionKind::Failed, now + u64::from(i))
                    .unwrap()
            })
            .collect();
        let runs = verdicts.iter().filter(|v| **v != Verdict::Hold).count();
        assert_eq!(runs, RUNS_PER_WINDOW as usize);
        let meta = std::fs::metadata(tmp.path().join(RATE_FILE)).unwrap();
        assert_eq!(meta.mode() & 0o777, 0o600);
        // Another "broker" (another RateFile on the same directory) sees the same state.
        let other = RateFile::in_state_dir(tmp.path());
        let Verdict::Run { held: Some(held) } =
            other.admit(AttentionKind::Failed, now + 61_000).unwrap()
        else {
            panic!("the held events are told with the next run");
        };
        assert_eq!(held.total(), 3);
    }

    #[test]
    fn many_threads_at_once_start_the_window_s_runs_and_no_more() {
        let tmp = tether_os::testing::private_tempdir();
        let now = 1_700_000_000_000;
        let threads: Vec<_> = (0..16)
            .map(|_| {
                let file = RateFile::in_state_dir(tmp.path());
                std::thread::spawn(move || {
                    (0..10)
                        .filter(|_| {
                            matches!(
                                file.admit(AttentionKind::Failed, now),
                                Ok(Verdict::Run { .. })
                            )
                        })
                        .count()
                })
            })
            .collect();
        let runs: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
        assert_eq!(runs, RUNS_PER_WINDOW as usize);
    }

    #[test]
    fn an_event_that_finds_the_lock_busy_is_held_and_counted_without_it() {
        let tmp = tether_os::testing::private_tempdir();
        let file = RateFile::in_state_dir(tmp.path());
        let now = 1_700_000_000_000;
        assert!(matches!(
            file.admit(AttentionKind::Failed, now),
            Ok(Verdict::Run { held: None })
        ));
        // Another broker holds the lock for longer than the tries.
        let holder = tether_os::testing::LockHolder::lock(&tmp.path().join(RATE_FILE));
        for kind in [AttentionKind::Failed, AttentionKind::NeedsInput] {
            assert_eq!(file.admit(kind, now + 1).unwrap(), Verdict::Hold);
        }
        assert_eq!(std::fs::read(tmp.path().join(HELD_FILE)).unwrap(), b"30");
        drop(holder);
        let Verdict::Run { held: Some(held) } = file.admit(AttentionKind::Failed, now + 2).unwrap()
        else {
            panic!("the events counted without the lock are told with the next run");
        };
        assert_eq!(held.counts, [1, 0, 0, 1, 0]);
        // Taken in once: the next holder starts after them, and counts only what follows.
        let holder = tether_os::testing::LockHolder::lock(&tmp.path().join(RATE_FILE));
        assert_eq!(
            file.admit(AttentionKind::Finished, now + 3).unwrap(),
            Verdict::Hold
        );
        drop(holder);
        let Verdict::Run { held: Some(held) } = file.admit(AttentionKind::Failed, now + 4).unwrap()
        else {
            panic!("the one event held since is told");
        };
        assert_eq!(held.total(), 1, "{held:?}");
    }

    #[test]
    fn a_fifo_a_link_or_a_shared_file_is_refused_at_once() {
        let tmp = tether_os::testing::private_tempdir();
        let path = tmp.path().join(RATE_FILE);
        let file = RateFile::in_state_dir(tmp.path());
        // A FIFO nobody writes to: a blocking open would hang here for ever.
        nix::unistd::mkfifo(&path, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let err = file.admit(AttentionKind::Failed, 1).unwrap_err();
        assert!(
            matches!(
                err,
                RateFileError::Private(PrivateFileError::NotPrivate { .. })
            ),
            "{err}"
        );
        std::fs::remove_file(&path).unwrap();
        let target = tmp.path().join("elsewhere");
        tether_os::testing::write_private(&target, "");
        std::os::unix::fs::symlink(&target, &path).unwrap();
        let err = file.admit(AttentionKind::Failed, 1).unwrap_err();
        assert!(
            matches!(err, RateFileError::Private(PrivateFileError::Open { .. })),
            "{err}"
        );
        assert_eq!(
            std::fs::read(&target).unwrap(),
            b"",
            "never written through"
        );
        std::fs::remove_file(&path).unwrap();
        tether_os::testing::write_private(&path, "");
        tether_os::testing::loosen(&path, 0o666);
        let err = file.admit(AttentionKind::Failed, 1).unwrap_err();
        assert!(
            matches!(
                err,
                RateFileError::Private(PrivateFileError::NotPrivate { .. })
            ),
            "{err}"
        );
    }
}
