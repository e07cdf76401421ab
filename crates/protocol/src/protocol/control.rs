//! Who is at the other end of a broker's control socket, and what the broker adds to
//! `command.json` so that any front end of the same user finds the socket.
//!
//! Its requests are [`super::Request`]s, those [`super::Transport::Socket`] takes. Answers
//! are [`super::Event`] lines: the broker's own events for subscribers (the journal's lines,
//! byte for byte), and `control_ack` / `control_error` / `pong` for the client that asked.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::LaunchRequest;

/// The longest request line a control socket accepts: requests are a few dozen bytes, so
/// anything longer is garbage, refused without being stored.
pub const CONTROL_MAX_LINE: usize = 64 * 1024;

/// Who is at the other end of a control connection, as the kernel says (`SO_PEERCRED`),
/// or the broker's parent (the front end that launched it) when the request came on its
/// pipe.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Peer {
    /// 0 when the peer is in a PID namespace this broker cannot see into.
    pub pid: i32,
    pub uid: u32,
    /// The peer's program as the broker read it from /proc when the request came (its
    /// executable's name, and tether's subcommand: `tether watch`, `tether stop`; see
    /// `procfs::program_label` in the tether crate). Absent in journals written before, and when the
    /// broker could not read it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub program: Option<String>,
}

impl Peer {
    /// `tether watch, pid 26880`; `pid 26880` when the program is unknown.
    pub fn describe(&self) -> String {
        match &self.program {
            Some(program) => format!("{program}, pid {}", self.pid),
            None => format!("pid {}", self.pid),
        }
    }
}

/// Which process a broker is: its pid, and its start time in clock ticks after boot, which
/// together name it for good (a reused pid has another start time).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerIdentity {
    pub pid: i32,
    pub start_ticks: u64,
}

impl BrokerIdentity {
    /// `<pid>-<start ticks>`: the broker as the names of its journal link, its cgroup and an
    /// agent's shims directory give it.
    pub fn label(&self) -> String {
        format!("{}-{}", self.pid, self.start_ticks)
    }

    /// The broker a [`label`](Self::label) names; `None` for anything else.
    pub fn from_label(label: &str) -> Option<BrokerIdentity> {
        let (pid, start) = label.split_once('-')?;
        Some(BrokerIdentity {
            pid: pid.parse().ok()?,
            start_ticks: start.parse().ok()?,
        })
    }
}

/// `command.json` as the broker writes it: the launch request, plus who the broker is and
/// where its control socket listens. Readers that only want the request read the same file
/// as a [`LaunchRequest`] (unknown fields are ignored).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommandFile {
    #[serde(flatten)]
    pub request: LaunchRequest,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub broker: Option<BrokerIdentity>,
    /// The token its front end gave the broker (`TETHER_BROKER_TOKEN`), which its
    /// environment holds: what proves that a process with the broker's pid is this very
    /// broker before it is signalled by pid. Absent from journals of older brokers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub broker_token: Option<String>,
    /// Absent when the broker could not create one (a `control_unavailable` event says why).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_socket: Option<PathBuf>,
    /// The broker's PID namespace (the inode of its `/proc/self/ns/pid`) when it is not the
    /// first one: `broker`'s pid is the one it has there (an agent's sandbox), which a
    /// reader elsewhere must find its own pid for (`procfs::broker_seen_from_here`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub broker_pid_ns: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::PROTOCOL_VERSION;

    #[test]
    fn a_command_file_is_still_a_launch_request() {
        // Built from JSON, so that fields added to the request later need no change here.
        let request: LaunchRequest = serde_json::from_value(serde_json::json!({
            "v": PROTOCOL_VERSION,
            "name": "x",
            "command": { "argv": ["true"] },
            "journal_dir": "/j",
            "parent_pid": 1,
        }))
        .unwrap();
        let file = CommandFile {
            request: request.clone(),
            broker: Some(BrokerIdentity {
                pid: 42,
                start_ticks: 99,
            }),
            broker_token: Some("0123456789abcdef0123456789abcdef".into()),
            control_socket: Some("/run/user/1/tether/42-99.sock".into()),
            broker_pid_ns: None,
        };
        let json = serde_json::to_string(&file).unwrap();
        assert_eq!(
            serde_json::from_str::<LaunchRequest>(&json).unwrap(),
            request
        );
        assert_eq!(serde_json::from_str::<CommandFile>(&json).unwrap(), file);
        // A journal written before the control socket existed reads too.
        let old = serde_json::to_string(&request).unwrap();
        let read = serde_json::from_str::<CommandFile>(&old).unwrap();
        assert_eq!((read.broker, read.control_socket), (None, None));
        assert_eq!(read.broker_token, None);
    }
}
