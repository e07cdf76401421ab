//! `tether exec`: one command through a broker, no TUI. Its output is copied byte for byte
//! (or its lifecycle printed as JSON lines), and its exit status becomes ours.

mod copy;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::signal::unix::{SignalKind, signal};

use self::copy::{CopyPipes, OutputCopy};
use crate::journal::secure::lossy;
use crate::journal::{CommandRecord, state_dir};
use crate::protocol::{
    CommandSpec, DEFAULT_GRACE_MS, DEFAULT_MAX_OUTPUT, EventKind, LaunchRequest, Origin,
    PROTOCOL_VERSION, Scope, Stage, Stream, ToBroker,
};
use crate::supervisor::{BrokerProcess, Session};
use nix::sys::signal::Signal;

/// tether's own failure (journal, broker), as opposed to the command's.
pub const EXIT_TETHER_FAILED: i32 = 125;
pub const EXIT_NOT_EXECUTABLE: i32 = 126;
pub const EXIT_NOT_FOUND: i32 = 127;

pub struct ExecOptions {
    pub json: bool,
    pub name: Option<String>,
    pub grace: Option<Duration>,
    pub no_output_timeout: Option<Duration>,
    pub max_output: Option<u64>,
    pub state_dir: Option<PathBuf>,
    pub argv: Vec<String>,
}

pub fn main(options: ExecOptions) -> i32 {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(err) => {
            eprintln!("tether: cannot start the event loop: {err}");
            return EXIT_TETHER_FAILED;
        }
    };
    runtime.block_on(run(options)).unwrap_or_else(|err| {
        eprintln!("tether: {err:#}");
        EXIT_TETHER_FAILED
    })
}

/// What the events said about how the command ended.
#[derive(Default)]
struct Outcome {
    exit: Option<crate::protocol::ExitStatus>,
    spawn_error: Option<(String, String)>,
    broker_failure: Option<String>,
    closed: bool,
}

impl Outcome {
    fn exit_code(&self, journal: &std::path::Path) -> i32 {
        if let Some((code, message)) = &self.spawn_error {
            eprintln!("tether: {message}");
            return if code == "enoent" {
                EXIT_NOT_FOUND
            } else {
                EXIT_NOT_EXECUTABLE
            };
        }
        match self.exit {
            Some(status) => match (status.code, status.signal) {
                (Some(code), _) => code,
                (None, Some(signal)) => 128 + signal,
                (None, None) => EXIT_TETHER_FAILED,
            },
            None => {
                match &self.broker_failure {
                    Some(message) => eprintln!("tether: {message}"),
                    None => eprintln!(
                        "tether: the broker ended without reporting how the command ended; see the journal in {}",
                        journal.display()
                    ),
                }
                EXIT_TETHER_FAILED
            }
        }
    }
}

async fn run(options: ExecOptions) -> anyhow::Result<i32> {
    let state = state_dir(options.state_dir.as_deref())?;
    let mut session = Session::create(&state)?;
    let name = options
        .name
        .clone()
        .or_else(|| options.argv.first().cloned())
        .unwrap_or_default();
    let journal = session.next_command_dir(&name).map_err(|err| {
        anyhow::anyhow!(
            "cannot create the command's journal directory in {}: {err}",
            session.path().display()
        )
    })?;
    let journal_dir = journal.path().to_path_buf();
    let request = LaunchRequest {
        v: PROTOCOL_VERSION,
        name,
        command: CommandSpec::Argv(options.argv.clone()),
        // The broker inherits our working directory, whatever bytes its path holds.
        cwd: None,
        env: BTreeMap::new(),
        journal_dir: lossy(&journal_dir),
        parent_pid: std::process::id() as i32,
        grace_ms: options
            .grace
            .map_or(DEFAULT_GRACE_MS, |d| d.as_millis() as u64),
        no_output_timeout_ms: options.no_output_timeout.map(|d| d.as_millis() as u64),
        max_output: options.max_output.unwrap_or(DEFAULT_MAX_OUTPUT),
        heartbeat_ms: Some(HEARTBEAT.as_millis() as u64),
        mirror: !options.json,
    };

    let mut sigint = signal(SignalKind::interrupt())?;
    let mut sigterm = signal(SignalKind::terminate())?;
    let mut sighup = signal(SignalKind::hangup())?;
    let pipes = if options.json {
        None
    } else {
        Some(CopyPipes::new().map_err(|err| {
            anyhow::anyhow!("cannot create the pipes that copy the command's output: {err}")
        })?)
    };
    let (copy_read, copy_write) = match pipes {
        Some(CopyPipes { read, write }) => (Some(read), Some(write)),
        None => (None, None),
    };
    let mut broker = BrokerProcess::spawn(&request, &journal, copy_write, Stdio::inherit())
        .await
        .map_err(|err| anyhow::anyhow!("cannot start the broker: {err}"))?;
    // The write ends were closed when spawn returned: the copies end when the broker does.
    let mut copy = copy_read.map(OutputCopy::start).transpose()?;
    let mut outcome = Outcome::default();
    let mut heartbeat = tokio::time::interval(HEARTBEAT);
    let mut started = false;
    let mut group: Option<i32> = None;
    // Stops asked for so far: the first runs the stop sequence, a second (another Ctrl-C)
    // SIGKILLs the group at once.
    let mut stops = 0;
    loop {
        let mut stop: Option<Origin> = None;
        let mut interrupted = false;
        tokio::select! {
            line = broker.next_line() => {
                let Some(line) = line else { break };
                let event = match line.event {
                    Ok(event) => event,
                    Err(err) => {
                        eprintln!("tether: ignoring a line from the broker: {err}");
                        continue;
                    }
                };
                if options.json && !matches!(event.kind, EventKind::Pong) {
                    let mut out = std::io::stdout().lock();
                    if out.write_all(&line.raw).and_then(|()| out.write_all(b"\n")).and_then(|()| out.flush()).is_err() {
                        stop = Some(Origin::Shutdown);
                    }
                }
                match event.kind {
                    EventKind::BrokerStarted { .. } => started = true,
                    EventKind::Spawned { pgid, .. } => group = Some(pgid),
                    EventKind::OutputCapped { message, .. } => {
                        eprintln!("tether: {message}");
                    }
                    EventKind::SpawnError { code, message } => outcome.spawn_error = Some((code, message)),
                    EventKind::Exit { status, .. } => {
                        outcome.exit = Some(status);
                        group = None;
                    }
                    EventKind::BrokerFailure { message, .. } => {
                        if !options.json {
                            eprintln!("tether: {message}");
                        }
                        outcome.broker_failure = Some(message);
                        if !started {
                            // The launch itself was refused: nothing runs, nothing will.
                            let _ = broker.child.kill();
                            break;
                        }
                    }
                    EventKind::Close { .. } => outcome.closed = true,
                    _ => {}
                }
            }
            // Whoever read our output is gone: stop the command, as SIGPIPE would.
            Some(_) = broken_pipe(&mut copy) => stop = Some(Origin::Shutdown),
            _ = sigint.recv() => { stop = Some(Origin::Operator); interrupted = true; }
            _ = sigterm.recv() => { stop = Some(Origin::Shutdown); interrupted = true; }
            _ = sighup.recv() => { stop = Some(Origin::Shutdown); interrupted = true; }
            _ = heartbeat.tick() => { let _ = broker.send(&ToBroker::Ping).await; }
        }
        let Some(origin) = stop else { continue };
        let message = match stops {
            0 => ToBroker::Stop {
                origin: Some(origin),
            },
            _ if interrupted => ToBroker::Signal {
                signal: "KILL".into(),
                scope: Scope::Group,
                pid: None,
            },
            _ => continue,
        };
        stops += 1;
        let _ = broker.send(&message).await;
    }
    let _ = broker.child.wait();
    if !outcome.closed {
        recover_from_journal(&journal_dir, &mut outcome, group);
    }
    // The broker is gone, so the pipes end once what they hold is copied; a reader of ours
    // that takes nothing more must not keep us here.
    let reports = copy.map_or_else(Vec::new, |c| c.finish(COPY_WAIT));
    let code = outcome.exit_code(&journal_dir);
    let mut failed = false;
    for report in reports {
        if let Some((err, lost)) = report.failure {
            failed = true;
            eprintln!(
                "tether: writing the command's {} failed: {err}; {lost} bytes were not copied (the journal in {} has them, up to its cap)",
                report.stream.name(),
                journal_dir.display()
            );
        }
    }
    Ok(if failed { EXIT_TETHER_FAILED } else { code })
}

/// The next stream whose reader went away; never resolves without a copy.
async fn broken_pipe(copy: &mut Option<OutputCopy>) -> Option<Stream> {
    match copy {
        Some(copy) => copy.broken.recv().await,
        None => std::future::pending().await,
    }
}

/// How long the copies may take to finish once the broker has exited.
const COPY_WAIT: Duration = Duration::from_secs(5);

/// The broker ended without a `close` (its last events did not reach us, or it died): take
/// the outcome and the rest of the output from the journal; if there is no result, the
/// command may still run, so end its group.
fn recover_from_journal(dir: &Path, outcome: &mut Outcome, group: Option<i32>) {
    let record = CommandRecord::load(dir);
    let Some(result) = record.result else {
        if let Some(pgid) = crate::supervisor::signal_group(group, Signal::SIGKILL) {
            eprintln!(
                "tether: the broker died before the command ended; tether sent SIGKILL to its process group {pgid}"
            );
        }
        eprintln!(
            "tether: the journal in {} is incomplete (no result.json)",
            dir.display()
        );
        return;
    };
    outcome.exit = outcome.exit.or(result.exit);
    if let Some(failure) = result.failure.filter(|f| f.stage == Stage::Spawn) {
        outcome
            .spawn_error
            .get_or_insert((failure.code, failure.message));
    }
}

const HEARTBEAT: Duration = Duration::from_secs(1);
