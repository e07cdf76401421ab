//! The front end's side of brokers: sessions on disk, starting a broker, talking to it.

mod ack;
pub mod fleet;
pub mod leftovers;
pub mod liveness;
mod session;

pub use session::Session;

use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};

use crate::broker::BROKER_ENV;
use crate::fdio::AsyncPipe;
use crate::protocol::{Event, Frame, LaunchRequest, LineSplitter, MAX_LINE, ToBroker};

/// A running broker: requests go to its stdin, events come from its stdout.
pub struct BrokerProcess {
    pub child: Child,
    requests: AsyncPipe,
    events: AsyncPipe,
    lines: LineSplitter,
    buf: Vec<u8>,
    pending: std::collections::VecDeque<Frame>,
    /// Request lines the broker's stdin has not taken yet.
    outbox: Vec<u8>,
}

/// One line from a broker: the event, and the exact bytes it came as.
pub struct BrokerLine {
    pub raw: Vec<u8>,
    pub event: Result<Event, String>,
}

impl BrokerProcess {
    /// Starts `tether broker` (this very binary) in its own session and sends it `request`.
    /// Must be called inside a tokio runtime.
    pub async fn spawn(request: &LaunchRequest, stderr: Stdio) -> io::Result<BrokerProcess> {
        let exe = std::env::current_exe()?;
        let mut command = Command::new(exe);
        command
            .arg("broker")
            .env(BROKER_ENV, "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr);
        // SAFETY: setsid is async-signal-safe and touches no memory of the parent.
        unsafe {
            command.pre_exec(|| {
                rustix::process::setsid()?;
                Ok(())
            });
        }
        let mut child = command.spawn()?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(io::Error::other("the broker's pipes were not created"));
        };
        let mut broker = BrokerProcess {
            child,
            requests: AsyncPipe::new(OwnedFd::from(stdin))?,
            events: AsyncPipe::new(OwnedFd::from(stdout))?,
            lines: LineSplitter::new(MAX_LINE),
            buf: vec![0; 256 * 1024],
            pending: Default::default(),
            outbox: Vec::new(),
        };
        broker.send(&ToBroker::Launch(request.clone())).await?;
        Ok(broker)
    }

    pub async fn send(&mut self, message: &ToBroker) -> io::Result<()> {
        let mut line = serde_json::to_vec(message).map_err(io::Error::other)?;
        line.push(b'\n');
        self.requests.write_all(&line).await
    }

    /// Queues a request and writes what the broker's stdin takes now, never waiting: a
    /// stopped broker must not stall its front end. `Err` means the broker is gone.
    pub fn post(&mut self, message: &ToBroker) -> io::Result<()> {
        let mut line = serde_json::to_vec(message).map_err(io::Error::other)?;
        line.push(b'\n');
        self.outbox.extend_from_slice(&line);
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
        let mut written = 0;
        while written < self.outbox.len() {
            match self.requests.try_write(&self.outbox[written..]) {
                Ok(n) => written += n,
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => break,
                Err(err) => {
                    self.outbox.clear();
                    return Err(err);
                }
            }
        }
        self.outbox.drain(..written);
        Ok(())
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// The next line from the broker; `None` once it has closed its end.
    /// Cancel-safe: a line is only taken in the poll that returns it.
    pub async fn next_line(&mut self) -> Option<BrokerLine> {
        loop {
            if let Some(frame) = self.pending.pop_front() {
                return Some(decode(frame));
            }
            match self.events.read(&mut self.buf).await {
                Ok(0) | Err(_) => return self.lines.finish().map(decode),
                Ok(n) => self.pending.extend(self.lines.push(&self.buf[..n])),
            }
        }
    }
}

/// Makes this process a child subreaper, so that what a broker leaves when it dies is
/// re-parented here and can be stopped (see [`leftovers`]).
pub fn become_subreaper() -> io::Result<()> {
    rustix::process::set_child_subreaper(Some(rustix::process::getpid())).map_err(io::Error::from)
}

fn decode(frame: Frame) -> BrokerLine {
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
