//! The detector over fake samples and a fake clock.

mod agent;

use std::time::Duration;

use std::time::Instant;

use super::detector::{Blocked, CONFIRM_GAP, Detector, Ending, InputKind, ProcessSample, Sample};
use tether_protocol::protocol::{AttentionKind, AttentionRequest, EventKind, ExitStatus};

const HZ: u64 = 100;

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

fn detector(t0: Instant) -> Detector {
    Detector::new(AttentionRequest::default(), HZ, t0)
}

/// A detector that calls a tree busy for two seconds a runaway.
fn runaway_detector(t0: Instant) -> Detector {
    let request = AttentionRequest {
        runaway_after: Some(Duration::from_millis(2_000)),
        ..AttentionRequest::default()
    };
    Detector::new(request.clone(), HZ, t0)
}

fn process(pid: i32, cpu_ticks: u64) -> ProcessSample {
    ProcessSample {
        pid,
        start_ticks: 1,
        cpu_ticks,
        rss_bytes: 1 << 20,
        demand_ns: None,
        blocked: None,
        runs_command: false,
        of_command: false,
    }
}

fn reading(pid: i32, reads: u64) -> ProcessSample {
    ProcessSample {
        blocked: Some(Blocked {
            fd: 0,
            input: InputKind::Pipe,
            call: "read",
            program: "sh".into(),
            reads: Some(reads),
        }),
        ..process(pid, 3)
    }
}

/// The kinds raised (`+`) and cleared (`-`), in order.
fn kinds(events: Vec<EventKind>) -> Vec<String> {
    events
        .into_iter()
        .map(|e| match e {
            EventKind::Attention { attention, .. } => format!("+{}", attention.name()),
            EventKind::AttentionCleared { attention } => format!("-{}", attention.name()),
            other => panic!("not an attention event: {other:?}"),
        })
        .collect()
}

fn exit(code: i32) -> ExitStatus {
    ExitStatus {
        code: Some(code),
        signal: None,
        core_dumped: false,
    }
}

#[test]
fn blocked_on_its_input_and_silent_is_needs_input_once_until_it_reads() {
    let t0 = Instant::now();
    let mut d = detector(t0);
    d.sampled(t0 + secs(0.05), Sample::Fresh(vec![reading(10, 4)]));
    assert_eq!(d.next_deadline(), Some(t0 + secs(3.0)));
    d.sampled(t0 + secs(1.05), Sample::Fresh(vec![reading(10, 4)]));
    assert!(d.take().is_empty(), "silent for 1 s only");
    d.sampled(t0 + secs(3.0), Sample::Unchanged);
    let events = d.take();
    match &events[..] {
        [EventKind::Attention { attention, detail }] => {
            assert_eq!(*attention, AttentionKind::NeedsInput);
            assert_eq!(detail, "sh read(0) blocked on a pipe; no output for 3.0s");
        }
        other => panic!("{other:?}"),
    }
    // Once per episode: still blocked later says nothing new, and asks for no wake-up.
    d.sampled(t0 + secs(7.0), Sample::Fresh(vec![reading(10, 4)]));
    assert!(d.take().is_empty());
    assert_eq!(d.next_deadline(), None);
    // It read a line and waits again: the episode is over.
    d.sampled(t0 + secs(8.0), Sample::Fresh(vec![reading(10, 6)]));
    assert_eq!(kinds(d.take()), ["-needs_input"]);
}

#[test]
fn a_loop_of_short_reads_is_never_needs_input() {
    let t0 = Instant::now();
    let mut d = detector(t0);
    // Seen blocked at every look, as a reader of a slow pipe is, but its reads go up.
    let mut reads = 0;
    let mut at = 0.05;
    while at < 60.0 {
        reads += 7;
        d.sampled(t0 + secs(at), Sample::Fresh(vec![reading(10, reads)]));
        at += 0.5;
    }
    assert!(d.take().is_empty());
}

#[test]
fn output_clears_it_and_a_new_silence_must_be_confirmed_again() {
    let t0 = Instant::now();
    let mut d = detector(t0);
    d.sampled(t0 + secs(1.0), Sample::Fresh(vec![reading(10, 1)]));
    d.sampled(t0 + secs(3.0), Sample::Unchanged);
    assert_eq!(kinds(d.take()), ["+needs_input"]);
    d.output(t0 + secs(4.0));
    assert_eq!(kinds(d.take()), ["-needs_input"]);
    // The prompt's output, then the first look past the threshold sees it blocked: a
    // second look, CONFIRM_GAP later, confirms it.
    let first = t0 + secs(7.0);
    d.sampled(first, Sample::Fresh(vec![reading(10, 2)]));
    assert!(d.take().is_empty());
    assert_eq!(d.next_deadline(), Some(first + CONFIRM_GAP));
    d.sampled(first + CONFIRM_GAP, Sample::Fresh(vec![reading(10, 2)]));
    assert_eq!(kinds(d.take()), ["+needs_input"]);
}

#[test]
fn a_busy_tree_is_a_runaway_at_its_threshold_and_clears_when_it_calms() {
    let t0 = Instant::now();
    let mut d = runaway_detector(t0);
    d.sampled(t0 + secs(0.05), Sample::Fresh(vec![process(10, 0)]));
    d.sampled(t0 + secs(1.05), Sample::Fresh(vec![process(10, 99)]));
    assert!(d.take().is_empty());
    // The one wake-up: when two seconds of it will have passed.
    assert_eq!(d.next_deadline(), Some(t0 + secs(2.05)));
    d.sampled(t0 + secs(2.05), Sample::Fresh(vec![process(10, 198)]));
    let events = d.take();
    match &events[..] {
        [EventKind::Attention { attention, detail }] => {
            assert_eq!(*attention, AttentionKind::Runaway);
            assert_eq!(detail, "at least 90% of a core for 2.0s");
        }
        other => panic!("{other:?}"),
    }
    d.sampled(t0 + secs(4.05), Sample::Fresh(vec![process(10, 396)]));
    assert!(d.take().is_empty(), "once per episode");
    d.sampled(t0 + secs(6.05), Sample::Fresh(vec![process(10, 400)]));
    assert_eq!(kinds(d.take()), ["-runaway"]);
}

#[test]
fn a_busy_process_given_half_a_core_by_a_crowded_machine_is_still_a_runaway() {
    let t0 = Instant::now();
    let mut d = runaway_detector(t0);
    // Half a core used, the other half spent waiting for one: it wants a whole core.
    let crowded = |i: u64| ProcessSample {
        demand_ns: Some(i * 1_000_000_000),
        ..process(10, i * 50)
    };
    for i in 0..3 {
        d.sampled(t0 + secs(i as f64), Sample::Fresh(vec![crowded(i)]));
    }
    assert_eq!(kinds(d.take()), ["+runaway"]);
}

#[test]
fn half_a_core_is_no_runaway_and_memory_above_the_bound_is() {
    let t0 = Instant::now();
    let request = AttentionRequest {
        runaway_after: Some(Duration::from_millis(2_000)),
        memory_above: Some(3 << 20),
        ..AttentionRequest::default()
    };
    let mut d = Detector::new(request.clone(), HZ, t0);
    for i in 0..20u64 {
        d.sampled(
            t0 + secs(i as f64),
            Sample::Fresh(vec![process(10, i * 50)]),
        );
    }
    assert!(d.take().is_empty());
    let big = |pid| ProcessSample {
        rss_bytes: 2 << 20,
        ..process(pid, 1000)
    };
    d.sampled(t0 + secs(21.0), Sample::Fresh(vec![big(10), big(11)]));
    let events = d.take();
    match &events[..] {
        [EventKind::Attention { attention, detail }] => {
            assert_eq!(*attention, AttentionKind::Runaway);
            assert_eq!(detail, "memory 4.0 MiB above 3.0 MiB");
        }
        other => panic!("{other:?}"),
    }
    d.sampled(t0 + secs(22.0), Sample::Fresh(vec![big(10)]));
    assert_eq!(kinds(d.take()), ["-runaway"]);
}

#[test]
fn quiet_needs_silence_and_no_cpu_and_is_off_by_default() {
    let t0 = Instant::now();
    let mut d = detector(t0);
    for i in 0..100u64 {
        d.sampled(t0 + secs(i as f64 * 10.0), Sample::Unchanged);
    }
    assert!(d.take().is_empty(), "quiet_after is off by default");

    let request = AttentionRequest {
        quiet_after: Some(Duration::from_millis(10_000)),
        ..AttentionRequest::default()
    };
    let mut d = Detector::new(request.clone(), HZ, t0);
    // Silent but computing: not quiet.
    d.sampled(t0 + secs(1.0), Sample::Fresh(vec![process(10, 0)]));
    d.sampled(t0 + secs(11.0), Sample::Fresh(vec![process(10, 500)]));
    assert!(d.take().is_empty());
    // Busy: no wake-up of its own; the tree's next look tells.
    assert_eq!(d.next_deadline(), None);
    d.sampled(t0 + secs(15.0), Sample::Unchanged);
    // Idle since the look at 11 s: quiet once that is ten seconds ago.
    assert_eq!(d.next_deadline(), Some(t0 + secs(21.0)));
    d.sampled(t0 + secs(21.0), Sample::Unchanged);
    assert_eq!(kinds(d.take()), ["+quiet"]);
    d.output(t0 + secs(22.0));
    assert_eq!(kinds(d.take()), ["-quiet"]);
}

#[test]
fn the_end_says_failed_or_finished_and_closes_open_episodes() {
    let t0 = Instant::now();
    let mut d = detector(t0);
    d.sampled(t0 + secs(1.0), Sample::Fresh(vec![reading(10, 1)]));
    d.sampled(t0 + secs(3.0), Sample::Unchanged);
    d.exited(t0 + secs(4.0), Ending::Exited(exit(2)));
    let events = d.take();
    assert_eq!(
        kinds(events.clone()),
        ["+needs_input", "-needs_input", "+failed"]
    );
    assert!(
        matches!(&events[2], EventKind::Attention { detail, .. } if detail == "exit 2 after 4.0s")
    );
    assert_eq!(d.next_deadline(), None);

    let mut quick = detector(t0);
    quick.exited(t0 + secs(2.0), Ending::Exited(exit(0)));
    assert!(
        quick.take().is_empty(),
        "a short success is not worth a word"
    );
    let mut long = detector(t0);
    long.exited(t0 + secs(12.0), Ending::Exited(exit(0)));
    assert_eq!(kinds(long.take()), ["+finished"]);
    let mut killed = detector(t0);
    let status = ExitStatus {
        code: None,
        signal: Some(9),
        core_dumped: false,
    };
    killed.exited(t0 + secs(1.0), Ending::Exited(status));
    let events = killed.take();
    assert!(
        matches!(&events[..], [EventKind::Attention { detail, .. }] if detail == "killed by SIGKILL after 1.0s"),
        "{events:?}"
    );
    let mut timed_out = detector(t0);
    timed_out.exited(
        t0 + secs(31.0),
        Ending::TimedOut {
            silent: secs(30.0),
            status: exit(0),
        },
    );
    let events = timed_out.take();
    assert!(
        matches!(&events[..], [EventKind::Attention { attention: AttentionKind::Failed, detail }] if detail == "timed out: no output for 30.0s"),
        "{events:?}"
    );
}

#[test]
fn no_deadline_is_ever_at_or_before_the_last_look() {
    let t0 = Instant::now();
    let mut d = detector(t0);
    // Past the threshold, nothing blocked: no wake-up asked for (the tree's own schedule
    // looks again), however long it stays so.
    d.sampled(t0 + secs(5.0), Sample::Fresh(vec![process(10, 0)]));
    assert_eq!(d.next_deadline(), None);
    // A look that could not be had still counts as the last look.
    let mut d = detector(t0);
    d.sampled(t0 + secs(3.5), Sample::Missed);
    assert_eq!(d.next_deadline(), None);
}

/// An agent's command (`failed_after`, from `agent_failures_after`): a quick failure is
/// counted in its row, not told; one that ran past the bound is, and so is a timeout.
#[test]
fn an_agents_quick_failure_is_not_told_and_a_long_one_is() {
    let t0 = Instant::now();
    let request = AttentionRequest {
        failed_after: Some(Duration::from_millis(10_000)),
        ..AttentionRequest::default()
    };
    let agents = || Detector::new(request.clone(), HZ, t0);
    let mut quick = agents();
    quick.exited(t0 + secs(0.5), Ending::Exited(exit(1)));
    assert!(
        quick.take().is_empty(),
        "grep with no match, test -f: not told"
    );
    let mut long = agents();
    long.exited(t0 + secs(11.0), Ending::Exited(exit(1)));
    assert_eq!(kinds(long.take()), ["+failed"]);
    let mut timed_out = agents();
    timed_out.exited(
        t0 + secs(2.0),
        Ending::TimedOut {
            silent: secs(1.0),
            status: exit(0),
        },
    );
    assert_eq!(kinds(timed_out.take()), ["+failed"]);
}
