//! Removing one session directory without ever following a symbolic link: everything is
//! opened relative to a directory descriptor with `O_NOFOLLOW`, each entry's type is taken
//! from `fstatat(AT_SYMLINK_NOFOLLOW)`, and a link is unlinked as a link, its target
//! untouched. Nothing on another file system (a mount point inside a session) is entered.

use std::ffi::OsString;
use std::io;
use std::os::fd::OwnedFd;

use rustix::fs::{AtFlags, FileType, RenameFlags};
use thiserror::Error;

use super::plan::Liveness;
use super::scan::{MAX_DEPTH, entry_names, liveness, open_dir_at, session_start};

/// The prefix of a session renamed aside while it is removed.
pub const TOMB_PREFIX: &str = ".pruning-";

#[derive(Debug, Error)]
pub enum RemoveError {
    /// Another prune (a retention pass of another front end) took it first.
    #[error("already removed")]
    AlreadyGone,
    #[error("it is live now: {0}")]
    BecameLive(String),
    #[error("it is no longer a directory (replaced by a link or a file?); left alone")]
    NotADirectory,
    #[error("{0}")]
    Io(#[from] io::Error),
    #[error(
        "it came back to life while being removed ({why}), and a new session took its name: it is left as {tomb}; run `tether prune` again later"
    )]
    LeftAside { why: String, tomb: String },
}

/// Removes the session `name` from the opened `sessions` directory, unless something runs in
/// it by then. It is first renamed aside (`.pruning-NAME-PID`), so that no process can join it
/// by name any more, then checked again, then emptied and removed; if it turned live, it is
/// renamed back.
pub fn remove_session(sessions: &OwnedFd, name: &OsString, now_ms: u64) -> Result<(), RemoveError> {
    let mut tomb = OsString::from(TOMB_PREFIX);
    tomb.push(name);
    tomb.push(format!("-{}", std::process::id()));
    match rustix::fs::renameat_with(
        sessions,
        name.as_os_str(),
        sessions,
        tomb.as_os_str(),
        RenameFlags::NOREPLACE,
    ) {
        Ok(()) => {}
        Err(rustix::io::Errno::NOENT) => return Err(RemoveError::AlreadyGone),
        Err(err) => return Err(io::Error::from(err).into()),
    }
    let dir = match open_dir_at(sessions, &tomb) {
        Ok(dir) => dir,
        Err(err) => {
            put_back(sessions, &tomb, name);
            return Err(match err {
                rustix::io::Errno::LOOP | rustix::io::Errno::NOTDIR => RemoveError::NotADirectory,
                err => io::Error::from(err).into(),
            });
        }
    };
    let checked = rustix::fs::fstat(&dir)
        .map_err(io::Error::from)
        .and_then(|stat| {
            // The device of `sessions/`: a session that is itself a mount point is not ours
            // to empty. Checked whole before anything is removed, so that a session is
            // either removed or left as it was.
            let dev = rustix::fs::fstat(sessions)?.st_dev;
            if stat.st_dev != dev {
                return Err(io::Error::other(format!(
                    "{} is a mount point: not removed",
                    name.to_string_lossy()
                )));
            }
            check_removable(&dir, dev, 0).map(|()| stat)
        });
    let stat = match checked {
        Ok(stat) => stat,
        Err(err) => {
            drop(dir);
            put_back(sessions, &tomb, name);
            return Err(err.into());
        }
    };
    if let Liveness::Live(why) = liveness(&dir, session_start(&dir).as_ref(), &stat, now_ms) {
        drop(dir);
        return match rustix::fs::renameat_with(
            sessions,
            tomb.as_os_str(),
            sessions,
            name.as_os_str(),
            RenameFlags::NOREPLACE,
        ) {
            Ok(()) => Err(RemoveError::BecameLive(why)),
            Err(_) => Err(RemoveError::LeftAside {
                why,
                tomb: tomb.to_string_lossy().into_owned(),
            }),
        };
    }
    empty_dir(&dir, stat.st_dev, 0)?;
    drop(dir);
    rustix::fs::unlinkat(sessions, tomb.as_os_str(), AtFlags::REMOVEDIR)
        .map_err(io::Error::from)?;
    Ok(())
}

fn put_back(sessions: &OwnedFd, tomb: &OsString, name: &OsString) {
    let _ = rustix::fs::renameat_with(
        sessions,
        tomb.as_os_str(),
        sessions,
        name.as_os_str(),
        RenameFlags::NOREPLACE,
    );
}

/// Whether [`empty_dir`] would get through `dir`: no directory deeper than [`MAX_DEPTH`],
/// none on another device (a mount point). Nothing is removed.
fn check_removable(dir: &OwnedFd, dev: u64, depth: usize) -> io::Result<()> {
    clear(dir, dev, depth, false)
}

/// Removes everything in `dir` (not `dir` itself): directories on device `dev` down to
/// [`MAX_DEPTH`], files, and links as links.
pub fn empty_dir(dir: &OwnedFd, dev: u64, depth: usize) -> io::Result<()> {
    clear(dir, dev, depth, true)
}

/// Walks `dir` as [`empty_dir`] does, removing what it walks when `remove` is set; without
/// it, only says whether the walk would get through.
fn clear(dir: &OwnedFd, dev: u64, depth: usize, remove: bool) -> io::Result<()> {
    if depth >= MAX_DEPTH {
        return Err(io::Error::other(format!(
            "directories nest deeper than {MAX_DEPTH} levels: not a journal tether wrote; remove it by hand"
        )));
    }
    for name in entry_names(dir)? {
        let stat = match rustix::fs::statat(dir, name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) => stat,
            Err(rustix::io::Errno::NOENT) => continue,
            Err(err) => return Err(err.into()),
        };
        if FileType::from_raw_mode(stat.st_mode) == FileType::Directory {
            if stat.st_dev != dev {
                return Err(io::Error::other(format!(
                    "{} is a mount point: not removed, and neither is its session",
                    name.to_string_lossy()
                )));
            }
            let child = open_dir_at(dir, &name)?;
            let opened = rustix::fs::fstat(&child)?;
            if (opened.st_dev, opened.st_ino) != (stat.st_dev, stat.st_ino) {
                return Err(io::Error::other(format!(
                    "{} changed while being removed; left alone",
                    name.to_string_lossy()
                )));
            }
            clear(&child, dev, depth + 1, remove)?;
            if remove {
                rustix::fs::unlinkat(dir, name.as_os_str(), AtFlags::REMOVEDIR)?;
            }
        } else if remove {
            // Files, and links as links: unlinkat never follows.
            match rustix::fs::unlinkat(dir, name.as_os_str(), AtFlags::empty()) {
                Ok(()) | Err(rustix::io::Errno::NOENT) => {}
                Err(err) => return Err(err.into()),
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::secure::open_dir_nofollow;

    #[test]
    fn links_are_removed_as_links_and_their_targets_survive() {
        let tmp = tempfile::tempdir().unwrap();
        let outside = tmp.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(outside.join("precious"), "keep me").unwrap();
        let sessions = tmp.path().join("sessions");
        let session = sessions.join("s1");
        std::fs::create_dir_all(session.join("01-cmd")).unwrap();
        std::fs::write(session.join("01-cmd/stdout.log"), "x").unwrap();
        std::os::unix::fs::symlink(&outside, session.join("01-cmd/escape")).unwrap();
        std::os::unix::fs::symlink(&outside, session.join("02-link")).unwrap();
        std::os::unix::fs::symlink(outside.join("precious"), session.join("file-link")).unwrap();
        let fd = open_dir_nofollow(&sessions).unwrap();
        remove_session(&fd, &OsString::from("s1"), u64::MAX).unwrap();
        assert!(!session.exists());
        assert_eq!(
            std::fs::read_to_string(outside.join("precious")).unwrap(),
            "keep me"
        );
        assert_eq!(
            std::fs::read_dir(&sessions).unwrap().count(),
            0,
            "no tomb left"
        );
    }

    #[test]
    fn a_session_that_cannot_be_removed_whole_is_left_as_it_was() {
        let tmp = tempfile::tempdir().unwrap();
        let sessions = tmp.path().join("sessions");
        let session = sessions.join("s1");
        std::fs::create_dir_all(session.join("01-cmd")).unwrap();
        std::fs::write(session.join("01-cmd/stdout.log"), "x").unwrap();
        // Nested deeper than a journal ever is, after a file that would go first.
        let deep: std::path::PathBuf = (0..MAX_DEPTH + 1).map(|i| format!("d{i}")).collect();
        std::fs::create_dir_all(session.join("02-deep").join(&deep)).unwrap();
        let fd = open_dir_nofollow(&sessions).unwrap();
        let err = remove_session(&fd, &OsString::from("s1"), u64::MAX).unwrap_err();
        assert!(err.to_string().contains("nest deeper"), "{err}");
        assert!(
            session.join("01-cmd/stdout.log").exists(),
            "nothing removed"
        );
        assert_eq!(
            std::fs::read_dir(&sessions).unwrap().count(),
            1,
            "no tomb left"
        );
    }

    #[test]
    fn a_session_another_prune_took_is_already_gone() {
        let tmp = tempfile::tempdir().unwrap();
        let fd = open_dir_nofollow(tmp.path()).unwrap();
        let err = remove_session(&fd, &OsString::from("gone"), u64::MAX).unwrap_err();
        assert!(matches!(err, RemoveError::AlreadyGone), "{err}");
    }

    #[test]
    fn a_session_that_is_a_link_is_not_followed() {
        let tmp = tempfile::tempdir().unwrap();
        let outside = tmp.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(outside.join("precious"), "keep me").unwrap();
        let sessions = tmp.path().join("sessions");
        std::fs::create_dir(&sessions).unwrap();
        std::os::unix::fs::symlink(&outside, sessions.join("s1")).unwrap();
        let fd = open_dir_nofollow(&sessions).unwrap();
        let err = remove_session(&fd, &OsString::from("s1"), u64::MAX).unwrap_err();
        assert!(matches!(err, RemoveError::NotADirectory), "{err}");
        assert!(outside.join("precious").exists());
        assert!(sessions.join("s1").is_symlink(), "put back as it was");
    }
}
