//! What goes in and out of the follower's machine: its limits, the scans it is given, the
//! spans it plans and the actions it asks for, the counts it keeps.

use std::path::PathBuf;
use std::time::Duration;

use crate::export::follow::SessionRoot;
use crate::export::follow::cursor::Cursor;

/// How the follower batches and waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Items per request at most.
    pub batch: usize,
    /// How long the first pending item waits for others (a burst is one request).
    pub gather: Duration,
    /// The first wait after a failed request; each further failure doubles it.
    pub first_backoff: Duration,
    /// The longest wait, Retry-After included.
    pub max_backoff: Duration,
    /// A session without an agent is done once no command ran for this long.
    pub session_quiet: Duration,
    /// Retries of a refused batch before it is skipped.
    pub refused_retries: u32,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            batch: 128,
            gather: Duration::from_millis(200),
            first_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(30),
            session_quiet: Duration::from_secs(60),
            refused_retries: 3,
        }
    }
}

/// What a scan found of one command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandScan {
    pub number: u64,
    pub dir: PathBuf,
    /// It has a result, or was found cut short (its broker gone).
    pub ended: bool,
    pub failed: bool,
    /// The agent of a `tether agent` session.
    pub agent: bool,
    /// Its end, else its start: when it last ran.
    pub last_ms: u64,
}

/// What a scan found of one session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionScan {
    pub id: String,
    pub started_ms: u64,
    pub commands: Vec<CommandScan>,
}

/// One span to send, named, not read: the loop reads it when it sends it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Planned {
    Command {
        session: String,
        number: u64,
        dir: PathBuf,
        /// The session's agent, whose span is the session's root.
        root: bool,
    },
    /// The root of a session with no agent, in `dir`, where its launcher's word is read.
    Session { root: SessionRoot, dir: PathBuf },
}

impl Planned {
    pub(super) fn session(&self) -> &str {
        match self {
            Planned::Command { session, .. } => session,
            Planned::Session { root, .. } => &root.id,
        }
    }
}

/// What the loop is to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Send these (then hand the outcome to [`Follower::handle_sent`]).
    Send(Vec<Planned>),
    /// Replace this session's cursor on disk.
    WriteCursor { session: String, cursor: Cursor },
    /// Tell the operator (stderr).
    Say(String),
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counts {
    pub spans_sent: u64,
    /// Spans the endpoint took but said it dropped (partial success).
    pub spans_rejected: u64,
    /// Spans skipped after the endpoint refused them [`Limits::refused_retries`] times.
    pub spans_refused: u64,
    pub retries: u64,
    /// Failed tries in a row (0 once a request is accepted).
    pub failing: u32,
    pub last_error: Option<(u64, String)>,
}
