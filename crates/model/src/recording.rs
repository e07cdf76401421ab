//! A recorded session as the time cursor moves over it: every command's journaled events,
//! the moments the cursor stops at, and each command's state at a moment. That state is the
//! replay of the events up to the moment, by the same code that replays a whole journal, so
//! that the past and the end can never disagree on what an event means.

use std::path::PathBuf;

use tether_config::CommandConfig;
use tether_os::journal::{LauncherLine, SessionRecord};
use tether_protocol::protocol::{Event, EventKind};

use super::replay::{caller_of, config_of, replay, run_of};
use super::{CommandState, Status};

/// The steps `<` and `>` move by, shortest first (`-` and `+` go along them).
pub const STEPS_MS: [u64; 13] = [
    100, 250, 500, 1_000, 2_000, 5_000, 10_000, 30_000, 60_000, 300_000, 600_000, 1_800_000,
    3_600_000,
];

/// The step a recorded session opens with: one second.
pub const DEFAULT_STEP: usize = 3;

pub use tether_protocol::units::step_label;

/// One command's journal, as read.
#[derive(Debug, Clone)]
pub struct CommandRecording {
    pub config: CommandConfig,
    pub dir: PathBuf,
    /// Which start of its command this was (a restart's is above 1).
    pub run: u32,
    /// The process that asked for it (command.json's `parent_pid`): what links an agent's
    /// shell call to its row at the time cursor too.
    pub caller_pid: Option<i32>,
    /// In journal order.
    pub events: Vec<Event>,
}

#[derive(Debug, Clone, Default)]
pub struct Recording {
    commands: Vec<CommandRecording>,
    /// What the launcher said of its commands, oldest first (see [`super::plan`]).
    launcher: Vec<LauncherLine>,
    /// The rows of the commands it spoke of that never ran, after the others.
    unstarted: Vec<CommandState>,
    /// Every moment (ms) an event was journaled at, ascending, each once.
    moments: Vec<u64>,
    /// The moments of notable events: signals, errors, timeouts, exits but a clean
    /// `exit 0`, kills, orphans, moments that needed the operator.
    notable: Vec<u64>,
    /// The first and last moment of every event, an agent's output too: the recording's
    /// bounds (its last screen is where a killed agent's journal ends).
    span: Option<(u64, u64)>,
}

/// The events `{` and `}` stop at: what changed how a run went, and what needed the
/// operator (`attention`). An exit is one unless it is a clean `exit 0`: an agent's run
/// is thousands of those, and stopping at each would make `}` the same as `]`.
pub fn is_notable(kind: &EventKind) -> bool {
    if let EventKind::Exit { status, .. } = kind {
        return status.code != Some(0);
    }
    matches!(
        kind,
        EventKind::StopStarted { .. }
            | EventKind::SignalSent { .. }
            | EventKind::SpawnError { .. }
            | EventKind::BrokerFailure { .. }
            | EventKind::ResponseTimeout { .. }
            | EventKind::FinalDrain { .. }
            | EventKind::HardKill { .. }
            | EventKind::OrphanReaped { .. }
            | EventKind::ParentLost { .. }
            | EventKind::Attention { .. }
    )
}

/// Answers to one control client: never in a journal, nothing to stop at.
fn is_moment(kind: &EventKind) -> bool {
    !matches!(
        kind,
        EventKind::Pong | EventKind::ControlAck { .. } | EventKind::ControlError { .. }
    )
}

impl Recording {
    pub fn new(commands: Vec<CommandRecording>) -> Recording {
        let sorted = |notable_only: bool| {
            let mut times: Vec<u64> = commands
                .iter()
                .flat_map(|c| {
                    // An agent's own screen is redrawn all the time: its output is no moment
                    // to stop at (a trial's `]` went through 266 of them in 383 steps).
                    let screen = c.config.is_session_owner();
                    (c.events.iter())
                        .filter(move |e| !(screen && matches!(e.kind, EventKind::Output { .. })))
                })
                .filter(|e| is_moment(&e.kind) && (!notable_only || is_notable(&e.kind)))
                .map(|e| e.ts_ms)
                .collect();
            times.sort_unstable();
            times.dedup();
            times
        };
        let (moments, notable) = (sorted(false), sorted(true));
        let span = (commands.iter().flat_map(|c| &c.events))
            .filter(|e| is_moment(&e.kind))
            .fold(None, |span: Option<(u64, u64)>, e| {
                let (first, last) = span.unwrap_or((e.ts_ms, e.ts_ms));
                Some((first.min(e.ts_ms), last.max(e.ts_ms)))
            });
        Recording {
            commands,
            moments,
            notable,
            span,
            ..Recording::default()
        }
    }

    /// Takes the events of a session read back from its journal, and what its launcher said.
    pub fn from_session(record: SessionRecord) -> Recording {
        let recording = Recording::new(
            record
                .commands
                .into_iter()
                .map(|c| CommandRecording {
                    config: config_of(&c),
                    run: run_of(&c),
                    caller_pid: caller_of(&c),
                    dir: c.dir,
                    events: c.events,
                })
                .collect(),
        );
        recording.with_launcher(record.launcher)
    }

    /// What the launcher said (`lines`, oldest first): each change is a moment to stop at,
    /// a command given up or blocked a notable one, and a command that never ran a row.
    pub fn with_launcher(mut self, lines: Vec<LauncherLine>) -> Recording {
        let runs: Vec<(&str, Option<u64>)> = (self.commands.iter())
            .map(|c| (c.config.name.as_str(), c.events.first().map(|e| e.ts_ms)))
            .collect();
        self.unstarted = super::plan::unstarted(&lines, &runs);
        for line in &lines {
            self.moments.push(line.ts_ms);
            let plan = serde_json::from_value::<Option<super::Plan>>(line.plan.clone());
            if plan.is_ok_and(|p| p.is_some_and(|p| p.is_failure())) {
                self.notable.push(line.ts_ms);
            }
        }
        for times in [&mut self.moments, &mut self.notable] {
            times.sort_unstable();
            times.dedup();
        }
        for line in &lines {
            let (first, last) = self.span.unwrap_or((line.ts_ms, line.ts_ms));
            self.span = Some((first.min(line.ts_ms), last.max(line.ts_ms)));
        }
        self.launcher = lines;
        self
    }

    pub fn first(&self) -> Option<u64> {
        self.span.map(|(first, _)| first)
    }

    pub fn last(&self) -> Option<u64> {
        self.span.map(|(_, last)| last)
    }

    /// The moment before the cursor (`None`: at the live end, where the last moment is the
    /// one before); `None` if there is none.
    pub fn prev_event(&self, at: Option<u64>) -> Option<u64> {
        before(&self.moments, at)
    }

    /// The moment after the cursor; `None` at the end.
    pub fn next_event(&self, at: Option<u64>) -> Option<u64> {
        after(&self.moments, at?)
    }

    pub fn prev_notable(&self, at: Option<u64>) -> Option<u64> {
        before(&self.notable, at)
    }

    pub fn next_notable(&self, at: Option<u64>) -> Option<u64> {
        after(&self.notable, at?)
    }

    /// `step_ms` back from the cursor (from the last moment at the live end), not before
    /// the first moment; `None` if the cursor is there already.
    pub fn step_back(&self, at: Option<u64>, step_ms: u64) -> Option<u64> {
        let (first, last) = (self.first()?, self.last()?);
        let from = at.unwrap_or(last);
        (from > first).then(|| from.saturating_sub(step_ms).max(first))
    }

    /// `step_ms` on from the cursor, not past the last moment; `None` at the end.
    pub fn step_forward(&self, at: Option<u64>, step_ms: u64) -> Option<u64> {
        let (from, last) = (at?, self.last()?);
        (from < last).then(|| from.saturating_add(step_ms).min(last))
    }

    /// Every command as it was at `at_ms`: its events up to then, replayed. A command whose
    /// journal starts later reads `idle`, with nothing run yet, and is `not_yet` unless the
    /// launcher had said something of it by then.
    pub fn commands_at(&self, at_ms: u64) -> Vec<CommandState> {
        let mut commands: Vec<CommandState> = (self.commands.iter())
            .map(|c| {
                let count = c.events.iter().take_while(|e| e.ts_ms <= at_ms).count();
                let mut command = replay(c.config.clone(), c.dir.clone(), &c.events[..count]);
                command.run = c.run;
                command.caller_pid = c.caller_pid;
                if count == 0 {
                    command.status = Status::Idle;
                    command.started_ms = None;
                    command.not_yet = true;
                }
                command
            })
            .chain(self.unstarted.iter().cloned().map(|mut command| {
                command.not_yet = true;
                command
            }))
            .collect();
        super::plan::apply(&mut commands, &self.launcher, Some(at_ms));
        // What the launcher had said of a command by then is something of it: a wait for a
        // dependency, a command that would never start, and whatever it said after.
        for command in &mut commands {
            command.not_yet &= !super::plan::spoken_of(command, &self.launcher, at_ms);
        }
        commands
    }

    /// What was journaled at exactly `at_ms`: each event with its command's index.
    pub fn events_at(&self, at_ms: u64) -> impl Iterator<Item = (usize, &Event)> {
        self.commands.iter().enumerate().flat_map(move |(i, c)| {
            c.events
                .iter()
                .filter(move |e| e.ts_ms == at_ms && is_moment(&e.kind))
                .map(move |e| (i, e))
        })
    }
}

/// The greatest of `times` below `at` (any, for the end).
fn before(times: &[u64], at: Option<u64>) -> Option<u64> {
    match at {
        None => times.last().copied(),
        Some(at) => times[..times.partition_point(|&t| t < at)].last().copied(),
    }
}

/// The least of `times` above `at`.
fn after(times: &[u64], at: u64) -> Option<u64> {
    times.get(times.partition_point(|&t| t <= at)).copied()
}

#[cfg(test)]
mod tests;
