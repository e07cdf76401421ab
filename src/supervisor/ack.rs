//! Knowing whether a broker read a request in time. Every request that has a fallback is
//! followed by a ping; the broker answers pings in order, so the pong to that ping (counted
//! from the first) proves the request was read. A pong to an earlier ping proves nothing.

use tokio::time::Instant;

use super::intervals::ACK_TIMEOUT;
use crate::protocol::{ProcessSignal, Scope, ToBroker};

/// What the front end does itself if the broker does not acknowledge a request in time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fallback {
    /// Send the signal to the group and the broker's descendants.
    Signal(ProcessSignal),
    /// Kill the broker, then stop what it left.
    Stop,
}

impl Fallback {
    pub fn for_request(message: &ToBroker) -> Option<Fallback> {
        match message {
            ToBroker::Stop { .. } => Some(Fallback::Stop),
            ToBroker::Signal {
                signal,
                scope: Scope::Group,
                ..
            } => Some(Fallback::Signal(*signal)),
            _ => None,
        }
    }
}

struct Pending {
    deadline: Instant,
    ping: u64,
    fallback: Fallback,
}

#[derive(Default)]
pub struct Acks {
    pings: u64,
    pongs: u64,
    pending: Option<Pending>,
}

impl Acks {
    /// A ping went out (a heartbeat, or the one after a request).
    pub fn ping_posted(&mut self) {
        self.pings += 1;
    }

    /// A request went out, followed by its ping if `posted`; if not (the broker's stdin is
    /// gone), its fallback is due at once. A stop waiting for its answer outranks a signal.
    pub fn request_posted(&mut self, fallback: Fallback, posted: bool, now: Instant) {
        if posted {
            self.ping_posted();
        }
        if self
            .pending
            .as_ref()
            .is_some_and(|p| p.fallback == Fallback::Stop)
        {
            return;
        }
        self.pending = Some(Pending {
            deadline: if posted { now + ACK_TIMEOUT } else { now },
            ping: self.pings,
            fallback,
        });
    }

    pub fn pong(&mut self) {
        self.pongs += 1;
        if self.pending.as_ref().is_some_and(|p| self.pongs >= p.ping) {
            self.pending = None;
        }
    }

    pub fn deadline(&self) -> Option<Instant> {
        self.pending.as_ref().map(|p| p.deadline)
    }

    /// The fallback whose deadline has passed at `now`, if any; it is taken.
    pub fn take_due(&mut self, now: Instant) -> Option<Fallback> {
        if self.pending.as_ref().is_some_and(|p| now >= p.deadline) {
            self.pending.take().map(|p| p.fallback)
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn signal(name: &str, scope: Scope) -> ToBroker {
        ToBroker::Signal {
            signal: name.parse().expect("a signal"),
            scope,
            pid: None,
        }
    }

    #[test]
    fn group_signals_and_stops_have_fallbacks() {
        let stop = ToBroker::Stop { origin: None };
        assert_eq!(Fallback::for_request(&stop), Some(Fallback::Stop));
        assert_eq!(
            Fallback::for_request(&signal("KILL", Scope::Group)),
            Some(Fallback::Signal(ProcessSignal::KILL))
        );
        assert_eq!(Fallback::for_request(&signal("KILL", Scope::Pid)), None);
        assert_eq!(Fallback::for_request(&ToBroker::Ping), None);
    }

    #[test]
    fn only_the_pong_to_the_requests_ping_acknowledges_it() {
        let t0 = Instant::now();
        let mut acks = Acks::default();
        acks.ping_posted(); // a heartbeat the broker answers before it stops
        acks.request_posted(Fallback::Stop, true, t0);
        acks.pong();
        assert_eq!(acks.deadline(), Some(t0 + ACK_TIMEOUT));
        assert_eq!(acks.take_due(t0 + ACK_TIMEOUT / 2), None);
        assert_eq!(acks.take_due(t0 + ACK_TIMEOUT), Some(Fallback::Stop));
        assert_eq!(acks.deadline(), None);

        // The broker goes on: the pong to the stop's ping comes late, then the signal's.
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
        acks.request_posted(Fallback::Stop, true, t0);
        acks.request_posted(Fallback::Signal(ProcessSignal::TERM), true, t0);
        assert_eq!(acks.take_due(t0 + ACK_TIMEOUT), Some(Fallback::Stop));
        // A signal then a stop: the stop replaces it.
        acks.request_posted(Fallback::Signal(ProcessSignal::TERM), true, t0);
        acks.request_posted(Fallback::Stop, true, t0);
        assert_eq!(acks.take_due(t0 + ACK_TIMEOUT), Some(Fallback::Stop));
    }
}
