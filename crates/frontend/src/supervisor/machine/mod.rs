//! The front end's conversation with a broker as a state machine with no I/O and no clock,
//! as quinn-proto's `Connection` is a whole protocol that never touches a socket: what
//! happened goes in ([`ConversationMachine::handle`], with the `now` it happened at), what
//! to do comes out ([`ConversationMachine::poll_action`]: write, ping, look, signal, give
//! up), and [`ConversationMachine::poll_timeout`] says when to come back if nothing
//! happens. [`BrokerConversation`](super::BrokerConversation) is its driver: it owns the
//! pipes or the socket, the broker's pid and tokio's timers, and does what the machine
//! says. Every patience here ([`ACK_TIMEOUT`], [`STOP_SLACK`], [`BUSY_STOP_PATIENCE`], the
//! [`Pace`]) is counted from the `now` it is given, so the tests run it on a fake clock.
//!
//! Some actions need an answer from the world before the machine can go on, given back as
//! an input at the same `now`: [`Action::Ping`] (was a ping queued behind requests that
//! still wait?), [`Action::Look`] (is the broker stopped?), [`Action::CountUnread`] (how
//! many lines did the broker write that were not read?).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::ack::{Acks, Fallback, repeats_harmlessly};
use super::ending::{End, cleanup_timing};
use super::intervals::{
    ABORT_PATIENCE, ACK_TIMEOUT, BUSY_STOP_PATIENCE, KILL_PATIENCE, Pace, STOP_SLACK,
};
use super::liveness::{Heartbeat, PingWatch, Seen};
use tether_protocol::protocol::{EventKind, Request};

mod interface;
#[cfg(test)]
mod tests;

pub use interface::{Action, Asked, Cleanup, CommandCgroup, Ending, Input, Transport};

/// Why the machine looks at the broker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Looking {
    /// Its heartbeat: stopped or at work decides how soon its silence ends it.
    Heartbeat,
    /// A deadline that gives it up: at work, it gets more time.
    Deadline,
}

pub struct ConversationMachine {
    transport: Transport,
    pace: Pace,
    grace: Duration,
    cgroup: CommandCgroup,
    acks: Acks,
    watch: PingWatch,
    next_look: Instant,
    last_ping: Instant,
    /// When the broker last sent a line: one still reporting its stop is at work.
    last_heard: Instant,
    /// When a look last showed the broker at work ([`Seen::at_work`]): one the kernel shows
    /// busy or waiting for a core is slow, not wedged, and its stop is not overdue yet.
    last_at_work: Option<Instant>,
    /// Its CPU time at the last look.
    cpu_ticks: Option<u64>,
    /// When the first stop with a deadline was asked for.
    stop_asked: Option<Instant>,
    /// A write failed: the broker's end is gone.
    unwritable: bool,
    /// A deadline came while the broker's lines waited unread: how many of them are still
    /// to be read before it is acted on (see [`Self::reading_before_due`]).
    unread_before_due: Option<usize>,
    /// A look waits for [`Input::Looked`], asked for this.
    looking: Option<Looking>,
    /// A look was made at the deadline being acted on: what is still due is done.
    looked_at_deadline: bool,
    /// What [`Input::Ask`] waits for: the number of its answer, and until when.
    asked: Option<(u64, Instant)>,
    actions: VecDeque<Action>,
}

impl ConversationMachine {
    /// A conversation begun at `now` that has heard nothing yet.
    pub fn new(
        transport: Transport,
        pace: Pace,
        grace: Duration,
        cgroup: CommandCgroup,
        now: Instant,
    ) -> ConversationMachine {
        ConversationMachine {
            transport,
            pace,
            grace,
            cgroup,
            acks: Acks::default(),
            watch: PingWatch::default(),
            next_look: now + pace.look,
            last_ping: now,
            last_heard: now,
            last_at_work: None,
            cpu_ticks: None,
            stop_asked: None,
            unwritable: false,
            unread_before_due: None,
            looking: None,
            looked_at_deadline: false,
            asked: None,
            actions: VecDeque::new(),
        }
    }

    pub fn handle(&mut self, input: Input, now: Instant) {
        match input {
            Input::Line(kind) => self.heard(kind, now),
            Input::Exited => self.actions.push_back(Action::GiveUp(End::Lost)),
            Input::Timer => self.timer(now),
            Input::Post(message) => {
                self.post(message);
            }
            Input::Request(message) => self.request(message, now),
            Input::Ask(message) => {
                let before = self.acks.posted;
                self.request(message, now);
                let answer = self.acks.posted;
                if answer == before {
                    self.actions.push_back(Action::Asked(Asked::NotPosted));
                } else {
                    self.asked = Some((answer, now + ACK_TIMEOUT));
                }
            }
            Input::Stop(message) => {
                self.stop_asked.get_or_insert(now);
                self.post(message);
            }
            Input::Unwritable => {
                self.unwritable = true;
                self.acks.due_now(now);
                self.actions.retain(|a| !matches!(a, Action::Write(_)));
            }
            Input::Pinged => self.acks.ping_posted(),
            Input::Looked(seen) => {
                let looking = self.looking.take();
                if looking.is_some() && seen.at_work(&mut self.cpu_ticks) {
                    self.last_at_work = Some(now);
                    self.acks.put_off(now + STOP_SLACK);
                    // A stop asked for and waited on is waited on as long.
                    if let (Some((_, until)), Some(stop)) =
                        (self.asked.as_mut(), self.acks.stop_deadline())
                    {
                        *until = (*until).max(stop);
                    }
                }
                match looking {
                    Some(Looking::Heartbeat) => {
                        if let Some(end) = self.look(now, seen) {
                            self.actions.push_back(Action::GiveUp(end));
                        }
                    }
                    Some(Looking::Deadline) => {
                        self.looked_at_deadline = true;
                        self.timer(now);
                        self.looked_at_deadline = false;
                    }
                    None => {}
                }
            }
            Input::Unread(lines) => {
                self.unread_before_due = Some(lines);
                self.timer(now);
            }
        }
    }

    pub fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    /// When to hand the machine an [`Input::Timer`] if nothing else happens first.
    pub fn poll_timeout(&self) -> Instant {
        [
            Some(self.next_look),
            self.acks.deadline(),
            self.asked.map(|(_, until)| until),
            self.stop_asked.map(|at| self.stop_overdue_at(at)),
        ]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(self.next_look)
    }

    pub fn cgroup(&self) -> &CommandCgroup {
        &self.cgroup
    }

    /// What the driver does when the conversation ends with `end` at `now`.
    pub fn ending(&self, end: End, now: Instant) -> Ending {
        if self.transport == Transport::Socket {
            return Ending::LetGo;
        }
        let cleanup = end.why().map(|why| {
            let (grace, patience) = match end {
                End::Aborted => (Duration::ZERO, ABORT_PATIENCE),
                End::StopUnanswered => (self.grace, KILL_PATIENCE),
                _ => cleanup_timing(self.stop_asked, self.grace, now),
            };
            Cleanup {
                why,
                grace,
                patience,
            }
        });
        Ending::Launched {
            kill: !matches!(end, End::Closed | End::LeftRunning),
            cleanup,
        }
    }

    /// A line came: it answers every ping before it, and says what became of the command.
    fn heard(&mut self, kind: Option<&EventKind>, now: Instant) {
        if let Some(unread) = self.unread_before_due.as_mut() {
            *unread = unread.saturating_sub(1);
        }
        self.watch.heard();
        self.last_heard = now;
        match kind {
            Some(
                EventKind::Pong | EventKind::ControlAck { .. } | EventKind::ControlError { .. },
            ) => {
                self.acks.pong();
                if self
                    .asked
                    .is_some_and(|(answer, _)| answer == self.acks.answers)
                {
                    self.asked = None;
                    self.actions.push_back(Action::Asked(Asked::Answered));
                }
            }
            Some(EventKind::Spawned { pgid, .. }) => {
                self.actions.push_back(Action::FindLeader { pgid: *pgid })
            }
            Some(EventKind::Exit { .. }) => self.actions.push_back(Action::ForgetLeader),
            Some(EventKind::Containment { path, .. }) => {
                self.cgroup = CommandCgroup::Named(path.clone());
            }
            _ => {}
        }
    }

    /// Writes `message` if it can go; whether it went out.
    fn post(&mut self, message: &Request) -> bool {
        if self.unwritable || !self.transport.accepts(message) {
            return false;
        }
        self.actions.push_back(Action::Write(message.clone()));
        if self.transport.answers(message) {
            self.acks.ping_posted();
        }
        true
    }

    /// Posts `message` and, for a group signal or a stop, makes sure of an answer that
    /// proves the broker read it (on a pipe a ping after it, whose pong is that answer).
    fn request(&mut self, message: &Request, now: Instant) {
        let posted =
            self.post(message) && (self.transport.answers(message) || self.post(&Request::Ping));
        if let Some(fallback) = Fallback::for_request(message) {
            self.acks.request_posted(fallback, posted, now);
        }
    }

    /// Does what is due at `now`: gives up on a stop overdue, falls back for a request not
    /// acknowledged, looks at the broker and pings it. A deadline is acted on only once the
    /// lines the broker wrote before it was found due have been read.
    fn timer(&mut self, now: Instant) {
        if self.looking.is_some() || self.reading_before_due(now) {
            return;
        }
        let before = self.actions.len();
        self.due_at(now);
        // A look at the broker decides first whether anything is due.
        if self.looking.is_some() {
            return;
        }
        // A fallback says what became of the request asked, if that was it.
        let fell_back = self.actions.iter().skip(before).any(|a| {
            matches!(
                a,
                Action::SignalItself(_) | Action::NotSignalled(_) | Action::GiveUp(_)
            )
        });
        if fell_back {
            self.asked = None;
            self.unread_before_due = None;
        } else if self.asked.is_some_and(|(_, until)| now >= until) {
            self.asked = None;
            self.unread_before_due = None;
            self.actions.push_back(Action::Asked(Asked::Unanswered));
        }
    }

    /// Whether a stop or an acknowledgement is due at `now` while lines the broker wrote
    /// before `now` are still unread (or not yet counted). A front end kept from running (a
    /// loaded machine: two cores, a dozen processes) wakes past the deadline with the
    /// answer waiting in the pipe, often behind the broker's other lines (the signals of
    /// the stop, the exit); it would take a broker that answered in time for one that did
    /// not, kill it, and report a failed stop. Those lines are read first, and only those:
    /// what the broker writes after `now` does not put the deadline off again.
    fn reading_before_due(&mut self, now: Instant) -> bool {
        let due = self
            .stop_asked
            .is_some_and(|at| now >= self.stop_overdue_at(at))
            || self.acks.deadline().is_some_and(|at| now >= at)
            || self.asked.is_some_and(|(_, until)| now >= until);
        if !due {
            self.unread_before_due = None;
            return false;
        }
        match self.unread_before_due {
            None => {
                if !self.actions.contains(&Action::CountUnread) {
                    self.actions.push_back(Action::CountUnread);
                }
                true
            }
            Some(unread) => unread > 0,
        }
    }

    /// What is due at `now`, everything the broker wrote before it read. Before a broker
    /// is given up on (a stop overdue or not acknowledged), it is looked at: one the kernel
    /// shows at work gets [`STOP_SLACK`] more, up to [`BUSY_STOP_PATIENCE`].
    fn due_at(&mut self, now: Instant) {
        let stop_overdue = self
            .stop_asked
            .is_some_and(|at| now >= self.stop_overdue_at(at));
        if (stop_overdue || self.acks.due(now) == Some(Fallback::Stop)) && !self.looked_at_deadline
        {
            self.looking = Some(Looking::Deadline);
            self.actions.push_back(Action::Look);
            return;
        }
        if stop_overdue {
            self.actions.push_back(Action::GiveUp(End::StopOverdue));
            return;
        }
        let fallback = match self.acks.take_due(now) {
            // Another front end's broker, perhaps only slow: a signal that would do harm
            // the second time is left to it.
            Some(Fallback::Signal(signal))
                if self.transport == Transport::Socket && !repeats_harmlessly(signal) =>
            {
                Some(Action::NotSignalled(format!(
                    "the broker did not answer within {ACK_TIMEOUT:?}; SIG{signal} was not sent by tether, since the broker may still deliver it and a second one may do harm (only TERM, KILL, STOP and CONT are sent in its place)"
                )))
            }
            Some(Fallback::Signal(signal)) => Some(Action::SignalItself(signal)),
            Some(Fallback::Stop) => Some(Action::GiveUp(End::StopUnanswered)),
            None => None,
        };
        if let Some(action) = fallback {
            self.actions.push_back(action);
            return;
        }
        if now >= self.next_look {
            self.next_look = now + self.pace.look;
            if self.pace.give_up_when_silent {
                // Whether the broker is stopped, or at work, decides how soon silence ends it.
                self.looking = Some(Looking::Heartbeat);
                self.actions.push_back(Action::Look);
            } else if let Some(end) = self.look(now, Seen::default()) {
                self.actions.push_back(Action::GiveUp(end));
            }
        }
    }

    /// A look at the broker: a ping, at the quiet pace while all is well, at every look
    /// while it is stopped, a ping is unanswered or a stop waits.
    fn look(&mut self, now: Instant, seen: Seen) -> Option<End> {
        let silent_ends = self.pace.give_up_when_silent;
        let seen = if silent_ends { seen } else { Seen::default() };
        let watching = seen.stopped || !self.watch.answered() || self.stop_asked.is_some();
        if !watching && now < self.last_ping + self.pace.quiet_ping {
            return None;
        }
        self.last_ping = now;
        if self.watch.due(seen) == Heartbeat::GiveUp && silent_ends {
            return Some(End::Unresponsive);
        }
        if !self.unwritable {
            self.actions.push_back(Action::Ping);
        }
        None
    }

    /// When a stop asked for at `asked` is overdue and the broker is killed: [`STOP_SLACK`]
    /// past the grace period, or, while the broker keeps reporting (signals to a tree that
    /// keeps forking) or the kernel shows it at work (a loaded machine), `STOP_SLACK` after
    /// that, up to [`BUSY_STOP_PATIENCE`] past the grace period. A stopped broker, or one
    /// idle since the look before (wedged), is killed on time; one whose CPU time grew since
    /// that look (it worked on the stop until then) gets `STOP_SLACK` once more.
    fn stop_overdue_at(&self, asked: Instant) -> Instant {
        let on_time = asked + self.grace + STOP_SLACK;
        let last = self
            .last_at_work
            .map_or(self.last_heard, |at| at.max(self.last_heard));
        let at_work = (last + STOP_SLACK).min(asked + self.grace + BUSY_STOP_PATIENCE);
        on_time.max(at_work)
    }
}
