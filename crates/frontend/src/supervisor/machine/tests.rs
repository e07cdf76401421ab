//! The conversation's fallbacks on a fake clock and a fake world: no broker, no pipe, no
//! sleep. Each test says what the machine asks for at which instant.

use std::time::{Duration, Instant};

use super::*;
use crate::supervisor::liveness::{UNANSWERED_IF_STOPPED, UNANSWERED_IF_WORKING, UNANSWERED_LIMIT};
use tether_protocol::protocol::{ExitStatus, ProcessSignal, Scope, Stream, fixtures};

const GRACE: Duration = Duration::from_secs(2);
const MS: Duration = Duration::from_millis(1);

impl ConversationMachine {
    /// Whether lines the broker wrote before a deadline found passed are still unread.
    fn lines_waiting(&self) -> bool {
        self.unread_before_due.is_some_and(|unread| unread > 0)
    }

    /// How many messages the broker answers went out: the number of the answer that
    /// acknowledges the last of them.
    fn posted(&self) -> u64 {
        self.acks.posted
    }
}

/// What the fake world answers to the actions that ask it something.
struct World {
    /// The kernel shows the broker stopped.
    stopped: bool,
    /// The kernel shows the broker in an uninterruptible wait (`D`).
    disk_wait: bool,
    /// The kernel shows the broker running or waiting for a core (`R`).
    runnable: bool,
    /// Its CPU time.
    cpu_ticks: u64,
    /// Lines the broker wrote and nobody read yet.
    unread: usize,
    /// Writes fail: the broker's end is gone.
    gone: bool,
}

impl World {
    fn well() -> World {
        World {
            stopped: false,
            disk_wait: false,
            runnable: false,
            cpu_ticks: 0,
            unread: 0,
            gone: false,
        }
    }
}

/// Runs the machine's actions at `now` as a driver would, answering from `world`; returns
/// the actions that do something (writes included), in order.
fn drive(machine: &mut ConversationMachine, world: &World, now: Instant) -> Vec<Action> {
    let mut done = Vec::new();
    while let Some(action) = machine.poll_action() {
        match &action {
            Action::Write(_) if world.gone => machine.handle(Input::Unwritable, now),
            Action::Ping if !world.gone => machine.handle(Input::Pinged, now),
            Action::Look => machine.handle(
                Input::Looked(Seen {
                    stopped: world.stopped,
                    disk_wait: world.disk_wait,
                    runnable: world.runnable,
                    cpu_ticks: world.cpu_ticks,
                }),
                now,
            ),
            Action::CountUnread => machine.handle(Input::Unread(world.unread), now),
            _ => {}
        }
        if !matches!(action, Action::Look | Action::CountUnread) {
            done.push(action);
        }
    }
    done
}

/// A timer at `now`, driven.
fn wake(machine: &mut ConversationMachine, world: &World, now: Instant) -> Vec<Action> {
    machine.handle(Input::Timer, now);
    drive(machine, world, now)
}

fn given_up(actions: &[Action]) -> Option<End> {
    actions.iter().find_map(|a| match a {
        Action::GiveUp(end) => Some(*end),
        _ => None,
    })
}

fn machine(transport: Transport, pace: Pace, t0: Instant) -> ConversationMachine {
    ConversationMachine::new(transport, pace, GRACE, CommandCgroup::Expected(None), t0)
}

fn stop() -> Request {
    Request::Stop { origin: None }
}

fn pong(machine: &mut ConversationMachine, world: &World, now: Instant) -> Vec<Action> {
    machine.handle(Input::Line(Some(&EventKind::Pong)), now);
    drive(machine, world, now)
}

fn output(machine: &mut ConversationMachine, world: &World, now: Instant) -> Vec<Action> {
    let line = fixtures::output(0, Stream::Stdout, 0, 1).kind;
    machine.handle(Input::Line(Some(&line)), now);
    drive(machine, world, now)
}

#[test]
fn a_group_signal_not_acknowledged_is_sent_by_the_front_end() {
    let t0 = Instant::now();
    let world = World::well();
    let mut m = machine(Transport::Pipe, Pace::FLEET, t0);
    m.handle(
        Input::Request(&Request::group_signal(ProcessSignal::TERM)),
        t0,
    );
    assert_eq!(
        drive(&mut m, &world, t0),
        [
            Action::Write(Request::group_signal(ProcessSignal::TERM)),
            Action::Write(Request::Ping)
        ],
        "on a pipe, a ping follows the request: its pong is the acknowledgement"
    );
    assert_eq!(m.poll_timeout(), t0 + ACK_TIMEOUT);
    assert_eq!(wake(&mut m, &world, t0 + ACK_TIMEOUT - MS), []);
    assert_eq!(
        wake(&mut m, &world, t0 + ACK_TIMEOUT),
        [Action::SignalItself(ProcessSignal::TERM)]
    );
    // Taken: it is not sent twice.
    assert_eq!(wake(&mut m, &world, t0 + ACK_TIMEOUT * 2), []);
}

#[test]
fn an_acknowledged_signal_falls_back_to_nothing() {
    let t0 = Instant::now();
    let world = World::well();
    let mut m = machine(Transport::Pipe, Pace::FLEET, t0);
    m.handle(
        Input::Request(&Request::group_signal(ProcessSignal::KILL)),
        t0,
    );
    drive(&mut m, &world, t0);
    pong(&mut m, &world, t0 + ACK_TIMEOUT - MS);
    assert_eq!(wake(&mut m, &world, t0 + ACK_TIMEOUT * 3), []);
}

#[test]
fn an_answer_found_waiting_past_the_deadline_is_read_before_acting() {
    let t0 = Instant::now();
    let mut world = World::well();
    let mut m = machine(Transport::Pipe, Pace::FLEET, t0);
    m.handle(Input::Request(&stop()), t0);
    drive(&mut m, &world, t0);
    // The front end wakes late; two lines wait: the stop's report, then the pong.
    let late = t0 + ACK_TIMEOUT * 3;
    world.unread = 2;
    assert_eq!(wake(&mut m, &world, late), []);
    assert!(m.lines_waiting());
    output(&mut m, &world, late);
    assert_eq!(wake(&mut m, &world, late), [], "the pong waits unread");
    pong(&mut m, &world, late);
    assert_eq!(wake(&mut m, &world, late), [], "answered in time");

    // Only what waited then is read first: with no pong in it, the stop is unanswered.
    let mut m = machine(Transport::Pipe, Pace::FLEET, t0);
    m.handle(Input::Request(&stop()), t0);
    drive(&mut m, &world, t0);
    world.unread = 1;
    assert_eq!(wake(&mut m, &world, late), []);
    output(&mut m, &world, late);
    assert_eq!(
        given_up(&wake(&mut m, &world, late)),
        Some(End::StopUnanswered)
    );
}

#[test]
fn a_request_that_cannot_be_written_falls_back_at_once() {
    let t0 = Instant::now();
    let world = World {
        gone: true,
        ..World::well()
    };
    let mut m = machine(Transport::Pipe, Pace::FLEET, t0);
    m.handle(
        Input::Request(&Request::group_signal(ProcessSignal::TERM)),
        t0,
    );
    drive(&mut m, &world, t0);
    assert_eq!(m.poll_timeout(), t0);
    assert_eq!(
        wake(&mut m, &world, t0),
        [Action::SignalItself(ProcessSignal::TERM)]
    );
    // Nothing more is written to an end that is gone.
    m.handle(Input::Post(&Request::Ping), t0);
    assert_eq!(m.poll_action(), None);
}

#[test]
fn a_broker_that_stops_answering_is_given_up_after_its_looks() {
    let t0 = Instant::now();
    let world = World::well();
    // One that answers is pinged at the quiet pace, and never given up.
    let mut m = machine(Transport::Pipe, Pace::EXEC, t0);
    let mut pinged_at = Vec::new();
    for _ in 0..100 {
        let now = m.poll_timeout();
        let actions = wake(&mut m, &world, now);
        assert_eq!(given_up(&actions), None, "{now:?}");
        if actions.contains(&Action::Ping) {
            pinged_at.push(now - t0);
            pong(&mut m, &world, now + MS);
        }
    }
    assert_eq!(
        pinged_at[..2],
        [Pace::EXEC.quiet_ping, Pace::EXEC.quiet_ping * 2]
    );

    // One that goes silent: every look pings, and after UNANSWERED_LIMIT it is given up.
    let mut m = machine(Transport::Pipe, Pace::EXEC, t0);
    let mut pings = 0;
    let (ended, now) = loop {
        let now = m.poll_timeout();
        assert!(now - t0 < Pace::EXEC.look * 100, "never given up");
        let actions = wake(&mut m, &world, now);
        pings += actions.iter().filter(|a| **a == Action::Ping).count() as u32;
        if let Some(end) = given_up(&actions) {
            break (end, now);
        }
    };
    assert_eq!(ended, End::Unresponsive);
    assert_eq!(pings, UNANSWERED_LIMIT);
    assert_eq!(
        now,
        t0 + Pace::EXEC.quiet_ping + Pace::EXEC.look * UNANSWERED_LIMIT
    );
}

/// Wakes `m` at each of its timeouts, `world` answering, until it gives an unresponsive
/// broker up: when, and after how many wake-ups.
fn until_given_up(m: &mut ConversationMachine, world: &World) -> (Instant, u32) {
    let mut wakes = 0;
    loop {
        wakes += 1;
        let now = m.poll_timeout();
        if given_up(&wake(m, world, now)) == Some(End::Unresponsive) {
            return (now, wakes);
        }
        assert!(wakes < 1_000, "never given up");
    }
}

/// A broker whose single thread is in an uninterruptible wait (D: seen for seconds at a
/// time on a loaded machine, in pipe writes among others) is slow, not wedged: given up
/// after a minute of looks, not five.
#[test]
fn a_broker_in_an_uninterruptible_wait_is_given_up_only_after_a_minute() {
    let t0 = Instant::now();
    let world = World {
        disk_wait: true,
        ..World::well()
    };
    let mut m = machine(Transport::Pipe, Pace::EXEC, t0);
    let (now, _) = until_given_up(&mut m, &world);
    // The first quiet ping, then a ping at each look, a second apart, each at work.
    assert_eq!(
        now,
        t0 + Pace::EXEC.quiet_ping + Pace::EXEC.look * UNANSWERED_IF_WORKING
    );
}

#[test]
fn a_stopped_broker_is_given_up_sooner_and_an_attached_one_never() {
    let t0 = Instant::now();
    let world = World {
        stopped: true,
        ..World::well()
    };
    let mut m = machine(Transport::Pipe, Pace::EXEC, t0);
    let (_, looks) = until_given_up(&mut m, &world);
    assert_eq!(looks, UNANSWERED_IF_STOPPED + 1);

    // Another front end's broker is not this one's to give up on for silence.
    let mut m = machine(Transport::Socket, Pace::FLEET, t0);
    for _ in 0..100 {
        let now = m.poll_timeout();
        let actions = wake(&mut m, &world, now);
        assert_eq!(given_up(&actions), None);
        assert!(actions.iter().all(|a| *a == Action::Ping), "{actions:?}");
    }
}

#[test]
fn a_stop_that_outlives_grace_and_slack_is_given_up() {
    let t0 = Instant::now();
    let world = World::well();
    let mut m = machine(Transport::Pipe, Pace::EXEC, t0);
    m.handle(Input::Stop(&stop()), t0);
    assert_eq!(drive(&mut m, &world, t0), [Action::Write(stop())]);
    // The broker reports the stop's start, then nothing: its looks are pinged and
    // answered, but the stop's deadline does not move.
    output(&mut m, &world, t0 + 10 * MS);
    let overdue = t0 + GRACE + STOP_SLACK;
    loop {
        let now = m.poll_timeout();
        let actions = wake(&mut m, &world, now);
        if now < overdue {
            assert_eq!(given_up(&actions), None, "{now:?}");
            pong(&mut m, &world, now);
            continue;
        }
        assert_eq!(now, overdue);
        assert_eq!(given_up(&actions), Some(End::StopOverdue));
        break;
    }
    // Killed, and what it left KILLed at once, with STOP_SLACK to die.
    assert_eq!(
        m.ending(End::StopOverdue, overdue),
        Ending::Launched {
            kill: true,
            cleanup: Some(Cleanup {
                why: End::StopOverdue.why().expect("a why"),
                grace: Duration::ZERO,
                patience: STOP_SLACK,
            }),
        }
    );
}

#[test]
fn a_busy_broker_gets_more_patience_up_to_a_cap() {
    let t0 = Instant::now();
    let world = World::well();
    let mut m = machine(Transport::Pipe, Pace::FLEET, t0);
    m.handle(Input::Stop(&stop()), t0);
    drive(&mut m, &world, t0);
    // It keeps reporting every 100 ms (signals to a tree that keeps forking).
    let mut now = t0;
    let ended = loop {
        now += 100 * MS;
        output(&mut m, &world, now);
        if let Some(end) = given_up(&wake(&mut m, &world, now)) {
            break end;
        }
        assert!(now < t0 + GRACE + BUSY_STOP_PATIENCE * 2, "never given up");
    };
    assert_eq!(ended, End::StopOverdue);
    assert_eq!(now, t0 + GRACE + BUSY_STOP_PATIENCE);

    // Silent after a while: STOP_SLACK after its last line, past grace + slack.
    let mut m = machine(Transport::Pipe, Pace::FLEET, t0);
    m.handle(Input::Stop(&stop()), t0);
    drive(&mut m, &world, t0);
    let last = t0 + GRACE + Duration::from_secs(1);
    output(&mut m, &world, last);
    assert_eq!(m.poll_timeout(), last + STOP_SLACK);
    assert_eq!(wake(&mut m, &world, last + STOP_SLACK - MS), []);
    assert_eq!(
        given_up(&wake(&mut m, &world, last + STOP_SLACK)),
        Some(End::StopOverdue)
    );
}

/// A loaded machine: the broker waits for a core through its stop's deadline, silent. It
/// is looked at before it is killed, and gets [`STOP_SLACK`] more while the kernel shows it
/// at work (waiting for a core, or its CPU time growing), up to [`BUSY_STOP_PATIENCE`].
#[test]
fn a_stop_overdue_waits_while_the_kernel_shows_the_broker_at_work() {
    let t0 = Instant::now();
    let on_time = t0 + GRACE + STOP_SLACK;
    for pace in [Pace::EXEC, Pace::FLEET] {
        let mut m = machine(Transport::Pipe, pace, t0);
        m.handle(Input::Stop(&stop()), t0);
        pong(&mut m, &World::well(), t0 + 10 * MS);
        let starved = World {
            runnable: true,
            ..World::well()
        };
        let mut now = t0 + 10 * MS;
        while now < on_time {
            now = m.poll_timeout();
            assert_eq!(given_up(&wake(&mut m, &starved, now)), None, "{now:?}");
            pong(&mut m, &starved, now);
        }
        assert_eq!(m.poll_timeout(), on_time + STOP_SLACK, "{pace:?}");
        // Its CPU time grew since: still at work.
        let ran = World {
            cpu_ticks: 3,
            ..World::well()
        };
        assert_eq!(given_up(&wake(&mut m, &ran, on_time + STOP_SLACK)), None);
        // Idle since: given up at the next deadline, not before.
        let ended = loop {
            now = m.poll_timeout();
            if let Some(end) = given_up(&wake(&mut m, &ran, now)) {
                break end;
            }
        };
        assert_eq!(ended, End::StopOverdue);
        assert_eq!(now, on_time + STOP_SLACK * 2, "{pace:?}");
    }

    // Never idle: given up all the same at the cap.
    let mut m = machine(Transport::Pipe, Pace::FLEET, t0);
    m.handle(Input::Stop(&stop()), t0);
    let starved = World {
        runnable: true,
        ..World::well()
    };
    let mut now;
    let ended = loop {
        now = m.poll_timeout();
        if let Some(end) = given_up(&wake(&mut m, &starved, now)) {
            break end;
        }
        pong(&mut m, &starved, now);
        assert!(now < t0 + GRACE + BUSY_STOP_PATIENCE * 2, "never given up");
    };
    assert_eq!(ended, End::StopOverdue);
    assert_eq!(now, t0 + GRACE + BUSY_STOP_PATIENCE);

    // Stopped, it is not at work however it came to be: killed on time.
    let mut m = machine(Transport::Pipe, Pace::FLEET, t0);
    m.handle(Input::Stop(&stop()), t0);
    pong(&mut m, &World::well(), t0 + 10 * MS);
    let stopped = World {
        stopped: true,
        runnable: true,
        cpu_ticks: 9,
        ..World::well()
    };
    assert_eq!(
        given_up(&wake(&mut m, &stopped, on_time)),
        Some(End::StopOverdue)
    );
}

/// A stop the broker has not acknowledged when [`ACK_TIMEOUT`] ends kills the broker, unless
/// the kernel shows it at work; a signal's fallback, which does no harm, is not put off.
#[test]
fn an_unacknowledged_stop_waits_while_the_kernel_shows_the_broker_at_work() {
    let t0 = Instant::now();
    let starved = World {
        runnable: true,
        ..World::well()
    };
    let mut m = machine(Transport::Pipe, Pace::FLEET, t0);
    m.handle(Input::Request(&stop()), t0);
    drive(&mut m, &starved, t0);
    assert_eq!(given_up(&wake(&mut m, &starved, t0 + ACK_TIMEOUT)), None);
    assert_eq!(m.poll_timeout(), t0 + ACK_TIMEOUT + STOP_SLACK);
    assert_eq!(
        given_up(&wake(&mut m, &World::well(), t0 + ACK_TIMEOUT + STOP_SLACK)),
        Some(End::StopUnanswered)
    );
    // At work all along: given up at the cap.
    let mut m = machine(Transport::Pipe, Pace::FLEET, t0);
    m.handle(Input::Request(&stop()), t0);
    drive(&mut m, &starved, t0);
    let mut now;
    let ended = loop {
        now = m.poll_timeout();
        if let Some(end) = given_up(&wake(&mut m, &starved, now)) {
            break end;
        }
        assert!(
            now < t0 + ACK_TIMEOUT + BUSY_STOP_PATIENCE * 2,
            "never given up"
        );
    };
    assert_eq!(ended, End::StopUnanswered);
    assert_eq!(now, t0 + ACK_TIMEOUT + BUSY_STOP_PATIENCE);
    // A stop asked for and waited on (`tether stop`, over the socket) is waited on as long,
    // and then falls back without being said unanswered.
    let mut m = machine(Transport::Socket, Pace::FLEET, t0);
    m.handle(Input::Ask(&stop()), t0);
    drive(&mut m, &starved, t0);
    assert_eq!(wake(&mut m, &starved, t0 + ACK_TIMEOUT), []);
    assert_eq!(m.poll_timeout(), t0 + ACK_TIMEOUT + STOP_SLACK);
    assert_eq!(
        wake(&mut m, &World::well(), t0 + ACK_TIMEOUT + STOP_SLACK),
        [Action::GiveUp(End::StopUnanswered)]
    );
    // A stop that could not be written cannot be answered: no more time.
    let mut m = machine(Transport::Pipe, Pace::FLEET, t0);
    let gone = World {
        gone: true,
        ..World {
            runnable: true,
            ..World::well()
        }
    };
    m.handle(Input::Request(&stop()), t0);
    assert_eq!(
        given_up(&drive(&mut m, &gone, t0)),
        None,
        "acted on at the next timer"
    );
    assert_eq!(
        given_up(&wake(&mut m, &gone, t0)),
        Some(End::StopUnanswered)
    );
    // A group signal falls back on time.
    let mut m = machine(Transport::Pipe, Pace::FLEET, t0);
    let term = Request::group_signal(ProcessSignal::TERM);
    m.handle(Input::Request(&term), t0);
    drive(&mut m, &starved, t0);
    assert_eq!(
        wake(&mut m, &starved, t0 + ACK_TIMEOUT),
        [Action::SignalItself(ProcessSignal::TERM)]
    );
}

#[test]
fn an_attached_brokers_unanswered_stop_is_left_to_stop_by_pid() {
    let t0 = Instant::now();
    let world = World::well();
    let mut m = machine(Transport::Socket, Pace::FLEET, t0);
    m.handle(Input::Request(&stop()), t0);
    assert_eq!(
        drive(&mut m, &world, t0),
        [Action::Write(stop())],
        "a socket answers the stop itself: no ping after it"
    );
    assert_eq!(m.posted(), 1);
    assert_eq!(wake(&mut m, &world, t0 + ACK_TIMEOUT - MS), []);
    assert_eq!(
        given_up(&wake(&mut m, &world, t0 + ACK_TIMEOUT)),
        Some(End::StopUnanswered)
    );
    // Not ours to kill: let go, the stop asked of its proved pid by the caller.
    assert_eq!(
        m.ending(End::StopUnanswered, t0 + ACK_TIMEOUT),
        Ending::LetGo
    );
}

#[test]
fn an_attached_broker_gets_only_signals_that_repeat_harmlessly() {
    let t0 = Instant::now();
    let world = World::well();
    for (signal, sent) in [
        (ProcessSignal::TERM, true),
        (ProcessSignal::KILL, true),
        (ProcessSignal::parse("HUP").expect("HUP"), false),
        (ProcessSignal::INT, false),
    ] {
        let mut m = machine(Transport::Socket, Pace::FLEET, t0);
        m.handle(Input::Request(&Request::group_signal(signal)), t0);
        drive(&mut m, &world, t0);
        let actions = wake(&mut m, &world, t0 + ACK_TIMEOUT);
        match &actions[..] {
            [Action::SignalItself(s)] => assert!(sent && *s == signal, "{signal:?}"),
            [Action::NotSignalled(why)] => {
                assert!(!sent && why.contains("was not sent by tether"), "{why}")
            }
            other => panic!("{signal:?}: {other:?}"),
        }
    }
}

#[test]
fn keys_go_only_where_the_transport_carries_them() {
    let t0 = Instant::now();
    let world = World::well();
    let keys = Request::Input {
        data: b"y\n".to_vec(),
    };
    let mut m = machine(Transport::Pipe, Pace::FLEET, t0);
    m.handle(Input::Post(&keys), t0);
    assert_eq!(drive(&mut m, &world, t0), [Action::Write(keys.clone())]);
    assert_eq!(m.posted(), 0, "keys are not answered on a pipe");
    let mut m = machine(Transport::Socket, Pace::FLEET, t0);
    m.handle(Input::Post(&keys), t0);
    assert_eq!(drive(&mut m, &world, t0), []);
}

#[test]
fn the_command_group_and_cgroup_are_noted_from_the_lines() {
    let t0 = Instant::now();
    let world = World::well();
    let mut m = machine(Transport::Pipe, Pace::FLEET, t0);
    m.handle(Input::Line(Some(&fixtures::spawned(42))), t0);
    assert_eq!(drive(&mut m, &world, t0), [Action::FindLeader { pgid: 42 }]);
    let exit = EventKind::Exit {
        pid: 42,
        status: ExitStatus {
            code: Some(0),
            signal: None,
            core_dumped: false,
        },
    };
    m.handle(Input::Line(Some(&exit)), t0);
    assert_eq!(drive(&mut m, &world, t0), [Action::ForgetLeader]);
    m.handle(Input::Exited, t0);
    assert_eq!(given_up(&drive(&mut m, &world, t0)), Some(End::Lost));
    // Lost with no stop asked: the whole sequence, patient with KILL.
    assert_eq!(
        m.ending(End::Lost, t0),
        Ending::Launched {
            kill: true,
            cleanup: Some(Cleanup {
                why: "broker lost",
                grace: GRACE,
                patience: KILL_PATIENCE,
            }),
        }
    );
    assert_eq!(
        m.ending(End::Closed, t0),
        Ending::Launched {
            kill: false,
            cleanup: None
        }
    );
}

/// A front end kept from running (blocked copying output to a reader that does not read,
/// stopped by Ctrl-Z) wakes long past its looks: that is one look, one ping, never a
/// broker given up for the time it could not ping.
#[test]
fn a_front_end_kept_from_running_adds_one_unanswered_ping() {
    let t0 = Instant::now();
    let world = World::well();
    let mut m = machine(Transport::Pipe, Pace::EXEC, t0);
    let mut now = t0;
    for blocked in [Duration::from_secs(60), Duration::from_secs(600)] {
        now += blocked;
        let actions = wake(&mut m, &world, now);
        assert_eq!(actions, [Action::Ping], "{blocked:?}");
        assert_eq!(m.poll_timeout(), now + Pace::EXEC.look);
        // The broker's lines, waiting in the pipe all along, answer it.
        output(&mut m, &world, now);
    }
}

/// `answer`: the Nth answer is the Nth asked message's; an earlier one proves nothing.
#[test]
fn an_asked_request_is_answered_by_its_own_answer_only() {
    let t0 = Instant::now();
    let world = World::well();
    let mut m = machine(Transport::Socket, Pace::FLEET, t0);
    m.handle(Input::Post(&Request::Subscribe), t0);
    m.handle(Input::Ask(&Request::Ping), t0);
    assert_eq!(
        drive(&mut m, &world, t0),
        [
            Action::Write(Request::Subscribe),
            Action::Write(Request::Ping)
        ]
    );
    assert_eq!(pong(&mut m, &world, t0), [], "the subscription's answer");
    assert_eq!(pong(&mut m, &world, t0), [Action::Asked(Asked::Answered)]);
    assert_eq!(
        wake(&mut m, &world, t0 + ACK_TIMEOUT * 2),
        [],
        "nothing is overdue"
    );
}

/// A request with no fallback (a ping, a signal to one pid) not answered in time is
/// unanswered, once what the broker wrote before then is read.
#[test]
fn an_asked_request_not_answered_in_time_is_unanswered() {
    let t0 = Instant::now();
    let mut world = World::well();
    let mut m = machine(Transport::Socket, Pace::FLEET, t0);
    let one = Request::Signal {
        signal: ProcessSignal::TERM,
        scope: Scope::Pid,
        pid: Some(7),
        origin: None,
    };
    m.handle(Input::Ask(&one), t0);
    drive(&mut m, &world, t0);
    assert_eq!(m.poll_timeout(), t0 + ACK_TIMEOUT);
    assert_eq!(wake(&mut m, &world, t0 + ACK_TIMEOUT - MS), []);
    world.unread = 1;
    assert_eq!(wake(&mut m, &world, t0 + ACK_TIMEOUT), []);
    assert_eq!(
        pong(&mut m, &world, t0 + ACK_TIMEOUT),
        [Action::Asked(Asked::Answered)],
        "the answer was waiting"
    );
    assert_eq!(wake(&mut m, &world, t0 + ACK_TIMEOUT), []);

    let mut m = machine(Transport::Socket, Pace::FLEET, t0);
    m.handle(Input::Ask(&one), t0);
    drive(&mut m, &world, t0);
    world.unread = 0;
    assert_eq!(
        wake(&mut m, &world, t0 + ACK_TIMEOUT),
        [Action::Asked(Asked::Unanswered)]
    );

    // Keys are not carried over a socket: nothing is asked.
    let keys = Request::Input {
        data: b"y".to_vec(),
    };
    m.handle(Input::Ask(&keys), t0);
    assert_eq!(drive(&mut m, &world, t0), [Action::Asked(Asked::NotPosted)]);
}
