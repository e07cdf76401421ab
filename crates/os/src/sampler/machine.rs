//! The whole machine's pressure for the header: CPU (total and per core), memory, swap and
//! load, read from `/proc/stat`, `/proc/meminfo` and `/proc/loadavg`: three small files whose
//! formats proc(5) fixes, read by tether itself rather than by a crate for these alone.
//!
//! CPU use is measured between two readings of `/proc/stat`, as top and htop do: the share
//! of the time that passed that was not idle (idle and iowait), steal counted as busy. Memory
//! in use is `MemTotal - MemAvailable`, what free(1) calls used.
//!
//! Nothing here changes the process (no rlimit is raised, no file is left open): what the
//! TUI's brokers and commands inherit stays what the TUI was given.

use std::fs;

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

/// A CPU's time since boot from one line of `/proc/stat`, in clock ticks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuTimes {
    /// Every tick counted: user, nice, system, idle, iowait, irq, softirq, steal. Guest time
    /// is already inside user and nice, so it is not added again.
    pub total: u64,
    /// Ticks with nothing to run: idle and iowait.
    pub idle: u64,
}

impl CpuTimes {
    /// The share of the ticks between `earlier` and `self` that were busy, 0–100; `None`
    /// when no tick passed (two readings too close together to say).
    pub fn percent_since(&self, earlier: &CpuTimes) -> Option<f32> {
        let total = self.total.checked_sub(earlier.total)?;
        if total == 0 {
            return None;
        }
        let idle = self.idle.saturating_sub(earlier.idle).min(total);
        Some(((total - idle) as f64 * 100.0 / total as f64) as f32)
    }
}

/// `/proc/stat`'s CPU lines: all cores together first (`cpu`), then each core (`cpuN`) in
/// order. Empty when the text has no `cpu` line.
pub fn parse_cpu_times(stat: &str) -> Vec<CpuTimes> {
    stat.lines()
        .take_while(|line| line.starts_with("cpu"))
        .filter_map(|line| {
            let mut fields = line.split_ascii_whitespace();
            fields.next()?;
            let ticks: Vec<u64> = fields.take(8).map_while(|f| f.parse().ok()).collect();
            // user nice system idle are in every kernel since 2.4; iowait and on, since 2.6.
            if ticks.len() < 4 {
                return None;
            }
            let idle = ticks[3] + ticks.get(4).copied().unwrap_or(0);
            Some(CpuTimes {
                total: ticks.iter().sum(),
                idle,
            })
        })
        .collect()
}

/// Memory and swap from `/proc/meminfo`, in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Memory {
    pub used: u64,
    pub total: u64,
    pub swap_used: u64,
    pub swap_total: u64,
}

/// Parses `/proc/meminfo` (`Name:   1234 kB` lines). Kernels before 3.14 have no
/// `MemAvailable`: then free, buffers, page cache and reclaimable slab count as available.
pub fn parse_meminfo(meminfo: &str) -> Memory {
    let mut available = None;
    let (mut total, mut free, mut buffers, mut cached, mut reclaimable) = (0, 0, 0, 0, 0);
    let (mut swap_total, mut swap_free) = (0, 0);
    for line in meminfo.lines() {
        let Some((name, rest)) = line.split_once(':') else {
            continue;
        };
        let Some(kib) = rest
            .split_ascii_whitespace()
            .next()
            .and_then(|n| n.parse::<u64>().ok())
        else {
            continue;
        };
        let bytes = kib.saturating_mul(1024);
        match name {
            "MemTotal" => total = bytes,
            "MemFree" => free = bytes,
            "MemAvailable" => available = Some(bytes),
            "Buffers" => buffers = bytes,
            "Cached" => cached = bytes,
            "SReclaimable" => reclaimable = bytes,
            "SwapTotal" => swap_total = bytes,
            "SwapFree" => swap_free = bytes,
            _ => {}
        }
    }
    let available = available.unwrap_or(free + buffers + cached + reclaimable);
    Memory {
        used: total.saturating_sub(available),
        total,
        swap_used: swap_total.saturating_sub(swap_free),
        swap_total,
    }
}

/// The load averages over 1, 5 and 15 minutes from `/proc/loadavg`.
pub fn parse_loadavg(loadavg: &str) -> Option<[f64; 3]> {
    let mut fields = loadavg.split_ascii_whitespace().map(|f| f.parse().ok());
    Some([fields.next()??, fields.next()??, fields.next()??])
}

/// Reads the machine, keeping the previous CPU reading to measure the next against.
#[derive(Debug, Default)]
pub struct MachineSampler {
    /// The last reading of `/proc/stat`: CPU use is measured between two.
    cpus: Vec<CpuTimes>,
    /// The last measure (all cores, each), said again when a sample comes before the next
    /// clock tick (a sample asked for at once after the periodic one).
    last: (Option<f32>, Vec<f32>),
}

impl MachineSampler {
    pub fn new() -> Self {
        Self::default()
    }

    /// Reads the machine; `processes` comes from the caller's own `/proc` scan. A file that
    /// cannot be read leaves its figures at zero (the header then shows none).
    pub fn sample(&mut self, processes: usize) -> Machine {
        let read = |path| fs::read_to_string(path).unwrap_or_default();
        let cpus = parse_cpu_times(&read("/proc/stat"));
        let memory = parse_meminfo(&read("/proc/meminfo"));
        let load = parse_loadavg(&read("/proc/loadavg")).unwrap_or_default();
        let (cpu_percent, cores) = self.measure(cpus);
        Machine {
            cpu_percent,
            cores,
            memory_used: memory.used,
            memory_total: memory.total,
            swap_used: memory.swap_used,
            swap_total: memory.swap_total,
            load,
            processes,
        }
    }

    /// CPU use since the last reading, all cores and each; keeps `cpus` for the next.
    fn measure(&mut self, cpus: Vec<CpuTimes>) -> (Option<f32>, Vec<f32>) {
        let earlier = std::mem::replace(&mut self.cpus, cpus);
        let (Some(now), Some(before)) = (self.cpus.first(), earlier.first()) else {
            return (None, Vec::new());
        };
        let Some(all) = now.percent_since(before) else {
            // No tick passed: keep the older reading to measure the next one against, and
            // say the last measure again rather than none.
            self.cpus = earlier;
            return self.last.clone();
        };
        let cores = self.cpus[1..]
            .iter()
            .zip(&earlier[1..])
            .map(|(now, before)| now.percent_since(before).unwrap_or(0.0))
            .collect();
        self.last = (Some(all), cores);
        self.last.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// From a two-core machine (Linux 6.x).
    const STAT: &str = "cpu  1218789 599 293201 867013 14841 0 2044 759 0 0\n\
        cpu0 581272 288 140553 470073 5440 0 173 381 0 0\n\
        cpu1 637517 311 152647 396940 9401 0 1870 378 0 0\n\
        intr 123 0 0\nctxt 456\n";

    #[test]
    fn near_full_from_ninety_percent() {
        assert!(!near_full(89, 100));
        assert!(near_full(90, 100));
        assert!(near_full(100, 100));
        assert!(!near_full(0, 0), "no swap is not full swap");
    }

    #[test]
    fn cpu_lines_all_cores_first() {
        let cpus = parse_cpu_times(STAT);
        assert_eq!(cpus.len(), 3);
        assert_eq!(
            cpus[0],
            CpuTimes {
                total: 1218789 + 599 + 293201 + 867013 + 14841 + 2044 + 759,
                idle: 867013 + 14841,
            }
        );
        assert!(parse_cpu_times("intr 1 2\n").is_empty());
        assert!(parse_cpu_times("cpu 1 2\n").is_empty(), "too few fields");
    }

    #[test]
    fn cpu_percent_is_the_busy_share_of_the_ticks_between_two_readings() {
        let before = CpuTimes {
            total: 1000,
            idle: 800,
        };
        let after = CpuTimes {
            total: 1200,
            idle: 850,
        };
        assert_eq!(after.percent_since(&before), Some(75.0));
        assert_eq!(before.percent_since(&before), None, "no tick passed");
        assert_eq!(
            before.percent_since(&after),
            None,
            "a counter that went back"
        );
    }

    #[test]
    fn the_first_reading_says_nothing_of_cpu_the_second_does() {
        let mut sampler = MachineSampler::new();
        assert_eq!(sampler.measure(parse_cpu_times(STAT)), (None, Vec::new()));
        let later = "cpu  1218889 599 293201 867113 14841 0 2044 759 0 0\n\
            cpu0 581372 288 140553 470073 5440 0 173 381 0 0\n\
            cpu1 637517 311 152647 397040 9401 0 1870 378 0 0\n";
        assert_eq!(
            sampler.measure(parse_cpu_times(later)),
            (Some(50.0), vec![100.0, 0.0])
        );
        // The same again: no tick passed; the last measure is said again, and the reading
        // it was made from is kept to measure the next one against.
        assert_eq!(
            sampler.measure(parse_cpu_times(later)),
            (Some(50.0), vec![100.0, 0.0])
        );
        assert_eq!(sampler.cpus, parse_cpu_times(later));
    }

    #[test]
    fn memory_in_use_is_total_less_available() {
        let memory = parse_meminfo(
            "MemTotal:       24683772 kB\nMemFree:          642668 kB\n\
             MemAvailable:   23698660 kB\nBuffers:          100 kB\nSwapCached:  0 kB\n\
             SwapTotal:        2000 kB\nSwapFree:         1500 kB\nHugePages_Total:       0\n",
        );
        assert_eq!(
            memory,
            Memory {
                used: (24683772 - 23698660) * 1024,
                total: 24683772 * 1024,
                swap_used: 500 * 1024,
                swap_total: 2000 * 1024,
            }
        );
        let old_kernel = parse_meminfo(
            "MemTotal: 1000 kB\nMemFree: 100 kB\nBuffers: 50 kB\nCached: 200 kB\n\
             SReclaimable: 50 kB\n",
        );
        assert_eq!(old_kernel.used, 600 * 1024);
    }

    #[test]
    fn load_averages() {
        assert_eq!(
            parse_loadavg("2.04 2.83 3.68 2/135 21024\n"),
            Some([2.04, 2.83, 3.68])
        );
        assert_eq!(parse_loadavg("2.04\n"), None);
    }

    /// The open-files limit (soft, hard).
    fn open_files_limit() -> nix::Result<(u64, u64)> {
        nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
    }

    #[test]
    fn reads_this_machine_and_leaves_the_open_files_limit_alone() {
        let before = open_files_limit().expect("getrlimit");
        let mut sampler = MachineSampler::new();
        let first = sampler.sample(7);
        assert_eq!(first.cpu_percent, None, "one reading says nothing of CPU");
        assert!(first.memory_total > 0 && first.memory_used <= first.memory_total);
        assert_eq!(first.processes, 7);
        assert!(!sampler.cpus.is_empty(), "/proc/stat has CPU lines");
        assert_eq!(open_files_limit().expect("getrlimit"), before);
    }
}
