//! `tether mcp` driven over stdio as an MCP client drives it: JSON-RPC lines in, lines out,
//! once per protocol era (the `initialize` handshake of 2025-06-18 and 2025-11-25, and
//! 2026-07-28's discovery without one). Every exchange goes to a transcript; with
//! `TETHER_MCP_TRANSCRIPT=PATH` the first era's is copied there (docs/mcp-transcript.md).

// The server is in the build with the cargo feature `mcp` (a default one) only.
#![cfg(feature = "mcp")]

use crate::common;

use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use common::journal::{events_now, leftovers_stopped, load_complete};
use common::procs::wait_gone;
use common::{DEADLINE, TAG_VAR, TestEnv};
use serde_json::{Value, json};
use tether::protocol::{EventKind, LeftoversEnd};

/// An MCP client on the server's stdin and stdout.
struct Client {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    next_id: u64,
    /// `Some(version)`: 2026-07-28 style, each request carries its own `_meta`.
    inline_meta: Option<&'static str>,
    transcript: String,
    /// False while a run of like exchanges goes unrecorded (the 160 pages of 10 MiB).
    recording: bool,
    /// Messages read while waiting for a response (notifications, progress).
    seen: Vec<Value>,
}

/// The most bytes of JSON a tool call's result may take (docs/agents.md).
const REPLY_BUDGET: usize = 40_000;

/// A transcript line of at most this many characters; the middle of a longer one is elided.
const TRANSCRIPT_LINE: usize = 1500;

fn abridged(line: &str) -> String {
    if line.len() <= TRANSCRIPT_LINE {
        return line.to_string();
    }
    let cut = |at: usize| {
        (0..=at)
            .rev()
            .find(|&i| line.is_char_boundary(i))
            .unwrap_or(0)
    };
    let head = cut(1000);
    let tail = cut(line.len() - 300);
    format!(
        "{} … [{} bytes elided in this transcript] … {}",
        &line[..head],
        tail - head,
        &line[tail..]
    )
}

impl Client {
    fn start(env: &TestEnv) -> Client {
        Client::start_in(env, None)
    }

    /// A server in `session` (`$TETHER_SESSION`), or a new session of its own.
    fn start_in(env: &TestEnv, session: Option<&str>) -> Client {
        Client::start_with(env, session, &[])
    }

    /// [`Client::start_in`], with variables of its own.
    fn start_with(env: &TestEnv, session: Option<&str>, vars: &[(&str, &str)]) -> Client {
        let mut command = env.tether(&["mcp"]);
        if let Some(session) = session {
            command.env("TETHER_SESSION", session);
        }
        command.envs(vars.iter().copied());
        let mut child = command
            .env(TAG_VAR, &env.tag)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(env.path("mcp.stderr")).expect("stderr file"))
            .spawn()
            .expect("start tether mcp");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Client {
            stdin: child.stdin.take(),
            child,
            lines,
            next_id: 1,
            inline_meta: None,
            transcript: String::new(),
            recording: true,
            seen: Vec::new(),
        }
    }

    fn send_raw(&mut self, line: &str) {
        if self.recording {
            let _ = writeln!(self.transcript, "→ {}", abridged(line));
        }
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(line.as_bytes()).expect("write");
        stdin.write_all(b"\n").expect("write");
        stdin.flush().expect("flush");
    }

    fn notify(&mut self, method: &str, params: Value) {
        let line = json!({"jsonrpc": "2.0", "method": method, "params": params}).to_string();
        self.send_raw(&line);
    }

    /// Sends a request and returns its response, notifications before it kept in the
    /// transcript.
    fn request(&mut self, method: &str, params: Value) -> Value {
        let version = self.inline_meta;
        self.request_as(method, params, version)
    }

    /// [`Self::request`], naming `version` in the request's own `_meta` (2026-07-28 style)
    /// whatever the session's era.
    fn request_as(&mut self, method: &str, mut params: Value, version: Option<&str>) -> Value {
        if let Some(version) = version {
            let meta = json!({
                "io.modelcontextprotocol/protocolVersion": version,
                "io.modelcontextprotocol/clientInfo": {"name": "tether-test", "version": "1"},
                "io.modelcontextprotocol/clientCapabilities": {},
            });
            match params["_meta"].as_object_mut() {
                Some(given) => given.extend(meta.as_object().cloned().unwrap_or_default()),
                None => params["_meta"] = meta,
            }
        }
        let id = self.next_id;
        self.next_id += 1;
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send_raw(&line.to_string());
        self.response(json!(id))
    }

    fn response(&mut self, id: Value) -> Value {
        let deadline = Instant::now() + DEADLINE * 3;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = match self.lines.recv_timeout(left) {
                Ok(line) => line,
                Err(RecvTimeoutError::Timeout) => panic!("no response to {id} in time"),
                Err(RecvTimeoutError::Disconnected) => panic!("the server closed stdout"),
            };
            if self.recording {
                let _ = writeln!(self.transcript, "← {}", abridged(&line));
            }
            let message: Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("stdout carries only JSON-RPC: {e}: {line}"));
            if message.get("id") == Some(&id) && message.get("method").is_none() {
                return message;
            }
            self.seen.push(message);
        }
    }

    /// A tool call's result (the JSON-RPC `result`).
    fn call(&mut self, tool: &str, arguments: Value) -> Value {
        let response = self.request("tools/call", json!({"name": tool, "arguments": arguments}));
        response
            .get("result")
            .cloned()
            .unwrap_or_else(|| panic!("{tool} answered with an error: {response}"))
    }

    /// A successful call's `structuredContent`, checked to be mirrored as a text block and
    /// to fit the reply budget.
    fn ok(&mut self, tool: &str, arguments: Value) -> Value {
        let result = self.call(tool, arguments);
        assert_eq!(result["isError"], json!(false), "{tool}: {result}");
        let size = result.to_string().len();
        assert!(size <= REPLY_BUDGET, "{tool}: a result of {size} bytes");
        let structured = result["structuredContent"].clone();
        let text = result["content"][0]["text"].as_str().expect("a text block");
        assert_eq!(
            serde_json::from_str::<Value>(text).expect("the text is JSON"),
            structured
        );
        structured
    }

    /// A call that must fail as a tool error; returns its message.
    fn tool_error(&mut self, tool: &str, arguments: Value) -> String {
        let result = self.call(tool, arguments);
        assert_eq!(
            result["isError"],
            json!(true),
            "{tool} should fail: {result}"
        );
        result["content"][0]["text"]
            .as_str()
            .expect("a message")
            .to_string()
    }

    /// Closes stdin, as a client that goes away does, and waits for the server to exit.
    fn close(mut self) -> String {
        drop(self.stdin.take());
        let started = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                assert!(status.success(), "tether mcp exited with {status}");
                break;
            }
            assert!(started.elapsed() < DEADLINE, "tether mcp did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
        self.transcript
    }
}

fn handshake(client: &mut Client, version: &'static str) {
    let response = client.request(
        "initialize",
        json!({
            "protocolVersion": version,
            "capabilities": {},
            "clientInfo": {"name": "tether-test", "version": "1"},
        }),
    );
    assert_eq!(response["result"]["protocolVersion"], json!(version));
    client.notify("notifications/initialized", json!({}));
}

fn discover(client: &mut Client) {
    client.inline_meta = Some("2026-07-28");
    let response = client.request("server/discover", json!({}));
    let versions = &response["result"]["supportedVersions"];
    assert!(
        versions
            .as_array()
            .is_some_and(|v| v.contains(&json!("2026-07-28"))),
        "{response}"
    );
}

/// Everything a session does, in whichever era the client opened it, with a command that
/// prints `big` bytes to page through.
fn exercise(env: &TestEnv, client: &mut Client, big: u64) {
    // Tools, with their schemas and annotations.
    let tools = client.request("tools/list", json!({}))["result"]["tools"].clone();
    let tool = |name: &str| {
        tools
            .as_array()
            .and_then(|t| t.iter().find(|t| t["name"] == json!(name)))
            .cloned()
            .unwrap_or_else(|| panic!("no tool {name} in {tools}"))
    };
    for name in ["run", "output", "signal", "list"] {
        let t = tool(name);
        assert_eq!(t["inputSchema"]["type"], json!("object"), "{name}");
        assert_eq!(t["outputSchema"]["type"], json!("object"), "{name}");
        assert!(t["description"].as_str().is_some_and(|d| d.len() > 40));
    }
    assert_eq!(tool("list")["annotations"]["readOnlyHint"], json!(true));
    assert_eq!(tool("output")["annotations"]["readOnlyHint"], json!(true));
    assert_eq!(
        tool("signal")["annotations"]["destructiveHint"],
        json!(true)
    );

    // A command that ends within its wait: exit code, tails with escapes stripped.
    let done = client.ok(
        "run",
        json!({"command": "echo hello; printf '\\033[31mred\\033[0m\\n' >&2; exit 3"}),
    );
    assert_eq!(done["state"], json!("finished"), "{done}");
    assert_eq!(done["exit_code"], json!(3));
    assert_eq!(done["stdout_tail"], json!("hello\n"));
    assert_eq!(done["stderr_tail"], json!("red\n"));
    assert_eq!(done["still_running"], json!(false));
    assert!(std::path::Path::new(done["journal"].as_str().expect("journal")).is_dir());

    // Bad input: tool errors, and the server carries on.
    let id = done["id"].clone();
    let message = client.tool_error("output", json!({"id": id, "grep": "("}));
    assert!(message.contains("regex"), "{message}");
    let message = client.tool_error("output", json!({"id": id, "max_bytes": 65537}));
    assert!(message.contains("max_bytes"), "{message}");
    let message = client.tool_error("run", json!({"command": "true", "wait_ms": 60001}));
    assert!(message.contains("wait_ms"), "{message}");
    let message = client.tool_error("signal", json!({"id": "99-nothing", "signal": "TERM"}));
    assert!(message.contains("no command 99-nothing"), "{message}");
    let message = client.tool_error("output", json!({"id": "../01-theirs"}));
    assert!(message.contains("is not a command id"), "{message}");
    let other = env.state_dir().join("sessions/someone-else/01-theirs");
    std::fs::create_dir_all(&other).expect("another session's command");
    let message = client.tool_error("output", json!({"id": "01-theirs"}));
    assert!(message.contains("another session"), "{message}");
    let invalid = client.request(
        "tools/call",
        json!({"name": "signal", "arguments": {"id": id, "signal": "USR1"}}),
    );
    assert!(
        invalid.get("error").is_some() || invalid["result"]["isError"] == json!(true),
        "{invalid}"
    );
    // A line that is not JSON, and one over the 4 MiB limit: JSON-RPC errors, id null.
    client.send_raw("{this is not json");
    let parse = client.response(Value::Null);
    assert_eq!(parse["error"]["code"], json!(-32700), "{parse}");
    let huge = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":77,\"method\":\"tools/list\",\"params\":{{\"pad\":\"{}\"}}}}",
        "x".repeat(5 << 20)
    );
    client.send_raw(&huge);
    let oversized = client.response(Value::Null);
    assert_eq!(oversized["error"]["code"], json!(-32600), "{oversized}");
    assert!(
        oversized["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("4 MiB")),
        "{oversized}"
    );
    // (2026-07-28 has no `ping`: any request shows the server still serves.)
    let again = client.request("tools/list", json!({}));
    assert!(again.get("result").is_some(), "still serving: {again}");

    // Progress while `run` waits, for a client that asked with a token.
    client.seen.clear();
    let response = client.request(
        "tools/call",
        json!({
            "name": "run",
            "arguments": {"command": "sleep 3", "wait_ms": 10000},
            "_meta": {"progressToken": "waiting-for-sleep"},
        }),
    );
    assert_eq!(
        response["result"]["structuredContent"]["state"],
        json!("finished"),
        "{response}"
    );
    let progress: Vec<&Value> = client
        .seen
        .iter()
        .filter(|m| m["method"] == json!("notifications/progress"))
        .collect();
    assert!(!progress.is_empty(), "no progress in {:?}", client.seen);
    for note in &progress {
        assert_eq!(note["params"]["progressToken"], json!("waiting-for-sleep"));
        assert_eq!(note["params"]["total"], json!(10000.0), "{note}");
        assert!(
            note["params"]["progress"].as_f64() < Some(10000.0),
            "{note}"
        );
    }

    // A command that outlives its wait is left running, and can be waited on again.
    let long = client.ok(
        "run",
        json!({"command": "echo begun; sleep 30", "wait_ms": 300}),
    );
    assert_eq!(long["still_running"], json!(true), "{long}");
    // 300 ms need not see the spawn on a loaded machine: `starting` until the broker says
    // `spawned`. That it runs is asserted below, once it printed and a wait went by.
    assert!(
        ["starting", "running"].contains(&long["state"].as_str().unwrap_or_default()),
        "{long}"
    );
    let page = client.ok("output", json!({"id": long["id"], "wait_ms": 5000}));
    assert_eq!(page["text"], json!("begun\n"), "{page}");
    let waited = client.ok(
        "output",
        json!({"id": long["id"], "offset": page["next_offset"], "wait_ms": 200}),
    );
    assert_eq!(waited["text"], json!(""));
    assert_eq!(waited["state"], json!("running"));
    let termed = client.ok("signal", json!({"id": long["id"], "signal": "TERM"}));
    assert_eq!(termed["confirmed"], json!(true), "{termed}");
    assert_eq!(termed["sent"][0]["signal"], json!("TERM"), "{termed}");

    // `big` bytes of output, paged.
    let size = big;
    let big = client.ok(
        "run",
        json!({
            "command": format!("yes 0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijkl | head -c {size}"),
            "wait_ms": 60000,
        }),
    );
    assert_eq!(big["state"], json!("finished"), "{big}");
    assert_eq!(big["stdout_bytes"], json!(size));
    assert_eq!(big["stdout_cut"], json!(true));
    assert!(big["stdout_tail"].as_str().is_some_and(|t| t.len() <= 4096));
    let mut offset = 0u64;
    let mut pages = 0;
    let mut bytes = 0usize;
    loop {
        client.recording = pages < 2;
        let page = client.ok(
            "output",
            json!({"id": big["id"], "offset": offset, "max_bytes": 65536}),
        );
        bytes += page["text"].as_str().expect("text").len();
        offset = page["next_offset"].as_u64().expect("next_offset");
        pages += 1;
        if page["cut"] == json!(false) {
            break;
        }
    }
    client.recording = true;
    let _ = writeln!(client.transcript, "… {} more pages like these …", pages - 2);
    // Each page ends at a line's end within the reply's budget, short of 64 KiB.
    assert_eq!((offset, bytes as u64), (size, size));
    assert!(pages > size / 65_536, "{pages} pages");
    let grepped = client.ok(
        "output",
        json!({"id": big["id"], "max_bytes": 1000, "grep": "^0123"}),
    );
    assert_eq!(grepped["matched_lines"], json!(10), "{grepped}");

    // An escapee in a session of its own is stopped with its command.
    let escaping = client.ok(
        "run",
        json!({"command": "setsid sleep 300 & echo $!; sleep 300", "wait_ms": 500}),
    );
    let page = client.ok("output", json!({"id": escaping["id"], "wait_ms": 5000}));
    let escapee: i32 = page["text"]
        .as_str()
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or_else(|| panic!("the escapee's pid: {page}"));
    let stopped = client.ok("signal", json!({"id": escaping["id"], "signal": "stop"}));
    assert_eq!(stopped["confirmed"], json!(true), "{stopped}");
    assert_eq!(stopped["state"], json!("finished"), "{stopped}");
    assert!(wait_gone(&[escapee], Duration::from_secs(5)).is_empty());

    // One left running for the client's departure to stop.
    let orphan = client.ok("run", json!({"command": "sleep 300", "wait_ms": 100}));
    assert_eq!(orphan["still_running"], json!(true));
    // Listed once it runs: after 100 ms a loaded machine may not have spawned it yet
    // (`starting`). Looked at off the transcript until then.
    client.recording = false;
    let deadline = Instant::now() + DEADLINE;
    let state_of_orphan = |listed: &serde_json::Value| {
        listed["commands"]
            .as_array()
            .and_then(|all| all.iter().find(|c| c["id"] == orphan["id"]))
            .map(|c| c["state"].clone())
            .expect("the last command is listed")
    };
    while state_of_orphan(&client.ok("list", json!({}))) == json!("starting") {
        assert!(Instant::now() < deadline, "the last command never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    client.recording = true;

    let listed = client.ok("list", json!({}));
    let commands = listed["commands"].as_array().expect("commands");
    assert_eq!(commands.len(), 6, "{listed}");
    assert_eq!(commands[0]["exit_code"], json!(3));
    assert!(commands[3]["cpu_ms"].is_u64(), "{listed}");
    assert_eq!(commands[5]["state"], json!("running"));
}

fn session(era: &'static str) {
    let env = TestEnv::new(&format!("mcp-{era}"));
    let mut client = Client::start(&env);
    if era == "2026-07-28" {
        discover(&mut client);
    } else {
        handshake(&mut client, era);
    }
    // 10 MiB, 160 pages, in the era whose transcript is the docs' (the pages are read the
    // same in every era: the others page 1 MiB, which spares each some 5 s of a debug
    // server's CPU).
    let big = if era == "2025-11-25" {
        10 << 20
    } else {
        1 << 20
    };
    exercise(&env, &mut client, big);
    let transcript = client.close();
    let path = env.path("transcript.md");
    std::fs::write(&path, &transcript).expect("write the transcript");
    if let Some(out) = std::env::var_os("TETHER_MCP_TRANSCRIPT")
        && era == "2025-11-25"
    {
        let doc = format!(
            "# A `tether mcp` session\n\nWritten by `tests/mcp.rs` (`TETHER_MCP_TRANSCRIPT=docs/mcp-transcript.md cargo test --test suite mcp::`): every line the test client sent (→) and the server answered (←), protocol {era}, the middle of long lines elided.\n\n```text\n{transcript}```\n"
        );
        std::fs::write(out, doc).expect("copy the transcript");
    }
    env.finish();
}

#[test]
fn handshake_2025_06_18() {
    session("2025-06-18");
}

#[test]
fn handshake_2025_11_25() {
    session("2025-11-25");
}

#[test]
fn discovery_2026_07_28() {
    session("2026-07-28");
}

/// The error a request for an unsupported revision gets: -32022, naming what is served.
fn assert_unsupported(response: &Value, requested: &str) {
    let error = &response["error"];
    assert_eq!(error["code"], json!(-32022), "{response}");
    assert_eq!(error["data"]["requested"], json!(requested), "{response}");
    let message = error["message"].as_str().unwrap_or("");
    for served in ["2025-06-18", "2025-11-25", "2026-07-28"] {
        assert!(
            error["data"]["supported"]
                .as_array()
                .is_some_and(|s| s.contains(&json!(served))),
            "{response}"
        );
        assert!(message.contains(served), "{response}");
    }
}

/// `initialize` naming a revision this server does not know is answered with the newest
/// one it serves by handshake (2025-06-18 and 2025-11-25: "the server MUST respond with
/// another protocol version it supports"); the session then works, and a call still
/// waiting when the client goes ends with the server, its command too.
#[test]
fn unknown_version_at_initialize_and_departure_mid_call() {
    let env = TestEnv::new("mcp-bad");
    let mut client = Client::start(&env);
    let response = client.request(
        "initialize",
        json!({
            "protocolVersion": "1999-01-01",
            "capabilities": {},
            "clientInfo": {"name": "tether-test", "version": "1"},
        }),
    );
    assert_eq!(
        response["result"]["protocolVersion"],
        json!("2025-11-25"),
        "{response}"
    );
    client.notify("notifications/initialized", json!({}));
    let listed = client.request("tools/list", json!({}));
    assert!(listed["result"]["tools"].is_array(), "{listed}");
    let line = json!({"jsonrpc": "2.0", "id": 99, "method": "tools/call",
        "params": {"name": "run", "arguments": {"command": "sleep 300", "wait_ms": 60000}}});
    client.send_raw(&line.to_string());
    // Mid-call: the command runs. A bare journal directory (its number reserved, before the
    // rename and the spawn) would have the client leave before there is a command to stop.
    let dir = env.wait_command_dir();
    common::wait_until(&env, "the command's spawn in its journal", || {
        events_now(&dir)
            .iter()
            .any(|e| matches!(e.kind, EventKind::Spawned { .. }))
    });
    client.close();
    // Stopped on the client's behalf: its doing, not a failure.
    common::wait_until(&env, "the command's result", || {
        dir.join("result.json").exists()
    });
    let record = load_complete(&dir);
    let command = tether::model::replay::command_so_far(&record);
    assert_eq!(command.state_words(), "stopped (SIGTERM)");
    env.finish();
}

/// 2026-07-28: every request names its revision; one this server does not serve is
/// refused (-32022) with the ones it does, before the first valid request and after, and
/// the session goes on.
#[test]
fn unknown_version_in_discovery_era() {
    let env = TestEnv::new("mcp-bad-2026");
    let mut client = Client::start(&env);
    let first = client.request_as("tools/list", json!({}), Some("2099-01-01"));
    assert_unsupported(&first, "2099-01-01");
    discover(&mut client);
    let later = client.request_as("tools/list", json!({}), Some("2030-02-02"));
    assert_unsupported(&later, "2030-02-02");
    let fine = client.request("tools/list", json!({}));
    assert!(fine["result"]["tools"].is_array(), "{fine}");
    client.close();
    env.finish();
}

/// The pids in a result's `left_running`.
fn left_running(result: &Value) -> Vec<i32> {
    result["left_running"]
        .as_array()
        .map(|pids| {
            pids.iter()
                .filter_map(|p| p.as_i64())
                .map(|p| p as i32)
                .collect()
        })
        .unwrap_or_default()
}

fn alive(pid: i32) -> bool {
    wait_gone(&[pid], Duration::ZERO).contains(&pid)
}

/// What a command leaves running (`&`) is kept, as a shell would keep it, with this server
/// as its custodian: `run` returns once the main process has exited, `list` shows what was
/// left, `signal stop` ends it through the broker's socket, and the rest is stopped when
/// the server exits (its client gone), the journal naming the server's exit as the reason.
#[test]
fn what_a_command_leaves_running_is_kept_until_the_server_exits() {
    let env = TestEnv::new("mcp-custody");
    let mut client = Client::start(&env);
    handshake(&mut client, "2025-11-25");
    let asked = Instant::now();
    let kept = client.ok(
        "run",
        json!({"command": "sleep 300 & echo started", "wait_ms": 30000}),
    );
    assert!(
        asked.elapsed() < Duration::from_secs(10),
        "run waited for the leftover"
    );
    assert_eq!(kept["state"], json!("left_running"), "{kept}");
    assert_eq!(kept["still_running"], json!(false), "{kept}");
    assert_eq!(kept["exit_code"], json!(0), "{kept}");
    assert_eq!(kept["stdout_tail"], json!("started\n"), "{kept}");
    let leftover = left_running(&kept);
    assert_eq!(leftover.len(), 1, "{kept}");
    assert!(alive(leftover[0]));

    let other = client.ok("run", json!({"command": "sleep 300 & echo two"}));
    let other_leftover = left_running(&other);
    assert_eq!(other_leftover.len(), 1, "{other}");

    let listed = client.ok("list", json!({}));
    let commands = listed["commands"].as_array().expect("commands");
    assert_eq!(commands.len(), 2, "{listed}");
    assert_eq!(commands[0]["state"], json!("left_running"), "{listed}");
    assert_eq!(left_running(&commands[0]), leftover, "{listed}");

    let stopped = client.ok("signal", json!({"id": other["id"], "signal": "stop"}));
    assert_eq!(stopped["confirmed"], json!(true), "{stopped}");
    assert_eq!(stopped["state"], json!("finished"), "{stopped}");
    assert_eq!(stopped["sent"][0]["signal"], json!("TERM"), "{stopped}");
    assert!(wait_gone(&other_leftover, Duration::from_secs(5)).is_empty());
    assert!(alive(leftover[0]), "only the one signalled was stopped");

    let server = client.child.id() as i32;
    client.close();
    assert!(
        wait_gone(&leftover, Duration::from_secs(10)).is_empty(),
        "the leftover outlived the server"
    );
    let journal = std::path::PathBuf::from(kept["journal"].as_str().expect("journal"));
    common::wait_until(&env, "the kept command's result", || {
        journal.join("result.json").exists()
    });
    assert_eq!(
        leftovers_stopped(&events_now(&journal)),
        Some((LeftoversEnd::CallerExited, Some(server)))
    );
    env.finish();
}

/// A session shared through `$TETHER_SESSION` with other front ends (here two `tether
/// exec`): `list` shows their commands too, `output` reads them from their journals, and
/// `signal` reaches them through their brokers' control sockets.
#[test]
fn a_shared_session_reaches_every_command() {
    let env = TestEnv::new("mcp-shared");
    let session = "shared-1";
    let exec = |script: &str| {
        let mut command = env.exec_command(&[], &["sh", "-c", script]);
        command.env("TETHER_SESSION", session);
        env.spawn_captured(command)
    };
    let first = exec("echo from-exec; sleep 300");
    common::wait_until(&env, "the first exec's output", || {
        env.command_dirs().len() == 1
            && std::fs::read(env.command_dirs()[0].join("stdout.log"))
                .is_ok_and(|out| out == b"from-exec\n")
    });
    let second = exec("echo second; sleep 300");
    common::wait_until(&env, "the second exec's output", || {
        env.command_dirs()
            .iter()
            .any(|dir| std::fs::read(dir.join("stdout.log")).is_ok_and(|out| out == b"second\n"))
    });
    let mut client = Client::start_in(&env, Some(session));
    handshake(&mut client, "2025-11-25");
    let mine = client.ok("run", json!({"command": "echo mine"}));
    assert_eq!(mine["state"], json!("finished"), "{mine}");

    let listed = client.ok("list", json!({}));
    assert_eq!(listed["session"], json!(session));
    let commands = listed["commands"].as_array().expect("commands").clone();
    assert_eq!(commands.len(), 3, "{listed}");
    let by_command = |text: &str| {
        commands
            .iter()
            .find(|c| c["command"].as_str().is_some_and(|c| c.contains(text)))
            .cloned()
            .unwrap_or_else(|| panic!("no command with {text} in {listed}"))
    };
    let (theirs, seconds, ours) = (
        by_command("from-exec"),
        by_command("second"),
        by_command("echo mine"),
    );
    assert_eq!(theirs["state"], json!("running"), "{theirs}");
    assert_eq!(theirs["started_here"], json!(false));
    assert_eq!(ours["started_here"], json!(true));

    let page = client.ok("output", json!({"id": theirs["id"]}));
    assert_eq!(page["text"], json!("from-exec\n"), "{page}");
    assert_eq!(page["state"], json!("running"), "{page}");

    let termed = client.ok("signal", json!({"id": theirs["id"], "signal": "TERM"}));
    assert_eq!(termed["confirmed"], json!(true), "{termed}");
    assert_eq!(termed["sent"][0]["signal"], json!("TERM"), "{termed}");
    assert!(
        termed["sent"][0]["processes"].as_u64() >= Some(1),
        "{termed}"
    );
    first.wait(&env);

    let stopped = client.ok("signal", json!({"id": seconds["id"], "signal": "stop"}));
    assert_eq!(stopped["confirmed"], json!(true), "{stopped}");
    assert_eq!(stopped["state"], json!("finished"), "{stopped}");
    second.wait(&env);

    let listed = client.ok("list", json!({}));
    for command in listed["commands"].as_array().expect("commands") {
        assert_eq!(command["state"], json!("finished"), "{listed}");
    }
    // Another session's commands stay out of reach.
    let elsewhere = env.exec(&[], &["true"]);
    assert_eq!(elsewhere.code(), 0);
    let other = env
        .command_dirs()
        .into_iter()
        .find(|dir| !dir.starts_with(env.state_dir().join("sessions").join(session)))
        .expect("the other session's command");
    let id = other
        .file_name()
        .expect("a name")
        .to_string_lossy()
        .into_owned();
    let refused = client.tool_error("output", json!({"id": id}));
    assert!(refused.contains("another session"), "{refused}");
    client.close();
    env.finish();
}

/// `list` says each command as every view does: what an agent asked for, past its wrapper
/// (Claude Code's, as recorded), and an agent's own set-up shell marked as one.
#[test]
fn list_shows_an_agents_command_past_its_wrapper_and_marks_set_up_shells() {
    let env = TestEnv::new("mcp-wrapped");
    let session = "wrapped-1";
    let wrapper = format!(
        "shopt -u extglob 2>/dev/null || true && eval 'echo wrapped' < /dev/null && pwd -P >| {}",
        env.path("cwd").display()
    );
    for argv in [["bash", "-c", wrapper.as_str()], ["bash", "-c", "env"]] {
        let mut command = env.exec_command(&[], &argv);
        command.env("TETHER_SESSION", session);
        let done = env.spawn_captured(command).wait(&env);
        assert_eq!(done.code(), 0);
    }
    let mut client = Client::start_in(&env, Some(session));
    handshake(&mut client, "2025-11-25");
    let listed = client.ok("list", json!({}));
    let commands = listed["commands"].as_array().expect("commands");
    let shown: Vec<(&str, bool)> = commands
        .iter()
        .map(|c| {
            let text = c["command"].as_str().unwrap_or_default();
            (text, c["setup"].as_bool().unwrap_or(false))
        })
        .collect();
    assert_eq!(shown, [("echo wrapped", false), ("env", true)], "{listed}");
    client.close();
    env.finish();
}

/// Arguments of the wrong shape are invalid params (-32602), not an unknown method; an id
/// the SDK would answer with another text of it (`1e29`) is refused with the id as sent;
/// a no-output timeout of zero, which would stop the command at once, is refused.
#[test]
fn bad_params_odd_ids_and_a_zero_timeout_are_refused() {
    let env = TestEnv::new("mcp-refusals");
    let mut client = Client::start(&env);
    handshake(&mut client, "2025-11-25");

    let response = client.request("tools/call", json!({"name": "list", "arguments": "x"}));
    assert_eq!(response["error"]["code"], json!(-32602), "{response}");
    let message = response["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("invalid params for tools/call"),
        "{response}"
    );
    let response = client.request("prompts/everything", json!({}));
    assert_eq!(response["error"]["code"], json!(-32601), "{response}");

    client.send_raw(r#"{"jsonrpc":"2.0","id":1e29,"method":"ping"}"#);
    let refused = client.response(json!(1e29));
    assert_eq!(refused["error"]["code"], json!(-32600), "{refused}");
    let line = client.transcript.lines().last().unwrap_or_default();
    assert!(line.contains(r#""id":1e29,"#), "{line}");

    let message = client.tool_error(
        "run",
        json!({"command": "echo hi", "no_output_timeout": "0s"}),
    );
    assert!(message.contains("no_output_timeout 0s"), "{message}");
    let listed = client.ok("list", json!({}));
    assert_eq!(
        listed["commands"],
        json!([]),
        "nothing was started: {listed}"
    );
    client.close();
    env.finish();
}

/// Output that JSON makes heavier (tabs shown as spaces, 0xFF as U+FFFD, base64's long
/// line) is paged within the reply budget, every byte once; a long name and command line
/// come back cut with a mark; `list` pages a session whatever its size, every command once.
#[test]
fn replies_fit_the_budget() {
    let env = TestEnv::new("mcp-budget");
    let mut client = Client::start(&env);
    handshake(&mut client, "2025-11-25");
    for (what, command) in [
        ("tabs", r"head -c 100000 /dev/zero | tr '\0' '\t'"),
        ("0xFF", r"head -c 150000 /dev/zero | tr '\0' '\377'"),
        ("base64", "head -c 150000 /dev/zero | base64 -w0"),
    ] {
        let run = client.ok("run", json!({"command": command, "wait_ms": 60000}));
        assert_eq!(run["state"], json!("finished"), "{what}: {run}");
        let stored = run["stdout_bytes"].as_u64().expect("stdout_bytes");
        let mut offset = 0;
        while offset < stored {
            let page = client.ok(
                "output",
                json!({"id": run["id"], "offset": offset, "max_bytes": 65536}),
            );
            let next = page["next_offset"].as_u64().expect("next_offset");
            assert!(
                next > offset && next - offset <= 65536,
                "{what}: {offset} -> {next}"
            );
            assert_eq!(page["cut"], json!(next < stored), "{what}");
            offset = next;
        }
        assert_eq!(offset, stored, "{what}");
    }

    let name = "n".repeat(1000);
    let long = format!("true {}", "x".repeat(3000));
    let run = client.ok("run", json!({"command": long, "name": name}));
    assert!(
        run["name"]
            .as_str()
            .is_some_and(|n| n.ends_with("…[872 more bytes]")),
        "{run}"
    );
    assert!(
        run["command"]
            .as_str()
            .is_some_and(|c| c.ends_with("…[1981 more bytes]")),
        "{run}"
    );
    for n in 0..40 {
        client.ok(
            "run",
            json!({"command": format!("true {n} {}", "y".repeat(2000))}),
        );
    }
    let mut ids = Vec::new();
    let mut cursor = Value::Null;
    let mut pages = 0;
    loop {
        let arguments = match &cursor {
            Value::Null => json!({}),
            given => json!({"cursor": given}),
        };
        let page = client.ok("list", arguments);
        pages += 1;
        let commands = page["commands"].as_array().expect("commands");
        assert!(!commands.is_empty(), "{page}");
        ids.extend(commands.iter().map(|c| c["id"].clone()));
        match page.get("next_cursor") {
            Some(next) => cursor = next.clone(),
            None => break,
        }
    }
    assert!(pages > 1, "{pages} pages");
    assert_eq!(ids.len(), 44, "{ids:?}");
    let mut unique = ids.clone();
    unique.dedup();
    assert_eq!(unique, ids, "each command once, in order");
    let refused = client.tool_error("list", json!({"cursor": "no such"}));
    assert!(refused.contains("cursor"), "{refused}");
    client.close();
    env.finish();
}

/// A command past its journal cap (issue: hardening, item 14): `run` and `output` say how
/// much of each stream was never journaled, so a tail or a last page is not taken for the
/// end of what the command printed.
#[test]
fn run_and_output_say_what_was_not_journaled() {
    let env = TestEnv::new("mcp-cap");
    let mut client = Client::start_with(&env, None, &[("TETHER_MAX_OUTPUT", "1000")]);
    handshake(&mut client, "2025-11-25");
    let printed = (1..=10_000)
        .map(|i| format!("{i}\n").len() as u64)
        .sum::<u64>();
    let run = client.ok(
        "run",
        json!({"command": "seq 1 10000; echo gone >&2", "wait_ms": 30000}),
    );
    assert_eq!(run["state"], json!("finished"), "{run}");
    // The cap is the two streams' together, shared in the order the broker reads them: on
    // a loaded machine it can read `gone` before the last of stdout.
    let stored = |stream: &str| run[format!("{stream}_bytes")].as_u64().expect("bytes");
    let (stdout, stderr) = (stored("stdout"), stored("stderr"));
    assert_eq!(stdout + stderr, 1000, "{run}");
    // What a stream did not keep, absent when it kept every byte.
    let dropped = |printed: u64, kept: u64| match printed - kept {
        0 => Value::Null,
        n => json!(n),
    };
    assert_eq!(
        run["stdout_not_journaled_bytes"],
        dropped(printed, stdout),
        "{run}"
    );
    assert_eq!(
        run["stderr_not_journaled_bytes"],
        dropped(5, stderr),
        "{run}"
    );
    let page = client.ok("output", json!({"id": run["id"], "offset": 0}));
    assert_eq!(page["stored_bytes"], json!(stdout), "{page}");
    assert_eq!(
        page["not_journaled_bytes"],
        dropped(printed, stdout),
        "{page}"
    );
    client.close();
    env.finish();
}
