//! One follower per endpoint: an exclusive `flock` on `lock` in the endpoint's directory,
//! held for the follower's life, the file holding its pid so that a second one (and
//! `--status`) can say which process runs.

use std::fs::File;
use std::io::{self, Read, Seek, Write};
use std::os::fd::AsFd;

use nix::fcntl::{OFlag, openat};
use nix::sys::stat::{Mode, SFlag, fchmod, fstat};
// rustix's flock: nix's is deprecated for a `Flock` that takes the descriptor over.
use rustix::fs::{FlockOperation, flock};

use super::cursor::CursorDir;

const LOCK_FILE: &str = "lock";

/// The lock, held until dropped.
#[derive(Debug)]
pub struct FollowerLock {
    file: File,
}

/// Released by name, not by the close alone: a flock belongs to the open file, which a child
/// forked meanwhile (from another thread) holds too until it execs, and the lock with it.
impl Drop for FollowerLock {
    fn drop(&mut self) {
        let _ = flock(self.file.as_fd(), FlockOperation::Unlock);
    }
}

/// What trying the lock found.
#[derive(Debug)]
pub enum Locked {
    Ours(FollowerLock),
    /// Another follower holds it: its pid, if it wrote one.
    Held(Option<u32>),
}

fn open(dir: &CursorDir) -> io::Result<File> {
    let flags =
        OFlag::O_RDWR | OFlag::O_CREAT | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC;
    let fd = openat(
        dir.journal_dir(),
        LOCK_FILE,
        flags,
        Mode::from_bits_truncate(0o600),
    )
    .map_err(|err| {
        io::Error::other(format!(
            "cannot open {}: {err}; remove it and it is made again",
            dir.path().join(LOCK_FILE).display()
        ))
    })?;
    let stat = fstat(&fd)?;
    if stat.st_mode & SFlag::S_IFMT.bits() != SFlag::S_IFREG.bits() {
        return Err(io::Error::other(format!(
            "{} is not a regular file; remove it and it is made again",
            dir.path().join(LOCK_FILE).display()
        )));
    }
    fchmod(&fd, Mode::from_bits_truncate(0o600))?;
    Ok(File::from(fd))
}

/// Takes the endpoint's lock, writing our pid in it; or says who holds it.
pub fn take(dir: &CursorDir) -> io::Result<Locked> {
    let mut file = open(dir)?;
    if flock(file.as_fd(), FlockOperation::NonBlockingLockExclusive).is_err() {
        return Ok(Locked::Held(read_pid(&mut file)));
    }
    file.set_len(0)?;
    file.rewind()?;
    writeln!(file, "{}", std::process::id())?;
    Ok(Locked::Ours(FollowerLock { file }))
}

/// The pid of the follower that holds the lock; `None` when none runs.
pub fn holder(dir: &CursorDir) -> io::Result<Option<u32>> {
    let mut file = open(dir)?;
    if flock(file.as_fd(), FlockOperation::NonBlockingLockShared).is_ok() {
        // The probe's lock let go at once (see `FollowerLock`'s drop).
        let _ = flock(file.as_fd(), FlockOperation::Unlock);
        return Ok(None);
    }
    Ok(Some(read_pid(&mut file).unwrap_or(0)))
}

fn read_pid(file: &mut File) -> Option<u32> {
    let mut text = String::new();
    file.take(32).read_to_string(&mut text).ok()?;
    text.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_taker_is_told_the_holders_pid() {
        let state = tether_os::testing::private_tempdir();
        let dir = CursorDir::open(state.path(), "k").unwrap();
        assert_eq!(holder(&dir).unwrap(), None);
        let Locked::Ours(lock) = take(&dir).unwrap() else {
            panic!("the lock is free");
        };
        // flock locks belong to the open file description: a second open is a second taker.
        assert!(
            matches!(take(&dir).unwrap(), Locked::Held(Some(pid)) if pid == std::process::id())
        );
        assert_eq!(holder(&dir).unwrap(), Some(std::process::id()));
        drop(lock);
        assert_eq!(holder(&dir).unwrap(), None);
    }
}
