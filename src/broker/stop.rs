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
use crate::protocol::{Origin, ProcessSignal};

/// How soon the tree is walked again after a signal; the interval doubles from walk to walk
/// (newcomers are rare after the first moments), up to `SWEEP_MAX`.
pub const SWEEP_INTERVAL: Duration = Duration::from_millis(25);
const SWEEP_MAX: Duration = Duration::from_millis(400);

pub struct StopSequence {
    pub origin: Origin,
    pub started: Instant,
    kill_at: Instant,
    killed: bool,
    next_sweep: Instant,
    interval: Duration,
    /// Processes already sent the current signal (TERM, then KILL).
    reached: HashSet<ProcessKey>,
}

/// What delivers a signal to a tree: the kernel in use ([`Kernel`]), a fake in the tests, so
/// the sequence's decisions (what is sent when, to whom, what is reported) are tested without
/// real processes or time.
pub trait TreeSignaller {
    /// As [`signal_tree`]: signals the group and every live process of the walk not in
    /// `already`, adds those it reached to `already`, returns their pids.
    fn signal_tree(
        &mut self,
        walk: &Walk,
        group: Option<i32>,
        signal: ProcessSignal,
        also_cont: bool,
        already: &mut HashSet<ProcessKey>,
    ) -> Vec<i32>;

    /// SIGKILL to the whole containment at once, where it can (a cgroup's `cgroup.kill`,
    /// atomic even against a fork storm). Returns the processes it held, or `None` when the
    /// walk has no such kill and KILL goes process by process.
    fn kill_all(&mut self, walk: &Walk) -> Option<Vec<ProcessKey>>;
}

/// Signals through the kernel: pidfds and `killpg`.
pub struct Kernel;

impl TreeSignaller for Kernel {
    fn signal_tree(
        &mut self,
        walk: &Walk,
        group: Option<i32>,
        signal: ProcessSignal,
        also_cont: bool,
        already: &mut HashSet<ProcessKey>,
    ) -> Vec<i32> {
        signal_tree(walk, group, signal, also_cont, already)
    }

    fn kill_all(&mut self, walk: &Walk) -> Option<Vec<ProcessKey>> {
        walk.kill_cgroup()
    }
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
        StopSequence::start_with(&mut Kernel, origin, grace, &walk.into(), group, now)
    }

    pub fn start_with(
        signaller: &mut (impl TreeSignaller + ?Sized),
        origin: Origin,
        grace: Duration,
        walk: &Walk,
        group: Option<i32>,
        now: Instant,
    ) -> (StopSequence, Delivery) {
        let mut reached = HashSet::new();
        let targets =
            signaller.signal_tree(walk, group, Signal::SIGTERM.into(), true, &mut reached);
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

    /// When the sequence wants to act next: its next sweep, or the end of grace before it.
    pub fn next_wake(&self) -> Instant {
        if self.killed {
            self.next_sweep
        } else {
            self.next_sweep.min(self.kill_at)
        }
    }

    /// Whether grace is over at `now` and KILL not sent yet: the next step is the KILL.
    pub fn kill_due(&self, now: Instant) -> bool {
        !self.killed && now >= self.kill_at
    }

    /// What is due at `now`: KILL once grace is over (the second value says it was sent
    /// now), else a sweep. The one step every driver takes: the broker's and the front ends'.
    pub fn step(
        &mut self,
        walk: impl Into<Walk>,
        group: Option<i32>,
        now: Instant,
    ) -> (Option<Delivery>, bool) {
        self.step_with(&mut Kernel, &walk.into(), group, now)
    }

    pub fn step_with(
        &mut self,
        signaller: &mut (impl TreeSignaller + ?Sized),
        walk: &Walk,
        group: Option<i32>,
        now: Instant,
    ) -> (Option<Delivery>, bool) {
        if self.kill_due(now) {
            (Some(self.escalate_with(signaller, walk, group, now)), true)
        } else {
            (self.sweep_with(signaller, walk, group, now), false)
        }
    }

    /// Signals processes that appeared since the last walk (TERM and CONT during grace); after
    /// grace, repeats KILL to everything still there. Reports only processes not reached before.
    pub fn sweep(
        &mut self,
        walk: impl Into<Walk>,
        group: Option<i32>,
        now: Instant,
    ) -> Option<Delivery> {
        self.sweep_with(&mut Kernel, &walk.into(), group, now)
    }

    pub fn sweep_with(
        &mut self,
        signaller: &mut (impl TreeSignaller + ?Sized),
        walk: &Walk,
        group: Option<i32>,
        now: Instant,
    ) -> Option<Delivery> {
        self.interval = (self.interval * 2).min(SWEEP_MAX);
        self.next_sweep = now + self.interval;
        if !self.killed {
            let targets =
                signaller.signal_tree(walk, group, Signal::SIGTERM.into(), true, &mut self.reached);
            return (!targets.is_empty()).then_some(Delivery {
                signal: Signal::SIGTERM,
                targets,
            });
        }
        let mut round = HashSet::new();
        let targets = kill(signaller, walk, group, &mut round);
        let known: HashSet<i32> = self.reached.iter().map(|(pid, _)| *pid).collect();
        let fresh: Vec<i32> = targets
            .into_iter()
            .filter(|pid| !known.contains(pid))
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
        self.escalate_with(&mut Kernel, &walk.into(), group, now)
    }

    pub fn escalate_with(
        &mut self,
        signaller: &mut (impl TreeSignaller + ?Sized),
        walk: &Walk,
        group: Option<i32>,
        now: Instant,
    ) -> Delivery {
        self.killed = true;
        self.reached.clear();
        self.interval = SWEEP_INTERVAL;
        self.next_sweep = now + SWEEP_INTERVAL;
        let targets = kill(signaller, walk, group, &mut self.reached);
        Delivery {
            signal: Signal::SIGKILL,
            targets,
        }
    }
}

/// KILL to everything of the walk: the containment's own kill where it has one (then the
/// processes it held are those reached), else the group and each process through pidfds.
fn kill(
    signaller: &mut (impl TreeSignaller + ?Sized),
    walk: &Walk,
    group: Option<i32>,
    reached: &mut HashSet<ProcessKey>,
) -> Vec<i32> {
    match signaller.kill_all(walk) {
        Some(members) => {
            let mut pids: Vec<i32> = members.iter().map(|(pid, _)| *pid).collect();
            reached.extend(members);
            pids.sort_unstable();
            pids
        }
        None => signaller.signal_tree(walk, group, Signal::SIGKILL.into(), false, reached),
    }
}

/// When a stop driven from a front end is over: nothing alive and the containment empty in
/// two walks running (a process between fork and its first appearance in /proc is missed by
/// one walk), or `patience` after the KILL with what survived.
#[derive(Debug, Default)]
pub struct Settling {
    empty_walks: u32,
}

impl Settling {
    /// `Some(survivors)` once the stop is over, given this walk's `alive` count.
    pub fn settled(
        &mut self,
        alive: usize,
        populated: bool,
        killed_at: Option<Instant>,
        patience: Duration,
        now: Instant,
    ) -> Option<usize> {
        if alive == 0 && !populated {
            self.empty_walks += 1;
            if self.empty_walks >= 2 {
                return Some(0);
            }
        } else {
            self.empty_walks = 0;
        }
        killed_at
            .is_some_and(|at| now >= at + patience)
            .then_some(alive)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tree that is a list of (pid, start) the test edits: signalling reaches every listed
    /// process not yet in `already`, and the calls are kept.
    #[derive(Default)]
    struct FakeTree {
        alive: Vec<ProcessKey>,
        calls: Vec<(Signal, bool, Option<i32>)>,
        /// A cgroup: `kill_all` kills every process at once.
        cgroup: bool,
        cgroup_kills: usize,
    }

    impl TreeSignaller for FakeTree {
        fn signal_tree(
            &mut self,
            _walk: &Walk,
            group: Option<i32>,
            signal: ProcessSignal,
            also_cont: bool,
            already: &mut HashSet<ProcessKey>,
        ) -> Vec<i32> {
            let signal = signal
                .to_nix()
                .expect("the stop sequence sends TERM and KILL");
            self.calls.push((signal, also_cont, group));
            let fresh: Vec<ProcessKey> = self
                .alive
                .iter()
                .filter(|k| !already.contains(k))
                .copied()
                .collect();
            already.extend(fresh.iter().copied());
            fresh.iter().map(|(pid, _)| *pid).collect()
        }

        fn kill_all(&mut self, _walk: &Walk) -> Option<Vec<ProcessKey>> {
            if !self.cgroup {
                return None;
            }
            self.cgroup_kills += 1;
            Some(std::mem::take(&mut self.alive))
        }
    }

    #[test]
    fn on_a_cgroup_term_goes_to_members_and_kill_is_the_cgroups() {
        let t0 = Instant::now();
        let walk = Walk::below(1);
        let mut cgroup = FakeTree {
            alive: vec![(10, 1), (20, 3)],
            cgroup: true,
            ..FakeTree::default()
        };
        let grace = Duration::from_millis(300);
        let (mut stop, first) =
            StopSequence::start_with(&mut cgroup, Origin::Operator, grace, &walk, Some(10), t0);
        // TERM and CONT to each member, the setsid'd one (20) included; no cgroup kill yet.
        assert_eq!(first.targets, vec![10, 20]);
        assert_eq!(cgroup.cgroup_kills, 0);
        // A fork storm during grace: every newcomer gets TERM once.
        cgroup.alive.extend([(21, 4), (22, 4), (23, 4)]);
        let newcomers = stop
            .sweep_with(&mut cgroup, &walk, Some(10), t0)
            .expect("a delivery");
        assert_eq!(newcomers.targets, vec![21, 22, 23]);
        // Grace over: one cgroup.kill takes every member, those forked since the last sweep
        // too, and no process-by-process KILL is sent.
        cgroup.alive.extend([(24, 5), (25, 5)]);
        let kill = stop.escalate_with(&mut cgroup, &walk, Some(10), t0 + grace);
        assert_eq!(
            (kill.signal, kill.targets),
            (Signal::SIGKILL, vec![10, 20, 21, 22, 23, 24, 25])
        );
        assert_eq!(cgroup.cgroup_kills, 1);
        assert!(
            cgroup
                .calls
                .iter()
                .all(|(signal, ..)| *signal == Signal::SIGTERM)
        );
        // Sweeps repeat the cgroup's kill; nothing new is reported.
        assert!(
            stop.sweep_with(&mut cgroup, &walk, None, t0 + grace)
                .is_none()
        );
        assert_eq!(cgroup.cgroup_kills, 2);
    }

    #[test]
    fn term_then_newcomers_then_kill_until_nothing_is_left() {
        let t0 = Instant::now();
        let walk = Walk::below(1);
        let mut tree = FakeTree {
            alive: vec![(10, 1), (11, 1)],
            ..FakeTree::default()
        };
        let grace = Duration::from_secs(2);
        let (mut stop, first) =
            StopSequence::start_with(&mut tree, Origin::Operator, grace, &walk, Some(10), t0);
        assert_eq!(
            (first.signal, first.targets),
            (Signal::SIGTERM, vec![10, 11])
        );
        assert_eq!(
            tree.calls[0],
            (Signal::SIGTERM, true, Some(10)),
            "TERM with CONT"
        );
        assert_eq!(
            (stop.kill_at, stop.next_sweep),
            (t0 + grace, t0 + SWEEP_INTERVAL)
        );

        // Nothing new: nothing reported, and the next walk comes later each time.
        assert!(stop.sweep_with(&mut tree, &walk, Some(10), t0).is_none());
        assert_eq!(stop.next_sweep, t0 + SWEEP_INTERVAL * 2);
        // A child forked during grace gets TERM too, once.
        tree.alive.push((12, 5));
        let newcomer = stop
            .sweep_with(&mut tree, &walk, Some(10), t0)
            .expect("a delivery");
        assert_eq!(
            (newcomer.signal, newcomer.targets),
            (Signal::SIGTERM, vec![12])
        );
        assert!(stop.sweep_with(&mut tree, &walk, Some(10), t0).is_none());
        for _ in 0..10 {
            stop.sweep_with(&mut tree, &walk, Some(10), t0);
        }
        assert_eq!(stop.next_sweep, t0 + SWEEP_MAX, "the interval is capped");

        // Grace over: KILL to everything still there, without CONT.
        tree.alive.retain(|(pid, _)| *pid != 11);
        let kill = stop.escalate_with(&mut tree, &walk, None, t0 + grace);
        assert_eq!((kill.signal, kill.targets), (Signal::SIGKILL, vec![10, 12]));
        assert!(stop.killed);
        assert_eq!(tree.calls.last(), Some(&(Signal::SIGKILL, false, None)));
        // KILL is repeated each sweep, but only newcomers are reported.
        assert!(
            stop.sweep_with(&mut tree, &walk, None, t0 + grace)
                .is_none()
        );
        tree.alive.push((13, 9));
        let late = stop
            .sweep_with(&mut tree, &walk, None, t0 + grace)
            .expect("a delivery");
        assert_eq!((late.signal, late.targets), (Signal::SIGKILL, vec![13]));
    }

    #[test]
    fn the_next_wake_is_the_sweep_or_the_end_of_grace_whichever_comes_first() {
        let mut tree = FakeTree {
            alive: vec![(10, 1)],
            ..FakeTree::default()
        };
        let t0 = Instant::now();
        let walk = Walk::below(1);
        let grace = Duration::from_millis(10);
        let (mut sequence, _) =
            StopSequence::start_with(&mut tree, Origin::Operator, grace, &walk, Some(10), t0);
        assert_eq!(sequence.next_wake(), sequence.next_sweep.min(t0 + grace));
        sequence.escalate_with(&mut tree, &walk, Some(10), t0 + grace);
        assert_eq!(
            sequence.next_wake(),
            sequence.next_sweep,
            "no grace left to wait for"
        );
    }

    #[test]
    fn a_stop_settles_after_two_empty_walks_or_patience_after_the_kill() {
        let t0 = Instant::now();
        let patience = Duration::from_secs(5);
        let mut settling = Settling::default();
        assert_eq!(
            settling.settled(0, false, None, patience, t0),
            None,
            "one empty walk"
        );
        assert_eq!(settling.settled(0, false, None, patience, t0), Some(0));

        let mut settling = Settling::default();
        assert_eq!(settling.settled(0, false, None, patience, t0), None);
        assert_eq!(
            settling.settled(0, true, None, patience, t0),
            None,
            "a populated cgroup is not empty, and starts the count again"
        );
        assert_eq!(settling.settled(0, false, None, patience, t0), None);
        assert_eq!(
            settling.settled(2, false, Some(t0), patience, t0 + patience),
            Some(2),
            "patience after the KILL: what survived"
        );
    }
}
