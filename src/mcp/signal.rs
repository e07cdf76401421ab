//! The `signal` tool: a signal to a command's whole group, or its stop sequence, through its
//! broker; answered once the broker says what it did.

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::ToolError;
use super::commands::{Commands, Tracked};
use super::journaled::ask;
use super::run::CommandStatus;
use crate::protocol::{Origin, ProcessSignal, Request};
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
#[serde(rename_all = "UPPERCASE")]
pub enum SignalName {
    Term,
    Int,
    Hup,
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
    let tracked = commands.find(&commands.command_id(&params.id)?)?;
    if tracked.is_done() {
        return Err(ToolError::new(format!(
            "command {} has already {}; nothing to signal",
            tracked.id.dir_name(),
            tracked.state()
        )));
    }
    let patience = grace(None) + TOOL_STOP_WAIT;
    let signal = match params.signal {
        SignalName::Stop => None,
        SignalName::Term => Some(ProcessSignal::TERM),
        SignalName::Int => Some(ProcessSignal::INT),
        SignalName::Hup => Some(ProcessSignal::HUP),
        SignalName::Kill => Some(ProcessSignal::KILL),
    };
    let asked = async {
        if tracked.mine && !tracked.in_custody() {
            through_fleet(commands, &tracked, signal, patience).await
        } else {
            through_socket(commands, &tracked, signal, patience).await
        }
    };
    let (sent, confirmed) = tokio::select! {
        answer = asked => answer?,
        _ = cancelled.cancelled() => return Err(ToolError::new(format!(
            "cancelled; the request may have reached {}'s broker", tracked.id.dir_name()
        ))),
    };
    let tracked = commands.find(&tracked.id)?;
    Ok(SignalResult {
        sent: sent
            .into_iter()
            .map(|(signal, processes)| SentSignal {
                signal: signal.name().to_string(),
                processes,
            })
            .collect(),
        confirmed,
        status: CommandStatus::of(&tracked),
    })
}

/// To a broker this server talks to: the request on its stdin, confirmed by its events.
async fn through_fleet(
    commands: &Commands,
    tracked: &Tracked,
    signal: Option<ProcessSignal>,
    patience: Duration,
) -> Result<(Vec<(ProcessSignal, usize)>, bool), ToolError> {
    let before = tracked.signals.len();
    let (message, wait) = match signal {
        None => (Request::Stop { origin: None }, patience),
        Some(signal) => (Request::group_signal(signal), SIGNAL_CONFIRM),
    };
    if !commands.send(&tracked.id, message) {
        return Err(ToolError::new(format!(
            "command {}'s broker has ended; nothing to signal",
            tracked.id.dir_name()
        )));
    }
    let id = &tracked.id;
    // A stop is confirmed by the end; a signal also by the broker's word that it sent it.
    let confirmed = || {
        commands
            .get(id)
            .is_none_or(|t| t.is_done() || (signal.is_some() && t.signals.len() > before))
    };
    let confirmed = commands.wait_until(Instant::now() + wait, confirmed).await;
    let now = commands.get(id).map(|t| t.signals).unwrap_or_default();
    let sent = now[before.min(now.len())..]
        .iter()
        .filter(|(_, origin, _)| *origin == Origin::Operator)
        .map(|(signal, _, processes)| (*signal, *processes))
        .collect();
    Ok((sent, confirmed))
}

/// To a broker of the session this server does not talk to (another front end's, or its
/// own holding leftovers): through its control socket.
async fn through_socket(
    commands: &Commands,
    tracked: &Tracked,
    signal: Option<ProcessSignal>,
    patience: Duration,
) -> Result<(Vec<(ProcessSignal, usize)>, bool), ToolError> {
    let answer = ask(&tracked.id, &tracked.journal, signal, patience).await?;
    if tracked.mine && signal.is_none() {
        // Its end reaches this server once the broker, its child, has exited and is reaped.
        let id = &tracked.id;
        commands
            .wait_until(Instant::now() + SIGNAL_CONFIRM, || {
                commands.get(id).is_none_or(|t| t.is_done())
            })
            .await;
    }
    Ok(answer)
}
