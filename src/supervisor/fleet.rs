//! The TUI's brokers: one task per broker forwards its events to a single channel and carries
//! requests to it. When a broker cannot do its work the TUI does it: a signal the broker does
//! not acknowledge goes to the group and the broker's descendants from here; a broker that
//! dies, or does not acknowledge a stop, is killed and what it left is stopped from here with
//! the broker's own sequence (see [`super::leftovers`]).

use std::collections::HashMap;
use std::process::Stdio;
use std::time::Duration;

use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};
use tokio::time::{Instant, MissedTickBehavior, sleep_until};

use super::BrokerProcess;
use super::ack::{Acks, Fallback};
use super::leftovers::{
    Cleanup, GroupLeader, KILL_PATIENCE, LiveBrokers, Ticket, signal_directly, stop_leftovers,
};
use crate::journal::JournalDir;
use crate::protocol::{Event, EventKind, LaunchRequest, ToBroker};

/// How often the TUI pings each broker when it has asked nothing of it. A request is followed
/// by a ping of its own (its pong is the acknowledgement), so this one only lets the broker
/// journal a TUI that stopped answering (`parent_unresponsive`, after three intervals): with
/// a hundred brokers a ping a second would be a hundred wake-ups a second of an idle fleet.
pub const HEARTBEAT: Duration = Duration::from_secs(10);
/// When quitting cannot wait any longer, how long KILL is repeated to leftovers.
const ABORT_PATIENCE: Duration = Duration::from_secs(1);

/// Which run of which command a message is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RunId {
    pub command: usize,
    pub run: u32,
}

#[derive(Debug)]
pub enum FleetEvent {
    Event(RunId, Event),
    /// The broker could not do its work; the TUI did. The text says what.
    Fallback(RunId, String),
    /// The broker could not be started at all.
    SpawnFailed(RunId, String),
    /// The broker process has exited and was reaped, and anything it left was stopped.
    Ended(RunId),
}

/// What the TUI asks of a broker's task.
enum Order {
    Send(ToBroker),
    /// Quitting cannot wait: kill the broker, and KILL what it leaves.
    Abort,
}

struct Link {
    run: u32,
    orders: UnboundedSender<Order>,
}

pub struct Fleet {
    events: UnboundedSender<FleetEvent>,
    links: HashMap<usize, Link>,
    live: LiveBrokers,
}

impl Fleet {
    pub fn new() -> (Fleet, UnboundedReceiver<FleetEvent>) {
        let (events, rx) = unbounded_channel();
        (
            Fleet {
                events,
                links: HashMap::new(),
                live: LiveBrokers::new(),
            },
            rx,
        )
    }

    /// Starts a broker for `id`. Must be called inside the tokio runtime.
    /// `journal` is the run's journal directory, already created.
    pub fn launch(&mut self, id: RunId, request: LaunchRequest, journal: JournalDir) {
        let (orders, rx) = unbounded_channel();
        self.links.insert(
            id.command,
            Link {
                run: id.run,
                orders,
            },
        );
        let events = self.events.clone();
        let live = self.live.clone();
        tokio::spawn(async move {
            // The broker's own diagnostics must not reach the terminal the TUI draws on.
            let stderr = journal
                .create_file("broker.stderr", false)
                .map_or_else(|_| Stdio::null(), Stdio::from);
            // Under the registry's lock: no walk for leftovers may see this broker before
            // it is registered.
            let started = {
                let mut registry = live.lock().await;
                BrokerProcess::spawn(&request, &journal, Default::default(), stderr)
                    .await
                    .map(|broker| {
                        let ticket = registry.register(broker.pid());
                        (broker, ticket)
                    })
            };
            match started {
                Ok((broker, ticket)) => {
                    let link = BrokerLink {
                        id,
                        grace: Duration::from_millis(request.grace_ms),
                        events,
                        live,
                        ticket,
                    };
                    link.drive(broker, rx).await;
                }
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
            .is_some_and(|link| link.orders.send(Order::Send(message)).is_ok())
    }

    /// Quitting cannot wait any longer: every broker still running is killed, and what it
    /// leaves is killed too. Each run still ends with [`FleetEvent::Ended`].
    pub fn abort_all(&self) {
        for link in self.links.values() {
            let _ = link.orders.send(Order::Abort);
        }
    }

    /// The last thing before the TUI exits: KILLs whatever is still below it and not under a
    /// live broker, and reaps it.
    pub async fn kill_leftovers(&self) -> Cleanup {
        stop_leftovers(&self.live, None, None, Duration::ZERO, ABORT_PATIENCE).await
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

/// How a broker's run ended, as far as its task saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    /// The broker said `close`: it did its work.
    Closed,
    /// The command exited and the broker keeps what it left running (`leftovers_kept`, the
    /// rule asked for by the launch): it lets go of its front end and runs on alone until
    /// they are stopped. Neither it nor they are stopped from here.
    LeftRunning,
    /// Its events ended without a `close`: it died.
    Lost,
    /// It did not acknowledge a stop in time.
    StopUnanswered,
    /// The TUI is quitting and cannot wait any longer.
    Aborted,
}

/// One broker's task: what it needs besides the broker and its orders.
struct BrokerLink {
    id: RunId,
    grace: Duration,
    events: UnboundedSender<FleetEvent>,
    live: LiveBrokers,
    ticket: Ticket,
}

impl BrokerLink {
    async fn drive(self, mut broker: BrokerProcess, orders: UnboundedReceiver<Order>) {
        let (end, leader, cgroup) = self.converse(&mut broker, orders).await;
        if !matches!(end, End::Closed | End::LeftRunning) {
            // Through the unreaped `Child`: its pid cannot have been reused.
            let _ = broker.child.kill();
        }
        let mut child = broker.child;
        let _ = tokio::task::spawn_blocking(move || child.wait()).await;
        self.live.lock().await.unregister(self.ticket);
        let (why, grace, patience) = match end {
            End::Closed | End::LeftRunning => {
                let _ = self.events.send(FleetEvent::Ended(self.id));
                return;
            }
            End::Lost => ("broker lost", self.grace, KILL_PATIENCE),
            End::StopUnanswered => (
                "the broker did not answer the stop: tether killed it; broker lost",
                self.grace,
                KILL_PATIENCE,
            ),
            End::Aborted => (
                "quitting: the broker did not finish in time and was killed; broker lost",
                Duration::ZERO,
                ABORT_PATIENCE,
            ),
        };
        self.tell(format!("{why}; stopping what it left"));
        let cleanup = stop_leftovers(&self.live, leader, cgroup.as_deref(), grace, patience).await;
        self.tell(format!("{why}; {}", cleanup.describe()));
        let _ = self.events.send(FleetEvent::Ended(self.id));
    }

    fn tell(&self, text: String) {
        let _ = self.events.send(FleetEvent::Fallback(self.id, text));
    }

    /// Carries events and requests until the broker closes, dies, or must be killed.
    /// Returns how it ended, the command's group leader, if it still needs stopping, and its
    /// cgroup, if it has one.
    async fn converse(
        &self,
        broker: &mut BrokerProcess,
        mut orders: UnboundedReceiver<Order>,
    ) -> (End, Option<GroupLeader>, Option<std::path::PathBuf>) {
        let me = std::process::id() as i32;
        let broker_pid = broker.pid();
        let mut heartbeat = tokio::time::interval(HEARTBEAT);
        heartbeat.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut leader: Option<GroupLeader> = None;
        let mut cgroup = broker.expected_cgroup.clone();
        let mut acks = Acks::default();
        let mut orders_open = true;
        let end = loop {
            let ack_deadline = acks.deadline();
            tokio::select! {
                line = broker.next_line() => {
                    let Some(line) = line else { break End::Lost };
                    let Ok(event) = line.event else { continue };
                    match &event.kind {
                        // Pongs mean nothing to the TUI beyond acknowledging requests.
                        EventKind::Pong => {
                            acks.pong();
                            continue;
                        }
                        EventKind::Spawned { pgid, .. } => {
                            leader = GroupLeader::find(*pgid, &[broker_pid, me]);
                        }
                        EventKind::Exit { .. } => leader = None,
                        EventKind::Containment { path, .. } => cgroup = path.clone(),
                        _ => {}
                    }
                    let closed = matches!(event.kind, EventKind::Close { .. });
                    let kept = matches!(event.kind, EventKind::LeftoversKept { .. });
                    // Nobody may listen any more; the broker runs on all the same until its
                    // command ends or the TUI process exits.
                    let _ = self.events.send(FleetEvent::Event(self.id, event));
                    if closed {
                        break End::Closed;
                    }
                    if kept {
                        break End::LeftRunning;
                    }
                }
                order = orders.recv(), if orders_open => match order {
                    None => orders_open = false,
                    Some(Order::Abort) => break End::Aborted,
                    // Keys and sizes need no proof of delivery, and a paste comes in
                    // thousands of pieces: no ping after each.
                    Some(Order::Send(message @ (ToBroker::Input { .. } | ToBroker::Resize { .. }))) => {
                        let _ = broker.post(&message);
                    }
                    Some(Order::Send(message)) => {
                        // The ping after it proves, by its pong, that the broker read it.
                        let posted = broker.post(&message).is_ok()
                            && broker.post(&ToBroker::Ping).is_ok();
                        match Fallback::for_request(&message) {
                            Some(fallback) => acks.request_posted(fallback, posted, Instant::now()),
                            None if posted => acks.ping_posted(),
                            None => {}
                        }
                    }
                },
                _ = heartbeat.tick() => {
                    if let Ok(true) = broker.ping() {
                        acks.ping_posted();
                    }
                }
                _ = sleep_until(ack_deadline.unwrap_or_else(Instant::now)), if ack_deadline.is_some() => {
                    match acks.take_due(Instant::now()) {
                        Some(Fallback::Signal(signal)) => {
                            self.tell(signal_directly(broker_pid, leader, signal, "the broker did not answer"));
                        }
                        Some(Fallback::Stop) => break End::StopUnanswered,
                        None => {}
                    }
                }
            }
        };
        (end, leader, cgroup)
    }
}
