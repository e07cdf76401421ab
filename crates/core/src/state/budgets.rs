//! The command's budgets: `max_time` (wall time from the spawn, as `timeout(1)` counts it),
//! `max_cpu` (CPU time of the whole tree, user and system) and `max_output` (bytes read from
//! its stdout and stderr together). Reaching one journals `budget_exceeded` and runs the stop
//! sequence with origin `budget`; `result.json` names the budget.
//!
//! The time budget is a deadline, the output budget a count of what [`Broker::output`]
//! reads. The tree's CPU time is the kernel's to know: while `max_cpu` is set the broker asks
//! for it ([`Output::MeasureCpu`]) every [`CPU_CHECK_MIN`] to [`CPU_CHECK_MAX`], the sooner
//! the closer the tree is to its limit, and the interpreter answers
//! ([`Input::CpuMeasured`](super::Input::CpuMeasured)).
//!
//! Budgets count while the main process runs, and while leftovers the leftovers rule keeps
//! run on after it (custody): what the command left behind is still the command's. They do
//! not fire while the broker drains the pipes after the exit (at most 2 s) or tears down.

use std::time::{Duration, Instant};

use super::machine::Output;
use super::{Broker, Phase};
use crate::protocol::millis::to_wire as millis;
use crate::protocol::{Budget, EventKind, Origin};

/// The shortest interval between two measurements of the tree's CPU time: near the limit.
pub const CPU_CHECK_MIN: Duration = Duration::from_millis(250);
/// The longest: far from the limit. On the /proc walk (no cgroup) a measurement of a tree
/// that did something reads every process on the machine (within a deadline: out of time,
/// the interpreter tells the last figure again), so it is not taken more often than the
/// limit needs.
pub const CPU_CHECK_MAX: Duration = Duration::from_millis(500);

/// What the broker keeps of the budgets between inputs.
#[derive(Debug, Default)]
pub(super) struct BudgetWatch {
    /// When the command was spawned: the origin of `max_time`.
    spawned: Option<Instant>,
    /// When the tree's CPU time is next measured, while `max_cpu` is set.
    cpu_next: Option<Instant>,
    /// A measurement was asked for and not answered yet.
    cpu_asked: bool,
}

/// How long until the next measurement, given what is left of the CPU budget: a quarter of
/// it, within [`CPU_CHECK_MIN`, `CPU_CHECK_MAX`].
pub(super) fn cpu_interval(left: Duration) -> Duration {
    (left / 4).clamp(CPU_CHECK_MIN, CPU_CHECK_MAX)
}

impl Broker {
    /// The command was spawned at `now`: its budgets start counting.
    pub(super) fn budgets_spawned(&mut self, now: Instant) {
        self.budgets.spawned = Some(now);
        if let Some(limit) = self.request.budgets.max_cpu {
            self.budgets.cpu_next = Some(now + cpu_interval(limit));
        }
    }

    /// Whether a budget may fire now: the command (or the leftovers it left in custody) runs
    /// and nothing is stopping it yet.
    fn budgets_count(&self) -> bool {
        self.stop.is_none()
            && self.budgets.spawned.is_some()
            && matches!(self.phase, Phase::Running | Phase::Custody)
    }

    /// When `max_time` is reached.
    fn time_limit_at(&self) -> Option<Instant> {
        Some(self.budgets.spawned? + self.request.budgets.max_time?)
    }

    /// The next moment a budget needs the broker: the time limit, or the next CPU
    /// measurement.
    pub(super) fn budget_deadline(&self) -> Option<Instant> {
        if !self.budgets_count() {
            return None;
        }
        let cpu = self.budgets.cpu_next.filter(|_| !self.budgets.cpu_asked);
        [self.time_limit_at(), cpu].into_iter().flatten().min()
    }

    /// What is due at `now`: the time limit reached stops the command; a CPU measurement due
    /// is asked for.
    pub(super) fn check_budgets(&mut self, now: Instant) {
        if !self.budgets_count() {
            return;
        }
        if let (Some(at), Some(limit)) = (self.time_limit_at(), self.request.budgets.max_time)
            && now >= at
        {
            let used = self.budgets.spawned.map_or(limit, |s| now - s);
            self.budget_exceeded(Budget::Time, millis(limit), millis(used));
            return;
        }
        if !self.budgets.cpu_asked && self.budgets.cpu_next.is_some_and(|next| now >= next) {
            self.budgets.cpu_asked = true;
            let walk = self.walk();
            self.outputs.push_back(Output::MeasureCpu { walk });
        }
    }

    /// The tree's CPU time as measured ([`Output::MeasureCpu`]).
    pub(super) fn cpu_measured(&mut self, used: Duration) {
        self.budgets.cpu_asked = false;
        let Some(limit) = self.request.budgets.max_cpu else {
            return;
        };
        self.budgets.cpu_next = Some(self.now + cpu_interval(limit.saturating_sub(used)));
        if used >= limit && self.budgets_count() {
            self.budget_exceeded(Budget::Cpu, millis(limit), millis(used));
        }
    }

    /// The command's output so far is `total` bytes (both streams): beyond `max_output`, it
    /// is stopped.
    pub(super) fn check_output_budget(&mut self, total: u64) {
        if let Some(limit) = self.request.budgets.max_output
            && total > limit
            && self.budgets_count()
        {
            self.budget_exceeded(Budget::Output, limit, total);
        }
    }

    /// Journals which budget was reached and runs the stop sequence for it.
    fn budget_exceeded(&mut self, budget: Budget, limit: u64, used: u64) {
        self.emit(EventKind::BudgetExceeded {
            budget,
            limit,
            used,
        });
        self.result.budget = Some(budget);
        self.start_stop(Origin::Budget);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measurements_come_sooner_near_the_limit() {
        assert_eq!(cpu_interval(Duration::from_secs(600)), CPU_CHECK_MAX);
        assert_eq!(
            cpu_interval(Duration::from_millis(1600)),
            Duration::from_millis(400)
        );
        assert_eq!(cpu_interval(Duration::from_millis(100)), CPU_CHECK_MIN);
        assert_eq!(cpu_interval(Duration::ZERO), CPU_CHECK_MIN);
    }
}
