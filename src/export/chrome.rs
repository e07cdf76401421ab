//! `--format chrome-trace`: the Trace Event Format (the JSON object form) that Perfetto
//! (ui.perfetto.dev) and `chrome://tracing` open.
//!
//! Each command is a process track (`pid` = its place in the session, from 1): thread 0 holds
//! the run's span, a `drain` span from its exit to its journal's close, an instant for each
//! lifecycle event (signals, timeouts, exits, reaped orphans, ...) and a counter of the bytes
//! each stream has written; each process of its tree (from the `tree` events) is a thread of
//! its own (`tid` = its pid) with a span from its first sighting to its disappearance, named
//! by its command line. A command the launcher never started is a process track after them
//! with one instant, the launcher's last word (`not started: migrate: exit 1`). Times are
//! microseconds since the session started.

use serde_json::{Value, json};

use super::session::{CommandExport, SessionExport};
use super::summary::{CommandSummary, iso_utc};
use crate::model::describe::describe_in;
use crate::model::output::one_line;
use crate::protocol::EventKind;

/// The shortest span between two output counters of one command, in milliseconds.
const COUNTER_MS: u64 = 10;

/// The thread of a command's own run (its tree's processes use their pids, never 0).
const RUN_TID: i64 = 0;

/// The longest span name: a command line is cut there (its whole argv is in `args`).
const MAX_NAME: usize = 120;

/// The whole trace as a JSON value.
pub fn trace(session: &SessionExport) -> Value {
    let mut events = Vec::new();
    for (i, command) in session.commands.iter().enumerate() {
        command_events(session, command, i as u32 + 1, &mut events);
    }
    let runs = session.commands.len();
    for (i, never) in session.not_started.iter().enumerate() {
        let pid = (runs + i) as u32 + 1;
        let track = |name: &str, args: Value| json!({ "name": name, "cat": "__metadata", "ph": "M", "ts": 0, "pid": pid, "tid": RUN_TID, "args": args });
        events.push(track(
            "process_name",
            json!({ "name": one_line(&format!("{} (never ran)", never.name())) }),
        ));
        events.push(track("process_sort_index", json!({ "sort_index": pid })));
        let ts = never
            .since_ms
            .saturating_sub(session.started_ms)
            .saturating_mul(1000);
        events.push(json!({
            "name": one_line(&never.words()),
            "cat": "not_started",
            "ph": "i",
            "s": "p",
            "ts": ts,
            "pid": pid,
            "tid": RUN_TID,
            "args": { "command_line": never.state.command_line(), "plan": never.state.plan },
        }));
    }
    json!({
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": {
            "session": session.id,
            "started": iso_utc(session.started_ms),
            "tool": format!("tether {}", env!("CARGO_PKG_VERSION")),
        },
    })
}

fn command_events(
    session: &SessionExport,
    command: &CommandExport,
    pid: u32,
    out: &mut Vec<Value>,
) {
    let us = |ms: u64| ms.saturating_sub(session.started_ms).saturating_mul(1000);
    // One entry of `traceEvents`; its category (`cat`) is the journal's event kind, `run`,
    // `drain`, `process` or `output`.
    let event = |name: String, cat: &str, ph: &str, ts: u64, tid: i64, args: Value| {
        let mut event =
            json!({ "name": name, "cat": cat, "ph": ph, "ts": ts, "pid": pid, "tid": tid });
        if !args.is_null() {
            event["args"] = args;
        }
        event
    };
    let span = |name: String, cat: &str, start_ms: u64, end_ms: u64, tid: i64, args: Value| {
        let mut span = event(name, cat, "X", us(start_ms), tid, args);
        span["dur"] = json!(us(end_ms) - us(start_ms));
        span
    };
    // An instant on the run's thread: its scope (`s`) is that thread.
    let instant = |name: String, cat: &str, ts_ms: u64, args: Value| {
        let mut instant = event(name, cat, "i", us(ts_ms), RUN_TID, args);
        instant["s"] = json!("t");
        instant
    };
    let metadata =
        |name: &str, tid: i64, args: Value| event(name.into(), "__metadata", "M", 0, tid, args);
    let process_name = one_line(&format!("{} ({})", command.name(), command.id.dir_name()));
    for (name, args) in [
        ("process_name", json!({ "name": process_name })),
        ("process_sort_index", json!({ "sort_index": pid })),
        ("thread_name", json!({ "name": "run" })),
        ("thread_sort_index", json!({ "sort_index": -1 })),
    ] {
        out.push(metadata(name, RUN_TID, args));
    }

    // The run.
    if let Some(start) = command.started_ms() {
        let end = command.ended_ms().unwrap_or(session.ended_ms).max(start);
        let summary = serde_json::to_value(CommandSummary::of(command)).unwrap_or(Value::Null);
        out.push(span(
            one_line(command.name()),
            "run",
            start,
            end,
            RUN_TID,
            summary,
        ));
    }
    // From the exit to the broker's close: the drain, while it read the pipes to the end;
    // or the custody of what the run left running, kept by the leftovers rule.
    let at = |kind: fn(&EventKind) -> bool| command.events.iter().find(|e| kind(&e.kind));
    let exit = at(|k| matches!(k, EventKind::Exit { .. }));
    let close = at(|k| matches!(k, EventKind::Close { .. }));
    let kept = command.events.iter().find_map(|e| match &e.kind {
        EventKind::LeftoversKept { pids } => Some(pids.len()),
        _ => None,
    });
    if let (Some(exit), Some(close)) = (exit, close) {
        let (name, args) = match kept {
            Some(kept) => ("custody", json!({ "kept": kept })),
            None => (
                "drain",
                json!({ "stragglers_stopped": command.badges.stragglers }),
            ),
        };
        out.push(span(
            name.into(),
            name,
            exit.ts_ms,
            close.ts_ms.max(exit.ts_ms),
            RUN_TID,
            args,
        ));
    }
    // An instant per lifecycle event; a counter of the bytes written, at most one per
    // COUNTER_MS (a flood journals an `output` event per switch between the streams, which
    // would be millions of counters; the last one of each span holds its totals).
    let mut written = [0u64; 2];
    let mut counter_at: Option<(u64, usize)> = None;
    for e in &command.events {
        match &e.kind {
            EventKind::Output {
                stream,
                offset,
                len,
            } => {
                let slot = &mut written[*stream as usize];
                *slot = (*slot).max(offset.saturating_add(*len));
                let totals = json!({ "stdout": written[0], "stderr": written[1] });
                match counter_at {
                    Some((span, at)) if span == e.ts_ms / COUNTER_MS => out[at]["args"] = totals,
                    _ => {
                        counter_at = Some((e.ts_ms / COUNTER_MS, out.len()));
                        let name = "output bytes".into();
                        out.push(event(name, "output", "C", us(e.ts_ms), RUN_TID, totals));
                    }
                }
            }
            EventKind::Tree { .. } | EventKind::Pong => {}
            kind => {
                let (text, _) = describe_in(&command.state, kind);
                let name = if text.is_empty() {
                    kind.name().to_string()
                } else {
                    format!("{}: {}", kind.name(), one_line(&text))
                };
                let args = serde_json::to_value(kind).unwrap_or(Value::Null);
                out.push(instant(name, kind.name(), e.ts_ms, args));
            }
        }
    }
    if command.cut_short {
        let last = command.events.last().map_or(session.ended_ms, |e| e.ts_ms);
        let damage = json!({ "damage": command.damage });
        out.push(instant("journal cut short".into(), "damage", last, damage));
    }
    // A thread per process of the tree.
    let mut named: Vec<i32> = Vec::new();
    for process in &command.processes {
        let tid = i64::from(process.pid);
        let argv = one_line(&process.argv.join(" "));
        let name = if argv.is_empty() {
            format!("pid {}", process.pid)
        } else {
            super::cut(&argv, MAX_NAME)
        };
        if !named.contains(&process.pid) {
            named.push(process.pid);
            out.push(metadata(
                "thread_name",
                tid,
                json!({ "name": format!(
                    "{} {name}{}",
                    process.pid,
                    if process.escaped { " (escaped)" } else { "" }
                ) }),
            ));
        }
        out.push(span(
            name,
            "process",
            process.first_ms.min(process.last_ms),
            process.last_ms,
            tid,
            json!({ "pid": process.pid, "argv": process.argv, "escaped": process.escaped }),
        ));
    }
}
