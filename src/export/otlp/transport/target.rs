//! Where requests go: the flags, then the `OTEL_EXPORTER_OTLP_*` variables, then
//! `[export.otlp]`, as the OpenTelemetry specification orders them (a signal's own variable
//! over the general one).

use std::time::Duration;

use super::super::resource::key_values;
use crate::config::otlp::{DEFAULT_TIMEOUT, OtlpSettings, Protocol, check_url};
use crate::model::output::one_line;

/// What the command line says about the endpoint; each is over the variables and the config.
#[derive(Debug, Clone, Default)]
pub struct TargetFlags {
    /// A base URL: `…/v1/traces` and `…/v1/logs` are added.
    pub endpoint: Option<String>,
    pub protocol: Option<Protocol>,
    pub headers: Vec<(String, String)>,
    /// `--logs`: the logs need an endpoint too.
    pub logs: bool,
}

/// Where and how requests go.
#[derive(Clone)]
pub struct Target {
    /// The traces URL, in full (`http://collector:4318/v1/traces`).
    pub traces: String,
    /// The logs URL in full; empty when nothing names one and logs are off.
    pub logs: String,
    pub protocol: Protocol,
    pub headers: Vec<(String, String)>,
    pub logs_headers: Vec<(String, String)>,
    /// The bound on one request, connecting included.
    pub timeout: Duration,
    /// Keeps its connections between requests.
    pub(super) agent: ureq::Agent,
}

/// Header names only: their values are credentials.
impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names = |headers: &[(String, String)]| -> Vec<String> {
            headers.iter().map(|(name, _)| name.clone()).collect()
        };
        f.debug_struct("Target")
            .field("traces", &self.traces)
            .field("logs", &self.logs)
            .field("protocol", &self.protocol)
            .field("headers", &names(&self.headers))
            .field("logs_headers", &names(&self.logs_headers))
            .field("timeout", &self.timeout)
            .finish()
    }
}

pub(super) const NO_ENDPOINT: &str =
    "no endpoint: give --endpoint URL, set OTEL_EXPORTER_OTLP_ENDPOINT or [export.otlp] endpoint";

impl Target {
    /// The target the flags, the variables (`env` looks one up; an empty one is unset) and
    /// the config give, or what is wrong, in words for the command line.
    pub fn resolve(
        flags: &TargetFlags,
        env: impl Fn(&str) -> Option<String>,
        config: &OtlpSettings,
    ) -> Result<Target, String> {
        let var = |name: &str| env(name).filter(|v| !v.trim().is_empty());
        let endpoint = |signal: &str, path: &str| -> Result<Option<String>, String> {
            let specific = format!("OTEL_EXPORTER_OTLP_{signal}_ENDPOINT");
            let found = match (&flags.endpoint, var(&specific)) {
                (Some(base), _) => Some((join(base, path), "--endpoint".to_string())),
                (None, Some(url)) => Some((url.trim().to_string(), specific)),
                (None, None) => match var("OTEL_EXPORTER_OTLP_ENDPOINT") {
                    Some(base) => Some((join(&base, path), "OTEL_EXPORTER_OTLP_ENDPOINT".into())),
                    None => (config.endpoint.as_deref())
                        .map(|base| (join(base, path), "[export.otlp] endpoint".into())),
                },
            };
            match found {
                Some((url, from)) => check_url(&url)
                    .map(|()| Some(url))
                    .map_err(|e| format!("{from}: {e}")),
                None => Ok(None),
            }
        };
        let traces = endpoint("TRACES", "v1/traces")?.ok_or(NO_ENDPOINT)?;
        let logs_wanted = flags.logs || config.logs == Some(true);
        let logs = match endpoint("LOGS", "v1/logs")? {
            Some(url) => url,
            None if logs_wanted => {
                return Err("no endpoint for the logs: give --endpoint URL, set \
                            OTEL_EXPORTER_OTLP_LOGS_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT"
                    .into());
            }
            None => String::new(),
        };
        let protocol = match flags.protocol {
            Some(protocol) => protocol,
            None => match first(&var, &["TRACES_PROTOCOL", "PROTOCOL"]) {
                Some((name, word)) => Protocol::parse(&word).map_err(|e| format!("{name}: {e}"))?,
                None => config.protocol.unwrap_or_default(),
            },
        };
        let timeout = match first(&var, &["TRACES_TIMEOUT", "TIMEOUT"]) {
            Some((name, ms)) => match ms.trim().parse::<u64>() {
                Ok(ms) if ms > 0 => Duration::from_millis(ms),
                _ => {
                    return Err(format!(
                        "{name}: expected a number of milliseconds above 0, like 10000, found \"{}\"",
                        one_line(&ms)
                    ));
                }
            },
            None => config.timeout.unwrap_or(DEFAULT_TIMEOUT),
        };
        let headers = |signal: &str| -> Result<Vec<(String, String)>, String> {
            let mut headers = config.headers.clone();
            for name in [
                "OTEL_EXPORTER_OTLP_HEADERS".to_string(),
                format!("OTEL_EXPORTER_OTLP_{signal}_HEADERS"),
            ] {
                if let Some(text) = var(&name) {
                    let pairs = key_values(&text).map_err(|e| format!("{name}: {e}"))?;
                    merge(&mut headers, pairs);
                }
            }
            merge(&mut headers, flags.headers.clone());
            Ok(headers)
        };
        Ok(Target {
            traces,
            logs,
            protocol,
            headers: headers("TRACES")?,
            logs_headers: headers("LOGS")?,
            timeout,
            agent: agent(timeout),
        })
    }
}

/// The first of `OTEL_EXPORTER_OTLP_<suffix>` that is set, with its name.
fn first(var: &impl Fn(&str) -> Option<String>, suffixes: &[&str]) -> Option<(String, String)> {
    suffixes.iter().find_map(|suffix| {
        let name = format!("OTEL_EXPORTER_OTLP_{suffix}");
        var(&name).map(|value| (name, value))
    })
}

/// `base` + `/` + `path`, one slash between.
fn join(base: &str, path: &str) -> String {
    format!("{}/{path}", base.trim().trim_end_matches('/'))
}

/// `pairs` over `headers`: a header named again (in any case) takes the later value.
fn merge(headers: &mut Vec<(String, String)>, pairs: Vec<(String, String)>) {
    for (name, value) in pairs {
        headers.retain(|(n, _)| !n.eq_ignore_ascii_case(&name));
        headers.push((name, value));
    }
}

/// A client whose every request, connecting and reading the answer included, ends within
/// `timeout`; an error status is an answer, not an error; a redirect is not followed (a POST
/// redirected is a misconfigured endpoint to report).
fn agent(timeout: Duration) -> ureq::Agent {
    let config = ureq::Agent::config_builder()
        .timeout_global(Some(timeout))
        .http_status_as_error(false)
        .max_redirects(0)
        .user_agent(concat!("tether/", env!("CARGO_PKG_VERSION")))
        .build();
    config.into()
}
