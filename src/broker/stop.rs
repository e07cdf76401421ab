//! The stop sequence: SIGTERM and SIGCONT to the whole tree, a grace period during which new
//! processes are signalled too, then SIGKILL until nothing is left.
//!
//! The broker runs it over its own descendants; a front end whose broker died or stopped
//! answering runs the very same sequence over what the broker left (another [`Walk`]).

use std::collections::HashSet;
use std::time::Duration;

use nix::sys::signal::Signal;
use tokio::time::Instant;

use super::signaller::{ProcessKey, Walk, signal_tree};
use crate::protocol::Origin;

/// How soon the tree is walked again after a signal; the interval doubles from walk to walk
/// (newcomers are rare after the first moments), up to `SWEEP_MAX`.
pub const SWEEP_INTERVAL: Duration = Duration::from_millis(25);
const SWEEP_MAX: Duration = Duration::from_millis(400);

pub struct StopSequence {
    pub origin: Origin,
    pub started: Instant,
    pub kill_at: Instant,
    pub killed: bool,
    pub next_sweep: Instant,
    interval: Duration,
    /// Processes already sent the current signal (TERM, then KILL).
    reached: HashSet<ProcessKey>,
}

/// What one step of the sequence did, for the journal.
pub struct Delivery {
    pub signal: Signal,
    pub targets: Vec<i32>,
}

impl StopSequence {
    /// Starts the sequence: TERM (and CONT, so stopped processes can act on it) to the group
    /// and every descendant.
    pub fn start(
        origin: Origin,
        grace: Duration,
        walk: impl Into<Walk>,
        group: Option<i32>,
        now: Instant,
    ) -> (StopSequence, Delivery) {
        let mut reached = HashSet::new();
        let targets = signal_tree(walk, group, Signal::SIGTERM, true, &mut reached);
        let sequence = StopSequence {
            origin,
            started: now,
            kill_at: now + grace,
            killed: false,
            next_sweep: now + SWEEP_INTERVAL,
            interval: SWEEP_INTERVAL,
            reached,
        };
        (
            sequence,
            Delivery {
                signal: Signal::SIGTERM,
                targets,
            },
        )
    }

    /// Moves the first sweep `by` later. When many brokers stop at the same moment (their
    /// front end died), each delays by a different amount so that their walks of /proc, which
    /// all read the same thousands of entries, do not all run together.
    pub fn delay_first_sweep(&mut self, by: Duration) {
        self.next_sweep += by;
    }

    /// Signals processes that appeared since the last walk (TERM and CONT during grace); after
    /// grace, repeats KILL to everything still there. Reports only processes not reached before.
    pub fn sweep(
        &mut self,
        walk: impl Into<Walk>,
        group: Option<i32>,
        now: Instant,
    ) -> Option<Delivery> {
        self.interval = (self.interval * 2).min(SWEEP_MAX);
        self.next_sweep = now + self.interval;
        if !self.killed {
            let targets = signal_tree(walk, group, Signal::SIGTERM, true, &mut self.reached);
            return (!targets.is_empty()).then_some(Delivery {
                signal: Signal::SIGTERM,
                targets,
            });
        }
        let mut round = HashSet::new();
        let targets = signal_tree(walk, group, Signal::SIGKILL, false, &mut round);
        let fresh: Vec<i32> = targets
            .into_iter()
            .filter(|pid| !self.reached.iter().any(|(p, _)| p == pid))
            .collect();
        self.reached.extend(round);
        (!fresh.is_empty()).then_some(Delivery {
            signal: Signal::SIGKILL,
            targets: fresh,
        })
    }

    /// Grace is over: SIGKILL the group and every descendant.
    pub fn escalate(
        &mut self,
        walk: impl Into<Walk>,
        group: Option<i32>,
        now: Instant,
    ) -> Delivery {
        self.killed = true;
        self.reached.clear();
        self.interval = SWEEP_INTERVAL;
        self.next_sweep = now + SWEEP_INTERVAL;
        let targets = signal_tree(walk, group, Signal::SIGKILL, false, &mut self.reached);
        Delivery {
            signal: Signal::SIGKILL,
            targets,
        }
    }
}
