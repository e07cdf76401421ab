//! Attention in the machine: `failed` and `finished` as a command ends, a silence watchdog's
//! stop as a failure, nothing for a short command that ends well, and `needs_input` from
//! what the interpreter's probe finds (the fake kernel answers it; the detector's own tests
//! in `crate::attention` cover `quiet` and `runaway`).

use super::*;
use crate::attention::detector::{Blocked, InputKind};
use crate::attention::inputs::InputFile;
use crate::protocol::{
    AttentionKind, AttentionRequest, Origin, Peer, ProcessSignal, Request, Scope,
};

fn with_attention() -> LaunchRequest {
    LaunchRequest {
        attention: AttentionRequest::default(),
        ..request()
    }
}

/// The `attention` events journaled, as kind and detail.
fn attention(rig: &Rig) -> Vec<(AttentionKind, String)> {
    rig.journal()
        .filter_map(|e| match &e.kind {
            EventKind::Attention { attention, detail } => Some((*attention, detail.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn a_short_command_that_ends_well_needs_nobody() {
    let mut rig = Rig::running(with_attention(), OnTerm::Exit);
    rig.advance(Duration::from_secs(2));
    rig.command_ends(exited(0));
    rig.finish();
    assert_eq!(attention(&rig), []);
}

#[test]
fn a_failure_is_told_once_with_its_exit_code() {
    let mut rig = Rig::running(with_attention(), OnTerm::Exit);
    rig.advance(Duration::from_millis(5));
    rig.command_ends(exited(3));
    rig.finish();
    let told = attention(&rig);
    assert_eq!(told.len(), 1, "{told:?}");
    assert_eq!(told[0].0, AttentionKind::Failed);
    assert!(told[0].1.contains('3'), "{told:?}");
    let kinds = rig.kinds();
    let exit = kinds.iter().position(|k| *k == "exit").expect("an exit");
    let told_at = kinds
        .iter()
        .position(|k| *k == "attention")
        .expect("attention");
    assert!(told_at > exit, "told after the exit it is about: {kinds:?}");
}

#[test]
fn a_long_command_that_ends_well_is_told_finished() {
    let mut rig = Rig::running(with_attention(), OnTerm::Exit);
    rig.advance(Duration::from_secs(11));
    rig.command_ends(exited(0));
    rig.finish();
    let told = attention(&rig);
    assert_eq!(
        told.iter().map(|t| t.0).collect::<Vec<_>>(),
        [AttentionKind::Finished]
    );
}

#[test]
fn attention_off_tells_nothing_even_of_a_failure() {
    let mut rig = Rig::running(request(), OnTerm::Exit);
    rig.advance(Duration::from_secs(11));
    rig.command_ends(exited(1));
    rig.finish();
    assert_eq!(attention(&rig), []);
}

#[test]
fn a_command_stopped_by_the_silence_watchdog_is_a_failure() {
    let request = LaunchRequest {
        no_output_timeout: Some(Duration::from_millis(1000)),
        ..with_attention()
    };
    let mut rig = Rig::running(request, OnTerm::Exit);
    rig.run_until(Duration::from_secs(30));
    rig.finish();
    let told = attention(&rig);
    assert_eq!(
        told.iter().map(|t| t.0).collect::<Vec<_>>(),
        [AttentionKind::Failed],
        "{told:?}"
    );
}

/// `after` into the run, the command prints `bytes`; the run then goes on to its end.
fn prints_then_ends(rig: &mut Rig, after: Duration, bytes: &[u8]) {
    rig.advance(after);
    rig.feed(Input::Read {
        stream: crate::protocol::Stream::Stdout,
        bytes,
    });
    rig.run_until(Duration::from_secs(30));
    rig.finish();
}

/// A budget's stop is a failure told in the words every view has for that end (`over
/// budget (max_output)`), not as the signal it died of (`killed by SIGTERM`).
#[test]
fn a_budgets_stop_is_told_over_budget() {
    let request = LaunchRequest {
        budgets: crate::protocol::Budgets {
            max_output: Some(10),
            ..Default::default()
        },
        ..with_attention()
    };
    let mut rig = Rig::running(request, OnTerm::Exit);
    prints_then_ends(
        &mut rig,
        Duration::from_millis(500),
        b"more than ten bytes\n",
    );
    let told = attention(&rig);
    assert!(
        matches!(&told[..], [(AttentionKind::Failed, detail)]
            if detail.starts_with("over budget (max_output) after ")),
        "{told:?}: {:?}",
        rig.kinds()
    );
}

/// A run stopped after its final line (`drain_on`) finished, as every view says: never a
/// `failed`, and `finished` once it ran `finished_after`.
#[test]
fn a_run_stopped_after_its_final_line_finished() {
    let request = LaunchRequest {
        drain_on: Some("^done$".into()),
        drain: Some(Duration::from_millis(300)),
        ..with_attention()
    };
    let regex = crate::final_drain::compile("^done$").ok();
    let mut rig = Rig::with_drain(request, regex).launched(OnTerm::Exit);
    prints_then_ends(&mut rig, Duration::from_secs(11), b"done\n");
    assert!(rig.result().drained, "{:?}", rig.kinds());
    let told: Vec<_> = attention(&rig).into_iter().map(|(kind, _)| kind).collect();
    assert_eq!(told, [AttentionKind::Finished], "{:?}", rig.kinds());
}

fn with_notify() -> LaunchRequest {
    LaunchRequest {
        attention: AttentionRequest {
            notify: Some(vec!["notify".into()]),
            ..AttentionRequest::default()
        },
        ..request()
    }
}

/// The `notify_failed` messages journaled.
fn notify_failures(rig: &Rig) -> Vec<String> {
    rig.journal()
        .filter_map(|e| match &e.kind {
            EventKind::NotifyFailed { message } => Some(message.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn an_event_asks_for_a_notify_run_and_its_failure_comes_back_as_an_input() {
    let mut rig = Rig::running(with_notify(), OnTerm::Exit);
    rig.command_ends(exited(3));
    assert_eq!(rig.notified.len(), 1, "one run for the `failed` event");
    let payload: serde_json::Value = serde_json::from_slice(&rig.notified[0]).unwrap();
    assert_eq!(payload["kind"], "failed");
    // In the journal, flushed, before the run is asked for: it may read the journal.
    assert!(rig.flushes > 0);
    assert_eq!(rig.broker.attention.notifier_pids(), [NOTIFY_KEEPER + 1]);
    rig.notify_run_ends(NOTIFY_KEEPER + 1, Some("`notify` exited with status 4"));
    let failures = notify_failures(&rig);
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert!(failures[0].starts_with("`notify` exited with status 4"));
    assert!(failures[0].contains("not run again"), "{failures:?}");
    assert!(rig.broker.attention.notifier_pids().is_empty());
    rig.finish();
    assert_eq!(rig.wind_downs, 0, "nothing ran at the end: no wind-down");
}

#[test]
fn a_run_that_ends_well_is_not_journaled() {
    let mut rig = Rig::running(with_notify(), OnTerm::Exit);
    rig.command_ends(exited(3));
    rig.notify_run_ends(NOTIFY_KEEPER + 1, None);
    rig.finish();
    assert_eq!(notify_failures(&rig), Vec::<String>::new());
}

#[test]
fn a_run_that_cannot_start_is_journaled_once_and_never_asked_again() {
    let mut rig = Rig::running(with_notify(), OnTerm::Exit);
    rig.notify_unstartable = true;
    rig.command_ends(exited(3));
    let failures = notify_failures(&rig);
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert!(failures[0].contains("cannot run `notify`"), "{failures:?}");
    assert!(failures[0].contains("not run again"), "{failures:?}");
    rig.finish();
    assert_eq!(rig.notified.len(), 1);
}

#[test]
fn a_run_past_its_deadline_is_asked_to_be_killed_at_the_tick_that_finds_it() {
    let mut rig = Rig::running(with_notify(), OnTerm::Exit);
    rig.command_ends(exited(3));
    let deadline = rig.broker.poll_timeout().expect("a deadline");
    rig.advance(Duration::from_secs(1));
    assert!(
        rig.notify_checks.iter().all(|overdue| overdue.is_empty()),
        "nothing overdue yet: {:?}",
        rig.notify_checks
    );
    rig.now = rig.now.max(deadline) + NOTIFY_DEADLINE;
    rig.tick();
    assert!(
        rig.notify_checks.contains(&vec![NOTIFY_KEEPER + 1]),
        "{:?}",
        rig.notify_checks
    );
    assert_eq!(notify_failures(&rig).len(), 1);
}

/// Past any run's backstop deadline (the keeper's timeout and a second).
const NOTIFY_DEADLINE: Duration = Duration::from_secs(7);

#[test]
fn at_the_end_a_run_still_going_is_let_go_and_the_end_goes_on() {
    let mut rig = Rig::running(with_notify(), OnTerm::Exit);
    rig.command_ends(exited(3));
    rig.close_pipes();
    rig.run_until(Duration::from_secs(3));
    assert!(rig.broker.is_done());
    rig.feed(Input::Finish);
    assert_eq!(rig.wind_downs, 1);
    assert_eq!(rig.exit, Some(0), "the end went on without the run");
    let kinds = rig.kinds();
    assert!(kinds.contains(&"close"), "{kinds:?}");
    assert!(
        !kinds.contains(&"notify_failed"),
        "a run let go is no failure: {kinds:?}"
    );
}

#[test]
fn the_end_waits_for_the_wind_down_and_goes_on_only_when_told() {
    let mut rig = Rig::running(with_notify(), OnTerm::Exit);
    rig.command_ends(exited(3));
    rig.close_pipes();
    rig.run_until(Duration::from_secs(3));
    // The machine's own handling, without the rig's interpreter answering for it.
    rig.broker.handle(Input::Finish, rig.at());
    let mut outputs = Vec::new();
    while let Some(output) = rig.broker.poll_output() {
        outputs.push(output);
    }
    assert!(outputs.contains(&Output::WindDownNotify), "{outputs:?}");
    assert!(
        !outputs.iter().any(|o| matches!(o, Output::CloseTree)),
        "the tree's record closes only after the wind-down: {outputs:?}"
    );
    // A second `NotifyWoundDown` does not close twice.
    rig.feed(Input::NotifyWoundDown);
    rig.feed(Input::NotifyWoundDown);
    assert_eq!(rig.exit, Some(0));
    assert_eq!(rig.count("close"), 1);
}

#[test]
fn a_notification_is_bounded_whatever_the_command_s_name_and_text() {
    // A first word of 100 KiB: the command's name, unless named otherwise, is its first
    // word, and a line over a pipe's 64 KiB held the broker's write until the notify
    // program read it (or its 5 s deadline).
    let word = "x".repeat(100 << 10);
    let request = LaunchRequest {
        name: word.clone(),
        command: CommandSpec::Argv(vec![word.clone(), "é".repeat(50 << 10)]),
        ..with_notify()
    };
    let mut rig = Rig::running(request, OnTerm::Exit);
    rig.command_ends(exited(3));
    assert_eq!(rig.notified.len(), 1);
    let line = &rig.notified[0];
    // Well within the smallest pipe buffer a pipe gets (one page) but for its path.
    assert!(line.len() < 2048, "{} bytes", line.len());
    let payload: serde_json::Value = serde_json::from_slice(line).unwrap();
    let name = payload["name"].as_str().unwrap();
    assert!(name.starts_with("xxx") && name.ends_with('…'), "{name}");
    let text = payload["text"].as_str().unwrap();
    assert!(text.ends_with('…'), "{text}");
    rig.finish();
}

/// The operator's stop, a signal of theirs, one the agent sent through its shell, or the
/// TUI's restart for a changed file: the command's end is their own doing, never a failure
/// to tell them about (issue: attention that means "you"). The same exit on its own is one.
#[test]
fn an_end_the_operator_or_the_caller_caused_is_no_failure() {
    let stop = from_client(1, Request::Stop { origin: None });
    let signal = |origin| {
        from_parent(Request::Signal {
            signal: ProcessSignal::TERM,
            scope: Scope::Group,
            pid: None,
            origin,
        })
    };
    for (what, input) in [
        ("the operator's stop", stop),
        ("the operator's TERM", signal(None)),
        ("the caller's TERM", signal(Some(Origin::Caller))),
        (
            "the launcher's restart for a changed file",
            from_parent(Request::Stop {
                origin: Some(Origin::FileChanged),
            }),
        ),
    ] {
        let mut rig = Rig::running(with_attention(), OnTerm::Exit);
        rig.advance(Duration::from_millis(5));
        rig.feed(input);
        rig.run_until(Duration::from_secs(30));
        rig.finish();
        assert_eq!(attention(&rig), [], "{what}");
        assert!(rig.count("signal_sent") > 0, "{what}: {:?}", rig.kinds());
    }
    // A window resize is no stop: the failure after it is told.
    let mut rig = Rig::running(with_attention(), OnTerm::Exit);
    rig.feed(from_parent(Request::Signal {
        signal: ProcessSignal::parse("WINCH").expect("WINCH"),
        scope: Scope::Group,
        pid: None,
        origin: None,
    }));
    rig.command_ends(exited(1));
    rig.finish();
    assert_eq!(attention(&rig).len(), 1);
}

/// `x` (TERM) on a worker of the command, a server's python under `sh`: the shell then
/// exits 143, and that end is the operator's, as every view words it (`stopped (exit 143)`);
/// a failure of the command after a signal it went on from (a HUP to reload) is its own.
#[test]
fn a_worker_signalled_by_hand_ends_the_command_by_hand_when_its_end_carries_the_signal() {
    for (signal, status, failed) in [
        (ProcessSignal::TERM, exited(143), false),
        (ProcessSignal::KILL, exited(137), false),
        (ProcessSignal::TERM, exited(1), true),
        (ProcessSignal::HUP, exited(2), true),
    ] {
        let mut rig = Rig::running(with_attention(), OnTerm::Ignore);
        rig.world.borrow_mut().spawn(101, OnTerm::Exit);
        rig.advance(Duration::from_millis(5));
        rig.feed(from_client(
            1,
            Request::Signal {
                signal,
                scope: Scope::Pid,
                pid: Some(101),
                origin: None,
            },
        ));
        assert_eq!(rig.count("signal_sent"), 1, "{:?}", rig.kinds());
        rig.command_ends(status);
        rig.finish();
        let told: Vec<_> = attention(&rig).into_iter().map(|(kind, _)| kind).collect();
        let expected: &[AttentionKind] = if failed {
            &[AttentionKind::Failed]
        } else {
            &[]
        };
        assert_eq!(told, expected, "SIG{signal} to a worker, then {status:?}");
    }
}

/// A command tether stopped because what ran it ended (its front end lost: the agent whose
/// server it was exited) or at a shutdown ran long enough to be told of, and is not: the
/// end is its caller's, not a failure of its own.
#[test]
fn a_command_stopped_with_what_ran_it_is_no_failure() {
    for (what, input) in [
        (
            "its front end lost",
            Input::ParentLost(crate::protocol::ParentLossCause::Pidfd),
        ),
        ("a shutdown", Input::Shutdown { sender: None }),
    ] {
        let mut rig = Rig::running(with_attention(), OnTerm::Exit);
        rig.advance(Duration::from_secs(60));
        rig.feed(input);
        rig.run_until(Duration::from_secs(90));
        rig.finish();
        assert_eq!(attention(&rig), [], "{what}: {:?}", rig.kinds());
        assert!(rig.count("signal_sent") > 0, "{what}: {:?}", rig.kinds());
    }
}

/// An agent's hook (`tether agent-hook`) says it waits for its human: taken from a process of
/// the broker's tree by an agent's broker only, raised once, ended by the agent's output.
#[test]
fn an_agents_own_word_that_it_waits_is_taken_from_its_tree_only() {
    let waiting = |in_tree| Input::Request {
        from: Sender::Client {
            in_tree,
            client: 3,
            peer: Peer {
                pid: 4343,
                uid: 1000,
                program: Some("tether agent-hook".into()),
            },
        },
        request: Ok(Request::AgentWaiting {
            what: "Claude needs your\npermission".into(),
        }),
    };
    let codes = |rig: &Rig| -> Vec<String> {
        rig.replies
            .iter()
            .map(|(_, e)| match &e.kind {
                EventKind::ControlError { code, .. } => code.clone(),
                EventKind::ControlAck { request, .. } => format!("ack {request}"),
                other => other.name().to_string(),
            })
            .collect()
    };
    // A command that is no agent.
    let mut rig = Rig::running(with_attention(), OnTerm::Exit);
    rig.feed(waiting(true));
    assert_eq!(codes(&rig), ["not_an_agent"]);
    assert_eq!(attention(&rig), []);
    // An agent, asked from outside its tree, then from its hook.
    let agent = LaunchRequest {
        attention: AttentionRequest {
            agent: true,
            ..AttentionRequest::default()
        },
        ..request()
    };
    let mut rig = Rig::running(agent, OnTerm::Exit);
    rig.feed(waiting(false));
    rig.feed(waiting(true));
    rig.feed(waiting(true));
    assert_eq!(
        codes(&rig),
        ["not_the_agent", "ack agent_waiting", "ack agent_waiting"]
    );
    assert_eq!(
        attention(&rig),
        [(
            AttentionKind::NeedsInput,
            "waiting for you: Claude needs your permission".to_string()
        )]
    );
    rig.feed(Input::Read {
        stream: crate::protocol::Stream::Stdout,
        bytes: b"1. Yes\n",
    });
    assert_eq!(rig.count("attention_cleared"), 1);
    rig.command_ends(exited(0));
    rig.finish();
}

/// The command's stdin, a pipe, as the interpreter names it at the spawn.
const STDIN_PIPE: InputFile = InputFile {
    dev: 12,
    ino: 400,
    rdev: None,
    input: InputKind::Pipe,
};

/// The command's terminal.
const TERMINAL: InputFile = InputFile {
    dev: 25,
    ino: 3,
    rdev: Some(34820),
    input: InputKind::Terminal,
};

/// What the probe finds a process asleep in: `call` on descriptor 0, which is `input`.
fn blocked_on(input: InputKind, call: &'static str) -> Blocked {
    Blocked {
        fd: 0,
        input,
        call,
        program: "cmd".into(),
        reads: Some(3),
    }
}

/// The command started, as in [`Rig::launched`], reading `inputs`.
fn launched_reading(request: LaunchRequest, inputs: Vec<InputFile>) -> Rig {
    let mut rig = Rig::new(request);
    rig.world.borrow_mut().spawn(CMD, OnTerm::Exit);
    rig.feed(Input::Spawned {
        pid: CMD,
        start_ticks: Some(CMD as u64),
        argv: vec!["cmd".into()],
        inputs,
        in_cgroup: false,
        ended: false,
    });
    rig
}

fn raised(rig: &Rig, kind: AttentionKind) -> bool {
    attention(rig).iter().any(|(k, _)| *k == kind)
}

#[test]
fn a_process_the_probe_finds_blocked_on_the_commands_input_needs_input() {
    let mut rig = launched_reading(with_attention(), vec![STDIN_PIPE]);
    let blocked = blocked_on(InputKind::Pipe, "read");
    rig.world.borrow_mut().blocked.push((CMD, blocked));
    rig.run_until(Duration::from_secs(300));
    assert!(
        raised(&rig, AttentionKind::NeedsInput),
        "{:?}",
        attention(&rig)
    );
    // What the probe was asked: the command's inputs, and to look at what sleeps on them.
    let world = rig.world.borrow();
    let probe = world.probes.last().expect("the walks asked for a probe");
    assert_eq!(probe.inputs, [STDIN_PIPE]);
    assert!(probe.looks.blocked && !probe.looks.agent);
}

#[test]
fn with_no_input_to_wait_on_the_probe_is_not_asked_to_look_at_waits() {
    let mut rig = launched_reading(with_attention(), Vec::new());
    let blocked = blocked_on(InputKind::Pipe, "read");
    rig.world.borrow_mut().blocked.push((CMD, blocked));
    rig.run_until(Duration::from_secs(300));
    assert!(!raised(&rig, AttentionKind::NeedsInput));
    let world = rig.world.borrow();
    assert!(world.probes.iter().all(|p| !p.looks.blocked));
}

#[test]
fn without_attention_no_probe_is_asked() {
    let mut rig = launched_reading(request(), vec![STDIN_PIPE]);
    rig.run_until(Duration::from_secs(60));
    assert!(rig.world.borrow().walks > 0);
    assert!(rig.world.borrow().probes.is_empty());
}

#[test]
fn an_agent_waiting_on_its_terminal_with_no_command_running_waits_for_its_human() {
    let agent = LaunchRequest {
        attention: AttentionRequest {
            agent: true,
            ..AttentionRequest::default()
        },
        ..request()
    };
    let mut rig = launched_reading(agent.clone(), vec![TERMINAL]);
    let waiting = blocked_on(InputKind::Terminal, "epoll_wait");
    rig.world.borrow_mut().blocked.push((CMD, waiting.clone()));
    rig.run_until(Duration::from_secs(300));
    assert!(raised(&rig, AttentionKind::NeedsInput), "{:?}", rig.kinds());
    assert!(rig.world.borrow().probes.iter().all(|p| p.looks.agent));
    // The same wait while a command of the agent runs (its broker, in the tree): the agent
    // waits for that command, not for its human.
    let mut rig = launched_reading(agent, vec![TERMINAL]);
    {
        let mut world = rig.world.borrow_mut();
        world.spawn(101, OnTerm::Exit);
        world.runs_command.push(101);
        world.blocked.push((CMD, waiting));
    }
    rig.run_until(Duration::from_secs(300));
    assert!(
        !raised(&rig, AttentionKind::NeedsInput),
        "{:?}",
        rig.kinds()
    );
}

/// An agent that rewrites its window title every second while it waits (Codex asking for
/// approval) waits all the same: a write of terminal controls alone is no sign of work.
/// One that draws text each second (a spinner) is at work.
#[test]
fn an_agent_that_only_retitles_its_window_still_waits_for_its_human() {
    let agent = LaunchRequest {
        attention: AttentionRequest {
            agent: true,
            ..AttentionRequest::default()
        },
        ..request()
    };
    let title: &[u8] = b"\x1b[?2026h\x1b[0m\x1b[?2026l\x1b]0;[ ! ] Action Required\x07";
    for (writes, waits) in [(title, true), ("\x1b[2K⠋ Working".as_bytes(), false)] {
        let mut rig = launched_reading(agent.clone(), vec![TERMINAL]);
        let waiting = blocked_on(InputKind::Terminal, "epoll_wait");
        rig.world.borrow_mut().blocked.push((CMD, waiting));
        for _ in 0..30 {
            rig.advance(Duration::from_secs(1));
            rig.feed(Input::Read {
                stream: crate::protocol::Stream::Stdout,
                bytes: writes,
            });
        }
        assert_eq!(
            raised(&rig, AttentionKind::NeedsInput),
            waits,
            "{:?}",
            rig.kinds()
        );
    }
}
