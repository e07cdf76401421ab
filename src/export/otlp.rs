//! `--format otlp`: the OTLP/JSON encoding of an `ExportTraceServiceRequest`, which an
//! OpenTelemetry collector's `otlpjsonfile` receiver (or any OTLP/JSON consumer) reads.
//!
//! One trace per session: its id is derived from the session id, so exporting a session
//! twice gives the same trace. A root span covers the session; each command's run is a
//! span under it, with the lifecycle events (signals, timeouts, exit, reaped orphans, ...) as
//! span events. A command whose caller passed it a W3C `TRACEPARENT` is instead a span of
//! the caller's trace, the child of the caller's span, with the span id the command was
//! given in its own `TRACEPARENT`; a link leads from it to the session's root span. Field names and value forms follow the OTLP/JSON rules: lowerCamelCase
//! names, ids as lowercase hex (trace 32 digits, span 16), 64-bit integers and nanosecond
//! times as decimal strings, enums as integers.

use serde_json::{Value, json};

use super::session::{CommandExport, SessionExport};
use super::summary::{CommandSummary, state_name};
use crate::model::describe::{Tone, describe_in};
use crate::model::output::one_line;
use crate::protocol::EventKind;

/// `SPAN_KIND_INTERNAL`: work inside one process, no remote peer.
const SPAN_KIND_INTERNAL: u8 = 1;
/// `STATUS_CODE_OK` and `STATUS_CODE_ERROR`.
const STATUS_OK: u8 = 1;
const STATUS_ERROR: u8 = 2;

pub fn request(session: &SessionExport) -> Value {
    let trace_id = trace_id(&session.id);
    let root_id = span_id(&session.id, "");
    let mut spans = vec![root_span(session, &trace_id, &root_id)];
    for command in &session.commands {
        spans.push(command_span(session, command, &trace_id, &root_id));
    }
    let mut resource = vec![
        attribute("service.name", string("tether")),
        attribute("service.version", string(env!("CARGO_PKG_VERSION"))),
        attribute("tether.session.id", string(&session.id)),
        attribute("tether.session.dir", string(&session.dir.to_string_lossy())),
    ];
    if let Some(info) = &session.info {
        resource.push(attribute("host.name", string(&info.host)));
        resource.push(attribute("user.name", string(&info.user)));
    }
    json!({
        "resourceSpans": [{
            "resource": { "attributes": resource },
            "scopeSpans": [{
                "scope": { "name": "tether", "version": env!("CARGO_PKG_VERSION") },
                "spans": spans,
            }],
        }],
    })
}

fn root_span(session: &SessionExport, trace_id: &str, span_id: &str) -> Value {
    let failed = session.commands.iter().filter(|c| c.failed()).count();
    let cut_short = session.cut_short().count();
    let status = if failed > 0 || cut_short > 0 {
        json!({
            "code": STATUS_ERROR,
            "message": format!(
                "{failed} of {} commands failed; {cut_short} journals cut short",
                session.commands.len()
            ),
        })
    } else {
        json!({ "code": STATUS_OK })
    };
    json!({
        "traceId": trace_id,
        "spanId": span_id,
        "name": format!("session {}", one_line(&session.id)),
        "kind": SPAN_KIND_INTERNAL,
        "startTimeUnixNano": nanos(session.started_ms),
        "endTimeUnixNano": nanos(session.ended_ms),
        "attributes": [
            attribute("tether.session.id", string(&session.id)),
            attribute("tether.commands", int(session.commands.len() as i64)),
        ],
        "status": status,
    })
}

fn command_span(
    session: &SessionExport,
    command: &CommandExport,
    trace_id: &str,
    parent: &str,
) -> Value {
    let summary = CommandSummary::of(command);
    let start = command.started_ms().unwrap_or(session.started_ms);
    let end = command.ended_ms().unwrap_or(session.ended_ms).max(start);
    let mut attributes = vec![
        attribute("tether.command.id", string(&command.id)),
        attribute("tether.command.name", string(command.name())),
        attribute("tether.command.text", string(&summary.command)),
        attribute(
            "process.command_args",
            json!({ "arrayValue": { "values": summary.argv.iter().map(|a| string(a)).collect::<Vec<_>>() } }),
        ),
        attribute(
            "tether.command.state",
            string(state_name(command.state.status)),
        ),
        attribute("tether.stdout.bytes", int(summary.stdout.written as i64)),
        attribute("tether.stdout.stored", int(summary.stdout.stored as i64)),
        attribute("tether.stderr.bytes", int(summary.stderr.written as i64)),
        attribute("tether.stderr.stored", int(summary.stderr.stored as i64)),
        attribute(
            "tether.cut_short",
            json!({ "boolValue": command.cut_short }),
        ),
    ];
    if let Some(pid) = command.state.pid {
        attributes.push(attribute("process.pid", int(i64::from(pid))));
    }
    if let Some(cpu_ms) = summary.cpu_ms {
        attributes.push(attribute("tether.cpu_ms", int(cpu_ms as i64)));
    }
    if let Some(peak) = summary.peak_rss_bytes {
        attributes.push(attribute("tether.peak_rss_bytes", int(peak as i64)));
    }
    if let Some(code) = summary.exit_code {
        attributes.push(attribute("process.exit.code", int(i64::from(code))));
    }
    if let Some(signal) = &summary.signal_name {
        attributes.push(attribute("tether.exit.signal", string(signal)));
    }
    for badge in command.badges.list() {
        attributes.push(attribute(
            &format!(
                "tether.badge.{}",
                badge.label().split(':').next().unwrap_or_default()
            ),
            match badge {
                crate::model::Badge::Orphans(n) => int(i64::from(n)),
                _ => json!({ "boolValue": true }),
            },
        ));
    }
    let mut events: Vec<Value> = command
        .events
        .iter()
        .filter(|e| {
            !matches!(
                e.kind,
                EventKind::Output { .. } | EventKind::Tree { .. } | EventKind::Pong
            )
        })
        .map(|e| {
            let (text, _) = describe_in(&command.state, &e.kind);
            json!({
                "timeUnixNano": nanos(e.ts_ms),
                "name": e.kind.name(),
                "attributes": [attribute("tether.description", string(&one_line(&text)))],
            })
        })
        .collect();
    if command.cut_short {
        let last = command.events.last().map_or(end, |e| e.ts_ms);
        events.push(json!({
            "timeUnixNano": nanos(last),
            "name": "journal_cut_short",
            "attributes": [attribute("tether.damage", string(&command.damage.join("; ")))],
        }));
    }
    let session_span = span_id(&session.id, &command.id);
    // A command whose caller gave it a trace context is the caller's child, in the caller's
    // trace, with the span id its `TRACEPARENT` named; a link leads back to the session.
    let (trace_id, span_id, parent, links) = match &command.trace {
        Some(trace) => (
            trace.trace_id.as_str(),
            trace.span_id.as_str(),
            trace.parent_span_id.as_str(),
            vec![json!({ "traceId": trace_id, "spanId": parent })],
        ),
        None => (trace_id, session_span.as_str(), parent, vec![]),
    };
    let mut span = json!({
        "traceId": trace_id,
        "spanId": span_id,
        "parentSpanId": parent,
        "name": one_line(command.name()),
        "kind": SPAN_KIND_INTERNAL,
        "startTimeUnixNano": nanos(start),
        "endTimeUnixNano": nanos(end),
        "attributes": attributes,
        "events": events,
    });
    if !links.is_empty() {
        span["links"] = Value::Array(links);
    }
    if let Some(status) = status(command) {
        span["status"] = status;
    }
    span
}

/// OK for exit 0, an error with what went wrong otherwise; none while it runs.
fn status(command: &CommandExport) -> Option<Value> {
    if command.state.status.is_active() && !command.cut_short {
        return None;
    }
    if !command.failed() && !command.cut_short {
        return Some(json!({ "code": STATUS_OK }));
    }
    let mut why = vec![command.state.status.label()];
    if let Some(error) = command.events.iter().rev().find_map(|e| {
        let (text, tone) = describe_in(&command.state, &e.kind);
        (tone == Tone::Error && !matches!(e.kind, EventKind::Exit { .. })).then_some(text)
    }) {
        why.push(error);
    }
    if command.cut_short {
        why.push("journal cut short".into());
    }
    Some(json!({ "code": STATUS_ERROR, "message": one_line(&why.join("; ")) }))
}

fn attribute(key: &str, value: Value) -> Value {
    json!({ "key": key, "value": value })
}

fn string(text: &str) -> Value {
    json!({ "stringValue": text })
}

/// An `int64` attribute: a decimal string, as the protobuf JSON mapping writes 64-bit ints.
fn int(n: i64) -> Value {
    json!({ "intValue": n.to_string() })
}

/// Milliseconds since the epoch as the decimal string of nanoseconds.
fn nanos(ms: u64) -> String {
    (u128::from(ms) * 1_000_000).to_string()
}

/// FNV-1a, 64 bits, from a given basis: enough to spread ids, and stable across versions
/// and machines (unlike `std`'s hasher).
fn fnv1a(basis: u64, bytes: &[u8]) -> u64 {
    bytes.iter().fold(basis, |hash, &b| {
        (hash ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

const FNV_BASIS: u64 = 0xcbf2_9ce4_8422_2325;

/// 32 lowercase hex digits, never all zero (an invalid trace id), from the session id.
pub fn trace_id(session: &str) -> String {
    let high = fnv1a(FNV_BASIS, format!("tether trace {session}").as_bytes());
    let low = fnv1a(high, session.as_bytes()) | 1;
    format!("{high:016x}{low:016x}")
}

/// 16 lowercase hex digits, never all zero, for the session's root (`command` empty) or a
/// command's span.
pub fn span_id(session: &str, command: &str) -> String {
    let id = fnv1a(
        FNV_BASIS,
        format!("tether span {session}/{command}").as_bytes(),
    ) | 1;
    format!("{id:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_lowercase_hex_of_the_right_length_and_stable() {
        let trace = trace_id("20261130T064143Z-12");
        assert_eq!(trace.len(), 32);
        assert!(
            trace
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        );
        assert_eq!(trace, trace_id("20261130T064143Z-12"));
        assert_ne!(trace, trace_id("20261130T064143Z-13"));
        let root = span_id("s", "");
        assert_eq!(root.len(), 16);
        assert_ne!(root, span_id("s", "01-a"));
        assert_eq!(nanos(1_767_323_045_123), "1767323045123000000");
    }
}
