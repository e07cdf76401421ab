//! The broker process: `tether broker` started in its own session with the descriptors it
//! takes, requests written to its stdin, events read from its stdout. Only
//! [`super::conversation`] talks to it.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};

use crate::broker::{BROKER_ENV, BROKER_TOKEN_ENV, JOURNAL_FD};
use crate::fdio::{AsyncPipe, LineReader, Outbox};
use crate::journal::JournalDir;
use crate::protocol::{Event, Frame, LaunchRequest, MAX_LINE, ToBroker, encode_line};

/// A fresh broker token: 128 bits from the kernel's random source, in hex.
fn broker_token() -> io::Result<String> {
    use std::io::Read;
    let mut bits = [0u8; 16];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bits)?;
    Ok(bits.iter().map(|b| format!("{b:02x}")).collect())
}

/// A running broker: requests go to its stdin, events come from its stdout.
pub struct BrokerProcess {
    pub child: Child,
    requests: AsyncPipe,
    events: AsyncPipe,
    reader: LineReader,
    /// Request lines the broker's stdin has not taken yet.
    outbox: Outbox,
    /// The name of the cgroup the broker will put the command in, where there is a
    /// hierarchy: what to kill and remove if the broker dies before its `containment` event
    /// comes (see [`containment::expected_cgroup`](crate::broker::containment::expected_cgroup)).
    pub expected_cgroup: Option<String>,
    /// The command's journal directory, locked (`flock`) while this front end looks after
    /// the command, its leftovers included: a later tether never takes over a command whose
    /// front end lives. The broker holds the same open directory (and so the lock) as its
    /// journal descriptor, for as long as it runs.
    _custody: Option<OwnedFd>,
}

/// One line from a broker: the event, and the exact bytes it came as.
pub struct BrokerLine {
    pub raw: Vec<u8>,
    pub event: Result<Event, String>,
}

impl BrokerProcess {
    /// Starts `tether broker` (this very binary) in its own session and sends it `request`.
    /// Must be called inside a tokio runtime.
    /// `journal` is the command's journal directory, created by the front end; the broker
    /// receives it as descriptor [`JOURNAL_FD`] and writes only below it. `handover` holds
    /// the other descriptors the request asks the broker to take (see [`Handover`]).
    pub async fn spawn(
        request: &LaunchRequest,
        journal: &JournalDir,
        handover: Handover,
        stderr: Stdio,
    ) -> io::Result<BrokerProcess> {
        let launch =
            encode_line(&ToBroker::Launch(Box::new(request.clone()))).map_err(io::Error::other)?;
        if launch.len() > MAX_LINE {
            return Err(io::Error::other(format!(
                "the launch request is {} bytes, over the {}-MiB limit; shorten the command line or its environment",
                launch.len(),
                MAX_LINE >> 20
            )));
        }
        let journal_fd = journal.try_clone_fd()?;
        let custody = journal.try_clone_fd()?;
        // A fresh directory nobody else holds: the lock is ours at once. Without it (a file
        // system without locks) a later tether may only find the command once we are gone.
        // rustix's flock: nix's is deprecated for a `Flock` that takes the descriptor over.
        let _ = rustix::fs::flock(
            &custody,
            rustix::fs::FlockOperation::NonBlockingLockExclusive,
        );
        let exe = std::env::current_exe()?;
        let mut command = Command::new(exe);
        command
            .arg("broker")
            .env(BROKER_ENV, "1")
            .env(BROKER_TOKEN_ENV, broker_token()?)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr);
        // SAFETY: setsid, dup2 and fcntl are async-signal-safe and touch no memory of the
        // parent; `journal_fd` and `handover` stay open in the parent until spawn returns.
        unsafe {
            command.pre_exec(move || {
                nix::unistd::setsid()?;
                let [out, err] = handover
                    .mirror
                    .as_ref()
                    .map_or([None, None], |[o, e]| [Some(o), Some(e)]);
                pass_fds(
                    [Some(&journal_fd), out, err, handover.stdin.as_ref()],
                    JOURNAL_FD,
                )
            });
        }
        let child = command.spawn()?;
        let mut broker = BrokerProcess::talking_to(child, None, Some(custody))?;
        // The request first: the broker waits for it, and what follows does not.
        broker.requests.write_all(&launch).await?;
        // Our unreaped child: the pid names it, and its start time is the one it names its
        // command's cgroup with.
        let pid = broker.pid();
        let identity = crate::protocol::BrokerIdentity {
            pid,
            start_ticks: crate::procfs::read_stat(pid).map_or(0, |s| s.start_ticks),
        };
        broker.expected_cgroup = Some(crate::broker::containment::cgroup_name(request, &identity));
        Ok(broker)
    }

    /// Talks to `child` through its piped stdin and stdout.
    pub(super) fn talking_to(
        mut child: Child,
        expected_cgroup: Option<String>,
        custody: Option<OwnedFd>,
    ) -> io::Result<BrokerProcess> {
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(io::Error::other("the broker's pipes were not created"));
        };
        Ok(BrokerProcess {
            child,
            requests: AsyncPipe::new(OwnedFd::from(stdin))?,
            events: AsyncPipe::new(OwnedFd::from(stdout))?,
            reader: LineReader::new(256 * 1024),
            outbox: Outbox::default(),
            expected_cgroup,
            _custody: custody,
        })
    }

    /// Queues a request and writes what the broker's stdin takes now, never waiting: a
    /// stopped broker must not stall its front end. `Err` means the broker is gone.
    pub fn post(&mut self, message: &ToBroker) -> io::Result<()> {
        let line = encode_line(message).map_err(io::Error::other)?;
        self.outbox.push(&line);
        self.flush_posted()
    }

    /// A ping, unless earlier requests still wait: the broker answers those first anyway.
    /// Returns whether a ping was queued.
    pub fn ping(&mut self) -> io::Result<bool> {
        if self.outbox.is_empty() {
            self.post(&ToBroker::Ping).map(|()| true)
        } else {
            self.flush_posted().map(|()| false)
        }
    }

    /// Writes what the broker's stdin takes of the queued requests now.
    pub fn flush_posted(&mut self) -> io::Result<()> {
        self.outbox.write_now(&self.requests)
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// The next line from the broker; `None` once it has closed its end. While it waits,
    /// requests that a post could not write (a paste bigger than the pipe, a broker that
    /// is behind) go as the broker's stdin takes them, not only with the next post.
    /// Cancel-safe: a line is only taken in the poll that returns it, and bytes leave the
    /// queue only in the poll that writes them.
    pub async fn next_line(&mut self) -> Option<BrokerLine> {
        let frame = self
            .reader
            .next(&self.events, &mut self.outbox, &self.requests)
            .await?;
        Some(BrokerLine::from_frame(frame))
    }
}

impl BrokerProcess {
    /// Reads, without waiting, what the broker has written and was not read yet, and returns
    /// how many lines then wait for [`Self::next_line`]: all it wrote before this call (the
    /// buffer holds more than a pipe; a pipe raised past it to the 1-MiB ceiling takes a few
    /// reads). End of file and errors are left for `next_line` to meet.
    pub fn read_waiting(&mut self) -> usize {
        self.reader.read_waiting(&self.events)
    }
}

/// Descriptors a broker takes at fixed numbers, besides its journal directory.
#[derive(Default)]
pub struct Handover {
    /// The write ends of the copy pipes, stdout's then stderr's ([`MIRROR_FDS`](crate::broker::mirror::MIRROR_FDS)), when the
    /// request asks for a mirror.
    pub mirror: Option<[OwnedFd; 2]>,
    /// The front end's stdin ([`STDIN_FD`](crate::broker::STDIN_FD)), when the request says `stdin: inherit`.
    pub stdin: Option<OwnedFd>,
}

/// In a child between fork and exec: makes each given descriptor available at its target
/// number (3, 4, 5, 6), inherited by exec. Each is first copied above every target, so no
/// source is overwritten by an earlier target. No allocation: this runs after fork. rustix,
/// whose `F_DUPFD_CLOEXEC` hands back an owned descriptor (nix's a bare number).
fn pass_fds(fds: [Option<&OwnedFd>; 4], first_target: RawFd) -> io::Result<()> {
    let mut high: [Option<OwnedFd>; 4] = [None, None, None, None];
    for (slot, fd) in high.iter_mut().zip(fds) {
        if let Some(fd) = fd {
            *slot = Some(rustix::io::fcntl_dupfd_cloexec(fd, first_target + 16)?);
        }
    }
    for (i, fd) in high.iter().enumerate() {
        if let Some(fd) = fd {
            // SAFETY: the target is a descriptor number this child gives a new meaning to;
            // it is never closed here (forgotten below). dup2 clears close-on-exec on it.
            let mut target = unsafe { OwnedFd::from_raw_fd(first_target + i as RawFd) };
            let result = rustix::io::dup2(fd, &mut target);
            std::mem::forget(target);
            result?;
        }
    }
    Ok(())
}

impl BrokerLine {
    /// A line as it was framed, read from the broker's stdout or its control socket.
    pub(crate) fn from_frame(frame: Frame) -> BrokerLine {
        match frame {
            Frame::Line(raw) => {
                let event = serde_json::from_slice(&raw).map_err(|e| e.to_string());
                BrokerLine { raw, event }
            }
            Frame::TooLong { len } => BrokerLine {
                raw: Vec::new(),
                event: Err(format!(
                    "a {len}-byte line from the broker exceeds the limit"
                )),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// More requests than a pipe holds, posted to a reader that starts late: what the
    /// posts could not write goes while the front end waits for a line, with no request
    /// after them to carry it.
    #[tokio::test]
    async fn posted_requests_that_did_not_fit_go_while_waiting_for_a_line() {
        let input = ToBroker::Input {
            data: vec![b'x'; crate::protocol::MAX_INPUT_CHUNK],
        };
        let line_len = encode_line(&input).expect("a request").len();
        let requests = 64;
        let total = requests * line_len;
        let child = Command::new("sh")
            .args(["-c", &format!("sleep 0.2; head -c {total} | wc -c")])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("run sh");
        let mut reader = BrokerProcess::talking_to(child, None, None).expect("the pipes");
        for _ in 0..requests {
            reader.post(&input).expect("post");
        }
        assert!(!reader.outbox.is_empty(), "{total} bytes fill the pipe");
        let line = tokio::time::timeout(std::time::Duration::from_secs(30), reader.next_line())
            .await
            .expect("every request reaches the reader")
            .expect("its count");
        assert_eq!(String::from_utf8_lossy(&line.raw).trim(), total.to_string());
        let _ = reader.child.wait();
    }
}
