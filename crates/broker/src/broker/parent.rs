//! The front end that owns this broker: its pipe ([`ParentLink`]), and knowing at kernel
//! latency that it has died.
//!
//! rustix for `pidfd_open`: nix has no pidfds.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd};
use std::time::Duration;

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use rustix::process::{Pid, PidfdFlags, pidfd_open};
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

use tether_os::fdio::{AsyncPipe, Outbox};
use tether_protocol::protocol::{Custodian, LineSplitter, MAX_LINE, ParentLossCause};

/// The parent's end of things: requests in on stdin, events out on stdout.
pub(super) struct ParentLink {
    pub(super) input: Option<AsyncPipe>,
    pub(super) output: AsyncPipe,
    pub(super) lines: LineSplitter,
    pub(super) buf: Vec<u8>,
    /// Event lines not yet taken by the parent.
    pub(super) queue: Outbox,
}

impl ParentLink {
    pub(super) fn take_stdio() -> io::Result<ParentLink> {
        // SAFETY: the broker owns its stdin and stdout and nothing else in the process uses
        // them once they are taken here.
        let (stdin, stdout) = unsafe { (OwnedFd::from_raw_fd(0), OwnedFd::from_raw_fd(1)) };
        Ok(ParentLink {
            input: Some(AsyncPipe::new(stdin)?),
            output: AsyncPipe::new(stdout)?,
            lines: LineSplitter::new(MAX_LINE),
            buf: vec![0; 64 * 1024],
            queue: Outbox::default(),
        })
    }

    /// Writes what is queued, for at most `limit`: the parent may not be reading.
    pub(super) async fn drain(&mut self, limit: Duration) {
        let _ = tokio::time::timeout(limit, async {
            while !self.queue.is_empty() {
                if self.queue.write_some(&self.output).await.is_err() {
                    return;
                }
            }
        })
        .await;
    }
}

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
            Ok(pidfd) => tether_os::fdio::register(pidfd, Interest::READABLE).ok(),
            Err(rustix::io::Errno::SRCH) => return Err(ParentLossCause::Reparented),
            // ENOSYS (before Linux 5.3), EPERM (a seccomp profile): watch without a pidfd.
            Err(_) => None,
        };
        if parent_pid() != expected {
            return Err(ParentLossCause::Reparented);
        }
        Ok(ParentWatch { pidfd, expected })
    }

    /// Resolves when the parent has exited; never without a pidfd to tell it.
    pub async fn exited(&self) {
        if let Some(pidfd) = &self.pidfd
            && pidfd.readable().await.is_ok()
        {
            return;
        }
        std::future::pending().await
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
        !has_exited(pidfd.get_ref())
    }
}

/// Whether the process of `pidfd` has exited, without waiting.
fn has_exited(pidfd: &OwnedFd) -> bool {
    use std::os::fd::AsFd;
    let mut fds = [PollFd::new(pidfd.as_fd(), PollFlags::POLLIN)];
    matches!(poll(&mut fds, PollTimeout::ZERO), Ok(n) if n > 0)
}

fn parent_pid() -> i32 {
    nix::unistd::getppid().as_raw()
}

/// Pidfds on the processes a command's leftovers are kept for (see
/// [`tether_protocol::protocol::LeftoversRule`]): the first to exit ends the custody. Any number of
/// them, each with its role, so another kind of custodian is one more entry.
#[derive(Default)]
pub struct CustodianWatch {
    watched: Vec<(Custodian, AsyncFd<OwnedFd>)>,
}

impl CustodianWatch {
    /// Opens a pidfd on each custodian. Returns the watch with those that could not be
    /// watched: already exited, its pid now someone else's (the start time differs, checked
    /// after opening so the pidfd is known to be the custodian's), or no pidfd to be had.
    pub fn open(custodians: &[Custodian]) -> (CustodianWatch, Vec<Custodian>) {
        let mut watch = CustodianWatch::default();
        let mut unwatched = Vec::new();
        for custodian in custodians {
            match open_custodian(custodian) {
                Some(pidfd) => watch.watched.push((*custodian, pidfd)),
                None => unwatched.push(*custodian),
            }
        }
        (watch, unwatched)
    }

    pub fn is_empty(&self) -> bool {
        self.watched.is_empty()
    }

    /// A custodian that has exited already, which is then no longer watched.
    pub fn exited_now(&mut self) -> Option<Custodian> {
        let i = self
            .watched
            .iter()
            .position(|(_, pidfd)| has_exited(pidfd.get_ref()))?;
        Some(self.watched.remove(i).0)
    }

    /// Resolves when a custodian has exited, which is then no longer watched; never while
    /// none is.
    pub async fn exited(&mut self) -> Custodian {
        std::future::poll_fn(|cx| {
            let ready = self
                .watched
                .iter()
                .position(|(_, pidfd)| pidfd.poll_read_ready(cx).is_ready());
            match ready {
                Some(i) => std::task::Poll::Ready(self.watched.remove(i).0),
                None => std::task::Poll::Pending,
            }
        })
        .await
    }
}

fn open_custodian(custodian: &Custodian) -> Option<AsyncFd<OwnedFd>> {
    let pid = Pid::from_raw(custodian.pid)?;
    let pidfd = pidfd_open(pid, PidfdFlags::empty()).ok()?;
    let same = tether_os::procfs::read_stat(custodian.pid)
        .is_some_and(|s| s.start_ticks == custodian.start_ticks);
    if !same {
        return None;
    }
    tether_os::fdio::register(pidfd, Interest::READABLE).ok()
}
