//! Journal events as unit tests write them, so that a test says only what it is about.

use super::{Event, EventKind, Origin, ProcessEntry, ProcessSignal, Scope, Stream};

/// `kind` at wall-clock `ts_ms`; what these tests read never looks at the monotonic clock.
pub fn event(ts_ms: u64, kind: EventKind) -> Event {
    Event {
        ts_ms,
        mono_us: 0,
        kind,
    }
}

/// The command started as `pid`, the leader of its own group, with no argv journaled.
pub fn spawned(pid: i32) -> EventKind {
    EventKind::Spawned {
        pid,
        pgid: pid,
        argv: vec![],
        start_ticks: None,
    }
}

/// `len` bytes of `stream` written at `offset`.
pub fn output(ts_ms: u64, stream: Stream, offset: u64, len: u64) -> Event {
    event(
        ts_ms,
        EventKind::Output {
            stream,
            offset,
            len,
        },
    )
}

/// A tree of `pids`, each a child of init in group 10, named `p<pid>`, and all started at 0.
pub fn tree(ts_ms: u64, pids: &[i32]) -> Event {
    let processes = pids
        .iter()
        .map(|&pid| ProcessEntry {
            pid,
            ppid: 1,
            pgid: 10,
            argv: vec![format!("p{pid}")],
            start_ms: 0,
            escaped: false,
        })
        .collect();
    event(ts_ms, EventKind::Tree { processes })
}

/// `signal` sent to `target` alone, as the journal tells it.
pub fn signal_sent(signal: ProcessSignal, scope: Scope, origin: Origin, target: i32) -> EventKind {
    EventKind::SignalSent {
        signal,
        scope,
        origin,
        targets: vec![target],
        client: None,
    }
}
