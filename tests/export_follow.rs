//! `tether export --follow` delivering live to an OTLP/HTTP receiver (the test receiver in
//! `common::otlp_receiver`, decoding with the official protobuf definitions): every command of
//! a session of shell shim calls arrives once, with its attributes and events; a command
//! started under a `TRACEPARENT` is that span's child; a receiver down for ten seconds, or a
//! follower stopped or killed and started again, loses nothing and doubles nothing; and a
//! receiver that refuses or hangs costs the commands nothing.

use crate::common;

use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use opentelemetry_proto::tonic::trace::v1::status::StatusCode;
use tether::export::otlp;

use common::follower::{
    Follower, assert_each_once, command_spans, root_spans, run_shim, run_shims, session_commands,
    shim, wait_all_commands, write_config,
};
use common::otlp_receiver::{Mode, ReceivedSpan, Receiver, attr_int, attr_text, hex, value_text};
use common::{TestEnv, run_to_end, wait_for_text, wait_until};

/// The one span of a command, by its directory's name.
fn span_of<'a>(
    spans: &'a std::collections::BTreeMap<String, Vec<ReceivedSpan>>,
    name: &str,
) -> &'a ReceivedSpan {
    &spans
        .get(name)
        .unwrap_or_else(|| panic!("no span for {name}"))[0]
}

/// The command directory whose `command.json` ran `script`.
fn dir_running(env: &TestEnv, session: &str, script: &str) -> String {
    session_commands(env, session)
        .into_iter()
        .find(|name| {
            let dir = env.state_dir().join("sessions").join(session).join(name);
            common::journal::load_complete(&dir)
                .request
                .is_some_and(|r| r.command.argv().last().is_some_and(|a| a == script))
        })
        .unwrap_or_else(|| panic!("no command ran {script:?}"))
}

#[test]
fn a_session_of_200_commands_arrives_whole_and_once() {
    let env = TestEnv::new("follow_200");
    write_config(&env, "");
    let receiver = Receiver::start();
    let follower = Follower::start(&env, &receiver.endpoint(), &[]);
    let session = "fleet-200";

    // A killed one while the others run: its caller (this test) sends the shim SIGTERM, which
    // the shim passes on, journaled with its sender.
    let killed_script = "echo ready; while :; do sleep 0.05; done";
    let killed = env.spawn_captured(shim(&env, session, killed_script));
    wait_for_text(&env, &killed.stdout_path, "ready");
    common::procs::signal(killed.pid(), Signal::SIGTERM);
    let killed = killed.wait(&env);
    assert!(killed.status.code().is_none(), "{}", killed.stderr_text());

    let scripts: Vec<String> = (0..199)
        .map(|i| match i {
            77 => "echo failing >&2; exit 3".to_owned(),
            _ => format!("echo command {i}"),
        })
        .collect();
    let outputs = run_shims(&env, session, &scripts, 4);
    assert_eq!(outputs[77].status.code(), Some(3));
    assert_eq!(session_commands(&env, session).len(), 200);

    wait_all_commands(&env, &receiver, session, 200);
    wait_until(&env, "the session's root span", || {
        !root_spans(&receiver, session).is_empty()
    });
    assert_each_once(&env, &receiver, session);

    let trace = hex(&otlp::trace_id(&otlp::local_host(), session));
    let root = hex(&otlp::span_id(&otlp::local_host(), session, ""));
    let spans = command_spans(&env, &receiver, session);
    let pid = std::process::id().to_string();
    for (name, arrived) in &spans {
        let span = &arrived[0].span;
        let attributes = &span.attributes;
        assert_eq!(hex(&span.trace_id), trace, "{name}");
        assert_eq!(
            hex(&span.parent_span_id),
            root,
            "{name}: the session's child"
        );
        assert_eq!(
            attr_text(attributes, "tether.session.id").as_deref(),
            Some(session)
        );
        let number: i64 = name[..name.find('-').unwrap()].parse().unwrap();
        assert_eq!(
            attr_int(attributes, "tether.command.number"),
            Some(number),
            "{name}"
        );
        for key in [
            "process.executable.name",
            "process.command_args",
            "process.pid",
            "tether.command.text",
            "tether.command.name",
            "tether.ended",
        ] {
            assert!(
                attr_text(attributes, key).is_some(),
                "{name} has no {key}: {attributes:?}"
            );
        }
        assert!(
            span.start_time_unix_nano > 0 && span.end_time_unix_nano >= span.start_time_unix_nano
        );
        assert!(!span.events.is_empty(), "{name} has no events");
        let resource = &arrived[0].resource;
        assert_eq!(
            attr_text(resource, "service.name").as_deref(),
            Some("tether")
        );
        assert!(attr_text(resource, "host.name").is_some(), "{resource:?}");
    }

    // Succeeded: exit code 0, status OK.
    let ok = &span_of(&spans, &dir_running(&env, session, "echo command 5")).span;
    assert_eq!(attr_int(&ok.attributes, "process.exit.code"), Some(0));
    assert_eq!(attr_text(&ok.attributes, "error.type"), None);
    assert_eq!(
        ok.status.as_ref().map(|s| s.code),
        Some(StatusCode::Ok as i32)
    );

    // Failed: its exit code, as text in error.type, status ERROR.
    let failed = &span_of(
        &spans,
        &dir_running(&env, session, "echo failing >&2; exit 3"),
    )
    .span;
    assert_eq!(attr_int(&failed.attributes, "process.exit.code"), Some(3));
    assert_eq!(
        attr_text(&failed.attributes, "error.type").as_deref(),
        Some("3")
    );
    assert_eq!(
        failed.status.as_ref().map(|s| s.code),
        Some(StatusCode::Error as i32)
    );

    // Ended by its caller's SIGTERM: stopped, as `tether sessions` counts it, so no error;
    // who stopped it, and the signal as an event naming its sender.
    let killed = &span_of(&spans, &dir_running(&env, session, killed_script)).span;
    assert_eq!(
        attr_text(&killed.attributes, "tether.ended").as_deref(),
        Some("stopped (SIGTERM)"),
        "{:?}",
        killed.attributes
    );
    assert_eq!(attr_text(&killed.attributes, "error.type"), None);
    assert_eq!(
        killed.status.as_ref().map(|s| s.code),
        Some(StatusCode::Ok as i32)
    );
    let stopped_by = attr_text(&killed.attributes, "tether.stopped_by").unwrap_or_default();
    assert!(
        stopped_by.starts_with("caller") && stopped_by.contains(&format!("(pid {pid})")),
        "{stopped_by:?}"
    );
    let signal_events: Vec<_> = killed
        .events
        .iter()
        .filter(|e| e.name.contains("signal"))
        .collect();
    let sender = format!("(pid {pid}) through its shell");
    assert!(
        signal_events.iter().any(|e| {
            let texts: Vec<String> = e
                .attributes
                .iter()
                .filter_map(|kv| kv.value.as_ref()?.value.as_ref().map(value_text))
                .collect();
            texts.iter().any(|t| t.contains("TERM")) && texts.iter().any(|t| t.ends_with(&sender))
        }),
        "no signal event naming TERM and its sender {sender:?}: {:?}",
        killed.events
    );

    // The session's root: once, no parent, covering its commands.
    let roots = root_spans(&receiver, session);
    assert_eq!(
        roots.len(),
        1,
        "the root span arrived {} times",
        roots.len()
    );
    assert!(roots[0].span.parent_span_id.is_empty());
    follower.stop(&env);
    env.finish();
}

#[test]
fn a_command_under_a_traceparent_is_that_spans_child() {
    const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
    const CALLER_SPAN: &str = "00f067aa0ba902b7";
    let env = TestEnv::new("follow_traceparent");
    write_config(&env, "");
    let receiver = Receiver::start();
    let follower = Follower::start(&env, &receiver.endpoint(), &[]);
    let session = "fleet-traced";
    run_shim(&env, session, "echo plain");
    let mut traced = shim(&env, session, "printf '%s\\n' \"$TRACEPARENT\"");
    traced.env("TRACEPARENT", format!("00-{TRACE}-{CALLER_SPAN}-01"));
    let output = run_to_end(&env, traced, "the traced command");
    assert!(output.status.success());
    // What the command was given: the caller's trace, its own span id.
    let seen = String::from_utf8(output.stdout).unwrap();
    let own_span = seen
        .trim()
        .split('-')
        .nth(2)
        .expect("a TRACEPARENT")
        .to_owned();
    assert_ne!(own_span, CALLER_SPAN);

    wait_until(&env, "the traced command's span", || {
        receiver
            .spans()
            .iter()
            .any(|s| hex(&s.span.trace_id) == TRACE)
    });
    let span = receiver
        .spans()
        .into_iter()
        .find(|s| hex(&s.span.trace_id) == TRACE)
        .unwrap()
        .span;
    assert_eq!(hex(&span.parent_span_id), CALLER_SPAN);
    assert_eq!(hex(&span.span_id), own_span);
    assert!(
        span.links.iter().any(|l| hex(&l.trace_id)
            == hex(&otlp::trace_id(&otlp::local_host(), session))
            && hex(&l.span_id) == hex(&otlp::span_id(&otlp::local_host(), session, ""))),
        "no link to the session's root: {:?}",
        span.links
    );
    // The plain one stays in the session's trace, the traced one is not in it.
    let plain = dir_running(&env, session, "echo plain");
    wait_until(&env, "the plain command's span", || {
        command_spans(&env, &receiver, session).contains_key(&plain)
    });
    let spans = command_spans(&env, &receiver, session);
    assert_eq!(spans.keys().collect::<Vec<_>>(), [&plain]);
    assert_eq!(receiver.duplicates(), Vec::<(String, usize)>::new());
    follower.stop(&env);
    env.finish();
}

/// Runs shim calls in the session, four every `pace` (two at a time), until `stop` holds;
/// returns how many. Paced as an agent runs them: a few a second, not thousands.
fn keep_running(
    env: &TestEnv,
    session: &str,
    pace: Duration,
    mut stop: impl FnMut(usize) -> bool,
) -> usize {
    let mut ran = 0;
    while !stop(ran) {
        let started = Instant::now();
        let scripts: Vec<String> = (ran..ran + 4).map(|i| format!("echo {i}")).collect();
        run_shims(env, session, &scripts, 2);
        ran += scripts.len();
        std::thread::sleep(pace.saturating_sub(started.elapsed()));
    }
    ran
}

/// How often [`keep_running`] starts four calls.
const PACE: Duration = Duration::from_millis(250);

#[test]
fn a_receiver_down_for_ten_seconds_misses_nothing_and_doubles_nothing() {
    let env = TestEnv::new("follow_down");
    write_config(&env, "");
    let receiver = Receiver::start();
    let follower = Follower::start(&env, &receiver.endpoint(), &[]);
    let session = "fleet-down";
    keep_running(&env, session, PACE, |ran| ran >= 20);
    wait_all_commands(&env, &receiver, session, 20);

    receiver.set_mode(Mode::Down);
    let down = Instant::now();
    let during = keep_running(&env, session, PACE, |ran| {
        ran >= 20 && down.elapsed() >= Duration::from_secs(10)
    });
    let arrived = command_spans(&env, &receiver, session).len();
    receiver.set_mode(Mode::Ok);
    assert!(
        arrived < 20 + during,
        "all {arrived} arrived while the receiver was down"
    );
    keep_running(&env, session, PACE, |ran| ran >= 20);

    let total = 40 + during;
    wait_all_commands(&env, &receiver, session, total);
    assert_each_once(&env, &receiver, session);
    follower.stop(&env);
    env.finish();
}

/// The follower stopped by `how` mid-run, commands going on without it, then started again.
fn resumes_after(how: Signal) {
    let env = TestEnv::new(&format!("follow_resume_{how:?}"));
    write_config(&env, "");
    let receiver = Receiver::start();
    let session = "fleet-resume";
    let mut follower = Follower::start(&env, &receiver.endpoint(), &[]);
    // Stopped while commands are being run and sent.
    let killed_at = std::sync::OnceLock::new();
    std::thread::scope(|scope| {
        scope.spawn(|| {
            keep_running(&env, session, PACE, |ran| ran >= 60);
        });
        wait_until(&env, "some spans sent", || {
            command_spans(&env, &receiver, session).len() >= 10
        });
        follower.signal(how);
        let status = follower.wait(&env);
        let _ = killed_at.set(receiver.spans().len());
        if how == Signal::SIGTERM {
            assert!(status.success(), "{status:?}: {}", follower.stderr_text());
        }
    });
    keep_running(&env, session, PACE, |ran| ran >= 20);
    let follower = Follower::start(&env, &receiver.endpoint(), &[]);
    wait_all_commands(&env, &receiver, session, 80);
    if how == Signal::SIGKILL {
        // A batch the receiver took just before the kill, whose cursor was not yet on disk,
        // is sent again: the same spans, ids and all, which a backend takes as one. Only
        // such a batch: what arrived after the restart is otherwise new.
        let spans = receiver.spans();
        let before = *killed_at.get().unwrap();
        eprintln!("sent again after SIGKILL: {:?}", receiver.duplicates());
        for again in receiver.duplicates() {
            assert!(again.1 == 2, "{again:?} arrived more than twice");
            let copies: Vec<&ReceivedSpan> = spans
                .iter()
                .filter(|s| hex(&s.span.span_id) == again.0)
                .collect();
            assert_eq!(copies[0].span, copies[1].span, "a resend differs");
            let at = spans
                .iter()
                .position(|s| hex(&s.span.span_id) == again.0)
                .unwrap();
            assert!(at < before, "{again:?} first arrived after the kill");
        }
        let missing: Vec<String> = session_commands(&env, session)
            .into_iter()
            .filter(|n| !command_spans(&env, &receiver, session).contains_key(n))
            .collect();
        assert!(missing.is_empty(), "missing {missing:?}");
    } else {
        assert_each_once(&env, &receiver, session);
    }
    follower.stop(&env);
    env.finish();
}

#[test]
fn a_follower_stopped_mid_run_resumes_from_its_cursor() {
    resumes_after(Signal::SIGTERM);
}

#[test]
fn a_follower_killed_mid_run_resumes_from_its_cursor() {
    resumes_after(Signal::SIGKILL);
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

#[test]
fn a_receiver_refusing_or_hanging_does_not_slow_the_commands() {
    // Three state dirs, each followed by its own follower: to a receiver that takes
    // everything, to one that answers 500, to one that never answers. The same shim call is
    // timed in each, in turn, so that the machine's load falls on all three alike.
    let modes = [Mode::Ok, Mode::Status(500), Mode::Hang];
    let worlds: Vec<(TestEnv, Receiver, Follower)> = modes
        .iter()
        .map(|mode| {
            let env = TestEnv::new("follow_slow");
            write_config(&env, "timeout = \"2s\"\n");
            let receiver = Receiver::start();
            receiver.set_mode(*mode);
            let follower = Follower::start(&env, &receiver.endpoint(), &[]);
            (env, receiver, follower)
        })
        .collect();
    let session = "fleet-timed";
    let mut times: Vec<Vec<Duration>> = vec![Vec::new(); modes.len()];
    for round in 0..40 {
        for (i, (env, _, _)) in worlds.iter().enumerate() {
            let started = Instant::now();
            let output = run_shim(env, session, &format!("echo {round}"));
            times[i].push(started.elapsed());
            assert!(output.status.success());
        }
    }
    // Each follower did try: the live one delivered, the others met their receiver.
    let (env, receiver, _) = &worlds[0];
    wait_all_commands(env, receiver, session, 40);
    wait_until(&worlds[1].0, "a request answered 500", || {
        worlds[1].1.requests_answered(Mode::Status(500)) > 0
    });
    wait_until(&worlds[2].0, "a request left hanging", || {
        worlds[2].1.requests_answered(Mode::Hang) > 0
    });
    let medians: Vec<Duration> = times.into_iter().map(median).collect();
    eprintln!(
        "shim call medians: live {:?}, 500 {:?}, hang {:?}",
        medians[0], medians[1], medians[2]
    );
    // Generous: a follower that waited on its endpoint in the command's path would add its
    // whole timeout (2 s) to a call.
    for (mode, median) in modes.iter().zip(&medians).skip(1) {
        assert!(
            *median <= medians[0] * 3 + Duration::from_millis(50),
            "{mode:?}: median {median:?} against {:?} with a live endpoint",
            medians[0]
        );
    }
    for (env, _, follower) in worlds {
        follower.stop(&env);
        env.finish();
    }
}
