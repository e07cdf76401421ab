//! Everything a broker knows about its command, and how each happening changes it.
//! The event loop in `run.rs` feeds this; nothing here waits.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

mod attention;
mod cgroup;
mod custody;
mod drain;
mod input;
mod requests;
mod time;

use super::stop::StopSequence;
use super::tree::schedule::ScanSchedule;
use super::tree::{TreeRecorder, is_escaped, tree_budget};
use crate::cgroup::CommandCgroup;
use crate::clock::now_ms;
use crate::journal::JournalDir;
use crate::journal::writer::{EventLog, RESULT_FILE, StreamLog};
use crate::procfs::{self, ProcStat};
use crate::protocol::{
    CommandResult, Event, EventKind, ExitStatus, Failure, LaunchRequest, Peer, Stage, Stream,
    StreamTotals, capped_argv,
};

pub use requests::Refusal;

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

pub struct Broker {
    start: Instant,
    started_ms: u64,
    pid: i32,
    request: LaunchRequest,
    /// The command's journal directory, as the front end handed it over.
    dir: JournalDir,
    events: Option<EventLog>,
    logs: [StreamLog; 2],
    /// Lines for the parent produced since the loop last took them.
    pub to_parent: Vec<u8>,
    /// Bytes the parent has not taken yet, as the loop last saw.
    pub parent_backlog: usize,
    /// Lines for control-socket subscribers produced since the loop last took them; filled
    /// only while `subscribed`.
    pub to_subscribers: Vec<u8>,
    /// Whether any control client subscribed to events (set by the loop).
    pub subscribed: bool,
    /// Bytes of event lines handed to the event log so far.
    journal_len: u64,
    /// The control client whose `stop` started the running stop sequence.
    stop_client: Option<Peer>,
    child: Option<Child>,
    failure: Option<Failure>,
    phase: Phase,
    stop: Option<StopSequence>,
    stop_done: bool,
    pending: Option<PendingOutput>,
    pending_input: Option<input::PendingInput>,
    last_output: Instant,
    drain_until: Option<Instant>,
    last_ping: Instant,
    unresponsive: bool,
    tree: TreeRecorder,
    /// When the tree is next walked for the record.
    tree_walks: ScanSchedule,
    result: CommandResult,
    /// The command's own cgroup, where it has one: its members are the tree.
    cgroup: Option<Arc<CommandCgroup>>,
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
    /// What the attention detector knows, and the notify command.
    attention: attention::Attention,
}

/// One ended child, reaped: its pid, how it ended, and where it was (its process group and
/// session, read while it was still a zombie).
struct Reaped {
    pid: i32,
    status: ExitStatus,
    place: Option<ProcStat>,
}

/// Whether this process has a child left, alive or not yet reaped. A subreaper with no child
/// has no descendant at all: every process of the command's tree is a child of the broker or
/// a descendant of one (orphans are re-parented to it). So the kernel answers in one call
/// what a walk of /proc, reading every process on the machine, would.
fn has_children() -> bool {
    !matches!(peek_ended_child(), Err(libc::ECHILD))
}

/// The pid of a child that has ended, left unreaped (`WNOWAIT`); `Ok(None)` when children
/// remain but none has ended; `Err(ECHILD)` when there is no child at all.
fn peek_ended_child() -> Result<Option<i32>, i32> {
    // SAFETY: a zeroed siginfo_t is a valid value; waitid only writes into it.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: waitid writes only into `info`.
    let peeked = unsafe {
        libc::waitid(
            libc::P_ALL,
            0,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        )
    };
    if peeked < 0 {
        return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0));
    }
    // SAFETY: filled in by waitid for a child that has ended; 0 when none has.
    let pid = unsafe { info.si_pid() };
    Ok((pid != 0).then_some(pid))
}

/// Reaps one ended child without waiting. The child is first only looked at (`WNOWAIT`), so
/// that its `/proc` entry, group and session included, can still be read; then reaped.
fn reap_one() -> Result<Option<Reaped>, i32> {
    let Some(pid) = peek_ended_child()? else {
        return Ok(None);
    };
    let place = procfs::read_stat(pid);
    match wait_status(pid)? {
        Some(status) => Ok(Some(Reaped { pid, status, place })),
        None => Ok(None),
    }
}

/// Reaps `pid`, which has ended. `libc` directly: nix turns the status into its `Signal` enum
/// and fails (after the kernel has already reaped the child) for real-time signals, which
/// would lose the exit for good.
fn wait_status(pid: i32) -> Result<Option<ExitStatus>, i32> {
    let mut raw = 0;
    let reaped = loop {
        // SAFETY: waitpid only writes the status into `raw`.
        let reaped = unsafe { libc::waitpid(pid, &mut raw, libc::WNOHANG) };
        match reaped {
            r if r >= 0 => break r,
            _ => match std::io::Error::last_os_error().raw_os_error().unwrap_or(0) {
                libc::EINTR => continue,
                errno => return Err(errno),
            },
        }
    };
    if reaped == 0 {
        return Ok(None);
    }
    let status = if libc::WIFEXITED(raw) {
        ExitStatus {
            code: Some(libc::WEXITSTATUS(raw)),
            signal: None,
            core_dumped: false,
        }
    } else {
        ExitStatus {
            code: None,
            signal: Some(libc::WTERMSIG(raw)),
            core_dumped: libc::WCOREDUMP(raw),
        }
    };
    Ok(Some(status))
}

/// Whether a reaped process had escaped, by the one rule the tree's record uses
/// ([`is_escaped`]); `None` when where it was could not be read.
fn escaped(place: Option<&ProcStat>, group: i32) -> Option<bool> {
    place.map(|p| is_escaped(p, group))
}

impl Broker {
    /// `final_line` is the request's `drain_on`, compiled (by `run.rs`, which refuses a
    /// launch whose pattern does not compile).
    pub fn new(
        start: Instant,
        request: LaunchRequest,
        final_line: Option<regex::bytes::Regex>,
        dir: JournalDir,
        events: EventLog,
        logs: [StreamLog; 2],
    ) -> Broker {
        let now = Instant::now();
        let tree_budget = tree_budget(request.max_output);
        let final_drain = final_line.map(|regex| drain::FinalDrain::new(regex, &request));
        let attention = attention::Attention::new(&request.attention);
        Broker {
            start,
            started_ms: now_ms(),
            pid: std::process::id() as i32,
            request,
            dir,
            events: Some(events),
            logs,
            to_parent: Vec::new(),
            parent_backlog: 0,
            to_subscribers: Vec::new(),
            subscribed: false,
            journal_len: 0,
            stop_client: None,
            child: None,
            failure: None,
            phase: Phase::Running,
            stop: None,
            stop_done: false,
            pending: None,
            pending_input: None,
            last_output: now,
            drain_until: None,
            last_ping: now,
            unresponsive: false,
            tree: TreeRecorder::new(tree_budget),
            tree_walks: ScanSchedule::new(now),
            result: CommandResult::default(),
            cgroup: None,
            custody: None,
            custody_began: false,
            custodian_gone: None,
            parent_detached: false,
            final_drain,
            attention,
        }
    }

    pub(super) fn mono_us(&self) -> u64 {
        self.start.elapsed().as_micros() as u64
    }

    /// Journals an event and queues the same line for the parent.
    pub fn emit(&mut self, kind: EventKind) {
        if !matches!(kind, EventKind::Output { .. }) {
            self.flush_output();
        }
        if !matches!(kind, EventKind::Output { .. } | EventKind::Input { .. }) {
            self.flush_input();
        }
        let event = Event {
            ts_ms: now_ms(),
            mono_us: self.mono_us(),
            kind,
        };
        self.record(&event);
    }

    /// Journals an event (pongs excepted) and queues the very same line for the parent and
    /// for control-socket subscribers.
    pub(super) fn record(&mut self, event: &Event) {
        let line = event.to_line();
        if !matches!(event.kind, EventKind::Pong) {
            match self.events.as_mut().map(|log| log.append(&line)) {
                Some(Ok(())) => self.journal_len += line.len() as u64,
                Some(Err(err)) => self.journal_failed(&err),
                None => {}
            }
            if self.subscribed {
                self.to_subscribers.extend_from_slice(&line);
            }
        }
        self.send_to_parent(&line, matches!(event.kind, EventKind::Output { .. }));
    }

    /// Bytes of `events.jsonl` written so far (once flushed).
    pub fn journal_len(&self) -> u64 {
        self.journal_len
    }

    pub(super) fn send_to_parent(&mut self, line: &[u8], droppable: bool) {
        if self.result.parent_lost
            || self.parent_detached
            || (droppable && self.to_parent.len() + self.parent_backlog > PARENT_BACKLOG_CAP)
        {
            return;
        }
        self.to_parent.extend_from_slice(line);
    }

    /// The event log cannot be written (disk full, I/O error): say so to the parent and keep
    /// the command running; output files are handled by their own cap.
    pub(super) fn journal_failed(&mut self, err: &std::io::Error) {
        self.events = None;
        let event = Event {
            ts_ms: now_ms(),
            mono_us: self.mono_us(),
            kind: EventKind::BrokerFailure {
                stage: Stage::Internal,
                code: "journal_write".into(),
                message: format!(
                    "cannot append to the event log in {}: {err}; events are still sent live",
                    self.request.journal_dir.display()
                ),
            },
        };
        let line = event.to_line();
        if self.subscribed {
            self.to_subscribers.extend_from_slice(&line);
        }
        self.send_to_parent(&line, false);
    }

    pub fn flush_journal(&mut self) {
        if let Some(Err(err)) = self.events.as_mut().map(EventLog::flush) {
            self.journal_failed(&err);
        }
    }

    // ---- the command ------------------------------------------------------------------

    pub fn spawned(&mut self, pid: i32, start_ticks: Option<u64>, argv: Vec<String>) {
        self.child = Some(Child { pid, status: None });
        self.result.pid = Some(pid);
        let now = Instant::now();
        self.last_output = now;
        self.tree_walks = ScanSchedule::new(now + Duration::from_millis(50));
        self.attention_spawned(now);
        self.emit(EventKind::Spawned {
            pid,
            pgid: pid,
            argv: capped_argv(argv),
            start_ticks,
        });
    }

    pub fn spawn_failed(&mut self, code: String, message: String) {
        self.failure = Some(Failure {
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
    pub fn tree_may_have_changed(&mut self) {
        self.tree_walks.activity(Instant::now());
    }

    pub(super) fn child_reaped(&self) -> bool {
        self.child.as_ref().is_none_or(|c| c.status.is_some())
    }

    /// Whether anything of the command's tree may still run: after [`Broker::reap`], a child
    /// left is a live one (or one that ended since, reaped at the next SIGCHLD).
    pub(super) fn tree_left(&self) -> bool {
        // The cgroup's word too: `populated 0` once its last process is gone.
        has_children() || self.cgroup_populated()
    }

    /// Reaps every child that has ended: the command itself, or a descendant re-parented to
    /// this subreaper.
    pub fn reap(&mut self) {
        loop {
            let Reaped { pid, status, place } = match reap_one() {
                Ok(Some(reaped)) => reaped,
                Ok(None) | Err(libc::ECHILD) => break,
                Err(libc::EINTR) => continue,
                // Nothing else is expected of waitpid(-1, WNOHANG); the next SIGCHLD retries.
                Err(_) => break,
            };
            self.tree_walks.activity(Instant::now());
            match self.child.as_mut() {
                Some(child) if child.pid == pid => {
                    child.status = Some(status);
                    self.result.exit = Some(status);
                    self.phase = Phase::Draining {
                        since: Instant::now(),
                    };
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
        self.check_stop_done();
    }

    pub fn output(&mut self, stream: Stream, bytes: &[u8]) {
        // Whatever was journaled before these bytes reaches the disk before them: a reader
        // that sees output also sees the events that came first (`spawned`, a signal). Cheap:
        // nothing is written when nothing waits.
        self.flush_journal();
        let now = Instant::now();
        self.last_output = now;
        self.tree_walks.activity(now);
        self.attention_output(now);
        if matches!(self.phase, Phase::Draining { .. }) {
            self.drain_until = Some(now + DRAIN_IDLE);
        }
        let stored = self.logs[stream as usize].write(bytes);
        let len = bytes.len() as u64;
        match self.pending.as_mut() {
            Some(p) if p.stream == stream && p.offset + p.len == stored.offset => p.len += len,
            _ => {
                self.flush_output();
                self.pending = Some(PendingOutput {
                    stream,
                    offset: stored.offset,
                    len,
                    ts_ms: now_ms(),
                    mono_us: self.mono_us(),
                    since: now,
                });
            }
        }
        if let Some((reason, message)) = stored.capped {
            let stored = self.logs[stream as usize].stored();
            self.emit(EventKind::OutputCapped {
                stream,
                reason,
                stored,
                message,
            });
        }
        // After the bytes' own `output` event (emitting flushes it): the journal has the
        // final line before the event that names it.
        self.watch_for_final_line(stream, bytes, now);
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

    pub fn stdio_failed(&mut self, stream: Stream, err: &std::io::Error) {
        self.emit(EventKind::BrokerFailure {
            stage: Stage::Stdio,
            code: "read".into(),
            message: format!("reading the command's {stream:?} failed: {err}"),
        });
    }

    /// Journals the end of the command and writes `result.json`. Returns the broker's exit
    /// code.
    pub fn finish(&mut self) -> i32 {
        self.reap();
        self.attention_finish();
        self.flush_output();
        self.flush_input();
        self.close_custody_record();
        let memory_peak = self.release_cgroup();
        self.record_cost(memory_peak);
        if let Some(event) = self.tree.close() {
            self.record_tree(event);
        }
        let totals = |log: &StreamLog| StreamTotals {
            bytes: log.total(),
            stored: log.stored(),
        };
        self.result.stdout = totals(&self.logs[0]);
        self.result.stderr = totals(&self.logs[1]);
        self.result.failure = self.failure.clone();
        self.result.started_ms = self.started_ms;
        self.result.ended_ms = now_ms();
        self.result.duration_ms = self.result.ended_ms.saturating_sub(self.started_ms);
        if let Err(err) = self.dir.write_json_once(RESULT_FILE, &self.result) {
            let result_path = self.dir.join(RESULT_FILE);
            self.emit(EventKind::BrokerFailure {
                stage: Stage::Internal,
                code: "result_write".into(),
                message: format!("cannot write {}: {err}", result_path.display()),
            });
        }
        self.emit(EventKind::Close {
            stdout_bytes: self.result.stdout.bytes,
            stderr_bytes: self.result.stderr.bytes,
        });
        self.flush_journal();
        i32::from(self.result.parent_lost)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(pgid: i32, sid: i32) -> ProcStat {
        ProcStat {
            pid: 50,
            ppid: 1,
            pgid,
            sid,
            state: b'Z',
            start_ticks: 0,
            ..ProcStat::default()
        }
    }

    #[test]
    fn only_a_process_out_of_the_group_and_session_escaped() {
        // Pipes: the command (group 10) shares the broker's session (5).
        // Re-parented when its parent ended, still in the command's group: no escapee.
        assert_eq!(escaped(Some(&at(10, 5)), 10), Some(false));
        // setsid: a session and a group of its own.
        assert_eq!(escaped(Some(&at(50, 50)), 10), Some(true));
        // setpgid: out of the group, in the broker's session.
        assert_eq!(escaped(Some(&at(50, 5)), 10), Some(true));
        // A terminal: the command leads session 10; a job in group 50 of it is no escapee.
        assert_eq!(escaped(Some(&at(50, 10)), 10), Some(false));
        assert_eq!(escaped(None, 10), None);
    }
}
