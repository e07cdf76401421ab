//! Copies what the broker tees from the command (see `broker::mirror`) to `tether exec`'s own
//! stdout and stderr, byte for byte, on one thread per stream: a slow or stuck reader of our
//! output never stalls exec's event loop, so signals, pings and the fallback still work.
//! The two threads take turns in the order the broker wrote to their pipes ([`Turns`]).
//!
//! The copy does not read the journal, so a full journal disk or the storage cap limit what
//! is stored, never what is printed. A failed write is remembered and reported once the
//! command ends; EPIPE (whoever read our output is gone) is reported at once, so that the
//! command can be stopped as it would be by SIGPIPE without tether.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, mpsc};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::fcntl::{FcntlArg, OFlag, SpliceFFlags, fcntl};
use nix::poll::{PollFd, PollFlags, PollTimeout};
use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags};
use nix::sys::socket::MsgFlags;
use nix::sys::stat::SFlag;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

use tether_protocol::protocol::Stream;

/// Pipe capacity asked for: fewer wake-ups per megabyte; refusal (a limit) is harmless.
const PIPE_SIZE: usize = 1 << 20;
const CHUNK: usize = 256 * 1024;

/// The two pipes between the broker and the copy threads.
pub struct CopyPipes {
    pub read: CopyReads,
    /// Handed to the broker (stdout's, then stderr's), then closed here.
    pub write: [OwnedFd; 2],
}

/// The read ends, stdout's then stderr's, and their turns, watched from before the broker
/// starts: a pipe readable when it joins the set would be placed by when it joined, not by
/// when the broker wrote to it.
pub struct CopyReads {
    pipes: [OwnedFd; 2],
    /// None where the kernel refused an epoll set: each stream goes as it comes.
    turns: Option<Turns>,
}

impl CopyPipes {
    pub fn new() -> io::Result<CopyPipes> {
        let (out_read, out_write) = nix::unistd::pipe2(OFlag::O_CLOEXEC)?;
        let (err_read, err_write) = nix::unistd::pipe2(OFlag::O_CLOEXEC)?;
        for fd in [&out_write, &err_write] {
            let _ = fcntl(fd, FcntlArg::F_SETPIPE_SZ(PIPE_SIZE as i32));
        }
        let pipes = [out_read, err_read];
        let turns = Turns::new(&pipes).ok();
        Ok(CopyPipes {
            read: CopyReads { pipes, turns },
            write: [out_write, err_write],
        })
    }
}

/// How one stream's copy ended.
#[derive(Debug)]
pub struct CopyReport {
    pub stream: Stream,
    /// A write error other than EPIPE, and the bytes that could not be copied after it.
    pub failure: Option<(io::Error, u64)>,
}

pub struct OutputCopy {
    reports: mpsc::Receiver<CopyReport>,
    /// Bytes of each stream written to our own stdout and stderr so far.
    copied: [Arc<AtomicU64>; 2],
    /// Streams whose reader went away (EPIPE), as they happen.
    pub broken: UnboundedReceiver<Stream>,
}

impl OutputCopy {
    /// Starts copying each pipe to our stream of the same name until the broker closes it.
    pub fn start(read: CopyReads) -> io::Result<OutputCopy> {
        let (reports_tx, reports) = mpsc::channel();
        let (broken_tx, broken) = unbounded_channel();
        let copied: [Arc<AtomicU64>; 2] = Default::default();
        let CopyReads { pipes, turns } = read;
        let turns = turns.map(Arc::new);
        for ((pipe, stream), copied) in pipes.into_iter().zip(Stream::BOTH).zip(copied.clone()) {
            let reports_tx = reports_tx.clone();
            let broken_tx = broken_tx.clone();
            let turns = turns.clone();
            std::thread::Builder::new()
                .name(format!("copy-{stream:?}"))
                .spawn(move || {
                    let report = copy_stream(&pipe, stream, &broken_tx, &copied, turns.as_deref());
                    if let Some(turns) = &turns {
                        turns.done(stream);
                    }
                    let _ = reports_tx.send(report);
                })?;
        }
        Ok(OutputCopy {
            reports,
            copied,
            broken,
        })
    }

    /// The bytes of each stream (stdout, stderr) copied so far, as the copies go on.
    pub fn copied(&self) -> [Arc<AtomicU64>; 2] {
        self.copied.clone()
    }

    /// Waits until both copies have reached the end of their pipes, or until `timeout`
    /// (our own reader is stuck and we are leaving anyway). A stream the broker gave up
    /// (`given_up`: its reader took no more, and what its pipe holds is journaled as never
    /// delivered) is not waited for. Returns the reports received.
    pub fn finish(self, timeout: Duration, given_up: [bool; 2]) -> Vec<CopyReport> {
        let deadline = Instant::now() + timeout;
        let mut reports: Vec<CopyReport> = Vec::new();
        // Each copy sends one report, as it ends.
        let awaited = |reports: &Vec<CopyReport>| {
            (Stream::BOTH.into_iter().zip(given_up))
                .any(|(stream, given_up)| !given_up && !reports.iter().any(|r| r.stream == stream))
        };
        while awaited(&reports) {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.reports.recv_timeout(left) {
                Ok(report) => reports.push(report),
                Err(_) => break,
            }
        }
        reports
    }
}

/// What our stream is, for how it is written: each way is the one that never waits with the
/// broker's pipe locked and counts every byte it passes on as it goes.
#[derive(Clone, Copy, PartialEq)]
enum Output {
    /// splice(2): a pipe, which it waits for room in with neither pipe locked, or
    /// `/dev/null`, which never makes it wait (and takes the pages without a copy).
    Splice,
    /// send(2) with MSG_DONTWAIT, then a wait for room: a blocking write of a large chunk
    /// into a full socket counts nothing until all of it is taken, so what was passed on
    /// when exec ends would be unknown. The flag is the call's, not the descriptor's, which
    /// whoever shares it keeps as it was.
    Socket,
    /// write(2): a regular file, a terminal, a device.
    Other,
}

impl Output {
    fn of(out: BorrowedFd<'_>) -> Output {
        const DEV_NULL: (u64, u64) = (1, 3);
        let Ok(stat) = nix::sys::stat::fstat(out) else {
            return Output::Other;
        };
        match stat.st_mode & SFlag::S_IFMT.bits() {
            mode if mode == SFlag::S_IFIFO.bits() => Output::Splice,
            mode if mode == SFlag::S_IFCHR.bits()
                && stat.st_rdev == nix::sys::stat::makedev(DEV_NULL.0, DEV_NULL.1) =>
            {
                Output::Splice
            }
            mode if mode == SFlag::S_IFSOCK.bits() => Output::Socket,
            _ => Output::Other,
        }
    }
}

/// How long a stream's copy waits for the other's to pass on what the broker wrote before
/// it. Past that (the other's reader takes nothing), it goes on: out of order, never stuck.
const TURN_WAIT: Duration = Duration::from_millis(20);

/// Turns between the two copies, so that what the broker wrote to one pipe and then to the
/// other reaches our stdout and stderr in that order (curl's stderr line, then its stdout):
/// an epoll set of both pipes, level-triggered, whose ready list runs in the order the
/// pipes became readable. A copy whose pipe became readable after the other's waits, at
/// most [`TURN_WAIT`], until the other's bytes are passed on.
struct Turns {
    epoll: Epoll,
    /// Duplicates of both pipes' read ends, watched as their stream's index, until that
    /// stream's copy ends. The set is only read under this lock.
    watched: Mutex<[Option<OwnedFd>; 2]>,
    turn: Condvar,
    /// Where each stream is passed on: our stdout and stderr (another pair in tests).
    outputs: [RawFd; 2],
    /// How long a reader is given to take what the other stream passed on: [`TURN_WAIT`].
    patience: Duration,
    /// The stream that passed something on last, or is passing it on (2: none yet).
    last: AtomicU8,
    /// Whether each stream's copy is passing bytes on now (between its turn and `moved`).
    busy: [AtomicBool; 2],
    /// Whether our stdout, our stderr, is a pipe whose reader has taken what it was given
    /// within [`TURN_WAIT`] each time so far: such a reader is given time to take one
    /// stream's bytes before the other's come (below).
    prompt: [AtomicBool; 2],
}

impl Turns {
    fn new(pipes: &[OwnedFd; 2]) -> io::Result<Turns> {
        Turns::passing_on_to(pipes, [1, 2], TURN_WAIT)
    }

    /// Turns for copies to `outputs`, which stay open as long as the turns.
    fn passing_on_to(
        pipes: &[OwnedFd; 2],
        outputs: [RawFd; 2],
        patience: Duration,
    ) -> io::Result<Turns> {
        let epoll = Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC)?;
        let watched = [pipes[0].try_clone()?, pipes[1].try_clone()?];
        for (slot, fd) in watched.iter().enumerate() {
            epoll.add(fd, EpollEvent::new(EpollFlags::EPOLLIN, slot as u64))?;
        }
        let is_pipe = |fd: RawFd| {
            // SAFETY: the outputs stay open as long as the turns (our stdout and stderr for
            // the life of the process).
            let fd = unsafe { BorrowedFd::borrow_raw(fd) };
            nix::sys::stat::fstat(fd)
                .is_ok_and(|stat| stat.st_mode & SFlag::S_IFMT.bits() == SFlag::S_IFIFO.bits())
        };
        Ok(Turns {
            epoll,
            watched: Mutex::new(watched.map(Some)),
            turn: Condvar::new(),
            outputs,
            patience,
            last: AtomicU8::new(2),
            busy: [AtomicBool::new(false), AtomicBool::new(false)],
            prompt: outputs.map(|fd| AtomicBool::new(is_pipe(fd))),
        })
    }

    /// After the other stream passed bytes on to a pipe whose reader keeps up: waits until
    /// that reader has taken them, at most [`TURN_WAIT`]. Without tether the command writes
    /// straight into the reader's pipes, one write after the other, and a reader of both
    /// (Codex) has taken the one before the other comes; through the copies both come at
    /// once, and it would take them in no fixed order. A reader that leaves them there that
    /// long is not waited for again.
    fn wait_taken(&self, stream: Stream) {
        let other = 1 - stream as usize;
        if self.last.load(Ordering::Acquire) as usize != other
            || !self.prompt[other].load(Ordering::Relaxed)
        {
            return;
        }
        // SAFETY: the outputs stay open as long as the turns.
        let out = unsafe { BorrowedFd::borrow_raw(self.outputs[other]) };
        let deadline = Instant::now() + self.patience;
        let mut pause = Duration::from_micros(10);
        while self.busy[other].load(Ordering::Acquire)
            || rustix::io::ioctl_fionread(out).is_ok_and(|held| held > 0)
        {
            if Instant::now() >= deadline {
                // Only a reader that was given everything and took nothing is given up on.
                if !self.busy[other].load(Ordering::Acquire) {
                    self.prompt[other].store(false, Ordering::Relaxed);
                }
                return;
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(1));
        }
    }

    /// `stream`'s copy is about to pass bytes on: the other waits for them to be taken.
    fn passing(&self, stream: Stream) {
        self.busy[stream as usize].store(true, Ordering::Release);
        self.last.store(stream as u8, Ordering::Release);
    }

    /// Waits while the other stream's pipe became readable before `stream`'s, at most
    /// [`TURN_WAIT`]. True if it waited that long.
    fn wait_turn(&self, stream: Stream) -> bool {
        let deadline = Instant::now() + self.patience;
        let Ok(mut watched) = self.watched.lock() else {
            return false;
        };
        while self.other_first(stream) {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return true;
            }
            match self.turn.wait_timeout(watched, left) {
                Ok((guard, _)) => watched = guard,
                Err(_) => return false,
            }
        }
        false
    }

    /// Whether the first pipe that holds bytes is the other stream's. A pipe closed and
    /// empty (EPOLLHUP alone) holds nothing to wait for. Called under `watched`.
    fn other_first(&self, stream: Stream) -> bool {
        let mut events = [EpollEvent::empty(); 2];
        let n = self.epoll.wait(&mut events, 0u8).unwrap_or(0);
        (events[..n].iter())
            .find(|e| e.events().contains(EpollFlags::EPOLLIN))
            .is_some_and(|e| e.data() != stream as u64)
    }

    /// A copy passed something on: the other may go. The set is read again at once, so
    /// that a pipe this left empty drops out of the kernel's ready list (level-triggered,
    /// a pipe found readable stays in its place there until a read of the set finds it
    /// empty), and bytes written to it later queue behind the other's.
    fn moved(&self, stream: Stream) {
        self.last.store(stream as u8, Ordering::Release);
        self.busy[stream as usize].store(false, Ordering::Release);
        if let Ok(_watched) = self.watched.lock() {
            let mut events = [EpollEvent::empty(); 2];
            let _ = self.epoll.wait(&mut events, 0u8);
        }
        self.turn.notify_all();
    }

    /// `stream`'s copy ended: its pipe leaves the set, and its duplicate is closed, so that
    /// the broker learns it as it would without one (EPIPE).
    fn done(&self, stream: Stream) {
        if let Ok(mut watched) = self.watched.lock()
            && let Some(fd) = watched[stream as usize].take()
        {
            let _ = self.epoll.delete(&fd);
        }
        self.turn.notify_all();
    }
}

fn copy_stream(
    pipe: &OwnedFd,
    stream: Stream,
    broken: &UnboundedSender<Stream>,
    copied: &AtomicU64,
    turns: Option<&Turns>,
) -> CopyReport {
    let out = match stream {
        // SAFETY: descriptors 1 and 2 stay open for the life of the process.
        Stream::Stdout => unsafe { BorrowedFd::borrow_raw(1) },
        Stream::Stderr => unsafe { BorrowedFd::borrow_raw(2) },
    };
    let mut report = CopyReport {
        stream,
        failure: None,
    };
    // Only into a pipe (or /dev/null) does splice(2) never wait with our pipe locked. Into
    // a socket it holds our pipe's lock while the socket is full, and the broker's next
    // write to the pipe sleeps on that lock, uninterruptibly: for as long as our reader read
    // nothing, the broker answered no stop and no signal. Into a terminal the same, while
    // its output is held. Into a regular file it moves the shared file offset without the
    // lock write(2) takes: with stdout and stderr on one file (`> log 2>&1`), the two
    // copies overwrote each other's bytes.
    let mut output = Output::of(out);
    let mut gone = false;
    let mut buf = vec![0u8; CHUNK];
    loop {
        let copying = !gone && report.failure.is_none();
        // Turns are for bytes: a pipe at its end (POLLHUP alone) waits for nothing.
        if let Some(turns) = turns.filter(|_| copying)
            && wait_for(pipe.as_fd(), PollFlags::POLLIN).contains(PollFlags::POLLIN)
        {
            turns.wait_turn(stream);
            turns.wait_taken(stream);
            turns.passing(stream);
        }
        if copying && output == Output::Splice {
            match nix::fcntl::splice(pipe, None, out, None, CHUNK, SpliceFFlags::SPLICE_F_MOVE) {
                Ok(0) => return report,
                Ok(n) => {
                    copied.fetch_add(n as u64, Ordering::Release);
                    if let Some(turns) = turns {
                        turns.moved(stream);
                    }
                    continue;
                }
                Err(Errno::EINTR) => continue,
                // Non-blocking in either end (our stdout shared with a caller that made it so),
                // splice does not wait for data or for room: wait for both here, or a quiet
                // command would have us spin.
                Err(Errno::EAGAIN) => {
                    let _ = wait_for(pipe.as_fd(), PollFlags::POLLIN);
                    let _ = wait_for(out, PollFlags::POLLOUT);
                    continue;
                }
                // A pipe that will not take it: copy through memory.
                Err(Errno::EINVAL) | Err(Errno::ENOSYS) => {
                    output = Output::Other;
                    continue;
                }
                Err(err) => {
                    fail(&mut report, &mut gone, err.into(), broken, turns);
                    continue;
                }
            }
        }
        let n = match nix::unistd::read(pipe, &mut buf) {
            Ok(0) => return report,
            Ok(n) => n,
            Err(Errno::EINTR) => continue,
            Err(_) => return report,
        };
        if !copying {
            if let Some((_, lost)) = report.failure.as_mut() {
                *lost += n as u64;
            }
            continue;
        }
        if let Err((err, written)) = write_all(out, output, &buf[..n], copied) {
            fail(&mut report, &mut gone, err, broken, turns);
            if let Some((_, lost)) = report.failure.as_mut() {
                *lost += (n - written) as u64;
            }
        }
        if let Some(turns) = turns {
            turns.moved(stream);
        }
    }
}

/// Records a failed write: EPIPE is told at once (and not an error to report later); any
/// other error is kept for the end. Either way the pipe is still drained, so the broker and
/// the command are never held up by an output that is gone, nor the other stream's copy by
/// a reader that is gone ([`Turns::wait_taken`]).
fn fail(
    report: &mut CopyReport,
    gone: &mut bool,
    err: io::Error,
    broken: &UnboundedSender<Stream>,
    turns: Option<&Turns>,
) {
    if err.raw_os_error() == Some(Errno::EPIPE as i32) {
        *gone = true;
        let _ = broken.send(report.stream);
        if let Some(turns) = turns {
            turns.prompt[report.stream as usize].store(false, Ordering::Relaxed);
        }
    } else {
        report.failure = Some((err, 0));
    }
}

/// Writes all of `bytes`, counting in `copied` what is passed on as it goes; on failure,
/// the error and how many bytes were written before it.
fn write_all(
    out: BorrowedFd<'_>,
    output: Output,
    bytes: &[u8],
    copied: &AtomicU64,
) -> Result<(), (io::Error, usize)> {
    let mut written = 0;
    while written < bytes.len() {
        let sent = match output {
            Output::Socket => nix::sys::socket::send(
                out.as_raw_fd(),
                &bytes[written..],
                MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_NOSIGNAL,
            ),
            _ => nix::unistd::write(out, &bytes[written..]),
        };
        match sent {
            Ok(n) => {
                written += n;
                copied.fetch_add(n as u64, Ordering::Release);
            }
            Err(Errno::EINTR) => {}
            // Our stream may have been left non-blocking by whoever shares it: wait for room
            // rather than spin.
            Err(Errno::EAGAIN) => {
                let _ = wait_for(out, PollFlags::POLLOUT);
            }
            Err(err) => return Err((err.into(), written)),
        }
    }
    Ok(())
}

/// Waits until `fd` is ready for `what` (or its other end is gone).
fn wait_for(fd: BorrowedFd<'_>, what: PollFlags) -> PollFlags {
    let mut fds = [PollFd::new(fd, what)];
    let _ = nix::poll::poll(&mut fds, PollTimeout::NONE);
    fds[0].revents().unwrap_or(PollFlags::empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A copy whose pipe became readable after the other's waits its turn: until the other
    /// has passed its bytes on, or, if it never does, not past [`TURN_WAIT`].
    #[test]
    fn a_copy_waits_for_the_stream_written_before_it() {
        let (out_read, out_write) = nix::unistd::pipe().unwrap();
        let (err_read, err_write) = nix::unistd::pipe().unwrap();
        // Patience enough for any load: the wait ends when stderr is passed on.
        let patient = Turns::passing_on_to(
            &[out_read.try_clone().unwrap(), err_read.try_clone().unwrap()],
            [1, 2],
            Duration::from_secs(60),
        );
        let turns = Arc::new(patient.unwrap());
        nix::unistd::write(&err_write, b"curl: error").unwrap();
        nix::unistd::write(&out_write, b"000\n").unwrap();
        assert!(turns.other_first(Stream::Stdout) && !turns.other_first(Stream::Stderr));
        // Stdout waits while stderr's copy is behind, and goes once it has passed it on.
        let waiting = std::thread::spawn({
            let turns = turns.clone();
            move || turns.wait_turn(Stream::Stdout)
        });
        let mut buf = [0u8; 64];
        assert_eq!(nix::unistd::read(&err_read, &mut buf).unwrap(), 11);
        turns.moved(Stream::Stderr);
        assert!(!waiting.join().unwrap(), "went when stderr was passed on");
        // Stdout taken too; then stderr, then stdout again: stdout waits its turn, and a
        // stderr never taken holds it up for TURN_WAIT only.
        assert_eq!(nix::unistd::read(&out_read, &mut buf).unwrap(), 4);
        turns.moved(Stream::Stdout);
        assert!(!turns.other_first(Stream::Stdout) && !turns.other_first(Stream::Stderr));
        let turns = Turns::new(&[out_read, err_read]).unwrap();
        nix::unistd::write(&err_write, b"more").unwrap();
        nix::unistd::write(&out_write, b"200\n").unwrap();
        assert!(turns.wait_turn(Stream::Stdout), "waited out");
        assert!(!turns.wait_turn(Stream::Stderr));
    }

    /// A pipe at its end and empty holds nothing the other must wait for, nor does the pipe
    /// of a copy that ended.
    #[test]
    fn an_ended_stream_holds_nothing_up() {
        let (out_read, out_write) = nix::unistd::pipe().unwrap();
        let (err_read, err_write) = nix::unistd::pipe().unwrap();
        let turns =
            Turns::new(&[out_read.try_clone().unwrap(), err_read.try_clone().unwrap()]).unwrap();
        // As the broker ends: stdout's copy pipe closed first, then stderr's.
        drop(out_write);
        nix::unistd::write(&err_write, b"last").unwrap();
        drop(err_write);
        assert!(
            !turns.wait_turn(Stream::Stderr),
            "stdout's end is not bytes"
        );
        let (out_read2, out_write2) = nix::unistd::pipe().unwrap();
        let (err_read2, err_write2) = nix::unistd::pipe().unwrap();
        let turns = Turns::new(&[out_read2, err_read2.try_clone().unwrap()]).unwrap();
        nix::unistd::write(&out_write2, b"never taken").unwrap();
        nix::unistd::write(&err_write2, b"x").unwrap();
        turns.done(Stream::Stdout);
        assert!(!turns.wait_turn(Stream::Stderr), "stdout's copy ended");
        drop((out_read, err_read, err_read2));
    }

    /// After stderr passed bytes on, stdout waits until stderr's reader has taken them, as
    /// without tether the command's next write came after they were read; a reader that
    /// leaves them for TURN_WAIT is not waited for again.
    #[test]
    fn a_copy_waits_for_the_other_streams_reader_while_it_keeps_up() {
        let (out_read, _out_write) = nix::unistd::pipe().unwrap();
        let (err_read, _err_write) = nix::unistd::pipe().unwrap();
        let (given_out, to_out) = nix::unistd::pipe().unwrap();
        let (given_err, to_err) = nix::unistd::pipe().unwrap();
        let outputs = [to_out.as_raw_fd(), to_err.as_raw_fd()];
        // Patience enough for any load: the wait ends when the bytes are read.
        let patient = |pipes| Turns::passing_on_to(pipes, outputs, Duration::from_secs(60));
        let turns = Arc::new(
            patient(&[out_read.try_clone().unwrap(), err_read.try_clone().unwrap()]).unwrap(),
        );
        nix::unistd::write(&to_err, b"curl: error").unwrap();
        turns.moved(Stream::Stderr);
        // The wait ends once the bytes are read, never before the read is about to happen
        // (without the wait it would most likely return long before).
        let read = Arc::new(AtomicBool::new(false));
        let waiting = std::thread::spawn({
            let (turns, read) = (turns.clone(), read.clone());
            move || {
                turns.wait_taken(Stream::Stdout);
                read.load(Ordering::Acquire)
            }
        });
        let mut buf = [0u8; 64];
        // Set before the read, so that a wait that ends with the read always sees it.
        read.store(true, Ordering::Release);
        assert_eq!(nix::unistd::read(&given_err, &mut buf).unwrap(), 11);
        assert!(waiting.join().unwrap(), "returned before stderr was read");
        assert!(
            turns.prompt[1].load(Ordering::Relaxed),
            "taken: still prompt"
        );
        // Left unread: waited out once, then not again.
        let turns = Turns::passing_on_to(&[out_read, err_read], outputs, TURN_WAIT).unwrap();
        turns.moved(Stream::Stderr);
        nix::unistd::write(&to_err, b"more").unwrap();
        turns.wait_taken(Stream::Stdout);
        assert!(!turns.prompt[1].load(Ordering::Relaxed));
        assert!(
            turns.prompt[0].load(Ordering::Relaxed),
            "stdout's reader is another"
        );
        drop((given_out, to_out));
    }
}
