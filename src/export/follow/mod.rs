//! `tether export --follow`: every command of every session sent to an OpenTelemetry
//! endpoint as it ends, the journal being the queue. What an endpoint has taken is kept per
//! session on disk ([`cursor`]), what to send when is decided without I/O ([`machine`]),
//! the journal is read as it changes ([`scan`]) and [`run`] drives it all: one follower per
//! endpoint ([`lock`]), its state on SIGUSR1 and in a file ([`status`]).
//!
//! The encoding and the HTTP are behind [`Sink`]: this module never sees a wire format.

pub mod cursor;
mod journals;
pub mod lock;
pub mod machine;
pub mod run;
pub mod scan;
pub mod status;

use std::time::Duration;

use super::CommandExport;

pub use run::{FollowOptions, follow};

/// What the follower hands a [`Sink`]: one span each.
pub enum Item {
    /// A command's span (and, with logs on, its output's records). `root`: it is the agent of a
    /// `tether agent` session, whose span is the session's root (no parent; span id = root id).
    Command {
        session: String,
        command: Box<CommandExport>,
        root: bool,
    },
    /// The root span of a session that has no agent command.
    Session(SessionRoot),
}

/// A session without an agent, as its root span tells it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionRoot {
    pub id: String,
    pub started_ms: u64,
    /// The last end of any of its commands.
    pub ended_ms: u64,
    /// Its runs (the commands the launcher never started are `never_ran`).
    pub commands: usize,
    pub failed: usize,
    /// What its launcher never started (`launcher.jsonl`), as it stood when the span was
    /// made: blocked by a failed dependency, or still waiting.
    pub never_ran: Vec<NeverRan>,
}

/// A command its launcher never started, as a root span tells it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NeverRan {
    pub name: String,
    /// `not started: migrate: exit 1`, `waiting for db`.
    pub words: String,
    /// When the launcher last spoke of it.
    pub at_ms: u64,
    /// Blocked by a dependency that failed, counted apart from the failed.
    pub blocked: bool,
}

/// How an endpoint took a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sent {
    /// A 2xx: taken, but for `rejected` items (its `partial_success`) and why.
    Accepted {
        rejected: u64,
        message: Option<String>,
    },
    /// Not taken this time: try again, after `after` when the endpoint said (`Retry-After`).
    Retry {
        after: Option<Duration>,
        why: String,
    },
    /// Refused as it is (400, 413, ...): sending it again will not help.
    Refused { why: String },
}

/// Where batches go: the OTLP encoder and sender, or a test's fake. Called on a blocking
/// thread, one batch at a time.
pub trait Sink: Send {
    fn send(&mut self, items: &[Item]) -> Sent;
}

#[cfg(test)]
mod tests;
