//! The messages that cross the pipe between a front end (TUI or `tether exec`) and a broker.
//!
//! Every event the broker emits is also a journal line: the same JSON, byte for byte, so a
//! live view and a post-mortem view parse one format.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::attention::AttentionRequest;
use super::leftovers::{LeftoversEnd, LeftoversRecord, LeftoversRule};
use super::millis;
use super::signal::ProcessSignal;
use super::trace::TraceContext;

use super::Peer;
use crate::CommandId;

/// Bumped whenever a message changes shape in a way an older peer would misread.
/// v2: a `tree` event leaves out the argv of processes an earlier one recorded, and
/// `events_capped` exists.
/// v3: pseudo-terminals (`terminal` in a launch request, `input` and `resize` requests, the
/// `terminal`, `terminal_unavailable`, `input` and `resize` events).
/// v4: a stop is journaled as it starts (`stop_started`), before its first signal.
pub const PROTOCOL_VERSION: u32 = 4;

/// The first version whose brokers journal `stop_started`: older journals say a stop only by
/// its signals, TERM then CONT.
pub const STOP_STARTED_SINCE: u32 = 4;

/// Default bound on what one command's output may take in the journal, stdout and stderr
/// together: past it bytes are drained and counted, not stored.
pub const DEFAULT_MAX_OUTPUT: u64 = 1 << 30;

/// Default time between SIGTERM and SIGKILL in a stop sequence.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(2);

/// What the command is: an argv run directly, or a string handed to `/bin/sh -c`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CommandSpec {
    Argv(Vec<String>),
    Shell(String),
}

impl CommandSpec {
    /// The argv that is actually executed.
    pub fn argv(&self) -> Vec<String> {
        match self {
            CommandSpec::Argv(argv) => argv.clone(),
            CommandSpec::Shell(script) => vec!["/bin/sh".into(), "-c".into(), script.clone()],
        }
    }

    /// A one-line rendering for people: the shell string, or the argv joined by spaces.
    pub fn display(&self) -> String {
        match self {
            CommandSpec::Argv(argv) => argv.join(" "),
            CommandSpec::Shell(script) => script.clone(),
        }
    }
}

/// The first line a broker reads: everything it needs to run and journal one command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaunchRequest {
    pub v: u32,
    pub name: String,
    pub command: CommandSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<PathBuf>,
    /// Variables set on top of the broker's own environment.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// The command's journal directory (`sessions/<session>/<command>/`).
    pub journal_dir: PathBuf,
    /// The front end that owns this broker; its death stops the command.
    pub parent_pid: i32,
    /// That front end stands in for its caller (the shell shim): it passes the caller's
    /// signals on (origin `caller`), and its death, which only a signal it cannot catch
    /// brings (an agent's SIGKILL to the group it started), is the caller's doing too: the
    /// stop that follows has origin `caller`, not `parent_lost`, as the same kill without
    /// tether would have ended the command. (A failure of its own it stops the command for
    /// first, with origin `shutdown`.) Absent: every other front end, whose death is a loss.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub caller_stand_in: bool,
    /// Between TERM and KILL in a stop sequence.
    #[serde(rename = "grace_ms", with = "millis", default = "default_grace")]
    pub grace: Duration,
    /// Silence after which the command is stopped.
    #[serde(
        rename = "no_output_timeout_ms",
        with = "millis::option",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub no_output_timeout: Option<Duration>,
    /// The bound on the command's journaled output, stdout and stderr together.
    #[serde(default = "default_max_output")]
    pub max_output: u64,
    /// How often the parent promises a `ping`; silence for three intervals is recorded as
    /// `parent_unresponsive` (never a reason to kill).
    #[serde(
        rename = "heartbeat_ms",
        with = "millis::option",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub heartbeat: Option<Duration>,
    /// The front end copies the output to its own streams: it hands the broker the write
    /// ends of two pipes (see `broker::mirror`), which get every byte read.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub mirror: bool,
    /// Where the command's stdin comes from.
    #[serde(default, skip_serializing_if = "is_default")]
    pub stdin: StdinSource,
    /// The session and command directory the command is journaled in, which the broker
    /// exports to it (`TETHER_SESSION`, `TETHER_BROKER_ID`) so that nested tether calls join
    /// the session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<SessionRef>,
    /// The `argv[0]` the program sees, when it is not the program as given (the shell shim
    /// runs `/bin/bash` as the `bash` its caller asked for).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arg0: Option<String>,
    /// Pseudo-terminals for the command's streams; absent: pipes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terminal: Option<TerminalRequest>,
    /// The caller's stdout and stderr are one file (`2>&1`, one terminal for both): the
    /// command gets one pipe (or terminal) for both, so that they reach the caller in the
    /// order the command wrote them, and its stderr is journaled within stdout
    /// (`streams_merged`). Any `terminal.stderr` is then ignored.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub merge_stderr: bool,
    /// Limits on the command's cgroup (`pids.max`, `memory.max`), where it has one.
    #[serde(default, skip_serializing_if = "is_default")]
    pub limits: Limits,
    /// What becomes of processes the command leaves running (default: stopped with it).
    #[serde(default, skip_serializing_if = "LeftoversRule::is_stop")]
    pub leftovers: LeftoversRule,
    /// The caller's W3C trace context (its `TRACEPARENT`) and the command's own span in it:
    /// the command gets a `TRACEPARENT` naming that span, and the export nests the command
    /// under the caller's span. Absent: the environment's `TRACEPARENT`, if any, is left as
    /// it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<TraceContext>,
    /// Why the caller's `TRACEPARENT` was not used (malformed), journaled once as
    /// `trace_context_ignored`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_ignored: Option<String>,
    /// The final-drain trigger: a regex matched against each complete line of stdout. The
    /// first line that matches starts the drain period (`drain`, default 5 s), after which
    /// a command still running is stopped (origin `final_drain`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drain_on: Option<String>,
    /// The drain period after `drain_on` matched.
    #[serde(
        rename = "drain_ms",
        with = "millis::option",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub drain: Option<Duration>,
    /// Attention thresholds and the notify command (see `protocol::attention`); absent in
    /// an older request: the defaults, and no notify command.
    #[serde(default, skip_serializing_if = "is_default")]
    pub attention: AttentionRequest,
    /// How the command proves it is ready (`ready_*` in tether.toml); absent: it is never
    /// `ready`, only running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready: Option<Readiness>,
    /// What the command may use before it is stopped (origin `budget`); empty: no budget.
    #[serde(default, skip_serializing_if = "Budgets::is_empty")]
    pub budgets: Budgets,
    /// Which start of its command this run is: 1 for the first, counting up with every
    /// restart (by the operator or by a restart policy). Absent in older requests: 1.
    #[serde(default = "first_run", skip_serializing_if = "is_first_run")]
    pub run: u32,
}

fn first_run() -> u32 {
    1
}

fn is_first_run(run: &u32) -> bool {
    *run == 1
}

/// A readiness check and its patience: `probe` is tried every `interval` from the spawn
/// until it passes (event `ready`) or `timeout` has passed since the spawn (event
/// `not_ready`; the command runs on).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Readiness {
    /// Flattened: `{"probe": "tcp", "host": "127.0.0.1", "port": 5432, "interval_ms": 500}`.
    #[serde(flatten)]
    pub probe: ReadyProbe,
    #[serde(
        rename = "interval_ms",
        with = "millis",
        default = "default_ready_interval"
    )]
    pub interval: Duration,
    #[serde(
        rename = "timeout_ms",
        with = "millis::option",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub timeout: Option<Duration>,
}

/// Default time between two tries of a readiness probe (`ready_interval`).
pub const DEFAULT_READY_INTERVAL: Duration = Duration::from_millis(500);

fn default_ready_interval() -> Duration {
    DEFAULT_READY_INTERVAL
}

/// What proves a command ready.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, strum::IntoStaticStr)]
#[serde(tag = "probe", rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum ReadyProbe {
    /// A complete line of stdout or stderr matches `pattern` (a regex).
    Log { pattern: String },
    /// A GET of `url` (plain `http://`) answers 2xx.
    Http { url: String },
    /// A TCP connection to `host:port` is accepted.
    Tcp { host: String, port: u16 },
    /// `sh -c shell` exits 0.
    Exec { shell: String },
}

impl ReadyProbe {
    /// The probe's one-word name, as the `ready` event and the views give it.
    pub fn kind(&self) -> &'static str {
        self.into()
    }
}

/// Budgets: reaching one runs the stop sequence (origin `budget`) after a
/// `budget_exceeded` event naming it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Budgets {
    /// Wall time from the spawn, as `timeout(1)` counts it.
    #[serde(
        rename = "max_time_ms",
        with = "millis::option",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub max_time: Option<Duration>,
    /// CPU time (user and system) of the command's whole tree.
    #[serde(
        rename = "max_cpu_ms",
        with = "millis::option",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub max_cpu: Option<Duration>,
    /// Bytes of output (stdout and stderr together) the command may produce.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output: Option<u64>,
}

impl Budgets {
    pub fn is_empty(&self) -> bool {
        *self == Budgets::default()
    }
}

/// Which budget a command reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Budget {
    /// `max_time`: limit and use in milliseconds of wall time.
    Time,
    /// `max_cpu`: limit and use in milliseconds of CPU time.
    Cpu,
    /// `max_output`: limit and use in bytes.
    Output,
}

/// How every view begins the words for a run a budget stopped.
pub const OVER_BUDGET: &str = "over budget";

impl Budget {
    /// The budget's key, as tether.toml writes it.
    pub fn key(self) -> &'static str {
        match self {
            Budget::Time => "max_time",
            Budget::Cpu => "max_cpu",
            Budget::Output => "max_output",
        }
    }

    /// How a run this budget stopped ended, in every view and in the broker's `failed`
    /// attention: `over budget (max_cpu)`.
    pub fn ended_words(self) -> String {
        format!("{OVER_BUDGET} ({})", self.key())
    }
}

/// Which of the command's streams get a pseudo-terminal of their own, and its size. Each
/// stream keeps its own terminal, so both pass `isatty()` and stay apart. The first one
/// (stdout's, else stderr's) is the command's controlling terminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TerminalRequest {
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stdout: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stderr: bool,
    #[serde(flatten)]
    pub size: WindowSize,
}

impl TerminalRequest {
    /// Whether `stream` gets a terminal.
    pub fn has(&self, stream: Stream) -> bool {
        match stream {
            Stream::Stdout => self.stdout,
            Stream::Stderr => self.stderr,
        }
    }
}

/// A terminal's size in character cells.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct WindowSize {
    pub cols: u16,
    pub rows: u16,
}

impl WindowSize {
    /// What a terminal that says nothing of its size is taken to be.
    pub const DEFAULT: WindowSize = WindowSize { cols: 80, rows: 24 };

    /// A size a terminal can have: zero cells in either direction (a pane not drawn yet, a
    /// terminal that reports nothing) becomes the default.
    pub fn or_default(self) -> WindowSize {
        if self.cols == 0 || self.rows == 0 {
            WindowSize::DEFAULT
        } else {
            self
        }
    }
}

/// The command's stdin.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StdinSource {
    /// `/dev/null` (the TUI's commands).
    #[default]
    Null,
    /// The front end's own stdin, handed to the broker as a descriptor (see
    /// `broker::STDIN_FD`), which passes it to the command and never reads it itself.
    Inherit,
    /// The command's controlling terminal (see [`TerminalRequest`]), which the front end
    /// writes to with [`super::Request::Input`]; `/dev/null` when no terminal could be had.
    Terminal,
}

/// A command's place in the journal: its session id and its directory there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "SessionRefFields", into = "SessionRefFields")]
pub struct SessionRef {
    /// Its session (`id` on the wire) and its directory's name there (`command`: `03-build`).
    pub command: CommandId,
    /// The state directory, absolute, exported as `TETHER_STATE_DIR` so that a nested call
    /// finds the same session even when the front end was given `--state-dir` (absent when
    /// the path is not UTF-8: the nested call then uses its own default).
    pub state_dir: Option<PathBuf>,
}

impl SessionRef {
    /// `TETHER_BROKER_ID`: `<session>/<command directory>`, as [`CommandId`] shows it.
    pub fn broker_id(&self) -> String {
        self.command.to_string()
    }
}

/// [`SessionRef`] as it is written: the session and the directory as two strings.
#[derive(Serialize, Deserialize)]
struct SessionRefFields {
    id: String,
    command: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    state_dir: Option<PathBuf>,
}

impl TryFrom<SessionRefFields> for SessionRef {
    type Error = crate::BadCommandId;

    fn try_from(fields: SessionRefFields) -> Result<SessionRef, crate::BadCommandId> {
        Ok(SessionRef {
            command: CommandId::from_dir_name(&fields.id, &fields.command)?,
            state_dir: fields.state_dir,
        })
    }
}

impl From<SessionRef> for SessionRefFields {
    fn from(session: SessionRef) -> SessionRefFields {
        SessionRefFields {
            command: session.command.dir_name(),
            id: session.command.session,
            state_dir: session.state_dir,
        }
    }
}

/// For `skip_serializing_if`: a value at its default (a count of zero, no limits, the
/// default thresholds) is left out of the JSON.
pub fn is_default<T: Default + PartialEq>(n: &T) -> bool {
    *n == T::default()
}

fn default_grace() -> Duration {
    DEFAULT_GRACE
}

fn default_max_output() -> u64 {
    DEFAULT_MAX_OUTPUT
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// The command's process group and every descendant, escapees included (what a request
    /// that names no scope means).
    #[default]
    Group,
    /// One descendant process.
    Pid,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, strum::IntoStaticStr)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum Stream {
    Stdout,
    Stderr,
}

impl Stream {
    pub const BOTH: [Stream; 2] = [Stream::Stdout, Stream::Stderr];

    pub fn file_name(self) -> &'static str {
        match self {
            Stream::Stdout => "stdout.log",
            Stream::Stderr => "stderr.log",
        }
    }

    pub fn name(self) -> &'static str {
        self.into()
    }
}

/// Who asked for a signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, strum::IntoStaticStr)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum Origin {
    Operator,
    Watchdog,
    ParentLost,
    Shutdown,
    /// A later tether, stopping what a broker killed together with its front end left.
    Reclaim,
    /// The command printed its final line (`drain_on`) and did not exit within the drain.
    FinalDrain,
    /// The front end's caller: a signal the shell shim was sent (by the agent that ran it)
    /// and passed on to the command's group, as a shell would have it delivered.
    Caller,
    /// The command reached one of its budgets (`budget_exceeded` says which).
    Budget,
    /// The TUI's launcher stops the command to start it again: a file that its
    /// `restart_on_change` watches changed.
    FileChanged,
    /// The broker, stopping what the command left running once its main process exited
    /// (the leftovers rule `stop`, or kept processes nobody is left to answer for).
    Leftovers,
}

/// What about a command needs the operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, strum::IntoStaticStr)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum AttentionKind {
    /// A process of the tree is blocked reading the command's stdin or its terminal, and the
    /// command has been silent: it waits for input nobody may give.
    NeedsInput,
    /// No output for a while, and the tree is not using the CPU either.
    Quiet,
    /// Most of a core for a long while, or memory above the set bound.
    Runaway,
    /// It ended with a non-zero status, a signal, or a timeout.
    Failed,
    /// A command that ran long enough to be waited for has finished.
    Finished,
}

impl AttentionKind {
    pub fn name(self) -> &'static str {
        self.into()
    }

    /// Episodes that begin and end while the command runs; `failed` and `finished` happen once.
    pub fn is_episode(self) -> bool {
        matches!(
            self,
            AttentionKind::NeedsInput | AttentionKind::Quiet | AttentionKind::Runaway
        )
    }
}

/// Where a broker failure happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    Spawn,
    Stdio,
    Protocol,
    Execution,
    Internal,
}

/// Why bytes stopped being stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CapReason {
    Limit,
    DiskFull,
    WriteError,
}

/// A kind of event that is recorded only up to a budget per journal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CappedKind {
    Tree,
}

/// How the broker learned that its parent is gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ParentLossCause {
    Pidfd,
    Reparented,
    StdinEof,
    Epipe,
    Pdeathsig,
}

/// One process of the command's tree at a moment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessEntry {
    pub pid: i32,
    pub ppid: i32,
    pub pgid: i32,
    /// The command line, carried only by the first `tree` event of a journal that lists the
    /// process (same `pid` and `start_ms`), and again by the first after it exec'd another
    /// command line, and left out of the others: a reader takes the latest one carried (see
    /// `model::command`). A longer one is cut to [`ARGV_CAP`] bytes and ends in an
    /// [`ARGV_CUT_MARK`] argument. Journals of protocol v1 carry it in every event; they read
    /// the same.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub argv: Vec<String>,
    /// Wall-clock start time, milliseconds since the Unix epoch.
    pub start_ms: u64,
    /// Left the command's process group (`setsid`, `setpgid`): found only through the
    /// broker's subreaper walk.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub escaped: bool,
}

/// The most of one process's command line a journal records, in bytes of argument text: one
/// huge command line (the kernel allows a few MiB) must not dominate the journal, and 4 KiB
/// is far more than a tree pane row shows.
pub const ARGV_CAP: usize = 4096;

/// The start of the last argument of a command line that was cut to [`ARGV_CAP`]; the rest of
/// that argument says how many bytes were left out.
pub const ARGV_CUT_MARK: &str = "[argv cut:";

/// `argv` as a journal records it: whole when its arguments total at most [`ARGV_CAP`] bytes,
/// else cut at a character boundary and followed by one argument saying how much was left out.
pub fn capped_argv(mut argv: Vec<String>) -> Vec<String> {
    let total: usize = argv.iter().map(String::len).sum();
    if total <= ARGV_CAP {
        return argv;
    }
    let mut kept = 0;
    let mut keep_args = 0;
    for arg in &mut argv {
        let room = ARGV_CAP - kept;
        if arg.len() > room {
            let cut = crate::units::head(arg, room).len();
            arg.truncate(cut);
            kept += cut;
            keep_args += usize::from(cut > 0);
            break;
        }
        kept += arg.len();
        keep_args += 1;
    }
    let args = argv.len();
    argv.truncate(keep_args);
    argv.push(format!(
        "{ARGV_CUT_MARK} {} more bytes not recorded, of {total} in {args} arguments]",
        total - kept
    ));
    argv
}

/// How a process ended, as `waitpid` reported it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExitStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub core_dumped: bool,
}

/// Every journal line and every line on the broker's stdout.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// Wall clock, milliseconds since the Unix epoch.
    pub ts_ms: u64,
    /// Monotonic microseconds since the broker started.
    pub mono_us: u64,
    #[serde(flatten)]
    pub kind: EventKind,
}

impl Event {
    /// The event as one JSON line, newline included: the form of the journal and the pipe.
    pub fn to_line(&self) -> Vec<u8> {
        super::framing::encode_line(self).unwrap_or_default()
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, strum::IntoStaticStr)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum EventKind {
    /// First event of every broker: who it is and which protocol it speaks.
    BrokerStarted {
        v: u32,
        broker_pid: i32,
        /// Where the broker's control socket listens (also in `command.json`); absent when
        /// it has none.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        control_socket: Option<PathBuf>,
    },
    Spawned {
        pid: i32,
        pgid: i32,
        argv: Vec<String>,
        /// The command's start time in clock ticks after boot (`/proc/PID/stat`): with `pid`,
        /// what names it for good, so that a later tether can tell it from a reused pid once
        /// its broker is dead. Absent in older journals.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        start_ticks: Option<u64>,
    },
    SpawnError {
        code: String,
        message: String,
    },
    /// The command's streams that are pseudo-terminals, and their size (after `spawned`).
    Terminal {
        #[serde(flatten)]
        streams: TerminalRequest,
    },
    /// The command's stderr is its stdout (the caller gave one file for both: see
    /// [`LaunchRequest::merge_stderr`]): stdout's log holds both, in the order written, and
    /// stderr's stays empty (after `spawned`).
    StreamsMerged {},
    /// A terminal was asked for and could not be had: the command runs with pipes (and
    /// `/dev/null` for a terminal's stdin). `code`: `open`, `setup`, ...
    TerminalUnavailable {
        code: String,
        message: String,
    },
    /// The operator typed or pasted `bytes` bytes into the command's terminal (never what
    /// they were); `dropped` did not reach it (no terminal, the command had ended, or too
    /// much was already waiting). Consecutive input is journaled as one event a second.
    Input {
        bytes: u64,
        #[serde(default, skip_serializing_if = "is_default")]
        dropped: u64,
    },
    /// The command's terminals were given a new size.
    Resize {
        #[serde(flatten)]
        size: WindowSize,
    },
    /// `len` bytes of `stream` arrived; in the stream's log they start at `offset` (when
    /// stored).
    Output {
        stream: Stream,
        offset: u64,
        len: u64,
    },
    OutputCapped {
        stream: Stream,
        reason: CapReason,
        /// Bytes stored when storing stopped.
        stored: u64,
        message: String,
    },
    /// At the end: the journal kept only the first `kept` bytes of `stream` (the command's
    /// bound on journaled output, or a disk that refused more) and dropped the `dropped`
    /// after them, counted, never stored. The caller's copy had every byte.
    OutputTruncated {
        stream: Stream,
        kept: u64,
        dropped: u64,
    },
    /// At the end: the front end's copy of `stream` (`tether exec`, the shell shim) was given
    /// up once the command had ended, because its caller took nothing more (or a stop was
    /// asked), and `bytes` read from the command never reached the caller (what the copy
    /// held then, and all read after). The journal has them.
    OutputUndelivered {
        stream: Stream,
        bytes: u64,
    },
    ResponseTimeout {
        silent_ms: u64,
    },
    /// A complete line of stdout matched the `drain_on` pattern: the drain period begins.
    /// `line`: the line (its last 64 KiB at most, as matched), lossy UTF-8, cut to 1 KiB.
    FinalDrain {
        pattern: String,
        line: String,
        #[serde(rename = "drain_ms", with = "millis")]
        drain: Duration,
    },
    /// The stop sequence began (`origin` says why): TERM and CONT to the whole tree follow,
    /// then KILL to what is left after `grace`.
    StopStarted {
        origin: Origin,
        #[serde(rename = "grace_ms", with = "millis")]
        grace: Duration,
    },
    SignalSent {
        signal: ProcessSignal,
        scope: Scope,
        origin: Origin,
        /// Processes the signal reached.
        targets: Vec<i32>,
        /// Who asked for it: a control-socket client, or the front end that launched the
        /// broker when it asked on its pipe (a stop's every signal carries it).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        client: Option<Peer>,
    },
    HardKill {
        after_ms: u64,
    },
    /// The command proved it is ready: `probe` is which check (`log`, `http`, `tcp`,
    /// `exec`), `detail` what it saw (the line, `200 OK`, ...), cut to 1 KiB; `after_ms`
    /// counts from the spawn.
    Ready {
        probe: String,
        detail: String,
        after_ms: u64,
    },
    /// The readiness check gave up: `timeout` passed since the spawn without a pass.
    /// `detail`: the last try's failure. The command runs on, never `ready`.
    NotReady {
        probe: String,
        detail: String,
        after_ms: u64,
    },
    /// A budget was reached: the stop sequence (origin `budget`) follows. `limit` and
    /// `used` are in the budget's unit (milliseconds, or bytes for `output`).
    BudgetExceeded {
        budget: Budget,
        limit: u64,
        used: u64,
    },
    /// A process other than the command, re-parented to the broker, was reaped.
    OrphanReaped {
        pid: i32,
        status: ExitStatus,
        /// It had left the command's process group or session (setsid, setpgid): an
        /// escapee, not a process merely re-parented when its parent ended. Absent in
        /// journals written before it was recorded, and when the broker could not read it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        escaped: Option<bool>,
    },
    ParentLost {
        cause: ParentLossCause,
    },
    ParentUnresponsive {
        silent_ms: u64,
    },
    Tree {
        processes: Vec<ProcessEntry>,
    },
    /// Events of one kind reached their budget for this journal and are no longer recorded
    /// (lifecycle events always are).
    EventsCapped {
        kind_capped: CappedKind,
        /// Bytes of journal lines the kind was allowed.
        budget: u64,
        message: String,
    },
    Exit {
        pid: i32,
        status: ExitStatus,
    },
    /// The main process exited and these processes of its tree remain: they keep running in
    /// the broker's custody (the leftovers rule says keep), and the front end returns.
    LeftoversKept {
        pids: Vec<i32>,
    },
    /// The leftovers are being stopped (the stop sequence follows), and why. `pid`: the
    /// custodian whose exit ended the custody.
    LeftoversStopped {
        reason: LeftoversEnd,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pid: Option<i32>,
    },
    /// A moment that needs the operator began (`needs_input`, `quiet`, `runaway`) or
    /// happened (`failed`, `finished`): journaled once per episode. `detail` says what was
    /// seen, for a person ("read(0) blocked on a pipe, no output for 3.0s").
    Attention {
        attention: AttentionKind,
        detail: String,
    },
    /// An episode that began with `attention` is over (the command read or wrote again, its
    /// CPU fell back): the moment no longer needs anyone.
    AttentionCleared {
        attention: AttentionKind,
    },
    /// The `[notify] command` could not tell anyone: it could not start, did not finish in
    /// time, or failed. Journaled once; the broker runs it no more for this command.
    NotifyFailed {
        message: String,
    },
    /// The broker is done: both streams read to the end, nothing left running.
    Close {
        stdout_bytes: u64,
        stderr_bytes: u64,
    },
    BrokerFailure {
        stage: Stage,
        code: String,
        message: String,
    },
    /// Answer to `ping`; sent to the one that asked only, never journaled.
    Pong,
    /// A connection to the control socket was refused (another user's, say); the broker
    /// and its command go on.
    ControlRefused {
        uid: u32,
        pid: i32,
        reason: String,
    },
    /// The broker has no control socket (it could not create one); the command runs all the
    /// same, and front ends stop it through the broker's pid (SIGTERM runs the stop
    /// sequence).
    ControlUnavailable {
        code: String,
        message: String,
    },
    /// What holds the command's tree, said once before `spawned`: its own cgroup (`path`),
    /// or the walk of /proc (`reason` says why no cgroup).
    Containment {
        mode: ContainmentMode,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        path: Option<PathBuf>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// A limit asked for (`max_procs`, `max_memory`) could not be applied; the command runs
    /// without it.
    LimitUnavailable {
        limit: String,
        message: String,
    },
    /// The caller's `TRACEPARENT` is malformed: left to the command as it was, and not used
    /// for the export (the command's span is the session's, as without one). Said once,
    /// after `broker_started`.
    TraceContextIgnored {
        reason: String,
    },
    /// A control request was carried out; sent to the client that asked only, never
    /// journaled. `journal_offset` answers `subscribe`: the bytes of `events.jsonl` written
    /// before the first event the subscription sends. `targets` answers `signal`.
    ControlAck {
        request: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        journal_offset: Option<u64>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        targets: Vec<i32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
    },
    /// A control request was refused or could not be read; sent to that client only,
    /// never journaled.
    ControlError {
        code: String,
        message: String,
    },
}

impl EventKind {
    /// The `kind` tag as it appears in JSON.
    pub fn name(&self) -> &'static str {
        self.into()
    }
}

/// Written once, atomically, when a broker finishes: the command's outcome in one file.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct CommandResult {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit: Option<ExitStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<Failure>,
    pub stdout: StreamTotals,
    pub stderr: StreamTotals,
    pub started_ms: u64,
    pub ended_ms: u64,
    pub duration_ms: u64,
    pub orphans_reaped: u32,
    pub parent_lost: bool,
    pub response_timeout: bool,
    /// The command printed its final line (`drain_on`), did not exit within the drain period
    /// and was stopped: it counts as finished.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub drained: bool,
    pub hard_killed: bool,
    /// Origin of the first stop sequence, if one ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped_by: Option<Origin>,
    /// The budget that stopped the command, when `stopped_by` is `budget`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<Budget>,
    /// Kinds of events that reached their budget and stopped being recorded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub events_capped: Vec<CappedKind>,
    /// CPU time the whole command used, as its cgroup accounted it (cgroup containment).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup_cpu_usec: Option<u64>,
    /// CPU time (user + system) the command's whole tree used: the cgroup's figure, or on
    /// the /proc path the larger of the samples' sum and the broker's reaped children's
    /// (see `broker::tree::cost`). Absent when nothing ran, and in journals written before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_ms: Option<u64>,
    /// The most memory the tree held: the cgroup's `memory.peak` where it is accounted, else
    /// the larger of the tree's largest sampled RSS and its largest process's (where that is
    /// above the broker's own, which every child's starts from). Absent when nothing measured
    /// it (a command that ended before its first sample), and in journals written before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_rss_bytes: Option<u64>,
    /// Processes kept running after the main process exited, and how that ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leftovers: Option<LeftoversRecord>,
}

/// What holds a command's tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, strum::IntoStaticStr)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum ContainmentMode {
    /// A cgroup v2 of its own: membership, kill and emptiness from the kernel.
    Cgroup,
    /// The broker's descendants, found by walking /proc (a subreaper's tree).
    Procfs,
}

impl ContainmentMode {
    pub fn label(self) -> &'static str {
        self.into()
    }
}

/// `containment: cgroup PATH` or `containment: procfs (REASON)`: the one line a journal
/// reader, the timeline and the log show.
pub fn containment_line(
    mode: ContainmentMode,
    path: Option<&std::path::Path>,
    reason: Option<&str>,
) -> String {
    match (mode, path, reason) {
        (ContainmentMode::Cgroup, Some(path), _) => {
            format!("containment: cgroup {}", path.display())
        }
        (ContainmentMode::Cgroup, None, _) => "containment: cgroup".into(),
        (ContainmentMode::Procfs, _, Some(reason)) => format!("containment: procfs ({reason})"),
        (ContainmentMode::Procfs, _, None) => "containment: procfs".into(),
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failure {
    pub stage: Stage,
    pub code: String,
    pub message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct StreamTotals {
    /// Bytes the command wrote.
    pub bytes: u64,
    /// Bytes kept in the stream's log (less than `bytes` once capped).
    pub stored: u64,
    /// Bytes that never reached the caller of `tether exec` or the shim: its copy was given
    /// up once the command had ended (`output_undelivered`).
    #[serde(default, skip_serializing_if = "is_default")]
    pub undelivered: u64,
}

/// The limits asked for one command; `None`: no limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_procs: Option<u64>,
    /// Bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_memory: Option<u64>,
}

impl Limits {
    pub fn is_empty(&self) -> bool {
        self.max_procs.is_none() && self.max_memory.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every interval a launch request carries, as journals and brokers of every version
    /// read it: whole milliseconds under `_ms` keys.
    const EVERY_INTERVAL: &str = concat!(
        r#"{"v":4,"name":"build","command":{"shell":"make"},"journal_dir":"/s/01-build","#,
        r#""parent_pid":7,"grace_ms":1500,"no_output_timeout_ms":60000,"max_output":1024,"#,
        r#""heartbeat_ms":5000,"leftovers":{"keep":true,"max_ms":3600000},"#,
        r#""drain_on":"done","drain_ms":300,"attention":{"input_after_ms":5000,"#,
        r#""quiet_after_ms":120000,"runaway_after_ms":null,"memory_above":null,"#,
        r#""finished_after_ms":10000,"failed_after_ms":2500}}"#
    );

    #[test]
    fn a_launch_requests_intervals_are_milliseconds_on_the_wire() {
        let request: LaunchRequest = serde_json::from_str(EVERY_INTERVAL).unwrap();
        assert_eq!(serde_json::to_string(&request).unwrap(), EVERY_INTERVAL);
        let ms = |ms| Some(Duration::from_millis(ms));
        assert_eq!(request.grace, Duration::from_millis(1500));
        assert_eq!(request.no_output_timeout, ms(60_000));
        assert_eq!(request.heartbeat, ms(5000));
        assert_eq!(request.leftovers.max, ms(3_600_000));
        assert_eq!(request.drain, ms(300));
        assert_eq!(request.attention.input_after, ms(5000));
        assert_eq!(request.attention.quiet_after, ms(120_000));
        assert_eq!(request.attention.runaway_after, None);
        assert_eq!(request.attention.finished_after, ms(10_000));
        assert_eq!(request.attention.failed_after, ms(2500));
    }

    #[test]
    fn the_intervals_events_echo_are_milliseconds_on_the_wire() {
        for line in [
            r#"{"kind":"final_drain","pattern":"^ok","line":"ok","drain_ms":5000}"#,
            r#"{"kind":"stop_started","origin":"operator","grace_ms":1500}"#,
        ] {
            let kind: EventKind = serde_json::from_str(line).unwrap();
            assert_eq!(serde_json::to_string(&kind).unwrap(), line);
        }
    }

    /// Journals keep these names: one renamed would make every old journal unreadable.
    #[test]
    fn each_origin_has_its_name_on_the_wire() {
        for (origin, name) in [
            (Origin::Operator, "operator"),
            (Origin::Watchdog, "watchdog"),
            (Origin::ParentLost, "parent_lost"),
            (Origin::Shutdown, "shutdown"),
            (Origin::Reclaim, "reclaim"),
            (Origin::FinalDrain, "final_drain"),
            (Origin::Caller, "caller"),
            (Origin::Budget, "budget"),
            (Origin::FileChanged, "file_changed"),
            (Origin::Leftovers, "leftovers"),
        ] {
            let wire = format!("{name:?}");
            assert_eq!(serde_json::to_string(&origin).unwrap(), wire);
            assert_eq!(serde_json::from_str::<Origin>(&wire).unwrap(), origin);
        }
    }

    #[test]
    fn a_session_reference_is_its_command_id_on_the_wire() {
        for line in [
            r#"{"id":"agent-1","command":"03-build"}"#,
            r#"{"id":"20261130T064143Z-12","command":"04","state_dir":"/home/a/.local/state/tether"}"#,
        ] {
            let session: SessionRef = serde_json::from_str(line).unwrap();
            assert_eq!(serde_json::to_string(&session).unwrap(), line);
        }
        let session: SessionRef =
            serde_json::from_str(r#"{"id":"agent-1","command":"03-build"}"#).unwrap();
        assert_eq!(session.command, CommandId::new("agent-1", 3, "build"));
        assert_eq!(session.broker_id(), "agent-1/03-build");
        for bad in ["build", "3-build", "03-a/b", ""] {
            let line = format!(r#"{{"id":"s","command":"{bad}"}}"#);
            let err = serde_json::from_str::<SessionRef>(&line).unwrap_err();
            assert!(err.to_string().contains("is not a command id"), "{err}");
        }
    }

    #[test]
    fn an_old_request_without_intervals_gets_the_defaults() {
        let line =
            r#"{"v":1,"name":"a","command":{"argv":["true"]},"journal_dir":"/s/a","parent_pid":7}"#;
        let request: LaunchRequest = serde_json::from_str(line).unwrap();
        assert_eq!(request.grace, DEFAULT_GRACE);
        assert_eq!(
            (request.no_output_timeout, request.heartbeat, request.drain),
            (None, None, None)
        );
        assert_eq!(request.attention, AttentionRequest::default());
    }

    #[test]
    fn terminal_events_read_flat() {
        let event = EventKind::Terminal {
            streams: TerminalRequest {
                stdout: true,
                stderr: false,
                size: WindowSize::DEFAULT,
            },
        };
        let line = serde_json::to_string(&event).unwrap();
        assert_eq!(
            line,
            r#"{"kind":"terminal","stdout":true,"cols":80,"rows":24}"#
        );
        assert_eq!(serde_json::from_str::<EventKind>(&line).unwrap(), event);
        let input = EventKind::Input {
            bytes: 5,
            dropped: 0,
        };
        assert_eq!(
            serde_json::to_string(&input).unwrap(),
            r#"{"kind":"input","bytes":5}"#
        );
        assert_eq!(
            WindowSize { cols: 0, rows: 9 }.or_default(),
            WindowSize::DEFAULT
        );
    }

    #[test]
    fn a_name_is_the_wire_tag() {
        let kinds = [
            EventKind::Pong,
            EventKind::StreamsMerged {},
            EventKind::HardKill { after_ms: 1 },
            EventKind::TraceContextIgnored { reason: "x".into() },
            EventKind::ParentUnresponsive { silent_ms: 1 },
        ];
        for kind in kinds {
            assert_eq!(serde_json::to_value(&kind).unwrap()["kind"], kind.name());
        }
        for attention in [AttentionKind::NeedsInput, AttentionKind::Runaway] {
            assert_eq!(serde_json::to_value(attention).unwrap(), attention.name());
        }
        for mode in [ContainmentMode::Cgroup, ContainmentMode::Procfs] {
            assert_eq!(serde_json::to_value(mode).unwrap(), mode.label());
        }
        let origin: &str = Origin::FinalDrain.into();
        assert_eq!(serde_json::to_value(Origin::FinalDrain).unwrap(), origin);
        for stream in Stream::BOTH {
            assert_eq!(serde_json::to_value(stream).unwrap(), stream.name());
        }
        let probe = ReadyProbe::Tcp {
            host: "h".into(),
            port: 1,
        };
        assert_eq!(serde_json::to_value(&probe).unwrap()["probe"], probe.kind());
    }
}
