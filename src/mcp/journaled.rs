//! The session's commands this server does not hear from: those another front end started
//! in the same `$TETHER_SESSION` (a TUI, a shim, another MCP server), and its own once their
//! broker holds leftovers and has let go of it. What they are comes from their journals;
//! signals go through their brokers' control sockets, as `tether signal` and `stop` send them.

use std::path::Path;
use std::time::Duration;

use tokio::time::{Instant, timeout_at};

use super::ToolError;
use super::commands::Tracked;
use crate::control::broker_alive;
use crate::control::discover::{live_command, log_window};
use crate::journal::CommandId;
use crate::journal::bounded::{oversized, read_metadata};
use crate::journal::reader::read_result;
use crate::journal::writer::{COMMAND_FILE, EVENTS_FILE};
use crate::protocol::{CommandFile, EventKind, Origin, ProcessSignal, Request};
use crate::supervisor::intervals::ACK_TIMEOUT;
use crate::supervisor::{Answer, BrokerConversation};

/// Command `id`, journaled in `dir`, as it stands: from `result.json` once it has one, else
/// from the start and end of its event log. None for what is no command's journal (yet).
/// A `command.json` over the bound a metadata file may be is not read: the command is
/// listed by its directory's name, with what was skipped as its error.
pub fn snapshot(id: CommandId, dir: &Path) -> Option<Tracked> {
    let (file, skipped) = match read_metadata(&dir.join(COMMAND_FILE)) {
        Ok(bytes) => (
            Some(serde_json::from_slice::<CommandFile>(&bytes).ok()?),
            None,
        ),
        Err(err) => (None, Some(oversized(&err)?.to_string())),
    };
    let (name, command) = match &file {
        // As every view says it: what the agent asked for, past its wrapper.
        Some(file) => (
            file.request.name.clone(),
            crate::config::naming::command_text(&file.request.command),
        ),
        // `03-build`: the number, then its name.
        None if !id.name.is_empty() => (id.name.clone(), String::new()),
        None => (id.dir_name(), String::new()),
    };
    let mut tracked = Tracked::new(id, name, command, dir.to_path_buf(), false);
    tracked.setup = file
        .as_ref()
        .is_some_and(|f| crate::config::naming::is_agent_setup(&f.request.command));
    tracked.notes.extend(skipped);
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
        tracked.apply(event);
    }
    let broker = file.as_ref().and_then(tether_os::procfs::journaled_broker);
    if broker.is_some_and(|b| !broker_alive(&b)) {
        tracked.ended = true;
        tracked.left_running.clear();
        tracked
            .failure
            .get_or_insert_with(|| "its broker ended without writing a result".into());
    }
    Some(tracked)
}

/// Asks the broker of command `id`, journaled in `dir`, through its socket, for `signal` or,
/// with none, the stop sequence, followed until the broker closes or `patience` is over.
/// Returns each signal the broker sent for it with how many processes it reached, and
/// whether it confirmed (a stop: the broker closed).
pub async fn ask(
    id: &CommandId,
    dir: &Path,
    signal: Option<ProcessSignal>,
    patience: Duration,
) -> Result<(Vec<(ProcessSignal, usize)>, bool), ToolError> {
    let dir_name = id.dir_name();
    let live = live_command(id, dir).ok_or_else(|| {
        ToolError::new(format!(
            "command {dir_name}'s broker has ended; nothing to signal"
        ))
    })?;
    let unreachable = |err: String| {
        ToolError::new(format!(
            "cannot reach command {dir_name}'s broker through its control socket: {err}; `tether stop {}` can still stop it by pid",
            live.label()
        ))
    };
    let mut broker = BrokerConversation::attach(&live)
        .await
        .map_err(|err| unreachable(err.to_string()))?;
    let message = match signal {
        Some(signal) => Request::group_signal(signal),
        None => {
            broker.subscribe();
            Request::Stop { origin: None }
        }
    };
    let ack = match broker.answer(&message).await {
        Answer::Done(ack) => ack,
        Answer::Refused { message, .. } => {
            return Err(unreachable(format!("the broker refused: {message}")));
        }
        // Sent all the same, by tether itself: said as it is, the count unknown.
        Answer::SignalledDirectly(told) => return Err(ToolError::new(told)),
        Answer::NotSignalled(err) => return Err(unreachable(err)),
        Answer::Unanswered => {
            return Err(unreachable(format!("no answer within {ACK_TIMEOUT:?}")));
        }
        Answer::Closed => return Err(unreachable("the broker closed the connection".into())),
    };
    if let Some(signal) = signal {
        return Ok((vec![(signal, ack.targets.len())], true));
    }
    let deadline = Instant::now() + patience;
    let mut sent = Vec::new();
    loop {
        let line = match timeout_at(deadline, broker.next_line()).await {
            Ok(Some(line)) => line,
            // The broker exits right after `close`, which closes the socket.
            Ok(None) => return Ok((sent, true)),
            Err(_) => return Ok((sent, false)),
        };
        let Ok(event) = line.event else { continue };
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_oversized_command_json_is_listed_by_its_name_with_what_was_skipped() {
        let dir = tether_os::testing::private_tempdir();
        let command = dir.path().join("03-build");
        crate::testing::private_dir(&command);
        crate::testing::create_private(command.join(COMMAND_FILE))
            .set_len(3 << 30)
            .unwrap();
        crate::testing::write_private(
            command.join("result.json"),
            include_str!("../../tests/fixtures/every-kind/01-ok/result.json"),
        );
        let tracked = snapshot(CommandId::new("s", 3, "build"), &command).expect("listed");
        assert_eq!(
            (tracked.id.dir_name().as_str(), tracked.name.as_str()),
            ("03-build", "build")
        );
        assert_eq!(tracked.state(), "finished");
        let status = super::super::run::CommandStatus::of(&tracked);
        assert_eq!(
            status.error.as_deref(),
            Some("command.json is 3.0 GiB, over the 16.0 MiB a journal's metadata may be; skipped")
        );
    }
}
