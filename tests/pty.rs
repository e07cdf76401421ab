//! Pseudo-terminals: a broker driven directly (terminals per stream, 10 MiB of binary input,
//! the fallback to pipes), `tether exec` in and out of a terminal, and the TUI in tmux
//! (separate streams that are both terminals, typing an answer, resizing, queries).

use crate::common;

use std::path::Path;
use std::time::Duration;

use common::direct::DirectBroker;
use common::journal::{command_dirs, events_now, kinds, read};
use common::tmux::Tmux;
use common::{BIN, TestEnv, wait_for_text, wait_until};
use tether::protocol::{EventKind, WindowSize, input_requests};

/// Sums the `input` events of a journal: (bytes, dropped, how many events).
fn input_totals(dir: &Path) -> (u64, u64, usize) {
    events_now(dir)
        .iter()
        .filter_map(|e| match e.kind {
            EventKind::Input { bytes, dropped } => Some((bytes, dropped)),
            _ => None,
        })
        .fold((0, 0, 0), |(b, d, n), (bytes, dropped)| {
            (b + bytes, d + dropped, n + 1)
        })
}

fn text(dir: &Path, file: &str) -> String {
    String::from_utf8_lossy(&read(dir, file)).into_owned()
}

const TEN_MIB: usize = 10 << 20;

#[test]
fn a_terminal_per_stream_and_10_mib_of_binary_input_that_never_blocks_the_broker() {
    let env = TestEnv::new("pty-broker");
    let mut broker = DirectBroker::spawn(&env, "01-input");
    let received = env.path("received");
    let go = env.path("go");
    // Raw mode first, so that every byte value passes as it is (no Ctrl-C, no line editing),
    // then a pause until the test says go: the whole input waits in the broker meanwhile,
    // however long a loaded machine takes to send it.
    let script = format!(
        "test -t 0 && test -t 1 && test -t 2 && echo all-tty; echo err-side >&2; stty size; \
         stty raw -echo -iexten; echo ready; while [ ! -e {} ]; do sleep 0.05; done; \
         head -c {TEN_MIB} > {}; echo done",
        go.display(),
        received.display()
    );
    let mut request = broker.launch_request("input", &["sh", "-c", &script], 2000);
    request["terminal"] =
        serde_json::json!({"stdout": true, "stderr": true, "cols": 91, "rows": 37});
    request["stdin"] = serde_json::json!("terminal");
    broker.send(&request.to_string());
    let dir = broker.journal_dir.clone();
    wait_for_text(&env, &dir.join("stdout.log"), "ready");

    let data: Vec<u8> = (0..TEN_MIB).map(|i| (i * 7 + i / 256) as u8).collect();
    let mut lines = String::new();
    for piece in input_requests(&data) {
        lines.push_str(&serde_json::to_string(&piece).unwrap());
        lines.push('\n');
    }
    broker.send_raw(lines.as_bytes());
    // The same size twice: one resize event, one SIGWINCH.
    for _ in 0..2 {
        broker.send(r#"{"type":"resize","cols":120,"rows":50}"#);
    }
    // Answered while the command has not read a byte yet: the input waits in the broker,
    // which goes on.
    broker.send(r#"{"type":"ping"}"#);
    broker.wait_for("a pong while the input waits", |k| {
        matches!(k, EventKind::Pong)
    });
    std::fs::write(&go, "").expect("tell the command to read");
    let events = broker.wait_close();
    assert_eq!(broker.wait_exit(), 0);

    let got = std::fs::read(&received).expect("the command wrote what it read");
    assert!(
        got == data,
        "the input arrived changed ({} bytes)",
        got.len()
    );
    assert_eq!(text(&dir, "stdout.log"), "all-tty\n37 91\nready\ndone\n");
    assert_eq!(text(&dir, "stderr.log"), "err-side\n");
    let (bytes, dropped, count) = input_totals(&dir);
    assert_eq!((bytes, dropped), (TEN_MIB as u64, 0));
    assert!(
        count <= 10,
        "input is journaled coalesced, not per piece: {count}"
    );
    let terminal = events.iter().find_map(|e| match e.kind {
        EventKind::Terminal { streams } => Some(streams),
        _ => None,
    });
    let terminal = terminal.expect("a terminal event");
    assert!(terminal.stdout && terminal.stderr);
    assert_eq!(terminal.size, WindowSize { cols: 91, rows: 37 });
    let resizes: Vec<WindowSize> = events
        .iter()
        .filter_map(|e| match e.kind {
            EventKind::Resize { size } => Some(size),
            _ => None,
        })
        .collect();
    assert_eq!(
        resizes,
        [WindowSize {
            cols: 120,
            rows: 50
        }]
    );
    let journal = text(&dir, "events.jsonl");
    assert!(
        !journal.contains("\"data\""),
        "input content is never journaled"
    );
    drop(broker);
    env.finish();
}

#[test]
fn a_terminal_that_cannot_be_had_falls_back_to_pipes_and_says_why() {
    let env = TestEnv::new("pty-fallback");
    let mut broker =
        DirectBroker::spawn_with_env(&env, "01-fallback", &[("TETHER_TEST_PTY_FAIL", "1")]);
    let script = "test -t 1 && echo out-tty || echo out-pipe; \
                  test -t 0 || echo stdin-not-a-tty; cat; echo stdin-ended; sleep 30";
    let mut request = broker.launch_request("fallback", &["sh", "-c", script], 500);
    request["terminal"] =
        serde_json::json!({"stdout": true, "stderr": true, "cols": 80, "rows": 24});
    request["stdin"] = serde_json::json!("terminal");
    broker.send(&request.to_string());
    let dir = broker.journal_dir.clone();
    wait_for_text(&env, &dir.join("stdout.log"), "stdin-ended");
    // Input with no terminal to go to: counted as typed and not delivered.
    broker.send(r#"{"type":"input","data":"aGVsbG8N"}"#);
    broker.send(r#"{"type":"stop"}"#);
    let events = broker.wait_close();
    broker.wait_exit();
    assert_eq!(
        text(&dir, "stdout.log"),
        "out-pipe\nstdin-not-a-tty\nstdin-ended\n",
        "pipes, and /dev/null for stdin"
    );
    let reason = events.iter().find_map(|e| match &e.kind {
        EventKind::TerminalUnavailable { code, message } => Some((code.clone(), message.clone())),
        _ => None,
    });
    let (code, message) = reason.expect("a terminal_unavailable event");
    assert_eq!(code, "open");
    assert!(
        message.contains("pseudo-terminal") && message.ends_with("the command runs with pipes"),
        "{message}"
    );
    assert!(!kinds(&events).contains(&"terminal"));
    assert_eq!(input_totals(&dir), (6, 6, 1));
    drop(broker);
    env.finish();
}

#[test]
fn exec_gives_pipes_where_its_own_streams_are_pipes() {
    let env = TestEnv::new("pty-exec-pipes");
    let run = env.exec(
        &[],
        &[
            "sh",
            "-c",
            "test -t 1 && echo out-tty || echo out-pipe; test -t 2 && echo err-tty >&2 || echo err-pipe >&2",
        ],
    );
    assert_eq!(run.code(), 0);
    assert_eq!(run.stdout(), b"out-pipe\n");
    assert_eq!(run.stderr(), b"err-pipe\n");
    let events = events_now(&env.command_dir());
    assert!(
        !kinds(&events).contains(&"terminal") && !kinds(&events).contains(&"terminal_unavailable")
    );
    env.finish();
}

/// What a command run by `tether exec OPTIONS` in a tmux pane reports into `file`: whether
/// its streams are terminals and its terminal's size.
fn exec_in_tmux(env: &TestEnv, tmux: &Tmux, options: &str, file: &Path) -> String {
    let script = format!(
        "f={}; if test -t 1; then a=out-tty; else a=out-pipe; fi; \
         if test -t 2; then b=err-tty; else b=err-pipe; fi; \
         s=$(stty size </dev/tty 2>/dev/null || echo no-tty); \
         {{ echo $a; echo $b; echo \"$s\"; }} >$f.tmp; mv $f.tmp $f",
        file.display()
    );
    tmux.type_line(
        env,
        &format!(
            "{BIN} --state-dir {} exec {options} -- sh -c '{script}'",
            env.state_dir().display()
        ),
    );
    wait_until(env, "the command's report", || file.exists());
    std::fs::read_to_string(file).unwrap_or_default()
}

#[test]
fn exec_in_a_terminal_gives_the_command_terminals_of_its_size_that_follow_it() {
    let env = TestEnv::new("pty-exec-tty");
    let tmux = Tmux::start(&env, 100, 30);
    let report = exec_in_tmux(&env, &tmux, "", &env.path("tty"));
    assert_eq!(report, "out-tty\nerr-tty\n30 100\n");
    let report = exec_in_tmux(&env, &tmux, "--no-pty", &env.path("no-pty"));
    assert_eq!(report, "out-pipe\nerr-pipe\nno-tty\n");

    // SIGWINCH on exec becomes a resize of the command's terminal.
    let sizes = env.path("sizes");
    let script = format!(
        "n=0; trap 'stty size </dev/tty >>{0}; n=1' WINCH; echo started >{0}; \
         while [ \\$n = 0 ]; do sleep 0.1; done",
        sizes.display()
    );
    tmux.type_line(
        &env,
        &format!(
            "{BIN} --state-dir {} exec -- sh -c \"{script}\"",
            env.state_dir().display()
        ),
    );
    wait_for_text(&env, &sizes, "started");
    tmux.resize(&env, 120, 40);
    wait_for_text(&env, &sizes, "40 120");
    // The third exec's journal: session ids sort by second, then by pid as text, so it is
    // found by what it holds, not by its place.
    let resized = r#""kind":"resize","cols":120,"rows":40"#;
    wait_until(&env, "the third exec to end, its resize journaled", || {
        command_dirs(&env.state_dir())
            .iter()
            .any(|d| d.join("result.json").exists() && text(d, "events.jsonl").contains(resized))
    });
    drop(tmux);
    env.finish();
}

#[test]
fn the_tui_gives_each_stream_a_terminal_takes_typed_answers_and_follows_the_pane() {
    let env = TestEnv::new("pty-tui");
    let tmux = Tmux::start(&env, 160, 45);
    // Both streams are terminals; a cursor-position query gets no answer (tether never
    // answers for the terminal, and nothing of the output comes back); then a typed answer;
    // then the size on every SIGWINCH.
    let script = "test -t 1 && test -t 2 && echo both-tty; echo to-stderr >&2; \
        printf '\\033[6n'; stty -icanon min 0 time 10; \
        r=$(dd bs=1 count=32 2>/dev/null | od -An -c | tr -d ' \\n'); echo \"reply:[$r]\"; \
        stty icanon; read -r answer; echo \"got:$answer\"; \
        trap 'stty size' WINCH; echo waiting; while :; do sleep 0.1; done";
    let script_arg = format!("'{}'", script.replace('\'', r"'\''"));
    tmux.type_line(
        &env,
        &format!(
            "exec {BIN} --state-dir {} run -n answer -- sh -c {script_arg}",
            env.state_dir().display()
        ),
    );
    tmux.wait_screen(&env, "the query's empty reply", |s| s.contains("reply:[]"));
    let dir = command_dirs(&env.state_dir()).pop().expect("a journal");
    let screen = tmux.wait_screen(&env, "both streams", |s| {
        s.contains("both-tty") && s.contains("to-stderr")
    });
    assert!(screen.contains("stdout ·") && screen.contains("stderr ·"));

    // i, the answer, Enter, Ctrl-a.
    tmux.keys(&env, &["i"]);
    tmux.wait_screen(&env, "the input mode on the status bar", |s| {
        s.contains("INPUT") && s.contains("→ answer") && s.contains("Ctrl-a")
    });
    tmux.text(&env, "secret 42");
    tmux.keys(&env, &["Enter"]);
    tmux.wait_screen(&env, "the answer read", |s| s.contains("got:secret 42"));
    tmux.keys(&env, &["C-a"]);
    tmux.wait_screen(&env, "the input mode left", |s| !s.contains("INPUT"));
    wait_for_text(&env, &dir.join("stdout.log"), "waiting");
    let first_sizes = text(&dir, "stdout.log").lines().count();

    // The window grows: the command's terminal follows the stdout pane.
    tmux.resize(&env, 200, 50);
    wait_until(&env, "a size printed after the resize", || {
        text(&dir, "stdout.log").lines().count() > first_sizes
    });
    let resize = events_now(&dir).iter().rev().find_map(|e| match e.kind {
        EventKind::Resize { size } => Some(size),
        _ => None,
    });
    let resize = resize.expect("a resize event");
    let printed = text(&dir, "stdout.log");
    let last = printed.lines().last().unwrap_or_default().to_string();
    assert_eq!(
        last,
        format!("{} {}", resize.rows, resize.cols),
        "{printed}"
    );

    // q, then y: stop it and leave.
    tmux.keys(&env, &["q"]);
    tmux.wait_screen(&env, "the quit question", |s| s.contains("Stop"));
    tmux.keys(&env, &["y"]);
    wait_until(&env, "the run's result", || {
        dir.join("result.json").exists()
    });

    let stdout = text(&dir, "stdout.log");
    assert!(
        stdout.starts_with("both-tty\n\x1b[6nreply:[]\nsecret 42\ngot:secret 42\nwaiting\n"),
        "{stdout:?}"
    );
    assert!(!stdout.contains("to-stderr"));
    assert_eq!(text(&dir, "stderr.log"), "to-stderr\n");
    // "secret 42" and Enter: its byte count only.
    assert_eq!(input_totals(&dir), (10, 0, 1));
    assert!(!text(&dir, "events.jsonl").contains("secret"));
    drop(tmux);
    env.finish();
}

#[test]
fn typing_into_a_command_without_a_terminal_says_why() {
    let env = TestEnv::new("pty-tui-none");
    let tmux = Tmux::start(&env, 160, 45);
    tmux.type_line(
        &env,
        &format!(
            "exec {BIN} --state-dir {} run --no-pty -n plain -- sh -c 'test -t 1 || echo piped; sleep 30'",
            env.state_dir().display()
        ),
    );
    // Its output in the pane, not the first `running` (the header counts it running from
    // the broker's start, while `i` is still refused as starting), nor `piped` (the command
    // text says it).
    tmux.wait_screen(&env, "the command's output", |s| {
        s.contains("stdout · 1 line")
    });
    tmux.keys(&env, &["i"]);
    tmux.wait_screen(&env, "why not", |s| {
        s.contains("plain has no terminal (pty = false)")
    });
    tmux.keys(&env, &["q"]);
    tmux.wait_screen(&env, "the quit question", |s| s.contains("Stop"));
    tmux.keys(&env, &["y"]);
    let dir = command_dirs(&env.state_dir()).pop().expect("a journal");
    wait_until(&env, "the run's result", || {
        dir.join("result.json").exists()
    });
    std::thread::sleep(Duration::from_millis(100));
    drop(tmux);
    env.finish();
}
