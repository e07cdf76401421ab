//! OTLP/HTTP: where requests go ([`Target::resolve`]: flags, then the `OTEL_EXPORTER_OTLP_*`
//! variables, then `[export.otlp]`) and sending one ([`send`]), blocking, never longer than
//! the target's timeout, with what the endpoint said as a [`Sent`] the follower decides on.

use std::time::Duration;

use opentelemetry_proto::tonic::collector::logs::v1::{
    ExportLogsServiceRequest, ExportLogsServiceResponse,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use prost::Message;

use crate::config::otlp::Protocol;
use crate::model::output::one_line;

mod target;
pub use super::Sent;
pub use target::{Target, TargetFlags};

/// One request's content.
pub enum Body {
    Traces(ExportTraceServiceRequest),
    Logs(ExportLogsServiceRequest),
}

/// The most of an answer's body that is read (a `partial_success` is small).
const MAX_ANSWER: u64 = 64 << 10;

/// Sends one request and says how the endpoint took it. Blocks at most `target.timeout`.
pub fn send(target: &Target, body: Body) -> Sent {
    let json = target.protocol == Protocol::HttpJson;
    let (url, headers, bytes) = match &body {
        Body::Traces(request) => (&target.traces, &target.headers, encode(request, json)),
        Body::Logs(request) => (&target.logs, &target.logs_headers, encode(request, json)),
    };
    if url.is_empty() {
        return Sent::Refused {
            why: "no endpoint for the logs".into(),
        };
    }
    let mut request =
        (target.agent.post(url.as_str())).header("Content-Type", target.protocol.content_type());
    for (name, value) in headers {
        request = request.header(name.as_str(), value.as_str());
    }
    let mut response = match request.send(&bytes[..]) {
        Ok(response) => response,
        Err(ureq::Error::Timeout(_)) => {
            return Sent::Retry {
                after: None,
                why: format!("{url}: no answer within {:?}", target.timeout),
            };
        }
        // A header that cannot be sent, a URL that cannot be parsed: no retry mends them.
        Err(err @ (ureq::Error::Http(_) | ureq::Error::BadUri(_))) => {
            return Sent::Refused {
                why: format!("{url}: {err}"),
            };
        }
        Err(err) => {
            return Sent::Retry {
                after: None,
                why: format!("{url}: {err}"),
            };
        }
    };
    let status = response.status().as_u16();
    let header = |name: &str| {
        (response.headers().get(name)).and_then(|v| v.to_str().ok().map(str::to_string))
    };
    let retry_after = header("retry-after").and_then(|v| v.trim().parse().ok());
    let location = header("location");
    let answer = (response
        .body_mut()
        .with_config()
        .limit(MAX_ANSWER)
        .read_to_vec())
    .unwrap_or_default();
    outcome(
        status,
        retry_after.map(Duration::from_secs),
        location,
        &answer,
        &body,
        json,
    )
    .with_url(url)
}

fn encode<T: Message + serde::Serialize>(request: &T, json: bool) -> Vec<u8> {
    if json {
        // Serializing the generated messages cannot fail: no maps with non-string keys.
        serde_json::to_vec(request).unwrap_or_default()
    } else {
        request.encode_to_vec()
    }
}

/// What an answer means, by its status (the OTLP/HTTP specification's retryable codes, and
/// 401/403/404/3xx too: a misconfigured endpoint or credentials must not lose data).
fn outcome(
    status: u16,
    retry_after: Option<Duration>,
    location: Option<String>,
    answer: &[u8],
    body: &Body,
    json: bool,
) -> Sent {
    let said = || {
        let text = String::from_utf8_lossy(&answer[..answer.len().min(200)]);
        let text = one_line(text.trim());
        if text.is_empty() {
            format!("HTTP {status}")
        } else {
            format!("HTTP {status}: {text}")
        }
    };
    let why = match status {
        200..=299 => return partial_success(answer, body, json),
        300..=399 => format!(
            "HTTP {status}, redirected to {}: give that URL as the endpoint",
            location.as_deref().map_or("?".into(), one_line)
        ),
        401 | 403 => format!("{}; check the headers (credentials)", said()),
        404 => format!(
            "{}; check the endpoint (a base URL, like http://collector:4318)",
            said()
        ),
        408 | 429 | 500..=599 => said(),
        _ => return Sent::Refused { why: said() },
    };
    Sent::Retry {
        after: retry_after,
        why,
    }
}

/// A 2xx answer's `partial_success`: how many items the endpoint dropped, and why.
fn partial_success(answer: &[u8], body: &Body, json: bool) -> Sent {
    let (rejected, message) = if answer.is_empty() {
        (0, String::new())
    // Collectors answer in the request's encoding; a JSON answer is read whichever was sent.
    } else if json || answer.first() == Some(&b'{') {
        json_partial_success(answer, body)
    } else {
        match body {
            Body::Traces(_) => ExportTraceServiceResponse::decode(answer)
                .ok()
                .and_then(|r| r.partial_success)
                .map_or((0, String::new()), |p| (p.rejected_spans, p.error_message)),
            Body::Logs(_) => ExportLogsServiceResponse::decode(answer)
                .ok()
                .and_then(|r| r.partial_success)
                .map_or((0, String::new()), |p| {
                    (p.rejected_log_records, p.error_message)
                }),
        }
    };
    Sent::Accepted {
        rejected: rejected.max(0) as u64,
        message: Some(message)
            .filter(|m| !m.is_empty())
            .map(|m| one_line(&m)),
    }
}

/// The JSON form, read by hand: OTLP/JSON writes the count as a string (`"2"`), which the
/// generated messages' serde does not read back (it reads only a number there).
fn json_partial_success(answer: &[u8], body: &Body) -> (i64, String) {
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(answer) else {
        return (0, String::new());
    };
    let partial = &value["partialSuccess"];
    let count = match body {
        Body::Traces(_) => &partial["rejectedSpans"],
        Body::Logs(_) => &partial["rejectedLogRecords"],
    };
    let rejected = (count.as_i64())
        .or_else(|| count.as_str().and_then(|n| n.parse().ok()))
        .unwrap_or_default();
    let message = partial["errorMessage"].as_str().unwrap_or_default();
    (rejected, message.to_string())
}

impl Sent {
    /// The reason, with the URL before it, for the status and stderr.
    fn with_url(self, url: &str) -> Sent {
        match self {
            Sent::Retry { after, why } => Sent::Retry {
                after,
                why: format!("{url}: {why}"),
            },
            Sent::Refused { why } => Sent::Refused {
                why: format!("{url}: {why}"),
            },
            accepted => accepted,
        }
    }
}

#[cfg(test)]
mod tests;
