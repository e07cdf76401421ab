//! The TUI's brokers: one task per broker forwards its events to a single channel, carries
//! requests to it, and, if a broker stops answering, signals the command's group itself.

use std::collections::HashMap;
use std::process::Stdio;
use std::time::Duration;

use nix::sys::signal::Signal;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};
use tokio::time::{Instant, sleep_until};

use super::BrokerProcess;
use crate::broker::signaller::{parse_signal, signal_name};
use crate::journal::JournalDir;
use crate::protocol::{Event, EventKind, LaunchRequest, Scope, ToBroker};

/// How long a broker may take to acknowledge a signal or stop before the TUI acts itself.
const ACK_TIMEOUT: Duration = Duration::from_secs(1);
const HEARTBEAT: Duration = Duration::from_secs(1);

/// Which run of which command a message is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RunId {
    pub command: usize,
    pub run: u32,
}

#[derive(Debug)]
pub enum FleetEvent {
    Event(RunId, Event),
    /// The broker did not answer; the TUI signalled the group itself. The text says what.
    Fallback(RunId, String),
    /// The broker could not be started at all.
    SpawnFailed(RunId, String),
    /// The broker process has exited and was reaped.
    Ended(RunId),
}

struct Link {
    run: u32,
    requests: UnboundedSender<ToBroker>,
}

pub struct Fleet {
    events: UnboundedSender<FleetEvent>,
    links: HashMap<usize, Link>,
}

impl Fleet {
    pub fn new() -> (Fleet, UnboundedReceiver<FleetEvent>) {
        let (events, rx) = unbounded_channel();
        (
            Fleet {
                events,
                links: HashMap::new(),
            },
            rx,
        )
    }

    /// Starts a broker for `id`. Must be called inside the tokio runtime.
    /// `journal` is the run's journal directory, already created.
    pub fn launch(&mut self, id: RunId, request: LaunchRequest, journal: JournalDir) {
        let (requests, rx) = unbounded_channel();
        self.links.insert(
            id.command,
            Link {
                run: id.run,
                requests,
            },
        );
        let events = self.events.clone();
        tokio::spawn(async move {
            // The broker's own diagnostics must not reach the terminal the TUI draws on.
            let stderr = journal
                .create_file("broker.stderr", false)
                .map_or_else(|_| Stdio::null(), Stdio::from);
            match BrokerProcess::spawn(&request, &journal, None, stderr).await {
                Ok(broker) => drive(id, broker, rx, request.grace_ms, events).await,
                Err(err) => {
                    let _ = events.send(FleetEvent::SpawnFailed(
                        id,
                        format!("cannot start a broker: {err}"),
                    ));
                    let _ = events.send(FleetEvent::Ended(id));
                }
            }
        });
    }

    /// Sends a request to the broker of `command`'s current run. False if it has none.
    pub fn send(&self, command: usize, message: ToBroker) -> bool {
        self.links
            .get(&command)
            .is_some_and(|link| link.requests.send(message).is_ok())
    }

    /// Forgets a finished run's link (a later run replaces it anyway).
    pub fn ended(&mut self, id: RunId) {
        if self.links.get(&id.command).is_some_and(|l| l.run == id.run) {
            self.links.remove(&id.command);
        }
    }

    pub fn active(&self) -> usize {
        self.links.len()
    }
}

/// What a request would have done, for a fallback when the broker does not answer.
struct PendingAck {
    deadline: Instant,
    signal: Signal,
    then_kill_after: Option<Duration>,
}

async fn drive(
    id: RunId,
    mut broker: BrokerProcess,
    mut requests: UnboundedReceiver<ToBroker>,
    grace_ms: u64,
    events: UnboundedSender<FleetEvent>,
) {
    let mut heartbeat = tokio::time::interval(HEARTBEAT);
    let mut group: Option<i32> = None;
    let mut pending: Option<PendingAck> = None;
    let mut requests_open = true;
    loop {
        let ack_deadline = pending.as_ref().map(|p| p.deadline);
        tokio::select! {
            line = broker.next_line() => {
                let Some(line) = line else { break };
                let Ok(event) = line.event else { continue };
                match &event.kind {
                    // A pong answers a ping sent after the request: the broker has read the
                    // request, whatever it made of it. Pongs mean nothing to the TUI.
                    EventKind::Pong => {
                        pending = None;
                        continue;
                    }
                    EventKind::Spawned { pgid, .. } => group = Some(*pgid),
                    EventKind::SignalSent { .. } | EventKind::BrokerFailure { .. } => pending = None,
                    EventKind::Exit { .. } => group = None,
                    _ => {}
                }
                // Nobody may listen any more; the pipe stays open all the same, so the
                // broker runs on until its command ends or the TUI process exits.
                let _ = events.send(FleetEvent::Event(id, event));
            }
            request = requests.recv(), if requests_open => match request {
                None => requests_open = false,
                Some(message) => {
                    let fallback = match &message {
                        ToBroker::Stop { .. } => Some((Signal::SIGTERM, Some(Duration::from_millis(grace_ms)))),
                        ToBroker::Signal { signal, scope: Scope::Group, .. } => parse_signal(signal).map(|s| (s, None)),
                        _ => None,
                    };
                    // The ping after it proves, by its pong, that the broker read the request.
                    let sent = broker.send(&message).await.is_ok()
                        && broker.send(&ToBroker::Ping).await.is_ok();
                    if let Some((signal, then_kill_after)) = fallback {
                        let deadline = if sent { Instant::now() + ACK_TIMEOUT } else { Instant::now() };
                        pending = Some(PendingAck { deadline, signal, then_kill_after });
                    }
                }
            },
            _ = heartbeat.tick() => { let _ = broker.send(&ToBroker::Ping).await; }
            _ = sleep_until(ack_deadline.unwrap_or_else(Instant::now)), if ack_deadline.is_some() => {
                if let Some(ack) = pending.take() {
                    let text = signal_group_directly(group, ack.signal);
                    let _ = events.send(FleetEvent::Fallback(id, text));
                    if let Some(after) = ack.then_kill_after {
                        pending = Some(PendingAck {
                            deadline: Instant::now() + after,
                            signal: Signal::SIGKILL,
                            then_kill_after: None,
                        });
                    }
                }
            }
        }
    }
    let mut child = broker.child;
    let _ = tokio::task::spawn_blocking(move || child.wait()).await;
    let _ = events.send(FleetEvent::Ended(id));
}

fn signal_group_directly(group: Option<i32>, signal: Signal) -> String {
    let name = signal_name(signal);
    match (group, super::signal_group(group, signal)) {
        (_, Some(pgid)) => {
            format!(
                "the broker did not answer: tether sent SIG{name} to process group {pgid} itself"
            )
        }
        (Some(pgid), None) => {
            format!(
                "the broker did not answer and process group {pgid} is gone; SIG{name} not sent"
            )
        }
        (None, None) => format!(
            "the broker did not answer and the command has no live group; SIG{name} not sent"
        ),
    }
}
