//! The stop sequence: SIGTERM and SIGCONT to the whole tree, a grace period during which new
//! processes are signalled too, then SIGKILL until nothing is left.
//!
//! The broker runs it over its own descendants; a front end whose broker died or stopped
//! answering runs the very same sequence over what the broker left (another walk: which
//! processes a signal reaches is the signaller's `Walk`, the broker's `signaller::Walk`).
//!
//! The sequence itself touches no process: [`StopSequence::begin`] and
//! [`StopSequence::step`] (`now` in, a [`SignalPlan`] out) decide what is sent when, and
//! [`StopSequence::delivered`] takes what a plan's delivery reached ([`SignalPlan::deliver`],
//! over a [`TreeSignaller`]) and says what to journal. The broker's state machine hands the
//! plan to its interpreter as an output and gets the delivery back as an input; the front
//! ends deliver at once (`step_with`, the same step).

use std::collections::HashSet;
use std::time::{Duration, Instant};

pub use crate::process::ProcessKey;
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

/// What delivers a signal to a tree: the kernel in use (the broker's `stop::Kernel`), a fake
/// in the tests, so the sequence's decisions (what is sent when, to whom, what is reported)
/// are tested without real processes or time.
pub trait TreeSignaller {
    /// Which processes a signal reaches (the broker's `signaller::Walk`).
    type Walk;

    /// Signals the group and every live process of the walk not in `already`, adds those it
    /// reached to `already`, returns their pids.
    fn signal_tree(
        &mut self,
        walk: &Self::Walk,
        group: Option<i32>,
        signal: ProcessSignal,
        also_cont: bool,
        already: &mut HashSet<ProcessKey>,
    ) -> Vec<i32>;

    /// SIGKILL to the whole containment at once, where it can (a cgroup's `cgroup.kill`,
    /// atomic even against a fork storm). Returns the processes it held, or `None` when the
    /// walk has no such kill and KILL goes process by process.
    fn kill_all(&mut self, walk: &Self::Walk) -> Option<Vec<ProcessKey>>;
}

/// What one step of the sequence did, for the journal.
pub struct Delivery {
    pub signal: ProcessSignal,
    pub targets: Vec<i32>,
}

/// Which step a [`SignalPlan`] is, for what its delivery reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// The first TERM (and CONT): reported whatever it reached.
    First,
    /// TERM to newcomers during grace: reported when it reached any.
    Sweep,
    /// Grace over: KILL to everything, reported.
    Escalation,
    /// KILL repeated after it: only processes not reached before are reported.
    KillSweep,
}

impl Step {
    fn signal(self) -> ProcessSignal {
        match self {
            Step::First | Step::Sweep => ProcessSignal::TERM,
            Step::Escalation | Step::KillSweep => ProcessSignal::KILL,
        }
    }
}

/// One signal the sequence asks for, decided without touching a process: what to send, and
/// to whom not again. Whoever drives the sequence delivers it ([`SignalPlan::deliver`]) over
/// its walk and hands the result back ([`StopSequence::delivered`]).
#[derive(Debug, PartialEq)]
pub struct SignalPlan {
    pub signal: ProcessSignal,
    /// CONT after it, so stopped processes can act on a TERM.
    pub also_cont: bool,
    /// Processes reached before, not signalled again.
    already: HashSet<ProcessKey>,
    step: Step,
    /// When it was decided: the time its delivery is journaled at (`hard_kill`'s `after_ms`).
    at: Instant,
}

/// What delivering a [`SignalPlan`] did: the pids it reached, and the processes reached in
/// all, for the sequence to go on from.
#[derive(Debug)]
pub struct Delivered {
    pub targets: Vec<i32>,
    reached: HashSet<ProcessKey>,
    step: Step,
    at: Instant,
}

impl SignalPlan {
    /// A TERM comes with CONT, so that stopped processes can act on it.
    fn new(step: Step, already: HashSet<ProcessKey>, at: Instant) -> SignalPlan {
        SignalPlan {
            signal: step.signal(),
            also_cont: step.signal() == ProcessSignal::TERM,
            already,
            step,
            at,
        }
    }

    /// Delivers the plan over `walk` (the group `group` too): KILL through the containment's
    /// own kill where it has one, else to the group and each process through pidfds.
    pub fn deliver<S: TreeSignaller + ?Sized>(
        self,
        signaller: &mut S,
        walk: &S::Walk,
        group: Option<i32>,
    ) -> Delivered {
        let SignalPlan {
            signal,
            also_cont,
            mut already,
            step,
            at,
        } = self;
        let targets = if signal == ProcessSignal::KILL {
            kill(signaller, walk, group, &mut already)
        } else {
            signaller.signal_tree(walk, group, signal, also_cont, &mut already)
        };
        Delivered {
            targets,
            reached: already,
            step,
            at,
        }
    }
}

impl Delivered {
    /// Whether this delivered the stop's first signal.
    pub fn is_first(&self) -> bool {
        self.step == Step::First
    }

    /// When its plan was decided.
    pub fn at(&self) -> Instant {
        self.at
    }
}

impl StopSequence {
    /// Starts the sequence: the plan of its first signal, TERM (and CONT, so stopped
    /// processes can act on it) to the group and every descendant.
    pub fn begin(origin: Origin, grace: Duration, now: Instant) -> (StopSequence, SignalPlan) {
        let sequence = StopSequence {
            origin,
            started: now,
            kill_at: now + grace,
            killed: false,
            next_sweep: now + SWEEP_INTERVAL,
            interval: SWEEP_INTERVAL,
            reached: HashSet::new(),
        };
        let plan = SignalPlan::new(Step::First, HashSet::new(), now);
        (sequence, plan)
    }

    pub fn start_with<S: TreeSignaller + ?Sized>(
        signaller: &mut S,
        origin: Origin,
        grace: Duration,
        walk: &S::Walk,
        group: Option<i32>,
        now: Instant,
    ) -> (StopSequence, Delivery) {
        let (mut sequence, plan) = StopSequence::begin(origin, grace, now);
        let (delivery, _) = sequence.delivered(plan.deliver(signaller, walk, group));
        let delivery = delivery.unwrap_or(Delivery {
            signal: ProcessSignal::TERM,
            targets: Vec::new(),
        });
        (sequence, delivery)
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

    /// What is due at `now`: KILL once grace is over, else a sweep. The one step every
    /// driver takes, the broker's and the front ends'; its delivery comes back to
    /// [`StopSequence::delivered`].
    pub fn step(&mut self, now: Instant) -> SignalPlan {
        if self.kill_due(now) {
            self.escalation(now)
        } else {
            self.sweep(now)
        }
    }

    /// A sweep: TERM (and CONT) to processes that appeared since during grace; after grace,
    /// KILL again to everything still there.
    pub fn sweep(&mut self, now: Instant) -> SignalPlan {
        self.interval = (self.interval * 2).min(SWEEP_MAX);
        self.next_sweep = now + self.interval;
        if !self.killed {
            return SignalPlan::new(Step::Sweep, std::mem::take(&mut self.reached), now);
        }
        SignalPlan::new(Step::KillSweep, HashSet::new(), now)
    }

    /// Grace is over: SIGKILL the group and every descendant.
    pub fn escalation(&mut self, now: Instant) -> SignalPlan {
        self.killed = true;
        self.reached.clear();
        self.interval = SWEEP_INTERVAL;
        self.next_sweep = now + SWEEP_INTERVAL;
        SignalPlan::new(Step::Escalation, HashSet::new(), now)
    }

    /// What a plan's delivery did, for the journal: the first signal and the KILL whatever
    /// they reached, a sweep only the processes not reached before (`None` when there are
    /// none). The second value says the delivery was the KILL at the end of grace.
    pub fn delivered(&mut self, delivered: Delivered) -> (Option<Delivery>, bool) {
        let Delivered {
            targets,
            reached,
            step,
            ..
        } = delivered;
        match step {
            Step::First | Step::Sweep | Step::Escalation => {
                self.reached = reached;
                let signal = step.signal();
                let reported = step != Step::Sweep || !targets.is_empty();
                let delivery = reported.then_some(Delivery { signal, targets });
                (delivery, step == Step::Escalation)
            }
            Step::KillSweep => {
                let known: HashSet<i32> = self.reached.iter().map(|(pid, _)| *pid).collect();
                let fresh: Vec<i32> = targets
                    .into_iter()
                    .filter(|pid| !known.contains(pid))
                    .collect();
                self.reached.extend(reached);
                let delivery = (!fresh.is_empty()).then_some(Delivery {
                    signal: ProcessSignal::KILL,
                    targets: fresh,
                });
                (delivery, false)
            }
        }
    }

    /// [`StopSequence::step`], delivered through `signaller` at once.
    pub fn step_with<S: TreeSignaller + ?Sized>(
        &mut self,
        signaller: &mut S,
        walk: &S::Walk,
        group: Option<i32>,
        now: Instant,
    ) -> (Option<Delivery>, bool) {
        let plan = self.step(now);
        self.delivered(plan.deliver(signaller, walk, group))
    }

    pub fn escalate_with<S: TreeSignaller + ?Sized>(
        &mut self,
        signaller: &mut S,
        walk: &S::Walk,
        group: Option<i32>,
        now: Instant,
    ) -> Delivery {
        let plan = self.escalation(now);
        let (delivery, _) = self.delivered(plan.deliver(signaller, walk, group));
        delivery.unwrap_or(Delivery {
            signal: ProcessSignal::KILL,
            targets: Vec::new(),
        })
    }
}

/// KILL to everything of the walk: the containment's own kill where it has one (then the
/// processes it held are those reached), else the group and each process through pidfds.
fn kill<S: TreeSignaller + ?Sized>(
    signaller: &mut S,
    walk: &S::Walk,
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
        None => signaller.signal_tree(walk, group, ProcessSignal::KILL, false, reached),
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

    impl StopSequence {
        /// [`StopSequence::sweep`], delivered through `signaller` at once.
        fn sweep_with<S: TreeSignaller + ?Sized>(
            &mut self,
            signaller: &mut S,
            walk: &S::Walk,
            group: Option<i32>,
            now: Instant,
        ) -> Option<Delivery> {
            let plan = self.sweep(now);
            self.delivered(plan.deliver(signaller, walk, group)).0
        }
    }

    /// A tree that is a list of (pid, start) the test edits: signalling reaches every listed
    /// process not yet in `already`, and the calls are kept.
    #[derive(Default)]
    struct FakeTree {
        alive: Vec<ProcessKey>,
        calls: Vec<(ProcessSignal, bool, Option<i32>)>,
        /// A cgroup: `kill_all` kills every process at once.
        cgroup: bool,
        cgroup_kills: usize,
    }

    impl TreeSignaller for FakeTree {
        type Walk = ();

        fn signal_tree(
            &mut self,
            _walk: &(),
            group: Option<i32>,
            signal: ProcessSignal,
            also_cont: bool,
            already: &mut HashSet<ProcessKey>,
        ) -> Vec<i32> {
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

        fn kill_all(&mut self, _walk: &()) -> Option<Vec<ProcessKey>> {
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
        let walk = ();
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
            (ProcessSignal::KILL, vec![10, 20, 21, 22, 23, 24, 25])
        );
        assert_eq!(cgroup.cgroup_kills, 1);
        assert!(
            cgroup
                .calls
                .iter()
                .all(|(signal, ..)| *signal == ProcessSignal::TERM)
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
        let walk = ();
        let mut tree = FakeTree {
            alive: vec![(10, 1), (11, 1)],
            ..FakeTree::default()
        };
        let grace = Duration::from_secs(2);
        let (mut stop, first) =
            StopSequence::start_with(&mut tree, Origin::Operator, grace, &walk, Some(10), t0);
        assert_eq!(
            (first.signal, first.targets),
            (ProcessSignal::TERM, vec![10, 11])
        );
        assert_eq!(
            tree.calls[0],
            (ProcessSignal::TERM, true, Some(10)),
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
            (ProcessSignal::TERM, vec![12])
        );
        assert!(stop.sweep_with(&mut tree, &walk, Some(10), t0).is_none());
        for _ in 0..10 {
            stop.sweep_with(&mut tree, &walk, Some(10), t0);
        }
        assert_eq!(stop.next_sweep, t0 + SWEEP_MAX, "the interval is capped");

        // Grace over: KILL to everything still there, without CONT.
        tree.alive.retain(|(pid, _)| *pid != 11);
        let kill = stop.escalate_with(&mut tree, &walk, None, t0 + grace);
        assert_eq!(
            (kill.signal, kill.targets),
            (ProcessSignal::KILL, vec![10, 12])
        );
        assert!(stop.killed);
        assert_eq!(tree.calls.last(), Some(&(ProcessSignal::KILL, false, None)));
        // KILL is repeated each sweep, but only newcomers are reported.
        assert!(
            stop.sweep_with(&mut tree, &walk, None, t0 + grace)
                .is_none()
        );
        tree.alive.push((13, 9));
        let late = stop
            .sweep_with(&mut tree, &walk, None, t0 + grace)
            .expect("a delivery");
        assert_eq!((late.signal, late.targets), (ProcessSignal::KILL, vec![13]));
    }

    #[test]
    fn the_next_wake_is_the_sweep_or_the_end_of_grace_whichever_comes_first() {
        let mut tree = FakeTree {
            alive: vec![(10, 1)],
            ..FakeTree::default()
        };
        let t0 = Instant::now();
        let walk = ();
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
