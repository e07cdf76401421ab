//! Whether a broker still answers. A front end pings it at its [`Pace`](super::intervals::Pace);
//! any line from the broker answers every ping before it.
//!
//! Pings are counted, not timed: time the front end itself spends blocked (copying output to
//! a slow terminal, stopped by Ctrl-Z) adds at most one unanswered ping, so it can never make
//! a working broker look dead.

/// Unanswered pings, a look apart (a second for exec), after which a broker is given up on (about 5 s).
pub const UNANSWERED_LIMIT: u32 = 5;
/// ... or after which a broker that the kernel shows stopped is given up on.
pub const UNANSWERED_IF_STOPPED: u32 = 2;

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct PingWatch {
    unanswered: u32,
}

/// What to do when a heartbeat is due.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Heartbeat {
    Ping,
    /// The broker has not answered for too long: fall back.
    GiveUp,
}

impl PingWatch {
    /// A line came from the broker.
    pub fn heard(&mut self) {
        self.unanswered = 0;
    }

    /// Whether every ping sent was answered.
    pub fn answered(&self) -> bool {
        self.unanswered == 0
    }

    /// A heartbeat is due; `stopped` says whether the broker is stopped (state `T`).
    pub fn due(&mut self, stopped: bool) -> Heartbeat {
        let limit = if stopped {
            UNANSWERED_IF_STOPPED
        } else {
            UNANSWERED_LIMIT
        };
        if self.unanswered >= limit {
            return Heartbeat::GiveUp;
        }
        self.unanswered += 1;
        Heartbeat::Ping
    }
}

/// Whether `pid` is stopped by a signal (state `T` in /proc).
pub fn is_stopped(pid: i32) -> bool {
    tether_os::procfs::read_stat(pid).is_some_and(|s| s.state == b'T')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_silent_broker_is_given_up_after_five_pings() {
        let mut watch = PingWatch::default();
        for _ in 0..UNANSWERED_LIMIT {
            assert_eq!(watch.due(false), Heartbeat::Ping);
        }
        assert_eq!(watch.due(false), Heartbeat::GiveUp);
    }

    #[test]
    fn any_line_answers_every_ping() {
        let mut watch = PingWatch::default();
        for _ in 0..10 {
            for _ in 0..UNANSWERED_LIMIT {
                assert_eq!(watch.due(false), Heartbeat::Ping);
            }
            watch.heard();
        }
    }

    #[test]
    fn a_stopped_broker_is_given_up_sooner() {
        let mut watch = PingWatch::default();
        assert_eq!(watch.due(true), Heartbeat::Ping);
        assert_eq!(watch.due(true), Heartbeat::Ping);
        assert_eq!(watch.due(true), Heartbeat::GiveUp);
        // One ping unanswered is not enough, even if the broker is stopped at that instant.
        let mut watch = PingWatch::default();
        assert_eq!(watch.due(false), Heartbeat::Ping);
        assert_eq!(watch.due(true), Heartbeat::Ping);
    }
}
