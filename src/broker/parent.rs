//! Knowing, at kernel latency, that the front end that owns this broker has died.

use std::io;
use std::os::fd::OwnedFd;

use rustix::event::{PollFd, PollFlags, Timespec, poll};
use rustix::process::{Pid, PidfdFlags, getppid, pidfd_open};
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

use crate::protocol::ParentLossCause;

/// A pidfd on the parent: readable the moment the parent exits, however it dies. Where the
/// kernel or a sandbox refuses pidfds, stdin EOF, EPIPE and a confirmed death signal remain.
pub struct ParentWatch {
    pidfd: Option<AsyncFd<OwnedFd>>,
    expected: i32,
}

impl ParentWatch {
    /// Opens a pidfd on `expected`, which must be our parent. `getppid` is checked before and
    /// after opening, so a parent that died just before (and a pid reused since) is caught.
    pub fn open(expected: i32) -> Result<ParentWatch, ParentLossCause> {
        if parent_pid() != expected {
            return Err(ParentLossCause::Reparented);
        }
        let pid = Pid::from_raw(expected).ok_or(ParentLossCause::Reparented)?;
        let pidfd = match pidfd_open(pid, PidfdFlags::empty()) {
            Ok(pidfd) => crate::fdio::register(pidfd, Interest::READABLE).ok(),
            Err(rustix::io::Errno::SRCH) => return Err(ParentLossCause::Reparented),
            // ENOSYS (before Linux 5.3), EPERM (a seccomp profile): watch without a pidfd.
            Err(_) => None,
        };
        if parent_pid() != expected {
            return Err(ParentLossCause::Reparented);
        }
        Ok(ParentWatch { pidfd, expected })
    }

    /// Resolves when the parent has exited.
    pub async fn exited(&self) -> io::Result<()> {
        match &self.pidfd {
            Some(pidfd) => pidfd.readable().await.map(|_| ()),
            None => std::future::pending().await,
        }
    }

    /// Checks, without waiting, whether the parent still lives: used to confirm a
    /// `PR_SET_PDEATHSIG` hint, which also fires when the parent's forking *thread* exits.
    pub fn confirm_alive(&self) -> bool {
        if parent_pid() != self.expected {
            return false;
        }
        let Some(pidfd) = &self.pidfd else {
            return true;
        };
        let mut fds = [PollFd::new(pidfd.get_ref(), PollFlags::IN)];
        let now = Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        !matches!(poll(&mut fds, Some(&now)), Ok(n) if n > 0)
    }
}

fn parent_pid() -> i32 {
    getppid().map_or(0, |p| p.as_raw_nonzero().get())
}
