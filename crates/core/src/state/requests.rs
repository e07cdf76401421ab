//! What the parent and control clients ask of a broker, and the stop sequence it can start.

use std::time::Duration;

use super::machine::Output;
use super::{Broker, Phase};
use crate::process::TreeWalk;
pub use crate::protocol::Refusal;
use crate::protocol::{
    EventKind, Origin, ParentLossCause, Peer, ProcessSignal, Request, Scope, Stage, Transport,
};
use crate::stop::{Delivered, Delivery, StopSequence, TreeSignaller};

/// `what`: what could not be done, as in "nothing is running to stop".
fn not_running(what: &str) -> Refusal {
    Refusal {
        code: "not_running",
        message: format!("nothing is running to {what}"),
    }
}

/// Who a request came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sender {
    /// The front end that launched the broker, on its pipe.
    Parent,
    /// Control-socket client `client`; `in_tree`: the peer is a process of the broker's
    /// tree (its command's, or the command).
    Client {
        client: u64,
        peer: Peer,
        in_tree: bool,
    },
}

impl Sender {
    fn transport(&self) -> Transport {
        match self {
            Sender::Parent => Transport::Pipe,
            Sender::Client { .. } => Transport::Socket,
        }
    }

    fn client(&self) -> Option<u64> {
        match self {
            Sender::Parent => None,
            Sender::Client { client, .. } => Some(*client),
        }
    }
}

/// Who asked for an operator's signal or stop: whom its answer goes to (control client
/// `client`, or the parent when `None`), whom the journal names, and on whose behalf (a
/// control client is the operator; the parent may pass on its caller's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Asker {
    pub client: Option<u64>,
    pub peer: Peer,
    pub origin: Origin,
}

fn acked(request: &str, message: Option<String>) -> EventKind {
    EventKind::ControlAck {
        request: request.into(),
        journal_offset: None,
        targets: Vec::new(),
        message,
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
    // ---- requests, from the parent or a control client --------------------------------

    /// Carries out a request, from the parent or a control client, or refuses it, and
    /// answers: a control client always (`control_ack`, `control_error`, `pong`), after
    /// what the request caused is journaled; the parent with a pong, and with a journaled
    /// protocol error for a refusal.
    pub(super) fn request(&mut self, from: Sender, request: Result<Request, Refusal>) {
        let client = from.client();
        let answer = request.and_then(|request| self.carry_out(from, request));
        self.answer(client, answer);
    }

    /// `answer`: `Ok(None)` when it comes later (with a signal's delivery).
    fn answer(&mut self, client: Option<u64>, answer: Result<Option<EventKind>, Refusal>) {
        match (client, answer) {
            (_, Ok(None)) => {}
            (Some(client), Ok(Some(answer))) => self.reply(client, answer),
            (Some(client), Err(refusal)) => self.reply(client, refusal.into_event()),
            (None, Ok(Some(EventKind::Pong))) => self.emit(EventKind::Pong),
            (None, Ok(Some(_))) => {}
            (None, Err(refusal)) => {
                self.broker_failure(Stage::Protocol, refusal.code, refusal.message)
            }
        }
    }

    /// What `request` does, and its answer (`None`: none yet). Each transport takes its own
    /// requests only ([`Transport::accepts`]).
    fn carry_out(&mut self, from: Sender, request: Request) -> Result<Option<EventKind>, Refusal> {
        let on = from.transport();
        if !on.accepts(&request) {
            return Err(Refusal::not_taken(on, request.name()));
        }
        // A heartbeat or an agent's word says nothing about the tree; anything else may
        // change it.
        if !matches!(request, Request::Ping | Request::AgentWaiting { .. }) {
            self.tree_may_have_changed();
        }
        let name = request.name();
        match request {
            Request::Launch(_) => Err(Refusal {
                code: "already_launched",
                message: "a launch request arrived after the command was launched; it was ignored"
                    .into(),
            }),
            Request::Ping => {
                if from == Sender::Parent {
                    self.last_ping = self.now;
                    self.unresponsive = false;
                }
                Ok(Some(EventKind::Pong))
            }
            Request::Subscribe => {
                // Everything before the subscription is in the journal, flushed, and up to
                // `journal_offset`; everything after comes on the socket.
                self.flush_journal();
                if let Some(client) = from.client() {
                    self.outputs.push_back(Output::Subscribe { client });
                }
                Ok(Some(EventKind::ControlAck {
                    request: name.into(),
                    journal_offset: Some(self.journal_len()),
                    targets: Vec::new(),
                    message: None,
                }))
            }
            Request::AgentWaiting { what } => {
                let in_tree = matches!(from, Sender::Client { in_tree: true, .. });
                self.attention_told_waiting(&what, in_tree)?;
                Ok(Some(acked(name, None)))
            }
            Request::Signal {
                signal,
                scope,
                pid,
                origin,
            } => {
                let asker = self.asker(from, origin);
                self.operator_signal(signal, scope, pid, asker)?;
                Ok(None)
            }
            Request::Stop { origin } => {
                // Also when a stop of stragglers runs already: the operator wants the end.
                self.hurry_copy();
                if let Some(running) = self.stop.as_ref().map(|stop| stop.origin) {
                    let asker = self.asker(from, origin);
                    if running == Origin::FileChanged
                        && asker.origin != Origin::FileChanged
                        && !self.child_reaped()
                    {
                        self.take_over_stop(asker);
                        return Ok(Some(acked(name, None)));
                    }
                    let running: &str = running.into();
                    let message = format!("a stop is already running (origin {running})");
                    return Ok(Some(acked(name, Some(message))));
                }
                if self.child.is_none() || self.phase == Phase::Done {
                    // The front end stops what it launched whenever it ends: only an
                    // operator is told that nothing runs.
                    return match from {
                        Sender::Parent => Ok(None),
                        Sender::Client { .. } => Err(not_running("stop")),
                    };
                }
                let asker = self.asker(from, origin);
                self.start_stop_for(asker.origin, Some(asker.peer));
                Ok(Some(acked(name, None)))
            }
            // Carried out by the event loop, which holds the terminals (`run::parent_frame`).
            Request::Input { .. } | Request::Resize { .. } => Ok(None),
        }
    }

    /// A stop asked while the launcher's stop for a changed file runs, before the command
    /// ended, takes that stop over: its signals go on as they were, but it is now the
    /// asker's (`stop_started` again, with their origin), so that the run ends as stopped,
    /// not as restarted, and the launcher, which reads the run's end, starts no new run.
    /// Its `grace` is what is left of the first stop's: the KILL is due at the same moment.
    fn take_over_stop(&mut self, asker: Asker) {
        let mut grace = self.request.grace;
        if let Some(stop) = &mut self.stop {
            stop.origin = asker.origin;
            grace = grace.saturating_sub(self.now.saturating_duration_since(stop.started));
        }
        self.stop_client = Some(asker.peer);
        self.result.stopped_by = Some(asker.origin);
        self.emit(EventKind::StopStarted {
            origin: asker.origin,
            grace,
        });
    }

    /// The asker of a signal or a stop that came from `from`: the operator's, unless the
    /// front end said it passes on its caller's.
    fn asker(&self, from: Sender, origin: Option<Origin>) -> Asker {
        match from {
            // The front end that launched this broker (`tether exec`, the TUI), named for
            // the journal: it is alive, it just wrote.
            Sender::Parent => Asker {
                client: None,
                peer: Peer {
                    pid: self.request.parent_pid,
                    uid: self.host.uid,
                    program: self.host.parent_program.clone(),
                },
                origin: origin.unwrap_or(Origin::Operator),
            },
            Sender::Client { client, peer, .. } => Asker {
                client: Some(client),
                peer,
                origin: Origin::Operator,
            },
        }
    }

    pub(super) fn broker_failure(&mut self, stage: Stage, code: &str, message: String) {
        self.emit(EventKind::BrokerFailure {
            stage,
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
                // To the command (its group, or its main process), or one worker of it.
                let main = self.child.as_ref().map(|c| c.pid);
                let to_command = matches!(target, OperatorTarget::Group(_))
                    || matches!(target, OperatorTarget::Pid(pid) if Some(pid) == main);
                self.attention_signalled(asker.origin, signal, to_command);
                self.emit(EventKind::SignalSent {
                    signal,
                    scope: target.scope(),
                    origin: asker.origin,
                    targets: targets.clone(),
                    client: Some(asker.peer.clone()),
                });
                Ok(targets)
            }
        };
        let answer = outcome.map(|targets| {
            Some(EventKind::ControlAck {
                request: "signal".into(),
                journal_offset: None,
                targets,
                message: None,
            })
        });
        self.answer(asker.client, answer);
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
        sequence.delay_first_sweep(sweep_jitter(self.host.pid, self.wall_ms));
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
        self.start_stop(if self.request.caller_stand_in {
            Origin::Caller
        } else {
            Origin::ParentLost
        });
    }

    /// Whose a stop signal to the broker was: its caller's where the front end stands in
    /// for its caller (the shell shim) and the sender is one the request names as its
    /// custodian (the agent that ran the shim, or owns the session: Claude Code ends a
    /// background task by a TERM to every process of its tree, this broker's too); else a
    /// shutdown's.
    pub(super) fn shutdown_origin(&self, sender: Option<i32>) -> Origin {
        let custodians = &self.request.leftovers.custodians;
        let by_caller = sender.is_some_and(|pid| custodians.iter().any(|c| c.pid == pid));
        if self.request.caller_stand_in && by_caller {
            Origin::Caller
        } else {
            Origin::Shutdown
        }
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
