//! What the UI knows of one command: its configuration, its current run, and that run's
//! lifecycle as reported by its broker (live) or read from its journal (post-mortem).

use std::collections::HashMap;
use std::path::PathBuf;

use tether_config::CommandConfig;
use tether_core::by_hand::{SignalsByHand, by_hand};
use tether_os::journal::CommandId;
use tether_protocol::protocol::{
    AttentionKind, Budget, CapReason, CommandResult, ContainmentMode, Event, EventKind, ExitStatus,
    Origin, ParentLossCause, ProcessEntry, ProcessSignal, STOP_STARTED_SINCE, Scope, Stream,
    TerminalRequest, WindowSize,
};

/// Index of a command in the session's list.
pub type CommandIndex = usize;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Status {
    /// Configured but not started (autostart = false), or waiting for its broker.
    #[default]
    Idle,
    Starting,
    Running,
    /// Stopped by a signal (SIGSTOP, SIGTSTP): the command's own process is in state `T`, as
    /// the process sampler last saw it. It runs again on SIGCONT.
    Stopped,
    /// A stop sequence is under way.
    Stopping,
    Exited(ExitStatus),
    /// The command's main process exited (`exit`) and `processes` of its tree were kept
    /// running by the leftovers rule (`leftovers_kept`), until `leftovers_stopped`.
    LeftRunning {
        exit: ExitStatus,
        processes: usize,
        /// Every process kept is stopped by a signal (state `T`), as the process sampler
        /// last saw them: a kept server paused by hand. It runs again on SIGCONT.
        paused: bool,
    },
    /// The command could not be started (not found, not executable, ...).
    FailedToStart,
    /// The broker vanished without saying how the command ended.
    Lost,
}

/// What a command's readiness probe decided: `ready` (it proved it) or not (the probe gave
/// up), by which probe, on what, how long after the spawn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadyMark {
    pub ready: bool,
    pub probe: String,
    pub detail: String,
    pub after_ms: u64,
}

impl ReadyMark {
    /// `ready`, or `not ready`: the one place the list's word for readiness is made.
    pub fn word(&self) -> &'static str {
        if self.ready { "ready" } else { "not ready" }
    }
}

/// What a command left running when its main process exited, kept in custody.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeptLeftovers {
    /// How many processes were kept.
    pub kept: usize,
    /// Why they were stopped; `None` while they run (or if the journal ends first).
    pub end: Option<tether_protocol::protocol::LeftoversEnd>,
    /// When custody ended: they were stopped (or had all exited), or the broker closed;
    /// `None` while they run.
    pub until_ms: Option<u64>,
}

impl KeptLeftovers {
    /// `kept 2 until its caller exited`: what follows the exit status in a post-mortem, once
    /// custody is over (while it lasts the status says `left running (2)`).
    pub fn words(&self) -> Option<String> {
        let end = self.end?;
        Some(format!("kept {} until {}", self.kept, end.until()))
    }
}

impl Status {
    pub fn is_active(self) -> bool {
        matches!(
            self,
            Status::Starting
                | Status::Running
                | Status::Stopped
                | Status::Stopping
                | Status::LeftRunning { .. }
        )
    }

    /// The label within the command list's state column (8 cells while nothing has ended;
    /// an ending's words are `model::ending`'s): `left running (3)` reads `left 3` there,
    /// the tree title and `tether ps` having the room for the whole label.
    pub fn short_label(self) -> String {
        match self {
            Status::LeftRunning {
                processes, paused, ..
            } => format!("{} {processes}", if paused { "paused" } else { "left" }),
            other => other.label(),
        }
    }

    pub fn label(self) -> String {
        match self {
            Status::Idle => "idle".into(),
            Status::Starting => "starting".into(),
            Status::Running => "running".into(),
            // Not `stopped`: that is how a run stopped by hand ended (`model::ending`).
            Status::Stopped => "paused".into(),
            Status::Stopping => "stopping".into(),
            Status::Exited(status) => exit_label(status),
            Status::LeftRunning {
                processes, paused, ..
            } => {
                let how = if paused { "paused" } else { "running" };
                format!("left {how} ({processes})")
            }
            Status::FailedToStart => "failed".into(),
            Status::Lost => "lost".into(),
        }
    }
}

/// `exit 0`, `exit 3`, `SIGKILL`.
pub fn exit_label(status: ExitStatus) -> String {
    match (status.code, status.signal) {
        (Some(code), _) => format!("exit {code}"),
        (None, Some(sig)) => signal_label(sig),
        (None, None) => "ended".into(),
    }
}

pub use tether_protocol::protocol::signal_label;

/// One event worth showing on the timeline (everything but output and tree updates).
#[derive(Debug, Clone, PartialEq)]
pub struct TimelineEntry {
    pub ts_ms: u64,
    pub kind: EventKind,
}

/// A marker on the Gantt strip.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Marker {
    Signal,
    Timeout,
    Exit,
    Failure,
}

/// A moment that needed the operator: what, what was seen, when, and whether it still does
/// (an episode not yet cleared; `failed` and `finished` stay).
#[derive(Debug, Clone, PartialEq)]
pub struct AttentionMark {
    pub kind: AttentionKind,
    pub detail: String,
    pub at_ms: u64,
    pub active: bool,
}

impl AttentionMark {
    /// How much it needs the operator, most first: what waits for them or burns a core now
    /// (input, a runaway), then what is silent, then what has ended (a failure, a long
    /// command finished); then the latest. What the status bar names and `g` goes to first.
    pub fn urgency(&self) -> (u8, u64) {
        let rank = match self.kind {
            AttentionKind::NeedsInput | AttentionKind::Runaway => 0,
            AttentionKind::Quiet => 1,
            AttentionKind::Failed => 2,
            AttentionKind::Finished => 3,
        };
        (u8::MAX - rank, self.at_ms)
    }

    /// Whether it needs the operator now: a wait for input, a runaway (what a watch follows
    /// before the newest command, and what ranks first by [`Self::urgency`]).
    pub fn is_pressing(&self) -> bool {
        self.urgency().0 == u8::MAX
    }

    /// How the list, the status bar, the timeline and a notification name it
    /// ([`super::describe::mark_words`]): `needs input`, `waiting for you`, `over budget`.
    pub fn words(&self) -> &'static str {
        super::describe::mark_words(self.kind, &self.detail)
    }
}

#[derive(Debug, Clone, Default)]
pub struct CommandState {
    pub config: CommandConfig,
    /// How many times it has been started (1 for the first run).
    pub run: u32,
    pub journal_dir: Option<PathBuf>,
    pub status: Status,
    pub broker_pid: Option<i32>,
    /// The broker's start time in clock ticks after boot, where `command.json` gives it:
    /// with `broker_pid`, a broker no other process can pass for once its pid is reused.
    pub broker_start_ticks: Option<u64>,
    pub pid: Option<i32>,
    pub started_ms: Option<u64>,
    pub ended_ms: Option<u64>,
    /// Bytes the broker reported per stream (stdout, stderr).
    pub bytes: [u64; 2],
    /// Bytes stored per stream once storing stopped.
    pub capped: [Option<(CapReason, u64)>; 2],
    /// What the journal kept and dropped of each stream, as the broker said at the end
    /// (`output_truncated`).
    pub truncated: [Option<(u64, u64)>; 2],
    pub timeline: Vec<TimelineEntry>,
    /// The broker's latest record of the tree (pid, ppid, argv, start).
    pub tree: Vec<ProcessEntry>,
    /// Every process the broker ever recorded in this run's tree, with the latest command
    /// line recorded for it (a process that exec'd reads as what it became): who ran, for a
    /// post-mortem. Also where a tree event's left-out argv is found (see
    /// [`ProcessEntry::argv`]).
    pub seen: Vec<ProcessEntry>,
    /// Where each process of `seen` is, by pid and start time.
    seen_at: HashMap<(i32, u64), usize>,
    pub response_timeout: bool,
    /// Stopped after its final line (`drain_on`): it finished, however its signal ended it.
    pub drained: bool,
    /// The operator (or the agent, through the shim) stopped it, or sent it a signal that
    /// ended it ([`SignalsByHand`]): however it then ended, that was their doing, not a
    /// failure.
    pub stopped_by_hand: bool,
    /// The signals that end a process a person sent before it ended: at its `exit`, whether
    /// they ended it.
    signals_by_hand: SignalsByHand,
    /// The TUI's launcher stopped it to start it again: a watched file changed.
    pub restarted_for_change: bool,
    /// The origin of the last stop journaled before it ended: a stop that took over the
    /// launcher's for a changed file is the second.
    pub last_stop: Option<Origin>,
    pub parent_lost: Option<ParentLossCause>,
    /// The latest moment of each kind that needed the operator (`attention`), and whether
    /// it still does: two episodes can hold at once (a command blocked on its input for
    /// `input_after` is quiet too once `quiet_after` passes), and the more pressing one is
    /// what every view names ([`CommandState::needs_you`]), whichever came last.
    pub attention: Vec<AttentionMark>,
    /// Processes reaped after escaping the command's group or session (setsid, double fork
    /// into another group): what `orphans:N` counts. A process merely re-parented to the
    /// broker when its parent ended is reaped too, but is no escapee.
    pub escapees_reaped: u32,
    /// Processes kept running after the main process exited (`leftovers_kept`), and why
    /// they were stopped once they were: a post-mortem says both beside the exit status.
    pub leftovers: Option<KeptLeftovers>,
    pub hard_killed: bool,
    /// The budget whose stop ended the run (`budget_exceeded`): how it ended, in every view.
    pub over_budget: Option<Budget>,
    /// What the readiness probe decided (`ready`, `not_ready`), once it did.
    pub readiness: Option<ReadyMark>,
    /// The broker journals each stop as it starts (`stop_started`, protocol v4 on): the run
    /// is stopping from that event, never guessed from the signals it sends.
    pub stops_journaled: bool,
    /// A message for the operator: a spawn error, a broker failure, a fallback taken.
    pub notice: Option<String>,
    /// Moments (ms) at which output arrived, one per 250 ms at most, for the Gantt strip.
    pub activity: Vec<u64>,
    pub markers: Vec<(u64, Marker)>,
    /// The run's streams that are terminals, and their size: the command can be typed into.
    pub terminal: Option<TerminalRequest>,
    /// Each size the terminals had, from the bytes of each stream (stdout, stderr) reported
    /// when it was given: what was drawn for it (the screen view replays each part at its own).
    pub terminal_sizes: Vec<([u64; 2], WindowSize)>,
    /// The command's stderr went into its stdout (`streams_merged`: the caller gave one file
    /// for both): stdout's log holds both, in order, and stderr's is empty.
    pub merged_streams: bool,
    /// The `output` events in order: how stdout and stderr interleaved, and when.
    pub runs: crate::output::runs::OutputRuns,
    /// What holds the run's tree (`containment` event): a cgroup, or the /proc walk.
    pub containment: Option<ContainmentMode>,
    /// The run's cgroup, while it has one: its figures are read from there.
    pub cgroup: Option<PathBuf>,
    /// When the command's session began, where it is not the model's own session (a watch
    /// over many sessions): see [`crate::Model::session_start_of`].
    pub session_started_ms: Option<u64>,
    /// The process that asked for the run (`parent_pid` of its `command.json`), as read back
    /// from a journal: for an agent's command, its shell call in the agent's tree.
    pub caller_pid: Option<i32>,
    /// CPU and resident memory of the run's processes in the sampler's last snapshot, while
    /// it runs (the broker itself not counted).
    pub cpu_percent: Option<f32>,
    pub rss_bytes: Option<u64>,
    /// CPU time the run's whole tree used, from its `result.json` once it ended.
    pub cpu_ms: Option<u64>,
    /// The most memory the run's tree held: from its `result.json` once it ended, before
    /// that the most the sampler saw its processes hold together.
    pub peak_rss_bytes: Option<u64>,
    /// The launcher's word on it between runs: waiting, restarting, given up, blocked.
    pub plan: Option<super::Plan>,
    /// The session directory of a command the launcher has not started, which has no
    /// journal directory to tell it (a watch over many sessions groups rows by it).
    pub unstarted_in: Option<PathBuf>,
    /// The runs before this one, oldest first (at most [`EARLIER_RUNS_KEPT`], the latest),
    /// as the all-commands strip draws them beside this one.
    pub earlier_runs: Vec<EarlierRun>,
    /// At a time cursor: nothing of the command had happened by the moment (no event of its
    /// run, no word of the launcher's), so that the list leaves it out, as a watch did not
    /// list it then. Never set outside [`crate::recording::Recording::commands_at`].
    pub not_yet: bool,
}

/// The most earlier runs a command keeps for the strip: a server restarting for days keeps
/// its latest.
pub const EARLIER_RUNS_KEPT: usize = 64;

/// A run before the current one of a command the launcher restarted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EarlierRun {
    pub started_ms: u64,
    pub ended_ms: u64,
    /// It failed, as every view counts it.
    pub failed: bool,
}

impl CommandState {
    pub fn new(config: CommandConfig) -> CommandState {
        CommandState {
            config,
            ..CommandState::default()
        }
    }

    /// The command's name, and which run this is once it restarted: `worker (run 3)`.
    pub fn title(&self) -> String {
        if self.run > 1 {
            format!("{} (run {})", self.config.name, self.run)
        } else {
            self.config.name.clone()
        }
    }

    /// Whether the run's end was a person's doing, for the launcher (no restart follows):
    /// the stop that ended it was theirs, or, without a stop, a signal they sent. A signal
    /// sent earlier in the run that it survived (a `HUP` to reload) does not outweigh the
    /// launcher's own stop for a changed file.
    pub fn ended_by_hand(&self) -> bool {
        match self.last_stop {
            Some(origin) => by_hand(origin),
            None => self.stopped_by_hand,
        }
    }

    /// The list's state word: the launcher's (`waiting`, `restart`, `gave up`, `blocked`)
    /// while it has one, else the status's.
    pub fn short_label(&self) -> String {
        match &self.plan {
            Some(plan) => plan.short_label().to_string(),
            None => self.short_state_words(),
        }
    }

    /// What the run's `result.json` adds to its events: what it cost. A journal written
    /// before `cpu_ms` existed may still have its cgroup's CPU time.
    pub fn apply_result(&mut self, result: &CommandResult) {
        self.cpu_ms = result
            .cpu_ms
            .or(result.cgroup_cpu_usec.map(|usec| usec / 1000));
        self.peak_rss_bytes = result.peak_rss_bytes.or(self.peak_rss_bytes);
    }

    /// Forgets the previous run: a new one starts with a fresh journal directory.
    pub fn begin_run(&mut self, journal_dir: PathBuf, now_ms: u64) {
        let config = self.config.clone();
        let run = self.run + 1;
        let session_started_ms = self.session_started_ms;
        let mut earlier_runs = std::mem::take(&mut self.earlier_runs);
        if let Some(started_ms) = self.started_ms {
            if earlier_runs.len() == EARLIER_RUNS_KEPT {
                earlier_runs.remove(0);
            }
            // One still going is cut off now; one that ended without a time (a start that
            // failed) took none.
            let ended_ms = (self.ended_ms).unwrap_or(if self.status.is_active() {
                now_ms
            } else {
                started_ms
            });
            earlier_runs.push(EarlierRun {
                started_ms,
                ended_ms: ended_ms.max(started_ms),
                failed: self.is_failure(),
            });
        }
        *self = CommandState::new(config);
        self.earlier_runs = earlier_runs;
        self.run = run;
        self.session_started_ms = session_started_ms;
        self.journal_dir = Some(journal_dir);
        self.status = Status::Starting;
        self.started_ms = Some(now_ms);
    }

    /// A run that could not begin at all (no journal directory for it: a full disk): a run
    /// of its own that took no time and failed, saying why. The run before it is kept as an
    /// earlier one, and its times are not this run's.
    pub fn start_failed(&mut self, now_ms: u64, notice: String) {
        self.begin_run(PathBuf::new(), now_ms);
        self.journal_dir = None;
        self.status = Status::FailedToStart;
        self.ended_ms = Some(now_ms);
        self.notice = Some(notice);
    }

    /// What the journal kept of `stream` and what it dropped after it, when it did not keep
    /// it whole: as the broker said at the end, or while it runs, from where storing stopped
    /// and the bytes counted since.
    pub fn journal_cut(&self, stream: Stream) -> Option<(u64, u64)> {
        let i = stream as usize;
        self.truncated[i].or_else(|| {
            let (_, kept) = self.capped[i]?;
            Some((kept, self.bytes[i].saturating_sub(kept))).filter(|(_, dropped)| *dropped > 0)
        })
    }

    /// Applies one event from the broker or the journal.
    pub fn apply(&mut self, event: &Event) {
        let ts = event.ts_ms;
        match &event.kind {
            EventKind::Output {
                stream,
                offset,
                len,
            } => {
                let end = offset + len;
                self.runs.push(ts, *stream, *offset, *len);
                let slot = &mut self.bytes[*stream as usize];
                *slot = (*slot).max(end);
                if self.activity.last().is_none_or(|last| ts >= last + 250) {
                    self.activity.push(ts);
                }
                return;
            }
            EventKind::Tree { processes } => {
                self.tree = self.remember(processes);
                // What is left running now, not what was when custody began.
                if let Status::LeftRunning { processes, .. } = &mut self.status {
                    *processes = self.tree.len();
                }
                return;
            }
            // Answers to one control client, never in a journal or on a broker's pipe.
            EventKind::Pong | EventKind::ControlAck { .. } | EventKind::ControlError { .. } => {
                return;
            }
            EventKind::BrokerStarted { broker_pid, v, .. } => {
                self.broker_pid = Some(*broker_pid);
                self.stops_journaled = *v >= STOP_STARTED_SINCE;
                self.started_ms.get_or_insert(ts);
            }
            EventKind::Spawned { pid, .. } => {
                self.pid = Some(*pid);
                self.status = Status::Running;
                self.started_ms = Some(ts);
            }
            EventKind::Terminal { streams } => {
                self.terminal = Some(*streams);
                self.terminal_sized(streams.size);
            }
            EventKind::StreamsMerged {} => self.merged_streams = true,
            EventKind::Resize { size } => {
                if let Some(terminal) = self.terminal.as_mut() {
                    terminal.size = *size;
                    self.terminal_sized(*size);
                }
            }
            EventKind::TerminalUnavailable { message, .. } => self.notice = Some(message.clone()),
            EventKind::Containment { mode, path, .. } => {
                self.containment = Some(*mode);
                self.cgroup = path.clone().filter(|_| *mode == ContainmentMode::Cgroup);
            }
            EventKind::SpawnError { message, .. } => {
                self.status = Status::FailedToStart;
                self.notice = Some(message.clone());
                self.ended_ms = Some(ts);
                self.markers.push((ts, Marker::Failure));
            }
            EventKind::OutputCapped {
                stream,
                reason,
                stored,
                ..
            } => self.capped[*stream as usize] = Some((*reason, *stored)),
            EventKind::OutputTruncated {
                stream,
                kept,
                dropped,
            } => self.truncated[*stream as usize] = Some((*kept, *dropped)),
            EventKind::ResponseTimeout { .. } => {
                self.response_timeout = true;
                self.markers.push((ts, Marker::Timeout));
            }
            EventKind::StopStarted { origin, .. } => {
                self.drained |= *origin == Origin::FinalDrain;
                self.stopped_by_hand |= by_hand(*origin) && self.ended_ms.is_none();
                self.restarted_for_change |=
                    *origin == Origin::FileChanged && self.ended_ms.is_none();
                if self.ended_ms.is_none() {
                    self.last_stop = Some(*origin);
                }
                if matches!(self.status, Status::Running | Status::Stopped) {
                    self.status = Status::Stopping;
                }
            }
            EventKind::SignalSent {
                signal,
                origin,
                scope,
                targets,
                ..
            } => {
                self.drained |= *origin == Origin::FinalDrain;
                // Only before the command's own end: a signal the agent passes on to what
                // is left after it ended nothing. As the broker's attention counts them.
                if self.ended_ms.is_none() {
                    let to_command = *scope == Scope::Group
                        || self.pid.is_some_and(|pid| targets.contains(&pid));
                    (self.signals_by_hand).sent(*origin, *signal, to_command);
                }
                self.restarted_for_change |= *origin == Origin::FileChanged
                    && signal.ends_by_hand()
                    && self.ended_ms.is_none();
                if *signal != ProcessSignal::CONT {
                    self.markers.push((ts, Marker::Signal));
                }
                // A journal from before `stop_started` says a stop by its signals: TERM then
                // CONT at once. A lone TERM from the operator is only a signal, which the
                // command may ignore or handle and go on.
                let stop_sequence = !self.stops_journaled
                    && *signal == ProcessSignal::CONT
                    && self.timeline.last().is_some_and(|e| {
                        matches!(&e.kind, EventKind::SignalSent { signal, .. } if *signal == ProcessSignal::TERM)
                    });
                let running = matches!(self.status, Status::Running | Status::Stopped);
                if (stop_sequence || *signal == ProcessSignal::KILL) && running {
                    self.status = Status::Stopping;
                }
            }
            EventKind::HardKill { .. } => self.hard_killed = true,
            // Only before the main process's own end: leftovers kept after an exit and
            // stopped by a budget do not make that exit an overrun.
            EventKind::BudgetExceeded { budget, .. } if self.ended_ms.is_none() => {
                self.over_budget.get_or_insert(*budget);
            }
            EventKind::BudgetExceeded { .. } => {}
            EventKind::Ready {
                probe,
                detail,
                after_ms,
            }
            | EventKind::NotReady {
                probe,
                detail,
                after_ms,
            } => {
                self.readiness = Some(ReadyMark {
                    ready: matches!(event.kind, EventKind::Ready { .. }),
                    probe: probe.clone(),
                    detail: detail.clone(),
                    after_ms: *after_ms,
                });
            }
            EventKind::OrphanReaped { pid, escaped, .. } => {
                self.escapees_reaped += u32::from(self.reaped_escapee(*pid, *escaped));
            }
            EventKind::ParentLost { cause } => self.parent_lost = Some(*cause),
            EventKind::Attention { attention, detail } => self.mark_attention(AttentionMark {
                kind: *attention,
                detail: detail.clone(),
                at_ms: ts,
                active: true,
            }),
            EventKind::AttentionCleared { attention } => {
                if let Some(mark) = self.attention.iter_mut().find(|m| m.kind == *attention) {
                    mark.active = false;
                }
            }
            // Timeline entries only; after `events_capped` the tree pane keeps the last tree.
            EventKind::Input { .. }
            | EventKind::ParentUnresponsive { .. }
            | EventKind::FinalDrain { .. }
            | EventKind::EventsCapped { .. }
            | EventKind::ControlRefused { .. }
            | EventKind::ControlUnavailable { .. }
            | EventKind::LimitUnavailable { .. }
            | EventKind::TraceContextIgnored { .. }
            | EventKind::OutputUndelivered { .. }
            | EventKind::NotifyFailed { .. } => {}
            EventKind::Exit { status, .. } => {
                self.stopped_by_hand |= self.signals_by_hand.ended_it(*status);
                self.status = Status::Exited(*status);
                self.ended_ms = Some(ts);
                self.markers.push((ts, Marker::Exit));
            }
            EventKind::LeftoversKept { pids } => {
                self.leftovers = Some(KeptLeftovers {
                    kept: pids.len(),
                    end: None,
                    until_ms: None,
                });
                if let Status::Exited(exit) = self.status {
                    self.status = Status::LeftRunning {
                        exit,
                        processes: pids.len(),
                        paused: false,
                    };
                }
            }
            EventKind::LeftoversStopped { reason, .. } => {
                if let Some(kept) = self.leftovers.as_mut() {
                    kept.end = Some(*reason);
                    kept.until_ms.get_or_insert(ts);
                }
                if let Status::LeftRunning { exit, .. } = self.status {
                    self.status = Status::Exited(exit);
                }
            }
            EventKind::Close {
                stdout_bytes,
                stderr_bytes,
            } => {
                self.bytes = [*stdout_bytes, *stderr_bytes];
                self.tree.clear();
                self.ended_ms.get_or_insert(ts);
                if let Some(kept) = self.leftovers.as_mut() {
                    kept.until_ms.get_or_insert(ts);
                }
                if self.status.is_active() {
                    self.status = Status::Lost;
                }
            }
            EventKind::BrokerFailure { message, .. } => {
                self.notice = Some(message.clone());
                self.markers.push((ts, Marker::Failure));
            }
        }
        self.timeline.push(TimelineEntry {
            ts_ms: ts,
            kind: event.kind.clone(),
        });
    }

    /// The tree of a `tree` event with every argv: a journal carries a process's argv only in
    /// the first event that lists it with one (the broker reads again one it could not read),
    /// and again in the first after it exec'd another, so a process already in `seen` takes
    /// it from there, or gives it there, the latest replacing the one before. Processes not
    /// seen before are added to `seen`. This memory is the run's, as the journal is:
    /// `begin_run` starts it afresh.
    fn remember(&mut self, processes: &[ProcessEntry]) -> Vec<ProcessEntry> {
        processes
            .iter()
            .map(|p| match self.seen_at.get(&(p.pid, p.start_ms)) {
                Some(&i) if p.argv.is_empty() => ProcessEntry {
                    argv: self.seen[i].argv.clone(),
                    ..p.clone()
                },
                Some(&i) => {
                    self.seen[i].argv.clone_from(&p.argv);
                    p.clone()
                }
                None => {
                    self.seen_at.insert((p.pid, p.start_ms), self.seen.len());
                    self.seen.push(p.clone());
                    p.clone()
                }
            })
            .collect()
    }

    /// What the process sampler saw of the command's own process (its `/proc` state letter):
    /// `T` is a command stopped by a signal, anything else a running one.
    pub fn observe_state(&mut self, state: char) {
        match (self.status, state) {
            (Status::Running, 'T') => self.status = Status::Stopped,
            (Status::Stopped, state) if state != 'T' => self.status = Status::Running,
            _ => {}
        }
    }

    /// What the process sampler saw of the processes kept after the command's own exited
    /// (their `/proc` state letters): all in `T` is a kept server paused by hand (a zombie
    /// among them, a child not yet reaped, is no sign either way).
    pub fn observe_kept_states(&mut self, states: impl Iterator<Item = char>) {
        if let Status::LeftRunning { paused, .. } = &mut self.status {
            let mut states = states.filter(|&state| state != 'Z').peekable();
            *paused = states.peek().is_some() && states.all(|state| state == 'T');
        }
    }

    /// What the sampler saw of the run's processes: the live figures, and the peak so far.
    pub fn observe_usage(&mut self, cpu_percent: f32, rss_bytes: u64) {
        self.cpu_percent = Some(cpu_percent);
        self.rss_bytes = Some(rss_bytes);
        self.peak_rss_bytes = Some(self.peak_rss_bytes.unwrap_or(0).max(rss_bytes));
    }

    /// Ended badly (a non-zero exit, a signal, a start that failed, a broker lost), or stopped
    /// by a watchdog, a budget or a SIGKILL whichever way it then exited (a trapped TERM may
    /// still exit 0); never when it was stopped after its final line, nor when the operator
    /// ended it ([`super::ending::Ending::count`]). The one rule: `tether sessions`
    /// (`postmortem::tally::Outcome`), the list, the strip, the exports count by it.
    pub fn is_failure(&self) -> bool {
        use super::ending::{Count, Ending};
        Ending::of(self).is_some_and(|e| matches!(e.count(), Count::Failed | Count::Killed))
    }

    /// The mark that needs the operator now: of the marks not cleared (an episode,
    /// `needs_input`, `quiet`, `runaway`, only while the command runs), the most pressing
    /// by [`AttentionMark::urgency`], then the latest. What the list's "needs you" filter
    /// shows and its badge says, what the status bar names and `g` goes to: one choice for
    /// every view.
    pub fn needs_you(&self) -> Option<&AttentionMark> {
        self.standing_marks().max_by_key(|m| m.urgency())
    }

    /// The newest of the marks that stand: what a notification tells as it comes, whatever
    /// stands beside it (a `quiet` during a `needs_input` is news when it comes, not once
    /// the input was typed).
    pub fn newest_need(&self) -> Option<&AttentionMark> {
        self.standing_marks().max_by_key(|m| m.at_ms)
    }

    /// The marks not cleared; an episode's only while the command runs.
    fn standing_marks(&self) -> impl Iterator<Item = &AttentionMark> {
        (self.attention.iter())
            .filter(|m| m.active && (!m.kind.is_episode() || self.status.is_active()))
    }

    /// A new moment that needs the operator: it takes the place of its kind's last one.
    pub fn mark_attention(&mut self, mark: AttentionMark) {
        self.attention.retain(|m| m.kind != mark.kind);
        self.attention.push(mark);
    }

    /// The latest mark, cleared or not: what the command's last moment of attention was.
    pub fn latest_attention(&self) -> Option<&AttentionMark> {
        self.attention.iter().max_by_key(|m| m.at_ms)
    }

    /// Its identity, read from its journal directory `SESSION/NN-name`; `None` before it
    /// has one.
    pub fn id(&self) -> Option<CommandId> {
        CommandId::of_dir(self.journal_dir.as_deref()?)
    }

    /// Whether a reaped orphan had escaped, by the broker's word (`escaped`) or, in a journal
    /// written before the broker said, by the tree events that recorded it.
    pub fn reaped_escapee(&self, pid: i32, escaped: Option<bool>) -> bool {
        escaped.unwrap_or_else(|| self.seen_process(pid).is_some_and(|p| p.escaped))
    }

    /// The latest process of this run's tree with `pid`, as the broker recorded it.
    pub fn seen_process(&self, pid: i32) -> Option<&ProcessEntry> {
        self.seen.iter().rev().find(|p| p.pid == pid)
    }

    /// The broker went away; if it never said how the command ended, say so.
    pub fn broker_gone(&mut self, now_ms: u64) {
        if let (Status::LeftRunning { exit, .. }, Some(kept)) =
            (self.status, self.leftovers.as_mut())
        {
            // Lost in custody: the run ended as its exit said, the custody now.
            self.status = Status::Exited(exit);
            kept.until_ms.get_or_insert(now_ms);
            self.notice.get_or_insert_with(|| {
                "the broker ended while it kept what the command left running, without a \
                 result; see the journal"
                    .into()
            });
        } else if self.status.is_active() {
            // A broker that refused its launch request never ran anything.
            self.status = if self.broker_pid.is_none() {
                Status::FailedToStart
            } else {
                Status::Lost
            };
            self.ended_ms = Some(now_ms);
            self.notice
                .get_or_insert_with(|| "the broker ended without a result; see the journal".into());
        }
        self.tree.clear();
    }

    /// When what the run left ran on in custody (a server started with `&`): from its exit
    /// to the custody's end, or to `now_ms` while it lasts; in a journal cut short during
    /// it, to its last event. `None` if nothing was kept.
    pub fn custody(&self, now_ms: u64) -> Option<(u64, u64)> {
        let kept = self.leftovers?;
        let from = self.ended_ms?;
        let until = match kept.until_ms {
            Some(until) => until,
            None if matches!(self.status, Status::LeftRunning { .. }) => now_ms,
            None => self.timeline.last().map_or(from, |e| e.ts_ms),
        };
        Some((from, until.max(from)))
    }

    /// Whether it runs and proved it is ready (what a dependency on it waits for).
    pub fn is_ready(&self) -> bool {
        self.status == Status::Running && self.readiness.as_ref().is_some_and(|m| m.ready)
    }

    /// `ready` or `not ready` while it runs, once its readiness probe decided.
    pub(super) fn ready_word(&self) -> Option<&'static str> {
        let mark = self
            .readiness
            .as_ref()
            .filter(|_| self.status == Status::Running)?;
        Some(mark.word())
    }

    /// The command line as the operator would type it, on one line: a shell command as
    /// written (its line breaks shown as ` ⏎ `), an argv with the words that need it quoted.
    /// A shell's `-c` string (`bash -c 'ls'` through the shim) is shown as the script it runs.
    pub fn command_line(&self) -> String {
        tether_config::naming::command_text(&self.config.command)
    }

    /// The agent of a `tether agent` session (journaled as `tether session-owner ... --
    /// AGENT ARGS`), which owns the session: it ends after its commands.
    pub fn is_session_owner(&self) -> bool {
        self.config.is_session_owner()
    }

    /// One of an agent's own set-up shells (Claude Code's `env` probe and shell snapshot),
    /// not a command it was asked to run: the list folds it away once it ended well.
    pub fn is_setup(&self) -> bool {
        tether_config::naming::is_agent_setup(&self.config.command)
    }

    /// The terminals have `size` from the bytes reported so far on. A window dragged
    /// through a hundred sizes with nothing written between keeps the last alone; a size of
    /// nothing (an old or damaged journal) is none.
    fn terminal_sized(&mut self, size: WindowSize) {
        if size.rows == 0 || size.cols == 0 {
            return;
        }
        if let Some(last) = self.terminal_sizes.last_mut()
            && last.0 == self.bytes
        {
            last.1 = size;
        } else {
            self.terminal_sizes.push((self.bytes, size));
        }
    }

    /// Where `stream`'s terminal took each size, as the screen view replays it: `(offset in
    /// the stream, (rows, cols))`, in order; empty when the stream is no terminal.
    pub fn screen_sizes(&self, stream: Stream) -> Vec<(u64, (u16, u16))> {
        if !self.terminal.is_some_and(|t| t.has(stream)) {
            return Vec::new();
        }
        let sizes = self.terminal_sizes.iter();
        sizes
            .map(|(bytes, size)| (bytes[stream as usize], (size.rows, size.cols)))
            .collect()
    }

    /// Milliseconds the current run has lasted (up to `now_ms` while it runs).
    pub fn runtime_ms(&self, now_ms: u64) -> Option<u64> {
        let start = self.started_ms?;
        Some(self.ended_ms.unwrap_or(now_ms).saturating_sub(start))
    }
}

#[cfg(any(test, feature = "fixtures"))]
impl CommandState {
    /// The agent's own row of a `tether agent` session, as it journals it (`tether
    /// session-owner ... -- AGENT`), for the tests of what reads an agent's row.
    pub fn agent_for_test(agent: &str) -> CommandConfig {
        let owner = [
            "/usr/bin/tether",
            "session-owner",
            "--shims",
            "/s",
            "--",
            agent,
        ];
        let argv = owner.iter().map(|a| a.to_string()).collect();
        CommandConfig::new(agent, tether_protocol::protocol::CommandSpec::Argv(argv))
    }

    /// A command whose run ended with `code` or by `signal`, for the tests of what reads an
    /// ending (the ending words, the tally).
    pub fn ended_for_test(code: Option<i32>, signal: Option<i32>) -> CommandState {
        let mut command = CommandState::new(CommandConfig::new(
            "x",
            tether_protocol::protocol::CommandSpec::Argv(vec!["x".into()]),
        ));
        command.status = Status::Exited(ExitStatus {
            code,
            signal,
            core_dumped: false,
        });
        command
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tether_protocol::protocol::fixtures::{event, signal_sent, spawned};
    use tether_protocol::protocol::{CommandSpec, Scope};

    fn config() -> CommandConfig {
        CommandConfig::new("t", CommandSpec::Shell("true".into()))
    }

    /// A command whose run began at 1 ms, with its journal in /tmp/x.
    fn begun() -> CommandState {
        let mut c = CommandState::new(config());
        c.begin_run("/tmp/x".into(), 1);
        c
    }

    /// Death by SIGTERM.
    const TERMINATED: ExitStatus = ExitStatus {
        code: None,
        signal: Some(15),
        core_dumped: false,
    };

    #[test]
    fn an_agents_needs_input_reads_waiting_for_you() {
        let mark = |kind, detail: &str| AttentionMark {
            kind,
            detail: detail.into(),
            at_ms: 1,
            active: true,
        };
        let agent = mark(
            AttentionKind::NeedsInput,
            "waiting for you: claude epoll_pwait2 on its terminal (fd 11); no output, CPU or command for 3.0s",
        );
        assert_eq!(agent.words(), "waiting for you");
        let command = mark(
            AttentionKind::NeedsInput,
            "sh read(0) blocked on a pipe; no output for 3.0s",
        );
        assert_eq!(command.words(), "needs input");
        assert_eq!(mark(AttentionKind::Runaway, "").words(), "runaway");
    }

    /// A budget's stop, which the broker tells as `failed` with the words every view has for
    /// that end, reads `over budget` in the status bar, the list and a notification, and once
    /// on the timeline; another failure reads `failed`.
    #[test]
    fn a_budgets_failed_mark_reads_over_budget() {
        use crate::describe::describe;
        let told = |detail: &str| EventKind::Attention {
            attention: AttentionKind::Failed,
            detail: detail.into(),
        };
        let mut c = begun();
        c.apply(&event(10, told("over budget (max_output) after 558ms")));
        assert_eq!(c.attention[0].words(), "over budget");
        assert_eq!(
            describe(&told("over budget (max_output) after 558ms")).0,
            "over budget (max_output) after 558ms"
        );
        let mut failed = begun();
        failed.apply(&event(10, told("exit 3 after 2.0s")));
        assert_eq!(failed.attention[0].words(), "failed");
        assert_eq!(
            describe(&told("exit 3 after 2.0s")).0,
            "failed: exit 3 after 2.0s"
        );
    }

    #[test]
    fn an_attention_episode_is_marked_until_its_own_kind_is_cleared() {
        let mut c = begun();
        let needs = EventKind::Attention {
            attention: AttentionKind::NeedsInput,
            detail: "read(0) blocked".into(),
        };
        c.apply(&event(7, needs));
        let mark = c.latest_attention().cloned().expect("a mark");
        assert_eq!(
            (mark.kind, mark.at_ms, mark.active),
            (AttentionKind::NeedsInput, 7, true)
        );
        // Another kind's end leaves this one standing.
        c.apply(&event(
            8,
            EventKind::AttentionCleared {
                attention: AttentionKind::Quiet,
            },
        ));
        assert!(c.needs_you().is_some());
        c.apply(&event(
            9,
            EventKind::AttentionCleared {
                attention: AttentionKind::NeedsInput,
            },
        ));
        let mark = c.latest_attention().expect("still the latest");
        assert!(!mark.active);
        assert_eq!(mark.detail, "read(0) blocked");
        assert_eq!(c.needs_you(), None);
    }

    /// `read x` under `quiet_after = "4s"`: `needs_input` at 3.0 s, `quiet` at 4.1 s, neither
    /// cleared. The wait for input is what needs the operator, though quiet came later; once
    /// the input comes and only quiet holds, quiet is named.
    #[test]
    fn of_two_episodes_at_once_the_more_pressing_needs_you() {
        let mut c = begun();
        c.apply(&event(2, spawned(10)));
        let attention = |kind, detail: &str| EventKind::Attention {
            attention: kind,
            detail: detail.into(),
        };
        c.apply(&event(
            3_000,
            attention(
                AttentionKind::NeedsInput,
                "sh read(0) blocked on a terminal",
            ),
        ));
        c.apply(&event(
            4_100,
            attention(AttentionKind::Quiet, "no output for 4.1s, no CPU used"),
        ));
        let mark = c.needs_you().expect("a mark");
        assert_eq!((mark.kind, mark.at_ms), (AttentionKind::NeedsInput, 3_000));
        assert_eq!(
            c.latest_attention().map(|m| m.kind),
            Some(AttentionKind::Quiet)
        );
        c.apply(&event(
            5_000,
            EventKind::AttentionCleared {
                attention: AttentionKind::NeedsInput,
            },
        ));
        assert_eq!(c.needs_you().map(|m| m.kind), Some(AttentionKind::Quiet));
        // A new episode of a kind replaces its old mark: one mark a kind.
        c.apply(&event(
            6_000,
            attention(AttentionKind::NeedsInput, "sh read(0) blocked again"),
        ));
        assert_eq!(c.attention.len(), 2);
        let mark = c.needs_you().expect("a mark");
        assert_eq!((mark.kind, mark.at_ms), (AttentionKind::NeedsInput, 6_000));
    }

    #[test]
    fn a_run_a_budget_stopped_reads_over_budget_once_it_ended() {
        let mut c = begun();
        c.apply(&event(2, spawned(10)));
        c.apply(&event(
            3,
            EventKind::BudgetExceeded {
                budget: Budget::Cpu,
                limit: 1000,
                used: 1020,
            },
        ));
        c.apply(&event(
            3,
            EventKind::StopStarted {
                origin: Origin::Budget,
                grace: std::time::Duration::from_secs(2),
            },
        ));
        assert_eq!(c.state_words(), "stopping", "not over until it ended");
        c.apply(&event(
            4,
            EventKind::Exit {
                pid: 10,
                status: TERMINATED,
            },
        ));
        assert_eq!(c.state_words(), "over budget (max_cpu)");
        assert_eq!(
            c.short_state_words(),
            "over budget",
            "the list's state column"
        );
        assert!(
            c.is_failure(),
            "the command overran: a failure, not a stop by hand"
        );
    }

    #[test]
    fn leftovers_a_budget_stopped_after_a_clean_exit_leave_the_exit_its_word() {
        let mut c = begun();
        c.apply(&event(2, spawned(10)));
        c.apply(&event(
            3,
            EventKind::Exit {
                pid: 10,
                status: ExitStatus {
                    code: Some(0),
                    signal: None,
                    core_dumped: false,
                },
            },
        ));
        c.apply(&event(4, EventKind::LeftoversKept { pids: vec![11] }));
        c.apply(&event(
            5,
            EventKind::BudgetExceeded {
                budget: Budget::Time,
                limit: 1000,
                used: 1000,
            },
        ));
        c.apply(&event(
            5,
            EventKind::StopStarted {
                origin: Origin::Budget,
                grace: std::time::Duration::from_secs(2),
            },
        ));
        assert_eq!(c.over_budget, None);
        assert!(!c.state_words().contains("budget"), "{}", c.state_words());
        assert!(!c.is_failure(), "the command itself succeeded");
    }

    #[test]
    fn a_running_command_reads_ready_once_its_probe_passed_and_its_exit_after() {
        let mut c = begun();
        c.apply(&event(2, spawned(10)));
        assert_eq!(c.state_words(), "running");
        let ready = EventKind::Ready {
            probe: "tcp".into(),
            detail: "connected to 127.0.0.1:8080".into(),
            after_ms: 1200,
        };
        c.apply(&event(3, ready));
        assert_eq!(
            (c.state_words(), c.short_state_words()),
            ("ready".into(), "ready".into())
        );
        assert!(c.is_ready());
        let status = ExitStatus {
            code: Some(1),
            signal: None,
            core_dumped: false,
        };
        c.apply(&event(4, EventKind::Exit { pid: 10, status }));
        assert_eq!(
            c.state_words(),
            "exit 1",
            "an ended command says how it ended"
        );
        assert!(!c.is_ready());
        assert_eq!(c.readiness.as_ref().map(|m| m.after_ms), Some(1200));
    }

    #[test]
    fn a_probe_that_gave_up_reads_not_ready() {
        let mut c = begun();
        c.apply(&event(2, spawned(10)));
        let gave_up = EventKind::NotReady {
            probe: "http".into(),
            detail: "HTTP 503".into(),
            after_ms: 30_000,
        };
        c.apply(&event(3, gave_up));
        assert_eq!(c.state_words(), "not ready");
        assert_eq!(
            c.short_state_words(),
            "not ready",
            "the list's state column"
        );
        assert!(!c.is_ready());
    }

    #[test]
    fn leftovers_kept_show_as_left_running_until_stopped() {
        let mut c = begun();
        let status = ExitStatus {
            code: Some(0),
            signal: None,
            core_dumped: false,
        };
        c.apply(&event(2, spawned(10)));
        c.apply(&event(3, EventKind::Exit { pid: 10, status }));
        c.apply(&event(4, EventKind::LeftoversKept { pids: vec![11, 12] }));
        assert_eq!(c.status.label(), "left running (2)");
        assert_eq!(c.status.short_label(), "left 2", "the list's state column");
        assert!(c.status.is_active());
        c.apply(&tree(5, vec![entry(11, 2, &["server"])]));
        assert_eq!(c.status.label(), "left running (1)", "what is left now");
        // Paused by hand: every process kept is stopped; one that runs is not paused.
        c.observe_kept_states(['T'].into_iter());
        assert_eq!(c.status.label(), "left paused (1)");
        assert_eq!(c.status.short_label(), "paused 1");
        assert!(c.status.is_active());
        c.observe_kept_states(['T', 'S'].into_iter());
        assert_eq!(
            c.status.label(),
            "left running (1)",
            "resumed, or part of it"
        );
        c.observe_kept_states(['T', 'Z'].into_iter());
        assert_eq!(c.status.label(), "left paused (1)", "a zombie is no sign");
        c.observe_kept_states(std::iter::empty());
        assert_eq!(
            c.status.label(),
            "left running (1)",
            "none seen is none paused"
        );
        c.apply(&event(
            6,
            EventKind::LeftoversStopped {
                reason: tether_protocol::protocol::LeftoversEnd::CallerExited,
                pid: Some(7),
            },
        ));
        assert_eq!(c.status, Status::Exited(status));
        assert_eq!(
            c.leftovers.and_then(|l| l.until_ms),
            Some(6),
            "custody's end"
        );
        assert_eq!(c.custody(100), Some((3, 6)), "from the exit to its end");
        assert_eq!(
            c.leftovers.and_then(|l| l.words()).as_deref(),
            Some("kept 2 until its caller exited"),
            "a post-mortem says what was kept and why it was stopped"
        );
    }

    /// A broker lost while it kept leftovers: the run ended at its exit, the custody when
    /// the loss was seen, and neither grows on from there.
    #[test]
    fn a_broker_lost_in_custody_ends_the_custody_not_the_run() {
        let status = ExitStatus {
            code: Some(0),
            signal: None,
            core_dumped: false,
        };
        let mut c = begun();
        c.broker_pid = Some(9);
        c.apply(&event(2, spawned(10)));
        c.apply(&event(3, EventKind::Exit { pid: 10, status }));
        c.apply(&event(4, EventKind::LeftoversKept { pids: vec![11] }));
        assert_eq!(c.custody(50), Some((3, 50)), "to now while it lasts");
        c.broker_gone(70);
        assert_eq!(
            c.status,
            Status::Exited(status),
            "its exit said how it ended"
        );
        assert!(!c.is_failure());
        assert!(c.notice.is_some(), "the loss is said");
        assert_eq!(c.ended_ms, Some(3), "the run ended at its exit");
        assert_eq!(c.custody(500), Some((3, 70)));
        // A journal cut short in custody, its end read from a result: as far as it tells.
        let mut cut = begun();
        cut.apply(&event(2, spawned(10)));
        cut.apply(&event(3, EventKind::Exit { pid: 10, status }));
        cut.apply(&event(4, EventKind::LeftoversKept { pids: vec![11] }));
        cut.status = Status::Exited(status);
        assert_eq!(cut.custody(500), Some((3, 4)));
    }

    /// Stopping what was kept when its custody ends is no straggler: a server kept for its
    /// agent was meant to run on; nor is a signal that reached nothing. A signal to what
    /// held the pipes after the exit is.
    #[test]
    fn the_stop_that_ends_custody_is_no_straggler() {
        use crate::Badges;
        use tether_protocol::protocol::{LeftoversEnd, Origin, ProcessSignal};
        let status = ExitStatus {
            code: Some(0),
            signal: None,
            core_dumped: false,
        };
        let term = |ts| {
            event(
                ts,
                signal_sent(ProcessSignal::TERM, Scope::Group, Origin::ParentLost, 11),
            )
        };
        let mut kept = begun();
        kept.apply(&event(2, spawned(10)));
        kept.apply(&event(3, EventKind::Exit { pid: 10, status }));
        kept.apply(&event(4, EventKind::LeftoversKept { pids: vec![11] }));
        let stopped = EventKind::LeftoversStopped {
            reason: LeftoversEnd::SessionOwnerExited,
            pid: Some(7),
        };
        let hup = signal_sent(ProcessSignal::HUP, Scope::Group, Origin::Operator, 11);
        kept.apply(&event(30_000, hup));
        assert!(
            !Badges::of(&kept).stragglers,
            "the operator's signal in custody"
        );
        kept.apply(&event(90_000, stopped));
        kept.apply(&term(90_001));
        let badges = Badges::of(&kept);
        assert!(!badges.stragglers);
        assert_eq!(badges.kept, 1, "what was kept, once its custody is over");

        // No custodian left when it exited: stopped at once, as without the rule.
        let mut at_once = begun();
        at_once.apply(&event(2, spawned(10)));
        at_once.apply(&event(3, EventKind::Exit { pid: 10, status }));
        let gone = EventKind::LeftoversStopped {
            reason: LeftoversEnd::CallerGone,
            pid: None,
        };
        at_once.apply(&event(4, gone));
        at_once.apply(&term(5));
        let badges = Badges::of(&at_once);
        assert!(badges.stragglers, "stopped at once: stragglers");
        assert_eq!(badges.kept, 0);

        let mut held = begun();
        held.apply(&event(2, spawned(10)));
        held.apply(&event(3, EventKind::Exit { pid: 10, status }));
        // A stop at the broker's end that found nothing left stopped nothing.
        let mut none_left = signal_sent(ProcessSignal::TERM, Scope::Group, Origin::Shutdown, 11);
        if let EventKind::SignalSent { targets, .. } = &mut none_left {
            targets.clear();
        }
        held.apply(&event(100, none_left));
        assert!(
            !Badges::of(&held).stragglers,
            "a signal that reached nothing"
        );
        held.apply(&term(200));
        assert!(Badges::of(&held).stragglers);

        // An agent ends its background shell with a TERM to the group; the end-of-run stop
        // finds the server that TERM is still ending: no straggler. A KILL to what outlived
        // the TERM is one.
        let caller = |signal| signal_sent(signal, Scope::Group, Origin::Caller, 11);
        let shutdown = |signal| signal_sent(signal, Scope::Group, Origin::Shutdown, 11);
        let by_term = ExitStatus {
            code: None,
            signal: Some(15),
            core_dumped: false,
        };
        let mut ended = begun();
        ended.apply(&event(2, spawned(10)));
        ended.apply(&event(50, caller(ProcessSignal::TERM)));
        ended.apply(&event(
            50,
            EventKind::Exit {
                pid: 10,
                status: by_term,
            },
        ));
        ended.apply(&event(50, shutdown(ProcessSignal::TERM)));
        ended.apply(&event(50, shutdown(ProcessSignal::CONT)));
        assert!(
            !Badges::of(&ended).stragglers,
            "the same TERM again, and a CONT"
        );
        ended.apply(&event(2_050, shutdown(ProcessSignal::KILL)));
        assert!(Badges::of(&ended).stragglers, "it outlived the TERM");

        // A TERM long before an exit 0 ended nothing: what it reached and the stop after the
        // exit had to end is a straggler.
        let mut caught = begun();
        caught.apply(&event(2, spawned(10)));
        caught.apply(&event(5_000, caller(ProcessSignal::TERM)));
        caught.apply(&event(60_000, EventKind::Exit { pid: 10, status }));
        caught.apply(&event(60_000, shutdown(ProcessSignal::TERM)));
        assert!(Badges::of(&caught).stragglers, "the TERM ended nothing");
    }

    #[test]
    fn follows_a_run_from_spawn_to_close() {
        let mut c = begun();
        c.apply(&event(2, spawned(10)));
        assert_eq!(c.status, Status::Running);
        c.apply(&event(
            3,
            EventKind::Output {
                stream: Stream::Stderr,
                offset: 0,
                len: 5,
            },
        ));
        c.apply(&event(
            4,
            signal_sent(ProcessSignal::TERM, Scope::Group, Origin::Watchdog, 10),
        ));
        assert_eq!(c.status, Status::Running, "a lone TERM is only a signal");
        c.apply(&event(
            4,
            signal_sent(ProcessSignal::CONT, Scope::Group, Origin::Watchdog, 10),
        ));
        assert_eq!(c.status, Status::Stopping);
        let status = TERMINATED;
        c.apply(&event(5, EventKind::Exit { pid: 10, status }));
        c.apply(&event(
            6,
            EventKind::Close {
                stdout_bytes: 0,
                stderr_bytes: 5,
            },
        ));
        assert_eq!(c.status, Status::Exited(status));
        assert_eq!(c.status.label(), "SIGTERM");
        assert_eq!(c.bytes[Stream::Stderr as usize], 5);
        assert_eq!(c.runtime_ms(100), Some(3));
        // spawned, TERM, CONT, exit, close: output is not a timeline entry
        assert_eq!(c.timeline.len(), 5);
    }

    #[test]
    fn a_journal_that_says_its_stops_is_stopping_from_stop_started_alone() {
        let mut c = begun();
        c.apply(&event(
            1,
            EventKind::BrokerStarted {
                v: STOP_STARTED_SINCE,
                broker_pid: 9,
                control_socket: None,
            },
        ));
        c.apply(&event(2, spawned(10)));
        // The operator's TERM then CONT to one process: no stop.
        for signal in [ProcessSignal::TERM, ProcessSignal::CONT] {
            c.apply(&event(
                3,
                signal_sent(signal, Scope::Pid, Origin::Operator, 10),
            ));
        }
        assert_eq!(c.status, Status::Running);
        c.apply(&event(
            4,
            EventKind::StopStarted {
                origin: Origin::FinalDrain,
                grace: std::time::Duration::from_millis(500),
            },
        ));
        assert_eq!(c.status, Status::Stopping);
        assert!(c.drained, "a final drain's stop");
    }

    fn entry(pid: i32, start_ms: u64, argv: &[&str]) -> ProcessEntry {
        ProcessEntry {
            pid,
            ppid: 1,
            pgid: 10,
            argv: argv.iter().map(|a| a.to_string()).collect(),
            start_ms,
            escaped: false,
        }
    }

    fn tree(ts_ms: u64, processes: Vec<ProcessEntry>) -> Event {
        event(ts_ms, EventKind::Tree { processes })
    }

    #[test]
    fn an_argv_the_broker_read_late_is_the_processs_from_then_on() {
        let mut c = begun();
        c.apply(&tree(2, vec![entry(10, 2, &["sh"]), entry(11, 3, &[])]));
        c.apply(&tree(
            3,
            vec![entry(10, 2, &[]), entry(11, 3, &["sleep", "1"])],
        ));
        c.apply(&tree(4, vec![entry(10, 2, &[]), entry(11, 3, &[])]));
        let argvs =
            |c: &CommandState| -> Vec<String> { c.tree.iter().map(|p| p.argv.join(" ")).collect() };
        assert_eq!(argvs(&c), ["sh", "sleep 1"]);
        assert_eq!(c.seen[1].argv, ["sleep", "1"]);
    }

    #[test]
    fn a_tree_takes_left_out_argv_from_the_runs_earlier_events() {
        let mut c = begun();
        c.apply(&tree(2, vec![entry(10, 2, &["sh", "-c", "loop"])]));
        c.apply(&tree(
            3,
            vec![entry(10, 2, &[]), entry(11, 3, &["sleep", "1"])],
        ));
        let argvs =
            |c: &CommandState| -> Vec<String> { c.tree.iter().map(|p| p.argv.join(" ")).collect() };
        assert_eq!(argvs(&c), ["sh -c loop", "sleep 1"]);
        assert_eq!(c.seen.len(), 2);
        // A reused pid is another process: what it carries is its own.
        c.apply(&tree(
            4,
            vec![entry(10, 2, &[]), entry(11, 4, &["sleep", "2"])],
        ));
        assert_eq!(argvs(&c), ["sh -c loop", "sleep 2"]);
        assert_eq!(c.seen.len(), 3);

        // A restart is a new journal: nothing is remembered from the run before.
        c.begin_run("/tmp/y".into(), 5);
        c.apply(&tree(6, vec![entry(10, 2, &[])]));
        assert_eq!(argvs(&c), [""]);
    }

    #[test]
    fn a_command_stopped_by_a_signal_reads_stopped_until_it_runs_again() {
        let mut c = begun();
        c.apply(&event(2, spawned(10)));
        c.observe_state('S');
        assert_eq!(c.status, Status::Running);
        c.observe_state('T');
        assert_eq!(c.status.label(), "paused");
        assert!(c.status.is_active());
        c.observe_state('R');
        assert_eq!(c.status, Status::Running);
        // A stop sequence on a stopped command is a stop like any other.
        c.observe_state('T');
        for signal in ["TERM", "CONT"] {
            c.apply(&event(
                3,
                signal_sent(
                    signal.parse().expect("a signal"),
                    Scope::Group,
                    Origin::Operator,
                    10,
                ),
            ));
        }
        assert_eq!(c.status, Status::Stopping);
        c.observe_state('T');
        assert_eq!(c.status, Status::Stopping);
    }

    #[test]
    fn a_command_line_reads_as_typed() {
        let mut c = CommandState::new(CommandConfig::new(
            "x",
            CommandSpec::Argv(vec![
                "grep".into(),
                "-e".into(),
                "a b".into(),
                "it's".into(),
            ]),
        ));
        assert_eq!(c.command_line(), r"grep -e 'a b' 'it'\''s'");
        c.config.command = CommandSpec::Shell("# build\ncd sub &&\n  make -j2\n".into());
        assert_eq!(c.command_line(), "# build ⏎ cd sub && ⏎ make -j2");
        for (argv, shown) in [
            (&["/bin/bash", "-c", "ls /tmp"][..], "ls /tmp"),
            (&["bash", "-lc", "cd x && make"][..], "cd x && make"),
            (&["/bin/sh", "-l", "-c", "true"][..], "true"),
            (&["/bin/bash", "-c", "-l", "git status"][..], "git status"),
            (
                &[
                    "/bin/bash",
                    "-c",
                    "-l",
                    "shopt -u extglob 2>/dev/null || true && eval 'git status' < /dev/null && pwd -P >| /tmp/claude-a1-cwd",
                ][..],
                "git status",
            ),
            (
                &["/bin/bash", "-c", "echo $0", "name"][..],
                "/bin/bash -c 'echo $0' name",
            ),
            (&["python3", "-c", "print(1)"][..], "python3 -c 'print(1)'"),
        ] {
            c.config.command = CommandSpec::Argv(argv.iter().map(|a| a.to_string()).collect());
            assert_eq!(c.command_line(), shown, "{argv:?}");
        }
    }

    #[test]
    fn only_reaped_escapees_count_as_orphans() {
        let mut c = begun();
        let escapee = ProcessEntry {
            escaped: true,
            ..entry(12, 2, &["setsid", "sleep", "9"])
        };
        c.apply(&tree(
            2,
            vec![entry(10, 2, &["sh"]), entry(11, 2, &["python3"]), escapee],
        ));
        let status = TERMINATED;
        let reaped = |pid, escaped| {
            event(
                3,
                EventKind::OrphanReaped {
                    pid,
                    status,
                    escaped,
                },
            )
        };
        // python3, re-parented when sh ended, then the escapee: the broker says which.
        c.apply(&reaped(11, Some(false)));
        c.apply(&reaped(12, Some(true)));
        assert_eq!(c.escapees_reaped, 1);
        // A journal from before the broker said: the tree events did.
        c.apply(&reaped(11, None));
        c.apply(&reaped(12, None));
        c.apply(&reaped(99, None));
        assert_eq!(c.escapees_reaped, 2);
        assert_eq!(
            c.timeline.len(),
            5,
            "every reaped orphan is on the timeline"
        );
    }

    #[test]
    fn events_capped_is_on_the_timeline() {
        let mut c = begun();
        c.apply(&event(
            2,
            EventKind::EventsCapped {
                kind_capped: tether_protocol::protocol::CappedKind::Tree,
                budget: 65536,
                message: "no more".into(),
            },
        ));
        assert_eq!(c.timeline.len(), 1);
    }

    #[test]
    fn a_restart_keeps_the_earlier_runs_spans_and_the_latest_sixty_four() {
        let mut c = CommandState::new(CommandConfig::new(
            "worker",
            tether_protocol::protocol::CommandSpec::Shell("exit 1".into()),
        ));
        c.begin_run("/tmp/1".into(), 10);
        c.ended_ms = Some(20);
        c.status = Status::Exited(ExitStatus {
            code: Some(1),
            signal: None,
            core_dumped: false,
        });
        c.begin_run("/tmp/2".into(), 30);
        assert_eq!(
            c.earlier_runs,
            [EarlierRun {
                started_ms: 10,
                ended_ms: 20,
                failed: true
            }]
        );
        for n in 3..100 {
            c.begin_run(format!("/tmp/{n}").into(), n * 10);
        }
        assert_eq!(c.earlier_runs.len(), EARLIER_RUNS_KEPT);
        // The latest kept: runs 35 to 98, each ended where the next began.
        assert_eq!(c.earlier_runs[0].started_ms, 350);
        assert_eq!(c.earlier_runs.last().map(|r| r.ended_ms), Some(990));
    }

    /// A run with no journal directory (a full disk) is a failed run at its own time: the
    /// run before it stays an earlier one, and the next run does not record that span twice.
    #[test]
    fn a_run_that_could_not_begin_takes_no_time_of_the_one_before() {
        let mut c = CommandState::new(CommandConfig::new(
            "worker",
            tether_protocol::protocol::CommandSpec::Shell("true".into()),
        ));
        c.begin_run("/tmp/1".into(), 10);
        c.ended_ms = Some(20);
        c.status = Status::Exited(ExitStatus {
            code: Some(0),
            signal: None,
            core_dumped: false,
        });
        c.start_failed(50, "no room".into());
        assert_eq!(c.run, 2);
        assert_eq!((c.started_ms, c.ended_ms), (Some(50), Some(50)));
        assert_eq!(c.status, Status::FailedToStart);
        assert_eq!(c.journal_dir, None);
        assert_eq!(c.notice.as_deref(), Some("no room"));
        c.begin_run("/tmp/3".into(), 70);
        let spans: Vec<_> = c
            .earlier_runs
            .iter()
            .map(|r| (r.started_ms, r.ended_ms, r.failed))
            .collect();
        assert_eq!(spans, [(10, 20, false), (50, 50, true)]);
    }

    /// Each size the terminals had is kept with the bytes of each stream when it was given:
    /// the screen view replays what came before a resize at the size before it.
    #[test]
    fn terminal_sizes_are_kept_with_the_bytes_they_came_after() {
        use tether_protocol::protocol::fixtures::output;
        let mut c = begun();
        let size = |cols, rows| WindowSize { cols, rows };
        let streams = TerminalRequest {
            stdout: true,
            stderr: true,
            size: size(80, 24),
        };
        c.apply(&event(1, EventKind::Terminal { streams }));
        c.apply(&output(2, Stream::Stdout, 0, 100));
        c.apply(&output(3, Stream::Stderr, 0, 7));
        for size in [size(100, 30), size(0, 0), size(120, 40)] {
            c.apply(&event(4, EventKind::Resize { size }));
        }
        assert_eq!(
            c.terminal_sizes,
            [([0, 0], size(80, 24)), ([100, 7], size(120, 40))]
        );
        assert_eq!(c.terminal.map(|t| t.size), Some(size(120, 40)));
        let sizes = [(0, (24, 80)), (7, (40, 120))];
        assert_eq!(c.screen_sizes(Stream::Stderr), sizes);
        c.terminal = c.terminal.map(|t| TerminalRequest { stderr: false, ..t });
        assert!(c.screen_sizes(Stream::Stderr).is_empty(), "a pipe's: none");
    }
}
