//! A command's span and a session's: ids and parents, the attributes of the semantic
//! conventions for a process (`process.*`, `error.type`) beside tether's own (`tether.*`), the
//! status. The span events are [`super::events`]'.

use opentelemetry_proto::tonic::common::v1::{AnyValue, ArrayValue, KeyValue, any_value};
use opentelemetry_proto::tonic::trace::v1::span::{Event, Link, SpanKind};
use opentelemetry_proto::tonic::trace::v1::{Span, Status, status::StatusCode};

use super::SessionRoot;
use super::events::events;
use super::{nanos, span_id, trace_id, unhex};
use crate::config::naming::agent_argv;
use crate::export::follow::NeverRan;
use crate::export::session::CommandExport;
use crate::export::summary::{CommandSummary, state_name};
use crate::model::Status as RunStatus;
use crate::model::command::signal_label;
use crate::model::describe::{Tone, describe_in};
use crate::model::output::one_line;
use crate::protocol::EventKind;

/// The session's root span, when no agent command is the root: from its start to its last
/// moment, an error when a command failed; what its launcher never started are its events.
pub fn session(host: &str, root: &SessionRoot) -> Span {
    let SessionRoot {
        ref id,
        started_ms,
        ended_ms,
        commands,
        failed,
        ref never_ran,
    } = *root;
    let commands = commands + never_ran.len();
    let blocked = never_ran.iter().filter(|n| n.blocked).count();
    let status = match failed {
        0 => ok(),
        _ => error(format!(
            "{failed} of {commands} commands failed or were cut short"
        )),
    };
    Span {
        trace_id: trace_id(host, id).to_vec(),
        span_id: span_id(host, id, "").to_vec(),
        name: format!("session {}", one_line(id)),
        kind: SpanKind::Internal as i32,
        start_time_unix_nano: nanos(started_ms),
        end_time_unix_nano: nanos(ended_ms.max(started_ms)),
        attributes: vec![
            attribute("tether.session.id", string(id)),
            attribute("tether.commands", int(commands as i64)),
            attribute("tether.commands.failed", int(failed as i64)),
            attribute("tether.commands.blocked", int(blocked as i64)),
        ],
        events: not_started(never_ran),
        status: Some(status),
        ..Default::default()
    }
}

/// A `not_started` event on the root for each command its launcher never started.
pub fn not_started(never_ran: &[NeverRan]) -> Vec<Event> {
    (never_ran.iter())
        .map(|never| Event {
            time_unix_nano: nanos(never.at_ms),
            name: "not_started".into(),
            attributes: vec![
                attribute("tether.command.name", string(&never.name)),
                attribute("tether.description", string(&one_line(&never.words))),
            ],
            dropped_attributes_count: 0,
        })
        .collect()
}

/// A command's span. `root`: it is the agent of a `tether agent` session and stands for the
/// session (the root id, no parent). A command started under a `TRACEPARENT` is the caller's
/// span's child in the caller's trace, with a link back to the session's root.
pub fn command(host: &str, session: &str, command: &CommandExport, root: bool) -> Span {
    let start = command.started_ms().unwrap_or_default();
    let end = (command.ended_ms())
        .or_else(|| command.events.last().map(|e| e.ts_ms))
        .unwrap_or(start)
        .max(start);
    let root_id = span_id(host, session, "").to_vec();
    let session_trace = trace_id(host, session).to_vec();
    let caller = command.trace.as_ref();
    let (trace, id, parent, links) = match caller {
        // The agent's own caller, if it had one, is linked: the session's trace stays whole.
        _ if root => (
            session_trace,
            root_id,
            Vec::new(),
            caller.map_or_else(Vec::new, |t| {
                vec![link(unhex(&t.trace_id), unhex(&t.parent_span_id))]
            }),
        ),
        Some(t) => (
            unhex(&t.trace_id),
            unhex(&t.span_id),
            unhex(&t.parent_span_id),
            vec![link(session_trace, root_id)],
        ),
        None => (
            session_trace,
            span_id(host, session, &command.id.dir_name()).to_vec(),
            root_id,
            Vec::new(),
        ),
    };
    Span {
        trace_id: trace,
        span_id: id,
        parent_span_id: parent,
        trace_state: caller.and_then(|t| t.state.clone()).unwrap_or_default(),
        name: one_line(command.name()),
        kind: SpanKind::Internal as i32,
        start_time_unix_nano: nanos(start),
        end_time_unix_nano: nanos(end),
        attributes: attributes(session, command, end),
        events: events(command, end),
        links,
        status: status(command),
        ..Default::default()
    }
}

fn link(trace_id: Vec<u8>, span_id: Vec<u8>) -> Link {
    Link {
        trace_id,
        span_id,
        ..Default::default()
    }
}

fn attributes(session: &str, command: &CommandExport, end: u64) -> Vec<KeyValue> {
    let summary = CommandSummary::of(command);
    // The agent's, not the step `tether agent` runs it through, as its text is.
    let argv = agent_argv(&summary.argv).unwrap_or(&summary.argv);
    let executable = argv.first().map(|program| {
        let name = program.rsplit('/').next().unwrap_or(program);
        attribute("process.executable.name", string(name))
    });
    let args = AnyValue {
        value: Some(any_value::Value::ArrayValue(ArrayValue {
            values: argv.iter().map(|a| string(a)).collect(),
        })),
    };
    let mut attributes: Vec<KeyValue> = executable.into_iter().collect();
    attributes.extend([
        attribute("process.command_args", args),
        attribute("tether.session.id", string(session)),
        attribute("tether.command.number", int(command.id.number as i64)),
        attribute("tether.command.id", string(&command.id.dir_name())),
        attribute("tether.command.name", string(command.name())),
        attribute("tether.command.text", string(&summary.command)),
        attribute(
            "tether.command.state",
            string(state_name(command.state.status)),
        ),
        attribute("tether.ended", string(&ended(command))),
        attribute("tether.stdout.bytes", int(summary.stdout.written as i64)),
        attribute("tether.stdout.stored", int(summary.stdout.stored as i64)),
        attribute("tether.stderr.bytes", int(summary.stderr.written as i64)),
        attribute("tether.stderr.stored", int(summary.stderr.stored as i64)),
        attribute("tether.cut_short", boolean(command.cut_short)),
    ]);
    let optional = [
        (command.state.pid).map(|pid| attribute("process.pid", int(i64::from(pid)))),
        (summary.exit_code).map(|code| attribute("process.exit.code", int(i64::from(code)))),
        error_type(command).map(|why| attribute("error.type", string(&why))),
        (summary.cpu_ms).map(|ms| attribute("tether.cpu_ms", int(ms as i64))),
        (summary.peak_rss_bytes).map(|b| attribute("tether.peak_rss_bytes", int(b as i64))),
        (summary.signal_name.as_deref()).map(|s| attribute("tether.exit.signal", string(s))),
        stopped_by(command).map(|who| attribute("tether.stopped_by", string(&who))),
        (command.state.run > 1)
            .then(|| attribute("tether.command.run", int(i64::from(command.state.run)))),
        // The launcher's last word on the run (`gave up after 3 restarts`), as of the span's
        // end (a restart the session's end called off: `restarting in 2s (run 4)`).
        (command.state.plan.as_ref())
            .map(|plan| attribute("tether.launcher.plan", string(&one_line(&plan.label(end))))),
    ];
    attributes.extend(optional.into_iter().flatten());
    for badge in command.badges.list() {
        let key = badge
            .label()
            .split(':')
            .next()
            .unwrap_or_default()
            .to_string();
        let value = match badge {
            crate::model::Badge::Orphans(n) => int(i64::from(n)),
            crate::model::Badge::Kept(n) => int(n as i64),
            _ => boolean(true),
        };
        attributes.push(attribute(&format!("tether.badge.{key}"), value));
    }
    attributes
}

/// How the run ended, in the words every view uses (`model::ending`): `exit 0`, `killed
/// (SIGSEGV)`, `failed to start: ENOENT`, `exit 0, 2 left running`.
fn ended(command: &CommandExport) -> String {
    match command.state.status {
        RunStatus::LeftRunning {
            exit, processes, ..
        } => {
            let mut state = command.state.clone();
            state.status = RunStatus::Exited(exit);
            format!("{}, {processes} left running", state.state_words())
        }
        RunStatus::FailedToStart => match spawn_error(command) {
            Some(code) => format!("failed to start: {code}"),
            None => "failed to start".into(),
        },
        _ => command.state.state_words(),
    }
}

fn spawn_error(command: &CommandExport) -> Option<String> {
    command.events.iter().find_map(|e| match &e.kind {
        EventKind::SpawnError { code, .. } => Some(code.clone()),
        _ => None,
    })
}

/// `error.type` of a failed run: the exit code as text, the signal's name, the spawn error's
/// code; `lost` or `cut_short` when nothing says more.
fn error_type(command: &CommandExport) -> Option<String> {
    if !command.failed_or_cut_short() {
        return None;
    }
    Some(match command.state.status {
        RunStatus::Exited(status) | RunStatus::LeftRunning { exit: status, .. } => {
            match (status.code, status.signal) {
                (Some(code), _) if code != 0 => code.to_string(),
                (None, Some(sig)) => signal_label(sig),
                _ if command.cut_short => "cut_short".into(),
                _ => "ended".into(),
            }
        }
        RunStatus::FailedToStart => spawn_error(command).unwrap_or_else(|| "failed".into()),
        RunStatus::Lost => "lost".into(),
        _ => "cut_short".into(),
    })
}

/// Who stopped the run, when something did: the origin of its first stop or signal (or of a
/// second stop, which took over a restart's stop), and the program that sent it
/// (`operator: tether stop (pid 7698)`).
fn stopped_by(command: &CommandExport) -> Option<String> {
    let first = command.events.iter().find_map(|e| match &e.kind {
        EventKind::StopStarted { origin, .. } | EventKind::SignalSent { origin, .. } => {
            Some(*origin)
        }
        _ => None,
    });
    let taken_over = (command.events.iter())
        .filter_map(|e| match &e.kind {
            EventKind::StopStarted { origin, .. } => Some(*origin),
            _ => None,
        })
        .nth(1);
    let origin = taken_over.or(first)?;
    let word = serde_json::to_value(origin)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default();
    let client = command.events.iter().find_map(|e| match &e.kind {
        EventKind::SignalSent {
            origin: sent,
            client: Some(client),
            ..
        } if *sent == origin => Some(client),
        _ => None,
    });
    Some(match client {
        Some(peer) => match &peer.program {
            Some(program) => format!("{word}: {} (pid {})", one_line(program), peer.pid),
            None => format!("{word}: pid {}", peer.pid),
        },
        None => word,
    })
}

/// OK for a run that succeeded, an error with what went wrong otherwise; none while it runs.
fn status(command: &CommandExport) -> Option<Status> {
    if command.state.status.is_active() && !command.cut_short {
        return None;
    }
    if !command.failed_or_cut_short() {
        return Some(ok());
    }
    let mut why = vec![command.state.state_words()];
    if let Some(error) = command.events.iter().rev().find_map(|e| {
        let (text, tone) = describe_in(&command.state, &e.kind);
        (tone == Tone::Error && !matches!(e.kind, EventKind::Exit { .. })).then_some(text)
    }) {
        why.push(error);
    }
    if command.cut_short {
        why.push("journal cut short".into());
    }
    Some(error(one_line(&why.join("; "))))
}

fn ok() -> Status {
    Status {
        code: StatusCode::Ok as i32,
        message: String::new(),
    }
}

fn error(message: String) -> Status {
    Status {
        code: StatusCode::Error as i32,
        message,
    }
}

pub(super) fn attribute(key: &str, value: AnyValue) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(value),
        ..Default::default()
    }
}

pub(super) fn string(text: &str) -> AnyValue {
    AnyValue {
        value: Some(any_value::Value::StringValue(text.into())),
    }
}

pub(super) fn int(n: i64) -> AnyValue {
    AnyValue {
        value: Some(any_value::Value::IntValue(n)),
    }
}

pub(super) fn boolean(b: bool) -> AnyValue {
    AnyValue {
        value: Some(any_value::Value::BoolValue(b)),
    }
}
