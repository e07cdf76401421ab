use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::thread::JoinHandle;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTracePartialSuccess;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};

use super::target::NO_ENDPOINT;
use super::*;
use crate::config::otlp::{DEFAULT_TIMEOUT, OtlpSettings};

/// The variables of a test: `pairs`, nothing else.
fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let pairs: Vec<(String, String)> = (pairs.iter())
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |name| {
        pairs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    }
}

fn config(endpoint: Option<&str>) -> OtlpSettings {
    OtlpSettings {
        endpoint: endpoint.map(str::to_string),
        ..OtlpSettings::default()
    }
}

fn resolve(
    flags: &TargetFlags,
    vars: &[(&str, &str)],
    config: &OtlpSettings,
) -> Result<Target, String> {
    Target::resolve(flags, env(vars), config)
}

#[test]
fn the_endpoint_is_the_flag_then_the_variables_then_the_config() {
    let flag = TargetFlags {
        endpoint: Some("http://flag:4318/".into()),
        ..TargetFlags::default()
    };
    let vars = [
        (
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            "http://traces:1/custom/path",
        ),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://base:4318"),
    ];
    let config = config(Some("http://config:4318"));
    let target = resolve(&flag, &vars, &config).unwrap();
    assert_eq!(target.traces, "http://flag:4318/v1/traces");
    assert_eq!(target.logs, "http://flag:4318/v1/logs");
    let none = TargetFlags::default();
    let target = resolve(&none, &vars, &config).unwrap();
    // The signal's own variable is used as it is; the base one gets the path.
    assert_eq!(target.traces, "http://traces:1/custom/path");
    assert_eq!(target.logs, "http://base:4318/v1/logs");
    let target = resolve(&none, &vars[1..], &config).unwrap();
    assert_eq!(target.traces, "http://base:4318/v1/traces");
    let target = resolve(&none, &[("OTEL_EXPORTER_OTLP_ENDPOINT", " ")], &config).unwrap();
    assert_eq!(target.traces, "http://config:4318/v1/traces");
    assert_eq!(target.protocol, Protocol::HttpProtobuf);
    assert_eq!(target.timeout, DEFAULT_TIMEOUT);

    let err = resolve(&none, &[], &OtlpSettings::default()).unwrap_err();
    assert_eq!(err, NO_ENDPOINT);
    let err = resolve(
        &none,
        &[("OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4318")],
        &config,
    )
    .unwrap_err();
    assert!(err.starts_with("OTEL_EXPORTER_OTLP_ENDPOINT: "), "{err}");
    // Logs asked for but nowhere to send them.
    let logs = TargetFlags {
        logs: true,
        ..TargetFlags::default()
    };
    let vars = [(
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "http://traces:1/v1/traces",
    )];
    assert!(
        resolve(&logs, &vars, &OtlpSettings::default())
            .unwrap_err()
            .contains("logs")
    );
    let target = resolve(&none, &vars, &OtlpSettings::default()).unwrap();
    assert_eq!(target.logs, "");
}

#[test]
fn headers_are_percent_decoded_and_later_sources_win() {
    let mut config = config(Some("http://c:4318"));
    config.headers = vec![
        ("Authorization".into(), "Bearer config".into()),
        ("x-team".into(), "a".into()),
    ];
    let vars = [
        (
            "OTEL_EXPORTER_OTLP_HEADERS",
            "authorization=Basic%20dTpw,x-tag=a%2Cb",
        ),
        ("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "x-team=traces"),
        ("OTEL_EXPORTER_OTLP_LOGS_HEADERS", "x-team=logs"),
    ];
    let flags = TargetFlags {
        headers: vec![("X-Tag".into(), "flag".into())],
        ..TargetFlags::default()
    };
    let target = resolve(&flags, &vars, &config).unwrap();
    let get = |headers: &[(String, String)], name: &str| {
        (headers.iter())
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
    };
    assert_eq!(
        get(&target.headers, "authorization").as_deref(),
        Some("Basic dTpw")
    );
    assert_eq!(get(&target.headers, "x-team").as_deref(), Some("traces"));
    assert_eq!(get(&target.logs_headers, "x-team").as_deref(), Some("logs"));
    assert_eq!(get(&target.headers, "x-tag").as_deref(), Some("flag"));
    assert_eq!(target.headers.len(), 3, "{:?}", target.headers);
    let bad = [("OTEL_EXPORTER_OTLP_HEADERS", "authorization")];
    let err = resolve(&flags, &bad, &config).unwrap_err();
    assert!(err.starts_with("OTEL_EXPORTER_OTLP_HEADERS: "), "{err}");
}

#[test]
fn grpc_is_refused_with_what_to_use_and_the_rest_is_read() {
    let config = config(Some("http://c:4318"));
    let none = TargetFlags::default();
    let err = resolve(&none, &[("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")], &config).unwrap_err();
    assert!(err.starts_with("OTEL_EXPORTER_OTLP_PROTOCOL: "), "{err}");
    assert!(err.contains("use http/protobuf"), "{err}");
    assert!(err.contains("4318"), "{err}");
    let vars = [
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
        ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/json"),
        ("OTEL_EXPORTER_OTLP_TIMEOUT", "2500"),
    ];
    let target = resolve(&none, &vars, &config).unwrap();
    assert_eq!(target.protocol, Protocol::HttpJson);
    assert_eq!(target.timeout, Duration::from_millis(2500));
    let flags = TargetFlags {
        protocol: Some(Protocol::HttpProtobuf),
        ..TargetFlags::default()
    };
    assert_eq!(
        resolve(&flags, &vars, &config).unwrap().protocol,
        Protocol::HttpProtobuf
    );
    let err = resolve(&none, &[("OTEL_EXPORTER_OTLP_TIMEOUT", "10s")], &config).unwrap_err();
    assert!(err.contains("milliseconds"), "{err}");
}

/// What the test server received.
#[derive(Debug, Default)]
struct Received {
    request_line: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Received {
    fn header(&self, name: &str) -> Option<&str> {
        (self.headers.iter())
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// The bound on anything the server waits for: reaching it fails the test, never slows it.
const DEADLINE: Duration = Duration::from_secs(30);

/// A one-request HTTP server on 127.0.0.1: reads the request and writes `answer` (a whole
/// HTTP response), or, with `None`, never answers and waits for the client to give up.
fn serve(answer: Option<Vec<u8>>) -> (String, JoinHandle<Received>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let server = std::thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        stream.set_read_timeout(Some(DEADLINE)).unwrap();
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut received = Received::default();
        reader.read_line(&mut received.request_line).unwrap();
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            let (name, value) = line.split_once(':').unwrap();
            received.headers.push((name.into(), value.trim().into()));
        }
        let length: usize = received.header("content-length").unwrap().parse().unwrap();
        received.body = vec![0; length];
        reader.read_exact(&mut received.body).unwrap();
        match answer {
            Some(answer) => (&stream).write_all(&answer).unwrap(),
            // Until the client hangs up (its timeout); an error here is the deadline.
            None => match reader.read(&mut [0; 1]) {
                Ok(0) => {}
                Err(err) if err.kind() == std::io::ErrorKind::ConnectionReset => {}
                other => panic!("the client did not hang up: {other:?}"),
            },
        }
        received
    });
    (url, server)
}

fn response(status: &str, headers: &[&str], body: &[u8]) -> Vec<u8> {
    let mut head = format!("HTTP/1.1 {status}\r\nContent-Length: {}\r\n", body.len());
    for header in headers {
        head.push_str(header);
        head.push_str("\r\n");
    }
    head.push_str("\r\n");
    let mut bytes = head.into_bytes();
    bytes.extend_from_slice(body);
    bytes
}

fn target(url: &str, protocol: Protocol, timeout: Duration) -> Target {
    let flags = TargetFlags {
        endpoint: Some(url.into()),
        protocol: Some(protocol),
        headers: vec![("authorization".into(), "Bearer t".into())],
        logs: false,
    };
    let config = OtlpSettings {
        timeout: Some(timeout),
        ..OtlpSettings::default()
    };
    Target::resolve(&flags, |_| None, &config).unwrap()
}

fn traces() -> ExportTraceServiceRequest {
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            scope_spans: vec![ScopeSpans {
                spans: vec![Span {
                    trace_id: vec![1; 16],
                    span_id: vec![2; 8],
                    name: "ls".into(),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

/// Sends `traces()` to a server answering `answer`: the outcome and what arrived.
fn exchange(answer: Option<Vec<u8>>, protocol: Protocol, timeout: Duration) -> (Sent, Received) {
    let (url, server) = serve(answer);
    let sent = send(&target(&url, protocol, timeout), Body::Traces(traces()));
    (sent, server.join().unwrap())
}

#[test]
fn a_2xx_is_accepted_with_its_partial_success() {
    let (sent, received) = exchange(
        Some(response("200 OK", &[], b"")),
        Protocol::HttpProtobuf,
        DEADLINE,
    );
    assert_eq!(
        sent,
        Sent::Accepted {
            rejected: 0,
            message: None
        }
    );
    assert_eq!(received.request_line.trim_end(), "POST /v1/traces HTTP/1.1");
    assert_eq!(
        received.header("content-type"),
        Some("application/x-protobuf")
    );
    assert_eq!(received.header("authorization"), Some("Bearer t"));
    let decoded = ExportTraceServiceRequest::decode(&received.body[..]).unwrap();
    assert_eq!(decoded, traces());

    let partial = ExportTraceServiceResponse {
        partial_success: Some(ExportTracePartialSuccess {
            rejected_spans: 2,
            error_message: "2 spans too old".into(),
        }),
    };
    let answer = response(
        "200 OK",
        &["Content-Type: application/x-protobuf"],
        &partial.encode_to_vec(),
    );
    let (sent, _) = exchange(Some(answer), Protocol::HttpProtobuf, DEADLINE);
    let expected = Sent::Accepted {
        rejected: 2,
        message: Some("2 spans too old".into()),
    };
    assert_eq!(sent, expected);

    // JSON both ways: the request in the OTLP/JSON mapping, the answer read as JSON.
    let json = br#"{"partialSuccess":{"rejectedSpans":"2","errorMessage":"2 spans too old"}}"#;
    let answer = response("200 OK", &["Content-Type: application/json"], json);
    let (sent, received) = exchange(Some(answer), Protocol::HttpJson, DEADLINE);
    assert_eq!(sent, expected);
    assert_eq!(received.header("content-type"), Some("application/json"));
    let decoded: ExportTraceServiceRequest = serde_json::from_slice(&received.body).unwrap();
    assert_eq!(decoded, traces());
    let text = String::from_utf8(received.body).unwrap();
    assert!(
        text.contains(r#""traceId":"01010101010101010101010101010101""#),
        "{text}"
    );
}

#[test]
fn errors_are_retried_or_refused_by_their_status() {
    let (sent, _) = exchange(
        Some(response("500 Internal Server Error", &[], b"boom")),
        Protocol::HttpProtobuf,
        DEADLINE,
    );
    match sent {
        Sent::Retry { after: None, why } => assert!(why.contains("HTTP 500: boom"), "{why}"),
        other => panic!("{other:?}"),
    }
    let (sent, _) = exchange(
        Some(response("429 Too Many Requests", &["Retry-After: 7"], b"")),
        Protocol::HttpProtobuf,
        DEADLINE,
    );
    match sent {
        Sent::Retry { after, why } => {
            assert_eq!(after, Some(Duration::from_secs(7)));
            assert!(why.contains("HTTP 429"), "{why}");
        }
        other => panic!("{other:?}"),
    }
    let (sent, _) = exchange(
        Some(response("400 Bad Request", &[], b"bad trace id")),
        Protocol::HttpProtobuf,
        DEADLINE,
    );
    match sent {
        Sent::Refused { why } => assert!(why.contains("HTTP 400: bad trace id"), "{why}"),
        other => panic!("{other:?}"),
    }
    // A wrong path or credentials must not lose anything: retried, saying what to check.
    let (sent, _) = exchange(
        Some(response("404 Not Found", &[], b"")),
        Protocol::HttpProtobuf,
        DEADLINE,
    );
    match sent {
        Sent::Retry { why, .. } => assert!(why.contains("check the endpoint"), "{why}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_endpoint_that_never_answers_is_retried_after_the_timeout() {
    let (sent, received) = exchange(None, Protocol::HttpProtobuf, Duration::from_millis(300));
    match sent {
        Sent::Retry { after: None, why } => assert!(why.contains("no answer within"), "{why}"),
        other => panic!("{other:?}"),
    }
    // It had the whole request: the timeout ran out waiting for the answer.
    assert!(!received.body.is_empty());
}

#[test]
fn nothing_listening_is_retried() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    match send(
        &target(&url, Protocol::HttpProtobuf, DEADLINE),
        Body::Traces(traces()),
    ) {
        Sent::Retry { after: None, why } => assert!(why.starts_with(&url), "{why}"),
        other => panic!("{other:?}"),
    }
}
