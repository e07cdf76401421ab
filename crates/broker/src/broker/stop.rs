//! The stop sequence delivered through the kernel: the plan is tether-core's
//! ([`StopSequence`]: what is sent when, to whom, what is reported); [`Kernel`] sends it,
//! through pidfds, `killpg` and a cgroup's `cgroup.kill`, over a [`Walk`]; [`start`] and
//! [`escalate`] deliver at once.

use std::collections::HashSet;
use std::time::{Duration, Instant};

pub use tether_core::stop::*;

use super::signaller::{Walk, signal_tree};
use tether_protocol::protocol::{Origin, ProcessSignal};

/// Signals through the kernel: pidfds and `killpg`.
pub struct Kernel;

impl super::state::OperatorSignaller for Kernel {
    fn signal_one(&mut self, walk: &Walk, pid: i32, signal: ProcessSignal) -> Option<bool> {
        let live = walk.live();
        let process = live.iter().find(|p| p.pid == pid)?;
        Some(super::signaller::signal_process(process, signal))
    }
}

impl TreeSignaller for Kernel {
    type Walk = Walk;

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

/// Starts a stop sequence and delivers its first signal through the kernel at once, as the
/// front ends drive one over what a broker left.
pub fn start(
    origin: Origin,
    grace: Duration,
    walk: impl Into<Walk>,
    group: Option<i32>,
    now: Instant,
) -> (StopSequence, Delivery) {
    StopSequence::start_with(&mut Kernel, origin, grace, &walk.into(), group, now)
}

/// [`StopSequence::escalation`], delivered through the kernel at once.
pub fn escalate(
    sequence: &mut StopSequence,
    walk: impl Into<Walk>,
    group: Option<i32>,
    now: Instant,
) -> Delivery {
    sequence.escalate_with(&mut Kernel, &walk.into(), group, now)
}
