//! The signals the broker acts on, heard through a pipe of its own: each handler sets the
//! signal's bit, keeps who sent a stop signal, and writes a byte to the pipe with `write(2)`,
//! which the run loop awaits.
//!
//! Not tokio's signal streams: their handler wakes the runtime with `send(2)` on a socket
//! pair, and an agent's sandbox may forbid it (Codex's workspace-write seccomp filter denies
//! `sendto`): the broker then heard no SIGTERM, SIGCHLD or parent-death signal at all, and
//! `tether stop` of a sandboxed command waited for nothing. A pipe's `write` is allowed
//! wherever a command may write its output.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};

use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

/// The signals heard since the loop last took them, one bit each (`1 << signo`).
static PENDING: AtomicU64 = AtomicU64::new(0);
/// The write end of the pipe, for the handlers (-1 before it is made).
static WAKE: AtomicI32 = AtomicI32::new(-1);
/// The pid that sent the last SIGTERM, SIGINT or SIGHUP (0: none, or the kernel's own): the
/// stop's origin depends on who sent it (see `Broker::shutdown_origin`).
static STOP_SENDER: AtomicI32 = AtomicI32::new(0);

/// The signals [`Signals`] hears.
pub const HEARD: [libc::c_int; 5] = [
    libc::SIGCHLD,
    libc::SIGUSR1,
    libc::SIGTERM,
    libc::SIGINT,
    libc::SIGHUP,
];

/// What arrived since the last look.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arrived(u64);

impl Arrived {
    pub fn has(self, signal: libc::c_int) -> bool {
        self.0 & (1 << signal) != 0
    }

    /// A stop signal (TERM, INT or HUP) arrived.
    pub fn stop(self) -> bool {
        [libc::SIGTERM, libc::SIGINT, libc::SIGHUP]
            .into_iter()
            .any(|s| self.has(s))
    }
}

pub struct Signals {
    wake: AsyncFd<OwnedFd>,
}

impl Signals {
    /// Makes the pipe and puts the handlers in place: from here on none of [`HEARD`] finds
    /// its default action (SIGUSR1, the parent-death signal, would end the broker).
    pub fn install() -> io::Result<Signals> {
        use nix::fcntl::OFlag;
        let (read, write) = nix::unistd::pipe2(OFlag::O_NONBLOCK | OFlag::O_CLOEXEC)?;
        // Kept open for the broker's life: the handlers write to it until it exits.
        WAKE.store(write.as_raw_fd(), Ordering::SeqCst);
        std::mem::forget(write);
        for signal in HEARD {
            // SAFETY: the action is async-signal-safe: it reads the siginfo it is given,
            // stores integers in atomics and calls write(2), which POSIX lists as safe.
            unsafe {
                signal_hook_registry::register_sigaction(signal, move |info: &libc::siginfo_t| {
                    if signal != libc::SIGCHLD && signal != libc::SIGUSR1 {
                        STOP_SENDER.store(info.si_pid(), Ordering::SeqCst);
                    }
                    PENDING.fetch_or(1 << signal, Ordering::SeqCst);
                    let fd = WAKE.load(Ordering::SeqCst);
                    // A full pipe already holds a wake-up; nothing else can be done here.
                    let _ = libc::write(fd, [1u8].as_ptr().cast(), 1);
                })
            }?;
        }
        Ok(Signals {
            wake: tether_os::fdio::register(read, Interest::READABLE)?,
        })
    }

    /// Waits for a signal; returns every one that arrived since the last call.
    pub async fn recv(&mut self) -> Arrived {
        loop {
            let arrived = PENDING.swap(0, Ordering::SeqCst);
            if arrived != 0 {
                return Arrived(arrived);
            }
            let Ok(mut ready) = self.wake.readable().await else {
                return std::future::pending().await;
            };
            // Read to empty: the readiness is cleared once a read would block, and the next
            // wake-up is a new byte.
            let _ = ready.try_io(|fd| {
                let mut buf = [0u8; 64];
                loop {
                    match nix::unistd::read(fd.get_ref(), &mut buf) {
                        Ok(0) => return Ok(()),
                        Ok(_) => continue,
                        Err(err) => return Err(io::Error::from(err)),
                    }
                }
            });
        }
    }
}

/// The sender of the last stop signal, taken (`None`: the kernel's own, or none kept).
pub fn take_stop_sender() -> Option<i32> {
    let sender = STOP_SENDER.swap(0, Ordering::SeqCst);
    (sender > 0).then_some(sender)
}
