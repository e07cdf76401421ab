//! What the parent asks of a broker, and the stop sequence it can start.

use std::time::Duration;

use super::machine::Output;
use super::{Broker, Phase};
use crate::process::TreeWalk;
use crate::protocol::{
    ControlRequest, EventKind, Origin, ParentLossCause, Peer, ProcessSignal, Scope, Stage, ToBroker,
};
use crate::stop::{Delivered, Delivery, StopSequence, TreeSignaller};

/// `what`: what could not be done, as in "nothing is running to stop".
fn not_running(what: &str) -> Refusal {
    Refusal {
        code: "not_running",
        message: format!("nothing is running to {what}"),
    }
}

/// Why a request was not carried out: a code and a message that says what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub code: &'static str,
    pub message: String,
}

/// What a client brought the broker's loop.
pub enum Incoming {
    Request {
        client: u64,
        peer: Peer,
        request: Result<ControlRequest, Refusal>,
        /// The peer is a process of the broker's tree (its command's, or the command).
        in_tree: bool,
    },
    /// A connection refused; the broker journals it, then answers `client` (the refusal
    /// reaches the journal before the peer hears of it, and the connection ends with the
    /// answer).
    Refused {
        client: u64,
        peer: Peer,
        reason: String,
    },
}

/// What a control request did, for the client's acknowledgement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Done {
    /// Acknowledged at once, with `message` when there is something to say.
    Now { message: Option<String> },
    /// A signal was asked for ([`Output::OperatorSignal`]): the acknowledgement, with the
    /// pids it reached, comes with its delivery ([`Broker::operator_signalled`]).
    OnDelivery,
}

/// Who asked for an operator's signal: whom its answer goes to, and whom the journal names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Asker {
    /// Control-socket client `client`, answered with `control_ack` or `control_error`.
    Control { client: u64, peer: Peer },
    /// The front end that launched the broker, on its pipe, on behalf of `Origin`: told of
    /// a refusal only, as a protocol error in the journal.
    Parent(Peer, Origin),
}

impl Asker {
    fn peer(&self) -> &Peer {
        match self {
            Asker::Control { peer, .. } | Asker::Parent(peer, _) => peer,
        }
    }

    /// The operator's, unless the front end said it passes on its caller's.
    fn origin(&self) -> Origin {
        match self {
            Asker::Control { .. } => Origin::Operator,
            Asker::Parent(_, origin) => *origin,
        }
    }
}

/// What an operator's signal goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OperatorTarget {
    /// The process group (while its leader is unreaped) and every live process of the walk.
    Group(Option<i32>),
    /// One process, if the walk finds it.
    Pid(i32),
}

impl OperatorTarget {
    fn scope(self) -> Scope {
        match self {
            OperatorTarget::Group(_) => Scope::Group,
            OperatorTarget::Pid(_) => Scope::Pid,
        }
    }
}

/// A signal the operator asked for, decided without touching a process: whoever holds the
/// kernel delivers it ([`OperatorSignal::deliver`]) and hands the result back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperatorSignal {
    pub signal: ProcessSignal,
    pub target: OperatorTarget,
    pub walk: TreeWalk,
    pub asker: Asker,
}

/// What delivering an [`OperatorSignal`] did: `targets`, the pids it reached (for one pid,
/// itself or none, as the pidfd's signal went); `None` when the walk did not find the pid.
#[derive(Debug)]
pub struct OperatorDelivered {
    pub signal: ProcessSignal,
    pub target: OperatorTarget,
    pub asker: Asker,
    pub targets: Option<Vec<i32>>,
}

/// What delivers an operator's signal: a tree's signaller that also signals one of the
/// tree's processes. The kernel in the broker, a fake in the tests.
pub trait OperatorSignaller: TreeSignaller {
    /// `signal` to the live process `pid` of `walk` (pidfd-checked): `None` when the walk
    /// does not find it, else whether it was delivered.
    fn signal_one(&mut self, walk: &Self::Walk, pid: i32, signal: ProcessSignal) -> Option<bool>;
}

impl OperatorSignal {
    /// Delivers the signal: to the group and every process of the walk (each once, no CONT
    /// after it), or to the one pid. `walk`: this signal's [`TreeWalk`] as the kernel takes
    /// it (with the cgroup's handle, in the broker).
    pub fn deliver<K: OperatorSignaller + ?Sized>(
        self,
        kernel: &mut K,
        walk: &K::Walk,
    ) -> OperatorDelivered {
        let OperatorSignal {
            signal,
            target,
            asker,
            ..
        } = self;
        let targets = match target {
            OperatorTarget::Group(group) => {
                let mut reached = Default::default();
                Some(kernel.signal_tree(walk, group, signal, false, &mut reached))
            }
            OperatorTarget::Pid(pid) => kernel
                .signal_one(walk, pid, signal)
                .map(|delivered| if delivered { vec![pid] } else { vec![] }),
        };
        OperatorDelivered {
            signal,
            target,
            asker,
            targets,
        }
    }
}

/// The most a broker delays its first sweep (see [`StopSequence::delay_first_sweep`]).
const SWEEP_JITTER_MAX_MS: u64 = 100;

/// A delay of 0 to [`SWEEP_JITTER_MAX_MS`] that differs between brokers stopping together:
/// their pids differ, hashed so that pids a fixed step apart still spread; the clock is mixed
/// in so that one pid does not always draw the same delay.
fn sweep_jitter(pid: i32, now_ms: u64) -> Duration {
    let mixed = ((pid as u64) ^ (now_ms << 20)).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32;
    Duration::from_millis(mixed % (SWEEP_JITTER_MAX_MS + 1))
}

impl Broker {
    // ---- requests from the parent -----------------------------------------------------

    pub(super) fn request(&mut self, message: ToBroker) {
        // A heartbeat says nothing about the tree; anything else may change it.
        if !matches!(message, ToBroker::Ping) {
            self.tree_may_have_changed();
        }
        match message {
            ToBroker::Launch(_) => self.protocol_error(
                "already_launched",
                "a launch request arrived after the command was launched; it was ignored".into(),
            ),
            ToBroker::Ping => {
                self.last_ping = self.now;
                self.unresponsive = false;
                self.emit(EventKind::Pong);
            }
            ToBroker::Stop { origin } => {
                // Whatever origin the front end gives (its own SIGTERM is `shutdown`).
                self.hurry_copy();
                let parent = self.parent_peer();
                self.start_stop_for(origin.unwrap_or(Origin::Operator), Some(parent));
            }
            ToBroker::Signal {
                signal,
                scope,
                pid,
                origin,
            } => {
                let parent = Asker::Parent(self.parent_peer(), origin.unwrap_or(Origin::Operator));
                if let Err(refusal) = self.operator_signal(signal, scope, pid, parent) {
                    self.protocol_error(refusal.code, refusal.message);
                }
            }
            // Carried out by the event loop, which holds the terminals (`run::on_request`).
            ToBroker::Input { .. } | ToBroker::Resize { .. } => {}
        }
    }

    /// A signal or a stop from control-socket client `client`, journaled as the operator's
    /// with the client's pid and uid. A refusal goes back to that client only.
    pub(super) fn control_request(
        &mut self,
        request: ControlRequest,
        client: u64,
        peer: Peer,
    ) -> Result<Done, Refusal> {
        if !matches!(request, ControlRequest::Ping) {
            self.tree_may_have_changed();
        }
        match request {
            ControlRequest::Signal { signal, scope, pid } => self
                .operator_signal(signal, scope, pid, Asker::Control { client, peer })
                .map(|()| Done::OnDelivery),
            ControlRequest::Stop => {
                // Also when a stop of stragglers runs already: the operator wants the end.
                self.hurry_copy();
                if let Some(stop) = &self.stop {
                    let origin = serde_json::to_value(stop.origin)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_string))
                        .unwrap_or_default();
                    return Ok(Done::Now {
                        message: Some(format!("a stop is already running (origin {origin})")),
                    });
                }
                if self.child.is_none() || self.phase == Phase::Done {
                    return Err(not_running("stop"));
                }
                self.start_stop_for(Origin::Operator, Some(peer));
                Ok(Done::Now { message: None })
            }
            // Answered by the socket's own code; nothing for the state machine to do.
            ControlRequest::Subscribe
            | ControlRequest::Ping
            | ControlRequest::AgentWaiting { .. } => Ok(Done::Now { message: None }),
        }
    }

    /// The front end that launched this broker (`tether exec`, the TUI), named for the
    /// journal when it asks for a signal or a stop on its pipe: it is alive, it just wrote.
    fn parent_peer(&mut self) -> Peer {
        let pid = self.request.parent_pid;
        Peer {
            pid,
            uid: self.host.uid,
            program: self.host.parent_program.clone(),
        }
    }

    pub(super) fn protocol_error(&mut self, code: &str, message: String) {
        self.emit(EventKind::BrokerFailure {
            stage: Stage::Protocol,
            code: code.into(),
            message,
        });
    }

    /// Asks for a signal on the operator's behalf (`asker`: the control client or the
    /// parent that asked, named in the journal): checked here, delivered by the interpreter
    /// ([`Output::OperatorSignal`]), journaled and answered when its delivery comes back
    /// ([`Broker::operator_signalled`]).
    pub(super) fn operator_signal(
        &mut self,
        signal: ProcessSignal,
        scope: Scope,
        pid: Option<i32>,
        asker: Asker,
    ) -> Result<(), Refusal> {
        if self.child.is_none() || self.phase == Phase::Done {
            return Err(not_running(&format!("send {signal} to")));
        }
        let target = match scope {
            Scope::Group => OperatorTarget::Group(self.live_group()),
            Scope::Pid => match pid {
                Some(pid) => OperatorTarget::Pid(pid),
                None => {
                    return Err(Refusal {
                        code: "missing_pid",
                        message: "a signal with scope `pid` needs a `pid`".into(),
                    });
                }
            },
        };
        let walk = self.walk();
        // Journaled as delivered ([`Input::OperatorSignalled`]), in this place in the journal.
        self.outputs
            .push_back(Output::OperatorSignal(OperatorSignal {
                signal,
                target,
                walk,
                asker,
            }));
        Ok(())
    }

    /// An operator's signal was delivered: what it reached is journaled (`signal_sent`),
    /// or, for a pid the walk did not find, refused; a control client is answered after the
    /// journal is flushed, the parent hears of a refusal as a protocol error.
    pub(super) fn operator_signalled(&mut self, delivered: OperatorDelivered) {
        let OperatorDelivered {
            signal,
            target,
            asker,
            targets,
        } = delivered;
        let outcome = match (target, targets) {
            (OperatorTarget::Pid(pid), None) => Err(Refusal {
                code: "not_a_descendant",
                message: format!(
                    "pid {pid} is not part of this command's tree; nothing was signalled"
                ),
            }),
            (target, targets) => {
                let targets = targets.unwrap_or_default();
                // To the command (its group, or its main process), not one worker of it.
                let main = self.child.as_ref().map(|c| c.pid);
                if matches!(target, OperatorTarget::Group(_))
                    || matches!(target, OperatorTarget::Pid(pid) if Some(pid) == main)
                {
                    self.attention_signalled_by_hand(signal);
                }
                self.emit(EventKind::SignalSent {
                    signal,
                    scope: target.scope(),
                    origin: asker.origin(),
                    targets: targets.clone(),
                    client: Some(asker.peer().clone()),
                });
                Ok(targets)
            }
        };
        match (asker, outcome) {
            (Asker::Parent(..), Ok(_)) => {}
            (Asker::Parent(..), Err(refusal)) => self.protocol_error(refusal.code, refusal.message),
            (Asker::Control { client, .. }, Ok(targets)) => {
                let ack = EventKind::ControlAck {
                    request: "signal".into(),
                    journal_offset: None,
                    targets,
                    message: None,
                };
                self.reply(client, ack);
            }
            (Asker::Control { client, .. }, Err(refusal)) => {
                self.reply(client, refusal.into_event());
            }
        }
        // A parent's signal gets no reply, whose flush would carry its `signal_sent`.
        self.flush_journal();
    }

    // ---- stopping ---------------------------------------------------------------------

    pub(super) fn start_stop(&mut self, origin: Origin) {
        self.start_stop_for(origin, None);
    }

    /// Starts the stop sequence; `client` is the control client that asked, journaled with
    /// each of its signals.
    pub(super) fn start_stop_for(&mut self, origin: Origin, client: Option<Peer>) {
        if super::copy::asked(origin) {
            self.hurry_copy();
        }
        if self.stop.is_some() || self.child.is_none() || self.phase == Phase::Done {
            return;
        }
        if self.stop_ends_custody(origin, client.clone()) {
            return;
        }
        self.stop_client = client;
        self.result.stopped_by = Some(origin);
        // Said before its first signal: a reader knows the command is being stopped, and
        // why, without guessing it from the signals that follow.
        self.emit(EventKind::StopStarted {
            origin,
            grace: self.request.grace,
        });
        let grace = self.request.grace;
        // On the /proc walk, the first signal goes to what the last walk found: hundreds of
        // brokers whose TUI was killed must not each walk all of /proc at the same moment.
        let walk = match (self.cgroup.is_none(), self.last_walk.clone()) {
            (true, Some(known)) => TreeWalk {
                known: Some(known),
                ..self.walk()
            },
            _ => self.walk(),
        };
        let group = self.live_group();
        let (mut sequence, plan) = StopSequence::begin(origin, grace, self.now);
        sequence.delay_first_sweep(sweep_jitter(self.pid, self.wall_ms));
        self.stop = Some(sequence);
        // Journaled as delivered ([`Input::Signalled`]), in this place in the journal.
        self.outputs.push_back(Output::Signal { plan, walk, group });
        self.check_stop_done();
    }

    /// A plan of the stop sequence was delivered: what it reached is journaled (the first
    /// signal as TERM then CONT to the same targets; the KILL at the end of grace, when it
    /// found anything, after `hard_kill`), and the sequence goes on from it.
    pub(super) fn signalled(&mut self, delivered: Delivered) {
        let Some(stop) = self.stop.as_mut() else {
            return;
        };
        let (origin, started) = (stop.origin, stop.started);
        let (first, at) = (delivered.is_first(), delivered.at());
        let (delivery, escalated) = stop.delivered(delivered);
        match delivery {
            Some(term) if first => {
                let cont = Delivery {
                    signal: ProcessSignal::CONT,
                    targets: term.targets.clone(),
                };
                self.report(term, origin);
                self.report(cont, origin);
            }
            // A KILL that found nothing left is no hard kill.
            Some(kill) if escalated && !kill.targets.is_empty() => {
                // As of the step that decided it, as when the step delivered it itself.
                let after_ms = at.saturating_duration_since(started).as_millis() as u64;
                self.result.hard_killed = true;
                self.emit(EventKind::HardKill { after_ms });
                self.report(kill, origin);
            }
            Some(newcomers) if !escalated => self.report(newcomers, origin),
            _ => {}
        }
        self.check_stop_done();
        // Delivered after the tick that decided it flushed: readers of the journal (a watch,
        // the MCP server) see the signals now, not at the next wake-up.
        self.flush_journal();
    }

    pub(super) fn report(&mut self, delivery: Delivery, origin: Origin) {
        self.emit(EventKind::SignalSent {
            signal: delivery.signal,
            scope: Scope::Group,
            origin,
            targets: delivery.targets,
            client: self.stop_client.clone(),
        });
    }

    /// A stop is done when the command is reaped and two walks in a row find nothing: one
    /// walk can miss a child forked by a parent that exited while /proc was being read.
    pub(super) fn check_stop_done(&mut self) {
        if self.stop.is_none() || self.stop_done || !self.child_reaped() {
            return;
        }
        // The kernel knows: no child left, no descendant left (see `broker::reap`), as the
        // interpreter read it after its last reaping.
        self.stop_done = !self.tree_left();
    }

    pub(super) fn parent_lost(&mut self, cause: ParentLossCause) {
        if self.result.parent_lost || self.parent_detached {
            return;
        }
        if self.in_custody() {
            // The front end returned on `leftovers_kept`, as it should: its going is no loss.
            self.detach_parent();
            return;
        }
        // Nothing more goes to a parent that is gone (the interpreter drops what it queued).
        self.result.parent_lost = true;
        self.emit(EventKind::ParentLost { cause });
        self.start_stop(Origin::ParentLost);
    }

    /// Whether the front end still hears from this broker: neither lost nor let go.
    pub fn parent_attached(&self) -> bool {
        !self.result.parent_lost && !self.parent_detached
    }

    /// Lets the front end go (custody began and it took the news): nothing more is sent to
    /// it, and nothing it does (its exit, its silence) is acted on.
    pub(super) fn detach_parent(&mut self) {
        self.parent_detached = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn brokers_stopping_together_spread_their_first_sweeps() {
        // A front end that started its brokers one after another: pids a few apart, one
        // clock reading for all.
        let jitters: Vec<Duration> = (0..100)
            .map(|i| sweep_jitter(4000 + 3 * i, 123_456))
            .collect();
        assert!(
            jitters
                .iter()
                .all(|j| *j <= Duration::from_millis(SWEEP_JITTER_MAX_MS))
        );
        let distinct: std::collections::HashSet<_> = jitters.iter().collect();
        assert!(
            distinct.len() >= 15,
            "only {} distinct delays",
            distinct.len()
        );
    }
}
