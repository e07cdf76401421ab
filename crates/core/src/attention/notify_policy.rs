//! What the broker's state machine decides about the `[notify] command`: whether a run may
//! start, which runs are going and when each is overdue. Running it is the OS layer's
//! (`attention::notify`: a keeper process, bounded).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// How long one run may take.
pub const NOTIFY_TIMEOUT: Duration = Duration::from_secs(5);
/// Runs a minute per command, at most.
pub const PER_MINUTE: usize = 3;

/// Whether `argv` can be run at all: not empty, and no NUL (which no exec takes).
pub fn runnable(argv: &[String]) -> bool {
    !argv.is_empty() && argv.iter().all(|a| !a.contains('\0'))
}

/// What the broker's state machine decides about the notify command: whether a run may
/// start now (at most [`PER_MINUTE`], never again once it failed), which runs are going and
/// when each is overdue, and the one failure it journals. It starts, looks at and kills
/// nothing: the interpreter's `Notifier` (the tether crate's `attention::notify`) does,
/// told by outputs, and says how each run ended as an input.
#[derive(Debug, Default)]
pub struct NotifyPolicy {
    /// The keepers' pids of runs still going, and when each is killed at the latest.
    running: Vec<(i32, Instant)>,
    /// When the runs of the last minute started.
    started: VecDeque<Instant>,
    given_up: bool,
}

impl NotifyPolicy {
    /// Whether a run may start at `now`; if so, it counts as started.
    pub fn admit(&mut self, now: Instant) -> bool {
        if self.given_up {
            return false;
        }
        while self
            .started
            .front()
            .is_some_and(|at| now.saturating_duration_since(*at) >= Duration::from_secs(60))
        {
            self.started.pop_front();
        }
        if self.started.len() >= PER_MINUTE {
            return false;
        }
        self.started.push_back(now);
        true
    }

    /// A run started at `now` as keeper `pid`; a backstop past the keeper's own timeout.
    pub fn started(&mut self, pid: i32, now: Instant) {
        self.running
            .push((pid, now + NOTIFY_TIMEOUT + Duration::from_secs(1)));
    }

    /// A run could not start (`message` says why): the failure to journal.
    pub fn start_failed(&mut self, message: String) -> String {
        self.give_up(message)
    }

    /// Run `pid` ended, as `failure` says (`None`: it did its job); the failure to journal,
    /// the first only.
    pub fn ended(&mut self, pid: i32, failure: Option<String>) -> Option<String> {
        self.running.retain(|(p, _)| *p != pid);
        let failure = failure?;
        (!self.given_up).then(|| self.give_up(failure))
    }

    /// The pids of runs still going, which the tree walk leaves out.
    pub fn pids(&self) -> Vec<i32> {
        self.running.iter().map(|r| r.0).collect()
    }

    pub fn is_running(&self) -> bool {
        !self.running.is_empty()
    }

    /// The earliest deadline of a run still going.
    pub fn deadline(&self) -> Option<Instant> {
        self.running.iter().map(|r| r.1).min()
    }

    /// The runs past their deadline at `now`, to be killed.
    pub fn overdue(&self, now: Instant) -> Vec<i32> {
        self.running
            .iter()
            .filter(|r| now >= r.1)
            .map(|r| r.0)
            .collect()
    }

    fn give_up(&mut self, message: String) -> String {
        self.given_up = true;
        format!("{message}; not run again for this command")
    }
}
