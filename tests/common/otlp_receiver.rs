//! An OTLP/HTTP receiver for the tests: what an OpenTelemetry Collector's `otlphttp` receiver
//! does, on 127.0.0.1 in a thread of the test. It takes `POST /v1/traces` and `POST /v1/logs`
//! as protobuf (`application/x-protobuf`) or JSON (`application/json`), decodes them with the
//! official definitions (the `opentelemetry-proto` crate, and its serde mapping for JSON) and
//! keeps every span and log record it accepted, with a count per span id so that a resend
//! shows as a duplicate.
//!
//! How it answers is switched while it runs ([`Mode`]): accept, answer a status, hang (read
//! the request and never answer), or be down (the listener closed and every connection with
//! it; the port is kept and bound again when it comes back up). A request it did not answer
//! with a 2xx is not kept: the sender was not told it arrived.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::logs::v1::LogRecord;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;

/// How the receiver answers, switchable while it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Decode, keep, answer 200 with an empty response.
    Ok,
    /// Read the request, keep nothing, answer this status with an empty body.
    Status(u16),
    /// Accept and read the request, never answer; the connection is closed, unanswered, when
    /// the mode changes or the receiver is dropped.
    Hang,
    /// No listener (a connect is refused) and no open connection; the port is kept.
    Down,
}

/// A span as it arrived, with its resource's attributes.
#[derive(Debug, Clone)]
pub struct ReceivedSpan {
    pub resource: Vec<KeyValue>,
    pub span: Span,
}

/// A log record as it arrived, with its resource's attributes.
#[derive(Debug, Clone)]
pub struct ReceivedLog {
    pub resource: Vec<KeyValue>,
    pub record: LogRecord,
}

/// One request, answered or not.
#[derive(Debug, Clone)]
pub struct Request {
    pub path: String,
    pub content_type: String,
    /// Header names lowercased.
    pub headers: Vec<(String, String)>,
    /// What the receiver did with it (the mode it met).
    pub answered: Mode,
}

/// Everything the receiver has seen.
#[derive(Debug, Default)]
pub struct Received {
    /// Spans of accepted requests, in arrival order (a resend appears again).
    pub spans: Vec<ReceivedSpan>,
    /// How many times each span id (hex) arrived in an accepted request.
    pub span_counts: HashMap<String, usize>,
    pub logs: Vec<ReceivedLog>,
    pub requests: Vec<Request>,
    /// What could not be read or decoded: a test expects none.
    pub errors: Vec<String>,
}

struct Shared {
    mode: Mutex<Mode>,
    received: Mutex<Received>,
    stop: AtomicBool,
}

impl Shared {
    fn mode(&self) -> Mode {
        *lock(&self.mode)
    }

    fn stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
}

/// A poisoned lock only means a connection thread panicked; its data is still what it kept.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The receiver; dropping it stops it and closes every connection.
pub struct Receiver {
    shared: Arc<Shared>,
    addr: SocketAddr,
    acceptor: Option<JoinHandle<()>>,
}

impl Receiver {
    /// Starts one on a free port of 127.0.0.1, accepting.
    pub fn start() -> Receiver {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind the test receiver");
        let addr = listener.local_addr().expect("the receiver's address");
        listener
            .set_nonblocking(true)
            .expect("a non-blocking listener");
        let shared = Arc::new(Shared {
            mode: Mutex::new(Mode::Ok),
            received: Mutex::new(Received::default()),
            stop: AtomicBool::new(false),
        });
        let acceptor = {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name("otlp-receiver".into())
                .spawn(move || accept_loop(&shared, addr, Some(listener)))
                .expect("start the receiver's thread")
        };
        Receiver {
            shared,
            addr,
            acceptor: Some(acceptor),
        }
    }

    /// The base URL, as `OTEL_EXPORTER_OTLP_ENDPOINT` takes it.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    pub fn set_mode(&self, mode: Mode) {
        *lock(&self.shared.mode) = mode;
    }

    pub fn mode(&self) -> Mode {
        self.shared.mode()
    }

    /// What has arrived so far (held locked: read it and let it go).
    pub fn received(&self) -> MutexGuard<'_, Received> {
        lock(&self.shared.received)
    }

    pub fn spans(&self) -> Vec<ReceivedSpan> {
        self.received().spans.clone()
    }

    pub fn logs(&self) -> Vec<ReceivedLog> {
        self.received().logs.clone()
    }

    /// How many distinct span ids have arrived.
    pub fn distinct_spans(&self) -> usize {
        self.received().span_counts.len()
    }

    /// Span ids (hex) that arrived more than once, with their counts.
    pub fn duplicates(&self) -> Vec<(String, usize)> {
        let mut doubled: Vec<(String, usize)> = self
            .received()
            .span_counts
            .iter()
            .filter(|(_, n)| **n > 1)
            .map(|(id, n)| (id.clone(), *n))
            .collect();
        doubled.sort();
        doubled
    }

    pub fn errors(&self) -> Vec<String> {
        self.received().errors.clone()
    }

    /// The requests that met `mode`.
    pub fn requests_answered(&self, mode: Mode) -> usize {
        self.received()
            .requests
            .iter()
            .filter(|r| r.answered == mode)
            .count()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
    }
}

/// How often the threads look at the mode and the stop flag.
const POLL: Duration = Duration::from_millis(10);

fn accept_loop(shared: &Arc<Shared>, addr: SocketAddr, mut listener: Option<TcpListener>) {
    while !shared.stopping() {
        if shared.mode() == Mode::Down {
            listener = None;
            std::thread::sleep(POLL);
            continue;
        }
        let Some(bound) = listener.as_ref() else {
            // Back up: the same port again (std sets SO_REUSEADDR, so connections of the
            // last listener in TIME_WAIT do not hold it).
            match TcpListener::bind(addr) {
                Ok(bound) => {
                    bound
                        .set_nonblocking(true)
                        .expect("a non-blocking listener");
                    listener = Some(bound);
                }
                Err(err) => {
                    lock(&shared.received)
                        .errors
                        .push(format!("bind {addr} again: {err}"));
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
            continue;
        };
        match bound.accept() {
            Ok((stream, _)) => {
                let shared = Arc::clone(shared);
                let _ = std::thread::Builder::new()
                    .name("otlp-connection".into())
                    .spawn(move || serve(&shared, stream));
            }
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => std::thread::sleep(POLL),
            Err(err) => {
                lock(&shared.received).errors.push(format!("accept: {err}"));
                std::thread::sleep(POLL);
            }
        }
    }
}

/// A connection: requests one after another (keep-alive) until the peer closes it, the
/// receiver goes down or stops, or a request cannot be read.
fn serve(shared: &Shared, stream: TcpStream) {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_read_timeout(Some(POLL));
    let mut conn = Conn {
        stream,
        buf: Vec::new(),
    };
    loop {
        let request = match conn.read_request(shared) {
            Ok(Some(request)) => request,
            Ok(None) => return,
            Err(err) => {
                lock(&shared.received)
                    .errors
                    .push(format!("read a request: {err}"));
                return;
            }
        };
        if !answer(shared, &mut conn.stream, request) {
            return;
        }
    }
}

struct RawRequest {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl RawRequest {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Conn {
    /// Reads more bytes into `buf`; `Ok(false)` at the peer's end of stream,
    /// `Err(ClosedOr::Closed)` when the receiver goes down or stops meanwhile.
    fn fill(&mut self, shared: &Shared) -> Result<bool, ClosedOr> {
        let mut chunk = [0u8; 64 * 1024];
        loop {
            if shared.stopping() || shared.mode() == Mode::Down {
                return Err(ClosedOr::Closed);
            }
            match self.stream.read(&mut chunk) {
                Ok(0) => return Ok(false),
                Ok(n) => {
                    self.buf.extend_from_slice(&chunk[..n]);
                    return Ok(true);
                }
                Err(err)
                    if matches!(
                        err.kind(),
                        io::ErrorKind::WouldBlock
                            | io::ErrorKind::TimedOut
                            | io::ErrorKind::Interrupted
                    ) => {}
                Err(err) => return Err(ClosedOr::Io(err)),
            }
        }
    }

    /// The next request; `None` when the connection ends between requests (or is closed by
    /// the receiver).
    fn read_request(&mut self, shared: &Shared) -> Result<Option<RawRequest>, String> {
        let head_end = loop {
            if let Some(at) = find(&self.buf, b"\r\n\r\n") {
                break at;
            }
            match self.fill(shared) {
                Ok(true) => {}
                Ok(false) if self.buf.is_empty() => return Ok(None),
                Ok(false) => return Err("the peer closed mid-head".into()),
                Err(ClosedOr::Closed) => return Ok(None),
                // A reset between requests is a client dropping its idle connection.
                Err(ClosedOr::Io(_)) if self.buf.is_empty() => return Ok(None),
                Err(ClosedOr::Io(err)) => return Err(err.to_string()),
            }
        };
        let head = String::from_utf8_lossy(&self.buf[..head_end]).into_owned();
        self.buf.drain(..head_end + 4);
        let mut lines = head.split("\r\n");
        let start = lines.next().unwrap_or_default();
        let mut parts = start.split(' ');
        let method = parts.next().unwrap_or_default().to_owned();
        let path = parts.next().unwrap_or_default().to_owned();
        let headers: Vec<(String, String)> = lines
            .filter_map(|line| line.split_once(':'))
            .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
            .collect();
        let mut request = RawRequest {
            method,
            path,
            headers,
            body: Vec::new(),
        };
        if request
            .header("expect")
            .is_some_and(|v| v.eq_ignore_ascii_case("100-continue"))
        {
            self.stream
                .write_all(b"HTTP/1.1 100 Continue\r\n\r\n")
                .map_err(|e| e.to_string())?;
        }
        let chunked = request
            .header("transfer-encoding")
            .is_some_and(|v| v.to_ascii_lowercase().contains("chunked"));
        request.body = if chunked {
            self.read_chunked(shared)?
        } else {
            let len: usize = match request.header("content-length") {
                Some(len) => len.parse().map_err(|_| format!("Content-Length {len:?}"))?,
                None => 0,
            };
            self.read_exact_body(shared, len)?
        };
        Ok(Some(request))
    }

    fn read_exact_body(&mut self, shared: &Shared, len: usize) -> Result<Vec<u8>, String> {
        while self.buf.len() < len {
            self.more(shared)?;
        }
        Ok(self.buf.drain(..len).collect())
    }

    fn more(&mut self, shared: &Shared) -> Result<(), String> {
        match self.fill(shared) {
            Ok(true) => Ok(()),
            Ok(false) => Err("the peer closed mid-body".into()),
            Err(ClosedOr::Closed) => Err("closed by the receiver mid-body".into()),
            Err(ClosedOr::Io(err)) => Err(err.to_string()),
        }
    }

    /// A chunked body: `SIZE[;ext]\r\nDATA\r\n` ... `0\r\n[trailers]\r\n`.
    fn read_chunked(&mut self, shared: &Shared) -> Result<Vec<u8>, String> {
        let mut body = Vec::new();
        loop {
            let line_end = loop {
                if let Some(at) = find(&self.buf, b"\r\n") {
                    break at;
                }
                self.more(shared)?;
            };
            let line = String::from_utf8_lossy(&self.buf[..line_end]).into_owned();
            self.buf.drain(..line_end + 2);
            let size = line.split(';').next().unwrap_or_default().trim();
            let size =
                usize::from_str_radix(size, 16).map_err(|_| format!("chunk size {line:?}"))?;
            if size == 0 {
                // Trailers, if any, up to the empty line.
                loop {
                    let end = loop {
                        if let Some(at) = find(&self.buf, b"\r\n") {
                            break at;
                        }
                        self.more(shared)?;
                    };
                    self.buf.drain(..end + 2);
                    if end == 0 {
                        return Ok(body);
                    }
                }
            }
            while self.buf.len() < size + 2 {
                self.more(shared)?;
            }
            body.extend(self.buf.drain(..size));
            self.buf.drain(..2);
        }
    }
}

/// Why no more bytes came: the receiver closed the connection (down or stopping), or an
/// error.
enum ClosedOr {
    Closed,
    Io(io::Error),
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Answers one request as the mode says; `false` when the connection is to be closed.
fn answer(shared: &Shared, stream: &mut TcpStream, request: RawRequest) -> bool {
    let mode = shared.mode();
    let content_type = request
        .header("content-type")
        .unwrap_or_default()
        .to_owned();
    let json = content_type.starts_with("application/json");
    {
        let mut received = lock(&shared.received);
        received.requests.push(Request {
            path: request.path.clone(),
            content_type: content_type.clone(),
            headers: request.headers.clone(),
            answered: mode,
        });
    }
    match mode {
        Mode::Down => false,
        Mode::Hang => {
            while !shared.stopping() && shared.mode() == Mode::Hang {
                std::thread::sleep(POLL);
            }
            false
        }
        Mode::Status(code) => respond(stream, code, "", &[]),
        Mode::Ok => {
            if request.method != "POST" {
                return respond(stream, 405, "", &[]);
            }
            match keep(shared, &request, json) {
                Ok(()) if json => respond(stream, 200, "application/json", b"{}"),
                // An empty Export*ServiceResponse encodes as no bytes.
                Ok(()) => respond(stream, 200, "application/x-protobuf", &[]),
                Err((code, why)) => {
                    lock(&shared.received)
                        .errors
                        .push(format!("{} {}: {why}", request.method, request.path));
                    respond(stream, code, "", &[])
                }
            }
        }
    }
}

/// Decodes and keeps an accepted request; the status and why when it is not one.
fn keep(shared: &Shared, request: &RawRequest, json: bool) -> Result<(), (u16, String)> {
    if let Some(encoding) = request.header("content-encoding")
        && encoding != "identity"
    {
        return Err((415, format!("Content-Encoding {encoding} not handled")));
    }
    if !json
        && !request
            .header("content-type")
            .is_some_and(|t| t.starts_with("application/x-protobuf"))
    {
        return Err((
            415,
            format!("Content-Type {:?}", request.header("content-type")),
        ));
    }
    match request.path.as_str() {
        "/v1/traces" => {
            let decoded: ExportTraceServiceRequest = decode(&request.body, json)?;
            let mut received = lock(&shared.received);
            for resource_spans in decoded.resource_spans {
                let resource = resource_spans
                    .resource
                    .map(|r| r.attributes)
                    .unwrap_or_default();
                for scope in resource_spans.scope_spans {
                    for span in scope.spans {
                        *received.span_counts.entry(hex(&span.span_id)).or_default() += 1;
                        received.spans.push(ReceivedSpan {
                            resource: resource.clone(),
                            span,
                        });
                    }
                }
            }
            Ok(())
        }
        "/v1/logs" => {
            let decoded: ExportLogsServiceRequest = decode(&request.body, json)?;
            let mut received = lock(&shared.received);
            for resource_logs in decoded.resource_logs {
                let resource = resource_logs
                    .resource
                    .map(|r| r.attributes)
                    .unwrap_or_default();
                for scope in resource_logs.scope_logs {
                    for record in scope.log_records {
                        received.logs.push(ReceivedLog {
                            resource: resource.clone(),
                            record,
                        });
                    }
                }
            }
            Ok(())
        }
        other => Err((404, format!("no such path {other}"))),
    }
}

fn respond(stream: &mut TcpStream, code: u16, content_type: &str, body: &[u8]) -> bool {
    let reason = match code {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Status",
    };
    let mut head = format!(
        "HTTP/1.1 {code} {reason}\r\nContent-Length: {}\r\n",
        body.len()
    );
    if !content_type.is_empty() {
        head.push_str(&format!("Content-Type: {content_type}\r\n"));
    }
    head.push_str("\r\n");
    stream
        .write_all(head.as_bytes())
        .and_then(|()| stream.write_all(body))
        .and_then(|()| stream.flush())
        .is_ok()
}

/// A request's body read as OTLP/JSON or protobuf; what cannot be read is a 400.
fn decode<M>(body: &[u8], json: bool) -> Result<M, (u16, String)>
where
    M: Message + Default + serde::de::DeserializeOwned,
{
    if json {
        serde_json::from_slice(body).map_err(|e| (400, e.to_string()))
    } else {
        M::decode(body).map_err(|e| (400, e.to_string()))
    }
}

/// Lowercase hex, as ids are written in OTLP/JSON and W3C trace context.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The attribute `key` of a span, event, record or resource.
pub fn attr<'a>(attributes: &'a [KeyValue], key: &str) -> Option<&'a any_value::Value> {
    attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref())
        .and_then(|v: &AnyValue| v.value.as_ref())
}

/// The attribute `key` as text (a string value, or any other value as written).
pub fn attr_text(attributes: &[KeyValue], key: &str) -> Option<String> {
    attr(attributes, key).map(value_text)
}

/// An attribute value as text: strings as they are, the rest in a readable form.
pub fn value_text(value: &any_value::Value) -> String {
    match value {
        any_value::Value::StringValue(s) => s.clone(),
        any_value::Value::IntValue(n) => n.to_string(),
        any_value::Value::BoolValue(b) => b.to_string(),
        any_value::Value::DoubleValue(d) => d.to_string(),
        any_value::Value::ArrayValue(a) => {
            let items: Vec<String> = a
                .values
                .iter()
                .filter_map(|v| v.value.as_ref().map(value_text))
                .collect();
            format!("[{}]", items.join(", "))
        }
        other => format!("{other:?}"),
    }
}

/// The attribute `key` as an integer.
pub fn attr_int(attributes: &[KeyValue], key: &str) -> Option<i64> {
    match attr(attributes, key)? {
        any_value::Value::IntValue(n) => Some(*n),
        any_value::Value::StringValue(s) => s.parse().ok(),
        _ => None,
    }
}
