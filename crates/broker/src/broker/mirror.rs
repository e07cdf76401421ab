//! The tee to a front end's own streams (`tether exec`): every byte read from the command is
//! also written to a pipe that the front end copies to its stdout or stderr, so what exec
//! prints never depends on the journal (a full disk or the storage cap limits the journal,
//! not the copy). The copy runs at the pace of whoever reads exec's output, as the command
//! would without tether: while a stream's copy is behind, the broker stops reading that
//! stream and the command waits on its pipe. The journal and the stop sequence never wait,
//! and once the command has ended a copy its caller takes nothing of is given up
//! (`state::copy`), what it never delivered counted ([`Mirror::undelivered`]).

use std::io;
use std::os::fd::{BorrowedFd, FromRawFd, OwnedFd, RawFd};

use nix::fcntl::{FcntlArg, FdFlag};

use tether_os::fdio::{AsyncPipe, Outbox};

/// The descriptors on which a broker receives the write ends of the front end's copy pipes,
/// stdout's then stderr's, when its launch request asks for a mirror.
/// They follow [`super::JOURNAL_FD`], as the front end passes them.
pub const MIRROR_FDS: [RawFd; 2] = [super::JOURNAL_FD + 1, super::JOURNAL_FD + 2];

pub struct Mirror {
    pipe: AsyncPipe,
    /// Bytes read from the command and not yet taken by the front end.
    queue: Outbox,
    /// Bytes the pipe has taken so far: whether the front end's copy moves at all.
    taken: u64,
}

/// Takes an inherited descriptor, if one is open there, and keeps the command from
/// inheriting it in turn.
pub fn take_inherited(fd: RawFd) -> Option<OwnedFd> {
    // SAFETY: only asks whether the descriptor is open; nothing is read or closed.
    nix::fcntl::fcntl(unsafe { BorrowedFd::borrow_raw(fd) }, FcntlArg::F_GETFD).ok()?;
    // SAFETY: the descriptor is open and was handed to this process for it alone; the
    // broker uses no other descriptor with this number.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    nix::fcntl::fcntl(&owned, FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC)).ok()?;
    Some(owned)
}

impl Mirror {
    pub fn new(fd: OwnedFd) -> io::Result<Mirror> {
        Ok(Mirror {
            pipe: AsyncPipe::new(fd)?,
            queue: Outbox::default(),
            taken: 0,
        })
    }

    /// True while bytes wait for the front end: the stream is not read meanwhile.
    pub fn is_behind(&self) -> bool {
        !self.queue.is_empty()
    }

    /// Queues a chunk and writes what the pipe takes now. `Err` means the front end closed
    /// its end: the copy is over, the journal goes on.
    pub fn push(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.queue.push(bytes);
        let queued = self.queue.len();
        let written = self.queue.write_now(&self.pipe);
        self.taken += queued.saturating_sub(self.queue.len()) as u64;
        written
    }

    /// Waits until the pipe takes some of the queue, and writes it.
    pub async fn write_some(&mut self) -> io::Result<()> {
        let queued = self.queue.len();
        let written = self.queue.write_some(&self.pipe).await;
        self.taken += queued.saturating_sub(self.queue.len()) as u64;
        written
    }

    /// Bytes the pipe has taken so far.
    pub fn taken(&self) -> u64 {
        self.taken
    }

    /// The copy is given up (the caller takes no more, or a stop was asked): the bytes it
    /// will never deliver, those still queued here and those still in the pipe, which the
    /// front end drops once it hears of it (`output_undelivered`). Closing our end follows
    /// (the mirror is dropped).
    pub fn undelivered(&self) -> u64 {
        // FIONREAD on a pipe counts what it holds, from either end.
        let in_pipe = rustix::io::ioctl_fionread(&self.pipe).unwrap_or(0);
        self.queue.len() as u64 + in_pipe
    }

    /// Writes the whole queue, at the front end's pace. `Err` means it closed its end.
    pub async fn flush(&mut self) -> io::Result<()> {
        while self.is_behind() {
            self.write_some().await?;
        }
        Ok(())
    }
}
