//! Attention, end to end: the broker tells a command waiting on its input from one reading it
//! steadily, a runaway from a busy one, and runs the notify command with the event's JSON.

use crate::common;

use std::io::Write;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::journal::{events_now, kinds, spawned_pid};
use common::{TestEnv, wait_until};
use nix::sys::signal::Signal;
use tether::protocol::{AttentionKind, Event, EventKind};

/// Writes the test's user config (`[attention]`, `[notify]`), which `tether exec` reads
/// through `XDG_CONFIG_HOME`.
fn user_config(env: &TestEnv, text: &str) {
    let dir = env.path("config").join("tether");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("config.toml"), text).unwrap();
}

fn exec(env: &TestEnv, argv: &[&str]) -> std::process::Command {
    let mut command = env.exec_command(&[], argv);
    command.env("XDG_CONFIG_HOME", env.path("config"));
    command
}

/// The attention events of a journal: (kind, detail; `None` when cleared, ms since spawned,
/// on the broker's monotonic clock: wall-clock milliseconds, each truncated, can make 3 s
/// read as 2,999 ms).
fn attention(events: &[Event]) -> Vec<(AttentionKind, Option<String>, u64)> {
    let spawned = events
        .iter()
        .find(|e| matches!(e.kind, EventKind::Spawned { .. }))
        .map_or(0, |e| e.mono_us);
    events
        .iter()
        .filter_map(|e| {
            let after = e.mono_us.saturating_sub(spawned) / 1000;
            match &e.kind {
                EventKind::Attention { attention, detail } => {
                    Some((*attention, Some(detail.clone()), after))
                }
                EventKind::AttentionCleared { attention } => Some((*attention, None, after)),
                _ => None,
            }
        })
        .collect()
}

fn notify_config(out: &Path) -> String {
    format!(
        "[notify]\ncommand = [\"sh\", \"-c\", \"cat >> '{}'\"]\n",
        out.display()
    )
}

#[test]
fn a_command_blocked_reading_a_pipe_needs_input_and_the_notify_command_hears_of_it() {
    let env = TestEnv::new("attn-input");
    let got = env.path("notified.jsonl");
    user_config(&env, &notify_config(&got));
    let mut command = exec(&env, &["sh", "-c", "read line; echo got $line"]);
    // A pipe that stays open: nobody writes, nobody closes.
    command.stdin(Stdio::piped());
    let mut run = env.spawn_captured(command);
    let dir = env.wait_command_dir();
    wait_until(&env, "needs_input", || {
        attention(&events_now(&dir))
            .iter()
            .any(|(kind, detail, _)| *kind == AttentionKind::NeedsInput && detail.is_some())
    });
    let events = events_now(&dir);
    let (_, detail, after) = attention(&events)[0].clone();
    // Its threshold, and room for a crowded machine: when within it the detector looks is
    // the broker's state machine's to test on a fake clock.
    assert!(
        after <= 3_000 + 10_000,
        "needs_input {after} ms after spawned"
    );
    // The detector's 3 s count from the spawn, a moment before the `spawned` event is
    // stamped: a few ms short is that moment, not an early alarm.
    assert!(
        after >= 3_000 - 5,
        "needs_input after {after} ms, before input_after"
    );
    let detail = detail.unwrap();
    assert!(
        detail.starts_with("sh read(0) blocked on a pipe"),
        "{detail}"
    );
    wait_until(&env, "the notify command's JSON", || {
        std::fs::read_to_string(&got).is_ok_and(|t| t.ends_with('\n'))
    });
    let line = std::fs::read_to_string(&got).unwrap();
    let json: serde_json::Value = serde_json::from_str(line.trim()).unwrap();
    let session = common::journal::session_of(&dir);
    assert_eq!(json["kind"], "needs_input");
    assert_eq!(json["detail"], detail.as_str());
    assert_eq!(json["session"], session.as_str());
    assert_eq!(json["command"], 1);
    assert_eq!(json["target"], format!("{session}/01").as_str());
    assert_eq!(json["name"], "read");
    // What the command runs, as the list says it: the script of `sh -c`.
    assert_eq!(json["text"], "read line; echo got $line");
    assert_eq!(json["journal_dir"], dir.to_str().unwrap());
    assert!(json["time"].as_str().unwrap().ends_with('Z'), "{json}");

    // It reads: the episode is over, and the command ends well.
    let mut stdin = run.child.stdin.take().unwrap();
    stdin.write_all(b"hello\n").unwrap();
    drop(stdin);
    let done = run.wait(&env);
    assert_eq!(done.code(), 0, "{}", done.stderr_text());
    assert_eq!(done.stdout(), b"got hello\n");
    let events = events_now(&dir);
    let seen: Vec<_> = attention(&events)
        .into_iter()
        .map(|(kind, detail, _)| (kind, detail.is_some()))
        .collect();
    assert_eq!(
        seen,
        [
            (AttentionKind::NeedsInput, true),
            (AttentionKind::NeedsInput, false)
        ]
    );
    // The notify command ran as the broker's own: never reaped as the command's orphan.
    assert!(
        common::journal::orphans_reaped(&events).is_empty(),
        "{:?}",
        kinds(&events)
    );
    assert!(!kinds(&events).contains(&"notify_failed"));
    env.finish();
}

#[test]
fn a_command_reading_stdin_steadily_needs_nothing() {
    let env = TestEnv::new("attn-steady");
    let got = env.path("notified.jsonl");
    user_config(&env, &notify_config(&got));
    let mut command = exec(&env, &["sh", "-c", "while read line; do :; done"]);
    command.stdin(Stdio::piped());
    let mut run = env.spawn_captured(command);
    let dir = env.wait_command_dir();
    let mut stdin = run.child.stdin.take().unwrap();
    // Short reads for twice `input_after`, never a pause long enough to be waiting.
    let until = Instant::now() + Duration::from_secs(6);
    while Instant::now() < until {
        stdin.write_all(b"a line\n").unwrap();
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(stdin);
    let done = run.wait(&env);
    assert_eq!(done.code(), 0, "{}", done.stderr_text());
    let events = events_now(&dir);
    assert_eq!(attention(&events), [], "{:?}", kinds(&events));
    assert!(!got.exists(), "the notify command ran");
    env.finish();
}

#[test]
fn a_busy_command_is_a_runaway_and_is_left_running() {
    let env = TestEnv::new("attn-runaway");
    user_config(&env, "[attention]\nrunaway_after = \"2s\"\n");
    let run = env.spawn_captured(exec(&env, &["sh", "-c", "yes > /dev/null"]));
    let dir = env.wait_command_dir();
    wait_until(&env, "runaway", || {
        attention(&events_now(&dir))
            .iter()
            .any(|(kind, _, _)| *kind == AttentionKind::Runaway)
    });
    let events = events_now(&dir);
    let (kind, detail, after) = attention(&events)[0].clone();
    assert_eq!(kind, AttentionKind::Runaway);
    assert!(
        // Its threshold at the least; the bound above leaves room for a crowded machine.
        (2_000..=12_000).contains(&after),
        "runaway {after} ms after spawned"
    );
    assert!(detail.unwrap().starts_with("at least 90% of a core for"));
    // Left running: no exit, no signal.
    std::thread::sleep(Duration::from_millis(500));
    let events = events_now(&dir);
    assert!(!kinds(&events).contains(&"exit"), "{:?}", kinds(&events));
    assert!(
        !kinds(&events).contains(&"signal_sent"),
        "{:?}",
        kinds(&events)
    );
    assert!(!common::procs::is_gone(spawned_pid(&events)));
    // Stopped by the test, as the operator would.
    common::procs::signal(run.pid(), Signal::SIGTERM);
    let done = run.wait(&env);
    assert_ne!(done.code(), 0);
    env.finish();
}

#[test]
fn a_notify_command_that_cannot_run_is_journaled_once() {
    let env = TestEnv::new("attn-notify-missing");
    user_config(
        &env,
        "[notify]\ncommand = [\"/nonexistent/tether-notify\"]\n",
    );
    let done = env
        .spawn_captured(exec(&env, &["sh", "-c", "exit 3"]))
        .wait(&env);
    assert_eq!(done.code(), 3);
    let events = events_now(&env.command_dir());
    let failed: Vec<_> = attention(&events);
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert_eq!(failed[0].0, AttentionKind::Failed);
    let messages: Vec<&str> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::NotifyFailed { message } => Some(message.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(messages.len(), 1, "{messages:?}");
    assert!(
        messages[0].contains("cannot run `/nonexistent/tether-notify`"),
        "{messages:?}"
    );
    env.finish();
}

/// An agent's quick failure (a `grep` with no match, a `test -f`, through the shell shim) is
/// counted in its row, not told; the same failure of a command the operator started is.
#[test]
fn an_agents_quick_failure_is_not_told_and_the_operators_is() {
    let env = TestEnv::new("agent_failures");
    user_config(&env, "");
    let shim = env.shim(Path::new(common::BIN), &["sh", "-c", "exit 1"]);
    let by_agent = common::run_to_end(&env, shim, "tether sh");
    assert_eq!(by_agent.status.code(), Some(1), "{by_agent:?}");
    let by_operator = env.spawn_captured(exec(&env, &["sh", "-c", "exit 1"]));
    assert_eq!(by_operator.wait(&env).code(), 1);
    let dirs = env.command_dirs();
    assert_eq!(dirs.len(), 2, "{dirs:?}");
    let told: Vec<Vec<AttentionKind>> = dirs
        .iter()
        .map(|dir| {
            let record = common::journal::load_complete(dir);
            attention(&record.events).into_iter().map(|a| a.0).collect()
        })
        .collect();
    assert!(told.contains(&vec![]), "the shim's: {told:?}");
    assert!(
        told.contains(&vec![AttentionKind::Failed]),
        "exec's: {told:?}"
    );
    env.finish();
}
