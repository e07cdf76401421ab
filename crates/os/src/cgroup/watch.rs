//! Knowing at once when a command cgroup empties: its `cgroup.events`, which the kernel
//! modifies when `populated` (or `frozen`) changes, polled for `EPOLLPRI` as kernfs offers
//! (cgroup-v2.rst, "cgroup.events"). No timer polls it.
//!
//! Not inotify: closing an inotify instance waits for an SRCU grace period
//! (`fsnotify_destroy_group`), and the broker closes it on its way out, so every command
//! paid several milliseconds at exit for it. A kernfs file descriptor closes at once.

use std::io;
use std::os::fd::OwnedFd;
use std::path::Path;

use nix::fcntl::OFlag;
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

pub struct EventsWatch {
    fd: AsyncFd<OwnedFd>,
}

impl EventsWatch {
    /// Watches `<cgroup>/cgroup.events`; needs a tokio runtime.
    pub fn new(cgroup: &Path) -> io::Result<EventsWatch> {
        let events = cgroup.join("cgroup.events");
        let fd: OwnedFd = super::file::open(
            nix::fcntl::AT_FDCWD,
            &events,
            OFlag::O_RDONLY | OFlag::O_NONBLOCK,
        )?
        .into();
        // kernfs signals a change since the file was last read: read it once now, so that
        // only changes from here on count.
        read_through(&fd)?;
        Ok(EventsWatch {
            fd: crate::fdio::register(fd, Interest::PRIORITY)?,
        })
    }

    /// Resolves once `cgroup.events` changed since the last call (or the cgroup was removed:
    /// an error). Reads the file again, which is what re-arms kernfs's notification.
    pub async fn changed(&self) -> io::Result<()> {
        let mut guard = self.fd.ready(Interest::PRIORITY).await?;
        guard.clear_ready();
        read_through(self.fd.get_ref())
    }
}

fn read_through(fd: &OwnedFd) -> io::Result<()> {
    let mut buf = [0u8; 256];
    loop {
        match nix::sys::uio::pread(fd, &mut buf, 0) {
            Ok(_) => return Ok(()),
            Err(nix::errno::Errno::EINTR) => continue,
            Err(err) => return Err(err.into()),
        }
    }
}
