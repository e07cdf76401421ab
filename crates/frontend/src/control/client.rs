//! A connection to one broker's control socket: the socket's framing only. Requests go out,
//! answers and (once subscribed) the broker's events come back, the same lines its journal
//! holds; which answer acknowledges which request, and what to do when none comes, is the
//! [`BrokerConversation`](crate::supervisor::BrokerConversation)'s.
//!
//! Both ends are checked: the socket file must be ours before we connect, and the process
//! that accepted must be ours too (`SO_PEERCRED`), and the very broker the journal names.

use std::io;
use std::os::fd::OwnedFd;
use std::path::PathBuf;

use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
use thiserror::Error;

use super::discover::LiveCommand;
use super::socket_dir;
use crate::supervisor::Wire;

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
    /// Connects to the broker of a live command through its socket, which must be a socket
    /// owned by us; the process that accepts must be ours and that very broker (its
    /// journaled pid). A socket nobody listens on is removed ([`ControlError::Stale`]).
    pub async fn connect_to(command: &LiveCommand) -> Result<ControlClient, ControlError> {
        let path = command
            .control_socket
            .as_deref()
            .ok_or(ControlError::NoSocket)?;
        let at = path.to_path_buf();
        if !socket_dir::is_own_socket(path) {
            return Err(match std::fs::symlink_metadata(path) {
                Err(source) if source.kind() == io::ErrorKind::NotFound => {
                    ControlError::Connect { path: at, source }
                }
                _ => ControlError::NotOurs { path: at },
            });
        }
        let socket = socket_dir::connect_now(path).map_err(|source| {
            if source.raw_os_error() == Some(libc::ECONNREFUSED) {
                socket_dir::remove_if_stale(path);
                ControlError::Stale { path: at.clone() }
            } else {
                ControlError::Connect {
                    path: at.clone(),
                    source,
                }
            }
        })?;
        let cred = getsockopt(&socket, PeerCredentials).map_err(io::Error::from)?;
        let expected = command.broker.pid;
        if cred.uid() != nix::unistd::geteuid().as_raw() || cred.pid() != expected {
            return Err(ControlError::WrongPeer {
                path: at,
                pid: cred.pid(),
                uid: cred.uid(),
                expected,
            });
        }
        ControlClient::over(socket)
    }

    /// Talks over `socket`, a connected stream whose peer was checked (or a test's pair).
    pub(crate) fn over(socket: OwnedFd) -> Result<ControlClient, ControlError> {
        Ok(Wire::new(socket, None, 64 * 1024)?)
    }
}
