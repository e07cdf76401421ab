//! The `signal` tool: a signal to a command's whole group, or its stop sequence, through its
//! broker; answered once the broker says what it did.

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::ToolError;
use super::commands::Commands;
use super::run::CommandStatus;
use crate::protocol::{Origin, ProcessSignal, Scope, ToBroker};
use crate::supervisor::intervals::{TOOL_STOP_WAIT, grace};

/// How long a broker has to say it sent a signal.
const SIGNAL_CONFIRM: Duration = Duration::from_secs(5);

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SignalParams {
    /// The command's id, as `run` or `list` gave it.
    pub id: String,
    pub signal: SignalName,
}

/// `TERM`, `INT`, `HUP`, `KILL`: that signal to the command's process group and every
/// descendant (escapees included). `stop`: the whole stop sequence (TERM, then KILL after
/// the grace period), waited for until the command and what it left are gone.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
pub enum SignalName {
    #[serde(rename = "TERM")]
    Term,
    #[serde(rename = "INT")]
    Int,
    #[serde(rename = "HUP")]
    Hup,
    #[serde(rename = "KILL")]
    Kill,
    #[serde(rename = "stop")]
    Stop,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct SignalResult {
    /// Each signal the broker sent for this request, with how many processes it reached.
    pub sent: Vec<SentSignal>,
    /// The broker confirmed (for `stop`: the command and everything it left ended).
    pub confirmed: bool,
    #[serde(flatten)]
    pub status: CommandStatus,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct SentSignal {
    pub signal: String,
    pub processes: usize,
}

pub async fn signal(
    commands: &Commands,
    params: SignalParams,
    cancelled: CancellationToken,
) -> Result<SignalResult, ToolError> {
    let tracked = commands.find(&params.id)?;
    if tracked.is_done() {
        return Err(ToolError::new(format!(
            "command {} has already {}; nothing to signal",
            tracked.id,
            tracked.state()
        )));
    }
    let before = tracked.signals.len();
    let (message, wait) = match params.signal {
        SignalName::Stop => (
            ToBroker::Stop { origin: None },
            grace(None) + TOOL_STOP_WAIT,
        ),
        other => {
            let signal = match other {
                SignalName::Term => ProcessSignal::TERM,
                SignalName::Int => ProcessSignal::INT,
                SignalName::Hup => ProcessSignal(nix::sys::signal::Signal::SIGHUP),
                _ => ProcessSignal::KILL,
            };
            let message = ToBroker::Signal {
                signal,
                scope: Scope::Group,
                pid: None,
            };
            (message, SIGNAL_CONFIRM)
        }
    };
    let stop = matches!(params.signal, SignalName::Stop);
    if !commands.send(&tracked.id, message) {
        return Err(ToolError::new(format!(
            "command {}'s broker has ended; nothing to signal",
            tracked.id
        )));
    }
    let id = tracked.id.clone();
    let confirmed = || {
        commands.get(&id).is_none_or(|t| {
            if stop {
                t.is_done()
            } else {
                t.is_done() || t.signals.len() > before
            }
        })
    };
    let confirmed = tokio::select! {
        confirmed = commands.wait_until(Instant::now() + wait, confirmed) => confirmed,
        _ = cancelled.cancelled() => return Err(ToolError::new(format!("cancelled; the request was sent to {id}'s broker"))),
    };
    let tracked = commands.find(&id)?;
    let sent = tracked.signals[before.min(tracked.signals.len())..]
        .iter()
        .filter(|(_, origin, _)| *origin == Origin::Operator)
        .map(|(signal, _, processes)| SentSignal {
            signal: signal.name().to_string(),
            processes: *processes,
        })
        .collect();
    Ok(SignalResult {
        sent,
        confirmed,
        status: CommandStatus::of(&tracked),
    })
}
