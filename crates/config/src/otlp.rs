//! The user config's `[export.otlp]` table: where and how `tether export --follow` sends
//! OTLP, when no flag or `OTEL_EXPORTER_OTLP_*` variable says otherwise (docs/exports.md).
//!
//! ```toml
//! [export.otlp]
//! endpoint = "http://collector:4318"   # a base URL: traces go to …/v1/traces, logs to …/v1/logs
//! protocol = "http/protobuf"           # or "http/json"
//! headers = { authorization = "Bearer …" }
//! timeout = "10s"                      # one request, connecting included
//! logs = false                         # send the commands' output as log records
//! log_bytes = "64K"                    # per command and stream: the head and the tail
//! max_backoff = "30s"                  # the longest wait between retries
//! session_quiet = "60s"                # a session without an agent is done this long after its last command
//! ```
//!
//! Read in every build, so that one config serves a build without the cargo feature `otlp`.
//! Errors name the file, line, column and key, as the rest of the user config's do.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Deserializer};
use toml::Value;

use super::values::{amount, expected, flag, positive, read};

/// How much of each stream's log goes out as log records when nothing says: 64 KiB, the
/// first and the last 32 KiB.
pub const DEFAULT_LOG_BYTES: u64 = 64 << 10;
/// How long one request may take, connecting included (`OTEL_EXPORTER_OTLP_TIMEOUT`'s
/// default).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
pub const DEFAULT_MAX_BACKOFF: Duration = Duration::from_secs(30);
pub const DEFAULT_SESSION_QUIET: Duration = Duration::from_secs(60);

/// What `[export.otlp]` sets; nothing without it. Its keys are in the order an unknown key's
/// message lists them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields, expecting = "a table ([export.otlp])")]
pub struct OtlpSettings {
    #[serde(deserialize_with = "endpoint")]
    pub endpoint: Option<String>,
    #[serde(deserialize_with = "protocol")]
    pub protocol: Option<Protocol>,
    /// Sent with every request, before the variables' and the flags' (which win on a key).
    #[serde(deserialize_with = "headers")]
    pub headers: Vec<(String, String)>,
    #[serde(deserialize_with = "positive")]
    pub timeout: Option<Duration>,
    #[serde(deserialize_with = "flag")]
    pub logs: Option<bool>,
    #[serde(deserialize_with = "amount")]
    pub log_bytes: Option<u64>,
    #[serde(deserialize_with = "positive")]
    pub max_backoff: Option<Duration>,
    #[serde(deserialize_with = "amount")]
    pub session_quiet: Option<Duration>,
}

impl OtlpSettings {
    pub fn log_bytes(&self) -> u64 {
        self.log_bytes.unwrap_or(DEFAULT_LOG_BYTES)
    }

    pub fn max_backoff(&self) -> Duration {
        self.max_backoff.unwrap_or(DEFAULT_MAX_BACKOFF)
    }

    pub fn session_quiet(&self) -> Duration {
        self.session_quiet.unwrap_or(DEFAULT_SESSION_QUIET)
    }
}

/// The `[export]` table: only `otlp` so far.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields, expecting = "a table ([export.otlp])")]
pub struct ExportSettings {
    pub otlp: OtlpSettings,
}

/// OTLP's transports over HTTP. gRPC is not one of them: it needs HTTP/2 and a gRPC stack
/// for what a collector's HTTP port (4318) takes as well.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Protocol {
    #[default]
    HttpProtobuf,
    HttpJson,
}

impl Protocol {
    /// The word `OTEL_EXPORTER_OTLP_PROTOCOL` takes; `grpc` is refused with what to use.
    pub fn parse(word: &str) -> Result<Protocol, String> {
        match word.trim() {
            "http/protobuf" => Ok(Protocol::HttpProtobuf),
            "http/json" => Ok(Protocol::HttpJson),
            "grpc" => Err("OTLP over gRPC is not supported: use http/protobuf, \
                 on the collector's OTLP/HTTP port (4318)"
                .into()),
            other => Err(format!(
                "expected \"http/protobuf\" or \"http/json\", found \"{}\"",
                other.escape_debug()
            )),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Protocol::HttpProtobuf => "http/protobuf",
            Protocol::HttpJson => "http/json",
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            Protocol::HttpProtobuf => "application/x-protobuf",
            Protocol::HttpJson => "application/json",
        }
    }
}

fn endpoint<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    read(d, |value| match value.as_str() {
        Some(url) => check_url(url).map(|()| url.to_string()),
        None => Err(expected("a URL like \"http://collector:4318\"", &value)),
    })
}

/// An endpoint is an `http://` or `https://` URL: anything else is a mistake to say now,
/// not at the first request.
pub fn check_url(url: &str) -> Result<(), String> {
    let rest = (url.strip_prefix("http://")).or_else(|| url.strip_prefix("https://"));
    match rest {
        Some(host) if !host.is_empty() && !host.starts_with('/') => Ok(()),
        _ => Err(format!(
            "\"{}\" is not an http:// or https:// URL, like \"http://collector:4318\"",
            url.escape_debug()
        )),
    }
}

fn protocol<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Protocol>, D::Error> {
    read(d, |value| match value.as_str() {
        Some(word) => Protocol::parse(word),
        None => Err(expected("\"http/protobuf\" or \"http/json\"", &value)),
    })
}

/// `headers = { name = "value" }`: every value a string.
fn headers<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<(String, String)>, D::Error> {
    let table = read(d, |value| {
        let Value::Table(table) = value else {
            return Err(expected(
                "a table like { authorization = \"Bearer …\" }",
                &value,
            ));
        };
        let pairs = table.into_iter().map(|(name, value)| match value {
            Value::String(text) => Ok((name, text)),
            other => Err(format!("{name}: {}", expected("a string", &other))),
        });
        pairs.collect::<Result<BTreeMap<_, _>, _>>()
    })?;
    Ok(table.unwrap_or_default().into_iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::user::parse_user;

    #[test]
    fn the_table_reads_every_key() {
        let text = "[export.otlp]\nendpoint = \"http://c:4318\"\nprotocol = \"http/json\"\n\
                    headers = { authorization = \"Bearer x\", b = \"2\" }\ntimeout = \"2s\"\n\
                    logs = true\nlog_bytes = \"1K\"\nmax_backoff = \"5s\"\nsession_quiet = 90\n";
        let otlp = parse_user(text, "c.toml").unwrap().export.otlp;
        assert_eq!(otlp.endpoint.as_deref(), Some("http://c:4318"));
        assert_eq!(otlp.protocol, Some(Protocol::HttpJson));
        assert_eq!(
            otlp.headers,
            [
                ("authorization".to_string(), "Bearer x".to_string()),
                ("b".into(), "2".into())
            ]
        );
        assert_eq!(otlp.timeout, Some(Duration::from_secs(2)));
        assert_eq!(otlp.logs, Some(true));
        assert_eq!(otlp.log_bytes(), 1024);
        assert_eq!(otlp.max_backoff(), Duration::from_secs(5));
        assert_eq!(otlp.session_quiet(), Duration::from_secs(90));
        let none = parse_user("", "c.toml").unwrap().export.otlp;
        assert_eq!(none, OtlpSettings::default());
        assert_eq!(none.log_bytes(), DEFAULT_LOG_BYTES);
    }

    #[test]
    fn errors_name_the_line_and_the_key() {
        for (text, line, says) in [
            ("[export.otlp]\nendpoint = \"collector\"\n", 2, "http://"),
            ("[export.otlp]\nprotocol = \"grpc\"\n", 2, "port (4318)"),
            (
                "[export.otlp]\nheaders = { a = 1 }\n",
                2,
                "a: expected a string",
            ),
            (
                "[export.otlp]\ntimeout = \"soon\"\n",
                2,
                "export.otlp.timeout",
            ),
            (
                "[export.otlp]\n\nendpiont = \"x\"\n",
                3,
                "endpoint, protocol, headers, timeout, logs, log_bytes, max_backoff, session_quiet",
            ),
            (
                "[export.otlp]\nmax_backoff = \"0s\"\n",
                2,
                "must be above 0",
            ),
            ("[export.otlp]\ntimeout = 0\n", 2, "must be above 0"),
            ("[export.otlq]\n", 1, "expected one of otlp"),
        ] {
            let err = parse_user(text, "c.toml").unwrap_err().to_string();
            assert!(
                err.starts_with(&format!("c.toml:{line}:")),
                "{text:?}: {err}"
            );
            assert!(err.contains(says), "{text:?}: {err}");
        }
    }
}
