//! Knowing, at kernel latency, that the front end that owns this broker has died.

use std::io;
use std::os::fd::OwnedFd;

use rustix::event::{PollFd, PollFlags, Timespec, poll};
use rustix::process::{Pid, PidfdFlags, getppid, pidfd_open};
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

use crate::protocol::ParentLossCause;

/// A pidfd on the parent: readable the moment the parent exits, however it dies.
pub struct ParentWatch {
    pidfd: AsyncFd<OwnedFd>,
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
        let pidfd =
            pidfd_open(pid, PidfdFlags::empty()).map_err(|_| ParentLossCause::Reparented)?;
        if parent_pid() != expected {
            return Err(ParentLossCause::Reparented);
        }
        let pidfd =
            crate::fdio::register(pidfd, Interest::READABLE).map_err(|_| ParentLossCause::Pidfd)?;
        Ok(ParentWatch { pidfd, expected })
    }

    /// Resolves when the parent has exited.
    pub async fn exited(&self) -> io::Result<()> {
        let _guard = self.pidfd.readable().await?;
        Ok(())
    }

    /// Checks, without waiting, whether the parent still lives: used to confirm a
    /// `PR_SET_PDEATHSIG` hint, which also fires when the parent's forking *thread* exits.
    pub fn confirm_alive(&self) -> bool {
        if parent_pid() != self.expected {
            return false;
        }
        let mut fds = [PollFd::new(self.pidfd.get_ref(), PollFlags::IN)];
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
