//! `tether export --follow` as the tests run it: the follower as a process of the test
//! (tagged, its output in files), shell shim calls journaled in a named session for it to
//! follow, and what the test receiver got, read per session.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use nix::sys::signal::Signal;
use tether::export::otlp;

use super::otlp_receiver::{ReceivedSpan, Receiver, attr_int, hex};
use super::{BIN, DEADLINE, TAG_VAR, TestEnv, procs, run_to_end};

/// The exporter settings every follower test runs with: retries a second apart at most, and
/// a session without an agent done after a second without a new command, so that waits are
/// short; `extra` is more of the `[export.otlp]` table.
pub fn write_config(env: &TestEnv, extra: &str) {
    let dir = env.path("config").join("tether");
    fs::create_dir_all(&dir).expect("create the config dir");
    fs::write(
        dir.join("config.toml"),
        format!("[export.otlp]\nmax_backoff = \"1s\"\nsession_quiet = \"1s\"\n{extra}"),
    )
    .expect("write the user config");
}

/// The standard OpenTelemetry variables, which the test runner's environment may hold.
const OTEL_VARS: &[&str] = &[
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT",
    "OTEL_EXPORTER_OTLP_HEADERS",
    "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
    "OTEL_EXPORTER_OTLP_LOGS_HEADERS",
    "OTEL_EXPORTER_OTLP_PROTOCOL",
    "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
    "OTEL_EXPORTER_OTLP_TIMEOUT",
    "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
    "OTEL_SERVICE_NAME",
    "OTEL_RESOURCE_ATTRIBUTES",
];

/// `tether --state-dir STATE export --follow --endpoint URL ARGS`, tagged, stdin from
/// /dev/null, without the runner's OpenTelemetry variables.
pub fn follow_command(env: &TestEnv, endpoint: &str, args: &[&str]) -> Command {
    let mut command = env.tether(&["export", "--follow", "--endpoint", endpoint]);
    command
        .args(args)
        .env(TAG_VAR, &env.tag)
        .stdin(Stdio::null());
    for var in OTEL_VARS {
        command.env_remove(var);
    }
    command
}

/// `tether export --follow ARGS` run to its end (`--once`, `--status`).
pub fn follow_once(env: &TestEnv, endpoint: &str, args: &[&str]) -> Output {
    run_to_end(
        env,
        follow_command(env, endpoint, args),
        &format!("tether export --follow {args:?}"),
    )
}

static FOLLOWERS: AtomicUsize = AtomicUsize::new(0);

/// A running follower; dropping it kills it.
pub struct Follower {
    child: Child,
    pub stdout_path: PathBuf,
    pub stderr_path: PathBuf,
}

impl Follower {
    /// Starts `tether export --follow --endpoint ENDPOINT ARGS`.
    pub fn start(env: &TestEnv, endpoint: &str, args: &[&str]) -> Follower {
        Follower::spawn(env, follow_command(env, endpoint, args))
    }

    /// Starts `command` (a [`follow_command`], adjusted), its output in files.
    pub fn spawn(env: &TestEnv, mut command: Command) -> Follower {
        let n = FOLLOWERS.fetch_add(1, Ordering::Relaxed);
        let stdout_path = env.path(&format!("follower-{n}.stdout"));
        let stderr_path = env.path(&format!("follower-{n}.stderr"));
        let child = command
            .stdout(File::create(&stdout_path).expect("create the stdout capture"))
            .stderr(File::create(&stderr_path).expect("create the stderr capture"))
            .spawn()
            .expect("start tether export --follow");
        Follower {
            child,
            stdout_path,
            stderr_path,
        }
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    pub fn signal(&self, signal: Signal) {
        procs::signal(self.pid(), signal);
    }

    pub fn stderr_text(&self) -> String {
        String::from_utf8_lossy(&fs::read(&self.stderr_path).unwrap_or_default()).into_owned()
    }

    /// Whether it is still running (it has not exited).
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Waits for it to exit (within [`DEADLINE`]).
    pub fn wait(&mut self, env: &TestEnv) -> ExitStatus {
        let started = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().expect("wait for the follower") {
                return status;
            }
            if started.elapsed() > DEADLINE {
                let killed = procs::kill_tagged(&env.tag);
                panic!(
                    "the follower did not exit within {DEADLINE:?}; killed {killed:?}\nstderr: {}",
                    self.stderr_text()
                );
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    /// SIGTERM, then its exit: a follower told to stop exits 0.
    pub fn stop(mut self, env: &TestEnv) {
        self.signal(Signal::SIGTERM);
        let status = self.wait(env);
        assert!(
            status.success(),
            "the follower stopped by SIGTERM: {status:?}\nstderr: {}",
            self.stderr_text()
        );
    }
}

impl Drop for Follower {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A shell shim call (`tether sh -c SCRIPT`) journaled in the named session.
pub fn shim(env: &TestEnv, session: &str, script: &str) -> Command {
    let mut command = env.shim(Path::new(BIN), &["sh", "-c", script]);
    command.env("TETHER_SESSION", session);
    command
}

/// Runs a shim call to its end.
pub fn run_shim(env: &TestEnv, session: &str, script: &str) -> Output {
    run_to_end(env, shim(env, session, script), script)
}

/// Runs shim calls, `workers` at a time, each to its end; returns their outputs in the
/// scripts' order.
pub fn run_shims(env: &TestEnv, session: &str, scripts: &[String], workers: usize) -> Vec<Output> {
    let next = AtomicUsize::new(0);
    let mut outputs: Vec<Option<Output>> = (0..scripts.len()).map(|_| None).collect();
    let done = std::sync::Mutex::new(&mut outputs);
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(script) = scripts.get(i) else { break };
                    let output = run_shim(env, session, script);
                    done.lock().unwrap()[i] = Some(output);
                }
            });
        }
    });
    outputs
        .into_iter()
        .map(|o| o.expect("every call ran"))
        .collect()
}

/// The command directories of a session, by name (`NN-name`).
pub fn session_commands(env: &TestEnv, session: &str) -> Vec<String> {
    let dir = env.state_dir().join("sessions").join(session);
    let mut names: Vec<String> = fs::read_dir(&dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter(|e| e.path().join("events.jsonl").exists())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// The command spans of a session's trace the receiver has, by command directory (found by
/// its stable span id; a span id no directory has is under `?` and its hex id).
pub fn command_spans(
    env: &TestEnv,
    receiver: &Receiver,
    session: &str,
) -> BTreeMap<String, Vec<ReceivedSpan>> {
    let trace = hex(&otlp::trace_id(&otlp::local_host(), session));
    let by_id: BTreeMap<String, String> = session_commands(env, session)
        .into_iter()
        .map(|name| {
            (
                hex(&otlp::span_id(&otlp::local_host(), session, &name)),
                name,
            )
        })
        .collect();
    let mut spans: BTreeMap<String, Vec<ReceivedSpan>> = BTreeMap::new();
    for span in receiver.spans() {
        if hex(&span.span.trace_id) != trace
            || attr_int(&span.span.attributes, "tether.command.number").is_none()
        {
            continue;
        }
        let id = hex(&span.span.span_id);
        let name = by_id.get(&id).cloned().unwrap_or_else(|| format!("?{id}"));
        spans.entry(name).or_default().push(span);
    }
    spans
}

/// The session's root span (no agent: the session's own), as many times as it arrived.
pub fn root_spans(receiver: &Receiver, session: &str) -> Vec<ReceivedSpan> {
    let trace = hex(&otlp::trace_id(&otlp::local_host(), session));
    let root = hex(&otlp::span_id(&otlp::local_host(), session, ""));
    receiver
        .spans()
        .into_iter()
        .filter(|s| hex(&s.span.trace_id) == trace && hex(&s.span.span_id) == root)
        .collect()
}

/// Waits until every command the session's journal holds has arrived (`at_least` of them:
/// the journal may still be filling); past [`DEADLINE`] fails saying which are missing.
pub fn wait_all_commands(env: &TestEnv, receiver: &Receiver, session: &str, at_least: usize) {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let journaled = session_commands(env, session);
        let spans = command_spans(env, receiver, session);
        let missing: Vec<&String> = journaled
            .iter()
            .filter(|n| !spans.contains_key(*n))
            .collect();
        if journaled.len() >= at_least && missing.is_empty() {
            return;
        }
        if Instant::now() >= deadline {
            let killed = procs::kill_tagged(&env.tag);
            let strangers: Vec<&String> = spans.keys().filter(|n| n.starts_with('?')).collect();
            let cursors = cursors_of(env, session);
            let status = follow_once(env, &receiver.endpoint(), &["--status"]);
            let status = String::from_utf8_lossy(&status.stdout).into_owned();
            let files: Vec<String> = missing
                .iter()
                .take(3)
                .map(|name| {
                    let dir = env.state_dir().join("sessions").join(session).join(name);
                    let listed: Vec<String> = fs::read_dir(&dir)
                        .map(|e| {
                            e.filter_map(Result::ok)
                                .map(|e| e.file_name().to_string_lossy().into_owned())
                                .collect()
                        })
                        .unwrap_or_default();
                    format!("{name}: {listed:?}")
                })
                .collect();
            panic!(
                "timed out after {DEADLINE:?} waiting for the {} commands of {session} (at least \
                 {at_least}): {} missing ({:?}...), unknown span ids {strangers:?}, receiver's \
                 errors {:?}; the cursors {cursors:?}; the missing ones' files {files:?}; \
                 the follower's status:\n{status}\nkilled {killed:?}",
                journaled.len(),
                missing.len(),
                &missing[..missing.len().min(5)],
                receiver.errors()
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// Every journaled command of the session arrived exactly once and nothing else of its trace
/// did (a span id no command has), and the receiver decoded everything it was sent.
pub fn assert_each_once(env: &TestEnv, receiver: &Receiver, session: &str) {
    let journaled = session_commands(env, session);
    let spans = command_spans(env, receiver, session);
    let missing: Vec<&String> = journaled
        .iter()
        .filter(|n| !spans.contains_key(*n))
        .collect();
    let doubled: Vec<(&String, usize)> = spans
        .iter()
        .filter(|(_, s)| s.len() > 1)
        .map(|(n, s)| (n, s.len()))
        .collect();
    let strangers: Vec<&String> = spans.keys().filter(|n| n.starts_with('?')).collect();
    assert!(
        missing.is_empty() && doubled.is_empty() && strangers.is_empty(),
        "of {} commands: missing {missing:?}, doubled {doubled:?}, unknown span ids {strangers:?}",
        journaled.len()
    );
    assert_eq!(
        receiver.errors(),
        Vec::<String>::new(),
        "the receiver's errors"
    );
}

/// The session's cursor files, each endpoint's, as text (for a failure's message).
fn cursors_of(env: &TestEnv, session: &str) -> Vec<String> {
    let root = env.state_dir().join("export").join("otlp");
    fs::read_dir(&root)
        .map(|dirs| {
            dirs.filter_map(Result::ok)
                .filter_map(|d| fs::read_to_string(d.path().join(format!("{session}.cursor"))).ok())
                .collect()
        })
        .unwrap_or_default()
}
