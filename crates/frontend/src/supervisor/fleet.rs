//! The brokers of a front end with many (the TUI, the MCP server): one task per broker holds
//! its [`BrokerConversation`], forwards its events to a single channel and carries requests
//! to it. When a broker cannot do its work, its conversation's fallback does it from here.

use std::collections::HashMap;
use std::process::Stdio;

use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};
use tokio::time::{Instant, sleep_until};

use super::conversation::{BrokerConversation, Due};
use super::ending::End;
use super::intervals::{ABORT_PATIENCE, Pace};
use super::leftovers::{Cleanup, LiveBrokers, stop_leftovers};
use tether_os::journal::JournalDir;
use tether_protocol::protocol::{Event, EventKind, LaunchRequest, Request};

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
    Send(Request),
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
            let started = BrokerConversation::launch(
                &request,
                &journal,
                Default::default(),
                stderr,
                &live,
                Pace::FLEET,
            )
            .await;
            match started {
                Ok(broker) => BrokerTask { id, events }.drive(broker, rx).await,
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
    pub fn send(&self, command: usize, message: Request) -> bool {
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
        stop_leftovers(
            &self.live,
            None,
            None,
            std::time::Duration::ZERO,
            ABORT_PATIENCE,
        )
        .await
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

/// One broker's task: where its events go.
struct BrokerTask {
    id: RunId,
    events: UnboundedSender<FleetEvent>,
}

impl BrokerTask {
    async fn drive(self, mut broker: BrokerConversation, orders: UnboundedReceiver<Order>) {
        let end = self.converse(&mut broker, orders).await;
        if let Some(remains) = broker.end(end, true).await {
            let why = remains.why;
            self.tell(format!("{why}; stopping what it left"));
            let cleanup = remains.stop().await;
            self.tell(format!("{why}; {}", cleanup.describe()));
        }
        let _ = self.events.send(FleetEvent::Ended(self.id));
    }

    fn tell(&self, text: String) {
        let _ = self.events.send(FleetEvent::Fallback(self.id, text));
    }

    /// Carries events and requests until the broker closes, dies, or must be given up on.
    async fn converse(
        &self,
        broker: &mut BrokerConversation,
        mut orders: UnboundedReceiver<Order>,
    ) -> End {
        let mut orders_open = true;
        loop {
            let deadline = broker.deadline();
            tokio::select! {
                // Orders first, as exec puts signals first: an abort must not wait behind a
                // flood of lines. Lines before the timer: one already in the pipe may answer
                // the deadline that woke us (a pong, the report of a stop).
                biased;
                order = orders.recv(), if orders_open => match order {
                    None => orders_open = false,
                    Some(Order::Abort) => return End::Aborted,
                    // Keys and sizes need no proof of delivery, and a paste comes in
                    // thousands of pieces: no ping after each.
                    Some(Order::Send(message @ (Request::Input { .. } | Request::Resize { .. }))) => {
                        broker.post(&message);
                    }
                    Some(Order::Send(message)) => broker.request(&message),
                },
                line = broker.next_line() => {
                    let Some(line) = line else { return End::Lost };
                    // Pongs mean nothing to the TUI beyond acknowledging requests.
                    if let Ok(event) = line.event
                        && !matches!(event.kind, EventKind::Pong)
                    {
                        let end = match event.kind {
                            EventKind::Close { .. } => Some(End::Closed),
                            // The command exited and the broker keeps what it left running
                            // (the rule the launch asked for): it lets go of its front end and
                            // runs on alone until they are stopped; neither it nor they are
                            // stopped here.
                            EventKind::LeftoversKept { .. } => Some(End::LeftRunning),
                            _ => None,
                        };
                        // Nobody may listen any more; the broker runs on all the same until
                        // its command ends or the TUI process exits.
                        let _ = self.events.send(FleetEvent::Event(self.id, event));
                        if let Some(end) = end {
                            return end;
                        }
                    }
                }
                _ = sleep_until(deadline) => {}
            }
            match broker.check(Instant::now()) {
                Some(Due::SignalledDirectly(told) | Due::NotSignalled(told)) => self.tell(told),
                Some(Due::End(end)) => return end,
                None => {}
            }
        }
    }
}
