//! An agent waiting for its human (`tether agent`): the part of the detector that decides it,
//! pure as the rest. The agent waits for you when a thread of its waits on its terminal (a
//! read, or a poll, epoll or select set that holds it: `super::waits`), no command of its
//! runs in the foreground, and for the threshold (`input_after`) it wrote nothing, started
//! or ended no command, was typed nothing to and used no CPU.
//!
//! A command it wrote after (after a look first saw the command run) is in the background:
//! it went on without waiting for it (Claude Code's `run_in_background`, a command moved
//! there at its timeout, a server it started), and such a command runs as long as the
//! agent's session may. One it wrote nothing since is in the foreground, as far as can be
//! told: an agent that waits for a command in silence and one that left it to run look
//! alike, except by what they write. An agent at work shows it (Claude Code counts a
//! command's seconds, others spin), so a foreground command held as background costs
//! nothing while it does; an agent that writes once during a command (the command's first
//! line passed on) and then sits silent, waiting on its terminal among other things, is
//! taken for one waiting for you a threshold later.
//!
//! "No CPU" is measured over the whole quiet stretch, not look by look: an event loop at
//! its prompt does a little work now and then (Claude Code 2.1 uses 0.5 % of a core at
//! rest, and 30 ms two seconds after an answer), so what counts is its share since it went
//! quiet, below [`IDLE_SHARE`]; its spinner takes 10 % and more. The stretch is measured
//! from a look taken just after it went quiet ([`SETTLE`]), so that it holds none of the
//! work of drawing what it wrote last.

use std::time::Duration;

use std::time::Instant;

use super::detector::{Blocked, ProcessSample, WAITING_FOR_YOU};
use crate::units::duration;

/// Below this share of a core, over its quiet stretch, an agent is idle.
const IDLE_SHARE: f64 = 0.05;
/// An agent is looked at this long after it went quiet, and again this long after a look
/// that found it not waiting once the threshold had passed (its loop awake for a moment).
const SETTLE: Duration = Duration::from_millis(250);

#[derive(Debug)]
pub(super) struct AgentWait {
    after: Duration,
    started: Instant,
    last_output: Instant,
    /// The process (its pid) that waited on its terminal at the last look, and how.
    wait: Option<(i32, Blocked)>,
    /// A command of its ran in the foreground at the last look (or since, until it wrote).
    commands: bool,
    /// Its commands running at the last look (pid, start), each with the look that first
    /// saw it.
    running: Vec<(i32, u64, Instant)>,
    /// The last look that saw a command of its run in the foreground (a command is, when
    /// first seen), or the first that saw none after one did: no command started or ended
    /// in the foreground after it, for sure.
    command_seen: Option<Instant>,
    /// When the operator last typed into its terminal (through the broker).
    typed: Option<Instant>,
    /// The CPU it used since it went quiet: from when, and how many seconds of a core.
    window: Option<(Instant, f64)>,
    /// Looks past the threshold that did not find it waiting, in the quiet stretch that
    /// began then.
    missed: (Instant, u32),
}

impl AgentWait {
    pub(super) fn new(after: Duration, started: Instant) -> AgentWait {
        AgentWait {
            after,
            started,
            last_output: started,
            wait: None,
            commands: false,
            running: Vec::new(),
            command_seen: None,
            typed: None,
            window: None,
            missed: (started, 0),
        }
    }

    /// The process last seen waiting, looked at first next time.
    pub(super) fn waiting_pid(&self) -> Option<i32> {
        self.wait.as_ref().map(|(pid, _)| *pid)
    }

    /// It wrote: every command of its running now is in the background.
    pub(super) fn output(&mut self, at: Instant) {
        self.last_output = at;
        self.commands = false;
    }

    pub(super) fn typed(&mut self, at: Instant) {
        self.typed = Some(at);
    }

    /// A fresh look: whether a command of its runs in the foreground (which ends a wait).
    pub(super) fn look(&mut self, at: Instant, processes: &[ProcessSample]) -> bool {
        let ran = self.commands;
        let first_seen = |p: &ProcessSample| {
            let known = self
                .running
                .iter()
                .find(|r| (r.0, r.1) == (p.pid, p.start_ticks));
            known.map_or(at, |r| r.2)
        };
        let running: Vec<_> = processes
            .iter()
            .filter(|p| p.runs_command)
            .map(|p| (p.pid, p.start_ticks, first_seen(p)))
            .collect();
        self.running = running;
        // A command first seen now is in the foreground (the agent wrote nothing since).
        self.commands = self.running.iter().any(|r| r.2 >= self.last_output);
        if self.commands || ran {
            self.command_seen = Some(at);
        }
        self.wait = processes
            .iter()
            .find_map(|p| Some((p.pid, p.blocked.clone()?)));
        self.commands
    }

    /// A look that found nothing ran since the last: a command that ran still runs (in the
    /// foreground if it was).
    pub(super) fn unchanged(&mut self, at: Instant) {
        if self.commands {
            self.command_seen = Some(at);
        }
    }

    /// It used `share` of a core from `from` to `at`.
    pub(super) fn interval(&mut self, from: Instant, at: Instant, share: f64) {
        let quiet = self.quiet_since();
        let used = share * at.saturating_duration_since(from).as_secs_f64();
        let (start, total) = match self.window {
            Some((start, total)) if start >= quiet => (start, total + used),
            // An interval that began before it went quiet holds the work before.
            _ if from < quiet => {
                self.window = None;
                return;
            }
            _ => (from, used),
        };
        let span = at.saturating_duration_since(start).as_secs_f64();
        // Sustained work, not a moment's: the stretch starts again after it.
        self.window = if span > 0.0 && total / span >= IDLE_SHARE {
            Some((at, 0.0))
        } else {
            Some((start, total))
        };
    }

    /// Whether it waits for its human now: the detail to raise, if so.
    pub(super) fn waits(&mut self, at: Instant) -> Option<String> {
        let quiet = self.quiet_since();
        if at < quiet + self.after || self.commands {
            return None;
        }
        let idle = self.window.is_some_and(|(start, total)| {
            let span = at.saturating_duration_since(start).as_secs_f64();
            (start <= quiet + SETTLE || at >= start + self.after)
                && span > 0.0
                && total / span < IDLE_SHARE
        });
        let Some((_, wait)) = self.wait.as_ref().filter(|_| idle) else {
            self.missed = (quiet, self.missed_since(quiet) + 1);
            return None;
        };
        Some(format!(
            "{WAITING_FOR_YOU}: {} {} on its terminal (fd {}); no output, CPU or command for {}",
            wait.program,
            wait.call,
            wait.fd,
            duration(at.saturating_duration_since(quiet))
        ))
    }

    /// When to look next, given the last look: just after it went quiet, then when the
    /// threshold may have passed; a look past it that did not find it waiting is tried once
    /// more [`SETTLE`] later, then a threshold later (one look per threshold while it is
    /// silent and busy, or waits on something else). None while a command of its runs in
    /// the foreground: its end is output.
    pub(super) fn deadline(&self, looked: Option<Instant>) -> Option<Instant> {
        if self.commands {
            return None;
        }
        let quiet = self.quiet_since();
        let settled = quiet + SETTLE;
        let start = self
            .window
            .map(|(start, _)| start)
            .unwrap_or_else(|| looked.unwrap_or(self.started).max(quiet));
        let due = if start <= settled {
            quiet + self.after
        } else {
            start + self.after
        };
        let missed = self.missed_since(quiet);
        Some(match looked {
            Some(looked) if looked < settled && settled < due => settled,
            Some(looked) if due <= looked && missed <= 1 => looked + SETTLE,
            Some(looked) if due <= looked => looked + self.after,
            _ => due,
        })
    }

    /// Looks past the threshold that missed it in the quiet stretch that began at `quiet`.
    fn missed_since(&self, quiet: Instant) -> u32 {
        if self.missed.0 == quiet {
            self.missed.1
        } else {
            0
        }
    }

    /// Since when it wrote nothing, started, ran or ended no command in the foreground and
    /// was typed nothing to.
    fn quiet_since(&self) -> Instant {
        let command = self.command_seen.unwrap_or(self.started);
        let typed = self.typed.unwrap_or(self.started);
        self.last_output.max(command).max(typed)
    }
}
