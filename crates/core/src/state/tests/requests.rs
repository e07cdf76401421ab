//! Requests from the parent and from control clients: signals, stops, refusals, the
//! subscription and its journal offset, typed input and sizes.

use super::*;
use crate::protocol::{Frame, Transport, WindowSize};
use crate::protocol::{Origin, ProcessSignal, Refusal, Request, Scope};
use crate::reports::InputTaken;
use crate::state::Sender;

fn client(client: u64) -> Sender {
    Sender::Client {
        client,
        peer: operator(),
        in_tree: false,
    }
}

fn signal(signal: ProcessSignal, scope: Scope, pid: Option<i32>) -> Request {
    Request::Signal {
        signal,
        scope,
        pid,
        origin: None,
    }
}

/// The failure codes journaled as protocol errors.
fn protocol_errors(rig: &Rig) -> Vec<String> {
    rig.journal()
        .filter_map(|e| match &e.kind {
            EventKind::BrokerFailure { code, .. } => Some(code.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn a_signal_to_the_group_reaches_the_whole_tree_and_is_acknowledged() {
    let mut rig = Rig::running(request(), OnTerm::Ignore);
    rig.world.borrow_mut().spawn(101, OnTerm::Ignore);
    rig.feed(from_client(
        1,
        signal(ProcessSignal::INT, Scope::Group, None),
    ));
    assert_eq!(rig.signals(), [("INT".into(), vec![CMD, 101])]);
    let (client, ack) = rig.replies.last().unwrap();
    assert_eq!(*client, 1);
    match &ack.kind {
        EventKind::ControlAck {
            request, targets, ..
        } => assert_eq!(
            (request.as_str(), targets.clone()),
            ("signal", vec![CMD, 101])
        ),
        other => panic!("{other:?}"),
    }
    // The journal names the operator who asked, with the signal.
    let sent = rig
        .journal()
        .find(|e| e.kind.name() == "signal_sent")
        .unwrap();
    assert!(
        matches!(&sent.kind, EventKind::SignalSent { client: Some(p), origin: Origin::Operator, .. } if p.pid == 4242)
    );
    assert_eq!(rig.count("stop_started"), 0, "a signal is no stop");
}

#[test]
fn a_signal_to_one_pid_reaches_it_alone() {
    let mut rig = Rig::running(request(), OnTerm::Ignore);
    rig.world.borrow_mut().spawn(101, OnTerm::Exit);
    rig.feed(from_client(
        1,
        signal(ProcessSignal::TERM, Scope::Pid, Some(101)),
    ));
    assert_eq!(rig.signals(), [("TERM".into(), vec![101])]);
    assert_eq!(rig.world.borrow().pids(), [CMD]);
}

#[test]
fn an_operators_term_then_cont_to_one_pid_is_no_stop() {
    let mut rig = Rig::running(request(), OnTerm::Ignore);
    rig.feed(from_client(
        1,
        signal(ProcessSignal::TERM, Scope::Pid, Some(CMD)),
    ));
    rig.feed(from_client(
        1,
        signal(ProcessSignal::CONT, Scope::Pid, Some(CMD)),
    ));
    assert_eq!(rig.count("stop_started"), 0);
    // Journaled as two signals of the operator's, which a reader reads back as running, not
    // stopping (the model's `a_journal_that_says_its_stops_is_stopping_from_stop_started_alone`).
    assert_eq!(
        rig.signals(),
        [("TERM".into(), vec![CMD]), ("CONT".into(), vec![CMD])]
    );
    assert!(rig.journal().all(|e| !matches!(
        &e.kind,
        EventKind::SignalSent { origin, .. } if *origin != Origin::Operator
    )));
}

#[test]
fn a_signal_to_a_pid_outside_the_tree_is_refused_to_the_client_alone() {
    let mut rig = Rig::running(request(), OnTerm::Ignore);
    rig.feed(from_client(
        3,
        signal(ProcessSignal::TERM, Scope::Pid, Some(1)),
    ));
    let (client, error) = rig.replies.last().unwrap();
    assert_eq!(*client, 3);
    assert!(
        matches!(&error.kind, EventKind::ControlError { code, .. } if code == "not_a_descendant")
    );
    assert!(rig.world.borrow().sent.is_empty());
    assert_eq!(rig.count("signal_sent"), 0);
    assert_eq!(protocol_errors(&rig), Vec::<String>::new(), "not journaled");
}

#[test]
fn a_signal_from_the_parent_without_a_pid_is_a_protocol_error_in_the_journal() {
    let mut rig = Rig::running(request(), OnTerm::Ignore);
    rig.feed(from_parent(Request::Signal {
        signal: ProcessSignal::TERM,
        scope: Scope::Pid,
        pid: None,
        origin: None,
    }));
    assert_eq!(protocol_errors(&rig), ["missing_pid"]);
}

#[test]
fn a_signal_from_the_parent_names_the_parent_as_its_client() {
    let mut rig = Rig::running(request(), OnTerm::Ignore);
    rig.feed(from_parent(Request::Signal {
        signal: ProcessSignal::INT,
        scope: Scope::Group,
        pid: None,
        origin: None,
    }));
    let sent = rig
        .journal()
        .find(|e| e.kind.name() == "signal_sent")
        .unwrap();
    let EventKind::SignalSent {
        client: Some(client),
        ..
    } = &sent.kind
    else {
        panic!("{sent:?}")
    };
    assert_eq!(
        (client.pid, client.uid, client.program.as_deref()),
        (PARENT, 1000, Some("front-end"))
    );
}

#[test]
fn nothing_is_signalled_once_the_command_is_over() {
    let mut rig = Rig::running(request(), OnTerm::Exit);
    rig.command_ends(exited(0));
    rig.finish();
    rig.feed(from_client(
        1,
        signal(ProcessSignal::TERM, Scope::Group, None),
    ));
    rig.feed(from_client(1, Request::Stop { origin: None }));
    let codes: Vec<&str> = rig
        .replies
        .iter()
        .filter_map(|(_, e)| match &e.kind {
            EventKind::ControlError { code, .. } => Some(code.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(codes, ["not_running", "not_running"]);
}

#[test]
fn a_control_stop_is_acknowledged_and_its_signals_carry_the_client() {
    let mut rig = Rig::running(request(), OnTerm::Ignore);
    rig.feed(from_client(2, Request::Stop { origin: None }));
    assert!(
        matches!(&rig.replies[0].1.kind, EventKind::ControlAck { request, message: None, .. } if request == "stop")
    );
    let sent: Vec<&Event> = rig
        .journal()
        .filter(|e| e.kind.name() == "signal_sent")
        .collect();
    assert!(!sent.is_empty(), "the stop signalled");
    for event in sent {
        assert!(
            matches!(&event.kind, EventKind::SignalSent { client: Some(p), .. } if p.pid == 4242),
            "{event:?}"
        );
    }
    // Mid-stop: another stop says which one runs; a signal still goes.
    rig.feed(from_client(5, Request::Stop { origin: None }));
    let (_, second) = rig.replies.last().unwrap();
    assert!(
        matches!(&second.kind, EventKind::ControlAck { message: Some(m), .. } if m.contains("already running (origin operator)")),
        "{second:?}"
    );
    rig.feed(from_client(
        5,
        signal(ProcessSignal::KILL, Scope::Group, None),
    ));
    assert_eq!(rig.signals().last().unwrap(), &("KILL".into(), vec![CMD]));
    assert_eq!(rig.count("stop_started"), 1);
}

#[test]
fn a_parent_stop_mid_stop_changes_nothing_and_pings_still_answer() {
    let mut rig = Rig::running(request(), OnTerm::Ignore);
    rig.feed(from_parent(Request::Stop { origin: None }));
    rig.feed(from_parent(Request::Stop {
        origin: Some(Origin::Watchdog),
    }));
    rig.feed(from_parent(Request::Ping));
    assert_eq!(rig.count("stop_started"), 1);
    assert_eq!(rig.to_parent().last(), Some(&"pong"));
    rig.run_until(ms(1000));
    rig.reap();
    rig.finish();
    assert_eq!(rig.result().stopped_by, Some(Origin::Operator));
}

#[test]
fn a_subscription_is_answered_with_the_journal_offset_after_a_flush() {
    let mut rig = Rig::running(request(), OnTerm::Ignore);
    rig.feed(Input::Happened(EventKind::ParentUnresponsive {
        silent_ms: 5,
    }));
    let journaled: u64 = rig
        .lines
        .iter()
        .filter(|l| l.journal)
        .map(|l| l.event.to_line().len() as u64)
        .sum();
    let flushes = rig.flushes;
    rig.feed(from_client(9, Request::Subscribe));
    assert_eq!(rig.flushes, flushes + 1, "flushed first");
    assert_eq!(rig.subscribed, [9]);
    let (_, ack) = rig.replies.last().unwrap();
    assert!(
        matches!(&ack.kind, EventKind::ControlAck { journal_offset: Some(o), .. } if *o == journaled),
        "{ack:?} vs {journaled}"
    );
    assert_eq!(rig.broker.journal_len(), journaled);
}

#[test]
fn a_control_ping_is_answered_and_journals_nothing() {
    let mut rig = Rig::running(request(), OnTerm::Ignore);
    let before = rig.lines.len();
    rig.feed(from_client(4, Request::Ping));
    assert_eq!(rig.lines.len(), before);
    assert_eq!(rig.replies.len(), 1);
    assert_eq!(rig.replies[0].1.kind.name(), "pong");
}

#[test]
fn a_refused_connection_is_journaled_and_a_bad_line_answered() {
    let mut rig = Rig::running(request(), OnTerm::Ignore);
    rig.feed(Input::ControlRefused {
        client: 5,
        peer: operator(),
        reason: "another uid".into(),
    });
    assert_eq!(rig.count("control_refused"), 1);
    // The refused peer is answered, after the refusal is journaled.
    assert_eq!(rig.replies.len(), 1);
    assert_eq!(rig.replies[0].0, 5);
    assert_eq!(rig.replies[0].1.kind.name(), "control_error");
    let garbage = Frame::Line(b"garbage".to_vec());
    rig.feed(Input::Request {
        from: client(6),
        request: Request::parse(garbage, Transport::Socket),
    });
    assert_eq!(rig.replies[1].0, 6);
    assert!(
        matches!(&rig.replies[1].1.kind, EventKind::ControlError { code, .. } if code == "malformed")
    );
    assert_eq!(rig.count("broker_failure"), 0);
}

#[test]
fn a_second_launch_and_an_unreadable_line_are_protocol_errors() {
    let mut rig = Rig::running(request(), OnTerm::Ignore);
    rig.feed(from_parent(Request::Launch(Box::new(request()))));
    rig.feed(Input::Request {
        from: Sender::Parent,
        request: Err(Refusal {
            code: "malformed",
            message: "cannot parse request".into(),
        }),
    });
    assert_eq!(protocol_errors(&rig), ["already_launched", "malformed"]);
    assert!(rig.world.borrow().sent.is_empty());
}

/// Each way to the broker takes its own requests: a launch, keys and sizes come from the
/// front end that launched it, a subscription and an agent's word from a control client.
/// Another is refused as a line that cannot be read is, and changes nothing.
#[test]
fn a_request_on_the_wrong_transport_is_refused_and_does_nothing() {
    let mut rig = Rig::running(request(), OnTerm::Ignore);
    let waiting = Request::AgentWaiting {
        what: "permission".into(),
    };
    rig.feed(from_parent(Request::Subscribe));
    rig.feed(from_parent(waiting.clone()));
    assert_eq!(
        protocol_errors(&rig),
        ["wrong_transport", "wrong_transport"]
    );
    assert!(rig.replies.is_empty());
    let size = WindowSize { cols: 1, rows: 1 };
    rig.feed(from_client(1, Request::Launch(Box::new(request()))));
    rig.feed(from_client(
        2,
        Request::Input {
            data: b"y\n".to_vec(),
        },
    ));
    rig.feed(from_client(3, Request::Resize { size }));
    // Read from the socket's bytes, by the one parser, a launch is refused by name.
    let launch = Frame::Line(br#"{"type":"launch","v":4}"#.to_vec());
    let request = Request::parse(launch, Transport::Socket);
    rig.feed(Input::Request {
        from: client(4),
        request,
    });
    let refusals: Vec<(u64, String)> = (rig.replies.iter())
        .map(|(client, e)| match &e.kind {
            EventKind::ControlError { code, .. } => (*client, code.clone()),
            other => panic!("{other:?}"),
        })
        .collect();
    let expected = [
        (1, "launch_refused"),
        (2, "wrong_transport"),
        (3, "wrong_transport"),
        (4, "launch_refused"),
    ]
    .map(|(client, code)| (client, code.to_string()));
    assert_eq!(refusals, expected);
    assert_eq!(rig.count("input") + rig.count("resize"), 0);
    assert!(rig.world.borrow().sent.is_empty());
    // On its own way, an agent's word is read (and refused here for what it says: this
    // broker's client is no process of its tree).
    rig.feed(from_client(5, waiting));
    let (_, answer) = rig.replies.last().unwrap();
    assert!(
        matches!(&answer.kind, EventKind::ControlError { code, .. } if code != "wrong_transport"),
        "{answer:?}"
    );
    assert_eq!(protocol_errors(&rig).len(), 2, "{:?}", rig.kinds());
}

#[test]
fn typed_input_is_journaled_as_one_count_a_second() {
    let mut rig = Rig::running(request(), OnTerm::Ignore);
    for _ in 0..5 {
        rig.feed(Input::Typed(InputTaken {
            bytes: 3,
            dropped: 0,
        }));
        rig.advance(ms(100));
    }
    rig.feed(Input::TypedDropped(2));
    assert_eq!(rig.count("input"), 0, "within the second");
    rig.run_until(ms(1000));
    let inputs: Vec<(u64, u64)> = rig
        .journal()
        .filter_map(|e| match e.kind {
            EventKind::Input { bytes, dropped } => Some((bytes, dropped)),
            _ => None,
        })
        .collect();
    assert_eq!(inputs, [(15, 2)]);
}

#[test]
fn another_event_closes_the_input_count_and_nothing_typed_is_nothing_journaled() {
    let mut rig = Rig::running(request(), OnTerm::Ignore);
    rig.feed(Input::Typed(InputTaken::default()));
    rig.feed(Input::TypedDropped(0));
    rig.run_until(ms(2000));
    assert_eq!(rig.count("input"), 0);
    rig.feed(Input::Typed(InputTaken {
        bytes: 1,
        dropped: 0,
    }));
    rig.feed(Input::Resized(crate::protocol::WindowSize::DEFAULT));
    assert_eq!(&rig.kinds()[rig.kinds().len() - 2..], ["input", "resize"]);
}

#[test]
fn a_control_stop_is_answered_after_its_signals_are_journaled() {
    let mut rig = Rig::running(request(), OnTerm::Exit);
    rig.broker
        .handle(from_client(8, Request::Stop { origin: None }), rig.at());
    // Carried out one by one, as the interpreter does: the plan is delivered when it is
    // reached, and what its delivery journals comes before what was queued behind it.
    let mut seen = Vec::new();
    while let Some(output) = rig.broker.poll_output() {
        match output {
            Output::Signal { plan, walk, group } => {
                assert_eq!((plan.signal, plan.also_cont), (ProcessSignal::TERM, true));
                assert_eq!(group, Some(CMD));
                seen.push("plan".to_string());
                let delivered = plan.deliver(&mut FakeKernel(rig.world.clone()), &walk, group);
                rig.broker.handle(Input::Signalled(delivered), rig.at());
            }
            Output::Event { line, .. } => {
                let event: Event = serde_json::from_slice(&line).unwrap();
                seen.push(event.kind.name().to_string());
            }
            Output::Reply { client, .. } => seen.push(format!("reply {client}")),
            Output::FlushJournal => seen.push("flush".into()),
            other => panic!("unexpected {other:?}"),
        }
    }
    let at = |what: &str| seen.iter().position(|s| s == what).unwrap();
    assert!(at("stop_started") < at("plan"), "{seen:?}");
    assert!(at("plan") < at("signal_sent"), "{seen:?}");
    assert_eq!(
        seen.iter().filter(|s| *s == "signal_sent").count(),
        2,
        "{seen:?}"
    );
    let last_signal = seen.iter().rposition(|s| s == "signal_sent").unwrap();
    assert!(
        last_signal < at("flush"),
        "journaled, then flushed: {seen:?}"
    );
    assert!(at("flush") < at("reply 8"), "then answered: {seen:?}");
}

#[test]
fn a_group_signal_is_delivered_as_an_output_and_answered_after_it_is_journaled() {
    use crate::state::requests::{Asker, OperatorTarget};
    let mut rig = Rig::running(request(), OnTerm::Ignore);
    rig.world.borrow_mut().spawn(101, OnTerm::Ignore);
    // Output waiting to be journaled: its event comes before the signal's, as before.
    rig.feed(Input::Read {
        stream: crate::protocol::Stream::Stdout,
        bytes: b"hi",
    });
    rig.broker.handle(
        from_client(8, signal(ProcessSignal::INT, Scope::Group, None)),
        rig.at(),
    );
    let mut seen = Vec::new();
    while let Some(output) = rig.broker.poll_output() {
        match output {
            Output::OperatorSignal(asked) => {
                assert_eq!(asked.signal, ProcessSignal::INT);
                assert_eq!(asked.target, OperatorTarget::Group(Some(CMD)));
                let asker = Asker {
                    client: Some(8),
                    peer: operator(),
                    origin: Origin::Operator,
                };
                assert_eq!(asked.asker, asker);
                assert!(
                    rig.world.borrow().sent.is_empty(),
                    "not sent by the machine"
                );
                assert!(!seen.iter().any(|s: &String| s.starts_with("reply")));
                seen.push("deliver".to_string());
                let walk = asked.walk.clone();
                let delivered = asked.deliver(&mut FakeKernel(rig.world.clone()), &walk);
                rig.broker
                    .handle(Input::OperatorSignalled(delivered), rig.at());
            }
            Output::Event { line, .. } => {
                let event: Event = serde_json::from_slice(&line).unwrap();
                if let EventKind::SignalSent {
                    signal,
                    scope,
                    origin,
                    targets,
                    client,
                } = &event.kind
                {
                    assert_eq!(
                        (*signal, *scope, *origin, targets.clone()),
                        (
                            ProcessSignal::INT,
                            Scope::Group,
                            Origin::Operator,
                            vec![CMD, 101]
                        )
                    );
                    assert_eq!(client.as_ref(), Some(&operator()));
                }
                seen.push(event.kind.name().to_string());
            }
            Output::Reply { client, line } => {
                let event: Event = serde_json::from_slice(&line).unwrap();
                match event.kind {
                    EventKind::ControlAck {
                        request, targets, ..
                    } => assert_eq!((request.as_str(), targets), ("signal", vec![CMD, 101])),
                    other => panic!("{other:?}"),
                }
                seen.push(format!("reply {client}"));
            }
            Output::FlushJournal => seen.push("flush".into()),
            Output::Store { .. } => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(
        seen,
        ["deliver", "output", "signal_sent", "flush", "reply 8"],
        "delivered, journaled, flushed, then answered"
    );
    assert_eq!(
        rig.world.borrow().sent,
        [(ProcessSignal::INT, vec![CMD, 101])]
    );
}

#[test]
fn a_pid_the_walk_does_not_find_is_refused_once_delivery_says_so() {
    use crate::state::requests::OperatorTarget;
    let mut rig = Rig::running(request(), OnTerm::Ignore);
    rig.feed(from_client(
        3,
        signal(ProcessSignal::TERM, Scope::Pid, Some(1)),
    ));
    // The machine cannot know the tree: it asks, and the delivery finds no such process.
    let asked: Vec<OperatorTarget> = rig.operator_signals.iter().map(|s| s.target).collect();
    assert_eq!(asked, [OperatorTarget::Pid(1)]);
    let (client, error) = rig.replies.last().unwrap();
    assert_eq!(*client, 3);
    assert!(
        matches!(&error.kind, EventKind::ControlError { code, message } if code == "not_a_descendant" && message.contains("pid 1 "))
    );
    // From the parent, the same refusal is a protocol error in the journal.
    rig.feed(from_parent(Request::Signal {
        signal: ProcessSignal::TERM,
        scope: Scope::Pid,
        pid: Some(1),
        origin: None,
    }));
    assert_eq!(protocol_errors(&rig), ["not_a_descendant"]);
    assert_eq!(rig.count("signal_sent"), 0);
    assert!(rig.world.borrow().sent.is_empty());
    assert_eq!(rig.replies.len(), 1, "the parent's refusal is no reply");
}

#[test]
fn a_signal_mid_stop_is_journaled_between_the_stops_own_and_leaves_the_stop_running() {
    let mut rig = Rig::running(request(), OnTerm::Ignore);
    rig.world.borrow_mut().spawn(101, OnTerm::Ignore);
    rig.feed(from_client(2, Request::Stop { origin: None }));
    rig.feed(from_client(
        5,
        signal(ProcessSignal::INT, Scope::Group, None),
    ));
    let (client, ack) = rig.replies.last().unwrap();
    assert_eq!(*client, 5);
    assert!(
        matches!(&ack.kind, EventKind::ControlAck { request, targets, .. } if request == "signal" && *targets == [CMD, 101]),
        "{ack:?}"
    );
    assert_eq!(
        rig.signals(),
        [
            ("TERM".into(), vec![CMD, 101]),
            ("CONT".into(), vec![CMD, 101]),
            ("INT".into(), vec![CMD, 101]),
        ]
    );
    // The operator's INT is the operator's, not the stop's: the stop goes on to its KILL.
    rig.run_until(ms(1500));
    assert_eq!(rig.count("stop_started"), 1);
    assert_eq!(rig.count("hard_kill"), 1);
    let kinds = rig.kinds();
    let int_at = rig
        .journal()
        .position(|e| matches!(&e.kind, EventKind::SignalSent { signal, .. } if *signal == ProcessSignal::INT))
        .unwrap();
    let hard_kill_at = kinds.iter().position(|k| *k == "hard_kill").unwrap();
    assert!(int_at < hard_kill_at, "{kinds:?}");
    assert_eq!(
        rig.signals().last().unwrap(),
        &("KILL".into(), vec![CMD, 101])
    );
    rig.reap();
    assert_eq!(rig.finish(), 0);
    assert_eq!(rig.result().stopped_by, Some(Origin::Operator));
}

#[test]
fn a_control_client_is_the_operator_whatever_origin_it_names() {
    let mut rig = Rig::running(request(), OnTerm::Exit);
    rig.feed(from_client(
        1,
        Request::Signal {
            signal: ProcessSignal::CONT,
            scope: Scope::Group,
            pid: None,
            origin: Some(Origin::Shutdown),
        },
    ));
    rig.feed(from_client(
        2,
        Request::Stop {
            origin: Some(Origin::Caller),
        },
    ));
    let origins: Vec<(&'static str, Origin)> = rig
        .journal()
        .filter_map(|e| match &e.kind {
            EventKind::SignalSent { origin, .. } | EventKind::StopStarted { origin, .. } => {
                Some((e.kind.name(), *origin))
            }
            _ => None,
        })
        .collect();
    assert!(
        origins.iter().any(|(kind, _)| *kind == "stop_started"),
        "{origins:?}"
    );
    assert!(
        origins
            .iter()
            .all(|(_, origin)| *origin == Origin::Operator),
        "{origins:?}"
    );
}

/// The operator's stop during the launcher's stop for a changed file takes it over: no second
/// TERM, but the run is now the operator's (`stop_started` with their origin, `stopped_by`),
/// so that it reads stopped, not restarted. A stop for a change during an operator's stop
/// changes nothing.
#[test]
fn an_operator_stop_takes_over_a_stop_for_a_changed_file() {
    let mut rig = Rig::running(request(), OnTerm::Ignore);
    rig.feed(from_parent(Request::Stop {
        origin: Some(Origin::FileChanged),
    }));
    let terms = rig.signals().len();
    rig.run_until(ms(300));
    rig.feed(from_client(2, Request::Stop { origin: None }));
    assert!(
        matches!(&rig.replies.last().unwrap().1.kind, EventKind::ControlAck { request, message: None, .. } if request == "stop"),
        "{:?}",
        rig.replies
    );
    assert_eq!(rig.signals().len(), terms, "no second TERM");
    let stops: Vec<(Origin, Duration)> = rig
        .journal()
        .filter_map(|e| match e.kind {
            EventKind::StopStarted { origin, grace } => Some((origin, grace)),
            _ => None,
        })
        .collect();
    // Its grace is what is left of the first stop's: the KILL is due at 1 s all the same.
    assert_eq!(
        stops,
        [(Origin::FileChanged, ms(1000)), (Origin::Operator, ms(700))]
    );
    rig.run_until(ms(1000));
    assert_eq!(rig.signals().last().unwrap(), &("KILL".into(), vec![CMD]));
    rig.reap();
    rig.finish();
    assert_eq!(rig.result().stopped_by, Some(Origin::Operator));

    let mut rig = Rig::running(request(), OnTerm::Ignore);
    rig.feed(from_client(2, Request::Stop { origin: None }));
    rig.feed(from_parent(Request::Stop {
        origin: Some(Origin::FileChanged),
    }));
    assert_eq!(rig.count("stop_started"), 1);
    rig.run_until(ms(1000));
    rig.reap();
    rig.finish();
    assert_eq!(rig.result().stopped_by, Some(Origin::Operator));

    // Once the command has ended, the change's stop is how it ended: nothing to take over.
    let mut rig = Rig::running(request(), OnTerm::Exit);
    rig.feed(from_parent(Request::Stop {
        origin: Some(Origin::FileChanged),
    }));
    rig.reap();
    rig.feed(from_client(2, Request::Stop { origin: None }));
    assert_eq!(rig.count("stop_started"), 1);
    rig.finish();
    assert_eq!(rig.result().stopped_by, Some(Origin::FileChanged));
}
