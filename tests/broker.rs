//! `tether broker` driven directly over its stdin/stdout protocol, the test playing the
//! front end.

use crate::common;

use common::direct::DirectBroker;
use common::journal::{
    broker_failures, exit_status, kinds, load_complete, read, signals_sent, spawned_pid,
};
use common::procs;
use common::{TestEnv, wait_until};
use tether::protocol::{EventKind, Origin, ParentLossCause, Scope, Stage};

fn is_failure(kind: &EventKind) -> bool {
    matches!(kind, EventKind::BrokerFailure { .. })
}

/// The `(stage, code)` of a `broker_failure` event.
fn failure_of(kind: &EventKind) -> (Stage, String) {
    match kind {
        EventKind::BrokerFailure { stage, code, .. } => (*stage, code.clone()),
        other => panic!("not a broker_failure: {other:?}"),
    }
}

/// PR_SET_PDEATHSIG fires when the thread that forked the broker exits, even though the
/// process that owns the broker lives on: that must not count as losing the parent.
#[test]
fn forking_thread_exit_is_not_parent_death() {
    let env = TestEnv::new("pdeathsig_thread");
    let mut broker = std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let mut broker = DirectBroker::spawn(&env, "01-sleeper");
                // The broker answers pings only once it has armed PR_SET_PDEATHSIG, so the
                // signal is sure to fire when this thread exits.
                broker.send(r#"{"type":"ping"}"#);
                broker.wait_for("pong", |k| matches!(k, EventKind::Pong));
                broker
            })
            .join()
            .expect("the spawning thread")
    });
    let launch = broker.launch_line("sleeper", &["sh", "-c", "sleep 2; echo done"], 2000);
    broker.send(&launch);
    let events = broker.wait_close();
    assert!(
        !kinds(&events).contains(&"parent_lost"),
        "a forking thread's exit was taken for the parent's death: {:?}",
        kinds(&events)
    );
    assert_eq!(exit_status(&events).code, Some(0), "{:?}", kinds(&events));
    assert_eq!(broker.wait_exit(), 0);
    let record = load_complete(&broker.journal_dir);
    assert_eq!(read(&broker.journal_dir, "stdout.log"), b"done\n");
    assert!(!kinds(&record.events).contains(&"parent_lost"));
    let result = record.result.expect("result.json");
    assert!(!result.parent_lost);
    assert_eq!(result.exit.and_then(|s| s.code), Some(0));
    drop(broker);
    env.finish();
}

#[test]
fn a_launch_request_too_long_to_read_ends_the_broker() {
    let env = TestEnv::new("launch_too_long");
    let mut broker = DirectBroker::spawn(&env, "01-long");
    broker.send_raw(&vec![b'x'; tether::protocol::MAX_LINE + 1]);
    broker.send_raw(b"\n");
    let failure = broker.wait_for("a broker_failure", is_failure);
    assert_eq!(
        failure_of(&failure.kind),
        (Stage::Protocol, "launch_too_long".into())
    );
    // It ends rather than wait for a launch that will never come.
    assert_eq!(broker.wait_exit(), 1);
    env.finish();
}

#[test]
fn bad_request_lines_are_refused_and_the_broker_carries_on() {
    let env = TestEnv::new("bad_lines");
    let mut broker = DirectBroker::spawn(&env, "01-sleeper");

    // Before the launch: refused, and the launch that follows still works.
    broker.send("not json");
    let failure = broker.wait_for("a broker_failure", is_failure);
    assert_eq!(
        failure_of(&failure.kind),
        (Stage::Protocol, "malformed".into())
    );
    let mut future = broker.launch_request("sleeper", &["sleep", "1000"], 5000);
    future["v"] = 99.into();
    broker.send(&future.to_string());
    let failure = broker.wait_for("a broker_failure", is_failure);
    assert_eq!(
        failure_of(&failure.kind),
        (Stage::Protocol, "version_mismatch".into())
    );
    let launch = broker.launch_line("sleeper", &["sleep", "1000"], 5000);
    broker.send(&launch);
    broker.wait_for("spawned", |k| matches!(k, EventKind::Spawned { .. }));

    broker.send("not json");
    let failure = broker.wait_for("a broker_failure", is_failure);
    assert_eq!(
        failure_of(&failure.kind),
        (Stage::Protocol, "malformed".into())
    );

    broker.send_raw(&vec![b'x'; tether::protocol::MAX_LINE + 1]);
    broker.send_raw(b"\n");
    let failure = broker.wait_for("a broker_failure", is_failure);
    assert_eq!(
        failure_of(&failure.kind),
        (Stage::Protocol, "line_too_long".into())
    );

    // A signal is a type: a name that is none is refused when the line is read.
    broker.send(r#"{"type":"signal","signal":"NOPE","scope":"group"}"#);
    let failure = broker.wait_for("a broker_failure", is_failure);
    assert_eq!(
        failure_of(&failure.kind),
        (Stage::Protocol, "malformed".into())
    );
    assert!(
        matches!(&failure.kind, EventKind::BrokerFailure { message, .. } if message.contains("is not a signal")),
        "{failure:?}"
    );

    // A subscription is the control socket's: the pipe refuses it.
    broker.send(r#"{"type":"subscribe"}"#);
    let failure = broker.wait_for("a broker_failure", is_failure);
    assert_eq!(
        failure_of(&failure.kind),
        (Stage::Protocol, "wrong_transport".into())
    );

    // Still working: a stop stops the command.
    broker.send(r#"{"type":"stop"}"#);
    let events = broker.wait_close();
    assert_eq!(
        exit_status(&events).signal,
        Some(15),
        "{:?}",
        kinds(&events)
    );
    let sent = signals_sent(&events);
    assert!(
        sent.iter()
            .any(|s| s.signal == "TERM" && s.origin == Origin::Operator),
        "{sent:?}"
    );
    assert_eq!(broker.wait_exit(), 0);

    // The journal holds the failures that came after it was created.
    let record = load_complete(&broker.journal_dir);
    let codes: Vec<String> = broker_failures(&record.events)
        .into_iter()
        .map(|(stage, code)| {
            assert_eq!(stage, Stage::Protocol);
            code
        })
        .collect();
    assert_eq!(
        codes,
        ["malformed", "line_too_long", "malformed", "wrong_transport"]
    );
    assert_eq!(
        record.result.expect("result.json").stopped_by,
        Some(Origin::Operator)
    );
    drop(broker);
    env.finish();
}

#[test]
fn operator_signal_reaches_one_descendant_only() {
    let env = TestEnv::new("signal_pid");
    let mut broker = DirectBroker::spawn(&env, "01-pair");
    let launch = broker.launch_line(
        "pair",
        &["sh", "-c", "sleep 1000 & sleep 1000 & wait"],
        5000,
    );
    broker.send(&launch);
    let spawned = broker.wait_for("spawned", |k| matches!(k, EventKind::Spawned { .. }));
    let EventKind::Spawned { pid: main, .. } = spawned.kind else {
        unreachable!()
    };
    // Both sleeps (grandchildren of the broker) as a tree event shows them.
    let tree = broker.wait_for("a tree with both sleeps", |k| match k {
        EventKind::Tree { processes } => processes.iter().filter(|p| p.ppid == main).count() == 2,
        _ => false,
    });
    let EventKind::Tree { processes } = tree.kind else {
        unreachable!()
    };
    let sleeps: Vec<i32> = processes
        .iter()
        .filter(|p| p.ppid == main)
        .map(|p| p.pid)
        .collect();
    let (target, sibling) = (sleeps[0], sleeps[1]);

    broker.send(&format!(
        r#"{{"type":"signal","signal":"TERM","scope":"pid","pid":{target}}}"#
    ));
    let sent = broker.wait_for("signal_sent", |k| matches!(k, EventKind::SignalSent { .. }));
    match sent.kind {
        EventKind::SignalSent {
            signal,
            scope,
            origin,
            targets,
            ..
        } => {
            assert_eq!(signal.name(), "TERM");
            assert_eq!(scope, Scope::Pid);
            assert_eq!(origin, Origin::Operator);
            assert_eq!(targets, [target]);
        }
        _ => unreachable!(),
    }
    wait_until(&env, "the signalled sleep to end", || {
        procs::is_gone(target)
    });
    assert!(!procs::is_gone(main), "the command itself was hit");
    assert!(!procs::is_gone(sibling), "the other sleep was hit");

    // A process outside the tree is refused.
    broker.send(r#"{"type":"signal","signal":"TERM","scope":"pid","pid":1}"#);
    let failure = broker.wait_for("a broker_failure", is_failure);
    assert_eq!(
        failure_of(&failure.kind),
        (Stage::Protocol, "not_a_descendant".into())
    );

    broker.send(r#"{"type":"stop"}"#);
    let events = broker.wait_close();
    assert_eq!(spawned_pid(&events), main);
    assert_eq!(
        exit_status(&events).signal,
        Some(15),
        "{:?}",
        kinds(&events)
    );
    assert_eq!(broker.wait_exit(), 0);
    drop(broker);
    env.finish();
}

/// A front end that stops pinging is recorded as unresponsive, and nothing is killed for it.
#[test]
fn silent_parent_is_recorded_not_acted_on() {
    let env = TestEnv::new("heartbeat");
    let mut broker = DirectBroker::spawn(&env, "01-quiet");
    let mut launch = broker.launch_request("quiet", &["sh", "-c", "sleep 1; echo done"], 2000);
    launch["heartbeat_ms"] = 50.into();
    broker.send(&launch.to_string());
    let events = broker.wait_close();
    let names = kinds(&events);
    assert!(names.contains(&"parent_unresponsive"), "{names:?}");
    assert!(!names.contains(&"parent_lost"), "{names:?}");
    assert!(signals_sent(&events).is_empty(), "{names:?}");
    assert_eq!(exit_status(&events).code, Some(0));
    assert_eq!(read(&broker.journal_dir, "stdout.log"), b"done\n");
    assert_eq!(broker.wait_exit(), 0);
    drop(broker);
    env.finish();
}

/// End of file on the broker's stdin means the front end is gone: the command is stopped.
#[test]
fn closed_request_pipe_counts_as_parent_lost() {
    let env = TestEnv::new("stdin_eof");
    let mut broker = DirectBroker::spawn(&env, "01-orphan");
    let launch = broker.launch_line("orphan", &["sleep", "1000"], 5000);
    broker.send(&launch);
    broker.wait_for("spawned", |k| matches!(k, EventKind::Spawned { .. }));
    broker.close_stdin();
    assert_eq!(
        broker.wait_exit(),
        1,
        "a broker that lost its parent exits 1"
    );
    let record = load_complete(&broker.journal_dir);
    let causes: Vec<ParentLossCause> = record
        .events
        .iter()
        .filter_map(|e| match e.kind {
            EventKind::ParentLost { cause } => Some(cause),
            _ => None,
        })
        .collect();
    assert_eq!(causes, [ParentLossCause::StdinEof]);
    assert_eq!(exit_status(&record.events).signal, Some(15));
    let sent = signals_sent(&record.events);
    assert!(
        sent.iter().all(|s| s.origin == Origin::ParentLost),
        "{sent:?}"
    );
    let result = record.result.expect("result.json");
    assert!(result.parent_lost);
    assert_eq!(result.stopped_by, Some(Origin::ParentLost));
    drop(broker);
    env.finish();
}

/// A stop written in the same burst as the launch request must not be lost.
#[test]
fn stop_right_behind_the_launch_is_obeyed() {
    let env = TestEnv::new("stop_with_launch");
    let mut broker = DirectBroker::spawn(&env, "01-sleeper");
    let launch = broker.launch_line("sleeper", &["sleep", "1000"], 2000);
    broker.send_raw(format!("{launch}\n{{\"type\":\"stop\"}}\n").as_bytes());
    let events = broker.wait_close();
    let sent = signals_sent(&events);
    assert!(
        sent.iter().any(|s| s.signal == "TERM"),
        "{:?}",
        kinds(&events)
    );
    assert_eq!(exit_status(&events).signal, Some(15));
    drop(broker);
    env.finish();
}
