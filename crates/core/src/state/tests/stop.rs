//! Stops: asked for, by the watchdog, by a final drain, by a signal to the broker; TERM
//! heeded or not, stragglers during grace, KILL after it, and when a stop is over.

use super::*;
use crate::protocol::{Origin, Request, Stream};

fn stop_request() -> Input<'static> {
    from_parent(Request::Stop { origin: None })
}

#[test]
fn a_stop_is_journaled_as_it_starts_then_term_and_cont_to_the_tree() {
    let mut rig = Rig::running(request(), OnTerm::Exit);
    rig.feed(stop_request());
    let kinds = rig.kinds();
    assert_eq!(
        &kinds[1..],
        ["stop_started", "signal_sent", "signal_sent"],
        "{kinds:?}"
    );
    let started = rig
        .journal()
        .find_map(|e| match e.kind {
            EventKind::StopStarted { origin, grace } => Some((origin, grace)),
            _ => None,
        })
        .unwrap();
    assert_eq!(started, (Origin::Operator, Duration::from_secs(1)));
    assert_eq!(
        rig.signals(),
        [("TERM".into(), vec![CMD]), ("CONT".into(), vec![CMD])]
    );
}

#[test]
fn a_command_that_heeds_term_ends_the_stop_without_a_kill() {
    let mut rig = Rig::running(request(), OnTerm::Exit);
    rig.feed(stop_request());
    rig.reap();
    rig.finish();
    assert_eq!(rig.count("hard_kill"), 0);
    let result = rig.result();
    assert_eq!(result.stopped_by, Some(Origin::Operator));
    assert_eq!(result.exit.and_then(|s| s.signal), Some(15));
    assert!(!result.hard_killed);
    assert!(
        rig.now - rig.t0 < ms(1000),
        "no wait for grace: {:?}",
        rig.now - rig.t0
    );
}

#[test]
fn a_command_that_ignores_term_is_killed_when_grace_is_over() {
    let mut rig = Rig::running(request(), OnTerm::Ignore);
    rig.feed(stop_request());
    rig.run_until(ms(999));
    assert_eq!(rig.count("hard_kill"), 0, "still in grace");
    rig.run_until(ms(1000));
    let after = rig
        .journal()
        .find_map(|e| match e.kind {
            EventKind::HardKill { after_ms } => Some(after_ms),
            _ => None,
        })
        .expect("hard_kill");
    assert_eq!(after, 1000);
    assert_eq!(rig.signals().last().unwrap(), &("KILL".into(), vec![CMD]));
    assert_eq!(rig.unflushed, 0, "the KILL is in the journal at once");
    rig.reap();
    rig.finish();
    assert!(rig.result().hard_killed);
    assert_eq!(rig.result().exit.and_then(|s| s.signal), Some(9));
}

#[test]
fn processes_forked_during_grace_get_term_at_the_next_sweep() {
    let mut rig = Rig::running(request(), OnTerm::Ignore);
    rig.feed(stop_request());
    rig.world.borrow_mut().spawn(101, OnTerm::Ignore);
    // The first sweep comes 25 ms after the TERM, delayed by up to 100 ms of jitter.
    rig.run_until(ms(126));
    assert_eq!(rig.signals()[2], ("TERM".into(), vec![101]));
    // Swept again and again, but reported once.
    rig.run_until(ms(900));
    assert_eq!(rig.count("signal_sent"), 3);
    assert!(
        rig.world.borrow().walks == 0,
        "no tree record while stopping"
    );
}

#[test]
fn stragglers_left_after_the_command_exits_are_killed_and_the_stop_waits_for_them() {
    let mut rig = Rig::running(request(), OnTerm::Exit);
    rig.world.borrow_mut().spawn(101, OnTerm::Ignore);
    rig.feed(stop_request());
    rig.reap();
    assert_eq!(rig.count("exit"), 1);
    rig.close_pipes();
    rig.run_until(ms(900));
    assert!(!rig.broker.is_done(), "101 runs on, in grace");
    rig.run_until(ms(1000));
    assert_eq!(rig.signals().last().unwrap(), &("KILL".into(), vec![101]));
    assert!(!rig.broker.is_done(), "101 is not reaped yet");
    // Its SIGCHLD: the interpreter reaps it, nothing is left, the stop is over; the next
    // wake-up finds the broker done.
    rig.reap();
    assert_eq!(rig.count("orphan_reaped"), 1);
    rig.tick();
    assert!(rig.broker.is_done());
    rig.feed(Input::Finish);
    assert_eq!(rig.result().orphans_reaped, 1);
    assert!(rig.result().hard_killed);
}

#[test]
fn after_the_kill_only_newcomers_are_reported() {
    let mut rig = Rig::running(request(), OnTerm::Ignore);
    rig.feed(stop_request());
    rig.run_until(ms(1000));
    let signals = rig.count("signal_sent");
    rig.run_until(ms(1100));
    assert_eq!(rig.count("signal_sent"), signals, "nothing new");
    rig.world.borrow_mut().spawn(102, OnTerm::Ignore);
    rig.run_until(ms(1600));
    assert_eq!(rig.signals().last().unwrap(), &("KILL".into(), vec![102]));
}

#[test]
fn a_second_stop_while_stopping_sends_nothing_more() {
    let mut rig = Rig::running(request(), OnTerm::Ignore);
    rig.feed(stop_request());
    rig.feed(stop_request());
    rig.feed(Input::Shutdown { sender: None });
    assert_eq!(rig.count("stop_started"), 1);
    assert_eq!(rig.count("signal_sent"), 2);
}

/// Claude Code ends a background task by a TERM to every process of its tree: a shim's
/// broker that its caller (a custodian the request names) signals stops the command as the
/// caller's doing. Another sender, or a broker of a front end that stands in for nobody,
/// stops it as a shutdown.
#[test]
fn a_stop_signal_from_the_shims_caller_is_the_callers() {
    use crate::protocol::{Custodian, CustodianRole, LeftoversRule};
    let shim = |caller_stand_in| LaunchRequest {
        caller_stand_in,
        leftovers: LeftoversRule {
            keep: true,
            custodians: vec![Custodian {
                pid: 4242,
                start_ticks: 7,
                role: CustodianRole::Caller,
            }],
            ..LeftoversRule::default()
        },
        ..request()
    };
    for (request, sender, origin) in [
        (shim(true), Some(4242), Origin::Caller),
        (shim(true), Some(4243), Origin::Shutdown),
        (shim(true), None, Origin::Shutdown),
        (shim(false), Some(4242), Origin::Shutdown),
    ] {
        let mut rig = Rig::running(request, OnTerm::Exit);
        rig.feed(Input::Shutdown { sender });
        rig.reap();
        rig.finish();
        assert_eq!(rig.result().stopped_by, Some(origin), "sender {sender:?}");
    }
}

#[test]
fn a_signal_to_the_broker_stops_the_command_as_a_shutdown() {
    // The command itself may send it (`kill $PPID`): the broker stops it all the same.
    let mut rig = Rig::running(request(), OnTerm::Exit);
    rig.feed(Input::Shutdown { sender: None });
    rig.reap();
    assert_eq!(rig.finish(), 0);
    assert_eq!(rig.result().stopped_by, Some(Origin::Shutdown));
}

#[test]
fn the_stop_origin_asked_by_the_parent_is_kept() {
    let mut rig = Rig::running(request(), OnTerm::Exit);
    rig.feed(from_parent(Request::Stop {
        origin: Some(Origin::Watchdog),
    }));
    rig.reap();
    rig.finish();
    assert_eq!(rig.result().stopped_by, Some(Origin::Watchdog));
}

#[test]
fn a_stop_after_the_end_does_nothing() {
    let mut rig = Rig::running(request(), OnTerm::Exit);
    rig.command_ends(exited(0));
    rig.finish();
    let before = rig.lines.len();
    rig.feed(stop_request());
    assert_eq!(rig.lines.len(), before);
}

#[test]
fn the_first_sweep_is_delayed_by_at_most_the_jitter() {
    let mut rig = Rig::running(request(), OnTerm::Ignore);
    rig.feed(stop_request());
    let wake = rig.broker.poll_timeout().unwrap();
    assert!(
        wake >= rig.now + ms(25) && wake <= rig.now + ms(125),
        "{wake:?}"
    );
}

/// A command with a no-output timeout of 500 ms.
fn watched() -> Rig {
    let request = LaunchRequest {
        no_output_timeout: Some(Duration::from_millis(500)),
        ..request()
    };
    Rig::running(request, OnTerm::Exit)
}

#[test]
fn a_silent_command_is_stopped_by_the_watchdog() {
    let mut rig = watched();
    rig.run_until(ms(499));
    assert_eq!(rig.count("response_timeout"), 0);
    rig.run_until(ms(500));
    let kinds = rig.kinds();
    let at = kinds.iter().position(|k| *k == "response_timeout").unwrap();
    assert_eq!(kinds[at + 1], "stop_started");
    rig.reap();
    rig.finish();
    assert!(rig.result().response_timeout);
    assert_eq!(rig.result().stopped_by, Some(Origin::Watchdog));
}

#[test]
fn output_puts_the_watchdog_off() {
    let mut rig = watched();
    rig.run_until(ms(400));
    rig.feed(Input::Read {
        stream: Stream::Stderr,
        bytes: b"alive\n",
    });
    rig.run_until(ms(899));
    assert_eq!(rig.count("response_timeout"), 0);
    rig.run_until(ms(900));
    assert_eq!(rig.count("response_timeout"), 1);
}

#[test]
fn the_watchdog_sleeps_once_the_command_exited() {
    let mut rig = watched();
    rig.command_ends(exited(0));
    rig.run_until(ms(5000));
    assert_eq!(rig.count("response_timeout"), 0);
}

fn drained_request() -> (LaunchRequest, Option<regex::bytes::Regex>) {
    let request = LaunchRequest {
        drain_on: Some("^done$".into()),
        drain: Some(Duration::from_millis(300)),
        ..request()
    };
    let regex = crate::final_drain::compile("^done$").unwrap();
    (request, Some(regex))
}

#[test]
fn a_final_line_starts_the_drain_and_a_command_still_running_after_it_is_stopped() {
    let (request, regex) = drained_request();
    let mut rig = Rig::with_drain(request, regex).launched(OnTerm::Exit);
    rig.feed(Input::Read {
        stream: Stream::Stdout,
        bytes: b"working\ndone\n",
    });
    let kinds = rig.kinds();
    assert_eq!(
        &kinds[1..],
        ["output", "final_drain"],
        "the line's output first"
    );
    rig.run_until(ms(299));
    assert_eq!(rig.count("stop_started"), 0);
    rig.run_until(ms(300));
    assert_eq!(rig.count("stop_started"), 1);
    rig.reap();
    rig.finish();
    assert!(rig.result().drained);
    assert_eq!(rig.result().stopped_by, Some(Origin::FinalDrain));
}

#[test]
fn the_final_line_on_stderr_or_mid_stop_is_not_watched_for() {
    let (request, regex) = drained_request();
    let mut rig = Rig::with_drain(request, regex).launched(OnTerm::Ignore);
    rig.feed(Input::Read {
        stream: Stream::Stderr,
        bytes: b"done\n",
    });
    rig.feed(stop_request());
    rig.feed(Input::Read {
        stream: Stream::Stdout,
        bytes: b"done\n",
    });
    assert_eq!(rig.count("final_drain"), 0);
}

#[test]
fn a_command_that_exits_within_the_drain_period_is_not_stopped() {
    let (request, regex) = drained_request();
    let mut rig = Rig::with_drain(request, regex).launched(OnTerm::Exit);
    rig.feed(Input::Read {
        stream: Stream::Stdout,
        bytes: b"done\n",
    });
    rig.run_until(ms(200));
    rig.command_ends(exited(0));
    assert_eq!(rig.finish(), 0);
    assert_eq!(rig.count("stop_started"), 0);
    assert!(!rig.result().drained);
}

#[test]
fn input_typed_before_a_stop_is_journaled_before_it() {
    let mut rig = Rig::running(request(), OnTerm::Exit);
    rig.feed(Input::Typed(crate::reports::InputTaken {
        bytes: 4,
        dropped: 0,
    }));
    rig.feed(stop_request());
    assert_eq!(&rig.kinds()[1..3], ["input", "stop_started"]);
}

#[test]
fn each_step_is_a_plan_and_its_delivery_is_journaled_with_its_targets() {
    let mut rig = Rig::running(request(), OnTerm::Ignore);
    rig.world.borrow_mut().spawn(101, OnTerm::Ignore);
    rig.feed(stop_request());
    assert_eq!(
        rig.plans,
        [(ProcessSignal::TERM, true)],
        "the first plan: TERM and CONT"
    );
    assert_eq!(
        rig.signals(),
        [
            ("TERM".into(), vec![CMD, 101]),
            ("CONT".into(), vec![CMD, 101])
        ]
    );
    // Sweeps during grace are plans too; what reached nobody new is not journaled.
    rig.run_until(ms(999));
    assert!(rig.plans.len() > 1);
    assert!(
        rig.plans[1..]
            .iter()
            .all(|p| *p == (ProcessSignal::TERM, true))
    );
    assert_eq!(rig.count("signal_sent"), 2);
    // Grace over: the KILL plan, its delivery journaled after `hard_kill`.
    rig.run_until(ms(1000));
    assert_eq!(rig.plans.last(), Some(&(ProcessSignal::KILL, false)));
    let kinds = rig.kinds();
    assert_eq!(
        kinds[kinds.len() - 2..],
        ["hard_kill", "signal_sent"],
        "{kinds:?}"
    );
    assert_eq!(
        rig.signals().last().unwrap(),
        &("KILL".into(), vec![CMD, 101])
    );
    assert!(rig.result.is_none());
    rig.reap();
    rig.finish();
    assert!(rig.result().hard_killed);
}

#[test]
fn a_delivery_with_no_stop_running_is_ignored() {
    let mut rig = Rig::running(request(), OnTerm::Ignore);
    let (_, plan) = crate::stop::StopSequence::begin(Origin::Operator, ms(10), rig.now);
    let delivered = plan.deliver(
        &mut FakeKernel(rig.world.clone()),
        &TreeWalk::below(BROKER),
        Some(CMD),
    );
    let before = rig.kinds().len();
    rig.feed(Input::Signalled(delivered));
    assert_eq!(rig.kinds().len(), before, "nothing journaled");
}
