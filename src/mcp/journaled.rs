//! The session's commands this server does not hear from: those another front end started
//! in the same `$TETHER_SESSION` (a TUI, a shim, another MCP server), and its own once their
//! broker holds leftovers and has let go of it. What they are comes from their journals;
//! signals go through their brokers' control sockets, as `tether signal` and `stop` send them.

use std::path::Path;
use std::time::Duration;

use tokio::time::{Instant, timeout, timeout_at};

use super::ToolError;
use super::commands::{Change, Tracked};
use crate::control::discover::{live_command, log_window};
use crate::control::{ControlClient, broker_alive};
use crate::journal::reader::read_result;
use crate::journal::secure::read_regular;
use crate::journal::writer::{COMMAND_FILE, EVENTS_FILE};
use crate::protocol::{CommandFile, EventKind, Origin, ProcessSignal};

/// How long a broker has to answer a request on its socket.
const ANSWER_WAIT: Duration = Duration::from_secs(5);

/// The command journaled in `dir` as it stands: from `result.json` once it has one, else
/// from the start and end of its event log. None for what is no command's journal (yet).
pub fn snapshot(dir: &Path) -> Option<Tracked> {
    let file: CommandFile =
        serde_json::from_slice(&read_regular(&dir.join(COMMAND_FILE)).ok()?).ok()?;
    let mut tracked = Tracked {
        id: dir.file_name()?.to_string_lossy().into_owned(),
        name: file.request.name.clone(),
        command: file.request.command.display(),
        journal: dir.to_path_buf(),
        mine: false,
        started_ms: 0,
        pid: None,
        exit: None,
        exited_ms: None,
        closed: false,
        ended: false,
        failure: None,
        left_running: Vec::new(),
        signals: Vec::new(),
        notes: Vec::new(),
    };
    if let Some(result) = read_result(dir) {
        tracked.started_ms = result.started_ms;
        tracked.exited_ms = Some(result.ended_ms);
        tracked.pid = result.pid;
        tracked.exit = result.exit;
        tracked.failure = result.failure.map(|f| f.message);
        tracked.closed = true;
        tracked.ended = true;
        return Some(tracked);
    }
    let events = log_window(&dir.join(EVENTS_FILE));
    tracked.started_ms = events.first().map_or(0, |e| e.ts_ms);
    for event in events {
        Change::Event(event).apply_to(&mut tracked);
    }
    if file.broker.as_ref().is_some_and(|b| !broker_alive(b)) {
        tracked.ended = true;
        tracked.left_running.clear();
        tracked
            .failure
            .get_or_insert_with(|| "its broker ended without writing a result".into());
    }
    Some(tracked)
}

/// What to ask of a broker through its socket.
#[derive(Debug, Clone, Copy)]
pub enum Request {
    Signal(ProcessSignal),
    /// The stop sequence, followed until the broker closes or `patience` is over.
    Stop {
        patience: Duration,
    },
}

/// Asks `request` of the broker of the command journaled in `dir`. Returns each signal the
/// broker sent for it with how many processes it reached, and whether it confirmed (a stop:
/// the broker closed).
pub async fn ask(
    session: &str,
    dir: &Path,
    request: Request,
) -> Result<(Vec<(ProcessSignal, usize)>, bool), ToolError> {
    let id = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let live = live_command(session, dir).ok_or_else(|| {
        ToolError::new(format!(
            "command {id}'s broker has ended; nothing to signal"
        ))
    })?;
    let unreachable = |err: String| {
        ToolError::new(format!(
            "cannot reach command {id}'s broker through its control socket: {err}; `tether stop {session}/{}` can still stop it by pid",
            live.name
        ))
    };
    let mut client = ControlClient::connect_to(&live)
        .await
        .map_err(|err| unreachable(err.to_string()))?;
    match request {
        Request::Signal(signal) => {
            let targets = timeout(ANSWER_WAIT, client.signal(signal))
                .await
                .map_err(|_| unreachable(format!("no answer within {ANSWER_WAIT:?}")))?
                .map_err(|err| unreachable(err.to_string()))?;
            Ok((vec![(signal, targets.len())], true))
        }
        Request::Stop { patience } => {
            timeout(ANSWER_WAIT, async {
                client.subscribe().await?;
                client.stop().await
            })
            .await
            .map_err(|_| unreachable(format!("no answer within {ANSWER_WAIT:?}")))?
            .map_err(|err| unreachable(err.to_string()))?;
            let deadline = Instant::now() + patience;
            let mut sent = Vec::new();
            loop {
                let event = match timeout_at(deadline, client.next_event()).await {
                    Ok(Ok(Some(event))) => event,
                    // The broker exits right after `close`, which closes the socket.
                    Ok(Ok(None)) => return Ok((sent, true)),
                    Ok(Err(_)) | Err(_) => return Ok((sent, false)),
                };
                match event.kind {
                    EventKind::SignalSent {
                        signal,
                        origin: Origin::Operator,
                        targets,
                        ..
                    } => sent.push((signal, targets.len())),
                    EventKind::Close { .. } => return Ok((sent, true)),
                    _ => {}
                }
            }
        }
    }
}
