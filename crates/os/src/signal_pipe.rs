//! The signals a process acts on, heard through a pipe of its own: each handler sets the
//! signal's bit, keeps who sent it where asked, and writes a byte to the pipe with
//! `write(2)`, which an async loop awaits ([`SignalPipe::recv`]). The broker and `tether
//! exec` (the shell shim) hear their signals so.
//!
//! Not tokio's signal streams: their handler wakes the runtime with `send(2)` on a socket
//! pair, and an agent's sandbox may forbid it (Codex's workspace-write seccomp filter denies
//! `sendto`): a broker there heard no SIGTERM, SIGCHLD or parent-death signal at all, and a
//! shim no TERM or INT from the agent. A pipe's `write` is allowed wherever a command may
//! write its output.
//!
//! One pipe a process: the handlers' state is the process's (signal handlers are).

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};

use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

/// The signals heard since the loop last took them, one bit each (`1 << signo`).
static PENDING: AtomicU64 = AtomicU64::new(0);
/// The write end of the pipe, for the handlers (-1 before it is made).
static WAKE: AtomicI32 = AtomicI32::new(-1);
/// The pid that sent the last of the signals whose sender is kept (0: none, or the
/// kernel's own).
static SENDER: AtomicI32 = AtomicI32::new(0);

/// What arrived since the last look.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arrived(u64);

impl Arrived {
    pub fn has(self, signal: libc::c_int) -> bool {
        self.0 & (1 << signal) != 0
    }

    /// The first of `signals`, in their order, that arrived.
    pub fn first_of(self, signals: &[libc::c_int]) -> Option<libc::c_int> {
        signals.iter().copied().find(|&s| self.has(s))
    }
}

pub struct SignalPipe {
    wake: AsyncFd<OwnedFd>,
}

impl SignalPipe {
    /// Makes the pipe and puts a handler in place for each of `signals`: from here on none
    /// of them finds its default action. The sender of each of `senders_kept` is kept for
    /// [`take_sender`].
    pub fn install(
        signals: &[libc::c_int],
        senders_kept: &[libc::c_int],
    ) -> io::Result<SignalPipe> {
        use nix::fcntl::OFlag;
        let (read, write) = nix::unistd::pipe2(OFlag::O_NONBLOCK | OFlag::O_CLOEXEC)?;
        // Kept open for the process's life: the handlers write to it until it exits.
        WAKE.store(write.as_raw_fd(), Ordering::SeqCst);
        std::mem::forget(write);
        for &signal in signals {
            let keep_sender = senders_kept.contains(&signal);
            // SAFETY: the action is async-signal-safe: it reads the siginfo it is given,
            // stores integers in atomics and calls write(2), which POSIX lists as safe
            // (signal-hook-registry keeps errno around it).
            unsafe {
                signal_hook_registry::register_sigaction(signal, move |info: &libc::siginfo_t| {
                    if keep_sender {
                        SENDER.store(info.si_pid(), Ordering::SeqCst);
                    }
                    PENDING.fetch_or(1 << signal, Ordering::SeqCst);
                    let fd = WAKE.load(Ordering::SeqCst);
                    // A full pipe already holds a wake-up; nothing else can be done here.
                    let _ = libc::write(fd, [1u8].as_ptr().cast(), 1);
                })
            }?;
        }
        Ok(SignalPipe {
            wake: crate::fdio::register(read, Interest::READABLE)?,
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

/// The sender of the last signal whose sender is kept, taken (`None`: the kernel's own, or
/// none kept).
pub fn take_sender() -> Option<i32> {
    let sender = SENDER.swap(0, Ordering::SeqCst);
    (sender > 0).then_some(sender)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A signal raised while the loop waits wakes it through the pipe, with its sender
    /// (ourselves); several at once come as one batch; the pipe drained, the next signal
    /// wakes it again.
    #[tokio::test]
    async fn a_raised_signal_wakes_the_waiting_loop_with_its_sender() {
        use nix::sys::signal::{Signal, raise};
        let mut pipe = SignalPipe::install(&[libc::SIGUSR2, libc::SIGWINCH], &[libc::SIGUSR2])
            .expect("install");
        for round in 0..2 {
            // Raised from another task once this one waits: only the pipe can wake it.
            let raiser = tokio::spawn(async move {
                tokio::task::yield_now().await;
                raise(Signal::SIGUSR2).unwrap();
                if round == 0 {
                    raise(Signal::SIGUSR2).unwrap();
                    raise(Signal::SIGWINCH).unwrap();
                }
            });
            let wait = std::time::Duration::from_secs(60);
            let arrived = tokio::time::timeout(wait, pipe.recv())
                .await
                .expect("woken");
            raiser.await.unwrap();
            assert!(arrived.has(libc::SIGUSR2));
            assert_eq!(arrived.has(libc::SIGWINCH), round == 0);
            assert_eq!(
                arrived.first_of(&[libc::SIGINT, libc::SIGUSR2]),
                Some(libc::SIGUSR2)
            );
            assert_eq!(take_sender(), Some(std::process::id() as i32));
            assert_eq!(take_sender(), None);
        }
    }
}
