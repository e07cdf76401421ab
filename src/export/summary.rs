//! `tether sessions --json`: every session and how each of its commands ended, as one JSON
//! document with stable field names (documented in docs/exports.md).

use serde::{Deserialize, Serialize};

use super::session::{CommandExport, SessionExport};
use crate::model::command::signal_label;
use crate::model::{Badges, Plan, Status};

/// Bumped when a field changes meaning or goes away (new fields may appear at any time).
pub const SESSIONS_JSON_VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionsDocument {
    pub version: u32,
    /// The state directory the sessions were read from.
    pub state_dir: String,
    /// Oldest first, as `tether sessions` lists them.
    pub sessions: Vec<SessionSummary>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionSummary {
    /// The session's id (its directory's name).
    pub id: String,
    pub dir: String,
    /// Wall clock, milliseconds since the Unix epoch; absent when nothing tells.
    pub started_ms: Option<u64>,
    /// The same, as `2026-01-02T03:04:05.000Z`.
    pub started: Option<String>,
    pub ended_ms: Option<u64>,
    pub ended: Option<String>,
    pub host: Option<String>,
    pub user: Option<String>,
    pub commands: Vec<CommandSummary>,
    /// The commands its launcher never started: blocked by a failed dependency, or still
    /// waiting when the session ended.
    #[serde(default)]
    pub not_started: Vec<NotStartedSummary>,
    /// Some journal of the session misses something (see each command's `damage`).
    pub cut_short: bool,
    /// What is wrong with the session's own files, or why it could not be read at all.
    pub damage: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommandSummary {
    /// The command directory's name (`03-build`).
    pub id: String,
    pub name: String,
    pub argv: Vec<String>,
    /// The command as every view says it: what an agent asked for, past its wrapper
    /// (`config::naming::command_text`); the argv is what ran.
    #[serde(default)]
    pub command: String,
    /// `idle`, `starting`, `running`, `stopped`, `stopping`, `exited`, `failed_to_start`
    /// or `lost` (its broker ended without saying how the command ended).
    pub state: String,
    /// The exit code, when it exited normally.
    pub exit_code: Option<i32>,
    /// The signal that ended it, as a number and a name (`9`, `SIGKILL`).
    pub signal: Option<i32>,
    pub signal_name: Option<String>,
    pub core_dumped: bool,
    pub started_ms: Option<u64>,
    pub started: Option<String>,
    pub ended_ms: Option<u64>,
    pub ended: Option<String>,
    pub duration_ms: Option<u64>,
    /// CPU time (user + system) the command's whole tree used; absent while it runs and in
    /// journals written before tether recorded it.
    pub cpu_ms: Option<u64>,
    /// The most memory the command's tree held, in bytes; absent likewise.
    pub peak_rss_bytes: Option<u64>,
    pub stdout: StreamBytes,
    pub stderr: StreamBytes,
    pub badges: Badges,
    /// Which run of its command this is, counted by the launcher that restarts it: 2 for the
    /// first restart; absent for a first run.
    #[serde(default = "first_run", skip_serializing_if = "is_first_run")]
    pub run: u32,
    /// The launcher's last word on this run, where it had one: `{"gave_up": {"restarts":
    /// 3}}` on the last run of a command it restarted as often as it would.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<Plan>,
    /// The journal misses something: it ends mid-line, has lines that are not events, or
    /// has no result while no broker runs the command.
    pub cut_short: bool,
    /// What is missing or broken, in words.
    pub damage: Vec<String>,
}

/// A command the launcher never started.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NotStartedSummary {
    pub name: String,
    /// What it would have run.
    pub command: String,
    /// The launcher's last word on it: `{"blocked": "migrate: exit 1"}`, `{"waiting": {"on":
    /// "db", "not_started": false}}`; absent if it said none.
    pub plan: Option<Plan>,
    /// The same as every view says it: `not started: migrate: exit 1`.
    pub words: String,
    /// When the launcher said it.
    pub at_ms: u64,
    pub at: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamBytes {
    /// Bytes the command wrote.
    pub written: u64,
    /// Bytes kept in the stream's log (fewer once capped).
    pub stored: u64,
}

pub use crate::units::iso_utc;

/// The `state` word for a status.
pub fn state_name(status: Status) -> &'static str {
    match status {
        Status::Idle => "idle",
        Status::Starting => "starting",
        Status::Running => "running",
        Status::Stopped => "stopped",
        Status::Stopping => "stopping",
        Status::Exited(_) => "exited",
        Status::LeftRunning { .. } => "left_running",
        Status::FailedToStart => "failed_to_start",
        Status::Lost => "lost",
    }
}

impl SessionSummary {
    pub fn of(session: &SessionExport) -> SessionSummary {
        let commands: Vec<CommandSummary> =
            session.commands.iter().map(CommandSummary::of).collect();
        let known = session.info.is_some() || !session.commands.is_empty();
        // While a command of it runs, it has not ended.
        let ended = known && !(session.commands.iter()).any(|c| c.state.status.is_active());
        SessionSummary {
            id: session.id.clone(),
            dir: session.dir.to_string_lossy().into_owned(),
            started_ms: known.then_some(session.started_ms),
            started: known.then(|| iso_utc(session.started_ms)),
            ended_ms: ended.then_some(session.ended_ms),
            ended: ended.then(|| iso_utc(session.ended_ms)),
            host: session.info.as_ref().map(|i| i.host.clone()),
            user: session.info.as_ref().map(|i| i.user.clone()),
            cut_short: !session.damage.is_empty() || commands.iter().any(|c| c.cut_short),
            commands,
            not_started: (session.not_started.iter())
                .map(|never| NotStartedSummary {
                    name: never.name().to_string(),
                    command: crate::config::naming::command_text(&never.state.config.command),
                    plan: never.state.plan.clone(),
                    words: never.words(),
                    at_ms: never.since_ms,
                    at: iso_utc(never.since_ms),
                })
                .collect(),
            damage: session.damage.clone(),
        }
    }

    /// A session directory that could not be read at all.
    pub fn unreadable(dir: &std::path::Path, error: String) -> SessionSummary {
        SessionSummary {
            id: crate::model::replay::dir_name(dir),
            dir: dir.to_string_lossy().into_owned(),
            cut_short: true,
            damage: vec![format!("cannot read the session directory: {error}")],
            ..SessionSummary::default()
        }
    }
}

impl CommandSummary {
    pub fn of(command: &CommandExport) -> CommandSummary {
        let state = &command.state;
        let exit = match state.status {
            Status::Exited(status) | Status::LeftRunning { exit: status, .. } => Some(status),
            _ => None,
        };
        let signal = exit.and_then(|s| s.signal);
        let started_ms = command.started_ms();
        let ended_ms = command.ended_ms();
        let bytes = |i: usize| StreamBytes {
            written: state.bytes[i],
            stored: command.stored[i],
        };
        CommandSummary {
            id: command.id.dir_name(),
            name: state.config.name.clone(),
            argv: command.argv(),
            command: crate::config::naming::command_text(&state.config.command),
            state: state_name(state.status).into(),
            exit_code: exit.and_then(|s| s.code),
            signal,
            signal_name: signal.map(signal_label),
            core_dumped: exit.is_some_and(|s| s.core_dumped),
            started_ms,
            started: started_ms.map(iso_utc),
            ended_ms,
            ended: ended_ms.map(iso_utc),
            duration_ms: started_ms.zip(ended_ms).map(|(s, e)| e.saturating_sub(s)),
            cpu_ms: state.cpu_ms,
            peak_rss_bytes: state.peak_rss_bytes,
            stdout: bytes(0),
            stderr: bytes(1),
            badges: command.badges.clone(),
            run: state.run.max(1),
            plan: state.plan.clone(),
            cut_short: command.cut_short,
            damage: command.damage.clone(),
        }
    }
}

fn first_run() -> u32 {
    1
}

fn is_first_run(run: &u32) -> bool {
    *run <= 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_read_as_iso_8601() {
        assert_eq!(iso_utc(1_767_323_045_000), "2026-01-02T03:04:05.000Z");
    }
}
