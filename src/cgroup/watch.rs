//! Knowing at once when a command cgroup empties: inotify on its `cgroup.events`, which the
//! kernel modifies when `populated` (or `frozen`) changes. No timer polls it.

use std::io;
use std::os::fd::OwnedFd;
use std::path::Path;

use rustix::fs::inotify::{self, CreateFlags, WatchFlags};
use tokio::io::unix::AsyncFd;

pub struct EventsWatch {
    fd: AsyncFd<OwnedFd>,
}

impl EventsWatch {
    /// Watches `<cgroup>/cgroup.events`; needs a tokio runtime.
    pub fn new(cgroup: &Path) -> io::Result<EventsWatch> {
        let fd = inotify::init(CreateFlags::NONBLOCK | CreateFlags::CLOEXEC)?;
        inotify::add_watch(&fd, cgroup.join("cgroup.events"), WatchFlags::MODIFY)?;
        Ok(EventsWatch {
            fd: crate::fdio::register(fd, tokio::io::Interest::READABLE)?,
        })
    }

    /// Resolves once `cgroup.events` changed since the last call (or the watch ended: the
    /// cgroup was removed). Reads every queued notification.
    pub async fn changed(&self) -> io::Result<()> {
        loop {
            let mut guard = self.fd.readable().await?;
            let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 1024];
            let mut reader = inotify::Reader::new(self.fd.get_ref(), &mut buf);
            let mut any = false;
            loop {
                match reader.next() {
                    Ok(_) => any = true,
                    Err(rustix::io::Errno::AGAIN) => break,
                    Err(rustix::io::Errno::INTR) => continue,
                    Err(err) => return Err(err.into()),
                }
            }
            guard.clear_ready();
            if any {
                return Ok(());
            }
        }
    }
}
