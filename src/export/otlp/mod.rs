//! OTLP: sessions as OpenTelemetry traces (and, when asked, their output as log records), in
//! the official protobuf messages (`opentelemetry-proto`), for `tether export --format otlp`
//! (one OTLP/JSON request, the serde mapping of the same messages) and the live follower
//! (`--follow`, which sends them over HTTP with [`transport::send`]).
//!
//! One trace per session: its id is derived from the session id, so exporting a session
//! twice, or resending a span, gives the same ids. A root span covers the session; in a
//! `tether agent` session the agent's command is that root (its span id is the root id), so
//! the commands it ran are its children. Each command's run is a span under the root, with
//! its lifecycle events (signals, timeouts, exit, reaped orphans, ...) as span events. A
//! command whose caller passed it a W3C `TRACEPARENT` is instead a span of the caller's trace,
//! the child of the caller's span, with the span id the command was given in its own
//! `TRACEPARENT`; a link leads from it to the session's root span.

mod events;
mod logs;
mod resource;
mod span;
pub mod transport;

use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::InstrumentationScope;
use opentelemetry_proto::tonic::logs::v1::{LogRecord, ResourceLogs, ScopeLogs};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};

pub use super::follow::scan::is_agent;
pub use super::follow::{Item, Sent, SessionRoot};
use super::session::SessionExport;
pub use logs::LogBudget;
pub use resource::{key_values, resource};
pub use transport::{Body, Target, TargetFlags, send};

/// Turns items into spans and log records, and batches of them into requests, all under one
/// resource (this machine, this user, `service.name`).
pub struct Encoder {
    resource: Resource,
    /// How much of each command's output goes out as log records; none: no records.
    logs: Option<LogBudget>,
}

impl Encoder {
    pub fn new(resource: Resource, logs: Option<LogBudget>) -> Encoder {
        Encoder { resource, logs }
    }

    /// The item's span, and its output's log records when logs are on. Reads the command's
    /// stream logs (bounded by the budget), nothing else.
    pub fn item(&self, item: &Item) -> (Span, Vec<LogRecord>) {
        match item {
            Item::Command {
                session,
                command,
                root,
            } => {
                let span = span::command(session, command, *root);
                let records = match &self.logs {
                    Some(budget) => logs::records(command, &span, *budget),
                    None => Vec::new(),
                };
                (span, records)
            }
            Item::Session(root) => (span::session(root), Vec::new()),
        }
    }

    /// This machine's encoder, for the follower: the resource names this host and user
    /// (and what `env` says: `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`).
    pub fn local(
        env: impl Fn(&str) -> Option<String>,
        logs: Option<LogBudget>,
    ) -> Result<Encoder, String> {
        let host = nix::unistd::gethostname()
            .map(|h| h.to_string_lossy().into_owned())
            .unwrap_or_default();
        let uid = nix::unistd::getuid();
        let user = (nix::unistd::User::from_uid(uid).ok().flatten())
            .map_or_else(|| uid.to_string(), |u| u.name);
        Ok(Encoder::new(resource(&host, &user, env)?, logs))
    }

    /// A batch's requests: the traces, and the logs when logs are on and there are any.
    pub fn batch(
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

    pub fn traces(&self, spans: Vec<Span>) -> ExportTraceServiceRequest {
        ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                resource: Some(self.resource.clone()),
                scope_spans: vec![ScopeSpans {
                    scope: Some(scope()),
                    spans,
                    schema_url: String::new(),
                }],
                schema_url: String::new(),
            }],
        }
    }

    pub fn logs(&self, records: Vec<LogRecord>) -> ExportLogsServiceRequest {
        ExportLogsServiceRequest {
            resource_logs: vec![ResourceLogs {
                resource: Some(self.resource.clone()),
                scope_logs: vec![ScopeLogs {
                    scope: Some(scope()),
                    log_records: records,
                    schema_url: String::new(),
                }],
                schema_url: String::new(),
            }],
        }
    }
}

/// The instrumentation scope: tether itself.
fn scope() -> InstrumentationScope {
    InstrumentationScope {
        name: "tether".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        ..Default::default()
    }
}

/// `--format otlp`: the whole session as one request, its resource the session's host and
/// user (and, since the file holds one session, the session's id and directory).
pub fn request(session: &SessionExport) -> ExportTraceServiceRequest {
    let info = session.info.as_ref();
    let host = info.map_or("", |i| i.host.as_str());
    let user = info.map_or("", |i| i.user.as_str());
    // An unusable OTEL_RESOURCE_ATTRIBUTES is the follower's to refuse; a file export keeps
    // to the defaults rather than fail over it.
    let env = |name: &str| std::env::var(name).ok();
    let mut resource = resource(host, user, env)
        .or_else(|_| resource(host, user, |_| None))
        .unwrap_or_default();
    resource.attributes.extend([
        span::attribute("tether.session.id", span::string(&session.id)),
        span::attribute(
            "tether.session.dir",
            span::string(&session.dir.to_string_lossy()),
        ),
    ]);
    let encoder = Encoder::new(resource, None);
    let agent = session.commands.iter().position(|c| is_agent(&c.dir));
    let mut spans = Vec::with_capacity(session.commands.len() + 1);
    if agent.is_none() {
        let failed = session
            .commands
            .iter()
            .filter(|c| c.failed() || c.cut_short)
            .count();
        spans.push(span::session(&SessionRoot {
            id: session.id.clone(),
            started_ms: session.started_ms,
            ended_ms: session.ended_ms,
            commands: session.commands.len(),
            failed,
        }));
    }
    for (i, command) in session.commands.iter().enumerate() {
        let mut span = span::command(&session.id, command, agent == Some(i));
        // A run still going has no end yet; the file shows it up to the session's last moment.
        if command.ended_ms().is_none() {
            span.end_time_unix_nano = nanos(session.ended_ms).max(span.start_time_unix_nano);
        }
        spans.push(span);
    }
    encoder.traces(spans)
}

/// The follower's [`super::follow::Sink`]: a batch encoded, its log records sent, then its
/// spans; the batch is taken once both are. Records go first so that a failure between the
/// two repeats records, never spans, when the batch is sent again.
pub struct OtlpSink {
    encoder: Encoder,
    target: Target,
}

impl OtlpSink {
    pub fn new(encoder: Encoder, target: Target) -> OtlpSink {
        OtlpSink { encoder, target }
    }
}

impl super::follow::Sink for OtlpSink {
    fn send(&mut self, items: &[Item]) -> Sent {
        let (traces, logs) = self.encoder.batch(items);
        let records = match logs.map(|logs| send(&self.target, Body::Logs(logs))) {
            None => None,
            Some(Sent::Accepted { rejected, message }) => Some((rejected, message)),
            Some(failed) => return failed,
        };
        match (send(&self.target, Body::Traces(traces)), records) {
            (Sent::Accepted { rejected, message }, Some((records_rejected, records_message))) => {
                Sent::Accepted {
                    rejected: rejected + records_rejected,
                    message: message.or(records_message),
                }
            }
            (spans, _) => spans,
        }
    }
}

/// FNV-1a, 64 bits, from a given basis: enough to spread ids, and stable across versions
/// and machines (unlike `std`'s hasher).
fn fnv1a(basis: u64, bytes: &[u8]) -> u64 {
    bytes.iter().fold(basis, |hash, &b| {
        (hash ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

const FNV_BASIS: u64 = 0xcbf2_9ce4_8422_2325;

/// The session's trace id, 16 bytes, never all zero (an invalid trace id).
pub fn trace_id(session: &str) -> [u8; 16] {
    let high = fnv1a(FNV_BASIS, format!("tether trace {session}").as_bytes());
    let low = fnv1a(high, session.as_bytes()) | 1;
    let mut id = [0; 16];
    id[..8].copy_from_slice(&high.to_be_bytes());
    id[8..].copy_from_slice(&low.to_be_bytes());
    id
}

/// 8 bytes, never all zero, for the session's root (`command` empty) or a command's span
/// (`command` its directory's name).
pub fn span_id(session: &str, command: &str) -> [u8; 8] {
    let id = fnv1a(
        FNV_BASIS,
        format!("tether span {session}/{command}").as_bytes(),
    ) | 1;
    id.to_be_bytes()
}

/// Lowercase hex, as OTLP/JSON and `TRACEPARENT` write ids.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The bytes of an id written in hex (a validated `TraceContext`'s); empty if it is not hex.
fn unhex(text: &str) -> Vec<u8> {
    let digits: Option<Vec<u8>> = text
        .as_bytes()
        .chunks(2)
        .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok())
        .collect();
    digits
        .filter(|_| text.len().is_multiple_of(2))
        .unwrap_or_default()
}

/// Milliseconds since the epoch as nanoseconds.
fn nanos(ms: u64) -> u64 {
    ms.saturating_mul(1_000_000)
}

#[cfg(test)]
mod tests;
