//! The broker's side of the command's cgroup: the walk the stop and the tree record take,
//! whether anything is left in it, the fallback when it disappears, its figures and its
//! removal at the end. The cgroup is its name here ([`CgroupId`]), never read: the interpreter reads it
//! and hands in what it found ([`CgroupState`] with `Input::Reaped` and
//! `Input::CgroupChanged`, membership with `Input::Spawned`) and removes it when asked
//! (`Output::AbandonCgroup`, `Output::ReleaseCgroup`).

use std::io;

use super::machine::Output;
use super::{Broker, Reaped};
use crate::cost;
use crate::process::{CgroupId, TreeWalk};
use crate::protocol::{ContainmentMode, EventKind};

/// How the command's cgroup stands, as the interpreter read it (`cgroup.events`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CgroupState {
    /// A process is in it.
    Populated,
    /// Nothing is in it (or its `populated` could not be read).
    Empty,
    /// Its directory is gone (a delegated subtree taken away mid-run).
    Gone,
}

/// What releasing the cgroup at the end found ([`Output::ReleaseCgroup`]).
#[derive(Debug)]
pub struct CgroupReleased {
    /// The CPU time it accounted (`cpu.stat` `usage_usec`).
    pub cpu_usec: Option<u64>,
    /// The most memory it held (`memory.peak`), where the kernel accounts it.
    pub memory_peak: Option<u64>,
    /// Its removal, which the kernel refuses while a process is in it.
    pub removed: io::Result<()>,
}

impl Broker {
    /// The command runs in `cgroup` (or, `None`, is contained by the walk of /proc).
    pub(super) fn contain(&mut self, cgroup: Option<CgroupId>) {
        self.cgroup_name = cgroup.as_ref().map(|c| c.name.clone());
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
    pub(super) fn walk(&self) -> TreeWalk {
        TreeWalk {
            root: self.host.pid,
            // The notify command's runs are the broker's children, not the command's.
            pruned: self.attention.notifier_pids(),
            in_cgroup: self.cgroup.is_some(),
            known: None,
        }
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

    /// Whether a process is left in the cgroup (false without one, or once it is gone), as
    /// the interpreter last read it.
    pub(super) fn cgroup_populated(&self) -> bool {
        self.cgroup.is_some() && self.cgroup_state == CgroupState::Populated
    }

    /// The command must be in its cgroup before anything it runs can fork: it writes itself
    /// into `cgroup.procs` before exec. If that failed (the write is unchecked in the child,
    /// where nothing may allocate), the /proc walk takes over, and the journal says why.
    /// `member`: whether the cgroup listed the command's pid; `ended`: whether it had ended
    /// when read just after.
    pub(super) fn check_entered(&mut self, member: bool, ended: bool) {
        let Some(cgroup) = self.cgroup.as_ref() else {
            return;
        };
        // Already gone: it cannot have forked outside the cgroup, which is all that counts.
        if !member && !ended {
            let reason = format!(
                "the command could not enter its cgroup {}",
                cgroup.path.display()
            );
            self.fall_back(reason);
        }
    }

    /// Whether the interpreter is to read how the cgroup stands with its next reap (else it
    /// hands in `None`, and the last state stands): once it can matter, that is once a reap
    /// found a child ended, the main process has exited, or a stop runs. While the command
    /// runs and nothing ended, nothing asks whether its tree is left, and a read at every
    /// wake-up would cost an output-heavy command three system calls a chunk.
    pub fn cgroup_state_wanted(&self) -> bool {
        self.cgroup.is_some() && (self.stop.is_some() || self.child_reaped())
    }

    /// Something changed in the cgroup (`cgroup.events`), which now stands as `state`: the
    /// tree may have, a stop may be done, or the cgroup may be gone.
    pub(super) fn cgroup_changed(&mut self, state: Option<CgroupState>) {
        if let Some(state) = state {
            self.cgroup_state = state;
        }
        self.check_cgroup();
        self.tree_may_have_changed();
        self.check_stop_done();
    }

    /// A cgroup taken away mid-run (a delegated subtree removed) leaves the /proc walk in
    /// charge, said once in the journal.
    pub(super) fn check_cgroup(&mut self) {
        let gone = self.cgroup_state == CgroupState::Gone;
        if let Some(cgroup) = self.cgroup.as_ref().filter(|_| gone) {
            let reason = format!("the cgroup {} disappeared", cgroup.path.display());
            self.fall_back(reason);
        }
    }

    fn fall_back(&mut self, reason: String) {
        // Empty (the command never entered it), it goes now; one still holding a process
        // stays, for a later tether to remove once empty.
        if self.cgroup.take().is_some() {
            self.outputs.push_back(Output::AbandonCgroup);
        }
        self.emit(EventKind::Containment {
            mode: ContainmentMode::Procfs,
            path: None,
            reason: Some(reason),
        });
    }

    /// What the tree cost, into `result.json`, with the cgroup's `memory.peak` if it had one
    /// (see [`crate::cost`] for which figure is taken and why). Nothing ran,
    /// nothing to say.
    /// `children`: the reaped children's CPU milliseconds and largest RSS in bytes, as the
    /// kernel accounts them.
    pub(super) fn record_cost(&mut self, sampled: &cost::SampledCost, children: (u64, u64)) {
        if self.child.is_none() {
            return;
        }
        let ticks = self.host.ticks_per_second;
        let page = self.host.page_size;
        let (children_cpu_ms, children_max_rss_bytes) = children;
        let (cpu_ms, peak) = cost::command_cost(&cost::CostSources {
            cgroup_cpu_usec: self.result.cgroup_cpu_usec,
            cgroup_memory_peak: self.memory_peak,
            sampled_cpu_ms: sampled.cpu_ticks() * 1000 / ticks,
            sampled_peak_rss_bytes: sampled.peak_rss_pages() * page,
            children_cpu_ms,
            children_max_rss_bytes,
        });
        self.result.cpu_ms = Some(cpu_ms);
        // Nothing measured it: a command that ended before its first sample, without a
        // cgroup's memory figure, and whose processes stayed below the broker's own.
        self.result.peak_rss_bytes = (peak > 0).then_some(peak);
    }

    /// At the end: the cgroup's figures are read and it is removed
    /// ([`Output::ReleaseCgroup`]); returns whether it was asked for (there is a cgroup), the
    /// end then going on at [`Broker::cgroup_released`].
    pub(super) fn release_cgroup(&mut self) -> bool {
        if self.cgroup.is_none() {
            return false;
        }
        self.outputs.push_back(Output::ReleaseCgroup);
        true
    }

    /// The cgroup was released: the CPU time it accounted goes to `result.json`, its
    /// `memory.peak` to the cost. The kernel refuses the removal while a process is in it
    /// (one that survived SIGKILL): then it stays, and a later tether removes it once empty.
    /// The tree's record closes next.
    pub(super) fn cgroup_released(&mut self, released: CgroupReleased) {
        if let Some(cgroup) = self.cgroup.take() {
            self.result.cgroup_cpu_usec = released.cpu_usec;
            self.memory_peak = released.memory_peak;
            if let Err(err) = released.removed {
                let message = format!(
                    "cannot remove the command's cgroup {}: {err}; a later tether removes it once it is empty",
                    cgroup.path.display()
                );
                self.broker_failure(crate::protocol::Stage::Internal, "cgroup_remove", message);
            }
        }
        self.outputs.push_back(Output::CloseTree);
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
