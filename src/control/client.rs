//! A connection to one broker's control socket: send requests, read the answers and (once
//! subscribed) the broker's events, the same lines its journal holds.
//!
//! Both ends are checked: the socket file must be ours before we connect, and the process
//! that accepted must be ours too (`SO_PEERCRED`), and the very broker the journal names.

use std::collections::VecDeque;
use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use thiserror::Error;
use tokio::net::UnixStream;

use super::discover::LiveCommand;
use super::socket_dir;
use crate::protocol::{
    BrokerIdentity, CONTROL_MAX_LINE, ControlRequest, Event, EventKind, Frame, LineSplitter,
    MAX_LINE, ProcessSignal, Scope,
};

#[derive(Debug, Error)]
pub enum ControlError {
    #[error("its broker has no control socket")]
    NoSocket,
    #[error(
        "{path} is not a socket of yours; it was not used (someone else may have put it there)"
    )]
    NotOurs { path: PathBuf },
    #[error("nobody listens on {path} any more (its broker is gone); the stale socket was removed")]
    Stale { path: PathBuf },
    #[error(
        "the process behind {path} is pid {pid}, uid {uid}, not the broker the journal names (pid {expected}); it was not used"
    )]
    WrongPeer {
        path: PathBuf,
        pid: i32,
        uid: u32,
        expected: i32,
    },
    #[error("cannot connect to {path}: {source}")]
    Connect {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("the broker refused: {message}")]
    Refused { code: String, message: String },
    #[error("the broker closed the connection")]
    Closed,
    #[error("talking to the broker failed: {0}")]
    Io(#[from] io::Error),
}

/// One connection to a broker's control socket.
pub struct ControlClient {
    stream: UnixStream,
    path: PathBuf,
    lines: LineSplitter,
    buf: Vec<u8>,
    frames: VecDeque<Frame>,
    /// Events read while waiting for an answer, for [`ControlClient::next_event`].
    backlog: VecDeque<Event>,
    eof: bool,
}

/// What a request got back.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Ack {
    pub journal_offset: Option<u64>,
    pub targets: Vec<i32>,
    pub message: Option<String>,
}

impl ControlClient {
    /// Connects to the socket at `path`, which must be a socket owned by us; the process
    /// that accepts must be ours and, when `broker` is given, that very broker. A socket
    /// nobody listens on is removed ([`ControlError::Stale`]).
    pub async fn connect(
        path: &Path,
        broker: Option<&BrokerIdentity>,
    ) -> Result<ControlClient, ControlError> {
        if !socket_dir::is_own_socket(path) {
            return Err(match std::fs::symlink_metadata(path) {
                Err(err) if err.kind() == io::ErrorKind::NotFound => ControlError::Connect {
                    path: path.to_path_buf(),
                    source: err,
                },
                _ => ControlError::NotOurs {
                    path: path.to_path_buf(),
                },
            });
        }
        let stream = match socket_dir::connect_now(path) {
            Ok(fd) => stream_from(fd)?,
            Err(err) if err.raw_os_error() == Some(libc::ECONNREFUSED) => {
                socket_dir::remove_if_stale(path);
                return Err(ControlError::Stale {
                    path: path.to_path_buf(),
                });
            }
            Err(source) => {
                return Err(ControlError::Connect {
                    path: path.to_path_buf(),
                    source,
                });
            }
        };
        let cred = stream.peer_cred()?;
        let me = nix::unistd::geteuid().as_raw();
        let pid = cred.pid().unwrap_or(0);
        let expected = broker.map_or(pid, |b| b.pid);
        if cred.uid() != me || pid != expected {
            return Err(ControlError::WrongPeer {
                path: path.to_path_buf(),
                pid,
                uid: cred.uid(),
                expected,
            });
        }
        Ok(ControlClient {
            stream,
            path: path.to_path_buf(),
            // Subscribers get the journal's lines, which may be as long as a broker writes.
            lines: LineSplitter::new(MAX_LINE),
            buf: vec![0; 64 * 1024],
            frames: VecDeque::new(),
            backlog: VecDeque::new(),
            eof: false,
        })
    }

    /// Connects to the broker of a live command (checked against its journaled pid).
    pub async fn connect_to(command: &LiveCommand) -> Result<ControlClient, ControlError> {
        let socket = command
            .control_socket
            .as_deref()
            .ok_or(ControlError::NoSocket)?;
        ControlClient::connect(socket, Some(&command.broker)).await
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Sends a request without waiting for its answer, which comes through
    /// [`ControlClient::next_event`] as `control_ack`, `control_error` or `pong`.
    pub async fn post(&mut self, request: &ControlRequest) -> Result<(), ControlError> {
        let line = request.to_line();
        debug_assert!(line.len() <= CONTROL_MAX_LINE);
        let mut written = 0;
        while written < line.len() {
            self.stream.writable().await?;
            match self.stream.try_write(&line[written..]) {
                Ok(n) => written += n,
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => {}
                Err(err) => return Err(err.into()),
            }
        }
        Ok(())
    }

    /// Sends a request and waits for its answer; events that arrive meanwhile are kept for
    /// [`ControlClient::next_event`].
    pub async fn request(&mut self, request: &ControlRequest) -> Result<Ack, ControlError> {
        self.post(request).await?;
        loop {
            let event = self.read_event().await?.ok_or(ControlError::Closed)?;
            match event.kind {
                EventKind::ControlAck {
                    journal_offset,
                    targets,
                    message,
                    ..
                } => {
                    return Ok(Ack {
                        journal_offset,
                        targets,
                        message,
                    });
                }
                EventKind::Pong => return Ok(Ack::default()),
                EventKind::ControlError { code, message } => {
                    return Err(ControlError::Refused { code, message });
                }
                _ => self.backlog.push_back(event),
            }
        }
    }

    /// Asks for every event from now on. Returns the length of `events.jsonl` before the
    /// first one: read the journal up to there, then [`ControlClient::next_event`].
    pub async fn subscribe(&mut self) -> Result<u64, ControlError> {
        let ack = self.request(&ControlRequest::Subscribe).await?;
        Ok(ack.journal_offset.unwrap_or(0))
    }

    pub async fn ping(&mut self) -> Result<(), ControlError> {
        self.request(&ControlRequest::Ping).await.map(|_| ())
    }

    /// Sends `signal` (`TERM`, `KILL`, `15`) to the command's whole tree. Returns the pids it
    /// reached.
    pub async fn signal(&mut self, signal: ProcessSignal) -> Result<Vec<i32>, ControlError> {
        let request = ControlRequest::Signal {
            signal,
            scope: Scope::Group,
            pid: None,
        };
        Ok(self.request(&request).await?.targets)
    }

    /// Sends `signal` to one process of the command's tree.
    pub async fn signal_pid(
        &mut self,
        signal: ProcessSignal,
        pid: i32,
    ) -> Result<Vec<i32>, ControlError> {
        let request = ControlRequest::Signal {
            signal,
            scope: Scope::Pid,
            pid: Some(pid),
        };
        Ok(self.request(&request).await?.targets)
    }

    /// Starts the stop sequence. The answer comes once its first signals are sent; the
    /// rest (`signal_sent`, `exit`, `close`) comes as events to a subscriber. `Some` message
    /// when a stop was already running.
    pub async fn stop(&mut self) -> Result<Option<String>, ControlError> {
        Ok(self.request(&ControlRequest::Stop).await?.message)
    }

    /// The next event (kept ones first); `None` once the broker has closed the connection
    /// (it exits right after `close`). Cancel-safe.
    pub async fn next_event(&mut self) -> Result<Option<Event>, ControlError> {
        if let Some(event) = self.backlog.pop_front() {
            return Ok(Some(event));
        }
        self.read_event().await
    }

    async fn read_event(&mut self) -> Result<Option<Event>, ControlError> {
        loop {
            while let Some(frame) = self.frames.pop_front() {
                // A line that is not an event (too long, or from a newer broker) is skipped.
                if let Frame::Line(line) = frame
                    && let Ok(event) = serde_json::from_slice::<Event>(&line)
                {
                    return Ok(Some(event));
                }
            }
            if self.eof {
                return Ok(None);
            }
            self.stream.readable().await?;
            match self.stream.try_read(&mut self.buf) {
                Ok(0) => {
                    self.eof = true;
                    self.frames.extend(self.lines.finish());
                }
                Ok(n) => self.frames.extend(self.lines.push(&self.buf[..n])),
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => {}
                // The broker exited while we were writing or reading: the connection is over.
                Err(err) if err.kind() == io::ErrorKind::ConnectionReset => self.eof = true,
                Err(err) => return Err(err.into()),
            }
        }
    }
}

/// A connected non-blocking socket, handed to tokio.
fn stream_from(fd: OwnedFd) -> io::Result<UnixStream> {
    UnixStream::from_std(std::os::unix::net::UnixStream::from(fd))
}
