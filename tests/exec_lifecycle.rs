//! `tether exec` end to end: how a command's end becomes tether's exit code and the journal.

use crate::common;

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use common::TestEnv;
use common::journal::{
    broker_failures, exit_status, kinds, load_complete, orphans_reaped, read, signals_sent,
};
use tether::protocol::{EventKind, Origin, Stage};

#[test]
fn exit_code_is_the_commands() {
    let env = TestEnv::new("exit_code");
    let run = env.exec(&["--json"], &["sh", "-c", "exit 3"]);
    assert_eq!(run.code(), 3, "stderr: {}", run.stderr_text());
    let dir = env.command_dir();
    let record = load_complete(&dir);
    assert_eq!(exit_status(&record.events).code, Some(3));
    let result = record.result.expect("result.json");
    assert_eq!(result.exit.and_then(|s| s.code), Some(3));
    assert!(result.failure.is_none());
    // `--json` prints the very lines the journal holds.
    assert_eq!(
        String::from_utf8_lossy(&run.stdout()),
        String::from_utf8_lossy(&read(&dir, "events.jsonl"))
    );
    assert_eq!(
        kinds(&run.json_events()).last(),
        Some(&"close"),
        "the last event is close"
    );
    env.finish();
}

#[test]
fn death_by_signal_is_128_plus_the_signal() {
    for (script, signal) in [("kill -9 $$", 9), ("kill -TERM $$", 15)] {
        let env = TestEnv::new("signal_exit");
        let run = env.exec(&[], &["sh", "-c", script]);
        assert_eq!(
            run.code(),
            128 + signal,
            "`{script}`: {}",
            run.stderr_text()
        );
        let record = load_complete(&env.command_dir());
        let status = exit_status(&record.events);
        assert_eq!((status.code, status.signal), (None, Some(signal)));
        let result = record.result.expect("result.json");
        assert_eq!(result.exit.and_then(|s| s.signal), Some(signal));
        env.finish();
    }
}

#[test]
fn command_not_found_is_127_and_journaled() {
    let env = TestEnv::new("not_found");
    let missing = "tether-e2e-no-such-command";
    let run = env.exec(&[], &[missing, "arg"]);
    assert_eq!(run.code(), 127, "stderr: {}", run.stderr_text());
    let stderr = run.stderr_text();
    assert!(
        stderr.contains(&format!("`{missing}`")) && stderr.contains("no such file"),
        "stderr should name the missing command: {stderr:?}"
    );
    assert!(run.stdout().is_empty());
    assert_spawn_error(&env, "enoent");
    env.finish();
}

#[test]
fn permission_denied_is_126_and_journaled() {
    let env = TestEnv::new("eacces");
    let script = env.path("not-executable.sh");
    std::fs::write(&script, "#!/bin/sh\necho should not run\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o644)).unwrap();
    let script = script.to_str().unwrap();
    let run = env.exec(&[], &[script]);
    assert_eq!(run.code(), 126, "stderr: {}", run.stderr_text());
    let stderr = run.stderr_text();
    assert!(
        stderr.contains(script) && stderr.contains("permission denied"),
        "stderr should name the file and the reason: {stderr:?}"
    );
    assert!(run.stdout().is_empty());
    assert_spawn_error(&env, "eacces");
    env.finish();
}

/// exec says "permission denied" of a directory: tether says what it is.
#[test]
fn a_directory_is_126_and_called_one() {
    let env = TestEnv::new("eisdir");
    let dir = env.path("a-directory");
    {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new().mode(0o700).create(&dir).unwrap();
    }
    let dir = dir.to_str().unwrap();
    let run = env.exec(&[], &[dir]);
    assert_eq!(run.code(), 126, "stderr: {}", run.stderr_text());
    let stderr = run.stderr_text();
    assert!(
        stderr.contains(&format!("cannot run `{dir}`: it is a directory")),
        "{stderr:?}"
    );
    assert!(!stderr.contains("permission denied"), "{stderr:?}");
    assert_spawn_error(&env, "eisdir");
    env.finish();
}

fn assert_spawn_error(env: &TestEnv, expected: &str) {
    let record = load_complete(&env.command_dir());
    let codes: Vec<&str> = record
        .events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::SpawnError { code, .. } => Some(code.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(codes, [expected], "events: {:?}", kinds(&record.events));
    assert!(
        !kinds(&record.events).contains(&"spawned"),
        "nothing was spawned"
    );
    let result = record.result.expect("result.json");
    let failure = result.failure.expect("result.json names the failure");
    assert_eq!(
        (failure.stage, failure.code.as_str()),
        (Stage::Spawn, expected)
    );
    assert!(result.exit.is_none(), "no exit status without a process");
    assert_eq!(kinds(&record.events).last(), Some(&"close"));
}

#[test]
fn no_output_watchdog_stops_a_silent_command() {
    let env = TestEnv::new("watchdog");
    let run = env.exec(
        &["--json", "--no-output-timeout", "300ms", "--grace", "5s"],
        &["sh", "-c", "echo hi; sleep 100"],
    );
    assert_eq!(run.code(), 143, "stderr: {}", run.stderr_text());
    let dir = env.command_dir();
    let record = load_complete(&dir);
    let names = kinds(&record.events);
    let timeout_at = names.iter().position(|k| *k == "response_timeout");
    assert!(timeout_at.is_some(), "no response_timeout: {names:?}");
    let silent = record.events.iter().find_map(|e| match e.kind {
        EventKind::ResponseTimeout { silent_ms } => Some(silent_ms),
        _ => None,
    });
    assert!(
        silent >= Some(300),
        "silent_ms {silent:?} is under the timeout"
    );
    let sent = signals_sent(&record.events);
    assert!(
        sent.iter()
            .any(|s| s.signal == "TERM" && s.origin == Origin::Watchdog),
        "no TERM from the watchdog: {sent:?}"
    );
    assert_eq!(exit_status(&record.events).signal, Some(15));
    assert_eq!(read(&dir, "stdout.log"), b"hi\n");
    let result = record.result.expect("result.json");
    assert!(result.response_timeout);
    assert_eq!(result.stopped_by, Some(Origin::Watchdog));
    assert!(!result.hard_killed, "TERM was enough");
    env.finish();
}

/// Without `--json`, the caller is told that the watchdog stopped the command, as a budget's
/// stop and the operator's are: 143 alone does not say who.
#[test]
fn the_no_output_watchdog_says_it_stopped_the_command() {
    let env = TestEnv::new("watchdog_said");
    let run = env.exec(&["--no-output-timeout", "300ms"], &["sleep", "100"]);
    assert_eq!(run.code(), 143, "stderr: {}", run.stderr_text());
    let said = run.stderr_text();
    let lines: Vec<&str> = said
        .lines()
        .filter(|l| l.starts_with("tether: stopped by its no-output timeout: no output for "))
        .collect();
    assert_eq!(lines.len(), 1, "{said}");
    assert!(run.stdout().is_empty());
    env.finish();
}

#[test]
fn background_straggler_holding_the_pipe_is_stopped() {
    let env = TestEnv::new("straggler");
    let run = env.exec(
        &["--grace", "5s"],
        &["sh", "-c", "(sleep 100) & echo main done"],
    );
    assert_eq!(run.code(), 0, "stderr: {}", run.stderr_text());
    // Generous: the point is that tether does not wait for the 100 s sleep.
    assert!(
        run.elapsed < Duration::from_secs(20),
        "tether exec waited for the straggler ({:?})",
        run.elapsed
    );
    assert_eq!(run.stdout(), b"main done\n");
    let dir = env.command_dir();
    let record = load_complete(&dir);
    assert_eq!(read(&dir, "stdout.log"), b"main done\n");
    assert_eq!(exit_status(&record.events).code, Some(0));
    let sent = signals_sent(&record.events);
    assert!(
        sent.iter()
            .any(|s| s.signal == "TERM" && s.origin == Origin::Leftovers && !s.targets.is_empty()),
        "the straggler got no TERM by the leftovers rule: {sent:?}"
    );
    assert!(
        !orphans_reaped(&record.events).is_empty(),
        "the straggler was not reaped: {:?}",
        kinds(&record.events)
    );
    assert!(broker_failures(&record.events).is_empty());
    let result = record.result.expect("result.json");
    assert_eq!(result.stdout.bytes, 10);
    assert_eq!(result.stopped_by, Some(Origin::Leftovers));
    env.finish();
}

/// When whoever reads tether's output goes away, the command is stopped rather than left
/// writing into the void.
#[test]
fn vanished_reader_stops_the_command() {
    use std::io::Read;
    use std::process::Stdio;
    let env = TestEnv::new("epipe");
    let mut child = env
        .exec_command(&["--grace", "5s"], &["yes"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start tether exec");
    let mut stdout = child.stdout.take().expect("piped stdout");
    let mut first = [0u8; 4];
    stdout.read_exact(&mut first).expect("read the first bytes");
    assert_eq!(&first, b"y\ny\n");
    drop(stdout);
    let run = common::RunningExec {
        child,
        started: std::time::Instant::now(),
        stdout_path: env.path("unused.stdout"),
        stderr_path: env.path("unused.stderr"),
    }
    .wait(&env);
    assert_eq!(run.code(), 143);
    let record = load_complete(&env.command_dir());
    assert_eq!(exit_status(&record.events).signal, Some(15));
    let result = record.result.expect("result.json");
    assert_eq!(result.stopped_by, Some(Origin::Shutdown));
    assert!(result.stdout.bytes >= 4);
    env.finish();
}

/// nix cannot name real-time signals; the broker must still see the command end.
#[test]
fn death_by_a_real_time_signal_is_seen() {
    let env = TestEnv::new("rt_signal_exit");
    let run = env.exec(&[], &["sh", "-c", "echo hi; kill -s RTMIN $$"]);
    let rtmin = libc::SIGRTMIN();
    assert_eq!(run.code(), 128 + rtmin, "stderr: {}", run.stderr_text());
    let record = load_complete(&env.command_dir());
    assert_eq!(exit_status(&record.events).signal, Some(rtmin));
    env.finish();
}

/// If the broker itself dies, `tether exec` stops what it left and says so.
#[test]
fn a_dead_broker_does_not_leave_its_command_running() {
    let env = TestEnv::new("dead_broker");
    let running = env.spawn_exec(&[], &["sh", "-c", "echo ready; sleep 1000"]);
    let dir = env.wait_command_dir();
    common::wait_for_text(&env, &dir.join("stdout.log"), "ready");
    // The output file can run ahead of the event log, which is flushed per batch.
    common::wait_until(&env, "the spawned event", || {
        common::journal::kinds(&tether::journal::CommandRecord::load(&dir).events)
            .contains(&"spawned")
    });
    let record = tether::journal::CommandRecord::load(&dir);
    let broker = common::journal::broker_pid(&record.events);
    let command = common::journal::spawned_pid(&record.events);
    common::procs::signal(broker, nix::sys::signal::Signal::SIGKILL);
    let run = running.wait(&env);
    assert_eq!(run.code(), 125, "stderr: {}", run.stderr_text());
    assert!(
        run.stderr_text().contains("broker lost; cleaned up"),
        "{}",
        run.stderr_text()
    );
    assert!(common::procs::wait_gone(&[command], Duration::from_secs(5)).is_empty());
    env.finish();
}

/// The broker is a fork of `tether exec` unless `TETHER_BROKER_FORK=off`, which execs
/// `tether broker` as before; either way the command runs and ends alike. The command's
/// parent is its broker: its command line starts with the exec'd binary's path, or, forked,
/// with `tether broker` written over the front end's.
#[test]
fn the_broker_is_forked_or_with_tether_broker_fork_off_execd() {
    let env = TestEnv::new("broker_fork");
    let parent = "tr '\\0' ' ' < /proc/$PPID/cmdline; echo; cat /proc/$PPID/comm";
    // The forked broker's command line says what an exec'd one's says (its argv area is
    // rewritten, the rest zeroed: `tr` makes the zeros spaces); only the program differs.
    let forked = env.exec(
        &["--name", "a-long-enough-name-for-the-argv-area"],
        &["sh", "-c", parent],
    );
    assert_eq!(forked.code(), 0, "{}", forked.stderr_text());
    let said = String::from_utf8_lossy(&forked.stdout()).into_owned();
    assert!(
        said.starts_with("tether broker ")
            && !said.contains("exec")
            && said.ends_with("tether-broker\n"),
        "{said}"
    );
    let mut command = env.exec_command(&[], &["sh", "-c", parent]);
    command.env(tether::supervisor::BROKER_FORK_ENV, "off");
    let execd = env.spawn_captured(command).wait(&env);
    assert_eq!(execd.code(), 0, "{}", execd.stderr_text());
    let said = String::from_utf8_lossy(&execd.stdout()).into_owned();
    assert!(
        said.contains(" broker ") && !said.contains(" exec ") && said.ends_with("tether-broker\n"),
        "{said}"
    );
    for dir in env.command_dirs() {
        assert_eq!(exit_status(&load_complete(&dir).events).code, Some(0));
    }
    env.finish();
}
