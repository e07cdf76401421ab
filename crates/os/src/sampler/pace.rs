//! How often the sampler samples: every second while anything watched changes, backing off
//! to [`IDLE_INTERVAL`] while nothing does, so that a TUI watching a hundred sleeping
//! commands does not walk all of /proc every second for nothing.
//!
//! "Changes" means a process came or went, or one used a noticeable share of a core; an
//! operator's key brings the pace back at once (see [`Pace::attend`]).

use std::time::Duration;

use super::Snapshot;

/// The longest the sampler waits between two samples of trees that do not change.
pub const IDLE_INTERVAL: Duration = Duration::from_secs(8);
/// A process using this share of a core (percent) or more counts as activity.
const BUSY_PERCENT: f32 = 1.0;

#[derive(Debug, Clone)]
pub struct Pace {
    base: Duration,
    current: Duration,
    /// The processes of the last sample, sorted: (pid, start time).
    last: Vec<(i32, u64)>,
}

impl Pace {
    pub fn new(base: Duration) -> Pace {
        Pace {
            base,
            current: base,
            last: Vec::new(),
        }
    }

    /// The interval until the next sample, after `snapshot`: the base interval when it
    /// differs from the one before or shows a busy process, else twice the last interval, up
    /// to [`IDLE_INTERVAL`] (or the base, if that is longer).
    pub fn after(&mut self, snapshot: &Snapshot) -> Duration {
        let mut processes: Vec<(i32, u64)> = snapshot
            .trees
            .values()
            .flatten()
            .map(|p| (p.pid, p.start_ms))
            .collect();
        processes.sort_unstable();
        let busy = snapshot
            .trees
            .values()
            .flatten()
            .any(|p| p.cpu_percent >= BUSY_PERCENT && p.state != 'Z');
        let changed = processes != self.last;
        self.last = processes;
        self.current = if busy || changed {
            self.base
        } else {
            (self.current * 2).min(IDLE_INTERVAL.max(self.base))
        };
        self.current
    }

    /// Someone is looking (a key was pressed): back to the base interval.
    pub fn attend(&mut self) {
        self.current = self.base;
    }

    pub fn base(&self) -> Duration {
        self.base
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sampler::ProcessInfo;

    fn snapshot(processes: &[(i32, f32)]) -> Snapshot {
        let infos = processes
            .iter()
            .map(|&(pid, cpu_percent)| ProcessInfo {
                pid,
                ppid: 1,
                pgid: pid,
                sid: pid,
                state: 'S',
                cpu_percent,
                rss_bytes: 0,
                start_ms: 1_000,
                argv: Vec::new(),
            })
            .collect();
        let mut snapshot = Snapshot::default();
        snapshot.trees.insert(1, infos);
        snapshot
    }

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn quiet_trees_back_off_to_the_idle_interval() {
        let mut pace = Pace::new(S);
        let idle = snapshot(&[(10, 0.0), (11, 0.2)]);
        let waits: Vec<u64> = (0..6).map(|_| pace.after(&idle).as_secs()).collect();
        // The first sample is a change (nothing was known before).
        assert_eq!(waits, [1, 2, 4, 8, 8, 8]);
    }

    #[test]
    fn a_new_process_or_a_busy_one_brings_the_base_interval_back() {
        let mut pace = Pace::new(S);
        let idle = snapshot(&[(10, 0.0)]);
        for _ in 0..5 {
            pace.after(&idle);
        }
        assert_eq!(pace.after(&snapshot(&[(10, 0.0), (12, 0.0)])), S);
        for _ in 0..5 {
            pace.after(&snapshot(&[(10, 0.0), (12, 0.0)]));
        }
        assert_eq!(pace.after(&snapshot(&[(10, 35.0), (12, 0.0)])), S);
        // A process that left is a change too.
        assert_eq!(pace.after(&snapshot(&[(10, 0.0)])), S);
    }

    #[test]
    fn a_key_brings_the_base_interval_back() {
        let mut pace = Pace::new(S);
        let idle = snapshot(&[(10, 0.0)]);
        for _ in 0..5 {
            pace.after(&idle);
        }
        pace.attend();
        assert_eq!(pace.after(&idle), 2 * S);
    }
}
