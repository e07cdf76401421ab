//! The live OTLP export against the real Claude Code: with its tracing on, Claude Code (pinned,
//! offline against the scripted Anthropic server, as in `tests/real_agents.rs`) sends its own
//! spans to an OTLP receiver and gives each Bash call a `TRACEPARENT` naming its
//! `claude_code.tool.execution` span. Under `tether agent`, with `tether export --follow`
//! sending to the same receiver, each of those commands must arrive as that span's child in
//! Claude Code's trace, and the agent's other commands under the agent's own span, the root
//! of the session's trace: one tree, as a tracing backend draws it.
//!
//! Needs `npm` and the npm registry (the first run installs Claude Code into
//! `target/test-agents/`), and `python3`: without them this test fails, it does not skip.

use crate::common;

use std::collections::HashMap;
use std::fs;

use common::agents::Agent;
use common::agents::model_server::{ModelServer, Step};
use common::agents::offline::{AgentInvocation, Interaction};
use common::agents::running::RunningAgent;
use common::otlp_receiver::{ReceivedSpan, Receiver, attr_text, hex};
use common::{TestEnv, run_to_end, wait_until};

const SESSION: &str = "otlp";

/// Claude Code's tracing, sent to `endpoint` as OTLP/JSON: its beta tracing gives spans, and
/// with a model server other than api.anthropic.com it passes `TRACEPARENT` on only when told.
fn with_claude_tracing(invocation: &mut AgentInvocation, endpoint: &str) {
    for (key, value) in [
        ("CLAUDE_CODE_ENABLE_TELEMETRY", "1"),
        ("CLAUDE_CODE_ENHANCED_TELEMETRY_BETA", "1"),
        ("CLAUDE_CODE_PROPAGATE_TRACEPARENT", "1"),
        ("OTEL_TRACES_EXPORTER", "otlp"),
        ("OTEL_METRICS_EXPORTER", "none"),
        ("OTEL_LOGS_EXPORTER", "none"),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint),
    ] {
        invocation.env.push((key.into(), value.into()));
    }
}

fn service(span: &ReceivedSpan) -> String {
    attr_text(&span.resource, "service.name").unwrap_or_default()
}

/// The spans as a backend draws a trace: each under its parent, with its service; a span
/// whose parent did not arrive is drawn at the top, marked.
fn draw(spans: &[ReceivedSpan]) -> String {
    let by_id: HashMap<String, &ReceivedSpan> =
        spans.iter().map(|s| (hex(&s.span.span_id), s)).collect();
    let mut children: HashMap<String, Vec<&ReceivedSpan>> = HashMap::new();
    let mut tops = Vec::new();
    for span in spans {
        let parent = hex(&span.span.parent_span_id);
        if parent.is_empty() || !by_id.contains_key(&parent) {
            tops.push(span);
        } else {
            children.entry(parent).or_default().push(span);
        }
    }
    fn walk(
        out: &mut String,
        span: &ReceivedSpan,
        depth: usize,
        children: &HashMap<String, Vec<&ReceivedSpan>>,
    ) {
        let ms = span
            .span
            .end_time_unix_nano
            .saturating_sub(span.span.start_time_unix_nano)
            / 1_000_000;
        let what = attr_text(&span.span.attributes, "tether.command.text")
            .or_else(|| attr_text(&span.span.attributes, "tool_name"))
            .map(|t| format!("  {}", t.chars().take(60).collect::<String>()))
            .unwrap_or_default();
        out.push_str(&format!(
            "{}{} [{}] {ms} ms{what}\n",
            "  ".repeat(depth),
            span.span.name,
            service(span)
        ));
        let mut mine = children
            .get(&hex(&span.span.span_id))
            .cloned()
            .unwrap_or_default();
        mine.sort_by_key(|s| s.span.start_time_unix_nano);
        for child in mine {
            walk(out, child, depth + 1, children);
        }
    }
    tops.sort_by_key(|s| s.span.start_time_unix_nano);
    let mut out = String::new();
    for top in tops {
        let parent = hex(&top.span.parent_span_id);
        if !parent.is_empty() {
            out.push_str(&format!("(parent {parent} not received)\n"));
        }
        out.push_str(&format!("trace {}\n", hex(&top.span.trace_id)));
        walk(&mut out, top, 1, &children);
    }
    out
}

#[test]
fn claude_codes_bash_calls_nest_under_its_tool_spans() {
    let env = TestEnv::new("real_claude_otlp");
    let agent = Agent::Claude;
    let exe = agent.install();
    let dir = env.path("run");
    let work = dir.join("work");
    fs::create_dir_all(&work).unwrap();
    let receiver = Receiver::start();

    let asked = ["echo traced", "ls -d / ; exit 3"];
    let steps: Vec<Step> = (asked.iter().enumerate())
        .map(|(i, command)| Step::new(command, &format!("step {i}")))
        .collect();
    let server = ModelServer::start(&env, agent, &dir, &steps, "All done.");
    let mut invocation = AgentInvocation::prepare(
        agent,
        exe,
        &dir,
        &work,
        server.port,
        "Run the commands you are given.",
        Interaction::Print,
    );
    with_claude_tracing(&mut invocation, &receiver.endpoint());
    let mut running =
        RunningAgent::under_tether(&env, &invocation, SESSION, &dir, "Claude Code (traced)");
    let end = running.wait(&env, "Claude Code");
    assert!(
        server.answered_final(),
        "the agent ended ({end}) before the final answer"
    );
    // Claude Code sends its spans as it exits; tether's follow once it has.
    wait_until(&env, "Claude Code's tool spans", || {
        receiver
            .spans()
            .iter()
            .filter(|s| s.span.name == "claude_code.tool.execution")
            .count()
            >= asked.len()
    });
    let out = run_to_end(
        &env,
        env.tether(&[
            "export",
            "--follow",
            "--once",
            "--endpoint",
            &receiver.endpoint(),
        ]),
        "tether export --follow --once",
    );
    assert!(
        out.status.success(),
        "export --follow --once: {}",
        String::from_utf8_lossy(&out.stderr)
    );

    let spans = receiver.spans();
    let drawn = draw(&spans);
    eprintln!("{drawn}");
    let mut failures = Vec::new();
    let executions: HashMap<String, String> = (spans.iter())
        .filter(|s| s.span.name == "claude_code.tool.execution")
        .map(|s| (hex(&s.span.span_id), hex(&s.span.trace_id)))
        .collect();
    let ours: Vec<&ReceivedSpan> = spans.iter().filter(|s| service(s) == "tether").collect();
    let root = ours
        .iter()
        .find(|s| s.span.parent_span_id.is_empty())
        .copied();
    let Some(root) = root else {
        panic!("no root span of tether's among:\n{drawn}");
    };
    if !attr_text(&root.span.attributes, "process.executable.name")
        .is_some_and(|name| name.contains("claude"))
    {
        failures.push(format!("the root is not the agent: {:?}", root.span.name));
    }
    for command in asked {
        let found: Vec<&&ReceivedSpan> = (ours.iter())
            .filter(|s| {
                attr_text(&s.span.attributes, "tether.command.text")
                    .is_some_and(|t| t.contains(command))
            })
            .collect();
        let [span] = found.as_slice() else {
            failures.push(format!("`{command}`: {} spans, not one", found.len()));
            continue;
        };
        let parent = hex(&span.span.parent_span_id);
        match executions.get(&parent) {
            Some(trace) if *trace == hex(&span.span.trace_id) => {}
            _ => failures.push(format!(
                "`{command}`: parent {parent} is no claude_code.tool.execution span of its trace"
            )),
        }
    }
    let failed = (ours.iter())
        .find(|s| {
            attr_text(&s.span.attributes, "tether.command.text")
                .is_some_and(|t| t.contains("exit 3"))
        })
        .and_then(|s| attr_text(&s.span.attributes, "error.type"));
    if failed.as_deref() != Some("3") {
        failures.push(format!("the failing call's error.type: {failed:?}"));
    }
    // The agent's own set-up shells had no TRACEPARENT: under the agent, in the session's trace.
    for span in &ours {
        let parent = hex(&span.span.parent_span_id);
        if !parent.is_empty()
            && !executions.contains_key(&parent)
            && parent != hex(&root.span.span_id)
        {
            failures.push(format!(
                "{} hangs from an unknown parent {parent}",
                span.span.name
            ));
        }
    }
    if !receiver.duplicates().is_empty() || !receiver.errors().is_empty() {
        failures.push(format!(
            "doubled {:?}, errors {:?}",
            receiver.duplicates(),
            receiver.errors()
        ));
    }
    drop(server);
    env.finish();
    assert!(failures.is_empty(), "- {}\n{drawn}", failures.join("\n- "));
}
