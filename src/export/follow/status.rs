//! The follower's state for the operator: written to `status.json` in the endpoint's
//! directory (0600, replaced whole) when it changes, printed on SIGUSR1, and read back by
//! `tether export --follow --status`, which adds whether the follower runs.

use std::io;

use serde::{Deserialize, Serialize};

use super::cursor::CursorDir;
use super::machine::Follower;
use crate::journal::bounded::read_metadata_at;
use crate::journal::paths::compact_utc;

pub const STATUS_FILE: &str = "status.json";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Status {
    /// Where traces go.
    pub endpoint: String,
    pub pid: u32,
    pub running_since_ms: u64,
    pub updated_ms: u64,
    pub sessions: usize,
    /// Commands known to run (not sent before they end).
    pub running: usize,
    pub spans_sent: u64,
    pub spans_rejected: u64,
    pub spans_refused: u64,
    /// Ended commands (and due session spans) not sent yet.
    pub backlog: usize,
    pub retries: u64,
    pub last_error: Option<LastError>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LastError {
    pub at_ms: u64,
    pub why: String,
}

impl Status {
    pub fn of(follower: &Follower, endpoint: &str, running_since_ms: u64, now: u64) -> Status {
        let counts = follower.counts();
        Status {
            endpoint: endpoint.to_string(),
            pid: std::process::id(),
            running_since_ms,
            updated_ms: now,
            sessions: follower.sessions(),
            running: follower.running(),
            spans_sent: counts.spans_sent,
            spans_rejected: counts.spans_rejected,
            spans_refused: counts.spans_refused,
            backlog: follower.backlog(now),
            retries: counts.retries,
            last_error: counts.last_error.as_ref().map(|(at_ms, why)| LastError {
                at_ms: *at_ms,
                why: why.clone(),
            }),
        }
    }

    /// The state in lines, for a terminal; `runs`: the pid of the follower that holds the
    /// lock, `None` when none does (the status is then its last word).
    pub fn text(&self, runs: Option<u32>) -> String {
        let mut out = match runs {
            Some(pid) => format!(
                "follower running (pid {pid}) since {}\n",
                compact_utc(self.running_since_ms)
            ),
            None => format!(
                "no follower running; the last one (pid {}) said, at {}:\n",
                self.pid,
                compact_utc(self.updated_ms)
            ),
        };
        out += &format!("  endpoint        {}\n", self.endpoint);
        out += &format!(
            "  sessions        {} followed, {} commands running\n",
            self.sessions, self.running
        );
        out += &format!(
            "  spans sent      {} ({} dropped by the endpoint, {} refused and skipped)\n",
            self.spans_sent, self.spans_rejected, self.spans_refused
        );
        out += &format!("  backlog         {} not sent yet\n", self.backlog);
        out += &format!("  retries         {}\n", self.retries);
        let last_error = self.last_error.as_ref().map_or_else(
            || "none".into(),
            |err| format!("{} at {}", err.why, compact_utc(err.at_ms)),
        );
        out + &format!("  last error      {last_error}\n")
    }
}

pub fn write(dir: &CursorDir, status: &Status) -> io::Result<()> {
    let mut bytes = serde_json::to_vec_pretty(status)?;
    bytes.push(b'\n');
    dir.journal_dir().write_atomic(STATUS_FILE, &bytes)
}

/// The status file, if a follower ever wrote one.
pub fn read(dir: &CursorDir) -> io::Result<Option<Status>> {
    match read_metadata_at(dir.journal_dir(), STATUS_FILE) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(io::Error::from),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(err) => Err(err),
    }
}
