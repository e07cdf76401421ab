use super::*;
use tether_protocol::protocol::fixtures::{event, output, signal_sent, spawned, tree};
use tether_protocol::protocol::{CommandSpec, ExitStatus, Origin, ProcessSignal, Scope, Stream};

fn command(name: &str, events: Vec<Event>) -> CommandRecording {
    CommandRecording {
        config: CommandConfig::new(name, CommandSpec::Shell("true".into())),
        dir: "/nonexistent".into(),
        run: 1,
        caller_pid: None,
        events,
    }
}

/// At the time cursor a command knows who asked for it, as it does live and at the end:
/// an agent's tree shows its shell call as that command, not as an escapee.
#[test]
fn a_command_at_the_cursor_knows_its_caller() {
    let mut call = command("server", vec![event(1_000, spawned(7))]);
    call.caller_pid = Some(4242);
    let recording = Recording::new(vec![call]);
    assert_eq!(recording.commands_at(2_000)[0].caller_pid, Some(4242));
    assert_eq!(
        recording.commands_at(500)[0].caller_pid,
        Some(4242),
        "not started yet"
    );
}

/// `job` prints, grows a tree, is signalled and exits; `late` starts after it began.
fn recording() -> Recording {
    let killed = ExitStatus {
        code: None,
        signal: Some(15),
        core_dumped: false,
    };
    Recording::new(vec![
        command(
            "job",
            vec![
                event(
                    1_000,
                    EventKind::BrokerStarted {
                        v: 2,
                        broker_pid: 9,
                        control_socket: None,
                    },
                ),
                event(1_001, spawned(10)),
                tree(1_002, &[10]),
                output(1_100, Stream::Stdout, 0, 6),
                output(1_200, Stream::Stderr, 0, 4),
                tree(1_300, &[10, 11]),
                output(1_400, Stream::Stdout, 6, 10),
                event(
                    2_000,
                    signal_sent(ProcessSignal::TERM, Scope::Group, Origin::Operator, 10),
                ),
                event(
                    2_000,
                    signal_sent(ProcessSignal::CONT, Scope::Group, Origin::Operator, 10),
                ),
                event(
                    2_050,
                    EventKind::Exit {
                        pid: 10,
                        status: killed,
                    },
                ),
                event(
                    2_060,
                    EventKind::Close {
                        stdout_bytes: 16,
                        stderr_bytes: 4,
                    },
                ),
            ],
        ),
        command("late", vec![event(1_500, spawned(20))]),
    ])
}

#[test]
fn the_cursor_stops_at_every_moment_once_and_at_notable_ones_on_braces() {
    let r = recording();
    assert_eq!((r.first(), r.last()), (Some(1_000), Some(2_060)));
    // From the end, back through every moment, the two signals at 2000 being one.
    let mut at = None;
    let mut visited = Vec::new();
    while let Some(ms) = r.prev_event(at) {
        visited.push(ms);
        at = Some(ms);
    }
    assert_eq!(
        visited,
        [
            2_060, 2_050, 2_000, 1_500, 1_400, 1_300, 1_200, 1_100, 1_002, 1_001, 1_000
        ]
    );
    assert_eq!(r.next_event(Some(1_400)), Some(1_500));
    assert_eq!(r.next_event(Some(2_060)), None);
    assert_eq!(r.next_event(None), None, "nothing after the end");
    // Output, trees, spawns are not notable; signals and exits are.
    assert_eq!(r.prev_notable(None), Some(2_050));
    assert_eq!(r.prev_notable(Some(2_050)), Some(2_000));
    assert_eq!(r.prev_notable(Some(2_000)), None);
    assert_eq!(r.next_notable(Some(1_000)), Some(2_000));
}

/// An agent's run is thousands of commands that exit 0: `}` passes them by, and stops at
/// one that failed.
#[test]
fn a_clean_exit_is_not_notable_and_a_failed_one_is() {
    let exit = |ts, code| {
        let status = ExitStatus {
            code: Some(code),
            signal: None,
            core_dumped: false,
        };
        event(ts, EventKind::Exit { pid: 7, status })
    };
    let r = Recording::new(vec![
        command("ok", vec![event(1_000, spawned(7)), exit(1_100, 0)]),
        command("failed", vec![event(1_200, spawned(8)), exit(1_300, 3)]),
    ]);
    assert_eq!(r.next_event(Some(1_000)), Some(1_100));
    assert_eq!(r.next_notable(Some(1_000)), Some(1_300));
    assert_eq!(r.prev_notable(None), Some(1_300));
    assert_eq!(r.prev_notable(Some(1_300)), None);
}

/// An agent's own row redraws its screen all the time: its output is no moment for `[ ]`;
/// a command's output is.
#[test]
fn an_agents_screen_output_is_no_moment_to_stop_at() {
    let mut agent = command("gemini", vec![event(1_000, spawned(5))]);
    agent.config = CommandState::agent_for_test("gemini");
    for ts in [1_100, 1_200, 1_300] {
        agent
            .events
            .push(output(ts, Stream::Stdout, (ts - 1_100) * 100, 100));
    }
    let ls = command(
        "ls",
        vec![
            event(1_150, spawned(7)),
            output(1_250, Stream::Stdout, 0, 10),
        ],
    );
    let r = Recording::new(vec![agent, ls]);
    let mut at = r.first();
    let mut visited = vec![at.unwrap()];
    while let Some(ms) = r.next_event(at) {
        visited.push(ms);
        at = Some(ms);
    }
    assert_eq!(visited, [1_000, 1_150, 1_250]);
    // Its output still bounds the recording: its last screen, at 1 300, is the end.
    assert_eq!((r.first(), r.last()), (Some(1_000), Some(1_300)));
}

#[test]
fn steps_stay_within_the_recording() {
    let r = recording();
    assert_eq!(r.step_back(None, 500), Some(1_560));
    assert_eq!(r.step_back(Some(1_200), 500), Some(1_000));
    assert_eq!(r.step_back(Some(1_000), 500), None);
    assert_eq!(r.step_forward(Some(1_000), 500), Some(1_500));
    assert_eq!(r.step_forward(Some(1_900), 500), Some(2_060));
    assert_eq!(r.step_forward(Some(2_060), 500), None);
    assert_eq!(r.step_forward(None, 500), None);
}

#[test]
fn the_state_at_a_moment_is_the_replay_of_the_events_up_to_it() {
    let r = recording();
    let pids = |c: &CommandState| c.tree.iter().map(|p| p.pid).collect::<Vec<_>>();

    // Between two output events: the streams end where the last one before ended.
    let [job, late] = <[CommandState; 2]>::try_from(r.commands_at(1_250)).expect("two");
    assert_eq!(job.status, Status::Running);
    assert_eq!(job.bytes, [6, 4]);
    assert_eq!(pids(&job), [10], "the last tree before the moment");
    assert!(job.timeline.iter().all(|e| e.ts_ms <= 1_250));
    assert_eq!(late.status, Status::Idle, "not started yet");
    assert_eq!(late.started_ms, None);

    let [job, late] = <[CommandState; 2]>::try_from(r.commands_at(1_400)).expect("two");
    assert_eq!(job.bytes, [16, 4], "an event at the moment counts");
    assert_eq!(pids(&job), [10, 11]);
    assert_eq!(late.status, Status::Idle);
    assert_eq!(r.commands_at(1_500)[1].status, Status::Running);

    // The stop sequence: TERM and CONT at the same moment, then the exit.
    let job = &r.commands_at(2_000)[0];
    assert_eq!(job.status, Status::Stopping);
    assert_eq!(job.markers.len(), 1, "a TERM marker; CONT is none");
    let job = &r.commands_at(2_050)[0];
    assert_eq!(job.status.label(), "SIGTERM");
    assert_eq!(job.ended_ms, Some(2_050));

    // Before anything: every command idle.
    assert!(r.commands_at(0).iter().all(|c| c.status == Status::Idle));
}

#[test]
fn events_at_a_moment_name_their_command() {
    let r = recording();
    let at: Vec<(usize, &str)> = r
        .events_at(2_000)
        .map(|(i, e)| (i, e.kind.name()))
        .collect();
    assert_eq!(at, [(0, "signal_sent"), (0, "signal_sent")]);
    assert_eq!(r.events_at(1_500).count(), 1);
    assert_eq!(r.events_at(1_501).count(), 0);
}

#[test]
fn steps_are_named_as_the_status_bar_shows_them() {
    let names: Vec<String> = STEPS_MS.iter().map(|&ms| step_label(ms)).collect();
    assert_eq!(names.first().map(String::as_str), Some("100ms"));
    assert_eq!(names[DEFAULT_STEP], "1s");
    assert_eq!(names.last().map(String::as_str), Some("1h"));
    assert!(names.contains(&"5m".to_string()));
}

/// At the time cursor a command that had not begun is `not_yet`, so that the list leaves it
/// out as a watch did not list it then; a word of the launcher's about it (a wait for a
/// dependency before its first run, by its name; its `null` about a run, by its directory)
/// is something of it, and it is listed from then on.
#[test]
fn a_command_not_begun_at_the_cursor_is_not_yet() {
    let early = command("early", vec![event(1_000, spawned(7))]);
    let mut late = command("late", vec![event(3_000, spawned(8))]);
    late.dir = "/s/02-late".into();
    let unborn = CommandState::new(CommandConfig::new(
        "late",
        CommandSpec::Shell("true".into()),
    ));
    let waiting = crate::Plan::Waiting {
        on: "early".into(),
        not_started: false,
    };
    // Before its first run the launcher names it; it has no directory yet.
    let said = crate::plan::line(1_500, &unborn, Some(&waiting), true);
    assert_eq!(said.dir, None);
    let r = Recording::new(vec![early.clone(), late.clone()]).with_launcher(vec![said]);
    let not_yet = |r: &Recording, at: u64| -> Vec<bool> {
        r.commands_at(at).iter().map(|c| c.not_yet).collect()
    };
    assert_eq!(not_yet(&r, 500), [true, true], "before anything");
    assert_eq!(
        not_yet(&r, 1_000),
        [false, true],
        "an event at the moment counts"
    );
    assert_eq!(
        not_yet(&r, 1_500),
        [false, false],
        "waiting, as the launcher said"
    );
    assert_eq!(not_yet(&r, 3_000), [false, false]);

    // Its run's `null` (nothing more to add), a few milliseconds before the run's first
    // event: listed from then on.
    let mut run = unborn.clone();
    run.journal_dir = Some("/s/02-late".into());
    let cleared = crate::plan::line(2_990, &run, None, false);
    let r = Recording::new(vec![early, late]).with_launcher(vec![cleared]);
    assert_eq!(not_yet(&r, 2_989), [false, true]);
    assert_eq!(not_yet(&r, 2_990), [false, false], "once spoken of, listed");

    let without_launcher = Recording::new(vec![command("late", vec![event(3_000, spawned(8))])]);
    assert!(without_launcher.commands_at(2_999)[0].not_yet);
    assert!(!without_launcher.commands_at(3_000)[0].not_yet);
}
