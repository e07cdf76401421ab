//! The whole machine's pressure for the header: CPU (total and per core), memory, swap and
//! load, read with `sysinfo`, which is good at exactly this.
//!
//! Per-process sampling does not use sysinfo: the project's own `/proc` reader (`scan`) took
//! 12.7 ms for 1,000 processes against 36 ms for sysinfo's process refresh, which reads more
//! files per process than the tree pane needs (`benches/sysinfo_vs_proc.rs` measures both).
//!
//! sysinfo's Linux process refresh raises the open-files soft limit to the hard one the first
//! time it counts open files (`remaining_files` in its `system.rs`), and brokers, then the
//! commands, would inherit that from the TUI. Only the refreshes below are called, which do
//! not touch it; the limit is still read before and put back after every refresh, so that a
//! future sysinfo that does cannot change what launched commands inherit.

use nix::sys::resource::{Resource, getrlimit, setrlimit};
use sysinfo::{CpuRefreshKind, MemoryRefreshKind, RefreshKind, System};

/// One reading of the machine.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Machine {
    /// All cores together, 0–100; `None` until two readings are far enough apart to say.
    pub cpu_percent: Option<f32>,
    /// Each core, 0–100 (empty while `cpu_percent` is `None`).
    pub cores: Vec<f32>,
    pub memory_used: u64,
    pub memory_total: u64,
    pub swap_used: u64,
    pub swap_total: u64,
    /// Over 1, 5 and 15 minutes.
    pub load: [f64; 3],
    pub processes: usize,
}

/// Memory or swap this full (or fuller) is a runaway showing itself.
pub const NEAR_FULL: f64 = 0.9;

impl Machine {
    pub fn memory_near_full(&self) -> bool {
        near_full(self.memory_used, self.memory_total)
    }

    pub fn swap_near_full(&self) -> bool {
        near_full(self.swap_used, self.swap_total)
    }
}

fn near_full(used: u64, total: u64) -> bool {
    total > 0 && used as f64 >= total as f64 * NEAR_FULL
}

pub struct MachineSampler {
    system: System,
    /// CPU usage is measured between two refreshes: the first says nothing.
    measured_once: bool,
}

impl Default for MachineSampler {
    fn default() -> Self {
        Self::new()
    }
}

impl MachineSampler {
    pub fn new() -> Self {
        Self {
            system: keeping_open_files_limit(|| {
                System::new_with_specifics(
                    RefreshKind::nothing()
                        .with_cpu(CpuRefreshKind::nothing().with_cpu_usage())
                        .with_memory(MemoryRefreshKind::everything()),
                )
            }),
            measured_once: false,
        }
    }

    /// Reads the machine; `processes` comes from the caller's own `/proc` scan.
    pub fn sample(&mut self, processes: usize) -> Machine {
        let system = &mut self.system;
        keeping_open_files_limit(|| {
            system.refresh_cpu_usage();
            system.refresh_memory();
        });
        let measured = std::mem::replace(&mut self.measured_once, true);
        let load = System::load_average();
        Machine {
            cpu_percent: measured.then(|| self.system.global_cpu_usage()),
            cores: if measured {
                self.system.cpus().iter().map(|c| c.cpu_usage()).collect()
            } else {
                Vec::new()
            },
            memory_used: self.system.used_memory(),
            memory_total: self.system.total_memory(),
            swap_used: self.system.used_swap(),
            swap_total: self.system.total_swap(),
            load: [load.one, load.five, load.fifteen],
            processes,
        }
    }
}

/// Runs `f` and puts RLIMIT_NOFILE back as it was if `f` changed it: what the TUI's children
/// inherit stays what the TUI was given.
fn keeping_open_files_limit<T>(f: impl FnOnce() -> T) -> T {
    let before = open_files_limit();
    let result = f();
    if let Some(before) = before
        && open_files_limit().is_some_and(|now| now != before)
    {
        // Lowering the soft limit back is always allowed. Should it fail, nothing better can
        // be done than to carry on.
        let _ = setrlimit(Resource::RLIMIT_NOFILE, before.0, before.1);
    }
    result
}

/// The open-files limit (soft, hard).
pub fn open_files_limit() -> Option<(u64, u64)> {
    getrlimit(Resource::RLIMIT_NOFILE).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// The limit is the whole test process's: the tests that read or change it take turns.
    static LIMIT: Mutex<()> = Mutex::new(());

    #[test]
    fn near_full_from_ninety_percent() {
        assert!(!near_full(89, 100));
        assert!(near_full(90, 100));
        assert!(near_full(100, 100));
        assert!(!near_full(0, 0), "no swap is not full swap");
    }

    #[test]
    fn reads_the_machine_and_leaves_the_open_files_limit_alone() {
        let _turn = LIMIT.lock().unwrap_or_else(|e| e.into_inner());
        let before = open_files_limit().expect("getrlimit");
        let mut sampler = MachineSampler::new();
        let first = sampler.sample(7);
        assert_eq!(first.cpu_percent, None, "one reading says nothing of CPU");
        assert!(first.memory_total > 0 && first.memory_used <= first.memory_total);
        assert_eq!(first.processes, 7);
        std::thread::sleep(sysinfo::MINIMUM_CPU_UPDATE_INTERVAL);
        let second = sampler.sample(7);
        assert!(second.cpu_percent.is_some());
        assert!(!second.cores.is_empty());
        let after = open_files_limit().expect("getrlimit");
        assert_eq!(after, before);
    }

    #[test]
    fn a_changed_limit_is_put_back() {
        let _turn = LIMIT.lock().unwrap_or_else(|e| e.into_inner());
        let before = open_files_limit().expect("getrlimit");
        if before.0 == before.1 {
            return; // Nothing to raise: the soft limit already is the hard one.
        }
        keeping_open_files_limit(|| {
            // Raising the soft limit up to the hard one is allowed.
            setrlimit(Resource::RLIMIT_NOFILE, before.1, before.1).expect("setrlimit");
        });
        let after = open_files_limit().expect("getrlimit");
        assert_eq!(after.0, before.0);
    }
}
