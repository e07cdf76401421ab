//! What becomes of the processes a command leaves running when its main process exits (`&`,
//! `nohup`, `setsid`, a daemonizing server): the rule a front end asks for, and how the
//! broker reports keeping and stopping them.

use serde::{Deserialize, Serialize};

/// The leftovers rule of one command. The default stops them with the command (`tether exec`);
/// the shell shim keeps them, as the shell it stands in for would.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeftoversRule {
    /// Keep them running, in the broker's custody, once the main process exited.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub keep: bool,
    /// Stop them this long after custody began, whatever else happens.
    #[serde(
        rename = "max_ms",
        with = "super::millis::option",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub max: Option<std::time::Duration>,
    /// The processes whose exit ends the custody. None that can be watched: the leftovers are
    /// stopped at once, as nobody would be there to answer for them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub custodians: Vec<Custodian>,
}

impl LeftoversRule {
    pub fn is_stop(&self) -> bool {
        !self.keep
    }
}

/// A process a command's leftovers are kept for, by pid and start time (clock ticks since
/// boot, as in `/proc/PID/stat`): the broker opens its own pidfd on it and checks the start
/// time after, so a pid reused since the front end read it is never taken for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Custodian {
    pub pid: i32,
    pub start_ticks: u64,
    pub role: CustodianRole,
}

/// Why a process is a custodian.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CustodianRole {
    /// The process that ran the front end: the shim's caller (an agent), or the parent of a
    /// `tether exec --keep-leftovers`.
    Caller,
    /// The session's owner (the agent `tether agent` runs): its exit ends the session, so
    /// it stops the command's leftovers and a command still running with them.
    SessionOwner,
}

/// Why leftovers kept in custody were stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LeftoversEnd {
    /// The caller exited (its pidfd said so).
    CallerExited,
    /// The caller could not be watched (it had already exited, or no pidfd could be opened):
    /// stopped at once instead of kept.
    CallerGone,
    /// The session's owner exited (or had already when the command started): the session
    /// is over.
    SessionOwnerExited,
    /// `tether stop` (or a stop from any front end).
    Operator,
    /// `max` of custody was over.
    MaxDuration,
    /// The broker itself was told to stop (SIGTERM, SIGINT, SIGHUP).
    Shutdown,
    /// They all exited on their own: nothing was left to stop.
    Exited,
}

impl LeftoversEnd {
    /// The end a custodian's exit means.
    pub fn custodian_exited(role: CustodianRole) -> LeftoversEnd {
        match role {
            CustodianRole::Caller => LeftoversEnd::CallerExited,
            CustodianRole::SessionOwner => LeftoversEnd::SessionOwnerExited,
        }
    }

    /// The end a custodian that could not be watched means.
    pub fn custodian_unwatched(role: CustodianRole) -> LeftoversEnd {
        match role {
            CustodianRole::Caller => LeftoversEnd::CallerGone,
            CustodianRole::SessionOwner => LeftoversEnd::SessionOwnerExited,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            LeftoversEnd::CallerExited => "its caller exited",
            LeftoversEnd::CallerGone => "its caller was already gone",
            LeftoversEnd::SessionOwnerExited => "the session's owner (its agent) exited",
            LeftoversEnd::Operator => "stopped by the operator",
            LeftoversEnd::MaxDuration => "TETHER_LEFTOVERS_MAX was reached",
            LeftoversEnd::Shutdown => "the broker was told to stop",
            LeftoversEnd::Exited => "they all exited",
        }
    }

    /// The end as what leftovers were kept until: `kept 2 until its caller exited`.
    pub fn until(self) -> &'static str {
        match self {
            LeftoversEnd::CallerExited => "its caller exited",
            LeftoversEnd::CallerGone => "its caller was found gone",
            LeftoversEnd::SessionOwnerExited => "its agent exited",
            LeftoversEnd::Operator => "the operator stopped them",
            LeftoversEnd::MaxDuration => "TETHER_LEFTOVERS_MAX",
            LeftoversEnd::Shutdown => "its broker was told to stop",
            LeftoversEnd::Exited => "they exited",
        }
    }
}

/// What `result.json` says of a command's leftovers.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct LeftoversRecord {
    /// The processes left running when the main process exited and custody began.
    pub kept: Vec<i32>,
    /// How long they were kept.
    pub kept_ms: u64,
    /// Why they were stopped (absent if the broker ended otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<LeftoversEnd>,
}
