//! An agent waiting for its human, over fake samples and a fake clock: the agent's process is
//! seen in `epoll_wait` on its terminal, or not; its commands' brokers run, or not; it
//! writes (a spinner), uses CPU, is typed to.

use std::time::Duration;

use std::time::Instant;

use crate::attention::detector::{
    Blocked, Detector, InputKind, ProcessSample, Sample, WAITING_FOR_YOU,
};
use tether_protocol::protocol::{AttentionKind, AttentionRequest, EventKind};

const HZ: u64 = 100;
const AGENT: i32 = 10;
const BROKER: i32 = 20;
const SERVER: i32 = 30;

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

/// An agent's detector, `input_after` 3 s (the default).
fn agent_detector(t0: Instant) -> Detector {
    let request = AttentionRequest {
        agent: true,
        ..AttentionRequest::default()
    };
    Detector::new(request.clone(), HZ, t0)
}

/// What a look at the agent finds at `t` seconds.
#[derive(Clone, Copy)]
struct World {
    /// Its main thread sleeps in `epoll_wait` with its terminal in the set.
    waits: bool,
    /// A command of its runs.
    command: bool,
    /// Another command of its runs, started before `command` (a server).
    server: bool,
    /// Share of a core it uses (0.005: Claude Code at its prompt).
    cpu: f64,
    /// Until then it used a third of a core (drawing an answer).
    drew_until: f64,
    /// A process of the server uses a whole core (a runaway the agent left running).
    server_burns: bool,
}

const AT_PROMPT: World = World {
    waits: true,
    command: false,
    server: false,
    cpu: 0.005,
    drew_until: 0.0,
    server_burns: false,
};

fn look(world: World, t: f64) -> Sample {
    let mut processes = vec![ProcessSample {
        pid: AGENT,
        start_ticks: 1,
        cpu_ticks: ((t.min(world.drew_until) * 0.3 + (t - world.drew_until).max(0.0) * world.cpu)
            * HZ as f64) as u64,
        rss_bytes: 300 << 20,
        demand_ns: None,
        blocked: world.waits.then(|| Blocked {
            fd: 0,
            input: InputKind::Terminal,
            call: "epoll_wait",
            program: "claude".into(),
            reads: None,
        }),
        runs_command: false,
        of_command: false,
    }];
    let commands = [(world.server, SERVER, 2), (world.command, BROKER, 3)];
    for (_, pid, start_ticks) in commands.into_iter().filter(|c| c.0) {
        processes.push(ProcessSample {
            pid,
            start_ticks,
            cpu_ticks: 0,
            rss_bytes: 4 << 20,
            demand_ns: None,
            blocked: None,
            runs_command: true,
            of_command: true,
        });
    }
    if world.server && world.server_burns {
        // In the agent's tree below the server's broker, as a sandbox keeps it (Codex's).
        processes.push(ProcessSample {
            pid: SERVER + 1,
            start_ticks: 4,
            cpu_ticks: (t * HZ as f64) as u64,
            rss_bytes: 1 << 30,
            demand_ns: None,
            blocked: None,
            runs_command: false,
            of_command: true,
        });
    }
    Sample::Fresh(processes)
}

/// The kinds raised (`+`) and cleared (`-`), in order.
fn kinds(events: &[EventKind]) -> Vec<String> {
    events
        .iter()
        .map(|e| match e {
            EventKind::Attention { attention, .. } => format!("+{}", attention.name()),
            EventKind::AttentionCleared { attention } => format!("-{}", attention.name()),
            other => panic!("not an attention event: {other:?}"),
        })
        .collect()
}

/// `events` are one `needs_input` raised, at a time within `within` (seconds).
fn flagged_once(events: &[(f64, EventKind)], within: std::ops::Range<f64>) {
    let raised: Vec<EventKind> = events.iter().map(|(_, e)| e.clone()).collect();
    assert_eq!(kinds(&raised), ["+needs_input"], "{events:?}");
    assert!(within.contains(&events[0].0), "flagged at {}", events[0].0);
}

/// Drives the detector as the broker does, from `from` to `to` seconds: a look on the tree's
/// own schedule (every `every` seconds) and at each deadline the detector asks for;
/// `world(t)` says what a look finds, `wrote(t)` whether the agent wrote in the 50 ms step
/// before `t`. Returns the events, each with its time.
fn drive(
    d: &mut Detector,
    t0: Instant,
    (from, to): (f64, f64),
    every: f64,
    world: impl Fn(f64) -> World,
    wrote: impl Fn(f64) -> bool,
) -> Vec<(f64, EventKind)> {
    let mut events = Vec::new();
    // In whole steps of 50 ms, the time rounded to them (no drift of a float sum).
    let steps = ((to - from) / 0.05).round() as u64;
    let mut next_scheduled = from;
    for i in 0..=steps {
        let t = ((from + i as f64 * 0.05) * 100.0).round() / 100.0;
        let now = t0 + secs(t);
        if wrote(t) {
            d.output(now);
        }
        let due = d.next_deadline().is_some_and(|at| at <= now);
        if due || t + 1e-9 >= next_scheduled {
            d.sampled(now, look(world(t), t));
            if t + 1e-9 >= next_scheduled {
                next_scheduled += every;
            }
        }
        events.extend(d.take().into_iter().map(|e| (t, e)));
    }
    events
}

#[test]
fn at_its_prompt_silent_and_idle_it_waits_for_you_after_the_threshold_once() {
    let t0 = Instant::now();
    let mut d = agent_detector(t0);
    // The tree's schedule backs off to a look every 30 s: the detector's own wake-up finds it.
    let events = drive(&mut d, t0, (0.0, 60.0), 30.0, |_| AT_PROMPT, |_| false);
    assert_eq!(events.len(), 1, "{events:?}");
    let (at, event) = &events[0];
    assert!((3.0..3.1).contains(at), "flagged at {at}");
    match event {
        EventKind::Attention { attention, detail } => {
            assert_eq!(*attention, AttentionKind::NeedsInput);
            assert_eq!(
                detail,
                &format!(
                    "{WAITING_FOR_YOU}: claude epoll_wait on its terminal (fd 0); no output, CPU or command for 3.0s"
                )
            );
        }
        other => panic!("{other:?}"),
    }
    // Flagged: no more wake-ups for it.
    assert_eq!(d.next_deadline(), None);
}

#[test]
fn the_threshold_counts_from_its_last_output() {
    let t0 = Instant::now();
    let mut d = agent_detector(t0);
    // Its answer streams until 5 s, drawn with a third of a core, then it sits at its
    // prompt; the tree is looked at every 2 s (a look's CPU then spans the last frames).
    let answering = |_| World {
        drew_until: 5.0,
        ..AT_PROMPT
    };
    let events = drive(&mut d, t0, (0.0, 20.0), 2.0, answering, |t| t < 5.0);
    let times: Vec<f64> = events.iter().map(|(t, _)| *t).collect();
    assert_eq!(
        kinds(&events.into_iter().map(|(_, e)| e).collect::<Vec<_>>()),
        ["+needs_input"]
    );
    // The threshold after its last output, not a look's interval later.
    assert!((7.95..8.05).contains(&times[0]), "flagged at {times:?}");
}

#[test]
fn never_while_a_command_of_its_runs_and_it_says_nothing() {
    let t0 = Instant::now();
    let mut d = agent_detector(t0);
    // A 10 s command from 1 s, the agent silent (no spinner) and idle all along.
    let command = |t: f64| World {
        command: (1.0..11.0).contains(&t),
        ..AT_PROMPT
    };
    let events = drive(&mut d, t0, (1.0, 11.0), 1.0, command, |_| false);
    assert!(events.is_empty(), "{events:?}");
    // Over: flagged a threshold after the last look that saw it run.
    let events = drive(&mut d, t0, (11.0, 30.0), 1.0, command, |_| false);
    flagged_once(&events, 13.0..14.1);
}

/// A server it started and then wrote after (`Running in the background`) is no command
/// it waits for: at its prompt it waits for you a threshold after it last wrote, the server
/// running all along. A command it starts in silence meanwhile holds the wait as any does.
#[test]
fn a_command_it_wrote_after_runs_in_the_background() {
    let t0 = Instant::now();
    let mut d = agent_detector(t0);
    // The server from 1 s; the agent tells of it at 1.5 s.
    let server = |t: f64| World {
        server: t >= 1.0,
        ..AT_PROMPT
    };
    let told = |t: f64| (t - 1.5).abs() < 1e-9;
    let events = drive(&mut d, t0, (0.0, 10.0), 1.0, server, told);
    flagged_once(&events, 4.5..4.6);
    // The operator types; then a silent 10 s command from 12 s, the server still running.
    d.typed(t0 + secs(10.5));
    assert_eq!(kinds(&d.take()), ["-needs_input"]);
    let both = |t: f64| World {
        command: (12.0..22.0).contains(&t),
        ..server(t)
    };
    let events = drive(&mut d, t0, (10.5, 22.0), 1.0, both, |_| false);
    assert!(events.is_empty(), "{events:?}");
    let events = drive(&mut d, t0, (22.0, 40.0), 1.0, both, |_| false);
    flagged_once(&events, 25.0..26.1);
}

/// A command of its that burns a core in its tree (Codex's sandbox keeps its commands there,
/// in its cgroup) is the command's work, not the agent's: the agent at its prompt waits for
/// you all the same, and is no runaway (a trial's watch flagged Codex, and `g` offered to
/// stop it, for its sandboxed runaway).
#[test]
fn a_command_that_burns_a_core_in_its_tree_is_not_the_agents_work() {
    let t0 = Instant::now();
    let mut d = agent_detector(t0);
    let server = |t: f64| World {
        server: t >= 1.0,
        server_burns: t >= 1.0,
        ..AT_PROMPT
    };
    let told = |t: f64| (t - 1.5).abs() < 1e-9;
    let events = drive(&mut d, t0, (0.0, 200.0), 1.0, server, told);
    flagged_once(&events, 4.5..4.6);
}

#[test]
fn never_while_it_animates_a_spinner_or_uses_cpu() {
    let t0 = Instant::now();
    let mut d = agent_detector(t0);
    // A model reply delayed 8 s: a frame of the spinner every 100 ms, and the CPU for it.
    let spinning = World {
        cpu: 0.08,
        ..AT_PROMPT
    };
    let frame = |t: f64| ((t * 100.0).round() as i64) % 10 == 0;
    let events = drive(&mut d, t0, (0.0, 8.0), 1.0, |_| spinning, frame);
    assert!(events.is_empty(), "{events:?}");
    // Silent, but busy (it works without printing): not waiting either.
    let busy = World {
        cpu: 0.5,
        ..AT_PROMPT
    };
    let events = drive(&mut d, t0, (8.0, 20.0), 1.0, |_| busy, |_| false);
    assert!(events.is_empty(), "{events:?}");
    // Idle from 20 s: a threshold later.
    let events = drive(&mut d, t0, (20.0, 30.0), 1.0, |_| AT_PROMPT, |_| false);
    flagged_once(&events, 23.0..24.1);
}

#[test]
fn never_when_no_thread_waits_on_its_terminal() {
    let t0 = Instant::now();
    let mut d = agent_detector(t0);
    // Silent and idle, but waiting on something else (a socket, a child).
    let elsewhere = World {
        waits: false,
        ..AT_PROMPT
    };
    let events = drive(&mut d, t0, (0.0, 30.0), 30.0, |_| elsewhere, |_| false);
    assert!(events.is_empty(), "{events:?}");
    // Looked at again a threshold after each look, not more often.
    let looked = t0 + secs(30.0);
    d.sampled(looked, look(elsewhere, 30.0));
    assert_eq!(d.next_deadline(), Some(looked + secs(3.0)));
}

#[test]
fn typing_or_its_output_clears_it_and_it_waits_again_a_threshold_later() {
    let t0 = Instant::now();
    let mut d = agent_detector(t0);
    let events = drive(&mut d, t0, (0.0, 5.0), 1.0, |_| AT_PROMPT, |_| false);
    assert_eq!(events.len(), 1);
    d.typed(t0 + secs(5.5));
    assert_eq!(kinds(&d.take()), ["-needs_input"]);
    let events = drive(&mut d, t0, (5.5, 12.0), 1.0, |_| AT_PROMPT, |_| false);
    flagged_once(&events, 8.5..9.1);
    d.output(t0 + secs(12.5));
    assert_eq!(kinds(&d.take()), ["-needs_input"]);
}

#[test]
fn a_command_that_starts_clears_it() {
    let t0 = Instant::now();
    let mut d = agent_detector(t0);
    drive(&mut d, t0, (0.0, 5.0), 1.0, |_| AT_PROMPT, |_| false);
    let with_command = World {
        command: true,
        ..AT_PROMPT
    };
    d.sampled(t0 + secs(6.0), look(with_command, 6.0));
    assert_eq!(kinds(&d.take()), ["-needs_input"]);
    assert_eq!(d.next_deadline(), None, "no wake-up while a command runs");
}

#[test]
fn its_own_hook_tells_it_at_once_and_output_ends_it() {
    let t0 = Instant::now();
    let mut d = agent_detector(t0);
    d.told_waiting("Claude needs your permission to use Bash");
    match &d.take()[..] {
        [EventKind::Attention { attention, detail }] => {
            assert_eq!(*attention, AttentionKind::NeedsInput);
            assert_eq!(
                detail,
                "waiting for you: Claude needs your permission to use Bash"
            );
        }
        other => panic!("{other:?}"),
    }
    d.told_waiting("again");
    assert!(d.take().is_empty(), "once per episode");
    d.output(t0 + secs(1.0));
    assert_eq!(kinds(&d.take()), ["-needs_input"]);
}

#[test]
fn a_look_that_finds_its_loop_awake_is_tried_again_soon() {
    let t0 = Instant::now();
    let mut d = agent_detector(t0);
    // At the threshold its event loop is awake for a moment (a timer's work), not waiting.
    let awake_at_three = |t: f64| World {
        waits: !(2.95..3.05).contains(&t),
        ..AT_PROMPT
    };
    let events = drive(&mut d, t0, (0.0, 10.0), 30.0, awake_at_three, |_| false);
    flagged_once(&events, 3.25..3.35);
}

#[test]
fn a_moments_work_while_quiet_is_still_idle_but_sustained_work_is_not() {
    let t0 = Instant::now();
    let mut d = agent_detector(t0);
    // 30 ms of work 2 s after going quiet (Claude Code after an answer), looked at each second.
    let mut world = AT_PROMPT;
    world.cpu = 0.0;
    d.sampled(t0 + secs(0.5), look(world, 0.0));
    let at = |t: f64, ticks: u64| {
        let Sample::Fresh(mut p) = look(world, 0.0) else {
            unreachable!()
        };
        p[0].cpu_ticks = ticks;
        (t0 + secs(t), Sample::Fresh(p))
    };
    for (t, ticks) in [(1.5, 0), (2.5, 3)] {
        let (now, sample) = at(t, ticks);
        d.sampled(now, sample);
    }
    assert!(d.take().is_empty(), "not yet the threshold");
    let (now, sample) = at(3.5, 3);
    d.sampled(now, sample);
    assert_eq!(kinds(&d.take()), ["+needs_input"]);
    // Again from a typed key, now working a tenth of a core without a word: not idle.
    d.typed(t0 + secs(4.0));
    d.take();
    for i in 0..20 {
        let t = 4.5 + i as f64;
        let (now, sample) = at(t, 3 + (i as u64 + 1) * 10);
        d.sampled(now, sample);
    }
    assert!(d.take().is_empty(), "busy, silent: not waiting");
}
