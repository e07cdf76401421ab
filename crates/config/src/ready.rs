//! A command's readiness probe in `tether.toml`: one of `ready_log`, `ready_http`,
//! `ready_tcp`, `ready_exec`, with `ready_timeout` and `ready_interval`. Each value is
//! checked as the broker will use it, so that a bad one is an error at its value.

use std::time::Duration;

use toml::{Spanned, Value};

use super::ConfigError;
use super::document::Source;
use tether_core::readiness::{log_pattern, target};
use tether_protocol::protocol::{DEFAULT_READY_INTERVAL, Readiness, ReadyProbe};

/// The probe's keys as written in one `[[command]]` table.
pub(super) struct ReadyKeys {
    pub(super) log: Option<Spanned<String>>,
    pub(super) http: Option<Spanned<String>>,
    pub(super) tcp: Option<Spanned<Value>>,
    pub(super) exec: Option<Spanned<String>>,
    pub(super) timeout: Option<Duration>,
    pub(super) interval: Option<Duration>,
}

impl ReadyKeys {
    /// The command's readiness, or the error at the value that is wrong. `at`: where the
    /// table starts.
    pub(super) fn readiness(
        self,
        source: &Source<'_>,
        at: usize,
    ) -> Result<Option<Readiness>, ConfigError> {
        let fail =
            |at: usize, key: &str, why: String| Err(source.error(at, key, format!("{key}: {why}")));
        let mut given: Vec<(&str, usize, ReadyProbe)> = Vec::new();
        if let Some(pattern) = self.log {
            let place = pattern.span().start;
            if let Err(why) = log_pattern(pattern.get_ref()) {
                return fail(place, "ready_log", why);
            }
            let pattern = pattern.into_inner();
            given.push(("ready_log", place, ReadyProbe::Log { pattern }));
        }
        if let Some(url) = self.http {
            let place = url.span().start;
            if let Err(why) = target::http_target(url.get_ref()) {
                return fail(place, "ready_http", why.to_string());
            }
            let url = url.into_inner();
            given.push(("ready_http", place, ReadyProbe::Http { url }));
        }
        if let Some(value) = self.tcp {
            let place = value.span().start;
            match tcp_probe(value.get_ref()) {
                Ok(probe) => given.push(("ready_tcp", place, probe)),
                Err(why) => return fail(place, "ready_tcp", why),
            }
        }
        if let Some(shell) = self.exec {
            let place = shell.span().start;
            if let Err(why) = exec_probe(shell.get_ref()) {
                return fail(place, "ready_exec", why);
            }
            let shell = shell.into_inner();
            given.push(("ready_exec", place, ReadyProbe::Exec { shell }));
        }
        // The second as written is the one in error.
        given.sort_by_key(|(_, place, _)| *place);
        let mut given = given.into_iter();
        let Some((first, _, probe)) = given.next() else {
            if self.timeout.is_some() || self.interval.is_some() {
                let key = if self.timeout.is_some() {
                    "ready_timeout"
                } else {
                    "ready_interval"
                };
                let why = "there is no readiness probe to time; add one of ready_log, ready_http, ready_tcp or ready_exec";
                return fail(at, key, why.into());
            }
            return Ok(None);
        };
        if let Some((second, place, _)) = given.next() {
            let why = format!("a command has one readiness probe: keep `{first}` or `{second}`");
            return fail(place, second, why);
        }
        Ok(Some(Readiness {
            probe,
            interval: self.interval.unwrap_or(DEFAULT_READY_INTERVAL),
            timeout: self.timeout,
        }))
    }
}

/// `ready_tcp = 8080` (on 127.0.0.1) or `ready_tcp = "host:port"`.
fn tcp_probe(value: &Value) -> Result<ReadyProbe, String> {
    let (host, port) = match value {
        Value::Integer(port) => {
            let port = u16::try_from(*port)
                .ok()
                .filter(|p| *p > 0)
                .ok_or_else(|| format!("`{port}` is not a port (1 to 65535)"))?;
            ("127.0.0.1".to_string(), port)
        }
        Value::String(text) => target::tcp_target(text).map_err(|e| e.to_string())?,
        other => {
            return Err(format!(
                "expected a port like 8080 or \"host:port\", found {}",
                other.type_str()
            ));
        }
    };
    Ok(ReadyProbe::Tcp { host, port })
}

/// A `ready_exec` (`--ready-exec`): a shell command, not blank (`sh -c ''` exits 0 at once).
pub fn exec_probe(shell: &str) -> Result<(), String> {
    if shell.trim().is_empty() {
        return Err("is empty; give a shell command that exits 0 once the command is ready, like \"pg_isready\"".into());
    }
    if shell.contains('\0') {
        return Err("must not contain a NUL character".into());
    }
    Ok(())
}
