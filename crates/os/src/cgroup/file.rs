//! Every read and write of a cgroup's files and directories: opened relative to a directory
//! already held, never through a link (`O_NOFOLLOW`), close-on-exec. A path would be looked
//! up again each time, and a cgroup directory can be swapped under a path between two
//! writes; a held directory cannot.

use std::io::{self, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;

use nix::NixPath;
use nix::fcntl::OFlag;
use nix::sys::stat::Mode;

/// `name` below `dir`, opened with `flags` (plus no link followed, close-on-exec).
pub(super) fn open(
    dir: impl AsFd,
    name: &(impl NixPath + ?Sized),
    flags: OFlag,
) -> io::Result<std::fs::File> {
    let fd = nix::fcntl::openat(
        dir,
        name,
        flags | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )?;
    Ok(std::fs::File::from(fd))
}

/// The directory at `path`, links followed (the hierarchy's mount, a cgroup's parent): the
/// directory that later opens are relative to.
pub(super) fn open_path_dir(path: &Path) -> io::Result<OwnedFd> {
    Ok(nix::fcntl::open(
        path,
        OFlag::O_DIRECTORY | OFlag::O_RDONLY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )?)
}

/// The directory `name` below `dir`.
pub(super) fn open_dir(dir: impl AsFd, name: &str) -> io::Result<OwnedFd> {
    Ok(open(dir, name, OFlag::O_DIRECTORY | OFlag::O_RDONLY)?.into())
}

/// The whole text of the file `name` below `dir`.
pub(super) fn read(dir: impl AsFd, name: &str) -> io::Result<String> {
    crate::procfs::read_small(open(dir, name, OFlag::O_RDONLY)?, 1024)
}

/// Writes `value` to the file `name` below `dir`, in one write: the kernel takes a cgroup
/// file's value per write.
pub(super) fn write(dir: impl AsFd, name: &str, value: &str) -> io::Result<()> {
    open(dir, name, OFlag::O_WRONLY | OFlag::O_TRUNC)?.write_all(value.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_read_and_written_below_a_held_directory_and_links_are_refused() {
        let tmp = crate::testing::private_tempdir();
        let dir = open_path_dir(tmp.path()).unwrap();
        crate::testing::write_private(tmp.path().join("pids.max"), "max\n");
        write(&dir, "pids.max", "64").unwrap();
        assert_eq!(read(&dir, "pids.max").unwrap(), "64");
        std::os::unix::fs::symlink(tmp.path().join("pids.max"), tmp.path().join("link")).unwrap();
        assert!(read(&dir, "link").is_err());
        assert!(write(&dir, "link", "1").is_err());
        crate::testing::private_dir(tmp.path().join("child"));
        assert!(open_dir(&dir, "child").is_ok());
        assert!(open_dir(&dir, "pids.max").is_err());
    }
}
