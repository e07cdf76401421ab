//! A session as every export format sees it: the model the post-mortem replays (state,
//! badges, bytes, the tree each process had) beside the journal's own events, with times
//! relative to the session and the damage each journal has. Built once, fed to each format.

use std::path::{Path, PathBuf};

use crate::journal::{CommandId, CommandRecord, Damage, SessionInfo, SessionRecord};
use crate::model::replay::model_from_session;
use crate::model::{Badges, CommandState};
use crate::protocol::{Event, EventKind, ProcessEntry, Stream, TraceContext};

/// A whole session, ready to export.
pub struct SessionExport {
    pub id: String,
    pub dir: PathBuf,
    pub info: Option<SessionInfo>,
    /// When the session began (its `session.json`, else its first command).
    pub started_ms: u64,
    /// Its last moment: the latest end, or last event, of any command, or the launcher's
    /// last word on one that never ran.
    pub ended_ms: u64,
    pub commands: Vec<CommandExport>,
    /// The commands its launcher spoke of that never ran (`launcher.jsonl`): blocked by a
    /// failed dependency, or still waiting when the session ended. In the order the launcher
    /// first named them.
    pub not_started: Vec<NotStarted>,
    /// Every word of its launcher (`launcher.jsonl`), oldest first: each change of a
    /// command's plan.
    pub launcher: Vec<crate::journal::LauncherLine>,
    /// What is wrong with the session's own files (`session.json`).
    pub damage: Vec<String>,
}

/// A command the launcher never started: its name, its command and its last word on it.
pub struct NotStarted {
    /// The model's row: the configured name and command, and the plan.
    pub state: CommandState,
    /// When the launcher last spoke of it.
    pub since_ms: u64,
}

impl NotStarted {
    /// `state`'s row, said last of in `lines` (else at `otherwise_ms`).
    fn new(
        state: CommandState,
        lines: &[crate::journal::LauncherLine],
        otherwise_ms: u64,
    ) -> NotStarted {
        let said = lines.iter().filter(|l| l.command == state.config.name);
        let since_ms = said.map(|l| l.ts_ms).max().unwrap_or(otherwise_ms);
        NotStarted { state, since_ms }
    }

    /// What the launcher never started, from its `lines` and the session's `runs` (each
    /// one's name and start), each with its last word: as a live session's root span tells
    /// it, without replaying the session.
    pub fn from_launcher(
        lines: &[crate::journal::LauncherLine],
        runs: &[(&str, Option<u64>)],
    ) -> Vec<NotStarted> {
        let mut rows = crate::model::plan::unstarted(lines, runs);
        crate::model::plan::apply(&mut rows, lines, None);
        (rows.into_iter())
            .map(|state| NotStarted::new(state, lines, 0))
            .collect()
    }

    pub fn name(&self) -> &str {
        &self.state.config.name
    }

    /// `not started: migrate: exit 1`, `waiting for db`, or, with nothing said, `not started`.
    pub fn words(&self) -> String {
        match &self.state.plan {
            Some(plan) => plan.label(self.since_ms),
            None => "not started".into(),
        }
    }

    /// Blocked by a dependency that failed: `tether sessions` counts it apart from the
    /// failed, as `blocked`.
    pub fn blocked(&self) -> bool {
        matches!(self.state.plan, Some(crate::model::Plan::Blocked(_)))
    }

    /// As a root span tells it.
    pub fn never_ran(&self) -> crate::export::follow::NeverRan {
        crate::export::follow::NeverRan {
            name: self.name().to_string(),
            words: self.words(),
            at_ms: self.since_ms,
            blocked: self.blocked(),
        }
    }
}

/// One command's run: the model's view of it and its journal.
pub struct CommandExport {
    /// Its session and its directory's name there (`03-build`), unique in the session.
    pub id: CommandId,
    pub dir: PathBuf,
    /// The model the TUI shows after the fact: state, bytes, caps, tree, timeline.
    pub state: CommandState,
    pub badges: Badges,
    /// Every event of the journal, in journal order.
    pub events: Vec<Event>,
    /// Every process its `tree` events recorded, with when it was seen.
    pub processes: Vec<ProcessSpan>,
    /// Bytes stored per stream (stdout, stderr): all that was written, unless capped.
    pub stored: [u64; 2],
    /// The journal misses something: it ends mid-line, has garbage lines, no result while
    /// no broker runs it.
    pub cut_short: bool,
    /// What is missing or broken, in words.
    pub damage: Vec<String>,
    /// Its span in its caller's trace, when its `command.json` names a valid one.
    pub trace: Option<TraceContext>,
}

/// A process of a command's tree, from the first `tree` event that lists it to the moment
/// it was last known alive.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessSpan {
    pub pid: i32,
    pub argv: Vec<String>,
    pub escaped: bool,
    pub first_ms: u64,
    /// The first snapshot without it, or its reaping, else its last sighting.
    pub last_ms: u64,
}

impl SessionExport {
    pub fn from_record(record: &SessionRecord) -> SessionExport {
        let mut model = model_from_session(record);
        // The model lists the runs in journal order, one a journal, then the commands that
        // never ran.
        debug_assert!(model.commands.len() >= record.commands.len());
        let unstarted = model
            .commands
            .split_off(record.commands.len().min(model.commands.len()));
        let commands: Vec<CommandExport> = record
            .commands
            .iter()
            .zip(model.commands)
            .map(|(journal, state)| CommandExport::new(journal, state))
            .collect();
        let not_started: Vec<NotStarted> = unstarted
            .into_iter()
            .map(|state| NotStarted::new(state, &record.launcher, model.started_ms))
            .collect();
        let ended_ms = commands
            .iter()
            .filter_map(|c| {
                let last = c.events.last().map(|e| e.ts_ms);
                c.state.ended_ms.max(last)
            })
            .max()
            .unwrap_or(model.started_ms)
            .max(model.started_ms)
            .max(not_started.iter().map(|n| n.since_ms).max().unwrap_or(0));
        SessionExport {
            id: model.session_id,
            dir: record.dir.clone(),
            info: record.info.clone(),
            started_ms: model.started_ms,
            ended_ms,
            commands,
            not_started,
            launcher: record.launcher.clone(),
            damage: record.damage.iter().map(ToString::to_string).collect(),
        }
    }

    /// The commands whose journal was cut short.
    pub fn cut_short(&self) -> impl Iterator<Item = &CommandExport> {
        self.commands.iter().filter(|c| c.cut_short)
    }
}

impl CommandExport {
    /// One command read alone from its directory (the follower sends commands one by one).
    pub fn load(dir: &Path) -> CommandExport {
        let journal = CommandRecord::load(dir);
        let state = crate::model::replay::command_from_record(&journal);
        CommandExport::new(&journal, state)
    }

    fn new(journal: &CommandRecord, state: CommandState) -> CommandExport {
        let closed = journal
            .events
            .iter()
            .any(|e| matches!(e.kind, EventKind::Close { .. }));
        // A run that closed its log but has no result.json lost nothing worth a word (as
        // `model::replay` says); a live one is not cut short, only unfinished.
        let damage: Vec<String> = journal
            .damage
            .iter()
            .filter(|d| !(**d == Damage::MissingResult && (closed || state.status.is_active())))
            .map(ToString::to_string)
            .collect();
        let stored = Stream::BOTH.map(|s| {
            state.capped[s as usize].map_or(state.bytes[s as usize], |(_, stored)| stored)
        });
        CommandExport {
            id: journal.id.clone(),
            dir: journal.dir.clone(),
            badges: Badges::of(&state),
            processes: process_spans(&journal.events, &state),
            events: journal.events.clone(),
            stored,
            cut_short: !damage.is_empty(),
            damage,
            state,
            trace: journal
                .request
                .as_ref()
                .and_then(|r| r.trace.clone())
                .filter(TraceContext::is_valid),
        }
    }

    /// The command's name, as configured.
    pub fn name(&self) -> &str {
        &self.state.config.name
    }

    /// What was executed: the spawned argv, else the configured one.
    pub fn argv(&self) -> Vec<String> {
        self.events
            .iter()
            .find_map(|e| match &e.kind {
                EventKind::Spawned { argv, .. } => Some(argv.clone()),
                _ => None,
            })
            .unwrap_or_else(|| self.state.config.command.argv())
    }

    /// When the run began: the command's spawn, else its broker's start; none for a journal
    /// without events (its broker never wrote one).
    pub fn started_ms(&self) -> Option<u64> {
        if self.events.is_empty() {
            return None;
        }
        self.state
            .started_ms
            .or_else(|| self.events.first().map(|e| e.ts_ms))
    }

    /// When it ended: its exit (or its loss), else its journal's last event; none while it
    /// runs.
    pub fn ended_ms(&self) -> Option<u64> {
        if self.state.status.is_active() || self.events.is_empty() {
            return None;
        }
        self.state
            .ended_ms
            .or_else(|| self.events.last().map(|e| e.ts_ms))
    }

    /// Whether the run went wrong, as an export says it: failed as `tether sessions` and
    /// every view count it (`CommandState::is_failure`: failed or killed, never stopped by
    /// hand or finished), or its journal cut short.
    pub fn failed_or_cut_short(&self) -> bool {
        self.state.is_failure() || self.cut_short
    }
}

/// Each process of the run's tree, from the `tree` events, in order of first sighting; argv
/// from the model, which fills in what later events leave out.
fn process_spans(events: &[Event], state: &CommandState) -> Vec<ProcessSpan> {
    let mut spans: Vec<ProcessSpan> = Vec::new();
    let mut open: Vec<(i32, u64, usize)> = Vec::new(); // (pid, start_ms, index in spans)
    let key = |p: &ProcessEntry| (p.pid, p.start_ms);
    for event in events {
        match &event.kind {
            EventKind::Tree { processes } => {
                open.retain(|(pid, start, i)| {
                    // Seen again, or found gone since the last snapshot: known alive until
                    // this one either way.
                    spans[*i].last_ms = event.ts_ms;
                    processes.iter().any(|p| key(p) == (*pid, *start))
                });
                for p in processes {
                    if !open.iter().any(|(pid, start, _)| (*pid, *start) == key(p)) {
                        let argv = state
                            .seen
                            .iter()
                            .find(|s| key(s) == key(p))
                            .map_or_else(|| p.argv.clone(), |s| s.argv.clone());
                        open.push((p.pid, p.start_ms, spans.len()));
                        spans.push(ProcessSpan {
                            pid: p.pid,
                            argv,
                            escaped: p.escaped,
                            first_ms: event.ts_ms,
                            last_ms: event.ts_ms,
                        });
                    }
                }
            }
            EventKind::OrphanReaped { pid, .. } | EventKind::Exit { pid, .. } => {
                open.retain(|(open_pid, _, i)| {
                    if open_pid == pid {
                        spans[*i].last_ms = event.ts_ms;
                    }
                    open_pid != pid
                });
            }
            _ => {}
        }
    }
    // Still listed when the journal ends: alive until the run's end, as far as is known.
    let end = state.ended_ms.or_else(|| events.last().map(|e| e.ts_ms));
    for (_, _, i) in open {
        if let Some(end) = end {
            spans[i].last_ms = spans[i].last_ms.max(end);
        }
    }
    spans
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::fixtures::tree;

    #[test]
    fn a_process_spans_from_its_first_sighting_to_its_disappearance() {
        let state = CommandState::new(crate::config::CommandConfig::new(
            "t",
            crate::protocol::CommandSpec::Shell("true".into()),
        ));
        let events = [tree(10, &[1, 2]), tree(20, &[1, 2, 3]), tree(30, &[1, 3])];
        let spans: Vec<(i32, u64, u64)> = process_spans(&events, &state)
            .iter()
            .map(|s| (s.pid, s.first_ms, s.last_ms))
            .collect();
        assert_eq!(spans, [(1, 10, 30), (2, 10, 30), (3, 20, 30)]);
    }
}
