//! Whole lives without a stop: exit, a signal from outside, a spawn failure, the drain of
//! the pipes after the exit, orphans, the parent's heartbeat.

use super::*;
use crate::protocol::{Origin, ParentLossCause, Request, Stream};

#[test]
fn a_command_that_exits_is_journaled_from_spawn_to_close() {
    let mut rig = Rig::running(request(), OnTerm::Exit);
    rig.feed(Input::Happened(EventKind::BrokerStarted {
        v: PROTOCOL_VERSION,
        broker_pid: BROKER,
        control_socket: None,
    }));
    rig.command_ends(exited(0));
    assert_eq!(rig.finish(), 0);
    assert_eq!(
        rig.kinds(),
        ["spawned", "broker_started", "exit", "close"],
        "the interpreter's own news is journaled as it comes"
    );
    let result = rig.result();
    assert_eq!(result.exit, Some(exited(0)));
    assert_eq!(result.pid, Some(CMD));
    assert_eq!(result.stopped_by, None);
    assert!(rig.world.borrow().sent.is_empty(), "nothing was signalled");
    assert!(
        rig.lines.iter().all(|l| l.parent),
        "the parent hears it all"
    );
}

/// `result.json` says the command is over: a reader that finds it finds every event
/// before `close` in the event log too (the exit, the last tree, what attention said), not
/// still in the writer's buffer.
#[test]
fn the_events_are_flushed_before_the_result_is_written() {
    let mut rig = Rig::running(request(), OnTerm::Exit);
    rig.closing_record = Some(EventKind::Tree {
        processes: Vec::new(),
    });
    rig.command_ends(exited(3));
    assert_eq!(rig.finish(), 0);
    assert_eq!(rig.count("tree"), 1, "{:?}", rig.kinds());
    assert_eq!(rig.unflushed_at_result, Some(0), "{:?}", rig.kinds());
}

#[test]
fn an_exit_code_and_a_signal_from_outside_are_the_commands_own() {
    let mut rig = Rig::running(request(), OnTerm::Exit);
    rig.command_ends(exited(3));
    rig.finish();
    assert_eq!(rig.result().exit, Some(exited(3)));

    let mut rig = Rig::running(request(), OnTerm::Exit);
    rig.command_ends(killed_by(ProcessSignal::parse("SEGV").unwrap()));
    assert_eq!(
        rig.finish(),
        0,
        "a crash is the command's end, not the broker's"
    );
    assert_eq!(rig.result().exit.and_then(|s| s.signal), Some(11));
    assert!(!rig.result().hard_killed);
}

#[test]
fn a_spawn_failure_ends_the_broker_at_once_with_the_failure_recorded() {
    let mut rig = Rig::new(request());
    rig.feed(Input::SpawnFailed {
        code: "not_found".into(),
        message: "cannot run `cmd`".into(),
    });
    assert!(rig.broker.is_done());
    rig.feed(Input::Finish);
    assert_eq!(rig.exit, Some(0));
    assert_eq!(rig.kinds(), ["spawn_error", "close"]);
    let failure = rig.result().failure.clone().expect("a failure");
    assert_eq!(failure.code, "not_found");
    assert_eq!(rig.result().cpu_ms, None, "nothing ran: no cost");
}

#[test]
fn output_after_the_exit_is_read_until_the_pipes_are_quiet() {
    // 101 outlives the command and writes on: it is stopped once the pipes were quiet for
    // 100 ms, each chunk putting that moment off.
    let mut rig = Rig::running(request(), OnTerm::Exit);
    rig.world.borrow_mut().spawn(101, OnTerm::Exit);
    rig.command_ends(exited(0));
    rig.run_until(ms(60));
    rig.feed(Input::Read {
        stream: Stream::Stdout,
        bytes: b"late",
    });
    rig.run_until(ms(159));
    assert_eq!(rig.count("stop_started"), 0, "{:?}", rig.kinds());
    rig.run_until(ms(160));
    assert_eq!(rig.count("stop_started"), 1);
    assert_eq!(rig.count("output"), 1);
    rig.finish();
    assert_eq!(rig.result().stdout.bytes, 4);
    assert_eq!(rig.result().stopped_by, Some(Origin::Leftovers));
}

#[test]
fn a_tree_that_writes_without_end_after_the_exit_is_stopped_after_two_seconds() {
    let mut rig = Rig::running(request(), OnTerm::Exit);
    rig.world.borrow_mut().spawn(101, OnTerm::Exit);
    rig.command_ends(exited(0));
    for step in 1..=40 {
        rig.run_until(ms(step * 50));
        if rig.count("stop_started") > 0 {
            break;
        }
        rig.feed(Input::Read {
            stream: Stream::Stderr,
            bytes: b".",
        });
    }
    assert_eq!(rig.count("stop_started"), 1);
    assert_eq!(rig.now - rig.t0, ms(2000), "the drain's cap");
}

#[test]
fn pipes_held_open_by_nothing_left_are_given_up_after_the_wait_for_their_end() {
    let mut rig = Rig::running(request(), OnTerm::Exit);
    rig.command_ends(exited(0));
    // Somebody outside the tree holds the pipes: nothing to stop, nothing to wait for.
    rig.run_until(ms(5_000));
    assert!(rig.broker.is_done());
    assert!(rig.now - rig.t0 >= ms(1_000), "the wait for end of file");
    assert!(rig.world.borrow().sent.is_empty());
}

#[test]
fn an_orphan_reaped_is_journaled_and_counted() {
    let mut rig = Rig::running(request(), OnTerm::Exit);
    rig.world.borrow_mut().spawn(101, OnTerm::Exit);
    rig.world.borrow_mut().end(101, exited(0));
    rig.reap();
    assert_eq!(rig.count("orphan_reaped"), 1);
    rig.command_ends(exited(0));
    rig.finish();
    assert_eq!(rig.result().orphans_reaped, 1);
}

#[test]
fn children_reaped_together_are_journaled_in_the_kernels_order_with_where_they_were() {
    let mut rig = Rig::running(request(), OnTerm::Exit);
    // As the interpreter reads them: an orphan that left the command's group and session,
    // then the command, then an orphan whose place could not be read.
    let escapee = ProcStat {
        pid: 101,
        pgid: 101,
        sid: 101,
        ..ProcStat::default()
    };
    rig.feed(Input::Reaped {
        children: vec![
            Reaped {
                pid: 101,
                status: exited(0),
                place: Some(escapee),
                tether_cgroup: None,
            },
            Reaped {
                pid: CMD,
                status: exited(2),
                place: None,
                tether_cgroup: None,
            },
            Reaped {
                pid: 102,
                status: killed_by(ProcessSignal::TERM),
                place: None,
                tether_cgroup: None,
            },
        ],
        children_left: false,
        cgroup: None,
    });
    let reaped: Vec<(i32, Option<bool>)> = rig
        .journal()
        .filter_map(|e| match e.kind {
            EventKind::OrphanReaped { pid, escaped, .. } => Some((pid, escaped)),
            EventKind::Exit { pid, .. } => Some((pid, None)),
            _ => None,
        })
        .collect();
    assert_eq!(reaped, [(101, Some(true)), (CMD, None), (102, None)]);
    assert_eq!(rig.kinds()[1..], ["orphan_reaped", "exit", "orphan_reaped"]);
    assert_eq!(rig.result.as_ref().map(|r| r.orphans_reaped), None);
    rig.world.borrow_mut().alive.clear();
    rig.finish();
    assert_eq!(rig.result().orphans_reaped, 2);
    assert_eq!(rig.result().exit, Some(exited(2)));
}

#[test]
fn whether_a_child_is_left_is_the_interpreters_word_after_its_reaping() {
    let mut rig = Rig::running(request(), OnTerm::Ignore);
    rig.feed(from_parent(Request::Stop { origin: None }));
    // The command is reaped, but a child is left: the stop goes on.
    rig.feed(Input::Reaped {
        children: vec![Reaped {
            pid: CMD,
            status: exited(0),
            place: None,
            tether_cgroup: None,
        }],
        children_left: true,
        cgroup: None,
    });
    assert!(!rig.broker.stop_done, "a child is left");
    // The next reaping finds none: the stop is over, without another walk or signal.
    let sent = rig.world.borrow().sent.len();
    rig.feed(Input::Reaped {
        children: Vec::new(),
        children_left: false,
        cgroup: None,
    });
    assert!(rig.broker.stop_done);
    assert_eq!(rig.world.borrow().sent.len(), sent);
}

#[test]
fn the_journal_starts_the_clock_at_the_broker_and_follows_the_input_time() {
    let mut rig = Rig::running(request(), OnTerm::Exit);
    rig.now += ms(250);
    rig.command_ends(exited(0));
    let exit = rig.journal().find(|e| e.kind.name() == "exit").unwrap();
    assert_eq!(exit.mono_us, 250_000);
    // A clock read that went back does not take the broker's with it.
    rig.now -= ms(100);
    rig.feed(Input::Happened(EventKind::ParentUnresponsive {
        silent_ms: 1,
    }));
    assert_eq!(rig.lines.last().unwrap().event.mono_us, 250_000);
}

#[test]
fn a_parent_silent_for_three_heartbeats_is_journaled_once_and_a_ping_answers_it() {
    let mut rig = Rig::running(
        LaunchRequest {
            heartbeat: Some(Duration::from_millis(100)),
            ..request()
        },
        OnTerm::Exit,
    );
    rig.advance(ms(299));
    assert_eq!(rig.count("parent_unresponsive"), 0);
    rig.advance(ms(1));
    rig.advance(ms(500));
    assert_eq!(rig.count("parent_unresponsive"), 1, "said once");
    rig.feed(from_parent(Request::Ping));
    // A pong goes to the parent alone: not journaled, not to subscribers.
    let pong = rig.lines.last().unwrap();
    assert_eq!(pong.event.kind.name(), "pong");
    assert!(pong.parent && !pong.journal && !pong.subscribers);
    rig.advance(ms(300));
    assert_eq!(rig.count("parent_unresponsive"), 2, "silent again");
    assert!(
        rig.world.borrow().sent.is_empty(),
        "silence alone stops nothing"
    );
}

#[test]
fn a_lost_parent_stops_the_command_and_the_broker_exits_1() {
    for cause in [
        ParentLossCause::StdinEof,
        ParentLossCause::Pidfd,
        ParentLossCause::Pdeathsig,
        ParentLossCause::Epipe,
    ] {
        let mut rig = Rig::running(request(), OnTerm::Exit);
        rig.feed(Input::ParentLost(cause));
        let lost = rig
            .journal()
            .find_map(|e| match e.kind {
                EventKind::ParentLost { cause } => Some(cause),
                _ => None,
            })
            .expect("parent_lost");
        assert_eq!(lost, cause);
        assert_eq!(rig.signals()[0], ("TERM".into(), vec![CMD]));
        // Nothing more goes to a parent that is gone, from the loss on.
        let lost_at = rig
            .lines
            .iter()
            .position(|l| l.event.kind.name() == "parent_lost")
            .unwrap();
        assert!(rig.lines[lost_at..].iter().all(|l| !l.parent));
        rig.reap();
        assert_eq!(rig.finish(), 1, "{cause:?}");
        assert!(rig.result().parent_lost);
        assert_eq!(rig.result().stopped_by, Some(Origin::ParentLost));
    }
}

/// The front end of `tether exec` and of the shell shim stands in for its caller: its loss
/// (an agent's SIGKILL to the group it started the shim in) is journaled as a loss, and the
/// stop that follows is the caller's, as that kill would have ended the command bare.
#[test]
fn a_stand_ins_loss_is_its_callers_stop() {
    let request = LaunchRequest {
        caller_stand_in: true,
        ..request()
    };
    let mut rig = Rig::running(request, OnTerm::Exit);
    rig.feed(Input::ParentLost(ParentLossCause::Pidfd));
    assert_eq!(rig.count("parent_lost"), 1);
    let stops: Vec<Origin> = (rig.journal())
        .filter_map(|e| match e.kind {
            EventKind::StopStarted { origin, .. } => Some(origin),
            _ => None,
        })
        .collect();
    assert_eq!(stops, [Origin::Caller]);
    assert_eq!(rig.signals()[0], ("TERM".into(), vec![CMD]));
    rig.reap();
    assert_eq!(rig.finish(), 1);
    assert!(rig.result().parent_lost);
    assert_eq!(rig.result().stopped_by, Some(Origin::Caller));
}

#[test]
fn a_parent_lost_twice_is_journaled_once() {
    let mut rig = Rig::running(request(), OnTerm::Ignore);
    rig.feed(Input::ParentLost(ParentLossCause::Pidfd));
    rig.feed(Input::ParentLost(ParentLossCause::StdinEof));
    assert_eq!(rig.count("parent_lost"), 1);
    assert_eq!(rig.count("stop_started"), 1);
}

#[test]
fn a_broker_whose_parent_is_gone_before_the_launch_runs_nothing() {
    let mut rig = Rig::new(request());
    rig.feed(Input::ParentLost(ParentLossCause::Pidfd));
    rig.feed(Input::SpawnFailed {
        code: "parent_lost".into(),
        message: "gone".into(),
    });
    rig.feed(Input::Finish);
    assert_eq!(rig.exit, Some(1));
    assert_eq!(rig.count("stop_started"), 0, "nothing to stop");
}

#[test]
fn only_a_process_out_of_the_group_and_session_escaped() {
    use crate::state::escaped;
    let at = |pgid, sid| ProcStat {
        pid: 50,
        ppid: 1,
        pgid,
        sid,
        state: b'Z',
        start_ticks: 0,
        ..ProcStat::default()
    };
    // Pipes: the command (group 10) shares the broker's session (5).
    // Re-parented when its parent ended, still in the command's group: no escapee.
    assert_eq!(escaped(Some(&at(10, 5)), 10), Some(false));
    // setsid: a session and a group of its own.
    assert_eq!(escaped(Some(&at(50, 50)), 10), Some(true));
    // setpgid: out of the group, in the broker's session.
    assert_eq!(escaped(Some(&at(50, 5)), 10), Some(true));
    // A terminal: the command leads session 10; a job in group 50 of it is no escapee.
    assert_eq!(escaped(Some(&at(50, 10)), 10), Some(false));
    assert_eq!(escaped(None, 10), None);
}

#[test]
fn a_stream_that_cannot_be_read_is_said_and_the_command_runs_on() {
    let mut rig = Rig::running(request(), OnTerm::Exit);
    rig.feed(Input::ReadFailed {
        stream: Stream::Stderr,
        error: std::io::Error::from_raw_os_error(EIO),
    });
    let failure = rig.journal().find_map(|e| match &e.kind {
        EventKind::BrokerFailure { stage, code, .. } => Some((*stage, code.clone())),
        _ => None,
    });
    assert_eq!(
        failure,
        Some((crate::protocol::Stage::Stdio, "read".to_string()))
    );
    assert!(rig.world.borrow().sent.is_empty());
    assert!(!rig.broker.is_done());
}

#[test]
fn a_change_in_the_cgroup_brings_the_next_walk_of_the_tree_within_a_second() {
    let mut rig = Rig::running(request(), OnTerm::Exit);
    rig.run_until(ms(20_000));
    let walks = rig.world.borrow().walks;
    let quiet_wake = rig.broker.poll_timeout().unwrap();
    rig.feed(Input::CgroupChanged(None));
    let wake = rig.broker.poll_timeout().unwrap();
    assert!(wake < quiet_wake && wake <= rig.now + ms(1000), "{wake:?}");
    rig.run_until(rig.now - rig.t0 + ms(1_000));
    assert!(rig.world.borrow().walks > walks);
}

#[test]
fn a_front_end_let_go_is_no_longer_expected_to_ping() {
    let mut rig = Rig::running(
        LaunchRequest {
            heartbeat: Some(Duration::from_millis(100)),
            leftovers: crate::protocol::LeftoversRule {
                keep: true,
                ..Default::default()
            },
            ..request()
        },
        OnTerm::Exit,
    );
    rig.world.borrow_mut().spawn(101, OnTerm::Exit);
    rig.command_ends(exited(0));
    rig.close_pipes();
    rig.tick();
    assert_eq!(rig.let_go, 1);
    rig.run_until(ms(5_000));
    assert_eq!(rig.count("parent_unresponsive"), 0);
}

#[test]
fn end_of_file_on_both_streams_after_the_exit_ends_the_broker_without_waiting() {
    let mut rig = Rig::running(request(), OnTerm::Exit);
    rig.command_ends(exited(0));
    rig.feed(Input::Closed {
        stream: Stream::Stdout,
    });
    rig.tick();
    assert!(!rig.broker.is_done(), "stderr is still open");
    rig.feed(Input::Closed {
        stream: Stream::Stderr,
    });
    rig.tick();
    assert!(rig.broker.is_done());
    assert_eq!(rig.now, rig.t0, "no wait for quiet or for end of file");
}
