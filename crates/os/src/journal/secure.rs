//! Journals hold secrets (a command's environment and everything it printed), so they are
//! private by construction: every directory is 0700 and every file 0600 whatever the umask,
//! each directory is opened once and everything below it is created relative to that
//! descriptor with `O_NOFOLLOW` and `O_EXCL`, so no path component can be swapped for a
//! symbolic link between a check and its use. The state directory is checked as tmux checks
//! its socket directory: a real directory, owned by us, writable by nobody else.

use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{FcntlArg, OFlag, fcntl, openat, renameat};
use nix::sys::stat::{FileStat, Mode, SFlag, fchmod, fstat, mkdirat};
use nix::unistd::{UnlinkatFlags, unlinkat};
use serde::Serialize;
use thiserror::Error;

const DIR_MODE: u32 = 0o700;
const FILE_MODE: u32 = 0o600;

/// Why a directory cannot hold journals.
#[derive(Debug, Error)]
pub enum UnsafeDir {
    #[error(
        "{path} is a symbolic link; tether does not follow links in its state directory: point --state-dir at the real directory"
    )]
    Symlink { path: PathBuf },
    #[error(
        "{path} is owned by uid {owner}, not by you (uid {me}); journals hold secrets: use a directory of your own (--state-dir or TETHER_STATE_DIR)"
    )]
    NotOwned { path: PathBuf, owner: u32, me: u32 },
    #[error(
        "{path} is writable by other users (mode {mode:04o}); journals hold secrets: use a directory only you can write (mkdir -m 700 DIR), or `chmod go-w` it"
    )]
    Writable { path: PathBuf, mode: u32 },
    #[error("{path} is not a directory")]
    NotADirectory { path: PathBuf },
    #[error("cannot use {path} for journals: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

impl UnsafeDir {
    fn io(path: &Path, source: impl Into<io::Error>) -> UnsafeDir {
        UnsafeDir::Io {
            path: path.to_path_buf(),
            source: source.into(),
        }
    }
}

/// An opened journal directory: the state directory, `sessions/`, a session or a command.
/// Its path is kept for messages and for readers; writes go through the descriptor.
#[derive(Debug)]
pub struct JournalDir {
    fd: OwnedFd,
    path: PathBuf,
}

impl JournalDir {
    /// Opens the state directory, creating it (and missing parents, 0700) if needed. Its last
    /// component must not be a symbolic link; it must be ours and writable by nobody else.
    /// A directory of ours that others may merely read (made by an older tether) is narrowed
    /// to 0700.
    pub fn open_state(path: &Path) -> Result<JournalDir, UnsafeDir> {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty())
            && !parent.exists()
        {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(DIR_MODE)
                .create(parent)
                .map_err(|e| UnsafeDir::io(parent, e))?;
        }
        match nix::unistd::mkdir(path, Mode::from_bits_truncate(DIR_MODE)) {
            Ok(()) | Err(Errno::EEXIST) => {}
            Err(e) => return Err(UnsafeDir::io(path, e)),
        }
        let fd =
            nix::fcntl::open(path, dir_flags(), Mode::empty()).map_err(|e| open_error(path, e))?;
        JournalDir::from_fd(fd, path.to_path_buf())
    }

    /// Opens the subdirectory `name`, creating it if it does not exist (`sessions/`).
    pub fn open_or_create(&self, name: &str) -> Result<JournalDir, UnsafeDir> {
        let path = self.path.join(name);
        match mkdirat(&self.fd, name, Mode::from_bits_truncate(DIR_MODE)) {
            Ok(()) | Err(Errno::EEXIST) => {}
            Err(e) => return Err(UnsafeDir::io(&path, e)),
        }
        let fd =
            openat(&self.fd, name, dir_flags(), Mode::empty()).map_err(|e| open_error(&path, e))?;
        JournalDir::from_fd(fd, path)
    }

    /// Creates the subdirectory `name`, which must not exist yet (a session or a command).
    /// `ErrorKind::AlreadyExists` when it does.
    pub fn create_dir(&self, name: &str) -> io::Result<JournalDir> {
        mkdirat(&self.fd, name, Mode::from_bits_truncate(DIR_MODE))?;
        let path = self.path.join(name);
        let fd = openat(&self.fd, name, dir_flags(), Mode::empty())?;
        JournalDir::from_fd(fd, path).map_err(io::Error::other)
    }

    /// Removes the empty subdirectory `name` (a session whose creation failed half-way).
    pub fn remove_dir(&self, name: &str) -> io::Result<()> {
        Ok(unlinkat(&self.fd, name, UnlinkatFlags::RemoveDir)?)
    }

    /// The directory `fd` (at `path`) once checked, and made 0700 if it was not: how every
    /// `JournalDir` is made, one opened here or one handed over by another process (a
    /// broker's journal directory).
    pub fn from_fd(fd: OwnedFd, path: PathBuf) -> Result<JournalDir, UnsafeDir> {
        let stat = fstat(&fd).map_err(|e| UnsafeDir::io(&path, e))?;
        check_dir(&stat, &path)?;
        if stat.st_mode & 0o777 != DIR_MODE {
            fchmod(&fd, Mode::from_bits_truncate(DIR_MODE)).map_err(|e| UnsafeDir::io(&path, e))?;
        }
        Ok(JournalDir { fd, path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn join(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    /// A second descriptor on the same directory, to hand to a broker.
    pub fn try_clone_fd(&self) -> io::Result<OwnedFd> {
        self.fd.try_clone()
    }

    /// Creates the file `name`, which must not exist (`O_EXCL`: a planted file or link is
    /// refused, never written through), 0600, for writing; `append` for logs.
    pub fn create_file(&self, name: &str, append: bool) -> io::Result<File> {
        let mut flags = OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW;
        flags |= OFlag::O_CLOEXEC;
        if append {
            flags |= OFlag::O_APPEND;
        }
        let fd = openat(&self.fd, name, flags, Mode::from_bits_truncate(FILE_MODE))?;
        // The umask may have taken bits away; never added any.
        fchmod(&fd, Mode::from_bits_truncate(FILE_MODE))?;
        Ok(File::from(fd))
    }

    /// Opens the existing regular file `name` to append to it (an event log a killed broker
    /// left, a joined session's `launcher.jsonl`): no link followed, a FIFO put in its place
    /// neither waited on nor opened, and only a file of ours with one name: a hard link a
    /// command planted there (to another file of its user's) is never written through.
    pub fn open_append(&self, name: &str) -> io::Result<File> {
        let flags = OFlag::O_WRONLY
            | OFlag::O_APPEND
            | OFlag::O_NOFOLLOW
            | OFlag::O_NONBLOCK
            | OFlag::O_NOCTTY
            | OFlag::O_CLOEXEC;
        let file = regular(openat(&self.fd, name, flags, Mode::empty())?)?;
        let stat = fstat(&file)?;
        if stat.st_nlink != 1 || stat.st_uid != nix::unistd::geteuid().as_raw() {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                "not a file of ours with one name (a link planted in a journal?)",
            ));
        }
        Ok(file)
    }

    /// Writes `value` as pretty JSON to `name` so that readers see either nothing or all of
    /// it. The temporary file is removed if anything fails (a full disk leaves nothing).
    pub fn write_json_atomic<T: Serialize>(&self, name: &str, value: &T) -> io::Result<()> {
        let mut bytes = serde_json::to_vec_pretty(value)?;
        bytes.push(b'\n');
        self.write_atomic_as(name, &bytes, Synced::Yes)
    }

    /// As [`JournalDir::write_json_atomic`] for a file a journal writes once (`session.json`,
    /// `command.json`, `result.json`): readers still see nothing or all of it, but it is not
    /// synced. The sync is what keeps an older version whole across a crash, and there is
    /// none; without one a crash may lose the file as it loses the events written beside it
    /// (`events.jsonl` is flushed, never synced), which the readers of a journal tolerate. It
    /// cost every command two or three disk flushes on its path.
    pub fn write_json_once<T: Serialize>(&self, name: &str, value: &T) -> io::Result<()> {
        let mut bytes = serde_json::to_vec_pretty(value)?;
        bytes.push(b'\n');
        self.write_atomic_as(name, &bytes, Synced::No)
    }

    /// Writes `bytes` to `name`, 0600, replacing it whole: through a temporary file made with
    /// `O_EXCL | O_NOFOLLOW`, synced, then renamed over it, so a planted file or link is never
    /// written through and readers see the old or the new, never half. The temporary file is
    /// removed if anything fails (a full disk leaves nothing).
    pub fn write_atomic(&self, name: &str, bytes: &[u8]) -> io::Result<()> {
        self.write_atomic_as(name, bytes, Synced::Yes)
    }

    fn write_atomic_as(&self, name: &str, bytes: &[u8], synced: Synced) -> io::Result<()> {
        let tmp = format!(".{name}.{}.tmp", std::process::id());
        // A temporary left by a crash of a process with our pid; never one of someone else's
        // (nobody else can write here).
        let _ = unlinkat(&self.fd, tmp.as_str(), UnlinkatFlags::NoRemoveDir);
        let written = self.create_file(&tmp, false).and_then(|mut file| {
            file.write_all(bytes)?;
            // Synced before the rename: a crash then leaves the old file or the new one,
            // never an empty one in the old one's place.
            match synced {
                Synced::Yes => file.sync_all(),
                Synced::No => Ok(()),
            }
        });
        let renamed = written.and_then(|()| {
            renameat(&self.fd, tmp.as_str(), &self.fd, name).map_err(io::Error::from)
        });
        if renamed.is_err() {
            let _ = unlinkat(&self.fd, tmp.as_str(), UnlinkatFlags::NoRemoveDir);
        }
        renamed
    }
}

/// Whether [`JournalDir::write_atomic_as`] syncs the file before renaming it into place.
#[derive(Clone, Copy)]
enum Synced {
    Yes,
    No,
}

impl AsFd for JournalDir {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// Checks, for a reader, the state directory and its `sessions/` as [`JournalDir::open_state`]
/// does, without creating or changing anything: journals in a directory that someone else
/// owns or may write are not to be trusted. Missing directories are fine (nothing to read).
pub fn check_for_reading(state: &Path) -> Result<(), UnsafeDir> {
    for path in [state.to_path_buf(), state.join("sessions")] {
        let fd = match nix::fcntl::open(&path, dir_flags(), Mode::empty()) {
            Ok(fd) => fd,
            Err(Errno::ENOENT) => return Ok(()),
            Err(e) => return Err(open_error(&path, e)),
        };
        let stat = fstat(&fd).map_err(|e| UnsafeDir::io(&path, e))?;
        check_dir(&stat, &path)?;
    }
    Ok(())
}

/// Opens a journal file by path for reading, as a reader must: without following a link in
/// its last component and without blocking on a FIFO; anything but a regular file is refused.
pub fn open_regular(path: &Path) -> io::Result<File> {
    let fd = nix::fcntl::open(path, read_flags(), Mode::empty())?;
    regular(fd)
}

/// [`open_regular`] of the file `name` in the opened directory `dir`. (A file read whole is
/// read through [`super::bounded`].)
pub fn open_regular_at(dir: &impl AsFd, name: &str) -> io::Result<File> {
    regular(openat(dir, name, read_flags(), Mode::empty())?)
}

/// A file of the state directory that is the user's alone (`notify-rate`, the shim's
/// notices), created `0600` whatever the umask, opened without following a link and without
/// blocking, and refused unless it is a regular file of ours that nobody else may read or
/// write: a FIFO or a link put there hangs and redirects nothing.
pub fn open_private(path: &Path, append: bool) -> Result<File, PrivateFileError> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let mut options = std::fs::OpenOptions::new();
    if append {
        options.append(true);
    } else {
        options.read(true).write(true);
    }
    let file = options
        .create(true)
        .mode(0o600)
        .custom_flags((OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC).bits())
        .open(path)
        .map_err(|source| PrivateFileError::Open {
            path: path.to_path_buf(),
            source,
        })?;
    let private = file.metadata().is_ok_and(|meta| {
        meta.file_type().is_file()
            && meta.uid() == nix::unistd::geteuid().as_raw()
            && meta.mode() & 0o077 == 0
    });
    if !private {
        return Err(PrivateFileError::NotPrivate {
            path: path.to_path_buf(),
        });
    }
    Ok(file)
}

/// Why [`open_private`] refused.
#[derive(Debug, Error)]
pub enum PrivateFileError {
    #[error("cannot open {}: {source}", path.display())]
    Open { path: PathBuf, source: io::Error },
    #[error(
        "{} is not a private regular file of yours; remove it and it is made again",
        path.display()
    )]
    NotPrivate { path: PathBuf },
}

fn regular(fd: OwnedFd) -> io::Result<File> {
    let stat = fstat(&fd)?;
    if file_type(&stat) != SFlag::S_IFREG {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a regular file (a journal never holds links, FIFOs or devices)",
        ));
    }
    // Opened non-blocking so that a FIFO could not hang the open; a regular file never
    // blocks, and readers expect plain blocking reads. (O_APPEND, which a writer opened
    // with, is kept.)
    let flags = OFlag::from_bits_truncate(fcntl(&fd, FcntlArg::F_GETFL)?);
    fcntl(&fd, FcntlArg::F_SETFL(flags & !OFlag::O_NONBLOCK))?;
    Ok(File::from(fd))
}

fn dir_flags() -> OFlag {
    OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC
}

fn read_flags() -> OFlag {
    OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_NOCTTY | OFlag::O_CLOEXEC
}

/// The file type bits of `stat`'s mode.
pub fn file_type(stat: &FileStat) -> SFlag {
    SFlag::from_bits_truncate(stat.st_mode & SFlag::S_IFMT.bits())
}

fn open_error(path: &Path, errno: Errno) -> UnsafeDir {
    match errno {
        // O_NOFOLLOW on a link gives ELOOP; O_DIRECTORY on anything else ENOTDIR.
        Errno::ELOOP => UnsafeDir::Symlink {
            path: path.to_path_buf(),
        },
        Errno::ENOTDIR if is_symlink(path) => UnsafeDir::Symlink {
            path: path.to_path_buf(),
        },
        Errno::ENOTDIR => UnsafeDir::NotADirectory {
            path: path.to_path_buf(),
        },
        e => UnsafeDir::io(path, e),
    }
}

fn is_symlink(path: &Path) -> bool {
    path.symlink_metadata()
        .is_ok_and(|m| m.file_type().is_symlink())
}

/// The tmux rule: ours, and no one else may write to it.
fn check_dir(stat: &FileStat, path: &Path) -> Result<(), UnsafeDir> {
    let path = path.to_path_buf();
    match unfit_dir(stat, 0o022) {
        None => Ok(()),
        Some(Unfit::NotADirectory) => Err(UnsafeDir::NotADirectory { path }),
        Some(Unfit::NotOwned { owner, me }) => Err(UnsafeDir::NotOwned { path, owner, me }),
        Some(Unfit::Mode { mode }) => Err(UnsafeDir::Writable { path, mode }),
    }
}

/// Why a directory may not hold secrets, by the tmux rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unfit {
    NotADirectory,
    NotOwned {
        owner: u32,
        me: u32,
    },
    /// One of the forbidden mode bits is set; `mode` is the whole mode.
    Mode {
        mode: u32,
    },
}

/// The tmux rule over an `fstat` of an opened directory: a directory, owned by our
/// effective uid, with none of the `forbidden` mode bits (`0o022` for the state directory,
/// `0o077` for the control sockets' directory).
pub fn unfit_dir(stat: &FileStat, forbidden: u32) -> Option<Unfit> {
    if file_type(stat) != SFlag::S_IFDIR {
        return Some(Unfit::NotADirectory);
    }
    let me = nix::unistd::geteuid().as_raw();
    if stat.st_uid != me {
        return Some(Unfit::NotOwned {
            owner: stat.st_uid,
            me,
        });
    }
    if stat.st_mode & forbidden != 0 {
        return Some(Unfit::Mode {
            mode: stat.st_mode & 0o7777,
        });
    }
    None
}

/// Opens a directory without following a link in its last component (`ELOOP` or `ENOTDIR`
/// for a link), close-on-exec.
pub fn open_dir_nofollow(path: &Path) -> nix::Result<OwnedFd> {
    nix::fcntl::open(path, dir_flags(), Mode::empty())
}

/// Text for a path that may not be UTF-8: JSON holds text, and a journal must start whatever
/// its directory is called.
pub fn lossy(path: &Path) -> PathBuf {
    PathBuf::from(path.to_string_lossy().into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    fn mode(path: &Path) -> u32 {
        std::fs::symlink_metadata(path).unwrap().mode() & 0o7777
    }

    /// A file a journal appends to (an event log a reclaim finishes, a joined session's
    /// `launcher.jsonl`) is written only if it is ours with one name: a hard link a
    /// command planted there, to another file of its user's, is refused, as is a FIFO.
    #[test]
    fn appends_only_to_a_private_file_with_one_name() {
        let tmp = crate::testing::private_tempdir();
        let dir = JournalDir::open_state(&tmp.path().join("state")).unwrap();
        dir.create_file("events.jsonl", true).unwrap();
        assert!(dir.open_append("events.jsonl").is_ok());

        let elsewhere = tmp.path().join("bashrc");
        crate::testing::write_private(&elsewhere, "mine\n");
        std::fs::hard_link(&elsewhere, dir.join("launcher.jsonl")).unwrap();
        let refused = dir.open_append("launcher.jsonl").unwrap_err();
        assert_eq!(refused.kind(), io::ErrorKind::PermissionDenied, "{refused}");
        assert_eq!(std::fs::read_to_string(&elsewhere).unwrap(), "mine\n");

        nix::unistd::mkfifo(&dir.join("fifo"), Mode::from_bits_truncate(0o600)).unwrap();
        assert!(dir.open_append("fifo").is_err());
    }

    #[test]
    fn creates_private_dirs_and_files_whatever_the_umask() {
        let tmp = crate::testing::private_tempdir();
        let state = tmp.path().join("a/b/state");
        let old = nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o000));
        let result = (|| {
            let dir = JournalDir::open_state(&state)?;
            let sessions = dir.open_or_create("sessions")?;
            let session = sessions
                .create_dir("s1")
                .map_err(|e| UnsafeDir::io(&state, e))?;
            session
                .create_file("log", true)
                .map_err(|e| UnsafeDir::io(&state, e))?;
            session
                .write_json_atomic("x.json", &1)
                .map_err(|e| UnsafeDir::io(&state, e))?;
            Ok::<_, UnsafeDir>(())
        })();
        nix::sys::stat::umask(old);
        result.unwrap();
        assert_eq!(mode(&state), 0o700);
        assert_eq!(mode(&tmp.path().join("a")), 0o700);
        assert_eq!(mode(&state.join("sessions/s1")), 0o700);
        assert_eq!(mode(&state.join("sessions/s1/log")), 0o600);
        assert_eq!(mode(&state.join("sessions/s1/x.json")), 0o600);
        let names: Vec<_> = std::fs::read_dir(state.join("sessions/s1"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 2, "no temporary file is left: {names:?}");
    }

    #[test]
    fn refuses_links_shared_dirs_and_planted_files() {
        let tmp = crate::testing::private_tempdir();
        let real = tmp.path().join("real");
        crate::testing::private_dir(&real);
        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        assert!(matches!(
            JournalDir::open_state(&link),
            Err(UnsafeDir::Symlink { .. })
        ));

        let shared = tmp.path().join("shared");
        crate::testing::private_dir(&shared);
        crate::testing::loosen(&shared, 0o1777);
        let err = JournalDir::open_state(&shared).unwrap_err();
        assert!(
            matches!(err, UnsafeDir::Writable { mode: 0o1777, .. }),
            "{err}"
        );
        assert!(err.to_string().contains("writable by other users"));

        // Readable by others only (an older tether's 0755): narrowed, not refused.
        crate::testing::loosen(&real, 0o755);
        let dir = JournalDir::open_state(&real).unwrap();
        assert_eq!(mode(&real), 0o700);

        std::os::unix::fs::symlink("/etc/passwd", real.join("stdout.log")).unwrap();
        assert!(dir.create_file("stdout.log", false).is_err());
        assert!(open_regular_at(&dir.fd, "stdout.log").is_err());
        assert!(open_regular(&real.join("stdout.log")).is_err());
        std::os::unix::fs::symlink(&shared, real.join("sessions")).unwrap();
        assert!(matches!(
            dir.open_or_create("sessions"),
            Err(UnsafeDir::Symlink { .. })
        ));
    }

    #[test]
    fn a_failed_atomic_write_leaves_no_temporary_file() {
        let tmp = crate::testing::private_tempdir();
        let dir = JournalDir::open_state(&tmp.path().join("s")).unwrap();
        // The rename onto a non-empty directory fails, as a full disk fails the write.
        crate::testing::private_dir(dir.join("session.json/x"));
        assert!(dir.write_json_atomic("session.json", &1).is_err());
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["session.json"]);
    }

    #[test]
    fn readers_refuse_fifos_without_blocking() {
        let tmp = crate::testing::private_tempdir();
        let fifo = tmp.path().join("stdout.log");
        nix::unistd::mkfifo(&fifo, Mode::from_bits_truncate(0o600)).unwrap();
        let err = open_regular(&fifo).unwrap_err();
        assert!(err.to_string().contains("not a regular file"), "{err}");
        assert!(open_regular(Path::new("/dev/null")).is_err());
        // Nor is a FIFO in an event log's place opened to append to (no reader: it would
        // wait for good).
        let dir = JournalDir::open_state(&tmp.path().join("j")).unwrap();
        nix::unistd::mkfifo(&dir.join("events.jsonl"), Mode::from_bits_truncate(0o600)).unwrap();
        assert!(dir.open_append("events.jsonl").is_err());
        std::fs::remove_file(dir.join("events.jsonl")).unwrap();
        crate::testing::write_private(dir.join("events.jsonl"), b"a\n");
        std::io::Write::write_all(&mut dir.open_append("events.jsonl").unwrap(), b"b\n").unwrap();
        assert_eq!(std::fs::read(dir.join("events.jsonl")).unwrap(), b"a\nb\n");
    }
}
