//! Writing an export to a file the operator named (`-o FILE`): it may hold secrets (what the
//! commands printed, their environment's traces), so it is private whatever the umask.

use std::fs::File;
use std::io::{self, Write};
use std::path::Path;

use nix::errno::Errno;
use nix::fcntl::{FcntlArg, OFlag};
use nix::sys::stat::{Mode, SFlag};

/// Creates `path`, or truncates the regular file of ours already there, 0600, and writes
/// `bytes` to it. A link at `path` is refused, never followed (`O_NOFOLLOW`); so is a file
/// someone else owns, or anything not a regular file (a FIFO would block, a device is no
/// place for a report).
pub fn write_private(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let flags = OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let private = Mode::from_bits_truncate(0o600);
    // O_NONBLOCK: opening a FIFO for writing must not wait for a reader before the check.
    let fd =
        nix::fcntl::open(path, flags | OFlag::O_NONBLOCK, private).map_err(|err| match err {
            Errno::ELOOP => io::Error::other("it is a symbolic link; not followed"),
            // A FIFO without a reader, opened without blocking.
            Errno::ENXIO => io::Error::other("it is not a regular file"),
            err => io::Error::from(err),
        })?;
    let stat = nix::sys::stat::fstat(&fd)?;
    if stat.st_mode & SFlag::S_IFMT.bits() != SFlag::S_IFREG.bits() {
        return Err(io::Error::other("it is not a regular file"));
    }
    if stat.st_uid != nix::unistd::geteuid().as_raw() {
        return Err(io::Error::other(format!(
            "it belongs to uid {}, not to us",
            stat.st_uid
        )));
    }
    nix::fcntl::fcntl(&fd, FcntlArg::F_SETFL(OFlag::empty()))?;
    nix::unistd::ftruncate(&fd, 0)?;
    nix::sys::stat::fchmod(&fd, private)?;
    let mut file = File::from(fd);
    file.write_all(bytes)?;
    file.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn the_file_is_private_and_replaced_whole() {
        let dir = tether_os::testing::private_tempdir();
        let path = dir.path().join("trace.json");
        crate::testing::write_private(&path, b"a much longer old content");
        crate::testing::loosen(&path, 0o644);
        write_private(&path, b"new").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"new");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }

    #[test]
    fn a_link_is_refused_and_its_target_untouched() {
        let dir = tether_os::testing::private_tempdir();
        let target = dir.path().join("target");
        crate::testing::write_private(&target, b"keep");
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let err = write_private(&link, b"x").unwrap_err();
        assert!(err.to_string().contains("symbolic link"), "{err}");
        assert_eq!(std::fs::read(&target).unwrap(), b"keep");
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let err = write_private(&fifo, b"x").unwrap_err();
        assert!(err.to_string().contains("not a regular file"), "{err}");
    }
}
