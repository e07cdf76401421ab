//! Everything a broker knows about its command, and how each happening changes it.
//!
//! The interpreter in `run.rs` owns the descriptors, the files and the clock: it hands
//! what happened to [`Broker::handle`] as an [`Input`] and carries out what the broker asks
//! for, drained with [`Broker::poll_output`], and wakes it at [`Broker::poll_timeout`]. The
//! shape is `quinn-proto`'s `Connection`: nothing here reads a pipe, a cgroup file or
//! `/proc`, writes or removes a file, or waits; what it needs of the kernel is an output
//! whose answer comes back as an input, or a fact handed in (see `machine.rs`, `kernel.rs`).

use std::time::Duration;

use std::time::Instant;

mod attention;
mod budgets;
mod cgroup;
mod copy;
mod custody;
mod drain;
mod input;
mod kernel;
mod machine;
mod ready;
mod requests;
mod schedule;
mod time;

use crate::cost::SampledCost;
use crate::process::CgroupId;
use crate::process::ProcStat;
use crate::process::is_escaped;
use crate::protocol::{
    CapReason, CommandResult, Event, EventKind, ExitStatus, Failure, LaunchRequest, Peer,
    RESULT_FILE, Stage, Stream, StreamTotals, capped_argv,
};
use crate::stop::StopSequence;
use schedule::ScanSchedule;

pub use crate::reports::Reaped;
pub use attention::CommandNames;
pub use cgroup::{CgroupReleased, CgroupState};
pub use copy::CopyProgress;
pub use kernel::{Host, Now};
pub use machine::{Input, Output};
pub use ready::TryOutcome;
pub use requests::{OperatorSignaller, Refusal, Sender};

/// After the command exits, output is still read until the pipes are quiet this long...
const DRAIN_IDLE: Duration = Duration::from_millis(100);
/// ...but no longer than this in all, before stragglers holding the pipes are stopped.
const DRAIN_CAP: Duration = Duration::from_secs(2);
/// Once nothing is left running, how long to wait for the pipes to report end of file.
const EOF_WAIT: Duration = Duration::from_secs(1);
/// Consecutive chunks of one stream are journaled as one `output` event within this window.
const OUTPUT_COALESCE: Duration = Duration::from_millis(10);
/// Input is journaled as one event per this window at most: fewer lines, and no keystroke
/// timing in the journal.
const INPUT_COALESCE: Duration = Duration::from_secs(1);
/// Events not yet taken by a parent beyond this are journaled only (output events).
const PARENT_BACKLOG_CAP: usize = 8 << 20;

/// Where the broker is in a command's life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Running,
    /// The command exited; reading what its pipes still hold.
    Draining {
        since: Instant,
    },
    /// The command exited and processes of its tree remain, kept running by the leftovers
    /// rule until something stops them (see `custody.rs`).
    Custody,
    /// The command's pipes are done and processes of its tree remain: the interpreter lists
    /// them ([`Output::ListLeftovers`]), for the leftovers rule to keep or stop.
    Counting,
    /// Stopping what is left of the tree.
    TearingDown,
    /// Nothing is running; waiting for end of file on the pipes.
    Closing {
        until: Instant,
    },
    Done,
}

struct PendingOutput {
    stream: Stream,
    offset: u64,
    len: u64,
    ts_ms: u64,
    mono_us: u64,
    since: Instant,
}

struct Child {
    pid: i32,
    status: Option<ExitStatus>,
}

/// What one output stream brought and what of it is kept: every byte is counted, bytes are
/// stored until the command's bound (both streams' together) or until the disk refuses them
/// (the interpreter writes them).
#[derive(Default)]
struct StreamCount {
    total: u64,
    stored: u64,
    capped: bool,
    /// Bytes the front end's copy never delivered ([`copy`]).
    undelivered: u64,
}

/// Where one chunk of output goes: its place in the stream, how much of it is stored, and
/// whether storing stopped at it.
struct Placed {
    offset: u64,
    keep: usize,
    capped: bool,
}

impl StreamCount {
    /// Places a chunk of `len` bytes, of which `room` may still be stored (what the
    /// command's bound leaves).
    fn place(&mut self, len: usize, room: u64) -> Placed {
        let offset = self.total;
        self.total += len as u64;
        if self.capped {
            return Placed {
                offset,
                keep: 0,
                capped: false,
            };
        }
        let keep = len.min(usize::try_from(room).unwrap_or(usize::MAX));
        self.stored += keep as u64;
        self.capped = keep < len;
        Placed {
            offset,
            keep,
            capped: self.capped,
        }
    }

    fn totals(&self) -> StreamTotals {
        StreamTotals {
            bytes: self.total,
            stored: self.stored,
            undelivered: self.undelivered,
        }
    }
}

pub struct Broker {
    /// The wall clock at the input being handled, for the journal's `ts_ms`.
    wall_ms: u64,
    /// What the interpreter read of the machine and of the broker at the start.
    host: Host,
    /// The time of the input being handled.
    now: Instant,
    start: Instant,
    request: LaunchRequest,
    /// How notifications name the command.
    names: CommandNames,
    /// What the interpreter is to do, in order.
    outputs: std::collections::VecDeque<Output>,
    /// Whether the event log still takes lines (it failed once: no more).
    journal_alive: bool,
    /// Lines were appended to the event log since it was last flushed.
    unflushed: bool,
    /// What each output stream brought (stdout, stderr).
    streams: [StreamCount; 2],
    /// Which of the command's output streams are open: end of file not seen yet.
    open: [bool; 2],
    /// Bytes the parent has not taken yet: as the interpreter last said, plus lines sent since.
    parent_backlog: usize,
    /// Bytes of event lines handed to the event log so far.
    journal_len: u64,
    /// The control client whose `stop` started the running stop sequence.
    stop_client: Option<Peer>,
    child: Option<Child>,
    /// Whether the broker has a child left, alive or not yet reaped, as the interpreter read
    /// it right after its last reaping ([`Input::Reaped`]); only a reaping (or the spawn)
    /// changes it, since an orphan re-parented here comes from a child.
    children_left: bool,
    phase: Phase,
    stop: Option<StopSequence>,
    stop_done: bool,
    pending: Option<PendingOutput>,
    pending_input: Option<input::PendingInput>,
    last_output: Instant,
    drain_until: Option<Instant>,
    last_ping: Instant,
    unresponsive: bool,
    /// A walk for the tree's record was asked for and not answered yet.
    tree_sampling: bool,
    /// The live processes of the last full walk on the /proc path.
    last_walk: Option<Vec<ProcStat>>,
    /// The cgroup's `memory.peak` as it was released, for the cost at the end.
    memory_peak: Option<u64>,
    /// When the tree is next walked for the record.
    tree_walks: ScanSchedule,
    result: CommandResult,
    /// The command's own cgroup, where it has one: its members are the tree.
    cgroup: Option<CgroupId>,
    /// Its name, kept after the cgroup is released.
    cgroup_name: Option<String>,
    /// How the cgroup stood when the interpreter last read it ([`Input::Reaped`],
    /// [`Input::CgroupChanged`]).
    cgroup_state: CgroupState,
    /// Leftovers kept running, while they are.
    custody: Option<custody::Custody>,
    /// Custody began and the event loop has not let the front end go yet.
    custody_began: bool,
    /// A custodian that exited (or could not be watched) before there was anything to keep.
    custodian_gone: Option<(crate::protocol::LeftoversEnd, Option<i32>)>,
    /// The front end was let go (custody): nothing more is sent to it, and its going is no
    /// loss.
    parent_detached: bool,
    /// The final-drain trigger, when the request has `drain_on`.
    final_drain: Option<drain::FinalDrain>,
    /// The readiness probe, when the request has one.
    ready: Option<ready::ReadyWatch>,
    /// What the attention detector knows, and the notify command.
    attention: attention::Attention,
    /// The front end's copy of the output, once the command has ended.
    copy: copy::CopyWatch,
    /// The budgets' clock and the CPU measurements asked for.
    budgets: budgets::BudgetWatch,
}

/// Whether a reaped process had escaped, by the one rule the tree's record uses
/// ([`is_escaped`]); `None` when where it was could not be read.
fn escaped(place: Option<&ProcStat>, group: i32) -> Option<bool> {
    place.map(|p| is_escaped(p, group))
}

impl Broker {
    /// `final_line` is the request's `drain_on`, compiled (by `run.rs`, which refuses a
    /// launch whose pattern does not compile), and `ready_line` its `ready_log` pattern. `start`: when the broker started, the origin
    /// of the journal's `mono_us`. `names`: how notifications name the command.
    pub fn new(
        host: Host,
        start: Instant,
        now: Now,
        request: LaunchRequest,
        names: CommandNames,
        final_line: Option<regex::bytes::Regex>,
        ready_line: Option<regex::bytes::Regex>,
    ) -> Broker {
        let final_drain = final_line.map(|regex| drain::FinalDrain::new(regex, &request));
        let ready = (request.ready.clone()).and_then(|r| ready::ReadyWatch::new(r, ready_line));
        let attention = attention::Attention::new(&request.attention);
        let Now { at: now, wall_ms } = now;
        Broker {
            wall_ms,
            host,
            now,
            start,
            request,
            names,
            outputs: Default::default(),
            journal_alive: true,
            unflushed: false,
            streams: Default::default(),
            open: [false; 2],
            parent_backlog: 0,
            journal_len: 0,
            stop_client: None,
            child: None,
            children_left: false,
            phase: Phase::Running,
            stop: None,
            stop_done: false,
            pending: None,
            pending_input: None,
            last_output: now,
            drain_until: None,
            last_ping: now,
            unresponsive: false,
            tree_sampling: false,
            last_walk: None,
            memory_peak: None,
            tree_walks: ScanSchedule::new(now),
            result: CommandResult {
                started_ms: wall_ms,
                ..CommandResult::default()
            },
            cgroup: None,
            cgroup_name: None,
            cgroup_state: CgroupState::Empty,
            custody: None,
            custody_began: false,
            custodian_gone: None,
            parent_detached: false,
            final_drain,
            ready,
            attention,
            copy: copy::CopyWatch::new(now),
            budgets: Default::default(),
        }
    }

    pub(super) fn mono_us(&self) -> u64 {
        self.now.saturating_duration_since(self.start).as_micros() as u64
    }

    /// Journals an event and queues the same line for the parent.
    pub(super) fn emit(&mut self, kind: EventKind) {
        if !matches!(kind, EventKind::Output { .. }) {
            self.flush_output();
        }
        if !matches!(kind, EventKind::Output { .. } | EventKind::Input { .. }) {
            self.flush_input();
        }
        self.record(&self.stamp(kind));
    }

    /// Journals an event (pongs excepted) and queues the very same line for the parent and
    /// for control-socket subscribers.
    pub(super) fn record(&mut self, event: &Event) {
        let line = event.to_line();
        let pong = matches!(event.kind, EventKind::Pong);
        let journal = !pong && self.journal_alive;
        if journal {
            self.journal_len += line.len() as u64;
            self.unflushed = true;
        }
        let parent = self.parent_takes(line.len(), matches!(event.kind, EventKind::Output { .. }));
        self.outputs.push_back(Output::Event {
            line,
            journal,
            subscribers: !pong,
            parent,
        });
    }

    /// Bytes of `events.jsonl` written so far (once flushed).
    pub fn journal_len(&self) -> u64 {
        self.journal_len
    }

    /// Whether a line of `len` bytes goes to the parent: not once it is gone or let go, and
    /// an output event not while the parent is more than [`PARENT_BACKLOG_CAP`] behind.
    fn parent_takes(&mut self, len: usize, droppable: bool) -> bool {
        if self.result.parent_lost
            || self.parent_detached
            || (droppable && self.parent_backlog > PARENT_BACKLOG_CAP)
        {
            return false;
        }
        self.parent_backlog += len;
        true
    }

    /// The event log cannot be written (disk full, I/O error): say so to the parent and keep
    /// the command running; output files are handled by their own cap. `unwritten`: bytes
    /// counted as journaled that were not.
    pub(super) fn journal_failed(&mut self, err: &std::io::Error, unwritten: u64) {
        if !self.journal_alive {
            return;
        }
        self.journal_alive = false;
        self.journal_len = self.journal_len.saturating_sub(unwritten);
        let line = self
            .stamp(EventKind::BrokerFailure {
                stage: Stage::Internal,
                code: "journal_write".into(),
                message: format!(
                    "cannot append to the event log in {}: {err}; events are still sent live",
                    self.request.journal_dir.display()
                ),
            })
            .to_line();
        let parent = self.parent_takes(line.len(), false);
        self.outputs.push_back(Output::Event {
            line,
            journal: false,
            subscribers: true,
            parent,
        });
    }

    /// Asks for what was appended to the event log to reach the disk; nothing when nothing
    /// waits.
    pub(super) fn flush_journal(&mut self) {
        if std::mem::take(&mut self.unflushed) && self.journal_alive {
            self.outputs.push_back(Output::FlushJournal);
        }
    }

    // ---- the command ------------------------------------------------------------------

    pub(super) fn spawned(&mut self, pid: i32, start_ticks: Option<u64>, argv: Vec<String>) {
        self.child = Some(Child { pid, status: None });
        self.children_left = true;
        self.open = [true; 2];
        self.result.pid = Some(pid);
        let now = self.now;
        self.last_output = now;
        self.tree_walks = ScanSchedule::new(now + Duration::from_millis(50));
        self.attention_spawned(now);
        self.budgets_spawned(now);
        self.ready_spawned(now);
        self.emit(EventKind::Spawned {
            pid,
            pgid: pid,
            argv: capped_argv(argv),
            start_ticks,
        });
    }

    pub(super) fn spawn_failed(&mut self, code: String, message: String) {
        self.result.failure = Some(Failure {
            stage: Stage::Spawn,
            code: code.clone(),
            message: message.clone(),
        });
        self.emit(EventKind::SpawnError { code, message });
        self.attention_spawn_failed();
        self.phase = Phase::Done;
    }

    /// The command's process group, while its leader is unreaped (so the pgid is still ours).
    pub(super) fn live_group(&self) -> Option<i32> {
        self.child
            .as_ref()
            .filter(|c| c.status.is_none())
            .map(|c| c.pid)
    }

    /// Something may have changed the tree, or a front end wants it current: it is walked
    /// within a second.
    pub(super) fn tree_may_have_changed(&mut self) {
        self.tree_walks.activity(self.now);
    }

    pub(super) fn child_reaped(&self) -> bool {
        self.child.as_ref().is_none_or(|c| c.status.is_some())
    }

    /// Whether anything of the command's tree may still run: after the last reaping, a
    /// child left is a live one (or one that ended since, reaped at the next SIGCHLD).
    pub(super) fn tree_left(&self) -> bool {
        // The cgroup's word too: `populated 0` once its last process is gone.
        self.children_left || self.cgroup_populated()
    }

    /// The interpreter reaped `children` (the command itself, or descendants re-parented to
    /// this subreaper), in the kernel's order; `children_left`: whether any child is left;
    /// `cgroup`: how the cgroup stands, read right after (`None` without one).
    pub(super) fn reaped(
        &mut self,
        children: Vec<Reaped>,
        children_left: bool,
        cgroup: Option<CgroupState>,
    ) {
        if let Some(state) = cgroup {
            self.cgroup_state = state;
        }
        for reaped in children {
            self.tree_walks.activity(self.now);
            let main = self.child.as_ref().is_some_and(|c| c.pid == reaped.pid);
            if !main && self.tethers_own_process(&reaped) {
                continue;
            }
            let Reaped {
                pid, status, place, ..
            } = reaped;
            match self.child.as_mut() {
                Some(child) if child.pid == pid => {
                    child.status = Some(status);
                    self.result.exit = Some(status);
                    self.phase = Phase::Draining { since: self.now };
                    self.emit(EventKind::Exit { pid, status });
                    self.attention_exited(status);
                }
                child => {
                    let group = child.map_or(0, |c| c.pid);
                    let escaped = escaped(place.as_ref(), group);
                    self.result.orphans_reaped += 1;
                    self.emit(EventKind::OrphanReaped {
                        pid,
                        status,
                        escaped,
                    });
                }
            }
        }
        self.children_left = children_left;
        self.check_stop_done();
    }

    pub(super) fn output(&mut self, stream: Stream, bytes: &[u8]) {
        // Whatever was journaled before these bytes reaches the disk before them: a reader
        // that sees output also sees the events that came first (`spawned`, a signal). Cheap:
        // nothing is written when nothing waits.
        self.flush_journal();
        let now = self.now;
        self.last_output = now;
        self.tree_walks.activity(now);
        self.attention_output(now, bytes);
        if matches!(self.phase, Phase::Draining { .. }) {
            self.drain_until = Some(now + DRAIN_IDLE);
        }
        // One bound for the command: a flood on either stream leaves the journal no bigger.
        let stored: u64 = self.streams.iter().map(|s| s.stored).sum();
        let room = self.request.max_output.saturating_sub(stored);
        let placed = self.streams[stream as usize].place(bytes.len(), room);
        self.copy_read(stream, bytes.len());
        if placed.keep > 0 {
            self.outputs.push_back(Output::Store {
                stream,
                keep: placed.keep,
            });
        }
        let len = bytes.len() as u64;
        match self.pending.as_mut() {
            Some(p) if p.stream == stream && p.offset + p.len == placed.offset => p.len += len,
            _ => {
                self.flush_output();
                self.pending = Some(PendingOutput {
                    stream,
                    offset: placed.offset,
                    len,
                    ts_ms: self.wall_ms,
                    mono_us: self.mono_us(),
                    since: now,
                });
            }
        }
        if placed.capped {
            let message = format!(
                "the command's output reached its journal cap of {} (stdout and stderr together) in {}: its first {} bytes are kept, further bytes are counted, not stored (raise the cap with --max-output, TETHER_MAX_OUTPUT or [journal] max_output)",
                crate::units::format_size(self.request.max_output),
                stream.file_name(),
                self.streams[stream as usize].stored,
            );
            self.output_capped(stream, CapReason::Limit, message);
        }
        let total = self.streams.iter().map(|s| s.total).sum();
        self.check_output_budget(total);
        // After the bytes' own `output` event (emitting flushes it): the journal has the
        // final line before the event that names it.
        self.watch_for_final_line(stream, bytes, now);
        self.ready_output(stream, bytes);
    }

    pub(super) fn flush_output(&mut self) {
        if let Some(p) = self.pending.take() {
            let event = Event {
                ts_ms: p.ts_ms,
                mono_us: p.mono_us,
                kind: EventKind::Output {
                    stream: p.stream,
                    offset: p.offset,
                    len: p.len,
                },
            };
            self.record(&event);
        }
    }

    fn output_capped(&mut self, stream: Stream, reason: CapReason, message: String) {
        let stored = self.streams[stream as usize].stored;
        self.emit(EventKind::OutputCapped {
            stream,
            reason,
            stored,
            message,
        });
    }

    /// Storing a stream's bytes failed (disk full, I/O error): `stored` of it reached the
    /// file, nothing more is stored, every byte is still counted. A stream already capped by
    /// its limit says so once.
    pub(super) fn store_failed(
        &mut self,
        stream: Stream,
        reason: CapReason,
        message: String,
        stored: u64,
    ) {
        let count = &mut self.streams[stream as usize];
        let already = count.capped;
        count.capped = true;
        count.stored = stored;
        if !already {
            self.output_capped(stream, reason, message);
        }
    }

    /// Says, at the end, what of each stream the journal kept and what it dropped (the
    /// bound, or a disk that refused): every view of the output shows it.
    fn journal_truncations(&mut self) {
        for stream in Stream::BOTH {
            let count = &self.streams[stream as usize];
            let dropped = count.total - count.stored;
            if dropped > 0 {
                let kept = count.stored;
                self.emit(EventKind::OutputTruncated {
                    stream,
                    kept,
                    dropped,
                });
            }
        }
    }

    pub(super) fn stdio_failed(&mut self, stream: Stream, err: &std::io::Error) {
        let message = format!("reading the command's {stream:?} failed: {err}");
        self.broker_failure(Stage::Stdio, "read", message);
    }

    /// Journals the end of the command and asks for the tree's record to be closed
    /// ([`Input::TreeClosed`]), then for `result.json` to be written
    /// ([`Input::ResultWritten`]).
    pub(super) fn finish(&mut self) {
        // Whatever ended last was reaped just before ([`Input::Reaped`]).
        if self.attention_finish() {
            // The rest once the notify command's runs are over ([`Input::NotifyWoundDown`]).
            return;
        }
        self.finish_closing();
    }

    /// The end, once nothing of the notify command runs: what is pending is journaled and
    /// the tree's record closed.
    pub(super) fn finish_closing(&mut self) {
        self.flush_output();
        self.flush_input();
        self.journal_truncations();
        self.journal_undelivered();
        self.close_custody_record();
        // The tree's record closes once the cgroup is released ([`Input::CgroupReleased`]).
        if !self.release_cgroup() {
            self.outputs.push_back(Output::CloseTree);
        }
    }

    /// The tree's record is closed (`record`: an empty tree, if the last one recorded was
    /// not), `cost` is what its samples saw and `children` what the kernel accounted to the
    /// reaped children: the result is complete.
    pub(super) fn tree_closed(
        &mut self,
        record: Option<EventKind>,
        cost: &SampledCost,
        children: (u64, u64),
    ) {
        self.record_cost(cost, children);
        if let Some(event) = record {
            self.record_tree(event);
        }
        self.result.stdout = self.streams[0].totals();
        self.result.stderr = self.streams[1].totals();
        self.result.ended_ms = self.wall_ms;
        self.result.duration_ms = self.result.ended_ms.saturating_sub(self.result.started_ms);
        // In the journal before `result.json` says the command is over: a reader that finds
        // the result (a test, the MCP server, a watch) finds the events up to `close` too,
        // the exit and the last tree among them, not still in the writer's buffer.
        self.flush_journal();
        self.outputs
            .push_back(Output::WriteResult(Box::new(self.result.clone())));
    }

    /// `result.json` was written, or not: the journal closes, and the broker exits with 0
    /// when the command ran its course, 1 when the parent was lost.
    pub(super) fn result_written(&mut self, written: std::io::Result<()>) {
        if let Err(err) = written {
            let path = self.request.journal_dir.join(RESULT_FILE);
            let message = format!("cannot write {}: {err}", path.display());
            self.broker_failure(Stage::Internal, "result_write", message);
        }
        self.emit(EventKind::Close {
            stdout_bytes: self.result.stdout.bytes,
            stderr_bytes: self.result.stderr.bytes,
        });
        self.flush_journal();
        self.outputs
            .push_back(Output::Exit(i32::from(self.result.parent_lost)));
    }
}

#[cfg(test)]
mod tests;
