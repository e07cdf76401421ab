//! `tether exec`: one command through a broker, no TUI. Its output is copied byte for byte
//! (or its lifecycle printed as JSON lines), and its exit status becomes ours.

mod mirror;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use tokio::signal::unix::{SignalKind, signal};

use self::mirror::Mirror;
use crate::journal::{reader::Damage, state_dir};
use crate::protocol::{
    CommandSpec, DEFAULT_GRACE_MS, DEFAULT_MAX_OUTPUT, EventKind, LaunchRequest, Origin,
    PROTOCOL_VERSION, ToBroker,
};
use crate::supervisor::{BrokerProcess, Session};

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
    let mut session = Session::create(&state).map_err(|err| {
        anyhow::anyhow!(
            "cannot create a session journal under {}: {err}; set --state-dir or TETHER_STATE_DIR to a writable directory",
            state.display()
        )
    })?;
    let name = options
        .name
        .clone()
        .or_else(|| options.argv.first().cloned())
        .unwrap_or_default();
    let journal_dir = session.next_command_dir(&name);
    let request = LaunchRequest {
        v: PROTOCOL_VERSION,
        name,
        command: CommandSpec::Argv(options.argv.clone()),
        cwd: std::env::current_dir().ok(),
        env: BTreeMap::new(),
        journal_dir: journal_dir.clone(),
        parent_pid: std::process::id() as i32,
        grace_ms: options
            .grace
            .map_or(DEFAULT_GRACE_MS, |d| d.as_millis() as u64),
        no_output_timeout_ms: options.no_output_timeout.map(|d| d.as_millis() as u64),
        max_output: options.max_output.unwrap_or(DEFAULT_MAX_OUTPUT),
        heartbeat_ms: Some(HEARTBEAT.as_millis() as u64),
    };

    let mut sigint = signal(SignalKind::interrupt())?;
    let mut sigterm = signal(SignalKind::terminate())?;
    let mut sighup = signal(SignalKind::hangup())?;
    let mut broker = BrokerProcess::spawn(&request, Stdio::inherit())
        .await
        .map_err(|err| anyhow::anyhow!("cannot start the broker: {err}"))?;

    let mut mirror = Mirror::new(&journal_dir);
    let mut outcome = Outcome::default();
    let mut heartbeat = tokio::time::interval(HEARTBEAT);
    let mut stop_sent = false;
    loop {
        let mut stop: Option<Origin> = None;
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
                    EventKind::Output { stream, offset, len }
                        if !options.json && mirror.copy_to(stream, offset + len).is_err() =>
                    {
                        stop = Some(Origin::Shutdown);
                    }
                    EventKind::OutputCapped { stream, stored, message, .. } => {
                        mirror.cap(stream, stored);
                        eprintln!("tether: {message}");
                    }
                    EventKind::SpawnError { code, message } => outcome.spawn_error = Some((code, message)),
                    EventKind::Exit { status, .. } => outcome.exit = Some(status),
                    EventKind::BrokerFailure { message, .. } => {
                        if !options.json {
                            eprintln!("tether: {message}");
                        }
                        outcome.broker_failure = Some(message);
                    }
                    EventKind::Close { stdout_bytes, stderr_bytes } => {
                        outcome.closed = true;
                        if !options.json {
                            let _ = mirror.copy_to(crate::protocol::Stream::Stdout, stdout_bytes);
                            let _ = mirror.copy_to(crate::protocol::Stream::Stderr, stderr_bytes);
                        }
                    }
                    _ => {}
                }
            }
            _ = sigint.recv() => stop = Some(Origin::Operator),
            _ = sigterm.recv() => stop = Some(Origin::Shutdown),
            _ = sighup.recv() => stop = Some(Origin::Shutdown),
            _ = heartbeat.tick() => { let _ = broker.send(&ToBroker::Ping).await; }
        }
        if let Some(origin) = stop.filter(|_| !stop_sent) {
            stop_sent = true;
            let _ = broker
                .send(&ToBroker::Stop {
                    origin: Some(origin),
                })
                .await;
        }
    }
    let _ = broker.child.wait();
    if !outcome.closed {
        let record = crate::journal::CommandRecord::load(&journal_dir);
        if record.damage.contains(&Damage::MissingResult) {
            eprintln!(
                "tether: the journal in {} is incomplete (no result.json)",
                journal_dir.display()
            );
        }
    }
    Ok(outcome.exit_code(&journal_dir))
}

const HEARTBEAT: Duration = Duration::from_secs(1);
