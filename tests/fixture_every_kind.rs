//! The checked-in session `tests/fixtures/every-kind` (see `tests/fixtures/README.md`): it
//! must keep holding every kind of event a journal can record, so that the exports, the
//! time cursor and the post-mortem views are all tested over each of them.

use crate::common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::every_kind_fixture;
use tether::journal::{Damage, SessionRecord};
use tether::protocol::{EventKind, Origin, ProcessSignal, Stream};

/// Every variant by name, through a match with no wildcard: a new kind of event does not
/// compile here until the fixture is given one (or it is listed as never journaled).
fn journaled(kind: &EventKind) -> Option<&'static str> {
    match kind {
        EventKind::BrokerStarted { .. }
        | EventKind::Spawned { .. }
        | EventKind::SpawnError { .. }
        | EventKind::Terminal { .. }
        | EventKind::StreamsMerged {}
        | EventKind::TerminalUnavailable { .. }
        | EventKind::Input { .. }
        | EventKind::Resize { .. }
        | EventKind::Output { .. }
        | EventKind::OutputCapped { .. }
        | EventKind::OutputTruncated { .. }
        | EventKind::OutputUndelivered { .. }
        | EventKind::ResponseTimeout { .. }
        | EventKind::FinalDrain { .. }
        | EventKind::StopStarted { .. }
        | EventKind::SignalSent { .. }
        | EventKind::HardKill { .. }
        | EventKind::Ready { .. }
        | EventKind::NotReady { .. }
        | EventKind::BudgetExceeded { .. }
        | EventKind::OrphanReaped { .. }
        | EventKind::ParentLost { .. }
        | EventKind::ParentUnresponsive { .. }
        | EventKind::Tree { .. }
        | EventKind::EventsCapped { .. }
        | EventKind::Exit { .. }
        | EventKind::LeftoversKept { .. }
        | EventKind::LeftoversStopped { .. }
        | EventKind::Attention { .. }
        | EventKind::AttentionCleared { .. }
        | EventKind::NotifyFailed { .. }
        | EventKind::Close { .. }
        | EventKind::BrokerFailure { .. }
        | EventKind::ControlRefused { .. }
        | EventKind::ControlUnavailable { .. }
        | EventKind::Containment { .. }
        | EventKind::LimitUnavailable { .. }
        | EventKind::TraceContextIgnored { .. } => Some(kind.name()),
        // Answers to one control client: never in a journal.
        EventKind::Pong | EventKind::ControlAck { .. } | EventKind::ControlError { .. } => None,
    }
}

/// One value of every variant, for the names `journaled` expects.
fn every_journaled_kind() -> BTreeSet<&'static str> {
    let status = tether::protocol::ExitStatus {
        code: Some(0),
        signal: None,
        core_dumped: false,
    };
    let text = String::new;
    let all = [
        EventKind::BrokerStarted {
            v: 0,
            broker_pid: 0,
            control_socket: None,
        },
        EventKind::Spawned {
            pid: 0,
            pgid: 0,
            argv: vec![],
            start_ticks: Some(0),
        },
        EventKind::SpawnError {
            code: text(),
            message: text(),
        },
        EventKind::Terminal {
            streams: tether::protocol::TerminalRequest {
                stdout: true,
                stderr: false,
                size: tether::protocol::WindowSize::DEFAULT,
            },
        },
        EventKind::StreamsMerged {},
        EventKind::TerminalUnavailable {
            code: text(),
            message: text(),
        },
        EventKind::Input {
            bytes: 0,
            dropped: 0,
        },
        EventKind::Resize {
            size: tether::protocol::WindowSize::DEFAULT,
        },
        EventKind::Output {
            stream: Stream::Stdout,
            offset: 0,
            len: 0,
        },
        EventKind::OutputCapped {
            stream: Stream::Stdout,
            reason: tether::protocol::CapReason::Limit,
            stored: 0,
            message: text(),
        },
        EventKind::OutputTruncated {
            stream: Stream::Stdout,
            kept: 0,
            dropped: 0,
        },
        EventKind::OutputUndelivered {
            stream: Stream::Stdout,
            bytes: 0,
        },
        EventKind::ResponseTimeout { silent_ms: 0 },
        EventKind::FinalDrain {
            pattern: text(),
            line: text(),
            drain: Duration::ZERO,
        },
        EventKind::StopStarted {
            origin: Origin::Watchdog,
            grace: Duration::ZERO,
        },
        EventKind::SignalSent {
            signal: ProcessSignal::TERM,
            scope: tether::protocol::Scope::Group,
            origin: Origin::Operator,
            targets: vec![],
            client: None,
        },
        EventKind::HardKill { after_ms: 0 },
        EventKind::OrphanReaped {
            pid: 0,
            status,
            escaped: None,
        },
        EventKind::ParentLost {
            cause: tether::protocol::ParentLossCause::Pidfd,
        },
        EventKind::ParentUnresponsive { silent_ms: 0 },
        EventKind::Tree { processes: vec![] },
        EventKind::EventsCapped {
            kind_capped: tether::protocol::CappedKind::Tree,
            budget: 0,
            message: text(),
        },
        EventKind::Exit { pid: 0, status },
        EventKind::LeftoversKept { pids: vec![] },
        EventKind::LeftoversStopped {
            reason: tether::protocol::LeftoversEnd::Shutdown,
            pid: None,
        },
        EventKind::Close {
            stdout_bytes: 0,
            stderr_bytes: 0,
        },
        EventKind::BrokerFailure {
            stage: tether::protocol::Stage::Stdio,
            code: text(),
            message: text(),
        },
        EventKind::ControlRefused {
            uid: 0,
            pid: 0,
            reason: text(),
        },
        EventKind::ControlUnavailable {
            code: text(),
            message: text(),
        },
        EventKind::Containment {
            mode: tether::protocol::ContainmentMode::Cgroup,
            path: None,
            reason: None,
        },
        EventKind::LimitUnavailable {
            limit: text(),
            message: text(),
        },
        EventKind::TraceContextIgnored { reason: text() },
        EventKind::Attention {
            attention: tether::protocol::AttentionKind::NeedsInput,
            detail: text(),
        },
        EventKind::AttentionCleared {
            attention: tether::protocol::AttentionKind::NeedsInput,
        },
        EventKind::NotifyFailed { message: text() },
    ];
    all.iter().filter_map(journaled).collect()
}

#[test]
fn the_fixture_holds_every_kind_of_journaled_event() {
    let record = SessionRecord::load(&every_kind_fixture()).expect("the fixture loads");
    assert!(
        record.info.is_some(),
        "session.json reads: {:?}",
        record.damage
    );
    let found: BTreeSet<&'static str> = record
        .commands
        .iter()
        .flat_map(|c| &c.events)
        .filter_map(|e| journaled(&e.kind))
        .collect();
    let missing: Vec<_> = every_journaled_kind().difference(&found).copied().collect();
    assert!(missing.is_empty(), "the fixture lacks {missing:?}");
}

#[test]
fn the_fixture_holds_the_situations_the_exports_are_tested_on() {
    let record = SessionRecord::load(&every_kind_fixture()).expect("the fixture loads");
    let command = |name: &str| {
        record
            .commands
            .iter()
            .find(|c| c.id.dir_name().ends_with(name))
            .unwrap_or_else(|| panic!("no command {name}"))
    };
    let exit = |name: &str| {
        command(name).events.iter().find_map(|e| match &e.kind {
            EventKind::Exit { status, .. } => Some((status.code, status.signal)),
            _ => None,
        })
    };
    assert_eq!(exit("ok"), Some((Some(0), None)));
    assert_eq!(exit("fail"), Some((Some(3), None)));
    assert_eq!(exit("killed"), Some((None, Some(9))));
    assert_eq!(exit("interrupted"), Some((None, Some(2))));

    // Output interleaved between the streams, at growing offsets.
    let streams: Vec<(Stream, u64)> = command("ok")
        .events
        .iter()
        .filter_map(|e| match e.kind {
            EventKind::Output { stream, offset, .. } => Some((stream, offset)),
            _ => None,
        })
        .collect();
    assert!(streams.len() >= 4, "{streams:?}");
    assert!(streams.windows(2).any(|w| w[0].0 != w[1].0), "{streams:?}");
    assert!(streams.iter().any(|(_, offset)| *offset > 0), "{streams:?}");

    // The final line seen, and an exit within the drain period: no stop, not drained.
    let ok = command("ok");
    assert!(
        ok.events.iter().any(|e| matches!(&e.kind,
            EventKind::FinalDrain { pattern, line, .. } if pattern == "^done$" && line == "done")),
        "01-ok has no final_drain"
    );
    assert!(
        !ok.events
            .iter()
            .any(|e| matches!(e.kind, EventKind::SignalSent { .. })),
        "01-ok exited within its drain period: nothing to stop"
    );

    // Signals by the operator, the watchdog, a lost parent and a shutdown after exit.
    let origins: BTreeSet<String> = record
        .commands
        .iter()
        .flat_map(|c| &c.events)
        .filter_map(|e| match &e.kind {
            EventKind::SignalSent { origin, .. } => Some(format!("{origin:?}")),
            _ => None,
        })
        .collect();
    for origin in ["Operator", "Watchdog", "ParentLost", "Shutdown"] {
        assert!(
            origins.contains(origin),
            "no signal by {origin}: {origins:?}"
        );
    }

    // A tree of several processes, one of them an escapee.
    let tree_sizes: Vec<usize> = command("tree")
        .events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Tree { processes } => Some(processes.len()),
            _ => None,
        })
        .collect();
    assert!(tree_sizes.iter().any(|n| *n >= 4), "{tree_sizes:?}");
    let escapee = command("killed").events.iter().any(|e| match &e.kind {
        EventKind::Tree { processes } => processes.iter().any(|p| p.escaped),
        _ => false,
    });
    assert!(escapee);

    // Stderr with raw escapes, for the sanitizer.
    let stderr = std::fs::read(command("fail").dir.join("stderr.log")).expect("stderr.log");
    assert!(stderr.contains(&0x1b));

    // Cut short: ends mid-line, no result.json; every other command is whole.
    let crashed = command("crashed");
    assert!(crashed.result.is_none());
    assert!(
        crashed
            .damage
            .iter()
            .any(|d| matches!(d, Damage::PartialLastLine { .. })),
        "{:?}",
        crashed.damage
    );
    for other in record.commands.iter().filter(|c| c.id != crashed.id) {
        assert!(other.damage.is_empty(), "{}: {:?}", other.id, other.damage);
        assert!(other.result.is_some(), "{}", other.id);
    }
}
