//! Process sampling for the process-tree pane: which processes each broker has below it, and
//! what they cost (CPU, memory). Sampling runs on its own thread and sends whole snapshots;
//! turning one into rows is the pure [`tree::build_tree`].

pub mod machine;
mod pace;
mod scan;
mod thread;
pub mod tree;

use std::collections::{HashMap, HashSet};
use std::time::Instant;

pub use machine::Machine;
pub use thread::spawn_sampler;
pub use tree::{TreeRow, build_tree};

use crate::procfs::{self, ProcStat};
use scan::ScannedProcess;
use tether_protocol::protocol::capped_argv;

pub use tether_protocol::names::KEEPER_COMM;

#[derive(Debug, Clone, PartialEq)]
pub struct ProcessInfo {
    pub pid: i32,
    pub ppid: i32,
    pub pgid: i32,
    /// The session: with a terminal the command leads one, and its jobs in other groups of it
    /// are no escapees.
    pub sid: i32,
    /// As in `/proc/PID/stat`: `R`, `S`, `D`, `T`, `Z` (zombies are included), ...
    pub state: char,
    /// Per core: 100 is one full core. Measured between successive samples; the first
    /// sample that sees a process gives its average since it started.
    pub cpu_percent: f32,
    pub rss_bytes: u64,
    /// Wall-clock start, milliseconds since the Unix epoch.
    pub start_ms: u64,
    pub argv: Vec<String>,
}

#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// broker pid -> the broker itself (first) and all its live descendants, parents before
    /// children. A broker that no longer exists has no entry.
    pub trees: HashMap<i32, Vec<ProcessInfo>>,
    /// The whole machine, for the header; `None` before the first reading.
    pub machine: Option<Machine>,
}

/// What is remembered about one process (a pid and start time name it for good).
struct Known {
    /// The command name when `argv` was read: it changes on `execve`, which says when a
    /// cached argv (maybe read between fork and exec) has gone stale.
    comm: String,
    argv: Vec<String>,
    start_ms: u64,
    /// CPU time used (ms) and when that was read: the baseline of the next measurement.
    cpu_baseline: Option<(u64, Instant)>,
    cpu_percent: f32,
}

/// Samples the trees below a set of brokers. Costs one read of `/proc/PID/stat` per process
/// on the machine per sample (CPU time and memory come from the same read); each argv is
/// read once.
pub struct Sampler {
    known: HashMap<(i32, u64), Known>,
    ticks_per_second: u64,
    page_size: u64,
    /// Processes on the machine at the last sample.
    processes: usize,
}

impl Default for Sampler {
    fn default() -> Self {
        Self::new()
    }
}

impl Sampler {
    pub fn new() -> Self {
        Self {
            known: HashMap::new(),
            ticks_per_second: crate::procfs::clock_ticks_per_second(),
            page_size: crate::procfs::page_size(),
            processes: 0,
        }
    }

    pub fn sample(&mut self, brokers: &[i32]) -> Snapshot {
        let scanned = scan::all_processes();
        self.processes = scanned.len();
        // The moment the CPU times were read, near enough: the scan takes milliseconds.
        let now = Instant::now();
        let taken_ms = crate::clock::now_ms();
        let stats: Vec<ProcStat> = scanned.iter().map(|p| p.stat).collect();
        let by_pid: HashMap<i32, &ScannedProcess> =
            scanned.iter().map(|p| (p.stat.pid, p)).collect();

        let family = procfs::Family::of(&stats);
        let mut members: Vec<(i32, Vec<&ScannedProcess>)> = Vec::new();
        // A broker below another (an agent's shell call's, under the agent's) has a row of
        // its own: its tree is its command's, not the agent's.
        let listed: HashSet<i32> = brokers.iter().copied().collect();
        let mut seen_brokers = HashSet::new();
        for &broker in brokers {
            if !seen_brokers.insert(broker) {
                continue;
            }
            let Some(&root) = by_pid.get(&broker) else {
                continue;
            };
            let mut tree = vec![root];
            // The broker's keepers (a notify run, a readiness probe) and all they started. A
            // keeper is a fork of its broker that never execs, so it runs its broker's program;
            // a command that names itself as a keeper to hide from the tree does not.
            let keeper = |pid: i32| {
                by_pid.get(&pid).is_some_and(|p| {
                    p.stat.ppid == broker
                        && p.comm.as_bytes() == KEEPER_COMM.to_bytes()
                        && procfs::same_program(pid, broker)
                })
            };
            tree.extend(
                family
                    .descendants_but(broker, |pid| listed.contains(&pid) || keeper(pid))
                    .iter()
                    .filter_map(|s| by_pid.get(&s.pid).copied()),
            );
            members.push((broker, tree));
        }

        let mut live = HashSet::new();
        let mut trees = HashMap::with_capacity(members.len());
        for (broker, tree) in members {
            let infos = tree
                .into_iter()
                .map(|process| {
                    live.insert((process.stat.pid, process.stat.start_ticks));
                    self.describe(process, now, taken_ms)
                })
                .collect();
            trees.insert(broker, infos);
        }
        self.known.retain(|key, _| live.contains(key));
        Snapshot {
            trees,
            machine: None,
        }
    }

    /// How many processes the last sample saw on the machine.
    pub fn processes(&self) -> usize {
        self.processes
    }

    fn describe(&mut self, process: &ScannedProcess, now: Instant, now_ms: u64) -> ProcessInfo {
        let stat = &process.stat;
        let known = self
            .known
            .entry((stat.pid, stat.start_ticks))
            .or_insert_with(|| Known {
                comm: String::new(),
                argv: Vec::new(),
                start_ms: procfs::start_time_ms(stat),
                cpu_baseline: None,
                cpu_percent: 0.0,
            });
        if known.argv.is_empty() || known.comm != process.comm {
            let argv = procfs::cmdline(stat.pid);
            // `[comm]` stands for an empty command line: a zombie's, or that of a process
            // caught in exec, its new name set and its new command line not yet. It is
            // shown, and read again next time.
            let settled = argv != [format!("[{}]", process.comm)];
            if !argv.is_empty() {
                // Cut as the journal cuts it: the live pane then shows what a post-mortem
                // shows, and a megabyte of argv is not cloned for every sample.
                known.argv = capped_argv(argv);
                known.comm = if settled {
                    process.comm.clone()
                } else {
                    String::new()
                };
            }
        }
        let argv = if known.argv.is_empty() {
            vec![format!("[{}]", process.comm)]
        } else {
            known.argv.clone()
        };
        known.measure_cpu(stat.cpu_ticks * 1000 / self.ticks_per_second, now, now_ms);
        ProcessInfo {
            pid: stat.pid,
            ppid: stat.ppid,
            pgid: stat.pgid,
            sid: stat.sid,
            state: char::from(stat.state),
            cpu_percent: known.cpu_percent,
            rss_bytes: stat.rss_pages * self.page_size,
            start_ms: known.start_ms,
            argv,
        }
    }
}

impl Known {
    /// Updates `cpu_percent` from the CPU time used so far. A span under 100 ms (a
    /// `sample_now` right after a tick) says too little: the last figure stands and the
    /// baseline stays. On first sight the figure is the average since the process started.
    fn measure_cpu(&mut self, used_ms: u64, now: Instant, now_ms: u64) {
        const SHORTEST_MS: u128 = 100;
        let (used, wall_ms) = match self.cpu_baseline {
            Some((before, then)) => (
                used_ms.saturating_sub(before),
                now.duration_since(then).as_millis(),
            ),
            None => (used_ms, u128::from(now_ms.saturating_sub(self.start_ms))),
        };
        if wall_ms >= SHORTEST_MS {
            self.cpu_percent = (used as f64 * 100.0 / wall_ms as f64) as f32;
        } else if self.cpu_baseline.is_some() {
            return;
        }
        self.cpu_baseline = Some((used_ms, now));
    }
}

#[cfg(test)]
mod tests;
