//! `tether export` in each format and `tether sessions --json`, over the checked-in session
//! `tests/fixtures/every-kind` (every kind of event, a journal cut short): what other tools
//! need of each format, counted against the journal. No terminal, no process started but
//! tether itself.

mod common;

use std::collections::BTreeSet;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

use common::{BIN, TestEnv, run_to_end};
use tether::export::{Format, SessionExport, SessionsDocument, render};
use tether::journal::SessionRecord;
use tether::protocol::{Event, EventKind};

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/every-kind")
}

fn fixture_export() -> SessionExport {
    SessionExport::from_record(&SessionRecord::load(&fixture()).expect("the fixture loads"))
}

/// Every journal event of the fixture, with its command's directory name.
fn fixture_events() -> Vec<(String, Event)> {
    let record = SessionRecord::load(&fixture()).expect("the fixture loads");
    record
        .commands
        .iter()
        .flat_map(|c| c.events.iter().map(|e| (c.id.clone(), e.clone())))
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
    // A drain for each run that exited and closed; a span for each run.
    let record = SessionRecord::load(&fixture()).unwrap();
    let has = |c: &tether::journal::CommandRecord, name: &str| {
        c.events.iter().any(|e| e.kind.name() == name)
    };
    let drains = record
        .commands
        .iter()
        .filter(|c| has(c, "exit") && has(c, "close"))
        .count();
    let spans = |cat: &str| {
        events
            .iter()
            .filter(|e| e["ph"] == "X" && e["cat"] == cat)
            .count()
    };
    assert_eq!(spans("drain"), drains);
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
    let counters: Vec<&Value> = events.iter().filter(|e| e["ph"] == "C").collect();
    assert_eq!(counters.len(), count_kind("output"));
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
    let record = SessionRecord::load(&fixture()).unwrap();
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
    assert!(spans[0].get("parentSpanId").is_none());
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
        text.contains("signal_sent SIGINT by operator → 2 processes"),
        "{text}"
    );
    assert!(
        text.contains("orphan_reaped pid 8494 escaped, SIGKILL: sleep 40"),
        "{text}"
    );
    assert!(text.contains("cut short"));
}

/// A state directory holding copies of the fixture under the given names, started at the
/// given times.
fn state_with(env: &TestEnv, sessions: &[(&str, u64)]) -> PathBuf {
    let state = env.state_dir();
    let dir = state.join("sessions");
    fs::create_dir_all(&dir).unwrap();
    fs::set_permissions(&state, fs::Permissions::from_mode(0o700)).unwrap();
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)).unwrap();
    for (name, started_ms) in sessions {
        copy_dir(&fixture(), &dir.join(name));
        let info_path = dir.join(name).join("session.json");
        let mut info: Value = serde_json::from_slice(&fs::read(&info_path).unwrap()).unwrap();
        info["id"] = Value::from(*name);
        info["started_ms"] = Value::from(*started_ms);
        fs::write(&info_path, serde_json::to_vec(&info).unwrap()).unwrap();
    }
    state
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            fs::copy(entry.path(), &target).unwrap();
        }
    }
}

fn tether(env: &TestEnv, state: &Path, args: &[&str]) -> Output {
    let mut command = Command::new(BIN);
    command.arg("--state-dir").arg(state).args(args);
    run_to_end(env, command, &format!("tether {args:?}"))
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn sessions_json_round_trips_newest_last_with_the_cut_short_command() {
    let env = TestEnv::new("sessions-json");
    let state = state_with(&env, &[("zz-older", 1_000), ("aa-newer", 2_000)]);
    let output = tether(&env, &state, &["sessions", "--json"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let document: SessionsDocument =
        serde_json::from_slice(&output.stdout).expect("the documented structure");
    let again: Value = serde_json::to_value(&document).unwrap();
    let raw: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(again, raw, "the document round-trips");
    let ids: Vec<&str> = document.sessions.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, ["zz-older", "aa-newer"], "newest last");
    let session = &document.sessions[1];
    assert!(session.cut_short);
    assert_eq!(session.started.as_deref(), Some("1970-01-01T00:00:02.000Z"));
    assert_eq!(session.commands.len(), 10);
    let cut: Vec<&str> = session
        .commands
        .iter()
        .filter(|c| c.cut_short)
        .map(|c| c.id.as_str())
        .collect();
    assert_eq!(cut, ["10-crashed"]);
    let crashed = &session.commands[9];
    assert_eq!(crashed.state, "lost");
    assert!(
        crashed.damage.iter().any(|d| d.contains("partial line")),
        "{:?}",
        crashed.damage
    );
    let command = |id: &str| session.commands.iter().find(|c| c.id == id).unwrap();
    assert_eq!(command("02-fail").exit_code, Some(3));
    assert_eq!(command("04-killed").signal_name.as_deref(), Some("SIGKILL"));
    assert!(command("04-killed").badges.timeout && command("04-killed").badges.killed);
    assert_eq!(command("04-killed").badges.orphans, 1);
    assert!(command("03-tree").badges.drained);
    assert!(command("06-orphaned").badges.parent_lost);
    let capped = command("07-capped");
    assert!(capped.badges.capped);
    assert_eq!((capped.stdout.written, capped.stdout.stored), (950, 100));
    assert_eq!(command("08-missing").state, "failed_to_start");
    assert_eq!(command("01-ok").argv[0], "sh");
    env.finish();
}

#[test]
fn export_writes_a_private_file_and_says_what_the_journal_lacks() {
    let env = TestEnv::new("export-file");
    let state = state_with(&env, &[("every-kind", 1_000)]);
    let file = env.path("trace.json");
    let output = tether(
        &env,
        &state,
        &[
            "export",
            "--format",
            "chrome-trace",
            "-o",
            file.to_str().unwrap(),
        ],
    );
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(output.stdout.is_empty());
    assert!(
        stderr(&output).contains("10-crashed: journal cut short"),
        "{}",
        stderr(&output)
    );
    let trace: Value = serde_json::from_slice(&fs::read(&file).unwrap()).unwrap();
    assert!(
        trace["traceEvents"]
            .as_array()
            .is_some_and(|e| !e.is_empty())
    );
    assert_eq!(
        fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    // A link is never written through.
    let target = env.path("target");
    fs::write(&target, b"keep").unwrap();
    let link = env.path("link.json");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let output = tether(
        &env,
        &state,
        &["export", "every-kind", "-o", link.to_str().unwrap()],
    );
    assert!(!output.status.success());
    assert!(
        stderr(&output).contains("symbolic link"),
        "{}",
        stderr(&output)
    );
    assert_eq!(fs::read(&target).unwrap(), b"keep");
    // By id, to stdout, each format.
    for format in ["jsonl", "text", "otlp"] {
        let output = tether(&env, &state, &["export", "every-kind", "--format", format]);
        assert!(output.status.success(), "{format}: {}", stderr(&output));
        assert!(!output.stdout.is_empty());
    }
    env.finish();
}

#[test]
fn a_prefix_of_several_sessions_lists_them() {
    let env = TestEnv::new("export-prefix");
    let state = state_with(
        &env,
        &[("agent-1", 1_000), ("agent-2", 2_000), ("other", 3_000)],
    );
    let output = tether(&env, &state, &["export", "agent"]);
    assert_eq!(output.status.code(), Some(2));
    let err = stderr(&output);
    assert!(err.contains("names 2 sessions"), "{err}");
    assert!(
        err.contains("agent-1") && err.contains("agent-2") && !err.contains("other"),
        "{err}"
    );
    // A unique prefix picks its session.
    let output = tether(&env, &state, &["export", "oth", "--format", "jsonl"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(String::from_utf8_lossy(&output.stdout).contains(r#""session":"other""#));
    env.finish();
}

#[test]
fn a_missing_session_or_a_directory_that_is_no_session_is_a_clear_error() {
    let env = TestEnv::new("export-bad");
    let state = state_with(&env, &[("every-kind", 1_000)]);
    let output = tether(&env, &state, &["export", "nope"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("no session `nope`"),
        "{}",
        stderr(&output)
    );

    let not_session = env.path("just-a-dir");
    fs::create_dir(&not_session).unwrap();
    fs::write(not_session.join("notes.txt"), b"hello").unwrap();
    let output = tether(&env, &state, &["export", not_session.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("is not a tether session"),
        "{}",
        stderr(&output)
    );

    let missing = env.path("gone");
    let output = tether(&env, &state, &["export", missing.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("no such directory"),
        "{}",
        stderr(&output)
    );

    // A session directory given as a path works, wherever it is.
    let output = tether(
        &env,
        &state,
        &["export", fixture().to_str().unwrap(), "--format", "jsonl"],
    );
    assert!(output.status.success(), "{}", stderr(&output));
    env.finish();
}
