//! The broker's side of the command's cgroup: the walk the stop and the tree record take,
//! whether anything is left in it, the fallback when it disappears, its figures and its
//! removal at the end.

use std::sync::Arc;

use super::{Broker, Reaped};
use crate::broker::signaller::Walk;
use crate::broker::tree::cost;
use crate::cgroup::CommandCgroup;
use crate::protocol::{ContainmentMode, EventKind};

impl Broker {
    /// The command runs in `cgroup` (or, `None`, is contained by the walk of /proc).
    pub(super) fn contain(&mut self, cgroup: Option<Arc<CommandCgroup>>) {
        self.cgroup_name = cgroup.as_ref().map(|c| c.name().to_string());
        self.cgroup = cgroup;
    }

    /// Whether a reaped orphan is one of tether's own processes, not a process of this
    /// command: named as tether's are, and ended in a cgroup outside the command's, where
    /// they move themselves (`cgroup::Hierarchy::enter`). The broker of an agent's shell
    /// call is re-parented here when the call returns while its broker keeps its leftovers,
    /// and the retention run a shell call starts is at once; the call is journaled as a
    /// command of its own, and neither is an orphan of the agent. Without a cgroup there is
    /// no telling, and such a process is journaled as any orphan is.
    pub(super) fn tethers_own_process(&self, reaped: &Reaped) -> bool {
        let (Some(ours), Some(ended_in)) = (&self.cgroup_name, &reaped.tether_cgroup) else {
            return false;
        };
        outside(ended_in, ours)
    }

    /// The command's processes: its cgroup's members, or every descendant of this subreaper.
    pub(in crate::broker) fn walk(&self) -> Walk {
        // The notify command's runs are the broker's children, not the command's.
        Walk::below(self.pid)
            .pruning(self.attention.notifier_pids())
            .in_cgroup(self.cgroup.clone())
    }

    /// Whether the tree's record waits while a stop runs: on the cgroup path a stop's end is
    /// the kernel's (`cgroup.kill`, `populated 0`), and reading every member's `/proc` entry
    /// meanwhile (thousands, in a fork storm, each read waiting on a fork) would only delay
    /// it; on the /proc path a record is a walk of every process on the machine, which the
    /// stop's sweeps already do when they must, and which hundreds of brokers stopping
    /// together (their TUI died) must not add to. The stop's own events name every process
    /// it signalled; the record resumes after.
    pub(super) fn tree_paused(&self) -> bool {
        self.stop.is_some() && !self.stop_done
    }

    /// Whether a process is left in the cgroup (false without one, or once it is gone).
    pub(super) fn cgroup_populated(&self) -> bool {
        self.cgroup
            .as_ref()
            .is_some_and(|c| c.populated().unwrap_or(false))
    }

    /// The command must be in its cgroup before anything it runs can fork: it writes itself
    /// into `cgroup.procs` before exec. If that failed (the write is unchecked in the child,
    /// where nothing may allocate), the /proc walk takes over, and the journal says why.
    pub(super) fn check_entered(&mut self, pid: i32) {
        let Some(cgroup) = self.cgroup.as_ref() else {
            return;
        };
        let member = cgroup.members().is_ok_and(|m| m.contains(&pid));
        // Already gone: it cannot have forked outside the cgroup, which is all that counts.
        let gone = crate::procfs::read_stat(pid).is_none_or(|s| s.is_zombie());
        if !member && !gone {
            let reason = format!(
                "the command could not enter its cgroup {}",
                cgroup.path().display()
            );
            self.fall_back(reason);
        }
    }

    /// Something changed in the cgroup (`cgroup.events`): the tree may have, a stop may be
    /// done, or the cgroup may be gone.
    pub(super) fn cgroup_changed(&mut self) {
        self.check_cgroup();
        self.tree_may_have_changed();
        self.check_stop_done();
    }

    /// A cgroup taken away mid-run (a delegated subtree removed) leaves the /proc walk in
    /// charge, said once in the journal.
    pub(super) fn check_cgroup(&mut self) {
        if let Some(cgroup) = self.cgroup.as_ref().filter(|c| !c.exists()) {
            let reason = format!("the cgroup {} disappeared", cgroup.path().display());
            self.fall_back(reason);
        }
    }

    fn fall_back(&mut self, reason: String) {
        // Empty (the command never entered it), it goes now; one still holding a process
        // stays, for a later tether to remove once empty.
        if let Some(cgroup) = self.cgroup.take() {
            let _ = cgroup.remove();
        }
        self.emit(EventKind::Containment {
            mode: ContainmentMode::Procfs,
            path: None,
            reason: Some(reason),
        });
    }

    /// What the tree cost, into `result.json`: `memory_peak` is the cgroup's, if it had one
    /// (see [`crate::broker::tree::cost`] for which figure is taken and why). Nothing ran,
    /// nothing to say.
    pub(super) fn record_cost(&mut self, memory_peak: Option<u64>, sampled: &cost::SampledCost) {
        if self.child.is_none() {
            return;
        }
        let ticks = crate::procfs::clock_ticks_per_second();
        let page = crate::procfs::page_size();
        let (children_cpu_ms, children_max_rss_bytes) = self.kernel.children_usage();
        let (cpu_ms, peak) = cost::command_cost(&cost::CostSources {
            cgroup_cpu_usec: self.result.cgroup_cpu_usec,
            cgroup_memory_peak: memory_peak,
            sampled_cpu_ms: sampled.cpu_ticks() * 1000 / ticks,
            sampled_peak_rss_bytes: sampled.peak_rss_pages() * page,
            children_cpu_ms,
            children_max_rss_bytes,
        });
        self.result.cpu_ms = Some(cpu_ms);
        self.result.peak_rss_bytes = Some(peak);
    }

    /// At the end: the CPU time the cgroup accounted goes to `result.json`, and the cgroup
    /// is removed. The kernel refuses while a process is in it (one that survived SIGKILL):
    /// then it stays, and a later tether removes it once empty. Returns its `memory.peak`,
    /// where it accounts one.
    pub(super) fn release_cgroup(&mut self) -> Option<u64> {
        let cgroup = self.cgroup.take()?;
        self.result.cgroup_cpu_usec = cgroup.stats().cpu_usec;
        let memory_peak = cgroup.memory_peak();
        if let Err(err) = cgroup.remove() {
            self.emit(EventKind::BrokerFailure {
                stage: crate::protocol::Stage::Internal,
                code: "cgroup_remove".into(),
                message: format!(
                    "cannot remove the command's cgroup {}: {err}; a later tether removes it once it is empty",
                    cgroup.path().display()
                ),
            });
        }
        memory_peak
    }
}

/// Whether the cgroup path `ended_in` (a `/proc/PID/cgroup` line's) is outside the command
/// cgroup named `ours` (neither it nor below it).
fn outside(ended_in: &str, ours: &str) -> bool {
    !ended_in.split('/').any(|part| part == ours)
}

#[cfg(test)]
mod tests {
    use super::outside;

    #[test]
    fn a_process_that_ended_beside_the_commands_cgroup_is_outside_it() {
        let ours = "tether.s.01-claude.40-9";
        assert!(!outside("/tether.s.01-claude.40-9", ours));
        assert!(!outside("/user/tether.s.01-claude.40-9/inner", ours));
        assert!(outside("/", ours));
        assert!(outside("/user", ours));
        assert!(outside("/tether.s.02-ls.41-10", ours));
        assert!(outside("/tether.s.01-claude.40-99", ours));
    }
}
