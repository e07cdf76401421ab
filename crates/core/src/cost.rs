//! What the command's tree cost: CPU time and peak memory, for `result.json`.
//!
//! Three sources, each exact for part of the tree and short of the truth elsewhere:
//! - the cgroup's `cpu.stat` `usage_usec` and `memory.peak` count every process that ever
//!   ran in it, reaped or not; where the cgroup has them they are the figures;
//! - the samples of the tree (the record's walks) see each live process's `utime + stime`
//!   and RSS, but not what a process did after its last sample, nor one that lived between
//!   two samples (most of an agent's commands end before the first);
//! - the broker's `RUSAGE_CHILDREN` counts every child it reaped with everything each of them
//!   had reaped in turn: as a subreaper it reaps the command and every orphan, so once the
//!   tree is gone it holds all of it, except a process still running (one that survived the
//!   stop) and one whose parent ignored `SIGCHLD` (the kernel reaps those and drops their
//!   time). Its `ru_maxrss` is the largest RSS of any one process, not of the tree at once,
//!   and only where it is above the broker's own: each child's starts at its parent's.
//!
//! Every source is a lower bound of the real figure, so without a cgroup figure the larger
//! of the other two is taken. The OS layer reads the cgroup and `RUSAGE_CHILDREN`
//! (`broker::tree::cost::children_usage`); this weighs what they said.

use std::collections::HashMap;

use crate::process::{ProcStat, ProcessKey, key};

/// What the samples of the tree saw.
#[derive(Debug, Default)]
pub struct SampledCost {
    /// The last CPU reading of each process of the last sample.
    live: HashMap<ProcessKey, u64>,
    /// The last CPU readings of processes that left the tree since.
    ended_ticks: u64,
    /// The largest RSS of the whole tree in one sample.
    peak_rss_pages: u64,
}

impl SampledCost {
    /// Takes one sample of the tree: `procs` are its live processes now.
    pub fn sampled(&mut self, procs: &[ProcStat]) {
        // A zombie's reading is its last, and exact.
        let now: HashMap<ProcessKey, u64> = procs.iter().map(|p| (key(p), p.cpu_ticks)).collect();
        // A process gone since keeps its last reading; the map holds the live tree only.
        self.ended_ticks += self
            .live
            .iter()
            .filter(|(k, _)| !now.contains_key(k))
            .map(|(_, ticks)| ticks)
            .sum::<u64>();
        self.live = now;
        let rss: u64 = procs
            .iter()
            .filter(|p| !p.is_zombie())
            .map(|p| p.rss_pages)
            .sum();
        self.peak_rss_pages = self.peak_rss_pages.max(rss);
    }

    /// CPU time every process ever sampled used, as of its last sample, in clock ticks.
    pub fn cpu_ticks(&self) -> u64 {
        self.ended_ticks + self.live.values().sum::<u64>()
    }

    pub fn peak_rss_pages(&self) -> u64 {
        self.peak_rss_pages
    }
}

/// The figures each source gave, in the units `result.json` keeps.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CostSources {
    pub cgroup_cpu_usec: Option<u64>,
    pub cgroup_memory_peak: Option<u64>,
    pub sampled_cpu_ms: u64,
    pub sampled_peak_rss_bytes: u64,
    /// `RUSAGE_CHILDREN`: user + system time, and `ru_maxrss` in bytes.
    pub children_cpu_ms: u64,
    pub children_max_rss_bytes: u64,
}

/// `cpu_ms` and `peak_rss_bytes` from what each source said (see the module's comment).
pub fn command_cost(sources: &CostSources) -> (u64, u64) {
    let cpu_ms = (sources.cgroup_cpu_usec.map(|usec| usec / 1000))
        .unwrap_or(sources.sampled_cpu_ms.max(sources.children_cpu_ms));
    let sampled_peak = sources
        .sampled_peak_rss_bytes
        .max(sources.children_max_rss_bytes);
    let peak = sources.cgroup_memory_peak.unwrap_or(sampled_peak);
    (cpu_ms, peak)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proc(pid: i32, cpu_ticks: u64, rss_pages: u64) -> ProcStat {
        ProcStat {
            pid,
            state: b'S',
            start_ticks: 7,
            cpu_ticks,
            rss_pages,
            ..ProcStat::default()
        }
    }

    #[test]
    fn a_process_gone_keeps_its_last_reading() {
        let mut cost = SampledCost::default();
        cost.sampled(&[proc(1, 5, 10), proc(2, 3, 20)]);
        cost.sampled(&[proc(1, 9, 10)]);
        // 2 left with 3 ticks; 1 is at 9 now.
        assert_eq!(cost.cpu_ticks(), 12);
        cost.sampled(&[proc(3, 1, 5)]);
        assert_eq!(cost.cpu_ticks(), 13);
        // The whole tree at once, at its largest.
        assert_eq!(cost.peak_rss_pages(), 30);
    }

    #[test]
    fn a_zombie_counts_its_time_not_its_memory() {
        let mut cost = SampledCost::default();
        let zombie = ProcStat {
            state: b'Z',
            ..proc(1, 4, 99)
        };
        cost.sampled(&[zombie]);
        assert_eq!((cost.cpu_ticks(), cost.peak_rss_pages()), (4, 0));
    }

    #[test]
    fn the_cgroup_wins_and_otherwise_the_larger_lower_bound() {
        let sources = CostSources {
            sampled_cpu_ms: 40,
            children_cpu_ms: 250,
            sampled_peak_rss_bytes: 8 << 20,
            children_max_rss_bytes: 3 << 20,
            ..CostSources::default()
        };
        assert_eq!(command_cost(&sources), (250, 8 << 20));
        let cgroup = CostSources {
            cgroup_cpu_usec: Some(300_500),
            cgroup_memory_peak: Some(9 << 20),
            ..sources
        };
        assert_eq!(command_cost(&cgroup), (300, 9 << 20));
    }
}
