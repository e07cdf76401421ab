//! The encoding over the checked-in session `tests/fixtures/every-kind`, copied to a temporary
//! directory so that one command can be made the agent and another given a `TRACEPARENT`.

use std::path::Path;

use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::logs::v1::SeverityNumber;
use opentelemetry_proto::tonic::trace::v1::span::Event;
use prost::Message;
use serde_json::{Value, json};

use super::*;
use crate::journal::SessionRecord;
use crate::testing::copy_dir;

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/every-kind");
const CALLER_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";
const OWN_SPAN: &str = "b7ad6b7169203331";

/// What the follower sends for `items` taken together (the follower itself sends the traces
/// first and the logs only once they are taken): the spans, and the logs when on.
impl Encoder {
    /// The item's span, and its output's log records when logs are on. Reads the command's
    /// stream logs (bounded by the budget), nothing else.
    fn item(&self, item: &Item) -> (Span, Vec<LogRecord>) {
        let span = self.span(item);
        let records = self.records(item, &span);
        (span, records)
    }

    /// A batch's requests: the traces, and the logs when logs are on and there are any.
    fn batch(
        &self,
        items: &[Item],
    ) -> (ExportTraceServiceRequest, Option<ExportLogsServiceRequest>) {
        let mut spans = Vec::with_capacity(items.len());
        let mut records = Vec::new();
        for item in items {
            let (span, logs) = self.item(item);
            spans.push(span);
            records.extend(logs);
        }
        let logs = (!records.is_empty()).then(|| self.logs(records));
        (self.traces(spans), logs)
    }
}

/// Changes a command's `command.json`.
fn edit_request(dir: &Path, edit: impl FnOnce(&mut Value)) {
    let path = dir.join("command.json");
    let mut request: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    edit(&mut request);
    crate::testing::write_private(&path, serde_json::to_vec(&request).unwrap());
}

/// The fixture in a temporary directory: `agent` makes `01-ok` a `tether agent`'s command;
/// `02-fail` always runs under a caller's `TRACEPARENT`.
fn fixture(agent: bool) -> (tempfile::TempDir, SessionExport) {
    let tmp = tether_os::testing::private_tempdir();
    let dir = tmp.path().join("every-kind");
    copy_dir(Path::new(FIXTURE), &dir);
    edit_request(&dir.join("02-fail"), |r| {
        r["trace"] = json!({
            "trace_id": CALLER_TRACE, "parent_span_id": CALLER_SPAN,
            "span_id": OWN_SPAN, "flags": "01",
        });
    });
    if agent {
        edit_request(&dir.join("01-ok"), |r| {
            r["attention"] = json!({ "agent": true })
        });
    }
    let session = SessionExport::from_record(&SessionRecord::load(&dir).unwrap());
    (tmp, session)
}

/// The request through protobuf and back: what a receiver decodes.
fn round_trip(session: &SessionExport) -> Vec<Span> {
    let request = request(session);
    let bytes = request.encode_to_vec();
    let decoded = ExportTraceServiceRequest::decode(&bytes[..]).unwrap();
    assert_eq!(decoded, request);
    let resource_spans = decoded.resource_spans.into_iter().next().unwrap();
    let resource = resource_spans.resource.unwrap();
    assert_eq!(
        text(&resource.attributes, "host.name"),
        Some("buildbox".into())
    );
    assert_eq!(text(&resource.attributes, "user.name"), Some("dev".into()));
    let scope = resource_spans.scope_spans.into_iter().next().unwrap();
    assert_eq!(scope.scope.unwrap().name, "tether");
    scope.spans
}

fn value<'a>(attributes: &'a [KeyValue], key: &str) -> Option<&'a Any> {
    (attributes.iter())
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref()?.value.as_ref())
}

fn text(attributes: &[KeyValue], key: &str) -> Option<String> {
    match value(attributes, key)? {
        Any::StringValue(s) => Some(s.clone()),
        other => panic!("{key}: {other:?}"),
    }
}

fn number(attributes: &[KeyValue], key: &str) -> Option<i64> {
    match value(attributes, key)? {
        Any::IntValue(n) => Some(*n),
        other => panic!("{key}: {other:?}"),
    }
}

fn named<'a>(spans: &'a [Span], name: &str) -> &'a Span {
    spans.iter().find(|s| s.name == name).unwrap()
}

#[test]
fn a_plain_session_has_a_root_and_every_command_under_it() {
    let (_tmp, session) = fixture(false);
    let spans = round_trip(&session);
    assert_eq!(spans.len(), session.commands.len() + 1);
    let root = &spans[0];
    assert_eq!(root.trace_id, trace_id("buildbox", "every-kind"));
    assert_eq!(root.span_id, span_id("buildbox", "every-kind", ""));
    assert!(root.parent_span_id.is_empty());
    assert_eq!(
        text(&root.attributes, "tether.session.id").as_deref(),
        Some("every-kind")
    );
    for span in &spans[1..] {
        if span.name == "fail" {
            continue;
        }
        assert_eq!(span.trace_id, root.trace_id, "{}", span.name);
        assert_eq!(span.parent_span_id, root.span_id, "{}", span.name);
        assert!(span.links.is_empty());
        let attributes = &span.attributes;
        assert_eq!(
            text(attributes, "tether.session.id").as_deref(),
            Some("every-kind")
        );
        assert!(
            number(attributes, "tether.command.number").is_some(),
            "{}",
            span.name
        );
        assert!(text(attributes, "tether.ended").is_some(), "{}", span.name);
        assert!(value(attributes, "process.command_args").is_some());
    }
    let ok = named(&spans, "ok");
    assert_eq!(ok.span_id, span_id("buildbox", "every-kind", "01-ok"));
    assert_eq!(number(&ok.attributes, "tether.command.number"), Some(1));
    assert_eq!(
        text(&ok.attributes, "process.executable.name").as_deref(),
        Some("sh")
    );
    assert_eq!(number(&ok.attributes, "process.exit.code"), Some(0));
    assert!(number(&ok.attributes, "process.pid").is_some());
    assert_eq!(
        text(&ok.attributes, "tether.ended").as_deref(),
        Some("exit 0")
    );
    assert_eq!(text(&ok.attributes, "error.type"), None);
    assert_eq!(ok.status.as_ref().unwrap().code, 1);

    let fail = named(&spans, "fail");
    assert_eq!(number(&fail.attributes, "process.exit.code"), Some(3));
    assert_eq!(text(&fail.attributes, "error.type").as_deref(), Some("3"));
    assert_eq!(fail.status.as_ref().unwrap().code, 2);

    let killed = named(&spans, "killed");
    assert_eq!(
        text(&killed.attributes, "error.type").as_deref(),
        Some("SIGKILL")
    );
    assert_eq!(
        text(&killed.attributes, "tether.ended").as_deref(),
        Some("timed out (SIGKILL)")
    );
    assert_eq!(
        text(&killed.attributes, "tether.stopped_by").as_deref(),
        Some("watchdog")
    );
    assert!(number(&killed.attributes, "tether.cpu_ms").is_some());
    assert!(number(&killed.attributes, "tether.peak_rss_bytes").is_some());

    let missing = named(&spans, "missing");
    assert_eq!(
        text(&missing.attributes, "error.type").as_deref(),
        Some("enoent")
    );
    let ended = text(&missing.attributes, "tether.ended").unwrap();
    assert_eq!(ended, "failed to start: enoent");
}

/// The root span counts the commands that failed as `tether sessions` does (failed or
/// killed; a run cut short too), and a run the operator stopped is no error: `05-interrupted`
/// (INT through `tether signal`) was counted failed, which made the root of a session of
/// stopped commands say all of them failed.
#[test]
fn the_root_counts_failures_as_tether_sessions_does() {
    let (_tmp, session) = fixture(false);
    let spans = round_trip(&session);
    let tally = crate::postmortem::tally::Tally::of(session.commands.iter().map(|c| &c.state));
    assert_eq!(
        tally.words(),
        "11 cmds: 4 ok, 3 failed, 3 killed, 1 stopped"
    );
    // The failed (`10-crashed`, cut short, among them: its broker was lost) and the killed.
    let failed = number(&spans[0].attributes, "tether.commands.failed");
    assert_eq!(failed, Some(6));
    let message = &spans[0].status.as_ref().unwrap().message;
    assert_eq!(message, "6 of 11 commands failed or were cut short");
    let interrupted = named(&spans, "interrupted");
    assert_eq!(
        text(&interrupted.attributes, "tether.ended").as_deref(),
        Some("stopped (SIGINT)")
    );
    assert_eq!(text(&interrupted.attributes, "error.type"), None);
    assert_eq!(interrupted.status.as_ref().unwrap().code, 1, "OK");
}

fn event<'a>(span: &'a Span, name: &str) -> &'a Event {
    span.events.iter().find(|e| e.name == name).unwrap()
}

#[test]
fn lifecycle_events_carry_their_fields() {
    let (_tmp, session) = fixture(false);
    let spans = round_trip(&session);
    let interrupted = named(&spans, "interrupted");
    let signal = event(interrupted, "signal_sent");
    assert_eq!(
        text(&signal.attributes, "tether.signal").as_deref(),
        Some("SIGINT")
    );
    assert_eq!(
        text(&signal.attributes, "tether.origin").as_deref(),
        Some("operator")
    );
    assert_eq!(
        text(&signal.attributes, "tether.scope").as_deref(),
        Some("group")
    );
    let program = text(&signal.attributes, "tether.client.program");
    assert_eq!(program.as_deref(), Some("tether signal"));
    assert_eq!(number(&signal.attributes, "tether.client.pid"), Some(8808));
    assert!(text(&signal.attributes, "tether.description").is_some());
    let stopped_by = text(&interrupted.attributes, "tether.stopped_by");
    assert_eq!(
        stopped_by.as_deref(),
        Some("operator: tether signal (pid 8808)")
    );
    // Output, tree snapshots and pongs are not events.
    for span in &spans {
        for event in &span.events {
            assert!(!["output", "tree", "pong"].contains(&event.name.as_str()));
        }
    }
    let crashed = named(&spans, "crashed");
    assert!(crashed.events.iter().any(|e| e.name == "journal_cut_short"));
}

#[test]
fn a_traceparent_child_is_the_callers_with_a_link_to_the_root() {
    let (_tmp, session) = fixture(false);
    let spans = round_trip(&session);
    let fail = named(&spans, "fail");
    assert_eq!(hex(&fail.trace_id), CALLER_TRACE);
    assert_eq!(hex(&fail.span_id), OWN_SPAN);
    assert_eq!(hex(&fail.parent_span_id), CALLER_SPAN);
    assert_eq!(fail.links.len(), 1);
    assert_eq!(fail.links[0].trace_id, trace_id("buildbox", "every-kind"));
    assert_eq!(fail.links[0].span_id, span_id("buildbox", "every-kind", ""));
}

#[test]
fn an_agents_command_is_the_sessions_root() {
    let (_tmp, session) = fixture(true);
    let spans = round_trip(&session);
    // No session span of its own: the agent stands for the session.
    assert_eq!(spans.len(), session.commands.len());
    let agent = named(&spans, "ok");
    let root_id = span_id("buildbox", "every-kind", "");
    assert_eq!(agent.span_id, root_id);
    assert!(agent.parent_span_id.is_empty());
    assert_eq!(agent.trace_id, trace_id("buildbox", "every-kind"));
    assert_eq!(
        text(&agent.attributes, "tether.command.name").as_deref(),
        Some("ok")
    );
    for span in spans
        .iter()
        .filter(|s| !["ok", "fail"].contains(&s.name.as_str()))
    {
        assert_eq!(span.parent_span_id, root_id, "{}", span.name);
    }
    // The follower's way on the session's machine gives the same span.
    let encoder = Encoder::new("buildbox", Resource::default(), None);
    let command = session
        .commands
        .iter()
        .find(|c| c.id.dir_name() == "01-ok")
        .unwrap();
    let item = Item::Command {
        session: "every-kind".into(),
        command: Box::new(load(&command.dir)),
        root: true,
    };
    let (span, records) = encoder.item(&item);
    assert_eq!(&span, agent);
    assert!(records.is_empty(), "no log records unless asked for");
}

/// One command as the follower reads it.
fn load(dir: &Path) -> crate::export::CommandExport {
    crate::export::CommandExport::load(dir)
}

#[test]
fn a_session_item_is_the_root_span() {
    let encoder = Encoder::new("h", Resource::default(), None);
    let item = Item::Session(SessionRoot {
        id: "s".into(),
        started_ms: 1_000,
        ended_ms: 2_000,
        commands: 5,
        failed: 1,
        never_ran: vec![crate::export::follow::NeverRan {
            name: "web".into(),
            words: "not started: migrate: exit 1".into(),
            at_ms: 1_500,
            blocked: true,
        }],
    });
    let (span, _) = encoder.item(&item);
    // What the launcher never started: counted, blocked apart, and an event each.
    assert_eq!(number(&span.attributes, "tether.commands"), Some(6));
    assert_eq!(number(&span.attributes, "tether.commands.blocked"), Some(1));
    let [event] = &span.events[..] else {
        panic!("{:?}", span.events)
    };
    assert_eq!(
        (event.name.as_str(), event.time_unix_nano),
        ("not_started", 1_500_000_000)
    );
    assert_eq!(
        text(&event.attributes, "tether.description").as_deref(),
        Some("not started: migrate: exit 1")
    );
    assert_eq!(
        (span.trace_id.clone(), span.span_id.clone()),
        (trace_id("h", "s").to_vec(), span_id("h", "s", "").to_vec())
    );
    assert!(span.parent_span_id.is_empty());
    assert_eq!(
        (span.start_time_unix_nano, span.end_time_unix_nano),
        (1_000_000_000, 2_000_000_000)
    );
    assert_eq!(span.status.unwrap().code, 2);
    let request = encoder.traces(vec![Span::default(); 3]);
    assert_eq!(request.resource_spans[0].scope_spans[0].spans.len(), 3);
    assert!(
        encoder.batch(&[item]).1.is_none(),
        "no logs request without records"
    );
    let local = Encoder::local(|_| None, None).unwrap();
    let attributes = &local.resource.attributes;
    assert!(text(attributes, "host.name").is_some_and(|h| !h.is_empty()));
    assert!(text(attributes, "user.name").is_some_and(|u| !u.is_empty()));
}

fn body(record: &LogRecord) -> String {
    match record.body.as_ref().and_then(|b| b.value.as_ref()) {
        Some(Any::StringValue(s)) => s.clone(),
        other => panic!("{other:?}"),
    }
}

#[test]
fn log_records_are_the_head_and_tail_with_a_mark_between() {
    let (_tmp, session) = fixture(false);
    let command = session
        .commands
        .iter()
        .find(|c| c.id.dir_name() == "01-ok")
        .unwrap();
    // 1,000 lines of 10 bytes; the budget keeps 50 of each end.
    let log: String = (0..1000).map(|i| format!("line {i:04}\n")).collect();
    crate::testing::write_private(command.dir.join("stdout.log"), &log);
    crate::testing::write_private(command.dir.join("stderr.log"), "oops\n");
    let encoder = Encoder::new("h", Resource::default(), Some(LogBudget { bytes: 1000 }));
    let item = Item::Command {
        session: "every-kind".into(),
        command: Box::new(load(&command.dir)),
        root: false,
    };
    let (span, records) = encoder.item(&item);
    let stdout: Vec<&LogRecord> = (records.iter())
        .filter(|r| text(&r.attributes, "tether.stream").as_deref() == Some("stdout"))
        .collect();
    assert_eq!(stdout.len(), 101);
    assert_eq!(body(stdout[0]), "line 0000");
    assert_eq!(body(stdout[49]), "line 0049");
    assert_eq!(body(stdout[50]), "… 9000 bytes left out …");
    assert_eq!(
        number(&stdout[50].attributes, "tether.left_out_bytes"),
        Some(9000)
    );
    assert_eq!(body(stdout[51]), "line 0950");
    assert_eq!(body(stdout[100]), "line 0999");
    for record in &stdout {
        assert_eq!(record.severity_number, SeverityNumber::Info as i32);
        assert_eq!(
            (&record.trace_id, &record.span_id),
            (&span.trace_id, &span.span_id)
        );
        assert!(record.time_unix_nano > 0);
    }
    let stderr: Vec<&LogRecord> = (records.iter())
        .filter(|r| text(&r.attributes, "tether.stream").as_deref() == Some("stderr"))
        .collect();
    assert_eq!(stderr.len(), 1);
    assert_eq!(body(stderr[0]), "oops");
    assert_eq!(stderr[0].severity_number, SeverityNumber::Warn as i32);
    assert_eq!(stderr[0].severity_text, "WARN");
    let (traces, logs) = encoder.batch(&[item]);
    assert_eq!(traces.resource_spans[0].scope_spans[0].spans, [span]);
    assert_eq!(
        logs.unwrap().resource_logs[0].scope_logs[0].log_records,
        records
    );
    let request = encoder.logs(records.clone());
    let decoded = ExportLogsServiceRequest::decode(&request.encode_to_vec()[..]).unwrap();
    assert_eq!(decoded.resource_logs[0].scope_logs[0].log_records, records);
}

#[test]
fn a_log_that_fits_is_whole_and_a_link_is_not_followed() {
    let tmp = tether_os::testing::private_tempdir();
    crate::testing::write_private(tmp.path().join("stdout.log"), "a\nb\n");
    let cut = logs::cut(tmp.path(), crate::protocol::Stream::Stdout, 4).unwrap();
    assert_eq!((cut.head.as_slice(), cut.left_out), (&b"a\nb\n"[..], 0));
    let none = logs::cut(tmp.path(), crate::protocol::Stream::Stderr, 4).unwrap();
    assert_eq!(none, logs::Cut::default());
    std::os::unix::fs::symlink("/etc/passwd", tmp.path().join("stderr.log")).unwrap();
    assert!(logs::cut(tmp.path(), crate::protocol::Stream::Stderr, 4).is_err());
}

#[test]
fn ids_are_stable_and_never_zero() {
    assert_eq!(
        trace_id("h", "20261130T064143Z-12"),
        trace_id("h", "20261130T064143Z-12")
    );
    assert_ne!(
        trace_id("h", "20261130T064143Z-12"),
        trace_id("h", "20261130T064143Z-13")
    );
    assert_ne!(span_id("h", "s", ""), span_id("h", "s", "01-a"));
    assert!(trace_id("h", "").iter().any(|&b| b != 0));
    // Two machines' sessions of one name are two traces.
    assert_ne!(trace_id("h", "s"), trace_id("h2", "s"));
    assert_ne!(span_id("h", "s", "01-a"), span_id("h2", "s", "01-a"));
    // Stable across versions and machines: a re-export gives a file's ids again.
    assert_eq!(
        hex(&trace_id("buildbox", "every-kind")),
        "d5608f7db804ced6d4b1682dba68daab"
    );
    assert_eq!(
        hex(&span_id("buildbox", "every-kind", "01-ok")),
        "a0d0895fd30d289f"
    );
    assert_eq!(
        unhex("00f067aa0ba902b7"),
        [0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7]
    );
    assert_eq!(unhex("0g"), Vec::<u8>::new());
    assert_eq!(nanos(1_767_323_045_123), 1_767_323_045_123_000_000);
}

#[test]
fn an_agent_from_before_requests_said_so_is_known_by_its_session_owner() {
    // A real `tether agent` run with Claude Code, journaled before requests named the agent.
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/claude-code/sessions/claude-run");
    assert!(is_agent(&dir.join("01-claude")));
    assert!(!is_agent(&dir.join("04-ls")));
    let session = SessionExport::from_record(&SessionRecord::load(&dir).unwrap());
    let spans = round_trip_anywhere(&session);
    assert_eq!(spans.len(), session.commands.len());
    let claude = named(&spans, "claude");
    assert_eq!(claude.span_id, span_id("vm", "claude-run", ""));
    assert!(claude.parent_span_id.is_empty());
    assert_eq!(named(&spans, "ls").parent_span_id, claude.span_id);
}

fn round_trip_anywhere(session: &SessionExport) -> Vec<Span> {
    let request = request(session);
    let decoded = ExportTraceServiceRequest::decode(&request.encode_to_vec()[..]).unwrap();
    assert_eq!(decoded, request);
    decoded.resource_spans[0].scope_spans[0].spans.clone()
}

/// A run whose stop for a changed file the operator's stop took over is the operator's, as
/// result.json and every view say, not the launcher's.
#[test]
fn a_stop_that_took_over_a_restart_names_who_stopped_the_run() {
    let tmp = tether_os::testing::private_tempdir();
    let dir = tmp.path().join("every-kind");
    copy_dir(Path::new(FIXTURE), &dir);
    let events = dir.join("04-killed/events.jsonl");
    let mut lines: Vec<String> = std::fs::read_to_string(&events)
        .unwrap()
        .lines()
        .map(|line| line.replace("\"origin\":\"watchdog\"", "\"origin\":\"file_changed\""))
        .collect();
    let kill = lines.iter().position(|l| l.contains("\"KILL\"")).unwrap();
    lines[kill] = lines[kill].replace("file_changed", "operator");
    let ts = lines[kill - 1].split(',').next().unwrap().to_string();
    lines.insert(
        kill,
        format!("{ts},\"mono_us\":1,\"kind\":\"stop_started\",\"origin\":\"operator\",\"grace_ms\":250}}"),
    );
    crate::testing::write_private(&events, lines.join("\n") + "\n");
    let session = SessionExport::from_record(&SessionRecord::load(&dir).unwrap());
    let spans = round_trip(&session);
    let killed = named(&spans, "killed");
    assert_eq!(
        text(&killed.attributes, "tether.stopped_by").as_deref(),
        Some("operator")
    );
    assert_eq!(
        text(&killed.attributes, "tether.ended").as_deref(),
        Some("stopped (SIGKILL)")
    );
}
