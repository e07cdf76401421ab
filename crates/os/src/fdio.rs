//! Non-blocking pipe ends driven by tokio, without tokio's process machinery (whose pidfd
//! reaper would race a subreaper's `waitpid(-1)`).

use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags};
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

use tether_protocol::protocol::{Frame, LineSplitter, MAX_LINE};

pub struct AsyncPipe {
    fd: AsyncFd<OwnedFd>,
}

impl AsyncPipe {
    /// Takes a pipe end and makes it non-blocking. Only for descriptors this process owns
    /// alone: the flag is shared by every holder of the open file.
    pub fn new(fd: OwnedFd) -> io::Result<Self> {
        set_nonblocking(&fd)?;
        Ok(AsyncPipe {
            fd: register(fd, Interest::READABLE | Interest::WRITABLE)?,
        })
    }

    /// Waits until something can be read and reads it; `Ok(0)` is end of file.
    /// Cancel-safe: bytes are only taken in the poll that returns them.
    pub async fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        (self.fd)
            .async_io(Interest::READABLE, |fd| read_fd(fd, buf))
            .await
    }

    /// Reads what is there without waiting; `WouldBlock` when nothing is.
    pub fn try_read(&self, buf: &mut [u8]) -> io::Result<usize> {
        read_fd(self.fd.get_ref(), buf)
    }

    /// Writes what the pipe takes now; `WouldBlock` when it takes nothing.
    pub fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
        write_fd(self.fd.get_ref(), buf)
    }

    /// Waits until the pipe takes bytes and writes some of `buf`.
    pub async fn write(&self, buf: &[u8]) -> io::Result<usize> {
        (self.fd)
            .async_io(Interest::WRITABLE, |fd| write_fd(fd, buf))
            .await
    }

    pub async fn write_all(&self, mut buf: &[u8]) -> io::Result<()> {
        while !buf.is_empty() {
            let n = self.write(buf).await?;
            buf = &buf[n..];
        }
        Ok(())
    }
}

impl AsFd for AsyncPipe {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.get_ref().as_fd()
    }
}

/// The order in which two pipes became readable, as the kernel keeps it: an epoll set of
/// their read ends, level-triggered, whose ready list runs in the order the pipes became
/// ready. A command's stdout and stderr read in that order are taken in the order it wrote
/// them, even when both wait at one wake-up (curl's error line, a byte a write, then its
/// output), where waiting on each pipe apart picks one of the two at random.
pub struct ReadyOrder {
    epoll: AsyncFd<EpollFd>,
    /// Each slot's watched descriptor: a duplicate, so that it is taken out of the set
    /// before it closes whoever closes the pipe.
    watched: [Option<OwnedFd>; 2],
}

/// An epoll descriptor, for tokio's reactor (which wants `AsRawFd`).
struct EpollFd(Epoll);

impl std::os::fd::AsRawFd for EpollFd {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        self.0.0.as_raw_fd()
    }
}

impl ReadyOrder {
    pub fn new() -> io::Result<ReadyOrder> {
        let epoll = Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC)?;
        Ok(ReadyOrder {
            // SAFETY: the epoll descriptor is owned by the `EpollFd` the `AsyncFd` owns, and
            // stays open, unchanged, until it drops it.
            epoll: unsafe { AsyncFd::register_with_interest(EpollFd(epoll), Interest::READABLE) }
                .map_err(io::Error::from)?,
            watched: [None, None],
        })
    }

    /// Watches `pipe` as `slot` while there is one and `on`; stops watching otherwise.
    pub fn watch(&mut self, slot: usize, pipe: Option<BorrowedFd>, on: bool) -> io::Result<()> {
        let epoll = &self.epoll.get_ref().0;
        match (&self.watched[slot], pipe.filter(|_| on)) {
            (Some(_), Some(_)) | (None, None) => {}
            (None, Some(pipe)) => {
                let dup = pipe.try_clone_to_owned()?;
                epoll.add(&dup, EpollEvent::new(EpollFlags::EPOLLIN, slot as u64))?;
                self.watched[slot] = Some(dup);
            }
            (Some(dup), None) => {
                epoll.delete(dup)?;
                self.watched[slot] = None;
            }
        }
        Ok(())
    }

    /// After the pipes found ready were read: looks at the set once more, so that a pipe
    /// read dry drops out of the kernel's ready list (level-triggered, a pipe found ready
    /// keeps its place there until a look finds it empty) and bytes written to it later
    /// queue behind the other's. What is still ready is found again by [`Self::ready`].
    pub fn settle(&self) {
        let mut events = [EpollEvent::empty(); 2];
        let _ = self.epoll.get_ref().0.wait(&mut events, 0u8);
    }

    pub fn watching(&self) -> bool {
        self.watched.iter().any(Option::is_some)
    }

    /// Waits until a watched pipe can be read (or is closed); the slots that can be, first
    /// ready first. Cancel-safe: what is found is returned in the poll that finds it, and
    /// what is not taken is found again (level-triggered).
    pub async fn ready(&self) -> io::Result<Vec<usize>> {
        let mut events = [EpollEvent::empty(); 2];
        let found = self.epoll.async_io(Interest::READABLE, |epoll| {
            match epoll.0.wait(&mut events, 0u8) {
                Ok(0) => Err(io::ErrorKind::WouldBlock.into()),
                Ok(n) => Ok(n),
                Err(errno) => Err(errno.into()),
            }
        });
        let n = found.await?;
        Ok(events[..n].iter().map(|e| e.data() as usize).collect())
    }
}

/// Bytes for a pipe whose reader must never hold up the writer: what the pipe does not take
/// now stays queued, to be written when it has room.
#[derive(Debug, Default)]
pub struct Outbox {
    queue: Vec<u8>,
}

impl Outbox {
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    pub fn len(&self) -> usize {
        self.queue.len()
    }

    pub fn push(&mut self, bytes: &[u8]) {
        self.queue.extend_from_slice(bytes);
    }

    pub fn clear(&mut self) {
        self.queue.clear();
    }

    /// Writes as much as the pipe takes now, without waiting. `Err` means the reader is gone;
    /// the queue is then dropped.
    pub fn write_now(&mut self, pipe: &AsyncPipe) -> io::Result<()> {
        self.write_now_with(|bytes| pipe.try_write(bytes))
    }

    /// [`Outbox::write_now`] through `try_write`, a non-blocking write of some other end
    /// (a socket's).
    pub fn write_now_with(
        &mut self,
        mut try_write: impl FnMut(&[u8]) -> io::Result<usize>,
    ) -> io::Result<()> {
        let mut written = 0;
        while written < self.queue.len() {
            match try_write(&self.queue[written..]) {
                Ok(n) => written += n,
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => break,
                Err(err) => {
                    self.queue.clear();
                    return Err(err);
                }
            }
        }
        self.queue.drain(..written);
        Ok(())
    }

    /// Waits until the pipe takes some of the queue, and writes it.
    pub async fn write_some(&mut self, pipe: &AsyncPipe) -> io::Result<()> {
        let n = pipe.write(&self.queue).await?;
        self.queue.drain(..n);
        Ok(())
    }
}

/// Registers an owned descriptor with tokio's reactor.
pub fn register(fd: OwnedFd, interest: Interest) -> io::Result<AsyncFd<OwnedFd>> {
    // SAFETY: an `OwnedFd` is a valid descriptor that stays open, unchanged, until the
    // `AsyncFd` that owns it drops it.
    unsafe { AsyncFd::register_with_interest(fd, interest) }.map_err(io::Error::from)
}

pub fn set_nonblocking(fd: &impl AsFd) -> io::Result<()> {
    use nix::fcntl::{FcntlArg, OFlag, fcntl};
    let flags = OFlag::from_bits_retain(fcntl(fd, FcntlArg::F_GETFL)?);
    fcntl(fd, FcntlArg::F_SETFL(flags | OFlag::O_NONBLOCK))?;
    Ok(())
}

fn read_fd(fd: &OwnedFd, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        match nix::unistd::read(fd, &mut *buf) {
            Err(nix::errno::Errno::EINTR) => continue,
            other => return other.map_err(io::Error::from),
        }
    }
}

fn write_fd(fd: &OwnedFd, buf: &[u8]) -> io::Result<usize> {
    loop {
        match nix::unistd::write(fd, buf) {
            Err(nix::errno::Errno::EINTR) => continue,
            other => return other.map_err(io::Error::from),
        }
    }
}

/// The lines a broker writes, read as they come: from its event pipe or a control
/// connection. While it waits, what a post could not write goes as the other end takes it.
pub struct LineReader {
    lines: LineSplitter,
    buf: Vec<u8>,
    frames: VecDeque<Frame>,
}

impl LineReader {
    /// Reads in `chunk` bytes at a time; a line may be as long as a broker writes
    /// ([`MAX_LINE`]): a subscriber gets the journal's lines.
    pub fn new(chunk: usize) -> LineReader {
        LineReader {
            lines: LineSplitter::new(MAX_LINE),
            buf: vec![0; chunk],
            frames: VecDeque::new(),
        }
    }

    /// The next line from `from`, `None` once it is closed (or broken: `ECONNRESET`, the
    /// broker gone while we read); meanwhile `outbox` is written to `to` as it takes it (an
    /// end that cannot take more is cleared: the broker is ending, as its lines will say).
    /// Cancel-safe: a line is only taken in the poll that returns it, and bytes leave the
    /// outbox only in the poll that writes them.
    pub async fn next(
        &mut self,
        from: &AsyncPipe,
        outbox: &mut Outbox,
        to: &AsyncPipe,
    ) -> Option<Frame> {
        loop {
            if let Some(frame) = self.frames.pop_front() {
                return Some(frame);
            }
            let read = if outbox.is_empty() {
                from.read(&mut self.buf).await
            } else {
                tokio::select! {
                    read = from.read(&mut self.buf) => read,
                    written = outbox.write_some(to) => {
                        if written.is_err() {
                            outbox.clear();
                        }
                        continue;
                    }
                }
            };
            match read {
                Ok(n) if n > 0 => self.frames.extend(self.lines.push(&self.buf[..n])),
                _ => return self.lines.finish(),
            }
        }
    }

    /// Reads, without waiting, what `from` holds and was not read yet, and returns how many
    /// lines then wait for [`Self::next`]: all written before this call, as far as a
    /// megabyte (a pipe raised to its ceiling, a subscription's backlog). End of file and
    /// errors are left for `next` to meet.
    pub fn read_waiting(&mut self, from: &AsyncPipe) -> usize {
        for _ in 0..(1 << 20) / self.buf.len() + 1 {
            match from.try_read(&mut self.buf) {
                Ok(n) if n > 0 => {
                    self.frames.extend(self.lines.push(&self.buf[..n]));
                    if n < self.buf.len() {
                        break;
                    }
                }
                _ => break,
            }
        }
        self.frames.len()
    }
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsFd;

    use super::*;

    fn pipe() -> (AsyncPipe, OwnedFd) {
        let (read, write) = nix::unistd::pipe().unwrap();
        (AsyncPipe::new(read).unwrap(), write)
    }

    /// Two pipes that both wait are found in the order they became readable, whichever
    /// that is; a pipe read dry, or no longer watched, is not found.
    #[tokio::test(flavor = "current_thread")]
    async fn pipes_are_found_first_ready_first() {
        let (out, out_w) = pipe();
        let (err, err_w) = pipe();
        let mut order = ReadyOrder::new().unwrap();
        order.watch(0, Some(out.as_fd()), true).unwrap();
        order.watch(1, Some(err.as_fd()), true).unwrap();
        nix::unistd::write(&err_w, b"e").unwrap();
        nix::unistd::write(&out_w, b"o").unwrap();
        assert_eq!(order.ready().await.unwrap(), [1, 0]);
        // Level-triggered: found again until read.
        assert_eq!(order.ready().await.unwrap(), [1, 0]);
        let mut buf = [0u8; 8];
        assert_eq!(err.try_read(&mut buf).unwrap(), 1);
        assert_eq!(order.ready().await.unwrap(), [0]);
        nix::unistd::write(&err_w, b"e").unwrap();
        assert_eq!(order.ready().await.unwrap(), [0, 1]);
        // Read dry and settled, a pipe queues behind what was written before its next bytes.
        assert_eq!(out.try_read(&mut buf).unwrap(), 1);
        assert_eq!(err.try_read(&mut buf).unwrap(), 1);
        order.settle();
        nix::unistd::write(&err_w, b"e").unwrap();
        nix::unistd::write(&out_w, b"o").unwrap();
        assert_eq!(order.ready().await.unwrap(), [1, 0]);
        order.watch(0, Some(out.as_fd()), false).unwrap();
        assert_eq!(order.ready().await.unwrap(), [1]);
        assert!(order.watching());
        order.watch(1, None, true).unwrap();
        assert!(!order.watching());
    }
}
