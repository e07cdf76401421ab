//! W3C trace context end to end: a caller's `TRACEPARENT` given to `tether exec` or the shell
//! shim is journaled with the command, the command sees a `TRACEPARENT` of the same trace
//! naming its own span, and the OTLP export makes that span the caller's child. Without
//! one, or with a malformed one, the command's environment and its export are as before.

use crate::common;

use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::Value;

use common::journal::load_complete;
use common::{TAG_VAR, TestEnv, run_to_end};
use tether::export::otlp::{self, hex};
use tether::protocol::{EventKind, TraceContext};

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";

/// What the command prints: the trace variables it was given.
const PRINT_TRACE: &str = r#"printf '%s\n' "${TRACEPARENT-unset}" "${TRACESTATE-unset}""#;

/// How the command is run: through `tether exec`, or through the shim (`tether sh -c`).
#[derive(Debug, Clone, Copy)]
enum Front {
    Exec,
    Shim,
}

/// The command under `front`, with `vars` set and any trace variable of the test runner's
/// own removed; stdin from /dev/null, tagged.
fn command(env: &TestEnv, front: Front, vars: &[(&str, &str)]) -> Command {
    let mut command = match front {
        Front::Exec => env.exec_command(&["-n", "traced"], &["sh", "-c", PRINT_TRACE]),
        Front::Shim => env.tether(&["sh", "-c", PRINT_TRACE]),
    };
    command
        .env_remove("TRACEPARENT")
        .env_remove("TRACESTATE")
        .env(TAG_VAR, &env.tag)
        .stdin(Stdio::null());
    for (name, value) in vars {
        command.env(name, value);
    }
    command
}

/// Runs it; returns the two lines it printed (its `TRACEPARENT` and `TRACESTATE`).
fn run(env: &TestEnv, front: Front, vars: &[(&str, &str)]) -> (String, String) {
    let output = run_to_end(env, command(env, front, vars), "the traced command");
    assert!(
        output.status.success(),
        "{front:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8(output.stdout).expect("UTF-8 output");
    let mut lines = stdout.lines().map(str::to_owned);
    let traceparent = lines.next().expect("a TRACEPARENT line");
    let tracestate = lines.next().expect("a TRACESTATE line");
    (traceparent, tracestate)
}

/// The session id and command id of a command directory.
fn ids(dir: &Path) -> (String, String) {
    let name = dir.file_name().unwrap().to_string_lossy().into_owned();
    (common::journal::session_of(dir), name)
}

/// The OTLP span `tether export` gives the command of `dir`.
fn exported_span(env: &TestEnv, dir: &Path) -> Value {
    let (session, command) = ids(dir);
    let output = run_to_end(
        env,
        env.tether(&["export", &session, "--format", "otlp"]),
        "tether export",
    );
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let request: Value = serde_json::from_slice(&output.stdout).expect("OTLP JSON");
    let spans = request["resourceSpans"][0]["scopeSpans"][0]["spans"]
        .as_array()
        .expect("spans")
        .clone();
    spans
        .into_iter()
        .find(|span| {
            span["attributes"].as_array().is_some_and(|attributes| {
                attributes.iter().any(|a| {
                    a["key"] == "tether.command.id" && a["value"]["stringValue"] == command
                })
            })
        })
        .unwrap_or_else(|| panic!("no span for {command}"))
}

/// The span a command without a usable trace context has: the session's trace, under its
/// root span, as before trace contexts were read.
fn assert_exported_as_before(span: &Value, dir: &Path) {
    let (session, command) = ids(dir);
    assert_eq!(
        span["traceId"],
        hex(&otlp::trace_id(&otlp::local_host(), &session)),
        "{span}"
    );
    assert_eq!(
        span["parentSpanId"],
        hex(&otlp::span_id(&otlp::local_host(), &session, "")),
        "{span}"
    );
    assert_eq!(
        span["spanId"],
        hex(&otlp::span_id(&otlp::local_host(), &session, &command)),
        "{span}"
    );
    // The generated messages' JSON writes every field: no link is an empty list.
    assert!(span["links"].as_array().is_none_or(Vec::is_empty), "{span}");
}

fn trace_of(dir: &Path) -> Option<TraceContext> {
    load_complete(dir).request.and_then(|r| r.trace)
}

fn ignored_notes(dir: &Path) -> Vec<String> {
    load_complete(dir)
        .events
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::TraceContextIgnored { reason } => Some(reason),
            _ => None,
        })
        .collect()
}

#[test]
fn a_callers_trace_context_reaches_the_journal_the_command_and_the_export() {
    for front in [Front::Exec, Front::Shim] {
        let env = TestEnv::new("trace-context");
        let caller = format!("00-{TRACE}-{CALLER_SPAN}-01");
        let (traceparent, tracestate) = run(
            &env,
            front,
            &[
                ("TRACEPARENT", &caller),
                ("TRACESTATE", "vendor=opaque,x=1"),
            ],
        );
        let dir = env.command_dir();
        let trace = trace_of(&dir).unwrap_or_else(|| panic!("{front:?}: no trace journaled"));
        assert_eq!(trace.trace_id, TRACE);
        assert_eq!(trace.parent_span_id, CALLER_SPAN);
        assert_eq!(trace.flags, "01");
        assert_eq!(trace.state.as_deref(), Some("vendor=opaque,x=1"));
        assert_ne!(trace.span_id, CALLER_SPAN);
        assert_ne!(trace.span_id, "0".repeat(16));
        // The command's own span, in the same trace: what an instrumented program nests under.
        assert_eq!(traceparent, format!("00-{TRACE}-{}-01", trace.span_id));
        assert_eq!(tracestate, "vendor=opaque,x=1");
        assert!(ignored_notes(&dir).is_empty());

        let span = exported_span(&env, &dir);
        assert_eq!(span["traceId"], TRACE, "{span}");
        assert_eq!(span["parentSpanId"], CALLER_SPAN, "{span}");
        assert_eq!(span["spanId"], trace.span_id.as_str(), "{span}");
        // Back to the session's own trace.
        let (session, _) = ids(&dir);
        assert_eq!(
            span["links"][0]["traceId"],
            hex(&otlp::trace_id(&otlp::local_host(), &session))
        );
        env.finish();
    }
}

#[test]
fn each_command_gets_a_span_of_its_own() {
    let env = TestEnv::new("trace-two");
    let caller = format!("00-{TRACE}-{CALLER_SPAN}-00");
    let (first, _) = run(&env, Front::Exec, &[("TRACEPARENT", &caller)]);
    let (second, _) = run(&env, Front::Exec, &[("TRACEPARENT", &caller)]);
    assert!(first.starts_with(&format!("00-{TRACE}-")), "{first}");
    assert!(first.ends_with("-00"), "{first}");
    assert_ne!(first, second);
    env.finish();
}

#[test]
fn without_a_trace_context_the_command_gets_none_and_is_exported_as_before() {
    for front in [Front::Exec, Front::Shim] {
        let env = TestEnv::new("trace-none");
        let (traceparent, tracestate) = run(&env, front, &[]);
        assert_eq!(
            (traceparent.as_str(), tracestate.as_str()),
            ("unset", "unset")
        );
        let dir = env.command_dir();
        assert_eq!(trace_of(&dir), None);
        assert!(ignored_notes(&dir).is_empty());
        assert_exported_as_before(&exported_span(&env, &dir), &dir);
        env.finish();
    }
}

#[test]
fn a_malformed_traceparent_is_passed_on_untouched_said_once_and_not_exported() {
    for front in [Front::Exec, Front::Shim] {
        let env = TestEnv::new("trace-malformed");
        let zero_trace = format!("00-{}-{CALLER_SPAN}-01", "0".repeat(32));
        for bad in ["garbage", zero_trace.as_str()] {
            let (traceparent, tracestate) = run(
                &env,
                front,
                &[("TRACEPARENT", bad), ("TRACESTATE", "vendor=opaque")],
            );
            // As the shell would have it: the command's environment is the caller's.
            assert_eq!(traceparent, bad);
            assert_eq!(tracestate, "vendor=opaque");
        }
        let dirs = env.command_dirs();
        assert!(dirs.len() >= 2, "{front:?}: both runs journaled: {dirs:?}");
        for dir in dirs {
            assert_eq!(trace_of(&dir), None);
            let notes = ignored_notes(&dir);
            assert_eq!(notes.len(), 1, "{front:?}: {notes:?}");
            assert!(notes[0].contains("TRACEPARENT ignored"), "{}", notes[0]);
            assert_exported_as_before(&exported_span(&env, &dir), &dir);
        }
        env.finish();
    }
}
