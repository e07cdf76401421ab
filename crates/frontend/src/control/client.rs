//! A connection to one broker's control socket: the socket's framing only. Requests go out,
//! answers and (once subscribed) the broker's events come back, the same lines its journal
//! holds; which answer acknowledges which request, and what to do when none comes, is the
//! [`BrokerConversation`](crate::supervisor::BrokerConversation)'s.
//!
//! Both ends are checked: the socket file must be ours before we connect, and the process
//! that accepted must be ours too (`SO_PEERCRED`), and the very broker the journal names.

use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use thiserror::Error;
use tokio::net::UnixStream;

use super::discover::LiveCommand;
use super::socket_dir;
use crate::supervisor::Wire;
use tether_protocol::protocol::BrokerIdentity;

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
    #[error("talking to the broker failed: {0}")]
    Io(#[from] io::Error),
}

/// One connection to a broker's control socket: the transport of a
/// [`BrokerConversation`](crate::supervisor::BrokerConversation) attached to a broker that
/// another front end launched, the socket carrying requests out and lines back. Requests
/// are queued and written as the socket takes them; what each one got back comes among the
/// lines, in order, one answer per request.
pub type ControlClient = Wire;

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
    async fn connect(
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
        ControlClient::over(OwnedFd::from(stream.into_std()?))
    }

    /// Connects to the broker of a live command (checked against its journaled pid).
    pub async fn connect_to(command: &LiveCommand) -> Result<ControlClient, ControlError> {
        let socket = command
            .control_socket
            .as_deref()
            .ok_or(ControlError::NoSocket)?;
        ControlClient::connect(socket, Some(&command.broker)).await
    }

    /// Talks over `socket`, a connected stream whose peer was checked (or a test's pair).
    pub(crate) fn over(socket: OwnedFd) -> Result<ControlClient, ControlError> {
        Ok(Wire::new(socket, None, 64 * 1024)?)
    }
}

/// A connected non-blocking socket, handed to tokio.
fn stream_from(fd: OwnedFd) -> io::Result<UnixStream> {
    UnixStream::from_std(std::os::unix::net::UnixStream::from(fd))
}
