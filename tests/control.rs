//! Control sockets and `tether ps`, `stop`, `kill`, `signal` end to end (issue 7, parts 2
//! and 4). Every test gives its brokers a runtime directory of its own (`XDG_RUNTIME_DIR`).

use crate::common;

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Instant;

use common::journal::{
    broker_pid, events_now, exit_status, load_complete, read, session_of, spawned_pid,
};
use common::procs::{is_gone, signal};
use common::{BIN, DEADLINE, RunningExec, TAG_VAR, TestEnv, wait_for_text, wait_until};
use nix::sys::signal::Signal;
use tether::protocol::{CommandFile, Event, EventKind, Origin};

/// A test's runtime directory (0700), where its brokers put their sockets.
fn runtime_dir(env: &TestEnv) -> PathBuf {
    env.runtime_dir()
}

/// `tether exec` with `XDG_RUNTIME_DIR=runtime`, output captured to files.
fn spawn_exec(env: &TestEnv, runtime: &Path, options: &[&str], argv: &[&str]) -> RunningExec {
    spawn_exec_with(env, runtime, options, argv, |_| {})
}

fn spawn_exec_with(
    env: &TestEnv,
    runtime: &Path,
    options: &[&str],
    argv: &[&str],
    adjust: impl FnOnce(&mut Command),
) -> RunningExec {
    let n = fs::read_dir(env.dir.path()).map_or(0, |d| d.count());
    let stdout_path = env.path(&format!("exec-{n}.stdout"));
    let stderr_path = env.path(&format!("exec-{n}.stderr"));
    let mut command = env.exec_command(options, argv);
    command
        .env("XDG_RUNTIME_DIR", runtime)
        .stdout(fs::File::create(&stdout_path).expect("stdout capture"))
        .stderr(fs::File::create(&stderr_path).expect("stderr capture"));
    adjust(&mut command);
    RunningExec {
        child: command.spawn().expect("start tether exec"),
        started: Instant::now(),
        stdout_path,
        stderr_path,
    }
}

/// `tether ARGS --state-dir STATE`, tagged, with `XDG_RUNTIME_DIR=runtime`, to its end.
fn tether(env: &TestEnv, runtime: &Path, args: &[&str]) -> Output {
    let mut command = Command::new(BIN);
    command
        .args(args)
        .arg("--state-dir")
        .arg(env.state_dir())
        .env("XDG_RUNTIME_DIR", runtime);
    common::run_to_end(env, command, &format!("tether {args:?}"))
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `command.json` of a running command, once the broker has written it.
fn command_file(env: &TestEnv, dir: &Path) -> CommandFile {
    let path = dir.join("command.json");
    wait_until(env, "command.json", || path.exists());
    serde_json::from_slice(&fs::read(&path).expect("read command.json")).expect("parse")
}

fn socket_of(env: &TestEnv, dir: &Path) -> PathBuf {
    command_file(env, dir)
        .control_socket
        .expect("the broker recorded a control socket")
}

fn mode(path: &Path) -> u32 {
    fs::symlink_metadata(path).expect("stat").mode() & 0o7777
}

/// Reads one JSON event line from a raw client connection.
fn read_event(reader: &mut BufReader<UnixStream>) -> Event {
    let mut line = String::new();
    reader.read_line(&mut line).expect("read from the socket");
    serde_json::from_str(&line).unwrap_or_else(|e| panic!("not an event ({e}): {line:?}"))
}

fn connect(socket: &Path) -> UnixStream {
    let stream = UnixStream::connect(socket).expect("connect to the control socket");
    stream
        .set_read_timeout(Some(DEADLINE))
        .expect("set a read timeout");
    stream
}

/// A command whose whole tree ignores SIGTERM: a `setsid` grandchild, a double-forked
/// daemon and the command itself, each printing `LABEL PID`.
fn escapees_script(markers: &Path) -> String {
    let m = markers.display();
    format!(
        r#"trap '' TERM
(setsid sh -c 'echo "setsid $$"; touch {m}/a; exec sleep 1000' &)
(sh -c 'echo "daemon $$"; touch {m}/b; exec sleep 1000' &)
while [ ! -e {m}/a ] || [ ! -e {m}/b ]; do sleep 0.02; done
echo main ready
while :; do sleep 1; done"#
    )
}

#[test]
fn stop_of_an_escapee_tree_leaves_nothing_and_exec_says_the_operator_stopped_it() {
    let env = TestEnv::new("control_stop");
    let runtime = runtime_dir(&env);
    let markers = env.path("markers");
    fs::create_dir(&markers).expect("mkdir");
    let running = spawn_exec_with(
        &env,
        &runtime,
        &["--name", "escapees", "--grace", "500ms"],
        &["sh", "-c", &escapees_script(&markers)],
        // Whatever the caller's umask, the socket is 0600 and its directory 0700.
        |command| unsafe {
            command.pre_exec(|| {
                libc::umask(0);
                Ok(())
            });
        },
    );
    let dir = env.wait_command_dir();
    wait_for_text(&env, &dir.join("stdout.log"), "main ready");
    let socket = socket_of(&env, &dir);
    assert!(
        socket.starts_with(common::socket_dir_in(&runtime)),
        "{socket:?}"
    );
    assert_eq!(mode(&socket), 0o600);
    assert_eq!(mode(&common::socket_dir_in(&runtime)), 0o700);
    let events = events_now(&dir);
    let started = events.iter().find_map(|e| match &e.kind {
        EventKind::BrokerStarted { control_socket, .. } => control_socket.clone(),
        _ => None,
    });
    assert_eq!(started.as_deref(), Some(socket.as_path()));

    let target = format!("{}/escapees", session_of(&dir));
    let stop = Command::new(BIN)
        .args(["stop", &target, "--state-dir"])
        .arg(env.state_dir())
        .env("XDG_RUNTIME_DIR", &runtime)
        .env(TAG_VAR, &env.tag)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start tether stop");
    let stop_pid = stop.id() as i32;
    let stopped = stop.wait_with_output().expect("tether stop");
    let said = text(&stopped.stdout);
    assert_eq!(stopped.status.code(), Some(0), "{stopped:?}");
    assert!(
        said.contains(&format!("{target}: stopped: SIGTERM, SIGKILL after")),
        "{said}"
    );
    assert!(said.contains("nothing is left"), "{said}");
    // In the words every view uses for how it ended (`model::ending`), not a bare status.
    assert!(
        said.contains("; the command ended: stopped (SIGKILL);"),
        "{said}"
    );

    let run = running.wait(&env);
    let stderr = run.stderr_text();
    assert_eq!(run.code(), 137, "{stderr}");
    assert!(
        stderr.contains("tether: stopped by the operator: SIGTERM, SIGKILL after"),
        "{stderr}"
    );
    let record = load_complete(&dir);
    let output = read(&dir, "stdout.log");
    for label in ["setsid", "daemon"] {
        let pid = common::journal::labelled_pid(&output, label);
        assert!(is_gone(pid), "the {label} escapee ({pid}) survived");
    }
    let sent: Vec<_> = record
        .events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::SignalSent { origin, client, .. } => Some((*origin, client.clone())),
            _ => None,
        })
        .collect();
    assert!(!sent.is_empty());
    for (origin, client) in &sent {
        assert_eq!(*origin, Origin::Operator);
        let client = client.as_ref().expect("the stop's signals name the client");
        assert_eq!(
            (client.pid, client.uid),
            (stop_pid, rustix::process::geteuid().as_raw())
        );
        // Its program, as the broker read it from /proc, not as the client claimed.
        assert_eq!(client.program.as_deref(), Some("tether stop"));
    }
    // The timeline's words, in every view and export: who, and which pid.
    let report = tether(
        &env,
        &runtime,
        &["export", &session_of(&dir), "--format", "text"],
    );
    let report = text(&report.stdout);
    assert!(
        report.contains(&format!(
            "signal_sent SIGTERM by tether stop, pid {stop_pid} → "
        )),
        "{report}"
    );
    assert_eq!(
        record.result.and_then(|r| r.stopped_by),
        Some(Origin::Operator)
    );
    assert!(
        !socket.exists(),
        "the socket is removed when the broker exits"
    );
    env.finish();
}

#[test]
fn a_peer_of_another_uid_is_refused_and_the_refusal_journaled() {
    let env = TestEnv::new("control_peer");
    if !rustix::process::geteuid().is_root() {
        common::skip("connecting as another user needs root");
        return;
    }
    let runtime = runtime_dir(&env);
    let running = spawn_exec(
        &env,
        &runtime,
        &["--name", "victim"],
        &["sh", "-c", "echo ready; exec sleep 1000"],
    );
    let dir = env.wait_command_dir();
    wait_for_text(&env, &dir.join("stdout.log"), "ready");
    let socket = socket_of(&env, &dir);
    // `nobody` with CAP_DAC_OVERRIDE gets past the 0700 directory and the 0600 socket:
    // only the broker's check of its credentials stands in its way.
    // The broker may have refused and closed before the request is written: no SIGPIPE.
    let perl = r#"use IO::Socket::UNIX; $SIG{PIPE} = "IGNORE"; my $s = IO::Socket::UNIX->new(Peer => $ARGV[0]) or die "connect: $!";
print $s qq({"type":"stop"}\n); $s->flush; while (my $l = <$s>) { print $l }"#;
    let attack = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=+dac_override",
            "--ambient-caps=+dac_override",
            "--",
            "perl",
            "-e",
            perl,
        ])
        .arg(&socket)
        .env(TAG_VAR, &env.tag)
        .output();
    let attack = match attack {
        Ok(output) if !text(&output.stderr).contains("connect:") => output,
        other => {
            signal(running.pid(), Signal::SIGTERM);
            running.wait(&env);
            common::skip(format!("cannot connect as nobody here: {other:?}"));
            return;
        }
    };
    let answer = text(&attack.stdout);
    assert!(answer.contains("\"kind\":\"control_error\""), "{attack:?}");
    assert!(answer.contains("uid 65534 is not the broker's"), "{answer}");
    let refused = events_now(&dir).into_iter().find_map(|e| match e.kind {
        EventKind::ControlRefused { uid, .. } => Some(uid),
        _ => None,
    });
    assert_eq!(refused, Some(65534));
    assert!(
        !events_now(&dir)
            .iter()
            .any(|e| matches!(e.kind, EventKind::SignalSent { .. })),
        "nothing was signalled"
    );
    // The command runs on, and the owner still controls it.
    assert!(!is_gone(spawned_pid(&events_now(&dir))));
    let stopped = tether(&env, &runtime, &["stop", &session_of(&dir)]);
    assert_eq!(stopped.status.code(), Some(0), "{stopped:?}");
    assert_eq!(running.wait(&env).code(), 143);
    env.finish();
}

#[test]
fn garbage_a_100_mb_line_and_a_stuck_subscriber_block_nothing() {
    let env = TestEnv::new("control_abuse");
    let runtime = runtime_dir(&env);
    let running = spawn_exec(
        &env,
        &runtime,
        &["--name", "ticker"],
        &[
            "sh",
            "-c",
            "i=0; while :; do i=$((i+1)); echo line $i; sleep 0.01; done",
        ],
    );
    let dir = env.wait_command_dir();
    wait_for_text(&env, &dir.join("stdout.log"), "line 3");
    let socket = socket_of(&env, &dir);

    // Subscribes and never reads; another connects and says nothing at all.
    let mut stuck = connect(&socket);
    stuck
        .write_all(b"{\"type\":\"subscribe\"}\n")
        .expect("subscribe");
    let _silent = connect(&socket);

    let garbage = connect(&socket);
    let mut reader = BufReader::new(garbage.try_clone().expect("clone"));
    (&garbage)
        .write_all(b"garbage\n{\"type\":\"launch\",\"v\":2}\n\0\xff\n")
        .expect("write garbage");
    // Keys go only to the command of the front end that launched it, on its pipe.
    (&garbage)
        .write_all(b"{\"type\":\"input\",\"data\":\"eQo=\"}\n")
        .expect("write input");
    for code in [
        "malformed",
        "launch_refused",
        "malformed",
        "wrong_transport",
    ] {
        match read_event(&mut reader).kind {
            EventKind::ControlError { code: got, message } => {
                assert_eq!(got, code, "{message}");
                assert!(!message.is_empty());
            }
            other => panic!("expected a control_error, got {other:?}"),
        }
    }

    // 100 MB without a newline, then one, then a ping: refused, then answered.
    let long = connect(&socket);
    let before = fs::metadata(dir.join("stdout.log")).expect("stat").len();
    let chunk = vec![b'x'; 1 << 20];
    let started = Instant::now();
    for _ in 0..100 {
        (&long).write_all(&chunk).expect("write the long line");
    }
    (&long)
        .write_all(b"\n{\"type\":\"ping\"}\n")
        .expect("end the long line");
    let mut reader = BufReader::new(long.try_clone().expect("clone"));
    match read_event(&mut reader).kind {
        EventKind::ControlError { code, message } => {
            assert_eq!(code, "line_too_long");
            assert!(message.contains("104857600 bytes"), "{message}");
        }
        other => panic!("expected line_too_long, got {other:?}"),
    }
    assert_eq!(read_event(&mut reader).kind, EventKind::Pong);
    let took = started.elapsed();
    // The command's output kept flowing meanwhile.
    let after = fs::metadata(dir.join("stdout.log")).expect("stat").len();
    assert!(
        after > before,
        "no output was journaled during the long line ({took:?})"
    );

    // Pings without end, answers never read: the client is dropped once it owes more than
    // the outbox holds, and its writes then fail.
    let greedy = connect(&socket);
    greedy
        .set_write_timeout(Some(DEADLINE))
        .expect("set a write timeout");
    let pings = b"{\"type\":\"ping\"}\n".repeat(4096);
    let dropped = (0..1000).any(|_| (&greedy).write_all(&pings).is_err());
    assert!(dropped, "a client that never reads was not dropped");

    let stopped = tether(&env, &runtime, &["stop", &session_of(&dir)]);
    assert_eq!(stopped.status.code(), Some(0), "{stopped:?}");
    let run = running.wait(&env);
    assert_eq!(run.code(), 143, "{}", run.stderr_text());
    // Not a byte lost: the copy and the journal hold the same consecutive lines.
    let record = load_complete(&dir);
    let output = read(&dir, "stdout.log");
    assert_eq!(run.stdout(), output);
    let lines: Vec<String> = text(&output).lines().map(str::to_string).collect();
    for (i, line) in lines.iter().enumerate() {
        assert_eq!(*line, format!("line {}", i + 1));
    }
    assert_eq!(exit_status(&record.events).signal, Some(15));
    drop(stuck);
    env.finish();
}

#[test]
fn ps_kill_signal_and_unknown_targets() {
    let env = TestEnv::new("control_ps");
    let runtime = runtime_dir(&env);
    // A long-lived child for `--pid` (a background job ignores INT), beside the short
    // sleeps of the loop, which come and go too fast to be named.
    let child_pid = env.path("child.pid");
    let script = format!(
        "trap 'echo got INT' INT; sleep 1000 & echo $! > {}; echo ready; while :; do sleep 0.05; done",
        child_pid.display()
    );
    let running = spawn_exec(
        &env,
        &runtime,
        &["--name", "looper"],
        &["sh", "-c", &script],
    );
    let dir = env.wait_command_dir();
    wait_for_text(&env, &dir.join("stdout.log"), "ready");
    let session = session_of(&dir);
    let events = events_now(&dir);

    let listed = tether(&env, &runtime, &["ps", "--json"]);
    assert_eq!(listed.status.code(), Some(0), "{listed:?}");
    let rows: serde_json::Value = serde_json::from_slice(&listed.stdout).expect("JSON");
    let rows = rows.as_array().expect("an array");
    assert_eq!(rows.len(), 1, "{rows:?}");
    let row = &rows[0];
    assert_eq!(row["session"], session.as_str());
    assert_eq!(row["name"], "looper");
    assert_eq!(row["pid"], spawned_pid(&events));
    assert_eq!(row["broker_pid"], broker_pid(&events));
    assert_eq!(row["state"], "running");
    assert_eq!(row["controllable"], true);
    assert!(row["processes"].as_u64() >= Some(1), "{row}");
    assert!(row["rss_bytes"].as_u64() > Some(0), "{row}");
    let table = tether(&env, &runtime, &["ps", &session]);
    assert!(text(&table.stdout).contains("looper"), "{table:?}");
    // The ID column: `SESSION/NN`, which `tether stop` takes.
    assert!(
        text(&table.stdout).contains(&format!("{session}/01 ")),
        "{table:?}"
    );
    // A session that is not there is a mistake, said as `open` and `sessions` say it; one
    // whose commands all ended lists nothing, as before.
    for args in [
        &["ps", "no-such-session"][..],
        &["ps", "--json", "no-such-session"],
    ] {
        let other = tether(&env, &runtime, args);
        assert_eq!(other.status.code(), Some(2), "{other:?}");
        assert!(
            text(&other.stderr).starts_with("tether: no session `no-such-session` in "),
            "{other:?}"
        );
        assert_eq!(text(&other.stdout), "", "{other:?}");
    }
    let ended = env.exec(&["--session", "ended", "-n", "done"], &["true"]);
    assert_eq!(ended.code(), 0, "{}", ended.stderr_text());
    let quiet = tether(&env, &runtime, &["ps", "ended"]);
    assert_eq!(quiet.status.code(), Some(0), "{quiet:?}");
    assert!(
        text(&quiet.stderr).contains("no live brokered commands"),
        "{quiet:?}"
    );
    let quiet = tether(&env, &runtime, &["ps", "--json", "ended"]);
    assert_eq!(text(&quiet.stdout).trim(), "[]", "{quiet:?}");

    // A name no command of the session ever had is said to be unknown, with the names it
    // has, whether something of the session still runs or all of it ended; a name whose
    // command ended is said not to match a live one, the live ones listed.
    for (target, said_exactly) in [
        (
            format!("{session}/nope"),
            format!("no command of session `{session}` is named `nope`; its commands: looper"),
        ),
        (
            "ended/nope".to_string(),
            "no command of session `ended` is named `nope`; its commands: done".to_string(),
        ),
    ] {
        let missed = tether(&env, &runtime, &["kill", &target]);
        assert_eq!(missed.status.code(), Some(1), "{missed:?}");
        assert_eq!(text(&missed.stderr), format!("tether: {said_exactly}\n"));
    }
    // `looper` alone reads as a session that is not there: said, and the live ones listed.
    for (target, said) in [
        (
            "ended/done",
            "no live command matches `ended/done`; live commands:",
        ),
        (
            "looper",
            "no live command matches `looper`: there is no session `looper`; `tether sessions` \
             lists them; live commands:",
        ),
    ] {
        let missed = tether(&env, &runtime, &["stop", target]);
        let stderr = text(&missed.stderr);
        assert_eq!(missed.status.code(), Some(1), "{missed:?}");
        assert!(stderr.starts_with(&format!("tether: {said}")), "{stderr}");
        assert!(
            stderr.contains(&format!("{session}/looper")),
            "lists the live ones: {stderr}"
        );
    }
    // A prefix of the session's id, as `open` takes it: the whole id is named.
    let prefix = &session[..session.len() - 1];
    let missed = tether(&env, &runtime, &["stop", prefix]);
    assert_eq!(missed.status.code(), Some(1), "{missed:?}");
    assert!(
        text(&missed.stderr).contains(&format!("; `{session}` begins so: give its whole id")),
        "{missed:?}"
    );
    let bad = tether(&env, &runtime, &["signal", "NOPE", &session]);
    assert_eq!(bad.status.code(), Some(2), "{bad:?}");

    let interrupted = tether(
        &env,
        &runtime,
        &["signal", "INT", &format!("{session}/looper")],
    );
    assert_eq!(interrupted.status.code(), Some(0), "{interrupted:?}");
    assert!(
        text(&interrupted.stdout).contains("SIGINT sent to"),
        "{interrupted:?}"
    );
    wait_for_text(&env, &dir.join("stdout.log"), "got INT");

    // --pid: any process of the tree names the command.
    let sleeper: i32 = fs::read_to_string(&child_pid)
        .expect("the child's pid, written before `ready`")
        .trim()
        .parse()
        .expect("a pid");
    let killed = tether(&env, &runtime, &["kill", "--pid", &sleeper.to_string()]);
    assert_eq!(killed.status.code(), Some(0), "{killed:?}");
    assert!(
        text(&killed.stdout).contains("SIGKILL sent to"),
        "{killed:?}"
    );
    let run = running.wait(&env);
    assert_eq!(run.code(), 137, "{}", run.stderr_text());
    assert!(
        run.stderr_text()
            .contains("tether: stopped by the operator: SIGINT, SIGKILL after"),
        "{}",
        run.stderr_text()
    );
    let gone = tether(&env, &runtime, &["kill", &session]);
    assert_eq!(gone.status.code(), Some(1), "{gone:?}");
    env.finish();
}

/// A real-time signal goes the whole way: `tether signal RTMIN+1` is parsed, asked of the
/// broker, sent through its pidfds, trapped by the command, and journaled by its name.
#[test]
fn a_real_time_signal_reaches_the_command_and_is_journaled_by_name() {
    let env = TestEnv::new("control_rt_signal");
    let runtime = runtime_dir(&env);
    // bash, whose `trap` knows the real-time signals by name (dash's does not).
    let running = spawn_exec(
        &env,
        &runtime,
        &["--name", "rt"],
        &[
            "bash",
            "-c",
            "trap 'echo got RTMIN+1' RTMIN+1; echo ready; while :; do sleep 0.05; done",
        ],
    );
    let dir = env.wait_command_dir();
    wait_for_text(&env, &dir.join("stdout.log"), "ready");
    let session = session_of(&dir);

    let refused = tether(&env, &runtime, &["signal", "RTMIN+99", &session]);
    assert_eq!(refused.status.code(), Some(2), "{refused:?}");
    let sent = tether(&env, &runtime, &["signal", "rtmin+1", &session]);
    assert_eq!(sent.status.code(), Some(0), "{sent:?}");
    assert!(
        text(&sent.stdout).contains("SIGRTMIN+1 sent to"),
        "{sent:?}"
    );
    wait_for_text(&env, &dir.join("stdout.log"), "got RTMIN+1");

    common::wait_until(&env, "the signal_sent event", || {
        events_now(&dir)
            .iter()
            .any(|e| matches!(e.kind, EventKind::SignalSent { .. }))
    });
    let journal = text(&read(&dir, "events.jsonl"));
    assert!(journal.contains(r#""signal":"RTMIN+1""#), "{journal}");
    let signalled: Vec<_> = events_now(&dir)
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::SignalSent {
                signal,
                origin,
                targets,
                ..
            } => Some((signal.to_string(), origin, targets.is_empty())),
            _ => None,
        })
        .collect();
    assert_eq!(
        signalled,
        [("RTMIN+1".to_string(), Origin::Operator, false)],
        "{journal}"
    );

    let killed = tether(&env, &runtime, &["kill", &session]);
    assert_eq!(killed.status.code(), Some(0), "{killed:?}");
    let run = running.wait(&env);
    assert_eq!(run.code(), 137, "{}", run.stderr_text());
    env.finish();
}

/// The command directory called `name`, once it exists.
fn wait_named_dir(env: &TestEnv, name: &str) -> PathBuf {
    let find = || {
        env.command_dirs()
            .into_iter()
            .find(|d| d.file_name().is_some_and(|n| n == name))
    };
    wait_until(env, name, || find().is_some());
    find().expect("found")
}

#[test]
fn the_socket_goes_with_its_broker_and_a_stale_one_is_cleaned_up() {
    let env = TestEnv::new("control_stale");
    let runtime = runtime_dir(&env);
    let run = spawn_exec(&env, &runtime, &[], &["true"]).wait(&env);
    assert_eq!(run.code(), 0, "{}", run.stderr_text());
    let sockets = || -> Vec<PathBuf> {
        fs::read_dir(common::socket_dir_in(&runtime))
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default()
    };
    assert!(sockets().is_empty(), "{:?}", sockets());

    // A broker SIGKILLed cannot remove its socket; the next front end that looks does.
    let running = spawn_exec(&env, &runtime, &["--name", "doomed"], &["sleep", "1000"]);
    let dir = wait_named_dir(&env, "01-doomed");
    let socket = socket_of(&env, &dir);
    wait_until(&env, "the command to start", || {
        events_now(&dir)
            .iter()
            .any(|e| matches!(e.kind, EventKind::Spawned { .. }))
    });
    signal(broker_pid(&events_now(&dir)), Signal::SIGKILL);
    let run = running.wait(&env);
    assert_eq!(run.code(), 125, "{}", run.stderr_text());
    assert!(socket.exists(), "a killed broker leaves its socket");
    let listed = tether(&env, &runtime, &["ps", "--json"]);
    assert_eq!(text(&listed.stdout).trim(), "[]", "{listed:?}");
    assert!(!socket.exists(), "the stale socket was removed");
    env.finish();
}

#[test]
fn without_a_socket_the_command_runs_and_stop_goes_through_the_brokers_pid() {
    let env = TestEnv::new("control_fallback");
    // Two ways a socket cannot be made: a runtime dir others can read, a path too long.
    let open = env.path("open");
    fs::create_dir_all(common::socket_dir_in(&open)).expect("mkdir");
    fs::set_permissions(
        common::socket_dir_in(&open),
        fs::Permissions::from_mode(0o755),
    )
    .expect("chmod");
    let long = env.socketless_runtime_dir();
    for (name, runtime, code, says) in [
        ("open", &open, "unsafe_mode", "chmod 700"),
        ("long", &long, "path_too_long", "107-byte limit"),
    ] {
        let running = spawn_exec(
            &env,
            runtime,
            &["--name", name],
            &["sh", "-c", "echo ready; exec sleep 1000"],
        );
        let dir = wait_named_dir(&env, &format!("01-{name}"));
        wait_for_text(&env, &dir.join("stdout.log"), "ready");
        assert_eq!(command_file(&env, &dir).control_socket, None);
        // The output file can run ahead of the event log, which is flushed per batch.
        common::wait_until(&env, "the control_unavailable event", || {
            events_now(&dir)
                .iter()
                .any(|e| matches!(e.kind, EventKind::ControlUnavailable { .. }))
        });
        let unavailable = events_now(&dir).into_iter().find_map(|e| match e.kind {
            EventKind::ControlUnavailable { code, message } => Some((code, message)),
            _ => None,
        });
        let (got, message) = unavailable.expect("a control_unavailable event");
        assert_eq!(got, code, "{message}");
        assert!(message.contains(says), "{message}");
        assert!(
            !running.stderr_text_now().contains("control"),
            "exec stays quiet"
        );

        let listed = tether(&env, runtime, &["ps", "--json"]);
        let rows: serde_json::Value = serde_json::from_slice(&listed.stdout).expect("JSON");
        assert_eq!(rows[0]["controllable"], false, "{rows}");
        // A signal cannot be asked of the broker without a socket: tether sends it itself.
        let signalled = tether(&env, runtime, &["signal", "CONT", &session_of(&dir)]);
        assert_eq!(signalled.status.code(), Some(0), "{signalled:?}");
        assert!(
            text(&signalled.stdout).contains(
                "its broker has no control socket, so by its broker's pid: tether sent SIGCONT itself to process group"
            ),
            "{signalled:?}"
        );

        let stopped = tether(&env, runtime, &["stop", &session_of(&dir)]);
        assert_eq!(stopped.status.code(), Some(0), "{stopped:?}");
        assert!(
            text(&stopped.stdout).contains("stopped through its broker's pid"),
            "{stopped:?}"
        );
        assert!(
            text(&stopped.stdout).contains("; the command ended: stopped (SIGTERM);"),
            "{stopped:?}"
        );
        let run = running.wait(&env);
        assert_eq!(run.code(), 143, "{}", run.stderr_text());
        let record = load_complete(&dir);
        assert_eq!(
            record.result.and_then(|r| r.stopped_by),
            Some(Origin::Shutdown)
        );
    }
    env.finish();
}

/// A broker in a PID namespace of its own journals the pid it has there, and, as in Codex's
/// workspace-write sandbox (a read-only `/tmp`), no control socket. Outside, that pid names
/// another process or none: `tether ps` listed nothing, the watch read the command `lost`
/// and `s` said it was not running. It is found by its start time among the processes here,
/// listed running, and stopped through its broker's pid.
#[test]
fn a_broker_in_a_pid_namespace_of_its_own_is_listed_and_stopped_from_outside() {
    let env = TestEnv::new("control_pidns");
    if !nix::unistd::geteuid().is_root() {
        return common::skip("a PID namespace of its own needs root (`unshare --pid`)");
    }
    // No socket: its path would be too long.
    let long = env.socketless_runtime_dir();
    let exec = env.exec_command(
        &["--name", "sandboxed"],
        &["sh", "-c", "echo ready; exec sleep 1000"],
    );
    // `sh` is the namespace's first process, as a sandbox's own init is, and waits for it.
    let mut command = Command::new("unshare");
    command
        .args([
            "--pid",
            "--fork",
            "--mount-proc",
            "--",
            "sh",
            "-c",
            "\"$@\"; :",
            "sh",
        ])
        .arg(exec.get_program())
        .args(exec.get_args())
        .env(TAG_VAR, &env.tag)
        .env("XDG_RUNTIME_DIR", &long);
    let running = env.spawn_captured(command);
    let dir = wait_named_dir(&env, "01-sandboxed");
    wait_for_text(&env, &dir.join("stdout.log"), "ready");
    let file = command_file(&env, &dir);
    let inner = file.broker.expect("a broker").pid;
    assert!(file.broker_pid_ns.is_some(), "its namespace is journaled");
    assert_eq!(file.control_socket, None);

    let listed = tether(&env, &long, &["ps", "--json"]);
    let rows: serde_json::Value = serde_json::from_slice(&listed.stdout).expect("JSON");
    let host = rows[0]["broker_pid"]
        .as_i64()
        .expect("listed, with its pid here") as i32;
    assert_ne!(host, inner, "{rows}");
    let nspid = |pid: i64| {
        let status = fs::read_to_string(format!("/proc/{pid}/status")).expect("its status");
        let line = status
            .lines()
            .find(|l| l.starts_with("NSpid:"))
            .map(str::to_owned);
        line.expect("NSpid")
    };
    assert!(
        nspid(host.into()).ends_with(&format!("\t{inner}")),
        "{rows}"
    );
    // And its command's pid, as the one here.
    let spawned = spawned_pid(&events_now(&dir));
    let pid = rows[0]["pid"].as_i64().expect("its command's pid");
    assert!(nspid(pid).ends_with(&format!("\t{spawned}")), "{rows}");
    // Its pause is read by that pid.
    let pid = pid as i32;
    signal(pid, Signal::SIGSTOP);
    wait_until(&env, "the command stopped", || {
        tether::procfs::read_stat(pid).is_some_and(|s| s.state == b'T')
    });
    let listed = tether(&env, &long, &["ps", "--json"]);
    let rows: serde_json::Value = serde_json::from_slice(&listed.stdout).expect("JSON");
    assert_eq!(rows[0]["state"], "paused", "{rows}");
    signal(pid, Signal::SIGCONT);
    // What the watch and `tether open` replay: running, not lost.
    let record = tether::journal::CommandRecord::load(&dir);
    let replayed = tether::model::replay::command_so_far(&record);
    assert_eq!(replayed.broker_pid, Some(host));
    assert!(tether::model::replay::broker_alive(&replayed));

    let stopped = tether(&env, &long, &["stop", &session_of(&dir)]);
    assert_eq!(stopped.status.code(), Some(0), "{stopped:?}");
    assert!(
        text(&stopped.stdout).contains("stopped through its broker's pid"),
        "{stopped:?}"
    );
    running.wait(&env);
    let record = load_complete(&dir);
    assert_eq!(
        record.result.and_then(|r| r.stopped_by),
        Some(Origin::Shutdown)
    );
    env.finish();
}

trait StderrNow {
    fn stderr_text_now(&self) -> String;
}

impl StderrNow for RunningExec {
    fn stderr_text_now(&self) -> String {
        let mut text = String::new();
        let _ = fs::File::open(&self.stderr_path).and_then(|mut f| f.read_to_string(&mut text));
        text
    }
}

/// What `tether watch` builds on: the library finds the command, a subscription continues
/// the journal exactly where the acknowledgement says, and the events are the journal's.
#[test]
fn a_subscription_continues_the_journal_line_for_line() {
    let env = TestEnv::new("control_subscribe");
    let runtime = runtime_dir(&env);
    let running = spawn_exec(
        &env,
        &runtime,
        &["--name", "ticker"],
        &[
            "sh",
            "-c",
            "i=0; while :; do i=$((i+1)); echo line $i; sleep 0.02; done",
        ],
    );
    let dir = env.wait_command_dir();
    wait_for_text(&env, &dir.join("stdout.log"), "line 2");
    let live = tether::control::live_commands(&env.state_dir(), Some(&session_of(&dir)))
        .expect("live commands");
    assert_eq!(live.len(), 1, "{live:?}");
    assert!(live[0].has_socket() && live[0].is_alive());

    let runtime_loop = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let (offset, received) = runtime_loop.block_on(async {
        use tether::protocol::{Scope, Request};
        use tether::supervisor::{Answer, BrokerConversation};
        let mut broker = BrokerConversation::attach(&live[0])
            .await
            .expect("attach");
        assert!(matches!(
            broker.answer(&Request::Ping).await,
            Answer::Done(_)
        ));
        assert!(broker.subscribe());
        let deadline = tokio::time::Instant::now() + DEADLINE;
        let mut next = async || {
            tokio::time::timeout_at(deadline, broker.next_line())
                .await
                .expect("lines within the deadline")
                .map(|line| line.event.expect("an event"))
        };
        // The subscription's answer comes first: no event is sent before it.
        let offset = match next().await.expect("not closed").kind {
            EventKind::ControlAck {
                journal_offset: Some(offset),
                ..
            } => offset,
            other => panic!("the subscription's answer first, not {other:?}"),
        };
        let mut received = Vec::new();
        while received.len() < 5 {
            received.push(next().await.expect("not closed"));
        }
        let winch = Request::Signal {
            signal: "WINCH".parse().expect("a signal"),
            scope: Scope::Group,
            pid: None,
            origin: None,
        };
        let targets = match broker.answer(&winch).await {
            Answer::Done(ack) => ack.targets,
            other => panic!("a signal answered: {other:?}"),
        };
        assert!(!targets.is_empty());
        let outside = Request::Signal {
            signal: tether::protocol::ProcessSignal::TERM,
            scope: Scope::Pid,
            pid: Some(1),
            origin: None,
        };
        let refused = broker.answer(&outside).await;
        assert!(
            matches!(&refused, Answer::Refused { message, .. } if message.contains("not part of this command's tree")),
            "{refused:?}"
        );
        let stop = broker.answer(&Request::Stop { origin: None }).await;
        assert!(
            matches!(&stop, Answer::Done(ack) if ack.message.is_none()),
            "{stop:?}"
        );
        // Answers are the asker's alone, never journaled; each was matched to its request.
        while let Some(event) = tokio::time::timeout_at(deadline, broker.next_line())
            .await
            .expect("close within the deadline")
        {
            received.push(event.event.expect("an event"));
        }
        (offset, received)
    });
    let run = running.wait(&env);
    assert_eq!(run.code(), 143, "{}", run.stderr_text());
    let journal = read(&dir, "events.jsonl");
    let after: Vec<Event> = common::journal::parse_lines(&journal[offset as usize..]);
    assert!(
        matches!(
            after.first().map(|e| &e.kind),
            Some(EventKind::Output { .. }) | Some(EventKind::Tree { .. })
        ),
        "the offset falls on a line boundary: {:?}",
        after.first()
    );
    assert_eq!(
        received, after,
        "the subscription is the rest of the journal"
    );
    assert!(matches!(
        received.last().map(|e| &e.kind),
        Some(EventKind::Close { .. })
    ));
    env.finish();
}

/// `sleep 1000` under `tether exec --name sleeper`, once it runs: the exec and its journal.
fn sleeper(env: &TestEnv, runtime: &Path) -> (RunningExec, PathBuf) {
    let running = spawn_exec(
        env,
        runtime,
        &["--name", "sleeper"],
        &["sh", "-c", "echo ready; exec sleep 1000"],
    );
    let dir = env.wait_command_dir();
    wait_for_text(env, &dir.join("stdout.log"), "ready");
    (running, dir)
}

/// A broker that stops answering its socket (stopped here, with its exec, which would give
/// it up) gets a second to acknowledge a signal, as a broker on its pipe does; then `tether
/// signal` sends the signal itself, the broker's pid proved first.
#[test]
fn a_broker_that_does_not_answer_is_signalled_around() {
    let env = TestEnv::new("control_unanswered");
    let runtime = runtime_dir(&env);
    let (running, dir) = sleeper(&env, &runtime);
    let broker = broker_pid(&events_now(&dir));
    let exec = running.child.id() as i32;
    signal(exec, Signal::SIGSTOP);
    signal(broker, Signal::SIGSTOP);
    let asked = Instant::now();
    let signalled = tether(&env, &runtime, &["signal", "TERM", &session_of(&dir)]);
    let waited = asked.elapsed();
    signal(broker, Signal::SIGCONT);
    signal(exec, Signal::SIGCONT);
    assert_eq!(signalled.status.code(), Some(0), "{signalled:?}");
    assert!(
        text(&signalled.stdout).contains(
            "the broker did not answer, so by its broker's pid: tether sent SIGTERM itself to process group"
        ),
        "{signalled:?}"
    );
    assert!(
        waited >= tether::supervisor::intervals::ACK_TIMEOUT,
        "{waited:?}"
    );
    let run = running.wait(&env);
    assert_eq!(run.code(), 143, "{}", run.stderr_text());
    env.finish();
}

/// Two live commands of one session share a name: `stop SESSION/NAME` is refused with the id
/// of each (as git refuses an ambiguous ref), and each id stops one.
#[test]
fn a_name_two_commands_share_is_refused_and_each_id_stops_one() {
    let env = TestEnv::new("ambiguous_name");
    let runtime = runtime_dir(&env);
    let runs: Vec<RunningExec> = (0..2)
        .map(|_| {
            spawn_exec(
                &env,
                &runtime,
                &["--session", "twins"],
                &["sh", "-c", "echo ready; exec sleep 300"],
            )
        })
        .collect();
    for run in &runs {
        wait_for_text(&env, &run.stdout_path, "ready");
    }
    let refused = tether(&env, &runtime, &["stop", "twins/echo"]);
    let said = text(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{refused:?}");
    assert!(
        said.contains("`twins/echo` names 2 live commands"),
        "{said}"
    );
    assert!(
        said.contains("twins/01") && said.contains("twins/02"),
        "{said}"
    );
    for id in ["twins/01", "twins/2"] {
        let stopped = tether(&env, &runtime, &["stop", id]);
        assert_eq!(stopped.status.code(), Some(0), "{id}: {stopped:?}");
    }
    for run in runs {
        run.wait(&env);
    }
    env.finish();
}

/// A command that waits for input nobody gives reads so in `tether ps` too, as in the
/// watch (a trial's `ps` said `running` while both watches flagged the prompt).
#[test]
fn ps_says_what_needs_the_operator() {
    let env = TestEnv::new("control_ps_needs");
    let runtime = runtime_dir(&env);
    fs::create_dir_all(env.path("config/tether")).expect("mkdir");
    fs::write(
        env.path("config/tether/config.toml"),
        "[attention]\ninput_after = \"100ms\"\n",
    )
    .expect("config");
    // Its stdin a pipe the test holds open and never writes to.
    let running = spawn_exec_with(
        &env,
        &runtime,
        &["--name", "prompt"],
        &["sh", "-c", "printf 'Continue? '; read answer"],
        |command| {
            command
                .stdin(Stdio::piped())
                .env("XDG_CONFIG_HOME", env.path("config"));
        },
    );
    let dir = wait_named_dir(&env, "01-prompt");
    let mut rows = serde_json::Value::Null;
    wait_until(&env, "ps to say it needs input", || {
        let listed = tether(&env, &runtime, &["ps", "--json"]);
        rows = serde_json::from_slice(&listed.stdout).expect("JSON");
        rows[0]["state"] == "running, needs input"
    });
    let table = tether(&env, &runtime, &["ps"]);
    assert!(
        text(&table.stdout).contains("running, needs input"),
        "{table:?}"
    );
    let stopped = tether(&env, &runtime, &["stop", &session_of(&dir)]);
    assert_eq!(stopped.status.code(), Some(0), "{stopped:?}");
    running.wait(&env);
    env.finish();
}

/// A pause is no journal event: `tether ps` reads it from `/proc`, as the watch does. A
/// command whose process is stopped by SIGSTOP reads `paused`, and `running` again on CONT.
#[test]
fn ps_says_a_command_stopped_by_a_signal_is_paused() {
    let env = TestEnv::new("control_ps_paused");
    let runtime = runtime_dir(&env);
    let (running, dir) = sleeper(&env, &runtime);
    let pid = spawned_pid(&events_now(&dir));
    let state = || {
        let listed = tether(&env, &runtime, &["ps", "--json"]);
        assert_eq!(listed.status.code(), Some(0), "{listed:?}");
        let rows: serde_json::Value = serde_json::from_slice(&listed.stdout).expect("JSON");
        rows[0]["state"].as_str().unwrap_or_default().to_string()
    };
    assert_eq!(state(), "running");
    signal(pid, Signal::SIGSTOP);
    wait_until(&env, "the command stopped", || {
        tether::procfs::read_stat(pid).is_some_and(|s| s.state == b'T')
    });
    assert_eq!(state(), "paused");
    let table = tether(&env, &runtime, &["ps"]);
    assert!(text(&table.stdout).contains(" paused "), "{table:?}");
    signal(pid, Signal::SIGCONT);
    wait_until(&env, "the command running again", || {
        tether::procfs::read_stat(pid).is_some_and(|s| s.state != b'T')
    });
    assert_eq!(state(), "running");
    let session = session_of(&dir);
    let stopped = tether(&env, &runtime, &["stop", &format!("{session}/01")]);
    assert_eq!(stopped.status.code(), Some(0), "{stopped:?}");
    running.wait(&env);
    env.finish();
}
