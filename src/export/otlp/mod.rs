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
//! `TRACEPARENT`; a link leads from it to the session's root span. A command the launcher
//! never started has no span: it is a `not_started` event of the root span (the agent's, in
//! a `tether agent` session), with its name and the launcher's last word; the session's root
//! counts it among its commands, and apart as blocked (`tether.commands.blocked`) as `tether
//! sessions` does; a run the launcher had a last word on says it (`tether.launcher.plan`:
//! `gave up after 3 restarts`, or a restart the session's end called off). The live
//! follower reads command journals only and sends neither.

mod events;
mod logs;
mod resource;
mod span;
pub mod transport;

use std::time::Duration;

use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::InstrumentationScope;
use opentelemetry_proto::tonic::logs::v1::{LogRecord, ResourceLogs, ScopeLogs};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};

pub use super::follow::scan::is_agent;
pub use super::follow::{Item, Sent, SessionRoot};
use super::session::SessionExport;
use crate::model::output::one_line;
pub use logs::LogBudget;
pub use resource::resource;
pub use transport::{Body, Target, TargetFlags, send};

/// Turns items into spans and log records, and batches of them into requests, all under one
/// resource (this machine, this user, `service.name`).
pub struct Encoder {
    /// The machine the sessions ran on: in every id, so that two machines' sessions of the
    /// same name (a default id is a second and a pid) are two traces.
    host: String,
    resource: Resource,
    /// How much of each command's output goes out as log records; none: no records.
    logs: Option<LogBudget>,
}

impl Encoder {
    pub fn new(host: &str, resource: Resource, logs: Option<LogBudget>) -> Encoder {
        Encoder {
            host: host.to_string(),
            resource,
            logs,
        }
    }

    pub fn span(&self, item: &Item) -> Span {
        match item {
            Item::Command {
                session,
                command,
                root,
            } => span::command(&self.host, session, command, *root),
            Item::Session(root) => span::session(&self.host, root),
        }
    }

    /// The log records of a command's output under its `span`, when logs are on.
    pub fn records(&self, item: &Item, span: &Span) -> Vec<LogRecord> {
        match (item, &self.logs) {
            (Item::Command { command, .. }, Some(budget)) => logs::records(command, span, *budget),
            _ => Vec::new(),
        }
    }

    /// This machine's encoder, for the follower: the resource names this host and user
    /// (and what `env` says: `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`).
    pub fn local(
        env: impl Fn(&str) -> Option<String>,
        logs: Option<LogBudget>,
    ) -> Result<Encoder, String> {
        let host = local_host();
        let uid = nix::unistd::getuid();
        let user = (nix::unistd::User::from_uid(uid).ok().flatten())
            .map_or_else(|| uid.to_string(), |u| u.name);
        Ok(Encoder::new(&host, resource(&host, &user, env)?, logs))
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
    let here = local_host();
    // The ids name the machine the session ran on, as the follower there names it.
    let host = info.map_or(here.as_str(), |i| i.host.as_str());
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
    let encoder = Encoder::new(host, resource, None);
    let agent = session.commands.iter().position(|c| is_agent(&c.dir));
    let never_ran: Vec<_> = session.not_started.iter().map(|n| n.never_ran()).collect();
    let mut spans = Vec::with_capacity(session.commands.len() + 1);
    if agent.is_none() {
        let failed = session
            .commands
            .iter()
            .filter(|c| c.failed_or_cut_short())
            .count();
        spans.push(span::session(
            host,
            &SessionRoot {
                id: session.id.clone(),
                started_ms: session.started_ms,
                ended_ms: session.ended_ms,
                commands: session.commands.len(),
                failed,
                never_ran: never_ran.clone(),
            },
        ));
    }
    for (i, command) in session.commands.iter().enumerate() {
        let mut span = span::command(host, &session.id, command, agent == Some(i));
        // A run still going has no end yet; the file shows it up to the session's last moment.
        if command.ended_ms().is_none() {
            span.end_time_unix_nano = nanos(session.ended_ms).max(span.start_time_unix_nano);
        }
        spans.push(span);
    }
    // The agent's span stands for the session: what the launcher never started is its too.
    if let Some(root) = agent.and_then(|i| spans.get_mut(i)) {
        root.events.extend(span::not_started(&never_ran));
    }
    encoder.traces(spans)
}

/// The follower's [`super::follow::Sink`]: a batch's spans, which alone decide whether it
/// was taken (the cursor counts spans), then its commands' log records in requests of at
/// most [`MAX_LOGS_REQUEST`] bytes, built one command at a time. A log request is tried a
/// few times; what the endpoint will not take is dropped and said on stderr, never sent
/// twice, and never holds back a span.
pub struct OtlpSink {
    encoder: Encoder,
    target: Target,
}

/// The most bytes of log records one request carries (a Collector takes 20 MiB by default).
pub const MAX_LOGS_REQUEST: usize = 4 << 20;

/// Tries of one request of log records, and the longest wait between two.
const LOGS_TRIES: u32 = 3;
const LOGS_MAX_WAIT: Duration = Duration::from_secs(5);

impl OtlpSink {
    pub fn new(encoder: Encoder, target: Target) -> OtlpSink {
        OtlpSink { encoder, target }
    }

    /// Sends one request of records, again while the endpoint asks for it, at most
    /// [`LOGS_TRIES`] times; says on stderr what it gave up.
    fn send_logs(&self, records: Vec<LogRecord>) {
        let count = records.len();
        let request = self.encoder.logs(records);
        let mut why = String::new();
        for attempt in 0..LOGS_TRIES {
            match send(&self.target, Body::Logs(request.clone())) {
                Sent::Accepted { .. } => return,
                Sent::Refused { why: refused } => {
                    why = refused;
                    break;
                }
                Sent::Retry { after, why: retry } => {
                    why = retry;
                    if attempt + 1 < LOGS_TRIES {
                        let wait = after.unwrap_or(Duration::from_millis(500) * 2u32.pow(attempt));
                        std::thread::sleep(wait.min(LOGS_MAX_WAIT));
                    }
                }
            }
        }
        eprintln!(
            "tether: {count} log records dropped, their spans sent: {}",
            one_line(&why)
        );
    }
}

impl super::follow::Sink for OtlpSink {
    fn send(&mut self, items: &[Item]) -> Sent {
        let spans: Vec<Span> = items.iter().map(|item| self.encoder.span(item)).collect();
        let sent = send(
            &self.target,
            Body::Traces(self.encoder.traces(spans.clone())),
        );
        if !matches!(sent, Sent::Accepted { .. }) || self.encoder.logs.is_none() {
            return sent;
        }
        let (mut chunk, mut bytes) = (Vec::new(), 0);
        for (item, span) in items.iter().zip(&spans) {
            for record in self.encoder.records(item, span) {
                bytes += prost::Message::encoded_len(&record);
                chunk.push(record);
                if bytes >= MAX_LOGS_REQUEST {
                    self.send_logs(std::mem::take(&mut chunk));
                    bytes = 0;
                }
            }
        }
        if !chunk.is_empty() {
            self.send_logs(chunk);
        }
        sent
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

/// This machine's name, as sessions journal it (`session.json`'s `host`).
pub fn local_host() -> String {
    nix::unistd::gethostname()
        .map(|h| h.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The trace id of session `session` of machine `host`, 16 bytes, never all zero (an invalid
/// trace id).
pub fn trace_id(host: &str, session: &str) -> [u8; 16] {
    let high = fnv1a(
        FNV_BASIS,
        format!("tether trace {host}/{session}").as_bytes(),
    );
    let low = fnv1a(high, session.as_bytes()) | 1;
    let mut id = [0; 16];
    id[..8].copy_from_slice(&high.to_be_bytes());
    id[8..].copy_from_slice(&low.to_be_bytes());
    id
}

/// 8 bytes, never all zero, for the session's root (`command` empty) or a command's span
/// (`command` its directory's name).
pub fn span_id(host: &str, session: &str, command: &str) -> [u8; 8] {
    let id = fnv1a(
        FNV_BASIS,
        format!("tether span {host}/{session}/{command}").as_bytes(),
    ) | 1;
    id.to_be_bytes()
}

/// Lowercase hex, as OTLP/JSON and `TRACEPARENT` write ids.
pub fn hex(bytes: &[u8]) -> String {
    hex::encode(bytes)
}

/// The bytes of an id written in hex (a validated `TraceContext`'s); empty if it is not hex.
fn unhex(text: &str) -> Vec<u8> {
    hex::decode(text).unwrap_or_default()
}

fn nanos(ms: u64) -> u64 {
    ms.saturating_mul(1_000_000)
}

#[cfg(test)]
mod tests;
