//! `tether exec`: one command through a broker, no TUI. Its output is copied byte for byte
//! (or its lifecycle printed as JSON lines), and its exit status becomes ours.

/// Prints `tether: MESSAGE` on stderr in one write, so that it never lands inside a line of
/// the command's stderr, which a copy thread writes at the same time.
macro_rules! say {
    ($($arg:tt)*) => {
        $crate::exec::say_line(&format!($($arg)*))
    };
}

mod conversation;
mod copy;
mod keys;
mod leftovers;
mod notices;
mod terminal;

pub use leftovers::{LEFTOVERS_ENV, LeftoversChoice, SESSION_OWNER_ENV};
pub use notices::{NOTICES_FILE, divert_to as divert_notices, say as say_line};

use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use self::conversation::{ExecConversation, install_signals};
use self::copy::{CopyPipes, CopyReads, CopyReport, OutputCopy};
use nix::sys::signal::{SigSet, SigmaskHow, sigprocmask};
use tether_config::naming::derive_name;

use crate::supervisor::intervals::{Pace, grace};
use crate::supervisor::leftovers::LiveBrokers;
use crate::supervisor::{
    BrokerConversation, End, Fork, Handover, Session, become_subreaper, fork_broker, launch_request,
};
use tether_os::journal::{CommandRecord, JournalDir, SessionName, state_dir};
use tether_os::sys::new_span_id;
use tether_protocol::names::CALL_COMM;
use tether_protocol::protocol::trace::{CallerTrace, TraceContext};
use tether_protocol::protocol::{
    CommandSpec, LaunchRequest, Origin, Request, Stage, StdinSource, Stream,
};

/// tether's own failure (journal, broker), as opposed to the command's.
pub const EXIT_TETHER_FAILED: i32 = 125;
pub const EXIT_NOT_EXECUTABLE: i32 = 126;
pub const EXIT_NOT_FOUND: i32 = 127;

#[derive(Default)]
pub struct ExecOptions {
    pub json: bool,
    pub name: Option<String>,
    pub grace: Option<Duration>,
    pub no_output_timeout: Option<Duration>,
    /// `--drain-on`: a regex (already checked) for the command's final line of stdout.
    pub drain_on: Option<String>,
    /// `--drain`: how long the command may take to exit after its final line.
    pub drain: Option<Duration>,
    /// `--ready-*`: how the command proves it is ready (already checked).
    pub ready: Option<tether_protocol::protocol::Readiness>,
    /// `--max-output`: the journal's cap (bytes beyond are counted, not stored).
    pub max_output: Option<u64>,
    /// `--max-time`, `--max-cpu`, `--output-budget`: the command's own budgets, over the
    /// variables and the user config's `[budgets]`.
    pub budgets: tether_config::budgets::BudgetSettings,
    pub state_dir: Option<PathBuf>,
    /// The named session to join; `None`: a fresh one.
    pub session: Option<SessionName>,
    pub argv: Vec<String>,
    /// The `argv[0]` the program sees, if not `argv[0]` itself (the shell shim's).
    pub arg0: Option<String>,
    pub signals: SignalMode,
    /// The command's stdin is /dev/null rather than ours (`--no-stdin`).
    pub no_stdin: bool,
    /// A pseudo-terminal for each stream where tether's own is a terminal (`--no-pty`:
    /// pipes whatever they are).
    pub pty: bool,
    /// `--max-procs`, `--max-memory`: limits on the command's cgroup.
    pub limits: tether_os::cgroup::Limits,
    pub leftovers: LeftoversChoice,
    /// When the command dies by a signal, die by the same signal rather than exit 128+N (the
    /// shell shim: its caller must see what bash would have shown it; an agent reads exit
    /// 143 as its own timeout).
    pub die_by_signal: bool,
    /// An agent's command (the shell shim): a failure quicker than the user's
    /// `agent_failures_after` is counted in its row, not told (attention `failed`).
    pub agents_command: bool,
    /// The command is an agent (`tether agent`): its attention tells when it waits for its
    /// human.
    pub agent: bool,
    /// `--fail-open` (always, for the shell shim): when the command cannot be run under a
    /// broker (the journal cannot be created: a full disk, a read-only or foreign state
    /// directory), it runs directly, exec'd in tether's place, after one line on stderr.
    pub fail_open: bool,
    pub retention: RetentionRun,
    /// Where our stdin is our terminal and the command gets terminals: its stdin is its own
    /// terminal too, which gets the keys typed into ours, so that it can read `/dev/tty`
    /// (the shell shim; see `keys`).
    pub relay_keys: bool,
}

/// When a front end applies retention (see [`crate::prune`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RetentionRun {
    /// In this process, once the session ends (`tether exec`), unless nested in another
    /// tether's command: the outermost front end applies it when its own session ends.
    #[default]
    AtSessionEnd,
    /// In a detached process after the command, at most once a minute (the shell shim,
    /// whose caller must get the exit status at once).
    Detached,
}

/// What `tether exec` does with SIGINT, SIGTERM and SIGHUP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SignalMode {
    /// The stop sequence at the first, SIGKILL to the group at a second SIGINT.
    #[default]
    Stop,
    /// The first is passed on, as the same signal, to the command's group, as a shell that
    /// execs its command would have it delivered (the shell shim); a second runs the stop
    /// sequence, a third SIGINT SIGKILLs the group.
    Forward,
}

pub fn main(options: ExecOptions) -> i32 {
    let ran = match prepare(&options) {
        Ok(prepared) => start(&options, prepared),
        Err(not_started) => Ok(not_started),
    };
    // Whatever killed brokers left, that this process was stopping meanwhile: never left
    // signalled but not journaled.
    crate::supervisor::abandoned::settle();
    match ran {
        Ok(Ran::Code(code)) => code,
        Ok(Ran::Signalled { signal, code }) => {
            die_by(signal);
            code
        }
        Ok(Ran::NotStarted { reason, state }) if options.fail_open => {
            say!("not journaled: {reason}");
            if let (Some(state), RetentionRun::Detached) = (state, options.retention) {
                // A full disk is when retention is wanted most.
                crate::prune::detached::after_command(&state, None);
            }
            let arg0 = options.arg0.as_deref().map(std::ffi::OsStr::new);
            exec_directly(&options.argv, arg0)
        }
        Ok(Ran::NotStarted { reason, .. }) => {
            say!("{reason}");
            EXIT_TETHER_FAILED
        }
        Err(err) => {
            say!("{err:#}");
            EXIT_TETHER_FAILED
        }
    }
}

/// Starts the broker, then the event loop that talks to it. The broker is forked from this
/// process where it can be (see [`crate::supervisor::fork_broker`]), before the runtime and
/// our signal handlers exist, none of which the copy may share; the signals we handle are
/// held back from the fork until the handlers are in place, so none is missed meanwhile.
fn start(options: &ExecOptions, mut prepared: Prepared) -> anyhow::Result<Ran> {
    // Named for what it does from now on: an agent's broker tells a shell call in flight by
    // this name among the agent's processes (its broker is outside the agent's cgroup).
    let _ = nix::sys::prctl::set_name(CALL_COMM);
    let held = HeldSignals::hold();
    let handover = std::mem::take(&mut prepared.handover);
    let broker = match fork_broker(&prepared.request, &prepared.journal, handover, &held.before) {
        Ok(broker) => broker,
        Err(err) => {
            let err = format!("cannot start the broker: {err}");
            return Ok(Ran::not_started(err, Some(&prepared.state)));
        }
    };
    match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime.block_on(run(options, prepared, broker, held)),
        Err(err) => {
            let err = anyhow::anyhow!("cannot start the event loop: {err}");
            before_the_command(matches!(broker, Fork::Started(_)), err, &prepared.state)
        }
    }
}

/// A failure before the broker has the command leaves nothing running: `--fail-open` can
/// still run it directly. A forked broker has it already (`forked`): it stops it when we
/// are gone.
fn before_the_command(forked: bool, err: anyhow::Error, state: &Path) -> anyhow::Result<Ran> {
    if forked {
        Err(err)
    } else {
        Ok(Ran::not_started(err, Some(state)))
    }
}

/// The signals `tether exec` handles, blocked until its handlers are in place (dropped).
struct HeldSignals {
    /// The mask before: the broker's, and ours again after.
    before: SigSet,
}

impl HeldSignals {
    fn hold() -> HeldSignals {
        let held: SigSet = conversation::HANDLED.into_iter().collect();
        let mut before = SigSet::empty();
        let _ = sigprocmask(SigmaskHow::SIG_BLOCK, Some(&held), Some(&mut before));
        HeldSignals { before }
    }
}

impl Drop for HeldSignals {
    fn drop(&mut self) {
        let _ = sigprocmask(SigmaskHow::SIG_SETMASK, Some(&self.before), None);
    }
}

/// How [`run`] ended, short of an error once the command may have started.
enum Ran {
    /// The exit code: the command's, or tether's own failure once it had started.
    Code(i32),
    /// The command died by `signal` and we are to die by it too (`code`, 128+N, where we
    /// cannot).
    Signalled { signal: i32, code: i32 },
    /// The command could not be run under a broker and has not started.
    NotStarted {
        reason: String,
        state: Option<PathBuf>,
    },
}

impl Ran {
    /// Not started, for `err` (with its causes), `state` the state directory if it was found.
    fn not_started(err: impl std::fmt::Display, state: Option<&Path>) -> Ran {
        Ran::NotStarted {
            reason: format!("{err:#}"),
            state: state.map(Path::to_path_buf),
        }
    }
}

/// Becomes `argv` (seen as `arg0`, if given), as a shell would run it: without tether,
/// nothing of tether's left in the process. Returns only when it cannot, with the code a
/// shell gives (127 not found, 126 not executable).
pub fn exec_directly(argv: &[impl AsRef<std::ffi::OsStr>], arg0: Option<&std::ffi::OsStr>) -> i32 {
    let Some(program) = argv.first() else {
        say!("cannot run an empty command");
        return EXIT_NOT_FOUND;
    };
    let mut command = std::process::Command::new(program);
    if let Some(arg0) = arg0 {
        use std::os::unix::process::CommandExt;
        command.arg0(arg0);
    }
    command.args(&argv[1..]);
    become_command(command)
}

/// Becomes `command` (exec(2)), as [`exec_directly`] does; for a caller that sets its
/// environment too (`tether agent`'s session owner).
pub fn become_command(mut command: std::process::Command) -> i32 {
    use std::os::unix::process::CommandExt;
    // Orphans of what runs now are not ours to reap.
    let _ = nix::sys::prctl::set_child_subreaper(false);
    let err = command.exec();
    say!(
        "cannot run {}: {err}",
        Path::new(command.get_program()).display()
    );
    if err.kind() == std::io::ErrorKind::NotFound {
        EXIT_NOT_FOUND
    } else {
        EXIT_NOT_EXECUTABLE
    }
}

/// What the events said about how the command ended.
#[derive(Default)]
struct Outcome {
    exit: Option<tether_protocol::protocol::ExitStatus>,
    spawn_error: Option<(String, String)>,
    broker_failure: Option<String>,
    /// The failure was printed when it arrived.
    broker_failure_shown: bool,
    closed: bool,
    /// The `final_drain` event's pattern and drain period: the command printed its final line.
    final_line: Option<(String, Duration)>,
    /// The command did not exit within the drain period and was stopped: it finished.
    drained: bool,
    /// The budget that stopped it, as the timeline words it (`max_cpu 1.0s reached ...`).
    over_budget: Option<String>,
    /// How long it had been silent when the no-output watchdog stopped it.
    silent_ms: Option<u64>,
    /// Bytes of each stream (stdout, stderr) whose copy the broker gave up
    /// (`output_undelivered`): our caller took no more of it.
    undelivered: [u64; 2],
    /// What the command wrote to each stream in all, as `close` says.
    written: Option<[u64; 2]>,
}

impl Outcome {
    /// One line for the caller of a drained command, which exits 0 though it was stopped.
    fn drained_message(&self) -> String {
        match &self.final_line {
            Some((pattern, drain)) => format!(
                "stopped the command after its final output: a line matched `{}` and it had not exited {} later",
                tether_model::output::one_line(pattern),
                tether_protocol::units::duration(*drain)
            ),
            None => "stopped the command after its final output (--drain-on)".into(),
        }
    }

    /// The line that tells the caller tether itself stopped the command, by a budget or the
    /// no-output watchdog: the exit status alone (143) does not say who ended it. A budget
    /// first, as the ending's words go (`model::ending`).
    fn stopped_by_tether(&self) -> Option<String> {
        if let Some(words) = &self.over_budget {
            return Some(format!("stopped by its budget: {words}"));
        }
        let silent = self.silent_ms?;
        Some(format!(
            "stopped by its no-output timeout: no output for {}",
            tether_protocol::units::duration_ms(silent)
        ))
    }

    /// The signal the command died by, when that is how it ended (not a drain, which ends
    /// well, nor a start that failed).
    fn death_signal(&self) -> Option<i32> {
        let ended_badly = self.spawn_error.is_none() && !self.drained;
        self.exit
            .filter(|s| ended_badly && s.code.is_none())?
            .signal
    }

    fn exit_code(&self, journal: &std::path::Path) -> i32 {
        if let Some((code, message)) = &self.spawn_error {
            say!("{message}");
            return if code == "enoent" {
                EXIT_NOT_FOUND
            } else {
                EXIT_NOT_EXECUTABLE
            };
        }
        match self.exit {
            // Its final result was out; the stop was ours.
            Some(_) if self.drained => 0,
            Some(status) => match (status.code, status.signal) {
                (Some(code), _) => code,
                (None, Some(signal)) => 128 + signal,
                (None, None) => EXIT_TETHER_FAILED,
            },
            None => {
                match &self.broker_failure {
                    Some(_) if self.broker_failure_shown => {}
                    Some(message) => say!("{message}"),
                    None => say!(
                        "the broker ended without reporting how the command ended; see the journal in {}",
                        journal.display()
                    ),
                }
                EXIT_TETHER_FAILED
            }
        }
    }
}

/// The command's trace context, when our caller gave us a `TRACEPARENT`: a span of its
/// own under the caller's, made here so that the journal, the export and the command's
/// environment name the same one. Else why the caller's could not be used, if it could not.
fn caller_trace() -> (Option<TraceContext>, Option<String>) {
    match CallerTrace::from_env() {
        CallerTrace::None => (None, None),
        CallerTrace::Parent { parent, state } => (
            Some(TraceContext::child_of(parent, new_span_id(), state)),
            None,
        ),
        CallerTrace::Ignored(reason) => (None, Some(reason)),
    }
}

/// What the broker is started with, made before it is: until then a failure leaves
/// nothing running, and `--fail-open` can still run the command directly.
struct Prepared {
    state: PathBuf,
    session: Session,
    journal: JournalDir,
    request: LaunchRequest,
    relay: Option<keys::KeyRelay>,
    /// The read ends of the copy pipes (none with `--json`).
    copy_read: Option<CopyReads>,
    handover: Handover,
    /// The user config does not parse, and that was said at launch.
    config_said: bool,
}

fn prepare(options: &ExecOptions) -> Result<Prepared, Ran> {
    let state = state_dir(options.state_dir.as_deref())
        .map_err(|err| Ran::not_started(anyhow::Error::from(err), None))?;
    prepare_in(options, state.clone()).map_err(|err| Ran::not_started(err, Some(&state)))
}

/// [`prepare`], once the state directory `state` is found.
fn prepare_in(options: &ExecOptions, state: PathBuf) -> anyhow::Result<Prepared> {
    let mut session = Session::create(&state, options.session.as_ref())?;
    // Named as `run` names a command: `sh -c 'cd x && make'`, `env FOO=1 make` are `make`.
    let name = options
        .name
        .clone()
        .unwrap_or_else(|| derive_name(&CommandSpec::Argv(options.argv.clone())));
    let (command_id, journal) = session.next_command_dir(&name).map_err(|err| {
        anyhow::anyhow!(
            "cannot create the command's journal directory in {}: {err}",
            session.path().display()
        )
    })?;
    let journal_dir = journal.path().to_path_buf();
    // With --json our stdout carries events, not the command's output.
    let merge_stderr = !options.json && terminal::stdout_is_stderr();
    let terminal = (options.pty && !options.json)
        .then(terminal::own_terminal)
        .flatten();
    let relay = (options.relay_keys
        && !options.no_stdin
        && terminal.is_some()
        && keys::stdin_is_our_foreground_terminal())
    .then(keys::KeyRelay::start)
    .flatten();
    // Our stdin becomes the command's, as a shell would give it. (std opens /dev/null for a
    // closed descriptor 0 at start, so there is always one.)
    let stdin = (!options.no_stdin && relay.is_none())
        .then(|| std::io::stdin().as_fd().try_clone_to_owned().ok())
        .flatten();
    let (trace, trace_ignored) = caller_trace();
    // A user config that does not parse gives the defaults here: its `[budgets]` and
    // `[retention]` are not applied, which is said now, on one line (the retention run when
    // this session ends does not say it again).
    let (user, config_error) = tether_config::user::for_launch();
    let config_said = config_error.is_some();
    if let Some(err) = config_error {
        say!("{}", budgets_not_applied(&err));
    }
    let attention = if options.agents_command {
        tether_config::attention::for_agent(&user)
    } else {
        tether_config::attention::with_user(&user, &Default::default())
    };
    let attention = tether_protocol::protocol::AttentionRequest {
        agent: options.agent,
        ..attention
    };
    let (max_output, ignored) =
        tether_config::journal::max_output(options.max_output, &user.journal);
    if let Some(message) = ignored {
        say!("{message}");
    }
    // `tether agent`'s agent runs for hours: the defaults are for its commands, not for it.
    let (budgets, ignored) =
        tether_config::budgets::for_launch(options.budgets, &user.budgets, !options.agent);
    for message in ignored {
        say!("{message}");
    }
    // No `cwd`: the broker inherits our working directory, whatever bytes its path holds.
    let request = LaunchRequest {
        grace: grace(options.grace),
        no_output_timeout: options.no_output_timeout,
        drain_on: options.drain_on.clone(),
        drain: options.drain,
        ready: options.ready.clone(),
        max_output,
        mirror: !options.json,
        // The shim passes its caller's signals on; its death is the caller's doing too.
        caller_stand_in: options.signals == SignalMode::Forward,
        stdin: match (&relay, &stdin) {
            (Some(_), _) => StdinSource::Terminal,
            (None, Some(_)) => StdinSource::Inherit,
            (None, None) => StdinSource::Null,
        },
        arg0: options.arg0.clone(),
        terminal,
        merge_stderr,
        limits: options.limits,
        leftovers: options.leftovers.rule(),
        trace,
        trace_ignored,
        attention,
        budgets,
        ..launch_request(
            name,
            CommandSpec::Argv(options.argv.clone()),
            &journal_dir,
            session.reference(&command_id),
            Pace::EXEC,
        )
    };

    // Whatever the broker leaves if it dies is re-parented to us, to be stopped here.
    become_subreaper().map_err(|err| anyhow::anyhow!("cannot become a child subreaper: {err}"))?;
    let (copy_read, copy_write) = (!options.json)
        .then(CopyPipes::new)
        .transpose()
        .map_err(|err| {
            anyhow::anyhow!("cannot create the pipes that copy the command's output: {err}")
        })?
        .map(|CopyPipes { read, write }| (read, write))
        .unzip();
    Ok(Prepared {
        state,
        session,
        journal,
        request,
        relay,
        copy_read,
        handover: Handover {
            mirror: copy_write,
            stdin,
        },
        config_said,
    })
}

async fn run(
    options: &ExecOptions,
    prepared: Prepared,
    broker: Fork,
    held: HeldSignals,
) -> anyhow::Result<Ran> {
    let journal_dir = prepared.journal.path();
    let forked = matches!(broker, Fork::Started(_));
    let not_started = |err| before_the_command(forked, err, &prepared.state);
    let signals = match install_signals(prepared.request.terminal.is_some()) {
        Ok(signals) => signals,
        Err(err) => return not_started(err.into()),
    };
    // Our handlers take what came meanwhile.
    drop(held);
    let live = LiveBrokers::new();
    let launched = match broker {
        Fork::Started(forked) => {
            BrokerConversation::forked(forked, &prepared.request, &live, Pace::EXEC).await
        }
        Fork::Declined(handover) => {
            BrokerConversation::launch(
                &prepared.request,
                &prepared.journal,
                handover,
                Stdio::inherit(),
                &live,
                Pace::EXEC,
            )
            .await
        }
    };
    let mut broker = match launched {
        Ok(broker) => broker,
        Err(err) => return not_started(anyhow::anyhow!("cannot start the broker: {err}")),
    };
    // Off our path (the shim's start stays as fast), and after the broker, which a thread
    // would have kept from being forked: whatever killed brokers left running.
    let _ = crate::supervisor::abandoned::reclaim_in_background();
    // The write ends were closed when spawn returned: the copies end when the broker does.
    let copy = match prepared.copy_read.map(OutputCopy::start).transpose() {
        Ok(copy) => copy,
        Err(err) => {
            // Our own failure, not our caller's: the command is stopped as at our shutdown
            // before the broker finds us gone (which a shim's broker reads as its caller's).
            broker.post(&Request::Stop {
                origin: Some(Origin::Shutdown),
            });
            return Err(err.into());
        }
    };
    let forward = options.signals == SignalMode::Forward;
    let mut conversation = ExecConversation::new(options.json, copy, forward, prepared.relay);
    let end = conversation.converse(&mut broker, signals).await;
    // The broker stays on as the leftovers' custodian if it keeps them running; we return as
    // the shell would. It is not waited for: the one that ran us re-parents nothing of ours,
    // and the broker ends on its own when the leftovers are stopped.
    let remains = broker.end(end, false).await;
    let ExecConversation {
        mut outcome,
        copy,
        journal_losses,
        ..
    } = conversation;
    if end == End::Refused {
        let reason = outcome.broker_failure.unwrap_or_else(|| {
            format!(
                "the broker refused the launch; see the journal in {}",
                journal_dir.display()
            )
        });
        return Ok(Ran::not_started(reason, Some(&prepared.state)));
    }
    let lost = remains.is_some();
    if let Some(remains) = remains {
        let why = remains.why;
        let cleanup = remains.stop().await;
        say!("{why}; {}", cleanup.describe());
    }
    // The broker is gone, so the pipes end once what they hold is copied; a reader of ours
    // that takes nothing more must not keep us here.
    let given_up = outcome.undelivered.map(|bytes| bytes > 0);
    let copied = copy.as_ref().map(OutputCopy::copied);
    let copy_failed = copy.is_some_and(|c| report_copy(c.finish(COPY_WAIT, given_up), journal_dir));
    let copied = copied.map(|c| c.map(|n| n.load(std::sync::atomic::Ordering::Acquire)));
    report_undelivered(
        undelivered(outcome.undelivered, outcome.written, copied),
        journal_dir,
    );
    // After the command's last bytes: one line for whatever the journal lost, however
    // many times it lost it (a disk that filled: every stream, the event log, the result).
    if !journal_losses.is_empty() {
        say!("journal incomplete: {}", journal_losses.join("; "));
    }
    if !outcome.closed && end != End::LeftRunning {
        let complete = recover_from_journal(journal_dir, &mut outcome);
        if lost && !complete {
            return Ok(Ran::Code(EXIT_TETHER_FAILED));
        }
    }
    let code = outcome.exit_code(journal_dir);
    let nested = std::env::var_os(tether_os::journal::BROKER_ID_ENV).is_some();
    match options.retention {
        RetentionRun::AtSessionEnd if !nested => crate::prune::at_session_end(
            &prepared.state,
            &prepared.session.id,
            prepared.config_said,
        ),
        RetentionRun::AtSessionEnd => {}
        RetentionRun::Detached => {
            crate::prune::detached::after_command(&prepared.state, Some(&prepared.session.id))
        }
    }
    let died_by = options
        .die_by_signal
        .then(|| outcome.death_signal())
        .flatten();
    Ok(match (copy_failed, died_by) {
        (true, _) => Ran::Code(EXIT_TETHER_FAILED),
        (false, Some(signal)) => Ran::Signalled { signal, code },
        (false, None) => Ran::Code(code),
    })
}

/// Ends this process by `signal`, as the command ended: its default action restored and
/// unblocked, without a core file of ours (the command's own was its to dump). Returns only
/// for a signal whose default action does not end a process (SIGCHLD, SIGWINCH, ...).
fn die_by(signal: i32) {
    use nix::sys::signal::{SigHandler, Signal, signal as set_handler};
    let Ok(signal) = Signal::try_from(signal) else {
        return;
    };
    let _ = nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_CORE, 0, 0);
    // SAFETY: restoring the default action installs no handler of ours.
    let _ = unsafe { set_handler(signal, SigHandler::SigDfl) };
    let only = SigSet::from(signal);
    let _ = nix::sys::signal::pthread_sigmask(SigmaskHow::SIG_UNBLOCK, Some(&only), None);
    let _ = nix::sys::signal::raise(signal);
}

/// Says what could not be copied to our own streams. Returns whether anything failed.
fn report_copy(reports: Vec<CopyReport>, journal_dir: &Path) -> bool {
    let mut failed = false;
    for report in reports {
        if let Some((err, lost)) = report.failure {
            failed = true;
            say!(
                "writing the command's {} failed: {err}; {lost} bytes were not copied (the journal in {} has them, up to its cap)",
                report.stream.name(),
                journal_dir.display()
            );
        }
    }
    failed
}

/// What of each stream never reached our caller, where the broker gave its copy up
/// (`given_up`: what its pipe and queue held then). Our copy may have taken some of that
/// since, so where the command's totals (`written`) and our copies' (`copied`) are known,
/// it is their difference.
fn undelivered(
    given_up: [u64; 2],
    written: Option<[u64; 2]>,
    copied: Option<[u64; 2]>,
) -> [u64; 2] {
    match (written, copied) {
        (Some(written), Some(copied)) => std::array::from_fn(|i| match given_up[i] {
            0 => 0,
            _ => written[i].saturating_sub(copied[i]),
        }),
        _ => given_up,
    }
}

/// Says what of the command's output never reached our caller, who took no more of it
/// (the broker gave our copy up once the command had ended).
fn report_undelivered(undelivered: [u64; 2], journal_dir: &Path) {
    for (stream, bytes) in Stream::BOTH.into_iter().zip(undelivered) {
        if bytes > 0 {
            say!(
                "{bytes} bytes of the command's {} were not delivered: the command had ended and its reader was behind (the journal in {} has them)",
                stream.name(),
                journal_dir.display()
            );
        }
    }
}

/// The one line that says a user config that does not parse leaves its budgets unapplied.
fn budgets_not_applied(err: &tether_config::ConfigError) -> String {
    let text = err.to_string();
    let text = text.lines().map(str::trim).collect::<Vec<_>>().join(" ");
    format!("{text}; budgets and retention not applied")
}

/// How long the copies may take to finish once the broker has exited.
const COPY_WAIT: Duration = Duration::from_secs(5);

/// The broker ended without a `close` (its last events did not reach us, or it died): take
/// the outcome and the rest of the output from the journal. Returns whether the journal has
/// the result.
fn recover_from_journal(dir: &Path, outcome: &mut Outcome) -> bool {
    let record = CommandRecord::load(dir);
    let Some(result) = record.result else {
        say!(
            "the journal in {} is incomplete (no result.json)",
            dir.display()
        );
        return false;
    };
    outcome.exit = outcome.exit.or(result.exit);
    outcome.drained |= result.drained;
    if let Some(failure) = result.failure.filter(|f| f.stage == Stage::Spawn) {
        outcome
            .spawn_error
            .get_or_insert((failure.code, failure.message));
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn undelivered_is_what_was_written_less_what_our_copy_took() {
        const MIB: u64 = 1 << 20;
        // Given up with a full pipe (1 MiB) and 8 KiB queued, while our copy had taken
        // 1 MiB of the first: it went on to take the pipe's, so 8 KiB never came.
        let written = Some([2 * MIB + 8192, 10]);
        let copied = Some([2 * MIB, 10]);
        assert_eq!(undelivered([MIB + 8192, 0], written, copied), [8192, 0]);
        // A stream whose copy went on is not counted, whatever its figures.
        assert_eq!(undelivered([0, 0], written, Some([MIB, 0])), [0, 0]);
        // Without the totals (no `close`), the broker's own count.
        assert_eq!(undelivered([MIB, 0], None, copied), [MIB, 0]);
    }

    #[test]
    fn a_stop_of_tethers_own_is_told_in_one_line() {
        let mut outcome = Outcome::default();
        assert_eq!(outcome.stopped_by_tether(), None);
        outcome.silent_ms = Some(1_004);
        assert_eq!(
            outcome.stopped_by_tether().as_deref(),
            Some("stopped by its no-output timeout: no output for 1.0s")
        );
        outcome.over_budget = Some("max_time 1.0s reached (1.0s used)".into());
        assert_eq!(
            outcome.stopped_by_tether().as_deref(),
            Some("stopped by its budget: max_time 1.0s reached (1.0s used)")
        );
    }

    #[test]
    fn a_user_config_that_does_not_parse_is_said_on_one_line_with_its_place() {
        let text = "[budgets]\nmax_time = \"soon\"\n";
        let err = tether_config::user::parse_user(text, "/home/u/.config/tether/config.toml")
            .expect_err("does not parse");
        let line = budgets_not_applied(&err);
        assert!(!line.contains('\n'), "{line}");
        assert!(
            line.starts_with("/home/u/.config/tether/config.toml:2:"),
            "{line}"
        );
        assert!(
            line.ends_with("; budgets and retention not applied"),
            "{line}"
        );
    }
}
