//! What the parent asks of a broker, and the stop sequence it can start.

use std::time::Duration;

use tokio::time::Instant;

use super::{Broker, Phase};
use crate::broker::signaller::{self, live_descendants, signal_name};
use crate::broker::stop::{Delivery, StopSequence};
use crate::protocol::{EventKind, Origin, ParentLossCause, Scope, Stage, ToBroker};

impl Broker {
    // ---- requests from the parent -----------------------------------------------------

    pub fn request(&mut self, message: ToBroker) {
        match message {
            ToBroker::Launch(_) => self.protocol_error(
                "already_launched",
                "a launch request arrived after the command was launched; it was ignored".into(),
            ),
            ToBroker::Ping => {
                self.last_ping = Instant::now();
                self.unresponsive = false;
                self.emit(EventKind::Pong);
            }
            ToBroker::Stop { origin } => self.start_stop(origin.unwrap_or(Origin::Operator)),
            ToBroker::Signal { signal, scope, pid } => self.operator_signal(&signal, scope, pid),
        }
    }

    pub fn protocol_error(&mut self, code: &str, message: String) {
        self.emit(EventKind::BrokerFailure {
            stage: Stage::Protocol,
            code: code.into(),
            message,
        });
    }

    pub(super) fn operator_signal(&mut self, name: &str, scope: Scope, pid: Option<i32>) {
        let Some(signal) = signaller::parse_signal(name) else {
            return self.protocol_error(
                "unknown_signal",
                format!("`{name}` is not a signal; use a name like TERM or a number"),
            );
        };
        if self.child.is_none() || self.phase == Phase::Done {
            return self.protocol_error(
                "not_running",
                format!("nothing is running to send {name} to"),
            );
        }
        let targets = match scope {
            Scope::Group => {
                let mut reached = Default::default();
                signaller::signal_tree(self.pid, self.live_group(), signal, false, &mut reached)
            }
            Scope::Pid => {
                let Some(target) = pid else {
                    return self.protocol_error(
                        "missing_pid",
                        "a signal with scope `pid` needs a `pid`".into(),
                    );
                };
                match live_descendants(self.pid).iter().find(|p| p.pid == target) {
                    Some(stat) if signaller::signal_process(stat, signal) => vec![target],
                    Some(_) => vec![],
                    None => {
                        return self.protocol_error(
                            "not_a_descendant",
                            format!(
                                "pid {target} is not part of this command's tree; nothing was signalled"
                            ),
                        );
                    }
                }
            }
        };
        self.emit(EventKind::SignalSent {
            signal: signal_name(signal),
            scope,
            origin: Origin::Operator,
            targets,
        });
    }

    // ---- stopping ---------------------------------------------------------------------

    pub fn start_stop(&mut self, origin: Origin) {
        if self.stop.is_some() || self.child.is_none() || self.phase == Phase::Done {
            return;
        }
        self.result.stopped_by = Some(origin);
        let grace = Duration::from_millis(self.request.grace_ms);
        let (sequence, delivery) =
            StopSequence::start(origin, grace, self.pid, self.live_group(), Instant::now());
        self.stop = Some(sequence);
        let cont = Delivery {
            signal: nix::sys::signal::Signal::SIGCONT,
            targets: delivery.targets.clone(),
        };
        self.report(delivery, origin);
        self.report(cont, origin);
        self.check_stop_done();
    }

    pub(super) fn report(&mut self, delivery: Delivery, origin: Origin) {
        self.emit(EventKind::SignalSent {
            signal: signal_name(delivery.signal),
            scope: Scope::Group,
            origin,
            targets: delivery.targets,
        });
    }

    /// A stop is done when the command is reaped and two walks in a row find nothing: one
    /// walk can miss a child forked by a parent that exited while /proc was being read.
    pub(super) fn check_stop_done(&mut self) {
        if self.stop.is_none() || self.stop_done || !self.child_reaped() {
            return;
        }
        if live_descendants(self.pid).is_empty() {
            self.empty_walks += 1;
            self.stop_done = self.empty_walks >= 2;
        } else {
            self.empty_walks = 0;
        }
    }

    pub fn parent_lost(&mut self, cause: ParentLossCause) {
        if self.result.parent_lost {
            return;
        }
        self.result.parent_lost = true;
        // Nothing more goes to a parent that is gone.
        self.to_parent.clear();
        self.emit(EventKind::ParentLost { cause });
        self.start_stop(Origin::ParentLost);
    }

    pub fn is_parent_lost(&self) -> bool {
        self.result.parent_lost
    }
}
