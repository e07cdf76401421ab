//! What a front end attached to a broker's socket does when the socket cannot carry a
//! request (there is none, it refuses connections, the broker does not answer): it acts by
//! the broker's pid instead, once [`super::verify`] has proved that pid to be the broker.
//! `tether stop`, `kill` and `signal` call it when they cannot attach; an attached
//! [`BrokerConversation`](crate::supervisor::BrokerConversation) calls it for a request the
//! broker does not acknowledge.
//!
//! A stop is the broker's own: SIGTERM makes it run its stop sequence. A signal cannot be
//! asked of the broker that way, so tether sends it itself, to the command's group (its
//! leader checked) and every descendant of the broker, as a front end does for a broker of
//! its own that stopped answering.

use tokio::io::Interest;
use tokio::time::{Instant, timeout};

use super::cli::Action;
use super::discover::LiveCommand;
use super::report::{Sent, describe_signals, ended_words};
use super::verify::{open_broker, signal_broker};
use crate::supervisor::intervals::REMOTE_STOP_WAIT;
use crate::supervisor::leftovers::{GroupLeader, signal_directly};
use tether_os::journal::CommandRecord;
use tether_protocol::protocol::ProcessSignal;
use tether_protocol::units::short_duration;

/// What a socket could not carry (there is none, it refused, the broker never heard it),
/// done by the broker's pid once that pid is proved to be the broker; a command that ended
/// meanwhile is said to have ended, not why a late signal found nothing to reach. `why`
/// says why the socket was not used.
pub async fn by_pid(command: &LiveCommand, action: &Action, why: &str) -> Result<String, String> {
    if !command.is_alive() {
        return ended_already(command, action);
    }
    match action {
        Action::Stop => stop_through_pid(command, why).await,
        Action::Signal(signal) => signal_through_pid(command, *signal, why),
    }
}

/// The answer for a command that finished between the listing and now.
pub fn ended_already(command: &LiveCommand, action: &Action) -> Result<String, String> {
    let record = CommandRecord::load(&command.dir);
    let ended = how_it_ended(&record).map_or_else(String::new, |words| format!(" ({words})"));
    match action {
        Action::Stop => Ok(format!("it had already ended{ended}; nothing is left")),
        Action::Signal(_) => Err(format!("it ended before it could be signalled{ended}")),
    }
}

/// The stop by pid: SIGTERM to the verified broker, then wait for it to exit, which it
/// does once nothing of the command is left. `why` says why the socket was not used.
pub async fn stop_through_pid(command: &LiveCommand, why: &str) -> Result<String, String> {
    let started = Instant::now();
    let pidfd = signal_broker(command, ProcessSignal::TERM).map_err(|e| format!("{why}; {e}"))?;
    let limit = command.grace + REMOTE_STOP_WAIT;
    let exited = async {
        // A pidfd becomes readable when its process exits.
        let fd = tether_os::fdio::register(pidfd, Interest::READABLE)?;
        fd.readable().await.map(|_| ())
    };
    timeout(limit, exited)
        .await
        .map_err(|_| {
            format!(
                "{why}; its broker (pid {}) got SIGTERM but had not finished after {}",
                command.broker.pid,
                short_duration(limit.as_millis() as u64)
            )
        })?
        .map_err(|e: std::io::Error| e.to_string())?;
    let record = CommandRecord::load(&command.dir);
    let sent: Vec<_> = record.events.iter().filter_map(Sent::of).collect();
    let ended = how_it_ended(&record)
        .map_or_else(String::new, |words| format!("; the command ended: {words}"));
    Ok(format!(
        "stopped through its broker's pid ({why}): {}{ended}; nothing is left ({})",
        describe_signals(&sent),
        short_duration(started.elapsed().as_millis() as u64)
    ))
}

/// A signal to the command's tree without its broker's help: the broker is verified just
/// before its descendants are walked (a process keeps its descendants only while it runs;
/// the walk reads them from /proc then), and tether signals the group, its leader checked
/// by pid, parent and start time, and the broker's descendants itself.
pub fn signal_through_pid(
    command: &LiveCommand,
    signal: ProcessSignal,
    why: &str,
) -> Result<String, String> {
    let _held = open_broker(command).map_err(|e| format!("{why}; {e}"))?;
    let leader = command
        .pid
        .and_then(|pgid| GroupLeader::find(pgid, &[command.broker.pid]));
    Ok(signal_directly(
        command.broker.pid,
        leader,
        signal,
        &format!("{why}, so by its broker's pid"),
    ))
}

/// How the command ended, in the words every view uses, where its journal's result says.
fn how_it_ended(record: &CommandRecord) -> Option<String> {
    let status = record.result.as_ref()?.exit?;
    Some(ended_words(&record.events, status))
}
