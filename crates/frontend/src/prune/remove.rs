//! Removing one session directory without ever following a symbolic link: everything is
//! opened relative to a directory descriptor with `O_NOFOLLOW`, each entry's type is taken
//! from `statx(AT_SYMLINK_NOFOLLOW)`, and a link is unlinked as a link, its target
//! untouched. Nothing on another mount (a mount point inside a session, a bind mount of the
//! same file system included) is entered or unlinked: the whole session is checked first, and
//! a session holding one is left as it was.

use std::ffi::OsString;
use std::io;
use std::os::fd::OwnedFd;
use std::path::Path;

use nix::errno::Errno;
use nix::fcntl::{RenameFlags, renameat2};
use nix::unistd::{UnlinkatFlags, unlinkat};
// `Entry` is statx's (rustix; nix has none), so its kinds are rustix's.
use rustix::fs::FileType;
use thiserror::Error;

use super::entry::Entry;
use super::plan::Liveness;
use super::scan::{MAX_DEPTH, entry_names, liveness, open_dir_at, session_start};
use tether_os::journal::tomb::tomb_name;

#[derive(Debug, Error)]
pub enum RemoveError {
    /// Another prune (a retention pass of another front end) took it first.
    #[error("already removed")]
    AlreadyGone,
    #[error("it is live now: {0}")]
    BecameLive(String),
    #[error("it is no longer a directory (replaced by a link or a file?); left alone")]
    NotADirectory,
    #[error(
        "{0} is a mount point: nothing on it is touched, and the session is not removed; unmount it, then prune again"
    )]
    MountPoint(String),
    #[error("{0}")]
    Io(#[from] io::Error),
    #[error("{why}; what is left of the session is back under its name")]
    PutBack { why: String },
    #[error(
        "it came back to life while being removed ({why}), and a new session took its name: it is left as {tomb}; run `tether prune` again later"
    )]
    LeftAside { why: String, tomb: String },
}

/// Removes the session `name` from the opened `sessions` directory, unless something runs in
/// it by then. It is first renamed aside (`.pruning-NAME-PID`), so that no process can join it
/// by name any more, then checked again, whole, then emptied and removed; if it turned live,
/// or something in it cannot be removed, it is renamed back.
pub fn remove_session(sessions: &OwnedFd, name: &OsString, now_ms: u64) -> Result<(), RemoveError> {
    let tomb = tomb_name(name, std::process::id());
    match rename(sessions, name, &tomb) {
        Ok(()) => {}
        Err(Errno::ENOENT) => return Err(RemoveError::AlreadyGone),
        // The kernel renames no mount point.
        Err(Errno::EBUSY) => {
            return Err(RemoveError::MountPoint(name.to_string_lossy().into_owned()));
        }
        Err(err) => return Err(io::Error::from(err).into()),
    }
    let dir = match open_dir_at(sessions, &tomb) {
        Ok(dir) => dir,
        Err(err) => {
            put_back(sessions, &tomb, name);
            return Err(match err {
                Errno::ELOOP | Errno::ENOTDIR => RemoveError::NotADirectory,
                err => io::Error::from(err).into(),
            });
        }
    };
    let shown = name.to_string_lossy();
    // Checked whole before anything is removed, so that a session is either removed or left
    // as it was: the session on the mount of `sessions/`, and everything in it on the
    // session's.
    let checked = Entry::of(sessions)
        .and_then(|around| Ok((around, Entry::of(&dir)?)))
        .map_err(|err| RemoveError::Io(err.into()))
        .and_then(|(around, session)| {
            if !session.on_mount_of(&around) {
                return Err(RemoveError::MountPoint(shown.clone().into_owned()));
            }
            // Walked without removing: would the removal get through?
            clear(&dir, &session, Path::new(""), 0, false)?;
            let stat = nix::sys::stat::fstat(&dir).map_err(io::Error::from)?;
            Ok((session, stat))
        });
    let (session, stat) = match checked {
        Ok(checked) => checked,
        Err(err) => {
            drop(dir);
            put_back(sessions, &tomb, name);
            return Err(err);
        }
    };
    if let Liveness::Live(why) = liveness(&dir, session_start(&dir).as_ref(), &stat, now_ms) {
        drop(dir);
        return match rename(sessions, &tomb, name) {
            Ok(()) => Err(RemoveError::BecameLive(why)),
            Err(_) => Err(RemoveError::LeftAside {
                why,
                tomb: tomb.to_string_lossy().into_owned(),
            }),
        };
    }
    let emptied = clear(&dir, &session, Path::new(""), 0, true).and_then(|()| {
        drop(dir);
        unlinkat(sessions, tomb.as_os_str(), UnlinkatFlags::RemoveDir)
            .map_err(|err| io::Error::from(err).into())
    });
    if let Err(err) = emptied {
        // Back under its name, so that `tether sessions` and the next prune see it.
        put_back(sessions, &tomb, name);
        return Err(RemoveError::PutBack {
            why: err.to_string(),
        });
    }
    Ok(())
}

fn put_back(sessions: &OwnedFd, tomb: &OsString, name: &OsString) {
    let _ = rename(sessions, tomb, name);
}

/// Renames `from` to `to` in `sessions`, never over an entry that is there.
fn rename(sessions: &OwnedFd, from: &OsString, to: &OsString) -> nix::Result<()> {
    renameat2(
        sessions,
        from.as_os_str(),
        sessions,
        to.as_os_str(),
        RenameFlags::RENAME_NOREPLACE,
    )
}

/// Walks the session's directory `dir` (at `at` in it, which is `session`), removing what
/// it walks when `remove` is set (directories on the mount of `session` down to
/// [`MAX_DEPTH`], files, and links as links; not `dir` itself); without it, only says
/// whether the walk would get through: no directory deeper than [`MAX_DEPTH`], no entry on
/// another mount. Every entry is checked to be on the session's mount before it is entered
/// or unlinked, even after a check, as a mount may be made meanwhile.
fn clear(
    dir: &OwnedFd,
    session: &Entry,
    at: &Path,
    depth: usize,
    remove: bool,
) -> Result<(), RemoveError> {
    if depth >= MAX_DEPTH {
        return Err(io::Error::other(format!(
            "directories nest deeper than {MAX_DEPTH} levels: not a journal tether wrote; remove it by hand"
        ))
        .into());
    }
    let mount_point = |path: &Path| RemoveError::MountPoint(path.to_string_lossy().into_owned());
    for name in entry_names(dir)? {
        let path = at.join(&name);
        let entry = match Entry::at(dir, &name) {
            Ok(entry) => entry,
            Err(rustix::io::Errno::NOENT) => continue,
            Err(err) => return Err(io::Error::from(err).into()),
        };
        if !entry.on_mount_of(session) {
            return Err(mount_point(&path));
        }
        if entry.kind == FileType::Directory {
            let child = open_dir_at(dir, &name).map_err(io::Error::from)?;
            let opened = Entry::of(&child).map_err(io::Error::from)?;
            if !opened.on_mount_of(session) {
                return Err(mount_point(&path));
            }
            if (opened.dev, opened.ino) != (entry.dev, entry.ino) {
                return Err(io::Error::other(format!(
                    "{} changed while being removed; left alone",
                    path.display()
                ))
                .into());
            }
            clear(&child, session, &path, depth + 1, remove)?;
            if remove {
                unlinkat(dir, name.as_os_str(), UnlinkatFlags::RemoveDir)
                    .map_err(io::Error::from)?;
            }
        } else if remove {
            // Files, and links as links: unlinkat never follows.
            match unlinkat(dir, name.as_os_str(), UnlinkatFlags::NoRemoveDir) {
                Ok(()) | Err(Errno::ENOENT) => {}
                // Mounted on since the check: the kernel unlinks no mount point.
                Err(Errno::EBUSY) => return Err(mount_point(&path)),
                Err(err) => return Err(io::Error::from(err).into()),
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tether_os::journal::secure::open_dir_nofollow;

    /// `parent/sessions/s1` holding one command's journal, `01-cmd/stdout.log`.
    fn one_session(parent: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
        let sessions = parent.join("sessions");
        let session = sessions.join("s1");
        tether_os::testing::private_dir(session.join("01-cmd"));
        tether_os::testing::write_private(session.join("01-cmd/stdout.log"), "x");
        (sessions, session)
    }

    #[test]
    fn links_are_removed_as_links_and_their_targets_survive() {
        let tmp = tether_os::testing::private_tempdir();
        let outside = tmp.path().join("outside");
        tether_os::testing::private_dir(&outside);
        tether_os::testing::write_private(outside.join("precious"), "keep me");
        let (sessions, session) = one_session(tmp.path());
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
        let tmp = tether_os::testing::private_tempdir();
        let (sessions, session) = one_session(tmp.path());
        // Nested deeper than a journal ever is, after a file that would go first.
        let deep: std::path::PathBuf = (0..MAX_DEPTH + 1).map(|i| format!("d{i}")).collect();
        tether_os::testing::private_dir(session.join("02-deep").join(&deep));
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
        let tmp = tether_os::testing::private_tempdir();
        let fd = open_dir_nofollow(tmp.path()).unwrap();
        let err = remove_session(&fd, &OsString::from("gone"), u64::MAX).unwrap_err();
        assert!(matches!(err, RemoveError::AlreadyGone), "{err}");
    }

    #[test]
    fn a_session_that_is_a_link_is_not_followed() {
        let tmp = tether_os::testing::private_tempdir();
        let outside = tmp.path().join("outside");
        tether_os::testing::private_dir(&outside);
        tether_os::testing::write_private(outside.join("precious"), "keep me");
        let sessions = tmp.path().join("sessions");
        tether_os::testing::private_dir(&sessions);
        std::os::unix::fs::symlink(&outside, sessions.join("s1")).unwrap();
        let fd = open_dir_nofollow(&sessions).unwrap();
        let err = remove_session(&fd, &OsString::from("s1"), u64::MAX).unwrap_err();
        assert!(matches!(err, RemoveError::NotADirectory), "{err}");
        assert!(outside.join("precious").exists());
        assert!(sessions.join("s1").is_symlink(), "put back as it was");
    }
}
