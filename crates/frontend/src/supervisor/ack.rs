//! Knowing whether a broker read a request in time. On a broker's stdin every request that
//! has a fallback is followed by a ping; over its control socket every request is answered
//! itself (`control_ack`, `control_error`, `pong`). Either way the broker answers in order,
//! so the answer to that message (counted from the first) proves the request was read. An
//! answer to an earlier message proves nothing.

use std::time::Instant;

use super::intervals::{ACK_TIMEOUT, BUSY_STOP_PATIENCE};
use tether_protocol::protocol::{ProcessSignal, Request, Scope};

/// What the front end does itself if the broker does not acknowledge a request in time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fallback {
    /// Send the signal to the group and the broker's descendants.
    Signal(ProcessSignal),
    /// Kill the broker, then stop what it left.
    Stop,
}

/// Whether a signal may reach the command twice without harm: a broker that did not answer
/// in time may be slow rather than wedged, and deliver it after the front end has. TERM,
/// KILL, STOP and CONT say the same the second time; a second INT, HUP or USR1 may mean
/// something else to the program (a second Ctrl-C often forces a quit).
pub fn repeats_harmlessly(signal: ProcessSignal) -> bool {
    use ProcessSignal as S;
    matches!(signal, S::TERM | S::KILL | S::STOP | S::CONT)
}

impl Fallback {
    pub fn for_request(message: &Request) -> Option<Fallback> {
        match message {
            Request::Stop { .. } => Some(Fallback::Stop),
            Request::Signal {
                signal,
                scope: Scope::Group,
                ..
            } => Some(Fallback::Signal(*signal)),
            _ => None,
        }
    }
}

struct Pending {
    /// When the request went out, if it did.
    since: Instant,
    posted: bool,
    deadline: Instant,
    ping: u64,
    fallback: Fallback,
}

#[derive(Default)]
pub struct Acks {
    /// How many messages the broker answers went out: the number of the answer that
    /// acknowledges the last of them.
    pub posted: u64,
    /// How many answers came.
    pub answers: u64,
    pending: Option<Pending>,
}

impl Acks {
    /// A message the broker answers went out (a ping, or over a control socket any
    /// request).
    pub fn ping_posted(&mut self) {
        self.posted += 1;
    }

    /// A request went out with the message whose answer acknowledges it, already counted
    /// ([`Self::ping_posted`]), if `posted`; if not (the broker's stdin or socket is gone),
    /// its fallback is due at once. A stop waiting for its answer outranks a signal.
    pub fn request_posted(&mut self, fallback: Fallback, posted: bool, now: Instant) {
        if self
            .pending
            .as_ref()
            .is_some_and(|p| p.fallback == Fallback::Stop)
        {
            return;
        }
        self.pending = Some(Pending {
            since: now,
            posted,
            deadline: if posted { now + ACK_TIMEOUT } else { now },
            ping: self.posted,
            fallback,
        });
    }

    /// An answer came (a pong, or over a control socket an acknowledgement or a refusal).
    pub fn pong(&mut self) {
        self.answers += 1;
        if self
            .pending
            .as_ref()
            .is_some_and(|p| self.answers >= p.ping)
        {
            self.pending = None;
        }
    }

    /// The broker's end is gone: a request waiting for its answer falls back at `now`.
    pub fn due_now(&mut self, now: Instant) {
        if let Some(pending) = self.pending.as_mut() {
            pending.deadline = pending.deadline.min(now);
            pending.posted = false;
        }
    }

    /// A broker the kernel shows at work (slow, not wedged) gets until `until` to
    /// acknowledge a stop, up to [`BUSY_STOP_PATIENCE`] past [`ACK_TIMEOUT`]: its fallback
    /// kills the broker. A signal's fallback does no harm and keeps its deadline, and a stop
    /// that could not be written cannot be acknowledged at all.
    pub fn put_off(&mut self, until: Instant) {
        if let Some(p) = self.pending.as_mut()
            && p.fallback == Fallback::Stop
            && p.posted
        {
            let cap = p.since + ACK_TIMEOUT + BUSY_STOP_PATIENCE;
            p.deadline = p.deadline.max(until.min(cap));
        }
    }

    /// When a stop waiting for its acknowledgement falls back.
    pub fn stop_deadline(&self) -> Option<Instant> {
        (self.pending.as_ref())
            .filter(|p| p.fallback == Fallback::Stop)
            .map(|p| p.deadline)
    }

    /// The fallback due at `now`, if any; it is not taken.
    pub fn due(&self, now: Instant) -> Option<Fallback> {
        self.pending
            .as_ref()
            .filter(|p| now >= p.deadline)
            .map(|p| p.fallback)
    }

    pub fn deadline(&self) -> Option<Instant> {
        self.pending.as_ref().map(|p| p.deadline)
    }

    /// The fallback whose deadline has passed at `now`, if any; it is taken.
    pub fn take_due(&mut self, now: Instant) -> Option<Fallback> {
        let due = self.due(now);
        if due.is_some() {
            self.pending = None;
        }
        due
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn signal(name: &str, scope: Scope) -> Request {
        Request::Signal {
            signal: name.parse().expect("a signal"),
            scope,
            pid: None,
            origin: None,
        }
    }

    #[test]
    fn group_signals_and_stops_have_fallbacks() {
        let stop = Request::Stop { origin: None };
        assert_eq!(Fallback::for_request(&stop), Some(Fallback::Stop));
        assert_eq!(
            Fallback::for_request(&signal("KILL", Scope::Group)),
            Some(Fallback::Signal(ProcessSignal::KILL))
        );
        assert_eq!(Fallback::for_request(&signal("KILL", Scope::Pid)), None);
        assert_eq!(Fallback::for_request(&Request::Ping), None);
    }

    #[test]
    fn only_the_pong_to_the_requests_ping_acknowledges_it() {
        let t0 = Instant::now();
        let mut acks = Acks::default();
        acks.ping_posted(); // a heartbeat the broker answers before it stops
        acks.ping_posted(); // the stop's own
        acks.request_posted(Fallback::Stop, true, t0);
        acks.pong();
        assert_eq!(acks.deadline(), Some(t0 + ACK_TIMEOUT));
        assert_eq!(acks.take_due(t0 + ACK_TIMEOUT / 2), None);
        assert_eq!(acks.take_due(t0 + ACK_TIMEOUT), Some(Fallback::Stop));
        assert_eq!(acks.deadline(), None);

        // The broker goes on: the pong to the stop's ping comes late, then the signal's.
        acks.ping_posted();
        acks.request_posted(Fallback::Signal(ProcessSignal::TERM), true, t0);
        acks.pong();
        assert!(acks.deadline().is_some());
        acks.pong();
        assert_eq!(acks.deadline(), None);
        assert_eq!(acks.take_due(t0 + ACK_TIMEOUT * 2), None);
    }

    #[test]
    fn a_request_that_cannot_be_written_falls_back_at_once() {
        let t0 = Instant::now();
        let mut acks = Acks::default();
        acks.request_posted(Fallback::Signal(ProcessSignal::TERM), false, t0);
        assert_eq!(
            acks.take_due(t0),
            Some(Fallback::Signal(ProcessSignal::TERM))
        );
    }

    #[test]
    fn a_pending_stop_outranks_a_later_signal() {
        let t0 = Instant::now();
        let mut acks = Acks::default();
        acks.ping_posted();
        acks.request_posted(Fallback::Stop, true, t0);
        acks.ping_posted();
        acks.request_posted(Fallback::Signal(ProcessSignal::TERM), true, t0);
        assert_eq!(acks.take_due(t0 + ACK_TIMEOUT), Some(Fallback::Stop));
        // A signal then a stop: the stop replaces it.
        acks.ping_posted();
        acks.request_posted(Fallback::Signal(ProcessSignal::TERM), true, t0);
        acks.ping_posted();
        acks.request_posted(Fallback::Stop, true, t0);
        assert_eq!(acks.take_due(t0 + ACK_TIMEOUT), Some(Fallback::Stop));
    }
}
