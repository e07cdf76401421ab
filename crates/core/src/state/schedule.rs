//! When the broker walks its tree for the record: soon after anything that may have changed
//! it, and ever more rarely while nothing does.
//!
//! A walk reads every entry of /proc, so its cost grows with the processes on the machine;
//! walked every second, 100 idle brokers took a quarter of a core. Forks leave no trace in
//! the broker (only exits do: SIGCHLD), so a silent command is still walked now and then, at
//! intervals that double from [`FIRST`] to [`MAX`] while the tree stays the same.

use std::time::Duration;

use std::time::Instant;

/// The interval after a walk that found a change, or after activity: the old fixed rate, so
/// a busy command's tree is recorded as closely as before.
pub const FIRST: Duration = Duration::from_secs(1);
/// The longest a tree goes unwalked while the broker hears nothing from or about it.
pub const MAX: Duration = Duration::from_secs(30);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScanSchedule {
    next: Instant,
    interval: Duration,
    /// When the last walk ran.
    last: Instant,
    /// Whether something happened since the last walk that may have changed the tree.
    active: bool,
}

impl ScanSchedule {
    /// A schedule whose first walk is due at `first`.
    pub fn new(first: Instant) -> ScanSchedule {
        ScanSchedule {
            next: first,
            interval: FIRST,
            last: first,
            active: false,
        }
    }

    /// When the next walk is due.
    pub fn next(&self) -> Instant {
        self.next
    }

    /// Whether nothing happened since the last walk that may have changed the tree (a
    /// child ended, the command wrote, a request came).
    pub fn quiet(&self) -> bool {
        !self.active
    }

    pub fn is_due(&self, now: Instant) -> bool {
        now >= self.next
    }

    /// Something that may have changed the tree happened (a child ended, the command wrote,
    /// a request came): walk within [`FIRST`] of the last walk, at once if that was longer
    /// ago, and start the backoff over.
    pub fn activity(&mut self, now: Instant) {
        self.active = true;
        self.interval = FIRST;
        self.next = self.next.min((self.last + FIRST).max(now));
    }

    /// A walk ran at `now`; `changed` says whether it found a tree other than the last.
    pub fn walked(&mut self, now: Instant, changed: bool) {
        self.interval = if changed || self.active {
            FIRST
        } else {
            (self.interval * 2).min(MAX)
        };
        self.active = false;
        self.last = now;
        self.next = now + self.interval;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    /// Walks whenever due until `until`, finding no change; returns the gaps between walks.
    fn idle_gaps(schedule: &mut ScanSchedule, until: Instant) -> Vec<u64> {
        let mut gaps = Vec::new();
        while schedule.next() <= until {
            let now = schedule.next();
            let gap = now.saturating_duration_since(schedule.last);
            gaps.push(gap.as_secs());
            schedule.walked(now, false);
        }
        gaps
    }

    #[test]
    fn an_unchanging_tree_is_walked_ever_more_rarely_up_to_the_maximum() {
        let t0 = Instant::now();
        let mut schedule = ScanSchedule::new(t0);
        schedule.walked(t0, true);
        let gaps = idle_gaps(&mut schedule, t0 + secs(200));
        assert_eq!(gaps, [1, 2, 4, 8, 16, 30, 30, 30, 30, 30]);
    }

    #[test]
    fn a_change_brings_the_interval_back_to_the_first() {
        let t0 = Instant::now();
        let mut schedule = ScanSchedule::new(t0);
        schedule.walked(t0, false);
        schedule.walked(t0 + secs(2), false);
        assert_eq!(schedule.next(), t0 + secs(6));
        schedule.walked(t0 + secs(6), true);
        assert_eq!(schedule.next(), t0 + secs(7));
    }

    #[test]
    fn activity_after_a_long_silence_walks_at_once() {
        let t0 = Instant::now();
        let mut schedule = ScanSchedule::new(t0);
        schedule.walked(t0, false);
        schedule.walked(t0 + secs(2), false);
        schedule.walked(t0 + secs(6), false);
        assert_eq!(schedule.next(), t0 + secs(14));
        schedule.activity(t0 + secs(10));
        assert!(schedule.is_due(t0 + secs(10)));
        // The walk found nothing new, but activity resets the backoff.
        schedule.walked(t0 + secs(10), false);
        assert_eq!(schedule.next(), t0 + secs(11));
    }

    #[test]
    fn steady_activity_walks_at_most_once_per_first_interval() {
        let t0 = Instant::now();
        let mut schedule = ScanSchedule::new(t0);
        schedule.walked(t0, true);
        for ms in (10..1000).step_by(10) {
            let now = t0 + Duration::from_millis(ms);
            schedule.activity(now);
            assert!(!schedule.is_due(now), "walked again {ms} ms after the last");
        }
        assert_eq!(schedule.next(), t0 + FIRST);
        schedule.walked(t0 + FIRST, false);
        schedule.activity(t0 + FIRST + Duration::from_millis(5));
        assert_eq!(schedule.next(), t0 + FIRST * 2);
    }

    #[test]
    fn activity_never_delays_a_walk_already_due_sooner() {
        let t0 = Instant::now();
        let mut schedule = ScanSchedule::new(t0 + Duration::from_millis(50));
        schedule.activity(t0 + Duration::from_millis(10));
        assert_eq!(schedule.next(), t0 + Duration::from_millis(50));
    }
}
