//! A command's lifecycle as span events: every journal event but output, tree snapshots and
//! pongs, each with its fields as attributes (`tether.signal`, `tether.scope`,
//! `tether.origin`, `tether.client.program`, `tether.attention`, `tether.pids`, ...) and its
//! sentence as the views say it (`tether.description`).

use opentelemetry_proto::tonic::common::v1::{AnyValue, ArrayValue, KeyValue, any_value};
use opentelemetry_proto::tonic::trace::v1::span::Event;
use serde_json::Value;

use super::nanos;
use super::span::{attribute, boolean, int, string};
use crate::export::session::CommandExport;
use crate::model::describe::describe_in;
use crate::model::output::one_line;
use crate::protocol::EventKind;

/// The command's span events, and one saying the journal was cut short (at `end`, when it
/// has no event) when it was.
pub fn events(command: &CommandExport, end_ms: u64) -> Vec<Event> {
    let mut events: Vec<Event> = (command.events.iter())
        .filter(|e| {
            !matches!(
                e.kind,
                EventKind::Output { .. } | EventKind::Tree { .. } | EventKind::Pong
            )
        })
        .map(|e| {
            let (text, _) = describe_in(&command.state, &e.kind);
            let mut attributes = fields(&e.kind);
            attributes.push(attribute("tether.description", string(&one_line(&text))));
            Event {
                time_unix_nano: nanos(e.ts_ms),
                name: e.kind.name().into(),
                attributes,
                dropped_attributes_count: 0,
            }
        })
        .collect();
    if command.cut_short {
        let last = command.events.last().map_or(end_ms, |e| e.ts_ms);
        events.push(Event {
            time_unix_nano: nanos(last),
            name: "journal_cut_short".into(),
            attributes: vec![attribute(
                "tether.damage",
                string(&command.damage.join("; ")),
            )],
            dropped_attributes_count: 0,
        });
    }
    events
}

/// The event's fields as the journal writes them, `tether.` before each name, a nested
/// object's fields joined with dots (`tether.client.pid`). A signal is named as everywhere
/// else in OpenTelemetry and in tether's views: `SIGTERM`.
fn fields(kind: &EventKind) -> Vec<KeyValue> {
    let mut out = Vec::new();
    if let Ok(Value::Object(map)) = serde_json::to_value(kind) {
        for (name, value) in map {
            // `spawned`'s argv is the span's `process.command_args` already, and can be long.
            if name != "kind" && name != "argv" {
                flatten(&format!("tether.{name}"), value, &mut out);
            }
        }
    }
    out
}

fn flatten(key: &str, value: Value, out: &mut Vec<KeyValue>) {
    match value {
        Value::Object(map) => {
            for (name, value) in map {
                flatten(&format!("{key}.{name}"), value, out);
            }
        }
        Value::String(text) if key == "tether.signal" && !text.starts_with("SIG") => {
            out.push(attribute(key, string(&format!("SIG{text}"))));
        }
        value => out.extend(any(value).map(|value| attribute(key, value))),
    }
}

/// A JSON value as an attribute's: none for null.
fn any(value: Value) -> Option<AnyValue> {
    Some(match value {
        Value::Null => return None,
        Value::Bool(b) => boolean(b),
        Value::Number(n) => match n.as_i64() {
            Some(n) => int(n),
            None => AnyValue {
                value: Some(any_value::Value::DoubleValue(
                    n.as_f64().unwrap_or_default(),
                )),
            },
        },
        Value::String(text) => string(&text),
        Value::Array(items) => AnyValue {
            value: Some(any_value::Value::ArrayValue(ArrayValue {
                values: items.into_iter().filter_map(any).collect(),
            })),
        },
        // A nested object inside an array: its JSON text.
        Value::Object(_) => string(&value.to_string()),
    })
}
