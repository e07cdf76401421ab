//! `tether export`'s formats over the checked-in session `tests/fixtures/every-kind` (every
//! kind of event, a journal cut short): what other tools need of each format, counted against
//! the journal. Pure: no process is started. The command line is tested in `export_cli.rs`.

use crate::common;

use std::collections::BTreeSet;

use serde_json::Value;

use common::every_kind_fixture;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use tether::export::{Format, SessionExport, render};
use tether::journal::SessionRecord;
use tether::protocol::{Event, EventKind};
fn fixture_export() -> SessionExport {
    SessionExport::from_record(
        &SessionRecord::load(&every_kind_fixture()).expect("the fixture loads"),
    )
}

/// Every journal event of the fixture, with its command's directory name.
fn fixture_events() -> Vec<(String, Event)> {
    let record = SessionRecord::load(&every_kind_fixture()).expect("the fixture loads");
    record
        .commands
        .iter()
        .flat_map(|c| c.events.iter().map(|e| (c.id.dir_name(), e.clone())))
        .collect()
}

fn count_kind(name: &str) -> usize {
    fixture_events()
        .iter()
        .filter(|(_, e)| e.kind.name() == name)
        .count()
}

fn rendered_json(format: Format) -> Value {
    let bytes = render(&fixture_export(), format);
    serde_json::from_slice(&bytes).expect("the export is valid JSON")
}

#[test]
fn chrome_trace_has_the_required_fields_and_one_entry_per_event_that_matters() {
    let trace = rendered_json(Format::ChromeTrace);
    assert_eq!(trace["displayTimeUnit"], "ms");
    let events = trace["traceEvents"].as_array().expect("traceEvents");
    for event in events {
        for field in ["name", "ph", "ts", "pid", "tid"] {
            assert!(event.get(field).is_some(), "no {field} in {event}");
        }
        assert!(event["ts"].is_u64(), "{event}");
        match event["ph"].as_str() {
            Some("X") => assert!(event["dur"].is_u64(), "a span without dur: {event}"),
            Some("i") => assert_eq!(event["s"], "t", "{event}"),
            Some("M") | Some("C") => {}
            other => panic!("unexpected phase {other:?}: {event}"),
        }
    }
    let instants = |cat: &str| {
        events
            .iter()
            .filter(|e| e["ph"] == "i" && e["cat"] == cat)
            .count()
    };
    for kind in [
        "signal_sent",
        "exit",
        "response_timeout",
        "hard_kill",
        "orphan_reaped",
        "parent_lost",
        "parent_unresponsive",
        "spawn_error",
        "output_capped",
        "broker_failure",
    ] {
        let journaled = count_kind(kind);
        assert!(journaled > 0, "the fixture has no {kind}");
        assert_eq!(instants(kind), journaled, "instants for {kind}");
    }
    // A drain for each run that exited and closed, a custody instead for one whose
    // leftovers were kept; a span for each run.
    let record = SessionRecord::load(&every_kind_fixture()).unwrap();
    let has = |c: &tether::journal::CommandRecord, name: &str| {
        c.events.iter().any(|e| e.kind.name() == name)
    };
    let ended = |c: &&tether::journal::CommandRecord| has(c, "exit") && has(c, "close");
    let drains = (record.commands.iter())
        .filter(ended)
        .filter(|c| !has(c, "leftovers_kept"))
        .count();
    let custodies = (record.commands.iter())
        .filter(ended)
        .filter(|c| has(c, "leftovers_kept"))
        .count();
    assert!(custodies > 0, "the fixture keeps leftovers (03-tree)");
    let spans = |cat: &str| {
        events
            .iter()
            .filter(|e| e["ph"] == "X" && e["cat"] == cat)
            .count()
    };
    assert_eq!(spans("drain"), drains);
    assert_eq!(spans("custody"), custodies);
    assert_eq!(spans("run"), record.commands.len());
    // A thread and a span per process the tree events recorded.
    let processes: BTreeSet<(String, i64, u64)> = fixture_events()
        .into_iter()
        .flat_map(|(command, e)| match e.kind {
            EventKind::Tree { processes } => processes
                .into_iter()
                .map(|p| (command.clone(), i64::from(p.pid), p.start_ms))
                .collect(),
            _ => Vec::new(),
        })
        .collect();
    assert_eq!(spans("process"), processes.len());
    let escapee = events
        .iter()
        .find(|e| e["cat"] == "process" && e["args"]["escaped"] == true)
        .expect("the escapee's span");
    assert_eq!(escapee["name"], "sleep 40");
    // Counters of output bytes, ending at each command's totals.
    // One per 10 ms of output at most: every `output` event of the fixture falls in a span
    // of its own but for those written in the same 10 ms.
    let counters: Vec<&Value> = events.iter().filter(|e| e["ph"] == "C").collect();
    let spans_with_output: std::collections::BTreeSet<(String, u64)> = record
        .commands
        .iter()
        .flat_map(|c| {
            c.events
                .iter()
                .filter(|e| e.kind.name() == "output")
                .map(|e| (c.id.dir_name(), e.ts_ms / 10))
        })
        .collect();
    assert!(
        count_kind("output") > spans_with_output.len(),
        "the fixture has close outputs"
    );
    assert_eq!(counters.len(), spans_with_output.len());
    let capped_pid = events
        .iter()
        .find(|e| e["name"] == "process_name" && e["args"]["name"] == "capped (07-capped)")
        .expect("the capped command's track")["pid"]
        .clone();
    let last = counters
        .iter()
        .rev()
        .find(|e| e["pid"] == capped_pid)
        .unwrap();
    assert_eq!(last["args"]["stdout"], 950);
    // The journal cut short says so.
    assert_eq!(instants("damage"), 1);
}

#[test]
fn otlp_follows_the_otlp_json_encoding() {
    // A JSON-lines file of requests: one request, one line.
    let bytes = render(&fixture_export(), Format::Otlp);
    assert_eq!(bytes.iter().filter(|&&b| b == b'\n').count(), 1);
    assert!(bytes.ends_with(b"\n"));
    let request = rendered_json(Format::Otlp);
    let resource_spans = request["resourceSpans"].as_array().expect("resourceSpans");
    assert_eq!(resource_spans.len(), 1);
    let attributes = resource_spans[0]["resource"]["attributes"]
        .as_array()
        .expect("resource attributes");
    let attribute = |key: &str| {
        attributes
            .iter()
            .find(|a| a["key"] == key)
            .unwrap_or_else(|| panic!("no resource attribute {key}"))["value"]["stringValue"]
            .clone()
    };
    assert_eq!(attribute("service.name"), "tether");
    assert_eq!(attribute("host.name"), "buildbox");
    assert_eq!(attribute("tether.session.id"), "every-kind");
    let scope_spans = resource_spans[0]["scopeSpans"]
        .as_array()
        .expect("scopeSpans");
    assert_eq!(scope_spans[0]["scope"]["name"], "tether");
    let spans = scope_spans[0]["spans"].as_array().expect("spans");
    let record = SessionRecord::load(&every_kind_fixture()).unwrap();
    assert_eq!(
        spans.len(),
        record.commands.len() + 1,
        "a root and a span per run"
    );

    let hex = |value: &Value, len: usize| {
        let text = value.as_str().unwrap_or_default();
        text.len() == len && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    };
    let nanos = |value: &Value| {
        let text = value.as_str().unwrap_or_default();
        !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit())
    };
    let trace_id = spans[0]["traceId"].clone();
    let root_id = spans[0]["spanId"].clone();
    // A root has no parent: the generated messages' JSON writes the empty id as "", which
    // OTLP/JSON reads as none (a zero-length id).
    assert!(spans[0]["parentSpanId"].as_str().is_none_or(str::is_empty));
    for span in spans {
        assert!(hex(&span["traceId"], 32), "{}", span["traceId"]);
        assert_eq!(span["traceId"], trace_id, "one trace per session");
        assert!(hex(&span["spanId"], 16), "{}", span["spanId"]);
        assert!(
            nanos(&span["startTimeUnixNano"]),
            "{}",
            span["startTimeUnixNano"]
        );
        assert!(
            nanos(&span["endTimeUnixNano"]),
            "{}",
            span["endTimeUnixNano"]
        );
        assert_eq!(span["kind"], 1);
        assert!(span["name"].is_string());
        for event in span["events"].as_array().into_iter().flatten() {
            assert!(nanos(&event["timeUnixNano"]), "{event}");
            assert!(event["name"].is_string());
        }
    }
    let ids: BTreeSet<&str> = spans.iter().filter_map(|s| s["spanId"].as_str()).collect();
    assert_eq!(ids.len(), spans.len(), "span ids are unique");
    for span in &spans[1..] {
        assert_eq!(span["parentSpanId"], root_id);
    }
    // Failures are errors with a message; exit 0 is OK.
    let span = |name: &str| spans.iter().find(|s| s["name"] == name).unwrap();
    assert_eq!(span("ok")["status"]["code"], 1);
    assert_eq!(span("fail")["status"]["code"], 2);
    assert!(
        span("fail")["status"]["message"]
            .as_str()
            .unwrap()
            .contains("exit 3")
    );
    assert_eq!(span("killed")["status"]["code"], 2);
    let crashed = span("crashed");
    assert!(
        crashed["events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["name"] == "journal_cut_short")
    );
    // Every signal of the session is a span event.
    let signals = spans
        .iter()
        .flat_map(|s| s["events"].as_array().into_iter().flatten())
        .filter(|e| e["name"] == "signal_sent")
        .count();
    assert_eq!(signals, count_kind("signal_sent"));
    // What the official definitions read back: the file is OTLP/JSON, not a look-alike.
    let bytes = render(&fixture_export(), Format::Otlp);
    let decoded: ExportTraceServiceRequest =
        serde_json::from_slice(&bytes).expect("an ExportTraceServiceRequest");
    let decoded_spans = &decoded.resource_spans[0].scope_spans[0].spans;
    assert_eq!(decoded_spans.len(), spans.len());
    assert!(
        decoded_spans
            .iter()
            .all(|s| s.trace_id.len() == 16 && s.span_id.len() == 8)
    );
    // The same session gives the same trace.
    assert_eq!(
        rendered_json(Format::Otlp)["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["traceId"],
        trace_id
    );
}

#[test]
fn jsonl_merges_every_event_in_time_order_with_session_and_command() {
    let bytes = render(&fixture_export(), Format::Jsonl);
    let text = String::from_utf8(bytes).expect("UTF-8");
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is JSON"))
        .collect();
    // Every journal event, and one line for the journal cut short.
    assert_eq!(lines.len(), fixture_events().len() + 1);
    let times: Vec<u64> = lines.iter().map(|l| l["ts_ms"].as_u64().unwrap()).collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "not in time order");
    for line in &lines {
        assert_eq!(line["session"], "every-kind");
        assert!(
            line["command"].as_str().is_some_and(|c| !c.is_empty()),
            "{line}"
        );
        assert!(line["kind"].is_string());
    }
    let cut = lines
        .iter()
        .find(|l| l["kind"] == "journal_cut_short")
        .expect("the cut-short line");
    assert_eq!(cut["command"], "10-crashed");
    // The lines are the journal's: an event reads back from one.
    let first: Event = serde_json::from_value(lines[0].clone()).expect("an event");
    assert_eq!(first.kind.name(), "broker_started");
}

#[test]
fn text_has_the_summary_the_timelines_and_clean_stderr_tails() {
    let bytes = render(&fixture_export(), Format::Text);
    assert!(!bytes.contains(&0x1b), "an escape reached the report");
    assert!(
        bytes
            .iter()
            .all(|&b| b == b'\n' || !(b < 0x20 || b == 0x7f)),
        "a control character reached the report"
    );
    let text = String::from_utf8(bytes).expect("UTF-8");
    assert!(text.contains("COMMAND"), "{text}");
    for id in ["01-ok", "02-fail", "04-killed", "10-crashed"] {
        assert!(text.contains(&format!("== {id} (")), "no section for {id}");
    }
    let summary_row = text
        .lines()
        .find(|l| l.starts_with("04-killed "))
        .expect("the killed command's row");
    assert!(
        summary_row.contains("SIGKILL") && summary_row.contains("killed"),
        "{summary_row}"
    );
    // The failing command's stderr, colours dropped, the OSC title gone.
    assert!(
        text.contains("| error: test failed: left != right"),
        "{text}"
    );
    assert!(text.contains("|   right: 2"));
    assert!(
        text.contains("\n   | title\n"),
        "the OSC title is dropped, its text kept"
    );
    // The timeline in the TUI's words.
    assert!(
        text.contains("signal_sent SIGINT by tether signal, pid 8808 → 2 processes"),
        "{text}"
    );
    assert!(
        text.contains("orphan_reaped pid 8494 escaped, SIGKILL: sleep 40"),
        "{text}"
    );
    assert!(text.contains("cut short"));
}
