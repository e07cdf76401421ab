//! The broker's conversation with its interpreter: what happened in ([`Input`]), what to do
//! out ([`Output`]), and when to be woken ([`Broker::poll_timeout`]).
//!
//! The interpreter (`run.rs`) owns every descriptor: the parent's pipe, the command's pipes,
//! the journal's files, the control socket. It hands each happening to [`Broker::handle`],
//! then drains [`Broker::poll_output`] until it is empty, carrying out each output in order
//! (an output's failure comes back as an input, at once); after every wake-up it reaps
//! ([`Input::Reaped`]) and hands [`Input::Tick`], which does whatever is due at `now`.

use std::io;

use std::time::Duration;

use super::requests::{OperatorDelivered, OperatorSignal, Sender};
use super::{Broker, CgroupReleased, CgroupState, CopyProgress, Now, Reaped};
use crate::attention::inputs::{InputFile, Looks};
use crate::cost::SampledCost;
use crate::process::{CgroupId, TreeWalk};
use crate::protocol::{
    CapReason, CommandResult, EventKind, LeftoversEnd, ParentLossCause, Peer, ReadyProbe, Refusal,
    Request, Stream, WindowSize,
};
use crate::reports::InputTaken;
use crate::reports::TreeSample;
use crate::stop::{Delivered, SignalPlan};

/// What happened, as the interpreter saw it.
pub enum Input<'a> {
    /// Something the interpreter did or found that the journal records as it is: the broker
    /// started, its containment, a terminal it could not give.
    Happened(EventKind),
    /// The command's containment: its cgroup, or `None` for the walk of /proc.
    Contained(Option<CgroupId>),
    /// The command was started, as `pid` (its start time read while it was unreaped).
    Spawned {
        pid: i32,
        start_ticks: Option<u64>,
        argv: Vec<String>,
        /// What it reads input from (its stdin, its terminals), for attention to tell a
        /// process waiting on them.
        inputs: Vec<InputFile>,
        /// Whether its cgroup listed it, read right after the spawn (false without one).
        in_cgroup: bool,
        /// Whether it had already ended (or could not be read), read right after that.
        ended: bool,
    },
    /// The command could not be started (`code`, `message`).
    SpawnFailed { code: String, message: String },
    /// The interpreter reaped `children`, in the kernel's order (on SIGCHLD, before every
    /// [`Input::Tick`] and before [`Input::Finish`]): the command, or processes re-parented
    /// to the broker. `children_left`: whether any child is left, alive or unreaped, read
    /// right after, and `cgroup`, how the command's cgroup stands then (`None` without one).
    Reaped {
        children: Vec<Reaped>,
        children_left: bool,
        cgroup: Option<CgroupState>,
    },
    /// A chunk read from the command's stdout or stderr. The [`Output::Store`] it asks for
    /// is carried out from this very chunk, before the next read.
    Read { stream: Stream, bytes: &'a [u8] },
    /// End of file on one of the command's streams (or its terminal hung up).
    Closed { stream: Stream },
    /// Reading one of the command's streams failed; it is closed.
    ReadFailed { stream: Stream, error: io::Error },
    /// A request line from the parent or a control client, as [`Request::parse`] read it
    /// (a line it could not read is refused). The parent's input and sizes are carried out
    /// by the interpreter, which holds the terminals ([`Input::Typed`], [`Input::Resized`]).
    Request {
        from: Sender,
        request: Result<Request, Refusal>,
    },
    /// A control connection refused; the broker journals it, then answers `client` (the
    /// refusal reaches the journal before the peer hears of it, and the connection ends
    /// with the answer).
    ControlRefused {
        client: u64,
        peer: Peer,
        reason: String,
    },
    /// Input the parent sent, and how much of it reached the terminal's queue.
    Typed(InputTaken),
    /// Queued input that could not be written after all (the terminal closed).
    TypedDropped(u64),
    /// The command's terminal took a new size.
    Resized(WindowSize),
    /// The parent is gone, as `cause` says.
    ParentLost(ParentLossCause),
    /// Bytes of event lines the parent has not taken yet.
    ParentBacklog(usize),
    /// The front end was let go ([`Output::LetFrontEndGo`]); `stderr` says whether the
    /// broker's stderr could be pointed away from the caller's.
    FrontEndLetGo { stderr: io::Result<()> },
    /// A custodian of the leftovers exited.
    CustodianExited {
        reason: LeftoversEnd,
        pid: Option<i32>,
    },
    /// A custodian could not be watched (it had exited already, or there is none).
    CustodianUnwatched {
        reason: LeftoversEnd,
        pid: Option<i32>,
    },
    /// SIGTERM, SIGINT or SIGHUP to the broker; `sender`: the process that sent it, as the
    /// kernel said.
    Shutdown { sender: Option<i32> },
    /// The command's cgroup changed (`cgroup.events`), and now stands as read (`None`
    /// without one).
    CgroupChanged(Option<CgroupState>),
    /// The cgroup was released ([`Output::ReleaseCgroup`]).
    CgroupReleased(CgroupReleased),
    /// The live processes of the walk, listed when the command's pipes are done
    /// ([`Output::ListLeftovers`]).
    Leftovers(Vec<i32>),
    /// Appending to the event log failed; `unwritten` bytes counted as journaled were not.
    JournalFailed { error: io::Error, unwritten: u64 },
    /// Storing a stream's bytes failed: `stored` bytes of it are in its file, for good.
    StoreFailed {
        stream: Stream,
        reason: CapReason,
        message: String,
        stored: u64,
    },
    /// What a look at the tree found ([`Output::SampleTree`]): the processes it walked, and
    /// the record to journal. An observer of the tree (a detector of a command that needs
    /// the operator) takes its samples here.
    TreeSampled(TreeSample),
    /// The tree's record was closed ([`Output::CloseTree`]): its last record, if any, what
    /// its samples saw the tree use, and what the kernel accounted to the reaped children
    /// (CPU milliseconds, largest RSS in bytes).
    TreeClosed {
        record: Option<EventKind>,
        cost: &'a SampledCost,
        children: (u64, u64),
    },
    /// The CPU time (user and system) the command's whole tree used so far
    /// ([`Output::MeasureCpu`]).
    CpuMeasured(Duration),
    /// A plan of the stop sequence was delivered ([`Output::Signal`]): what it reached.
    Signalled(Delivered),
    /// An operator's signal was delivered ([`Output::OperatorSignal`]): the pids it
    /// reached, or that the walk did not find the pid it was for.
    OperatorSignalled(OperatorDelivered),
    /// The interpreter handled what woke it, or the time of [`Broker::poll_timeout`] came:
    /// whatever is due is done. `copy`: how the front end's copy of the output stands.
    Tick { copy: CopyProgress },
    /// The front end's copy of each stream that was behind was given up
    /// ([`Output::GiveUpCopy`]): `undelivered`, per stream (stdout, stderr), the bytes that
    /// never reached the caller.
    CopyGivenUp { undelivered: [u64; 2] },
    /// The loop is over ([`Broker::is_done`]): the end is journaled and `result.json` asked
    /// for.
    Finish,
    /// A run of the notify command started ([`Output::Notify`]), as keeper `pid`.
    NotifyStarted { pid: i32 },
    /// A run of the notify command could not start ([`Output::Notify`]); `message` says why.
    NotifyUnstarted { message: String },
    /// A run of the notify command ended ([`Output::CheckNotify`],
    /// [`Output::WindDownNotify`]): `failure` says how it failed (exited non-zero, timed out
    /// or was killed), `None` when it did its job.
    NotifyEnded { pid: i32, failure: Option<String> },
    /// The notify command's runs are all over ([`Output::WindDownNotify`]): the end goes on.
    NotifyWoundDown,
    /// A try of the readiness probe ([`Output::TryReady`]) answered: passed, with what
    /// proved it (`HTTP 200`), or failed, with why (`connection refused`, `timed out`).
    ReadyTried {
        attempt: u64,
        outcome: super::TryOutcome,
    },
    /// `result.json` was written, or could not be.
    ResultWritten(io::Result<()>),
}

/// What the interpreter is to do, in order.
#[derive(Debug, PartialEq)]
pub enum Output {
    /// One event line: appended to `events.jsonl` if `journal`, sent to control subscribers
    /// if `subscribers` (when there are any), queued for the parent if `parent`.
    Event {
        line: Vec<u8>,
        journal: bool,
        subscribers: bool,
        parent: bool,
    },
    /// What was appended to the event log goes to the disk.
    FlushJournal,
    /// The first `keep` bytes of the chunk just read on `stream` go to its file.
    Store { stream: Stream, keep: usize },
    /// Events from here on go to control client `client` too.
    Subscribe { client: u64 },
    /// One line to control client `client` alone: its request's answer.
    Reply { client: u64, line: Vec<u8> },
    /// Walk the tree for its record ([`Input::TreeSampled`] when done); `may_skip`: the
    /// walk need not be taken if the last walk's processes did nothing since; `probe`: what
    /// attention asks of the processes the walk finds.
    SampleTree {
        walk: TreeWalk,
        group: i32,
        may_skip: bool,
        probe: Option<Probe>,
    },
    /// List the live processes of `walk` ([`Input::Leftovers`] at once): the command's
    /// pipes are done, and what is left may be kept.
    ListLeftovers { walk: TreeWalk },
    /// The cgroup is no longer the command's containment: remove it if it is empty (a
    /// failure is no matter: a later tether removes it), and forget it.
    AbandonCgroup,
    /// The end: read the cgroup's CPU time and `memory.peak`, then remove it
    /// ([`Input::CgroupReleased`] at once).
    ReleaseCgroup,
    /// Deliver a signal of the stop sequence over `walk` (and to the process group `group`)
    /// at once ([`Input::Signalled`] answers; what it journals takes this output's place).
    Signal {
        plan: SignalPlan,
        walk: TreeWalk,
        group: Option<i32>,
    },
    /// Deliver a signal the operator asked for (a control client's or the parent's
    /// `signal`) at once ([`Input::OperatorSignalled`] answers; what it journals, and the
    /// control client's answer, take this output's place).
    OperatorSignal(OperatorSignal),
    /// Measure the CPU time (user and system) of the whole tree of `walk`, for `max_cpu`
    /// ([`Input::CpuMeasured`] at once): the cgroup's `cpu.stat` where there is one, else
    /// what the walk's live processes used plus what the broker's reaped children did.
    MeasureCpu { walk: TreeWalk },
    /// Close the tree's record ([`Input::TreeClosed`] when done).
    CloseTree,
    /// The command has ended and the front end's caller takes no more of the copy (or a stop
    /// was asked): the copy of each stream that is behind ends here, its write end closed
    /// ([`Input::CopyGivenUp`] with what it never delivered).
    GiveUpCopy,
    /// Custody began: the front end gets what it was sent, its copy of the output ends, and
    /// it is let go ([`Input::FrontEndLetGo`] when done).
    LetFrontEndGo,
    /// Run the notify command for an event of `kind` at `at_ms` (wall clock) with
    /// `payload` on its stdin, unless the user's rate holds it back ([`Input::NotifyStarted`]
    /// or [`Input::NotifyUnstarted`] at once when it is started; nothing when held back).
    Notify {
        kind: crate::protocol::AttentionKind,
        at_ms: u64,
        payload: serde_json::Value,
    },
    /// Look at the notify command's runs, killing `overdue` first ([`Input::NotifyEnded`]
    /// for each that ended).
    CheckNotify { overdue: Vec<i32> },
    /// The broker is done: the notify command's runs that ended are told
    /// ([`Input::NotifyEnded`] for each), the others let go to end on their own deadline,
    /// never waited for; then [`Input::NotifyWoundDown`], at once.
    WindDownNotify,
    /// Try the readiness probe once, giving up after `timeout` ([`Input::ReadyTried`]
    /// answers, with the same `attempt`, whenever the try is over). Never waited for: the
    /// loop goes on meanwhile.
    TryReady {
        attempt: u64,
        probe: ReadyProbe,
        timeout: Duration,
    },
    /// Write `result.json` ([`Input::ResultWritten`] when done).
    WriteResult(Box<CommandResult>),
    /// The broker is done: the process exits with this code once the last lines are taken.
    Exit(i32),
}

/// What attention asks of each process a walk finds: `probe::sample` over them with
/// `inputs` and `looks`, answered in [`crate::reports::TreeSample::probed`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    pub inputs: Vec<InputFile>,
    pub looks: Looks,
}

impl Broker {
    /// Takes what happened at `now`.
    pub fn handle(&mut self, input: Input<'_>, now: Now) {
        // The clock only goes forward, whatever the interpreter read; the wall clock is as
        // read, as the journal has always stamped it.
        self.now = self.now.max(now.at);
        self.wall_ms = now.wall_ms;
        // What a signal's delivery journals goes where the signal was asked for: before
        // whatever the interpreter has not carried out yet (a reply, the next events).
        let in_place = matches!(input, Input::Signalled(_) | Input::OperatorSignalled(_));
        let queued = self.outputs.len();
        match input {
            Input::Happened(kind) => self.emit(kind),
            Input::Contained(cgroup) => self.contain(cgroup),
            Input::Spawned {
                pid,
                start_ticks,
                argv,
                inputs,
                in_cgroup,
                ended,
            } => {
                self.check_entered(in_cgroup, ended);
                self.attention_inputs(inputs);
                self.spawned(pid, start_ticks, argv);
            }
            Input::SpawnFailed { code, message } => self.spawn_failed(code, message),
            Input::Reaped {
                children,
                children_left,
                cgroup,
            } => self.reaped(children, children_left, cgroup),
            Input::Read { stream, bytes } => self.output(stream, bytes),
            Input::Closed { stream } => self.open[stream as usize] = false,
            Input::ReadFailed { stream, error } => {
                self.stdio_failed(stream, &error);
                self.open[stream as usize] = false;
            }
            Input::Request { from, request } => self.request(from, request),
            Input::ControlRefused {
                client,
                peer,
                reason,
            } => self.control_refused(client, peer, reason),
            Input::Typed(taken) => self.input(taken),
            Input::TypedDropped(dropped) => self.input(InputTaken { bytes: 0, dropped }),
            Input::Resized(size) => self.emit(EventKind::Resize { size }),
            Input::ParentLost(cause) => self.parent_lost(cause),
            Input::ParentBacklog(bytes) => self.parent_backlog = bytes,
            Input::FrontEndLetGo { stderr } => self.front_end_let_go(stderr),
            Input::CustodianExited { reason, pid } => self.custodian_exited(reason, pid),
            Input::CustodianUnwatched { reason, pid } => self.custodian_unwatched(reason, pid),
            Input::Shutdown { sender } => {
                self.hurry_copy();
                let origin = self.shutdown_origin(sender);
                self.start_stop(origin);
            }
            Input::CopyGivenUp { undelivered } => self.copy_given_up(undelivered),
            Input::CgroupChanged(state) => self.cgroup_changed(state),
            Input::CgroupReleased(released) => self.cgroup_released(released),
            Input::Leftovers(pids) => {
                self.leftovers_listed(pids);
                self.ticked();
            }
            Input::JournalFailed { error, unwritten } => self.journal_failed(&error, unwritten),
            Input::StoreFailed {
                stream,
                reason,
                message,
                stored,
            } => self.store_failed(stream, reason, message, stored),
            Input::Tick { copy } => {
                let pipes_open = self.open.iter().any(|open| *open);
                self.copy_seen(copy);
                self.tick(pipes_open);
                self.ticked();
            }
            Input::TreeSampled(sample) => self.tree_sampled(sample),
            Input::TreeClosed {
                record,
                cost,
                children,
            } => self.tree_closed(record, cost, children),
            Input::CpuMeasured(used) => self.cpu_measured(used),
            Input::Signalled(delivered) => self.signalled(delivered),
            Input::OperatorSignalled(delivered) => self.operator_signalled(delivered),
            Input::Finish => self.finish(),
            Input::NotifyStarted { pid } => self.notify_started(pid),
            Input::NotifyUnstarted { message } => self.notify_unstarted(message),
            Input::NotifyEnded { pid, failure } => self.notify_ended(pid, failure),
            Input::NotifyWoundDown => {
                if self.notify_wound_down() {
                    self.finish_closing();
                }
            }
            Input::ReadyTried { attempt, outcome } => self.ready_tried(attempt, outcome),
            Input::ResultWritten(written) => self.result_written(written),
        }
        if in_place {
            let answered = self.outputs.split_off(queued);
            for output in answered.into_iter().rev() {
                self.outputs.push_front(output);
            }
        }
    }

    /// The next thing to do, in order; `None` once everything asked for was taken.
    pub fn poll_output(&mut self) -> Option<Output> {
        self.outputs.pop_front()
    }

    /// After what a tick did: what it journaled reaches the disk, and a custody that began
    /// lets the front end go.
    fn ticked(&mut self) {
        self.flush_journal();
        // The front end returns now, as the shell would once its command exited.
        if std::mem::take(&mut self.custody_began) {
            self.outputs.push_back(Output::LetFrontEndGo);
        }
    }

    /// Custody began and the front end took the news: it is let go.
    fn front_end_let_go(&mut self, stderr: io::Result<()>) {
        self.detach_parent();
        if let Err(err) = stderr {
            let message = format!(
                "cannot point the broker's stderr at /dev/null: {err}; the caller's stderr stays open while the leftovers run"
            );
            self.broker_failure(crate::protocol::Stage::Internal, "detach_stderr", message);
        }
    }

    /// Journals a refused connection, and answers its client.
    fn control_refused(&mut self, client: u64, peer: Peer, reason: String) {
        self.emit(EventKind::ControlRefused {
            uid: peer.uid,
            pid: peer.pid,
            reason: reason.clone(),
        });
        let answer = EventKind::ControlError {
            code: "refused".into(),
            message: reason,
        };
        self.reply(client, answer);
    }

    /// Answers control client `client` with `answer`, once what came before it is in the
    /// journal, flushed: the client that reads the journal next finds what it caused.
    pub(super) fn reply(&mut self, client: u64, answer: EventKind) {
        self.flush_journal();
        let line = self.stamp(answer).to_line();
        self.outputs.push_back(Output::Reply { client, line });
    }

    /// `kind` as an event of this moment.
    pub(super) fn stamp(&self, kind: EventKind) -> crate::protocol::Event {
        crate::protocol::Event {
            ts_ms: self.wall_ms,
            mono_us: self.mono_us(),
            kind,
        }
    }
}
