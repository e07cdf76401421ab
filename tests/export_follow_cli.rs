//! `tether export --follow` as a command: `--once`'s exit codes, `--status` and SIGUSR1, one
//! follower per endpoint, OTLP/JSON and log records, and its files below the state dir
//! private whatever the umask. The receiver is the test's (`common::otlp_receiver`).

use crate::common;

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use nix::sys::signal::Signal;
use tether::export::otlp;

use common::follower::{
    Follower, assert_each_once, follow_command, follow_once, run_shim, session_commands,
    wait_all_commands, write_config,
};
use common::otlp_receiver::{Mode, Receiver, attr_text, hex};
use common::{TestEnv, run_to_end, wait_for_text, wait_until};

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn said(output: &Output) -> String {
    format!(
        "{:?}\nstdout: {}\nstderr: {}",
        output.status,
        text(&output.stdout),
        text(&output.stderr)
    )
}

#[test]
fn once_sends_what_is_left_and_exits_1_when_it_cannot() {
    let env = TestEnv::new("follow_once");
    write_config(&env, "timeout = \"2s\"\n");
    let receiver = Receiver::start();
    let session = "fleet-once";
    for i in 0..3 {
        run_shim(&env, session, &format!("echo {i}"));
    }
    let output = follow_once(&env, &receiver.endpoint(), &["--once"]);
    assert_eq!(output.status.code(), Some(0), "{}", said(&output));
    assert_each_once(&env, &receiver, session);
    assert_eq!(
        common::follower::command_spans(&env, &receiver, session).len(),
        3
    );

    // Again: nothing new, nothing sent again.
    let output = follow_once(&env, &receiver.endpoint(), &["--once"]);
    assert_eq!(output.status.code(), Some(0), "{}", said(&output));
    assert_each_once(&env, &receiver, session);

    // Down: what is left cannot be sent; it says so and exits 1, and sends it next time.
    run_shim(&env, session, "echo 3");
    receiver.set_mode(Mode::Down);
    let output = follow_once(&env, &receiver.endpoint(), &["--once"]);
    assert_eq!(output.status.code(), Some(1), "{}", said(&output));
    assert!(!output.stderr.is_empty(), "{}", said(&output));
    receiver.set_mode(Mode::Ok);
    let output = follow_once(&env, &receiver.endpoint(), &["--once"]);
    assert_eq!(output.status.code(), Some(0), "{}", said(&output));
    assert_each_once(&env, &receiver, session);
    assert_eq!(session_commands(&env, session).len(), 4);

    // Refused (400): exit 1, and it says so.
    run_shim(&env, session, "echo 4");
    receiver.set_mode(Mode::Status(400));
    let output = follow_once(&env, &receiver.endpoint(), &["--once"]);
    assert_eq!(output.status.code(), Some(1), "{}", said(&output));
    assert!(!output.stderr.is_empty(), "{}", said(&output));

    env.finish();
}

#[test]
fn status_and_sigusr1_show_the_running_followers_state() {
    let env = TestEnv::new("follow_status");
    write_config(&env, "");
    let receiver = Receiver::start();
    let endpoint = receiver.endpoint();
    let session = "fleet-status";

    // None running for this endpoint: it says so.
    let output = follow_once(&env, &endpoint, &["--status"]);
    assert_eq!(output.status.code(), Some(0), "{}", said(&output));
    assert!(
        text(&output.stdout).contains("no follower"),
        "{}",
        said(&output)
    );

    let mut follower = Follower::start(&env, &endpoint, &[]);
    for i in 0..3 {
        run_shim(&env, session, &format!("echo {i}"));
    }
    wait_all_commands(&env, &receiver, session, 3);
    let output = follow_once(&env, &endpoint, &["--status"]);
    assert_eq!(output.status.code(), Some(0), "{}", said(&output));
    let status = text(&output.stdout);
    assert!(status.contains(&endpoint), "{status}");
    assert!(
        status.contains(&format!("pid {}", follower.pid())),
        "{status}"
    );
    assert!(status.contains("spans"), "{status}");
    assert!(status.contains("backlog"), "{status}");

    follower.signal(Signal::SIGUSR1);
    wait_for_text(&env, &follower.stderr_path, &endpoint);
    wait_for_text(&env, &follower.stderr_path, "backlog");
    assert!(
        follower.running(),
        "SIGUSR1 ended it: {}",
        follower.stderr_text()
    );
    follower.stop(&env);
    env.finish();
}

#[test]
fn a_second_follower_on_the_same_endpoint_is_refused() {
    let env = TestEnv::new("follow_lock");
    write_config(&env, "");
    let receiver = Receiver::start();
    let other = Receiver::start();
    let session = "fleet-lock";
    let mut first = Follower::start(&env, &receiver.endpoint(), &[]);
    run_shim(&env, session, "echo 1");
    wait_all_commands(&env, &receiver, session, 1);

    let mut second = Follower::start(&env, &receiver.endpoint(), &[]);
    let status = second.wait(&env);
    assert_eq!(status.code(), Some(2), "{}", second.stderr_text());
    assert!(
        second.stderr_text().contains(&first.pid().to_string()),
        "says which follower runs: {}",
        second.stderr_text()
    );
    assert!(first.running());

    // Another endpoint is another follower's.
    let third = Follower::start(&env, &other.endpoint(), &[]);
    wait_all_commands(&env, &other, session, 1);
    assert_each_once(&env, &receiver, session);
    assert_each_once(&env, &other, session);
    third.stop(&env);
    first.stop(&env);
    env.finish();
}

#[test]
fn json_and_log_records_arrive_with_the_commands_ids() {
    let env = TestEnv::new("follow_json_logs");
    write_config(&env, "");
    let receiver = Receiver::start();
    let session = "fleet-logs";
    run_shim(&env, session, "echo out-line; echo err-line >&2");
    let output = follow_once(
        &env,
        &receiver.endpoint(),
        &["--once", "--protocol", "http/json", "--logs"],
    );
    assert_eq!(output.status.code(), Some(0), "{}", said(&output));
    assert_each_once(&env, &receiver, session);
    let requests = receiver.received().requests.clone();
    assert!(
        requests
            .iter()
            .all(|r| r.content_type.starts_with("application/json")),
        "{requests:?}"
    );
    let name = &session_commands(&env, session)[0];
    let span_id = hex(&otlp::span_id(&otlp::local_host(), session, name));
    let logs = receiver.logs();
    let body = |r: &common::otlp_receiver::ReceivedLog| {
        r.record
            .body
            .as_ref()
            .and_then(|b| b.value.as_ref())
            .map(common::otlp_receiver::value_text)
            .unwrap_or_default()
    };
    for (line, stream) in [("out-line", "stdout"), ("err-line", "stderr")] {
        let record = logs
            .iter()
            .find(|r| body(r).contains(line))
            .unwrap_or_else(|| panic!("no record of {line}: {logs:?}"));
        assert_eq!(hex(&record.record.span_id), span_id);
        assert_eq!(
            hex(&record.record.trace_id),
            hex(&otlp::trace_id(&otlp::local_host(), session))
        );
        assert_eq!(
            attr_text(&record.record.attributes, "tether.stream").as_deref(),
            Some(stream)
        );
    }
    env.finish();
}

#[test]
fn logs_are_not_sent_unless_asked() {
    let env = TestEnv::new("follow_no_logs");
    write_config(&env, "");
    let receiver = Receiver::start();
    let session = "fleet-quiet";
    run_shim(&env, session, "echo secret-output");
    let output = follow_once(&env, &receiver.endpoint(), &["--once"]);
    assert_eq!(output.status.code(), Some(0), "{}", said(&output));
    assert_each_once(&env, &receiver, session);
    assert!(receiver.logs().is_empty());
    assert!(
        receiver
            .received()
            .requests
            .iter()
            .all(|r| r.path == "/v1/traces"),
        "{:?}",
        receiver.received().requests
    );
    env.finish();
}

/// Every path below `root` with its mode.
fn modes(root: &Path) -> BTreeMap<PathBuf, u32> {
    let mut found = BTreeMap::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(dir) = todo.pop() {
        for entry in fs::read_dir(&dir)
            .expect("read a dir")
            .filter_map(Result::ok)
        {
            let meta = entry.path().symlink_metadata().expect("its metadata");
            if meta.is_dir() {
                todo.push(entry.path());
            }
            found.insert(entry.path(), meta.permissions().mode() & 0o7777);
        }
    }
    found
}

#[test]
fn the_followers_files_are_private_whatever_the_umask() {
    let env = TestEnv::new("follow_files");
    write_config(&env, "");
    let receiver = Receiver::start();
    let session = "fleet-files";
    run_shim(&env, session, "echo 1");
    let before = modes(&env.state_dir());

    for args in [&["--once"][..], &[]] {
        let mut command = follow_command(&env, &receiver.endpoint(), args);
        // SAFETY: umask(2) is async-signal-safe; nothing else runs between fork and exec.
        unsafe {
            command.pre_exec(|| {
                libc::umask(0);
                Ok(())
            });
        }
        if args.is_empty() {
            // The running follower's own files too (its lock, its state for --status).
            let follower = Follower::spawn(&env, command);
            run_shim(&env, session, "echo 2");
            wait_all_commands(&env, &receiver, session, 2);
            wait_until(&env, "the status answered", || {
                follow_once(&env, &receiver.endpoint(), &["--status"])
                    .status
                    .success()
            });
            check_private(&env, &before);
            follower.stop(&env);
        } else {
            let output = run_to_end(&env, command, "tether export --follow --once");
            assert_eq!(output.status.code(), Some(0), "{}", said(&output));
            check_private(&env, &before);
        }
    }
    assert_each_once(&env, &receiver, session);
    env.finish();
}

/// What appeared below the state dir since `before` (but the journal's new commands) is a
/// 0600 file or a 0700 directory, and there is something: the cursor.
fn check_private(env: &TestEnv, before: &BTreeMap<PathBuf, u32>) {
    let sessions = env.state_dir().join("sessions");
    let new: Vec<(PathBuf, u32)> = modes(&env.state_dir())
        .into_iter()
        .filter(|(path, _)| !before.contains_key(path))
        .filter(|(path, _)| {
            // A new command's journal is the shim's, not the follower's.
            !path
                .strip_prefix(&sessions)
                .ok()
                .and_then(|rest| rest.components().nth(1))
                .is_some_and(|c| {
                    c.as_os_str()
                        .to_string_lossy()
                        .chars()
                        .next()
                        .is_some_and(|ch| ch.is_ascii_digit())
                })
        })
        .collect();
    assert!(
        !new.is_empty(),
        "the follower wrote nothing below the state dir"
    );
    for (path, mode) in &new {
        let want = if path.is_dir() { 0o700 } else { 0o600 };
        assert_eq!(*mode, want, "{} is {mode:o}", path.display());
    }
}

/// The test receiver itself: protobuf with a length and chunked, on one kept-alive
/// connection; JSON; a status; down (refused) and up again on the same port.
#[test]
fn the_test_receiver_takes_what_an_otlp_exporter_sends() {
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};
    use prost::Message;
    use std::io::{Read, Write};
    use std::net::TcpStream;

    let request = |id: u8| ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            scope_spans: vec![ScopeSpans {
                spans: vec![Span {
                    trace_id: vec![1; 16],
                    span_id: vec![id; 8],
                    name: format!("span {id}"),
                    ..Span::default()
                }],
                ..ScopeSpans::default()
            }],
            ..ResourceSpans::default()
        }],
    };
    /// Sends one request, reads the status line and the (empty or short) body.
    fn post(stream: &mut TcpStream, head: &str, body: &[u8]) -> String {
        stream.write_all(head.as_bytes()).unwrap();
        stream.write_all(body).unwrap();
        let mut got = Vec::new();
        let mut byte = [0u8; 1];
        while !got.ends_with(b"\r\n\r\n") {
            assert_eq!(stream.read(&mut byte).unwrap(), 1, "answer cut short");
            got.push(byte[0]);
        }
        let head = text(&got);
        let len: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("Content-Length: "))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(0);
        let mut rest = vec![0u8; len];
        stream.read_exact(&mut rest).unwrap();
        head.lines().next().unwrap().to_owned()
    }
    let receiver = Receiver::start();
    let mut stream = TcpStream::connect(("127.0.0.1", receiver.port())).unwrap();
    let body = request(1).encode_to_vec();
    let head = format!(
        "POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    assert_eq!(post(&mut stream, &head, &body), "HTTP/1.1 200 OK");
    let body = request(2).encode_to_vec();
    let (a, b) = body.split_at(3);
    let chunked = [
        format!("{:x}\r\n", a.len()).into_bytes(),
        a.to_vec(),
        format!("\r\n{:x};ext=1\r\n", b.len()).into_bytes(),
        b.to_vec(),
        b"\r\n0\r\n\r\n".to_vec(),
    ]
    .concat();
    let head = "POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\nTransfer-Encoding: chunked\r\n\r\n";
    assert_eq!(post(&mut stream, head, &chunked), "HTTP/1.1 200 OK");
    let json = serde_json::to_vec(&request(1)).unwrap();
    assert!(
        text(&json).contains("\"spanId\":\"0101010101010101\""),
        "{}",
        text(&json)
    );
    let head = format!(
        "POST /v1/traces HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        json.len()
    );
    assert_eq!(post(&mut stream, &head, &json), "HTTP/1.1 200 OK");
    receiver.set_mode(Mode::Status(503));
    assert_eq!(
        post(&mut stream, &head, &json),
        "HTTP/1.1 503 Service Unavailable"
    );
    assert_eq!(receiver.spans().len(), 3);
    assert_eq!(receiver.duplicates(), [(hex(&[1; 8]), 2)]);
    assert_eq!(receiver.errors(), Vec::<String>::new());

    receiver.set_mode(Mode::Down);
    let port = receiver.port();
    let env = TestEnv::new("receiver_self");
    wait_until(&env, "the port refused", || {
        TcpStream::connect(("127.0.0.1", port)).is_err()
    });
    // The kept-alive connection is closed too.
    let mut byte = [0u8; 1];
    assert_eq!(stream.read(&mut byte).unwrap_or(0), 0);
    receiver.set_mode(Mode::Ok);
    wait_until(&env, "the port open again", || {
        TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    env.finish();
}

// Usage errors and --status without a follower (helper B's, moved here beside the rest).

fn follow(env: &TestEnv, args: &[&str], endpoint: Option<&str>) -> Output {
    let mut command: Command = env.tether(args);
    for name in [
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    ] {
        command.env_remove(name);
    }
    if let Some(endpoint) = endpoint {
        command.env("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint);
    }
    run_to_end(env, command, &format!("tether {args:?}"))
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn follow_with_a_session_format_or_output_is_a_usage_error() {
    let env = TestEnv::new("follow-usage");
    for args in [
        &["export", "--follow", "some-session"][..],
        &["export", "--follow", "--format", "jsonl"],
        &["export", "--follow", "-o", "out.json"],
        &["export", "--once"],
        &["export", "--follow", "--once", "--status"],
    ] {
        let output = follow(&env, args, Some("http://127.0.0.1:9"));
        assert_eq!(
            output.status.code(),
            Some(2),
            "{args:?}: {}",
            stderr(&output)
        );
        assert!(
            stderr(&output).contains("Usage"),
            "{args:?}: {}",
            stderr(&output)
        );
    }
    env.finish();
}

#[test]
fn follow_without_an_endpoint_says_where_to_give_one() {
    let env = TestEnv::new("follow-no-endpoint");
    let output = follow(&env, &["export", "--follow", "--once"], None);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains(
            "no endpoint: give --endpoint URL, set OTEL_EXPORTER_OTLP_ENDPOINT or [export.otlp] endpoint"
        ),
        "{}",
        stderr(&output)
    );
    env.finish();
}

#[test]
fn status_without_a_follower_says_none_ran() {
    let env = TestEnv::new("follow-status");
    let output = follow(
        &env,
        &[
            "export",
            "--follow",
            "--status",
            "--endpoint",
            "http://127.0.0.1:9",
        ],
        None,
    );
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        String::from_utf8_lossy(&output.stdout)
            .contains("no follower has sent to http://127.0.0.1:9/v1/traces"),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );
    env.finish();
}
