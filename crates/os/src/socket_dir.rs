//! Where control sockets live, and the rules a directory and a path must meet before a
//! broker listens there or a front end connects.
//!
//! The directory is `$XDG_RUNTIME_DIR/tether/` (or `/tmp/tether-<uid>/` without one; with
//! `-pidns-<inode>` in a PID namespace other than the first, see [`socket_dir_for`]), made
//! 0700 and checked as tmux checks its own: a real directory (not a link), owned by us, with
//! no group or other bits at all. A socket path must fit `sockaddr_un` (108 bytes with its
//! NUL); names are short on purpose: the broker's pid and start time.

use std::ffi::OsStr;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::sys::stat::Mode;
use thiserror::Error;

use crate::journal::secure::{Unfit, open_dir_nofollow, unfit_dir};
use tether_protocol::protocol::BrokerIdentity;

/// The longest socket path the kernel takes: `sun_path` is 108 bytes, NUL included.
pub const SOCKET_PATH_MAX: usize = 107;

/// Why control sockets cannot live in a directory, or at a path.
#[derive(Debug, Error)]
pub enum SocketDirError {
    #[error(
        "{path} is a symbolic link; control sockets live only in a real directory: remove the link (tether makes the directory itself)"
    )]
    Symlink { path: PathBuf },
    #[error(
        "{path} is owned by uid {owner}, not by you (uid {me}): someone else could listen in your place; remove it, or set XDG_RUNTIME_DIR to a directory of your own"
    )]
    NotOwned { path: PathBuf, owner: u32, me: u32 },
    #[error(
        "{path} has mode {mode:04o}: others may reach the control sockets in it; `chmod 700 {path}`"
    )]
    Open { path: PathBuf, mode: u32 },
    #[error("{path} is not a directory; remove it, or set XDG_RUNTIME_DIR elsewhere")]
    NotADirectory { path: PathBuf },
    #[error(
        "the control socket path {path} is {len} bytes, over the {SOCKET_PATH_MAX}-byte limit of Unix sockets; set XDG_RUNTIME_DIR to a shorter directory"
    )]
    TooLong { path: PathBuf, len: usize },
    #[error("cannot use {path} for control sockets: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl SocketDirError {
    /// A short code for the journal (`control_unavailable`).
    pub fn code(&self) -> &'static str {
        match self {
            SocketDirError::Symlink { .. } => "symlink",
            SocketDirError::NotOwned { .. } => "not_owned",
            SocketDirError::Open { .. } => "unsafe_mode",
            SocketDirError::NotADirectory { .. } => "not_a_directory",
            SocketDirError::TooLong { .. } => "path_too_long",
            SocketDirError::Io { .. } => "io",
        }
    }

    fn io(path: &Path, source: impl Into<std::io::Error>) -> SocketDirError {
        SocketDirError::Io {
            path: path.to_path_buf(),
            source: source.into(),
        }
    }
}

/// The directory for control sockets: `XDG_RUNTIME_DIR/tether` when `xdg_runtime_dir` is
/// an absolute path (the XDG spec says to ignore anything else), else `/tmp/tether-<uid>`;
/// with `-pidns-<inode>` after it in a PID namespace other than the first (`pid_namespace`).
///
/// What the directory holds is named by pid (a broker's socket and journal link, an agent's
/// shims directory), and a tether judges whether each maker still runs by reading `/proc`:
/// one in another PID namespace would read other processes under those pids, or none, and
/// take the live for the dead (removing a running agent's shims, reclaiming a running
/// broker's journal). So each PID namespace has a directory of its own.
pub fn socket_dir_for(
    xdg_runtime_dir: Option<&OsStr>,
    uid: u32,
    pid_namespace: Option<u64>,
) -> PathBuf {
    let suffix = pid_namespace.map_or(String::new(), |inode| format!("-pidns-{inode}"));
    match xdg_runtime_dir.map(Path::new) {
        Some(dir) if dir.is_absolute() => dir.join(format!("tether{suffix}")),
        _ => PathBuf::from(format!("/tmp/tether-{uid}{suffix}")),
    }
}

/// The inode of the first PID namespace's `ns/pid` file (the kernel's `PROC_PID_INIT_INO`).
const INITIAL_PID_NAMESPACE: u64 = 0xEFFF_FFFC;

/// This process's PID namespace (the inode of `/proc/self/ns/pid`) when it is not the first
/// one; `None` in the first, or when it cannot be read. Read once: tether never changes its
/// namespace, and a shim call asks for the socket directory more than once.
pub fn own_pid_namespace() -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    static OWN: std::sync::OnceLock<Option<u64>> = std::sync::OnceLock::new();
    *OWN.get_or_init(|| {
        let inode = std::fs::metadata("/proc/self/ns/pid").ok()?.ino();
        (inode != INITIAL_PID_NAMESPACE).then_some(inode)
    })
}

/// [`socket_dir_for`] this process's environment, effective uid and PID namespace.
pub fn socket_dir() -> PathBuf {
    socket_dir_for(
        std::env::var_os("XDG_RUNTIME_DIR").as_deref(),
        nix::unistd::geteuid().as_raw(),
        own_pid_namespace(),
    )
}

/// Creates the socket directory (0700) if it does not exist, then checks it. Returns it
/// opened.
pub fn prepare(dir: &Path) -> Result<OwnedFd, SocketDirError> {
    match nix::unistd::mkdir(dir, Mode::from_bits_truncate(0o700)) {
        Ok(()) | Err(Errno::EEXIST) => {}
        Err(err) => return Err(SocketDirError::io(dir, err)),
    }
    check(dir)
}

/// Checks the socket directory without creating anything: a real directory, ours, with no
/// group or other bits. Returns it opened.
pub fn check(dir: &Path) -> Result<OwnedFd, SocketDirError> {
    let path = dir.to_path_buf();
    let fd = open_dir_nofollow(dir).map_err(|err| match err {
        Errno::ELOOP => SocketDirError::Symlink { path: path.clone() },
        Errno::ENOTDIR
            if dir
                .symlink_metadata()
                .is_ok_and(|m| m.file_type().is_symlink()) =>
        {
            SocketDirError::Symlink { path: path.clone() }
        }
        Errno::ENOTDIR => SocketDirError::NotADirectory { path: path.clone() },
        err => SocketDirError::io(dir, err),
    })?;
    let stat = nix::sys::stat::fstat(&fd).map_err(|err| SocketDirError::io(dir, err))?;
    match unfit_dir(&stat, 0o077) {
        None => Ok(fd),
        Some(Unfit::NotADirectory) => Err(SocketDirError::NotADirectory { path }),
        Some(Unfit::NotOwned { owner, me }) => Err(SocketDirError::NotOwned { path, owner, me }),
        Some(Unfit::Mode { mode }) => Err(SocketDirError::Open { path, mode }),
    }
}

/// The socket of a broker: `<pid>-<start ticks>.sock`, with `.N` before the extension for
/// the Nth attempt after a name turned out to be taken by a live socket.
pub fn socket_path(dir: &Path, broker: &BrokerIdentity, attempt: u32) -> PathBuf {
    let name = match attempt {
        0 | 1 => format!("{}-{}.sock", broker.pid, broker.start_ticks),
        n => format!("{}-{}.{n}.sock", broker.pid, broker.start_ticks),
    };
    dir.join(name)
}

/// Refuses a path that does not fit `sockaddr_un` (or that would name an abstract socket,
/// which anyone in the network namespace can reach, whatever the file modes).
pub fn check_path(path: &Path) -> Result<(), SocketDirError> {
    let bytes = path.as_os_str().as_bytes();
    if bytes.len() > SOCKET_PATH_MAX {
        return Err(SocketDirError::TooLong {
            path: path.to_path_buf(),
            len: bytes.len(),
        });
    }
    if bytes.first() != Some(&b'/') || bytes.contains(&0) {
        return Err(SocketDirError::io(
            path,
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "a control socket path must be absolute and hold no NUL byte",
            ),
        ));
    }
    Ok(())
}

/// The names in the socket directory `dir`, from one listing; none if it cannot be read.
pub fn entry_names(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().into_string().ok())
        .collect()
}

/// Removes a control socket nobody listens on any more (its broker was killed before it
/// could): only a socket, only one of ours, and only when a connection to it is refused.
/// Returns whether it did.
pub fn remove_if_stale(path: &Path) -> bool {
    if !is_own_socket(path) {
        return false;
    }
    match connect_now(path) {
        Err(err) if err.raw_os_error() == Some(libc::ECONNREFUSED) => {
            std::fs::remove_file(path).is_ok()
        }
        _ => false,
    }
}

/// Removes from the socket directory `dir` the sockets of brokers that are dead (killed
/// before they could remove their own): named `<pid>-<start ticks>[.N].sock`, with no live
/// process of that pid and start time, and then only as [`remove_if_stale`] does. Returns
/// how many. A live broker's socket is never connected to.
pub fn remove_stale(dir: &Path) -> usize {
    entry_names(dir)
        .iter()
        .filter(|name| broker_of(name).is_some_and(|b| !crate::procfs::broker_alive(&b)))
        .filter(|name| remove_if_stale(&dir.join(name)))
        .count()
}

/// The broker a socket's name gives ([`socket_path`]).
fn broker_of(name: &str) -> Option<BrokerIdentity> {
    let stem = name.strip_suffix(".sock")?;
    let label = stem.split_once('.').map_or(stem, |(label, _attempt)| label);
    BrokerIdentity::from_label(label).filter(|broker| broker.pid > 0)
}

/// Whether `path` is a socket (not a link to one) owned by our effective uid.
pub fn is_own_socket(path: &Path) -> bool {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    std::fs::symlink_metadata(path)
        .is_ok_and(|m| m.file_type().is_socket() && m.uid() == nix::unistd::geteuid().as_raw())
}

/// Connects to a Unix stream socket without ever waiting: a listener whose backlog is full
/// gives `EAGAIN` rather than a blocked caller. The socket is non-blocking, close-on-exec.
pub fn connect_now(path: &Path) -> std::io::Result<OwnedFd> {
    use nix::sys::socket::{AddressFamily, SockFlag, SockType, UnixAddr, connect, socket};
    use std::os::fd::AsRawFd;
    check_path(path).map_err(std::io::Error::other)?;
    let addr = UnixAddr::new(path)?;
    let flags = SockFlag::SOCK_NONBLOCK | SockFlag::SOCK_CLOEXEC;
    let owned = socket(AddressFamily::Unix, SockType::Stream, flags, None)?;
    connect(owned.as_raw_fd(), &addr)?;
    Ok(owned)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn identity() -> BrokerIdentity {
        BrokerIdentity {
            pid: 4_194_304,
            start_ticks: 123_456_789_012,
        }
    }

    #[test]
    fn the_directory_follows_xdg_runtime_dir_when_it_is_absolute() {
        assert_eq!(
            socket_dir_for(Some(OsStr::new("/run/user/1000")), 1000, None),
            PathBuf::from("/run/user/1000/tether")
        );
        for ignored in [None, Some(OsStr::new("")), Some(OsStr::new("relative/dir"))] {
            assert_eq!(
                socket_dir_for(ignored, 1000, None),
                PathBuf::from("/tmp/tether-1000")
            );
        }
    }

    #[test]
    fn another_pid_namespace_has_a_directory_of_its_own() {
        assert_eq!(
            socket_dir_for(Some(OsStr::new("/run/user/1000")), 1000, Some(4026532301)),
            PathBuf::from("/run/user/1000/tether-pidns-4026532301")
        );
        assert_eq!(
            socket_dir_for(None, 1000, Some(4026532301)),
            PathBuf::from("/tmp/tether-1000-pidns-4026532301")
        );
    }

    #[test]
    fn socket_paths_are_short_and_checked_against_the_limit() {
        let path = socket_path(Path::new("/run/user/1000/tether"), &identity(), 0);
        assert_eq!(
            path,
            PathBuf::from("/run/user/1000/tether/4194304-123456789012.sock")
        );
        assert!(check_path(&path).is_ok());
        assert!(path.as_os_str().len() < 60, "room for a long runtime dir");
        assert_eq!(
            socket_path(Path::new("/d"), &identity(), 3),
            PathBuf::from("/d/4194304-123456789012.3.sock")
        );

        let exactly = PathBuf::from(format!("/{}", "a".repeat(SOCKET_PATH_MAX - 1)));
        assert!(check_path(&exactly).is_ok());
        let long = PathBuf::from(format!("/{}", "a".repeat(SOCKET_PATH_MAX)));
        let err = check_path(&long).unwrap_err();
        assert!(matches!(err, SocketDirError::TooLong { len: 108, .. }));
        assert!(err.to_string().contains("XDG_RUNTIME_DIR"), "{err}");
        assert_eq!(err.code(), "path_too_long");
        assert!(check_path(Path::new("relative.sock")).is_err());
    }

    #[test]
    fn a_fresh_directory_is_private_whatever_the_umask() {
        let tmp = crate::testing::private_tempdir();
        let dir = tmp.path().join("tether");
        let old = nix::sys::stat::umask(nix::sys::stat::Mode::empty());
        let made = prepare(&dir);
        nix::sys::stat::umask(old);
        made.unwrap();
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o700);
        // Again: an existing private directory of ours is fine.
        assert!(prepare(&dir).is_ok());
    }

    #[test]
    fn unsafe_directories_are_refused_with_the_reason() {
        let tmp = crate::testing::private_tempdir();
        let dir = tmp.path().join("tether");
        crate::testing::private_dir(&dir);
        for mode in [0o750, 0o701, 0o1777] {
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(mode)).unwrap();
            let err = prepare(&dir).unwrap_err();
            assert!(
                matches!(err, SocketDirError::Open { .. }),
                "{mode:o}: {err}"
            );
            assert!(err.to_string().contains("chmod 700"), "{err}");
        }

        let link = tmp.path().join("link");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        std::os::unix::fs::symlink(&dir, &link).unwrap();
        assert!(matches!(
            prepare(&link).unwrap_err(),
            SocketDirError::Symlink { .. }
        ));

        let file = tmp.path().join("file");
        crate::testing::write_private(&file, "");
        assert!(matches!(
            check(&file).unwrap_err(),
            SocketDirError::NotADirectory { .. }
        ));

        let missing_parent = tmp.path().join("no/such/tether");
        assert!(matches!(
            prepare(&missing_parent).unwrap_err(),
            SocketDirError::Io { .. }
        ));
    }

    #[test]
    fn only_a_socket_nobody_listens_on_is_removed_as_stale() {
        let tmp = crate::testing::private_tempdir();
        let path = tmp.path().join("1-2.sock");
        let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        assert!(connect_now(&path).is_ok());
        assert!(!remove_if_stale(&path), "a live socket stays");
        drop(listener);
        let err = connect_now(&path).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ECONNREFUSED));
        assert!(remove_if_stale(&path));
        assert!(!path.exists());
        let file = tmp.path().join("plain");
        crate::testing::write_private(&file, "");
        assert!(!remove_if_stale(&file), "not a socket: left alone");
        assert!(file.exists());
    }

    /// Killed brokers' sockets go; a live broker's, a name of no broker and a socket
    /// something still listens on stay.
    #[test]
    fn the_sockets_of_dead_brokers_are_removed() {
        let tmp = crate::testing::private_tempdir();
        let me = crate::procfs::read_stat(std::process::id() as i32).unwrap();
        let ours = BrokerIdentity {
            pid: me.pid,
            start_ticks: me.start_ticks,
        };
        let dead = BrokerIdentity {
            pid: me.pid,
            start_ticks: me.start_ticks + 1,
        };
        let bind = |path: &Path| std::os::unix::net::UnixListener::bind(path).unwrap();
        // A live broker's, and a dead one's at its first and its second attempt.
        let live = bind(&socket_path(tmp.path(), &ours, 0));
        drop(bind(&socket_path(tmp.path(), &dead, 0)));
        drop(bind(&socket_path(tmp.path(), &dead, 2)));
        // A dead broker's name that something listens on, and a name of no broker.
        let listening = bind(&tmp.path().join("1-1.sock"));
        drop(bind(&tmp.path().join("notes.sock")));
        assert_eq!(remove_stale(tmp.path()), 2);
        let mut left = entry_names(tmp.path());
        left.sort();
        let ours = format!("{}-{}.sock", ours.pid, ours.start_ticks);
        assert_eq!(left, ["1-1.sock", ours.as_str(), "notes.sock"]);
        drop((live, listening));
    }

    #[test]
    fn a_directory_of_another_user_is_refused() {
        if !nix::unistd::geteuid().is_root() {
            crate::testing::skip("giving a directory to another user needs root");
            return;
        }
        let tmp = crate::testing::private_tempdir();
        let dir = tmp.path().join("tether");
        crate::testing::private_dir(&dir);
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        std::os::unix::fs::chown(&dir, Some(65534), Some(65534)).unwrap();
        let err = prepare(&dir).unwrap_err();
        assert!(
            matches!(err, SocketDirError::NotOwned { owner: 65534, .. }),
            "{err}"
        );
        assert!(err.to_string().contains("not by you"), "{err}");
    }
}
