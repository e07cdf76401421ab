//! Readiness on the fake clock: a `log` probe over split lines and either stream, tries at
//! the interval, one `ready` and no more tries, `not_ready` at the timeout, and nothing once
//! the command exits or is stopped (the probing over: a try going is given up).

use super::*;
use crate::protocol::{Readiness, ReadyProbe, Stream};

fn with_probe(probe: ReadyProbe, interval: Duration, timeout: Option<Duration>) -> LaunchRequest {
    LaunchRequest {
        ready: Some(Readiness {
            probe,
            interval,
            timeout,
        }),
        ..request()
    }
}

fn tcp() -> ReadyProbe {
    ReadyProbe::Tcp {
        host: "127.0.0.1".into(),
        port: 8080,
    }
}

/// A command whose readiness is a line matching `pattern`.
fn logging(pattern: &str) -> Rig {
    let probe = ReadyProbe::Log {
        pattern: pattern.into(),
    };
    let request = with_probe(probe, ms(500), None);
    let regex = crate::final_drain::compile(pattern).ok();
    Rig::with_patterns(request, None, regex).launched(OnTerm::Exit)
}

fn read(rig: &mut Rig, stream: Stream, bytes: &[u8]) {
    rig.feed(Input::Read { stream, bytes });
}

/// The `ready` and `not_ready` events: ready or not, probe, detail, after_ms.
fn decisions(rig: &Rig) -> Vec<(bool, String, String, u64)> {
    rig.journal()
        .filter_map(|e| match &e.kind {
            EventKind::Ready {
                probe,
                detail,
                after_ms,
            } => Some((true, probe.clone(), detail.clone(), *after_ms)),
            EventKind::NotReady {
                probe,
                detail,
                after_ms,
            } => Some((false, probe.clone(), detail.clone(), *after_ms)),
            _ => None,
        })
        .collect()
}

fn answer(rig: &mut Rig, attempt: u64, outcome: Result<&str, &str>) {
    let outcome = outcome.map(str::to_string).map_err(str::to_string);
    rig.feed(Input::ReadyTried { attempt, outcome });
}

#[test]
fn a_log_line_split_over_reads_on_stderr_makes_the_command_ready_once() {
    let mut rig = logging("listening on \\d+");
    rig.advance(ms(300));
    read(&mut rig, Stream::Stdout, b"starting\nlisten");
    read(&mut rig, Stream::Stderr, b"warming up\nlistening on ");
    assert!(decisions(&rig).is_empty(), "no complete line matches yet");
    rig.advance(ms(200));
    // Stdout's line in progress is its own: stderr's bytes do not complete it.
    read(&mut rig, Stream::Stdout, b"ing on nothing\n");
    assert!(decisions(&rig).is_empty());
    read(&mut rig, Stream::Stderr, b"8080\r\nlistening on 9090\n");
    assert_eq!(
        decisions(&rig),
        [(true, "log".into(), "listening on 8080".into(), 500)]
    );
    read(&mut rig, Stream::Stdout, b"listening on 1\n");
    assert_eq!(decisions(&rig).len(), 1, "ready once");
    assert!(rig.tries.is_empty(), "a log probe never asks for a try");
    let kinds = rig.kinds();
    let ready = kinds.iter().position(|k| *k == "ready").unwrap();
    assert_eq!(kinds[ready - 1], "output", "the line's output comes first");
    rig.command_ends(exited(0));
    rig.finish();
}

#[test]
fn tries_come_at_the_interval_one_at_a_time_and_a_pass_ends_them() {
    let mut rig = Rig::running(with_probe(tcp(), ms(500), None), OnTerm::Exit);
    rig.run_until(ms(499));
    assert!(
        rig.tries.is_empty(),
        "the first try is an interval after the spawn"
    );
    rig.run_until(ms(500));
    assert_eq!(rig.tries.len(), 1);
    let (attempt, kind, timeout, at) = rig.tries[0];
    assert_eq!(
        (attempt, kind, timeout, at),
        (1, "tcp", ms(2000), rig.t0 + ms(500))
    );
    // Unanswered, no second try is asked for, however long it takes.
    rig.run_until(ms(1700));
    assert_eq!(rig.tries.len(), 1);
    answer(&mut rig, 1, Err("connection refused"));
    rig.tick();
    assert_eq!(rig.tries.len(), 2, "the next try was due: asked at once");
    assert_eq!(rig.tries[1].3, rig.t0 + ms(1700));
    answer(&mut rig, 2, Err("connection refused"));
    rig.run_until(ms(2199));
    assert_eq!(rig.tries.len(), 2);
    rig.run_until(ms(2200));
    assert_eq!(rig.tries.len(), 3);
    // A late answer to an earlier try is no news.
    answer(&mut rig, 2, Ok("connected to 127.0.0.1:8080"));
    assert!(decisions(&rig).is_empty());
    rig.advance(ms(20));
    answer(&mut rig, 3, Ok("connected to 127.0.0.1:8080"));
    assert_eq!(
        decisions(&rig),
        [(
            true,
            "tcp".into(),
            "connected to 127.0.0.1:8080".into(),
            2220
        )]
    );
    assert!(!rig.broker.ready_probing(), "the pass ends the probing");
    rig.run_until(ms(60_000));
    assert_eq!(rig.tries.len(), 3, "no try after the pass");
    assert_eq!(rig.count("ready"), 1);
    rig.command_ends(exited(0));
    rig.finish();
}

#[test]
fn the_timeout_gives_up_with_the_last_failure_and_the_command_runs_on() {
    let probe = ReadyProbe::Http {
        url: "http://127.0.0.1:8080/health".into(),
    };
    let mut rig = Rig::running(with_probe(probe, ms(1000), Some(ms(3500))), OnTerm::Exit);
    for attempt in 1..=3 {
        rig.run_until(ms(1000 * attempt));
        assert_eq!(rig.tries.len() as u64, attempt);
        answer(&mut rig, attempt, Err("HTTP 503"));
    }
    rig.run_until(ms(3499));
    assert!(decisions(&rig).is_empty());
    assert!(rig.broker.ready_probing());
    rig.run_until(ms(3500));
    assert!(!rig.broker.ready_probing(), "giving up ends the probing");
    assert_eq!(
        decisions(&rig),
        [(false, "http".into(), "HTTP 503".into(), 3500)]
    );
    rig.run_until(ms(20_000));
    assert_eq!(rig.tries.len(), 3, "no try after giving up");
    assert!(
        rig.signals().is_empty(),
        "not ready is no reason to stop it"
    );
    rig.command_ends(exited(0));
    rig.finish();
}

#[test]
fn a_timeout_before_any_answer_says_timed_out() {
    let probe = ReadyProbe::Exec {
        shell: "pg_isready".into(),
    };
    let mut rig = Rig::running(with_probe(probe, ms(500), Some(ms(800))), OnTerm::Exit);
    rig.run_until(ms(800));
    assert_eq!(rig.tries.len(), 1);
    assert_eq!(
        decisions(&rig),
        [(false, "exec".into(), "timed out".into(), 800)]
    );
    answer(&mut rig, 1, Ok("exited 0"));
    assert_eq!(
        decisions(&rig).len(),
        1,
        "an answer after giving up is no news"
    );
    rig.command_ends(exited(0));
    rig.finish();
}

#[test]
fn the_command_exiting_ends_the_probing() {
    let mut rig = Rig::running(with_probe(tcp(), ms(500), Some(ms(5000))), OnTerm::Exit);
    rig.run_until(ms(500));
    assert_eq!(rig.tries.len(), 1);
    assert!(rig.broker.ready_probing());
    rig.command_ends(exited(1));
    assert!(!rig.broker.ready_probing(), "the exit ends the probing");
    answer(&mut rig, 1, Ok("connected to 127.0.0.1:8080"));
    rig.finish();
    assert_eq!(rig.tries.len(), 1, "no try once it exited");
    assert!(
        decisions(&rig).is_empty(),
        "neither ready nor not_ready: {:?}",
        rig.kinds()
    );
}

#[test]
fn output_after_the_exit_proves_nothing() {
    let mut rig = logging("^ready$");
    rig.command_ends(exited(0));
    read(&mut rig, Stream::Stdout, b"ready\n");
    rig.finish();
    assert!(decisions(&rig).is_empty());
}

#[test]
fn an_interval_of_zero_is_taken_as_the_shortest() {
    let mut rig = Rig::running(with_probe(tcp(), Duration::ZERO, None), OnTerm::Exit);
    rig.run_until(ms(49));
    assert!(rig.tries.is_empty());
    rig.run_until(ms(50));
    assert_eq!(rig.tries.len(), 1);
    answer(&mut rig, 1, Err("connection refused"));
    rig.tick();
    assert_eq!(rig.tries.len(), 1, "the next try waits its interval");
    rig.command_ends(exited(0));
    rig.finish();
}

#[test]
fn the_operators_stop_ends_the_probing_with_a_try_going() {
    let mut rig = Rig::running(with_probe(tcp(), ms(500), None), OnTerm::Exit);
    rig.run_until(ms(500));
    assert_eq!(rig.tries.len(), 1);
    assert!(rig.broker.ready_probing());
    rig.feed(from_parent(crate::protocol::Request::Stop { origin: None }));
    assert!(!rig.broker.ready_probing(), "a stop ends the probing");
    answer(&mut rig, 1, Ok("connected to 127.0.0.1:8080"));
    rig.run_until(ms(5000));
    assert_eq!(rig.tries.len(), 1, "no try once stopping");
    assert!(decisions(&rig).is_empty(), "{:?}", rig.kinds());
    rig.reap();
    rig.finish();
}

#[test]
fn a_budgets_stop_ends_the_probing_with_a_try_going() {
    let request = LaunchRequest {
        budgets: crate::protocol::Budgets {
            max_time: Some(ms(1200)),
            ..Default::default()
        },
        ..with_probe(tcp(), ms(500), None)
    };
    let mut rig = Rig::running(request, OnTerm::Exit);
    rig.run_until(ms(1000));
    answer(&mut rig, 1, Err("connection refused"));
    rig.tick();
    assert_eq!(rig.tries.len(), 2);
    assert!(rig.broker.ready_probing());
    rig.run_until(ms(1200));
    assert_eq!(rig.count("budget_exceeded"), 1, "{:?}", rig.kinds());
    assert!(
        !rig.broker.ready_probing(),
        "a budget's stop ends the probing"
    );
    answer(&mut rig, 2, Ok("connected to 127.0.0.1:8080"));
    assert!(decisions(&rig).is_empty(), "{:?}", rig.kinds());
    rig.reap();
    rig.finish();
}
