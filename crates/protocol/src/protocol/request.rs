//! What a broker is asked, whichever way the request comes: on the pipe from the front end
//! that launched it, or on its control socket from any front end of the same user. One type
//! and one parser for both; each way says which requests it takes ([`Transport::accepts`]),
//! and a broker refuses the others as it refuses a line it cannot read.

use serde::{Deserialize, Serialize};

use super::framing::{Frame, MAX_LINE, encode_line};
use super::{CONTROL_MAX_LINE, EventKind, LaunchRequest, Origin, ProcessSignal, Scope, WindowSize};

/// A request line to a broker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, strum::IntoStaticStr)]
#[serde(tag = "type", rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum Request {
    /// What to run: the first line on the pipe. Boxed: it is far larger than every other
    /// request.
    Launch(Box<LaunchRequest>),
    /// Send me every event from now on (the journal has the ones before: the acknowledgement
    /// says up to which byte of `events.jsonl`).
    Subscribe,
    Ping,
    /// A signal to the command's tree (`group`) or to one process of it (`pid`).
    Signal {
        signal: ProcessSignal,
        #[serde(default)]
        scope: Scope,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pid: Option<i32>,
        /// On whose behalf, on the pipe: the operator (default), or the front end's caller
        /// (a signal the shim passes on). A control client is the operator, whatever it says.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        origin: Option<Origin>,
    },
    /// Run the stop sequence; `origin` as for a signal.
    Stop {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        origin: Option<Origin>,
    },
    /// Bytes for the command's terminal, as typed or pasted: at most [`MAX_INPUT_CHUNK`]
    /// of them, base64 in the JSON. Journaled by count only (it may be a password).
    Input {
        #[serde(with = "base64_bytes")]
        data: Vec<u8>,
    },
    /// The window the command's terminals are shown in changed size; the kernel tells the
    /// command with SIGWINCH.
    Resize {
        #[serde(flatten)]
        size: WindowSize,
    },
    /// The agent says it waits for its human (its own hook, `tether agent-hook`): its
    /// broker raises `needs_input`, "waiting for you: WHAT". Taken only from a process of
    /// the broker's tree, and only by an agent's broker.
    AgentWaiting {
        what: String,
    },
}

/// The two ways to a broker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// Its stdin and stdout, held by the front end that launched it (its unreaped child).
    /// It answers pings only: the front end proves a request was read by a ping after it.
    Pipe,
    /// Its control socket. It answers every request itself (`control_ack`, `control_error`,
    /// `pong`), and never starts or types into a command: a socket reachable from inside an
    /// agent's sandbox must not become a way out of it.
    Socket,
}

impl Transport {
    /// Whether `request` is taken this way: a launch, keys and sizes only from the front end
    /// that launched the command; a subscription and an agent's word only on the socket.
    /// Every variant is named, so a new request is refused on the socket until it is
    /// decided otherwise here.
    pub fn accepts(self, request: &Request) -> bool {
        match request {
            Request::Launch(_) | Request::Input { .. } | Request::Resize { .. } => {
                self == Transport::Pipe
            }
            Request::Subscribe | Request::AgentWaiting { .. } => self == Transport::Socket,
            Request::Ping | Request::Signal { .. } | Request::Stop { .. } => true,
        }
    }

    /// The same for a line that could not be read, by its `type`: an unknown one is
    /// malformed, not on the wrong way.
    fn takes(self, name: &str) -> bool {
        let only_the_other = match self {
            Transport::Pipe => ["subscribe", "agent_waiting"].as_slice(),
            Transport::Socket => ["launch", "input", "resize"].as_slice(),
        };
        !only_the_other.contains(&name)
    }

    /// Whether the broker answers `request` itself when it comes this way.
    pub fn answers(self, request: &Request) -> bool {
        self == Transport::Socket || matches!(request, Request::Ping)
    }

    /// What this way takes, for a refusal's message.
    fn listed(self) -> &'static str {
        match self {
            Transport::Pipe => "launch, ping, signal, stop, input and resize",
            Transport::Socket => "subscribe, ping, signal, stop and agent_waiting",
        }
    }

    fn name(self) -> &'static str {
        match self {
            Transport::Pipe => "the pipe",
            Transport::Socket => "the control socket",
        }
    }

    /// The longest request line this way takes: a control request is a few dozen bytes,
    /// a launch request carries a whole environment.
    pub fn max_line(self) -> usize {
        match self {
            Transport::Pipe => MAX_LINE,
            Transport::Socket => CONTROL_MAX_LINE,
        }
    }
}

/// Why a request was not carried out: a code and a message that says what to do. A control
/// client is answered with it (`control_error`), the parent's is journaled
/// (`broker_failure`, stage `protocol`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub code: &'static str,
    pub message: String,
}

impl Refusal {
    /// A request of type `name` came on a transport that does not take it.
    pub fn not_taken(on: Transport, name: &str) -> Refusal {
        let list = on.listed();
        match (on, name) {
            (Transport::Socket, "launch") => Refusal {
                code: "launch_refused",
                message: format!("the control socket cannot start commands; it takes {list}"),
            },
            _ => Refusal {
                code: "wrong_transport",
                message: format!("{} does not take `{name}`; it takes {list}", on.name()),
            },
        }
    }

    /// The answer a control client gets.
    pub fn into_event(self) -> EventKind {
        EventKind::ControlError {
            code: self.code.into(),
            message: self.message,
        }
    }
}

impl Request {
    /// `signal` to the command's whole tree (its group and every process it started), on
    /// the operator's behalf.
    pub fn group_signal(signal: ProcessSignal) -> Request {
        Request::Signal {
            signal,
            scope: Scope::Group,
            pid: None,
            origin: None,
        }
    }

    /// Reads one request line that came on `on`. A line whose type `on` does not take is
    /// refused as such, read or not: a launch on the socket is refused by name.
    pub fn parse(frame: Frame, on: Transport) -> Result<Request, Refusal> {
        let line = match frame {
            Frame::TooLong { len } => {
                return Err(Refusal {
                    code: "line_too_long",
                    message: format!(
                        "a request line of {len} bytes exceeds the {}-byte limit; it was skipped",
                        on.max_line()
                    ),
                });
            }
            Frame::Line(line) => line,
        };
        serde_json::from_slice::<Request>(&line).map_err(|err| {
            #[derive(Deserialize)]
            struct Tagged {
                r#type: String,
            }
            match serde_json::from_slice::<Tagged>(&line) {
                Ok(Tagged { r#type }) if !on.takes(&r#type) => Refusal::not_taken(on, &r#type),
                _ => Refusal {
                    code: "malformed",
                    message: format!(
                        "cannot parse request `{}`: {err}; it was skipped ({} takes JSON lines of type {})",
                        String::from_utf8_lossy(&line[..line.len().min(80)]),
                        on.name(),
                        on.listed()
                    ),
                },
            }
        })
    }

    /// The `type` tag, as an acknowledgement names it.
    pub fn name(&self) -> &'static str {
        self.into()
    }

    /// The request as one line, newline included.
    pub fn to_line(&self) -> Vec<u8> {
        encode_line(self).unwrap_or_default()
    }
}

/// The most bytes one [`Request::Input`] carries: a bigger paste is split, so that no
/// request line is large and a broker never holds up its loop for one.
pub const MAX_INPUT_CHUNK: usize = 4096;

/// Splits input into requests of at most [`MAX_INPUT_CHUNK`] bytes each.
pub fn input_requests(bytes: &[u8]) -> impl Iterator<Item = Request> + '_ {
    bytes.chunks(MAX_INPUT_CHUNK).map(|chunk| Request::Input {
        data: chunk.to_vec(),
    })
}

/// Bytes as a base64 string in JSON (a JSON string must be text; an array of numbers would
/// take up to four times the bytes).
mod base64_bytes {
    use base64::Engine;
    use base64::engine::general_purpose::STANDARD;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(bytes: &[u8], serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&STANDARD.encode(bytes))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<u8>, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        STANDARD
            .decode(text.as_bytes())
            .map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(line: &str, on: Transport) -> Result<Request, Refusal> {
        Request::parse(Frame::Line(line.as_bytes().to_vec()), on)
    }

    #[test]
    fn requests_read_as_documented_on_either_way() {
        for on in [Transport::Pipe, Transport::Socket] {
            assert_eq!(
                parse(r#"{"type":"stop"}"#, on),
                Ok(Request::Stop { origin: None })
            );
            // The socket's clients have always left out the scope; the pipe's wrote it.
            assert_eq!(
                parse(r#"{"type":"signal","signal":"INT"}"#, on),
                parse(r#"{"type":"signal","signal":"INT","scope":"group"}"#, on),
            );
        }
        assert_eq!(Request::Subscribe.to_line(), b"{\"type\":\"subscribe\"}\n");
        let signal = Request::Signal {
            signal: ProcessSignal::INT,
            scope: Scope::Pid,
            pid: Some(7),
            origin: None,
        };
        assert_eq!(
            signal.to_line(),
            b"{\"type\":\"signal\",\"signal\":\"INT\",\"scope\":\"pid\",\"pid\":7}\n"
        );
    }

    #[test]
    fn each_way_takes_its_own_and_a_launch_on_the_socket_is_refused_by_name() {
        let launch = r#"{"type":"launch","v":2}"#;
        assert_eq!(
            parse(launch, Transport::Socket).unwrap_err().code,
            "launch_refused"
        );
        assert_eq!(
            parse(launch, Transport::Pipe).unwrap_err().code,
            "malformed"
        );
        let resize = r#"{"type":"resize","cols":"wide"}"#;
        assert_eq!(
            parse(resize, Transport::Socket).unwrap_err().code,
            "wrong_transport"
        );
        let keys = parse(r#"{"type":"input","data":"aGk="}"#, Transport::Socket).unwrap();
        assert!(!Transport::Socket.accepts(&keys) && Transport::Pipe.accepts(&keys));
        let waiting = parse(r#"{"type":"agent_waiting","what":"x"}"#, Transport::Pipe).unwrap();
        assert!(Transport::Socket.accepts(&waiting) && !Transport::Pipe.accepts(&waiting));
        let refusal = Refusal::not_taken(Transport::Pipe, waiting.name());
        assert_eq!(refusal.code, "wrong_transport");
        assert!(
            refusal.message.contains("`agent_waiting`"),
            "{}",
            refusal.message
        );
        let garbage = parse("garbage", Transport::Socket).unwrap_err();
        assert_eq!(garbage.code, "malformed");
        assert!(
            garbage.message.contains("subscribe, ping"),
            "{}",
            garbage.message
        );
        let long = Request::parse(Frame::TooLong { len: 1 << 20 }, Transport::Socket);
        assert!(long.unwrap_err().message.contains("65536-byte limit"));
    }

    #[test]
    fn a_type_read_by_name_is_taken_where_the_request_is_accepted() {
        let every = [
            Request::Launch(Box::new(
                serde_json::from_str(
                    r#"{"v":4,"name":"a","command":{"argv":["true"]},"journal_dir":"/s/a","parent_pid":7}"#,
                )
                .unwrap(),
            )),
            Request::Subscribe,
            Request::Ping,
            Request::group_signal(ProcessSignal::TERM),
            Request::Stop { origin: None },
            Request::Input { data: vec![b'x'] },
            Request::Resize {
                size: WindowSize { cols: 80, rows: 24 },
            },
            Request::AgentWaiting { what: "x".into() },
        ];
        for on in [Transport::Pipe, Transport::Socket] {
            for request in &every {
                assert_eq!(
                    on.takes(request.name()),
                    on.accepts(request),
                    "{on:?} {}",
                    request.name()
                );
            }
        }
    }

    #[test]
    fn input_is_base64_in_json_and_comes_back_byte_for_byte() {
        let data: Vec<u8> = (0..=255u8).chain([0x1b, b'[', b'A', 0, 0xff]).collect();
        let line = serde_json::to_string(&Request::Input { data: data.clone() }).unwrap();
        assert!(line.starts_with(r#"{"type":"input","data":""#), "{line}");
        assert!(line.is_ascii());
        match serde_json::from_str::<Request>(&line).unwrap() {
            Request::Input { data: back } => assert_eq!(back, data),
            other => panic!("{other:?}"),
        }
        let bad = serde_json::from_str::<Request>(r#"{"type":"input","data":"not base64!"}"#);
        assert!(bad.is_err());
    }

    #[test]
    fn a_big_paste_is_split_into_bounded_requests_that_add_up() {
        let paste = vec![b'x'; 10 << 20];
        let mut total = 0;
        let mut count = 0;
        for request in input_requests(&paste) {
            let Request::Input { data } = &request else {
                panic!("{request:?}")
            };
            assert!(!data.is_empty() && data.len() <= MAX_INPUT_CHUNK);
            total += data.len();
            count += 1;
        }
        assert_eq!(total, paste.len());
        assert_eq!(count, (10 << 20) / MAX_INPUT_CHUNK);
        let line = serde_json::to_vec(&input_requests(&paste).next().unwrap()).unwrap();
        assert!(line.len() < 8 * 1024, "{} bytes", line.len());
        assert_eq!(input_requests(b"").count(), 0);
    }

    #[test]
    fn resize_reads_flat() {
        let resize = Request::Resize {
            size: WindowSize {
                cols: 120,
                rows: 40,
            },
        };
        let line = serde_json::to_string(&resize).unwrap();
        assert_eq!(line, r#"{"type":"resize","cols":120,"rows":40}"#);
        assert_eq!(serde_json::from_str::<Request>(&line).unwrap(), resize);
    }
}
