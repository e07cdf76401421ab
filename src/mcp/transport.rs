//! The stdio transport: JSON-RPC lines in, whole lines out through one ordered writer.
//!
//! rmcp's own stdio transport drops a line it cannot parse without a word (and one over its
//! limit after buffering 16 MiB of it), so a client that sent one waits for an answer that
//! never comes. Here every line is answered or served: one that is not JSON gets `-32700`
//! with id null; JSON that is no JSON-RPC message gets `-32600`, with its id when it has a
//! readable one (a notification gets nothing, as JSON-RPC wants); one longer than
//! [`MAX_MESSAGE`] is skipped as it arrives, never held whole, and gets `-32600`. The server
//! goes on after each. Answers and the SDK's own messages go through one [`Writer`] task, in
//! the order they were sent, each written whole before the next begins.

use std::io;

use rmcp::RoleServer;
use rmcp::model::{ErrorCode, JsonRpcMessage};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;

use super::budget::{RPC_ERROR_CAP, capped};
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

/// The longest message read: far above any tool call's arguments, far below what would
/// strain the server to hold.
pub const MAX_MESSAGE: usize = 4 << 20;

const BOM: &[u8] = b"\xEF\xBB\xBF";

type Ack = oneshot::Sender<io::Result<()>>;

/// The one writer of stdout: lines queued in order, each written whole.
#[derive(Clone)]
pub struct Writer {
    lines: mpsc::UnboundedSender<(Vec<u8>, Option<Ack>)>,
}

impl Writer {
    /// Starts the task that writes to `out`; it ends once every `Writer` is dropped and all
    /// that was queued is written.
    pub fn start<W: AsyncWrite + Unpin + Send + 'static>(mut out: W) -> (Writer, JoinHandle<()>) {
        let (lines, mut queue) = mpsc::unbounded_channel::<(Vec<u8>, Option<Ack>)>();
        let task = tokio::spawn(async move {
            let mut broken: Option<io::ErrorKind> = None;
            while let Some((line, ack)) = queue.recv().await {
                let written = match broken {
                    Some(kind) => Err(io::Error::new(kind, "stdout is closed")),
                    None => match out.write_all(&line).await {
                        Ok(()) => out.flush().await,
                        Err(err) => Err(err),
                    },
                };
                if let Err(err) = &written {
                    broken.get_or_insert(err.kind());
                }
                if let Some(ack) = ack {
                    let _ = ack.send(written);
                }
            }
        });
        (Writer { lines }, task)
    }

    /// Queues `line` (a newline is added); the answer says once it is written.
    fn queue(&self, mut line: Vec<u8>, ack: Option<Ack>) -> bool {
        line.push(b'\n');
        self.lines.send((line, ack)).is_ok()
    }
}

/// What became of one line read.
#[derive(Debug)]
enum Read {
    Line,
    Oversized,
    Eof,
}

pub struct LineTransport<R> {
    read: BufReader<R>,
    /// The line read so far: kept here, not in a future, because `receive` is polled in a
    /// `select!` and may be dropped mid-line.
    line: Vec<u8>,
    /// Skipping the rest of a line over the limit, up to its newline.
    discarding: bool,
    max: usize,
    out: Writer,
}

impl<R: AsyncRead + Unpin + Send> LineTransport<R> {
    pub fn new(read: R, out: Writer) -> LineTransport<R> {
        LineTransport {
            read: BufReader::new(read),
            line: Vec::new(),
            discarding: false,
            max: MAX_MESSAGE,
            out,
        }
    }

    #[cfg(test)]
    fn with_max(mut self, max: usize) -> Self {
        self.max = max;
        self
    }

    /// Reads up to the next newline into `self.line`, never holding more than `max` bytes.
    /// Cancel-safe: bytes are taken from the buffer only together with their copy.
    async fn read_line(&mut self) -> io::Result<Read> {
        loop {
            let available = self.read.fill_buf().await?;
            if available.is_empty() {
                // A last line without its newline is no whole message.
                return Ok(Read::Eof);
            }
            let newline = memchr::memchr(b'\n', available);
            let take = newline.map_or(available.len(), |i| i + 1);
            let read = if self.discarding {
                if newline.is_some() {
                    self.discarding = false;
                }
                None
            } else if self.line.len() + take > self.max + 1 {
                self.line.clear();
                self.discarding = newline.is_none();
                Some(Read::Oversized)
            } else {
                self.line.extend_from_slice(&available[..take]);
                newline.map(|_| Read::Line)
            };
            self.read.consume(take);
            if let Some(read) = read {
                return Ok(read);
            }
        }
    }

    fn answer(&self, id: Option<&RawValue>, code: ErrorCode, message: String) {
        eprintln!("tether mcp: {message}");
        // Its id is the one the line carried, as written.
        let line = format!(
            r#"{{"jsonrpc":"2.0","id":{},"error":{{"code":{},"message":{}}}}}"#,
            id.map_or("null", RawValue::get),
            code.0,
            Value::from(capped(&message, RPC_ERROR_CAP)),
        );
        self.out.queue(line.into_bytes(), None);
    }
}

/// What a whole line holds.
#[derive(Debug)]
enum Verdict {
    Message(Box<RxJsonRpcMessage<RoleServer>>),
    /// Nothing to serve or answer: a blank line, or a notification of no known shape.
    Skip,
    /// An error to answer, with the id as the line wrote it (none: `null`).
    Refuse(Option<Box<RawValue>>, ErrorCode, String),
}

/// The parts of a message read as written, before anything else is made of it.
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    method: Option<&'a RawValue>,
}

/// Whether `raw`, a JSON number as written, is an integer written as one (`7`, `-3`) that
/// the SDK holds exactly (within i64): it answers with the id it holds, which for `1e2`,
/// `1.0` or `-0` would be another text of the number, and past i64 none at all.
fn exact_integer(raw: &str) -> bool {
    raw.parse::<i64>().is_ok_and(|n| n.to_string() == raw)
}

fn judge(line: &[u8]) -> Verdict {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let line = line.strip_prefix(BOM).unwrap_or(line);
    if line.iter().all(u8::is_ascii_whitespace) {
        return Verdict::Skip;
    }
    // (A derived struct would also take an array, its elements as the fields in order.)
    let is_object = line.trim_ascii_start().starts_with(b"{");
    let envelope = is_object
        .then(|| serde_json::from_slice::<Envelope>(line).ok())
        .flatten();
    // Only a string or a number is an id to echo; anything else gets `null`.
    let id = envelope
        .as_ref()
        .and_then(|e| e.id)
        .filter(|id| matches!(id.get().as_bytes().first(), Some(b'"' | b'-' | b'0'..=b'9')));
    if let Some(id) = id
        && !id.get().starts_with('"')
        && !exact_integer(id.get())
    {
        return Verdict::Refuse(
            Some(id.to_owned()),
            ErrorCode::INVALID_REQUEST,
            format!(
                "invalid request: id {} is neither a string nor an integer written in plain digits that fits 64 bits; MCP ids are strings or integers, and this server answers with an id exactly as it was sent",
                id.get()
            ),
        );
    }
    let err = match serde_json::from_slice::<RxJsonRpcMessage<RoleServer>>(line) {
        Ok(message) => return Verdict::Message(Box::new(message)),
        Err(err) => err,
    };
    if let Err(err) = serde_json::from_slice::<serde::de::IgnoredAny>(line) {
        return Verdict::Refuse(
            None,
            ErrorCode::PARSE_ERROR,
            format!("parse error: the line is not JSON ({err}); it was skipped"),
        );
    }
    if envelope
        .as_ref()
        .is_some_and(|e| e.method.is_some() && e.id.is_none())
    {
        // A notification is never answered, even one of no shape known here.
        return Verdict::Skip;
    }
    Verdict::Refuse(
        id.map(ToOwned::to_owned),
        ErrorCode::INVALID_REQUEST,
        format!("invalid request: not a JSON-RPC 2.0 request, response or notification ({err})"),
    )
}

/// An error the SDK answers, mended before it goes. For a request of a revision it does not
/// serve it answers `-32022` with the revisions in `data`, and a message that says only
/// "Unsupported protocol version": a client's user sees the message, so it names both. Its
/// message may quote what the client sent (serde quotes a string it refuses, whole): it is
/// cut to [`RPC_ERROR_CAP`], and data longer than that left out.
fn mended(mut message: TxJsonRpcMessage<RoleServer>) -> TxJsonRpcMessage<RoleServer> {
    let JsonRpcMessage::Error(error) = &mut message else {
        return message;
    };
    let error = &mut error.error;
    if error.code == ErrorCode::UNSUPPORTED_PROTOCOL_VERSION
        && let Some(data) = &error.data
    {
        let requested = data["requested"].as_str().unwrap_or("?");
        let supported: Vec<&str> = data["supported"]
            .as_array()
            .map(|v| v.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        error.message = format!(
            "unsupported protocol version {requested}; this server supports {}",
            supported.join(", ")
        )
        .into();
    }
    if error.message.len() > RPC_ERROR_CAP {
        error.message = capped(&error.message, RPC_ERROR_CAP).into();
    }
    if (error.data.as_ref()).is_some_and(|data| data.to_string().len() > RPC_ERROR_CAP) {
        error.data = None;
    }
    message
}

impl<R: AsyncRead + Unpin + Send + 'static> Transport<RoleServer> for LineTransport<R> {
    type Error = io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        // Queued now, not when the future is first polled: the order of sends is the order
        // of lines.
        let (ack, written) = oneshot::channel();
        let queued = serde_json::to_vec(&mended(item))
            .map_err(io::Error::other)
            .map(|line| self.out.queue(line, Some(ack)));
        async move {
            match queued? {
                true => written
                    .await
                    .unwrap_or_else(|_| Err(io::Error::other("the writer has ended"))),
                false => Err(io::Error::new(
                    io::ErrorKind::NotConnected,
                    "stdout is closed",
                )),
            }
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            match self.read_line().await {
                Ok(Read::Line) => {}
                Ok(Read::Oversized) => {
                    self.answer(
                        None,
                        ErrorCode::INVALID_REQUEST,
                        format!(
                            "invalid request: a message longer than {} MiB ({} bytes) was skipped unread",
                            self.max >> 20,
                            self.max
                        ),
                    );
                    continue;
                }
                Ok(Read::Eof) => return None,
                Err(err) => {
                    eprintln!("tether mcp: cannot read stdin: {err}");
                    return None;
                }
            }
            let verdict = judge(&self.line);
            self.line.clear();
            match verdict {
                Verdict::Message(message) => return Some(*message),
                Verdict::Skip => {}
                Verdict::Refuse(id, code, message) => self.answer(id.as_deref(), code, message),
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use tokio::io::AsyncReadExt;

    /// Feeds `input` to a transport and returns the messages it passed on and every line it
    /// wrote.
    async fn through(input: Vec<u8>, max: usize) -> (Vec<Value>, Vec<Value>) {
        let (passed, written) = through_raw(input, max).await;
        let lines = written
            .iter()
            .map(|l| serde_json::from_str(l).expect("whole JSON lines"))
            .collect();
        (passed, lines)
    }

    /// [`through`], the lines written as they were.
    async fn through_raw(input: Vec<u8>, max: usize) -> (Vec<Value>, Vec<String>) {
        let (mut client, server_in) = tokio::io::duplex(1 << 16);
        let (server_out, mut client_out) = tokio::io::duplex(1 << 16);
        let (writer, writing) = Writer::start(server_out);
        let mut transport = LineTransport::new(server_in, writer).with_max(max);
        let feeding = tokio::spawn(async move {
            client.write_all(&input).await.unwrap();
            drop(client);
        });
        let mut passed = Vec::new();
        while let Some(message) = transport.receive().await {
            passed.push(serde_json::to_value(&message).unwrap());
        }
        feeding.await.unwrap();
        drop(transport);
        writing.await.unwrap();
        let mut written = String::new();
        client_out.read_to_string(&mut written).await.unwrap();
        (passed, written.lines().map(str::to_string).collect())
    }

    const PING: &str = r#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#;

    #[tokio::test]
    async fn bad_lines_are_answered_and_good_ones_served() {
        let input = format!(
            "{{not json\n\n{}\n[1,2]\n{{\"jsonrpc\":\"2.0\",\"id\":\"x\",\"nothing\":1}}\n{{\"jsonrpc\":\"2.0\",\"method\":\"whatever/else\",\"params\":3}}\n{PING}\r\n",
            "\u{feff}{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}"
        );
        let (passed, written) = through(input.into_bytes(), 1024).await;
        assert_eq!(passed.len(), 2, "{passed:?}");
        assert_eq!(passed[0]["id"], json!(1));
        assert_eq!(passed[1]["id"], json!(7));
        let codes: Vec<(Value, Value)> = written
            .iter()
            .map(|l| (l["id"].clone(), l["error"]["code"].clone()))
            .collect();
        assert_eq!(
            codes,
            [
                (Value::Null, json!(-32700)),
                (Value::Null, json!(-32600)),
                (json!("x"), json!(-32600)),
            ]
        );
    }

    #[tokio::test]
    async fn an_oversized_line_is_skipped_without_being_held() {
        // Longer than the limit and than the pipe: it arrives in many reads.
        let mut input = vec![b'{'; 300_000];
        input.push(b'\n');
        input.extend_from_slice(format!("{PING}\n").as_bytes());
        // One just at the limit passes.
        let at_limit = format!("{PING:<1000}\n");
        input.extend_from_slice(at_limit.as_bytes());
        let (passed, written) = through(input, 1000).await;
        assert_eq!(passed.len(), 2, "{passed:?}");
        assert_eq!(written.len(), 1, "{written:?}");
        assert_eq!(written[0]["error"]["code"], json!(-32600));
        assert_eq!(written[0]["id"], Value::Null);
    }

    /// JSON-RPC wants the response's id to be the request's; the SDK holds a numeric id as
    /// an i64, so one written otherwise (`1e2`, `1.0`, `-0`) would come back as another
    /// text, and one past i64 (`1e29`) not at all. Those are refused, their id echoed as
    /// written; ids the SDK holds exactly are served.
    #[tokio::test]
    async fn an_id_is_served_exactly_or_refused_with_the_id_as_written() {
        let refused = ["1e29", "1e2", "1.0", "-0", "1.5", "99999999999999999999"];
        let served = ["7", "-3", "9223372036854775807", "\"\\u0041b\""];
        let mut input = String::new();
        for id in refused.iter().chain(&served) {
            input.push_str(&format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"ping\"}}\n"
            ));
        }
        let (passed, written) = through_raw(input.into_bytes(), 1024).await;
        assert_eq!(written.len(), refused.len(), "{written:?}");
        for (line, id) in written.iter().zip(refused) {
            assert!(
                line.starts_with(&format!(
                    "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"error\":{{\"code\":-32600,"
                )),
                "{line}"
            );
        }
        let ids: Vec<Value> = passed.iter().map(|m| m["id"].clone()).collect();
        assert_eq!(
            ids,
            [json!(7), json!(-3), json!(i64::MAX), json!("Ab")],
            "{passed:?}"
        );
    }

    #[test]
    fn an_rpc_error_quoting_a_long_argument_is_cut() {
        let long = "x".repeat(1 << 20);
        let error = rmcp::model::ErrorData::invalid_params(
            format!("failed to deserialize parameters: invalid type: string \"{long}\""),
            Some(json!({ "echo": long })),
        );
        let message = mended(TxJsonRpcMessage::<RoleServer>::error(error, None));
        let line = serde_json::to_string(&message).unwrap();
        assert!(line.len() < RPC_ERROR_CAP + 200, "{} bytes", line.len());
        assert!(
            line.contains("more bytes]"),
            "{}",
            &line[line.len() - 100..]
        );
    }

    #[test]
    fn an_unsupported_version_error_names_the_versions() {
        let error = rmcp::model::ErrorData::unsupported_protocol_version(
            rmcp::model::ProtocolVersion::V_2025_03_26,
            &[
                rmcp::model::ProtocolVersion::V_2025_06_18,
                rmcp::model::ProtocolVersion::V_2026_07_28,
            ],
        );
        let message = mended(TxJsonRpcMessage::<RoleServer>::error(error, None));
        let JsonRpcMessage::Error(error) = message else {
            panic!("an error")
        };
        assert_eq!(
            error.error.message,
            "unsupported protocol version 2025-03-26; this server supports 2025-06-18, 2026-07-28"
        );
    }
}
