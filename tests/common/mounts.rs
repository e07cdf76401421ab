//! Mounts a test makes (a small tmpfs, a bind mount), always undone: the guard's `Drop`
//! unmounts, so a failing assertion does not leave a mount behind.

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::Command;

use rustix::fs::{Mode, OFlags};

/// A mount on `target`, unmounted when dropped, wherever it is by then.
pub struct Mounted {
    target: PathBuf,
    /// The mounted root, to find the mount after a rename of a directory above it (a prune
    /// sets a session aside before removing it).
    root: Option<OwnedFd>,
}

impl Mounted {
    /// Runs `mount ARGS TARGET`; `None` (the reason printed, for a skipped test) where this
    /// process may not mount: not root, or no permission in this container.
    pub fn new(args: &[&str], target: &Path) -> Option<Mounted> {
        if !rustix::process::geteuid().is_root() {
            super::skip("mounting needs root");
            return None;
        }
        match Command::new("mount").args(args).arg(target).status() {
            Ok(status) if status.success() => Some(Mounted {
                target: target.to_path_buf(),
                root: rustix::fs::open(target, OFlags::PATH | OFlags::CLOEXEC, Mode::empty()).ok(),
            }),
            other => {
                super::skip(format!(
                    "cannot mount {args:?} on {}: {other:?}",
                    target.display()
                ));
                None
            }
        }
    }

    /// `mount --bind SOURCE TARGET`: the same file system seen at a second place.
    pub fn bind(source: &Path, target: &Path) -> Option<Mounted> {
        let source = source.to_string_lossy().into_owned();
        Mounted::new(&["--bind", &source], target)
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        let target = self
            .root
            .as_ref()
            .and_then(|fd| std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).ok())
            .unwrap_or_else(|| self.target.clone());
        drop(self.root.take());
        let unmounted = Command::new("umount").arg(&target).status();
        if !unmounted.is_ok_and(|s| s.success()) {
            // Still busy (a process inside it): detach it so that nothing is left mounted.
            let _ = Command::new("umount").arg("-l").arg(&target).status();
        }
    }
}
