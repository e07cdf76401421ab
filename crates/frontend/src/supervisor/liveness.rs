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
/// ... or after which a broker that the kernel shows at work all the while (its CPU time
/// growing, or in an uninterruptible wait) is given up on all the same: a minute, for a
/// wait that never ends (a journal on a disk that never answers).
pub const UNANSWERED_IF_WORKING: u32 = 60;

/// What the kernel shows of a broker at a look.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Seen {
    /// Stopped by a signal (state `T`).
    pub stopped: bool,
    /// In an uninterruptible wait (state `D`): on a loaded machine brokers were seen there
    /// for seconds at a time, their single thread answering nothing meanwhile. Most were
    /// pipe writes held up by exec's splice into a socket its reader did not empty (no
    /// longer made); a slow disk's waits remain.
    pub disk_wait: bool,
    /// Running or waiting for a core (state `R`): on two loaded cores a broker was seen
    /// waiting there for most of a second, its CPU time still.
    pub runnable: bool,
    /// The CPU time it used so far, in clock ticks.
    pub cpu_ticks: u64,
}

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct PingWatch {
    unanswered: u32,
    /// Looks since the last line at which the broker was seen at work.
    working: u32,
    /// Its CPU time at the last look.
    cpu_ticks: Option<u64>,
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
        self.working = 0;
    }

    /// Whether every ping sent was answered.
    pub fn answered(&self) -> bool {
        self.unanswered == 0 && self.working == 0
    }

    /// A heartbeat is due; `seen` is what the kernel shows of the broker. A broker at work
    /// ([`Seen::at_work`]) is slow, not wedged: its silence counts only against
    /// [`UNANSWERED_IF_WORKING`].
    pub fn due(&mut self, seen: Seen) -> Heartbeat {
        if seen.at_work(&mut self.cpu_ticks) {
            if self.working >= UNANSWERED_IF_WORKING {
                return Heartbeat::GiveUp;
            }
            self.working += 1;
            return Heartbeat::Ping;
        }
        let limit = if seen.stopped {
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

impl Seen {
    /// Whether the broker is at work, slow rather than wedged: not stopped, and running or
    /// waiting for a core, in an uninterruptible wait, or with more CPU time than at the look
    /// before (`cpu_before`, which becomes this look's).
    pub fn at_work(&self, cpu_before: &mut Option<u64>) -> bool {
        let ran = cpu_before.is_some_and(|before| self.cpu_ticks > before);
        *cpu_before = Some(self.cpu_ticks);
        !self.stopped && (self.runnable || self.disk_wait || ran)
    }
}

/// What the kernel shows of `pid` now; nothing (a sleeping broker that has not run) when
/// /proc does not say.
pub fn look(pid: i32) -> Seen {
    tether_os::procfs::read_stat(pid).map_or_else(Seen::default, |s| Seen {
        stopped: s.state == b'T' || s.state == b't',
        disk_wait: s.state == b'D',
        runnable: s.state == b'R',
        cpu_ticks: s.cpu_ticks,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const IDLE: Seen = Seen {
        stopped: false,
        disk_wait: false,
        runnable: false,
        cpu_ticks: 7,
    };
    const STOPPED: Seen = Seen {
        stopped: true,
        ..IDLE
    };

    #[test]
    fn a_silent_broker_is_given_up_after_five_pings() {
        let mut watch = PingWatch::default();
        for _ in 0..UNANSWERED_LIMIT {
            assert_eq!(watch.due(IDLE), Heartbeat::Ping);
        }
        assert_eq!(watch.due(IDLE), Heartbeat::GiveUp);
    }

    #[test]
    fn any_line_answers_every_ping() {
        let mut watch = PingWatch::default();
        for _ in 0..10 {
            for _ in 0..UNANSWERED_LIMIT {
                assert_eq!(watch.due(IDLE), Heartbeat::Ping);
            }
            watch.heard();
        }
    }

    #[test]
    fn a_stopped_broker_is_given_up_sooner() {
        let mut watch = PingWatch::default();
        assert_eq!(watch.due(STOPPED), Heartbeat::Ping);
        assert_eq!(watch.due(STOPPED), Heartbeat::Ping);
        assert_eq!(watch.due(STOPPED), Heartbeat::GiveUp);
        // One ping unanswered is not enough, even if the broker is stopped at that instant.
        let mut watch = PingWatch::default();
        assert_eq!(watch.due(IDLE), Heartbeat::Ping);
        assert_eq!(watch.due(STOPPED), Heartbeat::Ping);
    }

    /// A broker in an uninterruptible wait, or running, is slow: a minute, not five
    /// seconds. Idle looks in between still count.
    #[test]
    fn a_broker_at_work_is_given_up_only_after_a_minute() {
        let mut watch = PingWatch::default();
        let disk = Seen {
            disk_wait: true,
            ..IDLE
        };
        for _ in 0..UNANSWERED_IF_WORKING {
            assert_eq!(watch.due(disk), Heartbeat::Ping);
        }
        assert_eq!(watch.due(disk), Heartbeat::GiveUp);
        // So is one waiting for a core, its CPU time still; stopped, it is not at work.
        let mut watch = PingWatch::default();
        let runnable = Seen {
            runnable: true,
            ..IDLE
        };
        for _ in 0..UNANSWERED_IF_WORKING {
            assert_eq!(watch.due(runnable), Heartbeat::Ping);
        }
        assert_eq!(watch.due(runnable), Heartbeat::GiveUp);
        assert!(
            !Seen {
                stopped: true,
                ..runnable
            }
            .at_work(&mut Some(0))
        );
        // Its CPU time growing at each look is work too; a look where it did not run is not.
        let mut watch = PingWatch::default();
        assert_eq!(watch.due(IDLE), Heartbeat::Ping);
        for ticks in 8..8 + u64::from(UNANSWERED_IF_WORKING) {
            let running = Seen {
                cpu_ticks: ticks,
                ..IDLE
            };
            assert_eq!(watch.due(running), Heartbeat::Ping);
        }
        let last = 8 + u64::from(UNANSWERED_IF_WORKING) - 1;
        for _ in 1..UNANSWERED_LIMIT {
            let still = Seen {
                cpu_ticks: last,
                ..IDLE
            };
            assert_eq!(watch.due(still), Heartbeat::Ping);
        }
        let still = Seen {
            cpu_ticks: last,
            ..IDLE
        };
        assert_eq!(watch.due(still), Heartbeat::GiveUp);
        // A line answers for all of it.
        let mut watch = PingWatch::default();
        for _ in 0..UNANSWERED_IF_WORKING {
            assert_eq!(watch.due(disk), Heartbeat::Ping);
        }
        watch.heard();
        assert_eq!(watch.due(disk), Heartbeat::Ping);
    }
}
