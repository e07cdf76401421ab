//! The final-drain trigger end to end: `tether exec --drain-on REGEX --drain D`. A command
//! whose final line appears and that exits within the drain ends as it would have; one that
//! hangs on is stopped and counts as finished; one whose line never comes is left alone.

use crate::common;

use common::TestEnv;
use common::direct::DirectBroker;
use common::journal::{exit_status, kinds, load_complete, read, signals_sent};
use tether::protocol::{Event, EventKind, Origin, Stage};

/// The `final_drain` event's pattern, line and when it was journaled (µs into the run).
fn final_drain(events: &[Event]) -> Option<(String, String, u64)> {
    events.iter().find_map(|e| match &e.kind {
        EventKind::FinalDrain { pattern, line, .. } => {
            Some((pattern.clone(), line.clone(), e.mono_us))
        }
        _ => None,
    })
}

const DRAIN: [&str; 4] = ["--drain-on", "DONE", "--drain", "1s"];

#[test]
fn a_command_that_exits_within_the_drain_ends_normally() {
    let env = TestEnv::new("drain_in_time");
    // The final line arrives in two reads: it is matched once it is complete.
    let run = env.exec(
        &DRAIN,
        &[
            "sh",
            "-c",
            "echo working; printf 'all DO'; sleep 0.1; echo NE; sleep 0.3; exit 4",
        ],
    );
    assert_eq!(run.code(), 4, "stderr: {}", run.stderr_text());
    assert_eq!(run.stdout(), b"working\nall DONE\n");
    assert!(
        !run.stderr_text().contains("final output"),
        "nothing was stopped: {}",
        run.stderr_text()
    );
    let record = load_complete(&env.command_dir());
    let (pattern, line, _) = final_drain(&record.events).expect("final_drain journaled");
    assert_eq!((pattern.as_str(), line.as_str()), ("DONE", "all DONE"));
    assert_eq!(exit_status(&record.events).code, Some(4));
    assert_eq!(signals_sent(&record.events), vec![], "nothing to stop");
    let result = record.result.expect("result.json");
    assert!(!result.drained);
    assert_eq!(result.stopped_by, None);
    env.finish();
}

#[test]
fn a_command_that_hangs_after_its_final_line_is_stopped_and_finished() {
    let env = TestEnv::new("drain_stopped");
    let run = env.exec(&DRAIN, &["sh", "-c", "echo DONE; sleep 300"]);
    let stderr = run.stderr_text();
    assert_eq!(run.code(), 0, "a drained command finished: {stderr}");
    let told: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("stopped the command after its final output"))
        .collect();
    assert_eq!(told.len(), 1, "one line says so: {stderr}");
    assert!(told[0].contains("`DONE`"), "{stderr}");

    let dir = env.command_dir();
    let record = load_complete(&dir);
    assert_eq!(read(&dir, "stdout.log"), b"DONE\n");
    let names = kinds(&record.events);
    let (_, line, matched_at) = final_drain(&record.events).expect("final_drain journaled");
    assert_eq!(line, "DONE");
    let sent = signals_sent(&record.events);
    assert!(
        sent.iter()
            .any(|s| s.signal == "TERM" && s.origin == Origin::FinalDrain),
        "no TERM with origin final_drain: {sent:?}"
    );
    // Not before the drain period was over.
    let first_signal_at = record
        .events
        .iter()
        .find(|e| matches!(e.kind, EventKind::SignalSent { .. }))
        .map(|e| e.mono_us);
    assert!(
        first_signal_at.is_some_and(|at| at >= matched_at + 1_000_000),
        "signalled before the drain was over: {names:?}"
    );
    assert_eq!(exit_status(&record.events).signal, Some(15));
    let result = record.result.expect("result.json");
    assert!(result.drained, "result.json records drained");
    assert_eq!(result.stopped_by, Some(Origin::FinalDrain));
    assert!(!result.hard_killed, "TERM was enough");
    env.finish();
}

#[test]
fn a_pattern_that_never_appears_changes_nothing() {
    let env = TestEnv::new("drain_never");
    let run = env.exec(&DRAIN, &["sh", "-c", "echo done; echo DONE >&2; exit 5"]);
    assert_eq!(run.code(), 5, "stderr: {}", run.stderr_text());
    let record = load_complete(&env.command_dir());
    // Lower case on stdout, and stderr is not watched.
    assert_eq!(final_drain(&record.events), None);
    assert_eq!(signals_sent(&record.events), vec![]);
    assert!(!record.result.expect("result.json").drained);
    env.finish();
}

#[test]
fn an_invalid_pattern_is_a_usage_error_before_anything_starts() {
    let env = TestEnv::new("drain_invalid");
    let run = env.exec(&["--drain-on", "(unclosed"], &["sh", "-c", "echo ran"]);
    let stderr = run.stderr_text();
    assert_eq!(run.code(), 2, "{stderr}");
    assert!(
        stderr.contains("`(unclosed` is not a valid regex"),
        "a clear message: {stderr}"
    );
    assert!(run.stdout().is_empty(), "the command did not run");
    assert_eq!(env.command_dirs(), Vec::<std::path::PathBuf>::new());
    // A drain period alone means nothing.
    let alone = env.exec(&["--drain", "1s"], &["true"]);
    assert_eq!(alone.code(), 2, "{}", alone.stderr_text());
    assert!(alone.stderr_text().contains("--drain-on"));
    env.finish();
}

#[test]
fn the_broker_refuses_an_invalid_pattern_from_any_front_end() {
    let env = TestEnv::new("drain_broker_refuses");
    let mut broker = DirectBroker::spawn(&env, "01-bad");
    let mut request = broker.launch_request("bad", &["sh", "-c", "echo ran"], 1000);
    request["drain_on"] = "(unclosed".into();
    broker.send(&request.to_string());
    let refused = broker.wait_for("broker_failure", |k| {
        matches!(k, EventKind::BrokerFailure { .. })
    });
    let EventKind::BrokerFailure {
        stage,
        code,
        message,
    } = refused.kind
    else {
        unreachable!("waited for a broker_failure");
    };
    assert_eq!(
        (stage, code.as_str()),
        (Stage::Protocol, "invalid_drain_on")
    );
    assert!(message.contains("not a valid regex"), "{message}");
    assert_eq!(broker.wait_exit(), 1);
    assert!(
        !broker
            .seen
            .iter()
            .any(|e| matches!(e.kind, EventKind::Spawned { .. })),
        "nothing was started: {:?}",
        kinds(&broker.seen)
    );
    env.finish();
}
