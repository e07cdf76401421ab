//! Readiness probes end to end: a broker launched with a `ready` probe journals `ready` once
//! the command proves it (a port that accepts, an HTTP 2xx, a shell command that exits 0, a
//! line of output), or `not_ready` when its timeout passes first. An `exec` probe's shell is
//! never taken for the command's: no `orphan_reaped`, no place in its tree, nothing left.

use std::time::Duration;

use crate::common;

use common::direct::DirectBroker;
use common::journal::{kinds, load_complete, orphans_reaped, tree_entries};
use common::{TestEnv, free_port};
use tether::protocol::{ContainmentMode, Event, EventKind, Readiness, ReadyProbe};

/// Launches `script` under `sh -c` with `probe`, tried every 100 ms, giving up after
/// `timeout`.
fn launch(
    env: &TestEnv,
    id: &str,
    script: &str,
    probe: ReadyProbe,
    timeout: Option<Duration>,
    vars: &[(&str, &str)],
) -> DirectBroker {
    let mut broker = DirectBroker::spawn_with_env(env, id, vars);
    let mut request = broker.launch_request(id, &["sh", "-c", script], 2000);
    let ready = Readiness {
        probe,
        interval: Duration::from_millis(100),
        timeout,
    };
    request["ready"] = serde_json::to_value(&ready).expect("a readiness as JSON");
    broker.send(&request.to_string());
    broker
}

/// The `ready` or `not_ready` event: ready or not, probe, detail, after_ms.
fn decision(event: &Event) -> (bool, String, String, u64) {
    match &event.kind {
        EventKind::Ready {
            probe,
            detail,
            after_ms,
        } => (true, probe.clone(), detail.clone(), *after_ms),
        EventKind::NotReady {
            probe,
            detail,
            after_ms,
        } => (false, probe.clone(), detail.clone(), *after_ms),
        other => panic!("not a readiness event: {other:?}"),
    }
}

fn is_decision(kind: &EventKind) -> bool {
    matches!(kind, EventKind::Ready { .. } | EventKind::NotReady { .. })
}

/// Waits for the probe's decision, then for the broker's end (the command ends by itself or
/// is stopped); checks the journal holds one decision, after `spawned`, and no orphan (the
/// commands here leave none of their own: a script's last program is `exec`ed).
fn decided_then_closed(broker: &mut DirectBroker, stop: bool) -> (bool, String, String, u64) {
    let event = broker.wait_for("ready or not_ready", is_decision);
    if stop {
        broker.send(r#"{"type":"stop"}"#);
    }
    broker.wait_close();
    assert_eq!(broker.wait_exit(), 0);
    let record = load_complete(&broker.journal_dir);
    let names = kinds(&record.events);
    let decisions: Vec<usize> = (names.iter().enumerate())
        .filter(|(_, k)| matches!(**k, "ready" | "not_ready"))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(decisions.len(), 1, "one decision: {names:?}");
    let spawned = names.iter().position(|k| *k == "spawned").expect("spawned");
    assert!(spawned < decisions[0], "{names:?}");
    assert_eq!(
        orphans_reaped(&record.events),
        Vec::<i32>::new(),
        "{names:?}"
    );
    decision(&event)
}

/// A Python script that listens on `port` after a second, answers one connection with
/// `answer` (nothing: closes it), and exits.
fn listens_late(port: u16, answer: &str) -> String {
    format!(
        "exec python3 -c '
import socket, time
time.sleep(1)
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((\"127.0.0.1\", {port}))
s.listen(8)
print(\"listening\", flush=True)
c, _ = s.accept()
if {answer:?}:
    c.recv(4096)
    c.sendall({answer:?}.encode())
c.close()
'"
    )
}

#[test]
fn a_port_that_accepts_after_a_second_makes_the_command_ready() {
    let env = TestEnv::new("ready_tcp");
    let port = free_port();
    let probe = ReadyProbe::Tcp {
        host: "127.0.0.1".into(),
        port,
    };
    let mut broker = launch(&env, "db", &listens_late(port, ""), probe, None, &[]);
    let (ready, probe, detail, after_ms) = decided_then_closed(&mut broker, false);
    assert!(ready);
    assert_eq!(probe, "tcp");
    assert_eq!(detail, format!("connected to 127.0.0.1:{port}"));
    assert!(after_ms >= 1000, "not before it listened: {after_ms} ms");
    env.finish();
}

#[test]
fn an_http_2xx_after_the_listen_makes_the_command_ready() {
    let env = TestEnv::new("ready_http");
    let port = free_port();
    let probe = ReadyProbe::Http {
        url: format!("http://127.0.0.1:{port}/health"),
    };
    let answer = "HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n";
    let mut broker = launch(&env, "web", &listens_late(port, answer), probe, None, &[]);
    let (ready, probe, detail, after_ms) = decided_then_closed(&mut broker, false);
    assert!(ready);
    assert_eq!((probe.as_str(), detail.as_str()), ("http", "HTTP 204"));
    assert!(after_ms >= 1000, "not before it listened: {after_ms} ms");
    env.finish();
}

#[test]
fn an_http_error_status_is_not_ready_and_says_it() {
    let env = TestEnv::new("ready_http_503");
    let port = free_port();
    let probe = ReadyProbe::Http {
        url: format!("http://localhost:{port}/"),
    };
    let answer = "HTTP/1.0 503 Service Unavailable\r\n\r\n";
    // Answered once, then nothing listens: the last failure is the 503 or a refusal after
    // it; the timeout is long enough for the answer on a loaded machine.
    let script = format!(
        "{}; exec sleep 30",
        listens_late(port, answer).replacen("exec ", "", 1)
    );
    let timeout = Some(Duration::from_secs(8));
    let mut broker = launch(&env, "web", &script, probe, timeout, &[]);
    let (ready, probe, detail, _) = decided_then_closed(&mut broker, true);
    assert!(!ready);
    assert_eq!(probe, "http");
    assert!(
        ["HTTP 503", "connection refused"].contains(&detail.as_str()),
        "{detail}"
    );
    let record = load_complete(&broker.journal_dir);
    let served = record
        .events
        .iter()
        .any(|e| matches!(&e.kind, EventKind::Output { .. }));
    assert!(served, "the server started: {:?}", kinds(&record.events));
    env.finish();
}

#[test]
fn a_shell_command_that_exits_0_makes_the_command_ready_and_is_never_its_process() {
    // On the /proc walk the probe's keeper is the broker's child, as the command is: it must
    // be left out of the tree and never reaped as an orphan.
    for cgroup in ["auto", "off"] {
        let env = TestEnv::new(&format!("ready_exec_{cgroup}"));
        let flag = env.path("up");
        let tries = env.path("tries");
        // Output every 100 ms keeps the tree walked every second (a quiet tree's walks are
        // skipped, and each `sleep 0.1` changes it); each try lasts longer than that (within
        // its 2 s timeout) and writes when it ran, so that the test can check walks met it.
        let script = format!(
            "for i in $(seq 30); do echo tick; sleep 0.1; done; touch '{}'; exec sleep 30",
            flag.display()
        );
        let probe = ReadyProbe::Exec {
            shell: format!(
                "s=$(date +%s%3N); sleep 1.2; echo \"$s $(date +%s%3N)\" >> '{}'; test -e '{}'",
                tries.display(),
                flag.display()
            ),
        };
        let vars = [("TETHER_CGROUP", cgroup)];
        let mut broker = launch(&env, "pg", &script, probe, None, &vars);
        let (ready, probe, detail, after_ms) = decided_then_closed(&mut broker, true);
        assert!(ready);
        assert_eq!((probe.as_str(), detail.as_str()), ("exec", "exited 0"));
        assert!(after_ms >= 3000, "not before the flag: {after_ms} ms");
        let record = load_complete(&broker.journal_dir);
        let on_proc = (record.events.iter()).any(|e| {
            matches!(&e.kind, EventKind::Containment { mode, .. } if *mode == ContainmentMode::Procfs)
        });
        assert!(on_proc || cgroup == "auto", "TETHER_CGROUP=off walks /proc");
        // A tree journaled while a try ran: the probe was there to be seen, and was not.
        let ran: Vec<(u64, u64)> = std::fs::read_to_string(&tries)
            .expect("the tries wrote when they ran")
            .lines()
            .filter_map(|line| {
                let (start, end) = line.split_once(' ')?;
                Some((start.parse().ok()?, end.parse().ok()?))
            })
            .collect();
        let walked_during_a_try = (record.events.iter())
            .filter(|e| matches!(e.kind, EventKind::Tree { .. }))
            .any(|e| {
                ran.iter()
                    .any(|&(start, end)| start < e.ts_ms && e.ts_ms < end)
            });
        assert!(
            walked_during_a_try,
            "no tree journaled during a try: {ran:?} {:?}",
            kinds(&record.events)
        );
        let in_tree: Vec<Vec<String>> = tree_entries(&record.events)
            .into_iter()
            .map(|p| p.argv)
            .filter(|argv| argv.iter().any(|a| a.contains("test -e")))
            .collect();
        assert_eq!(
            in_tree,
            Vec::<Vec<String>>::new(),
            "the probe is no part of the tree"
        );
        env.finish();
    }
}

#[test]
fn a_line_on_stderr_split_over_writes_makes_the_command_ready() {
    let env = TestEnv::new("ready_log");
    let script =
        "echo starting; printf 'listen' >&2; sleep 0.3; echo 'ing on 8080' >&2; exec sleep 30";
    let probe = ReadyProbe::Log {
        pattern: "^listening on \\d+$".into(),
    };
    let mut broker = launch(&env, "api", script, probe, None, &[]);
    let (ready, probe, detail, _) = decided_then_closed(&mut broker, true);
    assert!(ready);
    assert_eq!(
        (probe.as_str(), detail.as_str()),
        ("log", "listening on 8080")
    );
    env.finish();
}

#[test]
fn nothing_listening_gives_up_at_the_timeout_and_the_command_runs_on() {
    let env = TestEnv::new("not_ready");
    let port = free_port();
    let probe = ReadyProbe::Tcp {
        host: "127.0.0.1".into(),
        port,
    };
    let timeout = Some(Duration::from_secs(1));
    let mut broker = launch(&env, "db", "sleep 30", probe, timeout, &[]);
    let event = broker.wait_for("not_ready", is_decision);
    let (ready, probe, detail, after_ms) = decision(&event);
    assert!(!ready);
    assert_eq!(
        (probe.as_str(), detail.as_str()),
        ("tcp", "connection refused")
    );
    assert!(after_ms >= 1000, "{after_ms}");
    // It runs on: a ping is still answered, and only the operator's stop ends it.
    broker.send(r#"{"type":"ping"}"#);
    broker.wait_for("pong", |k| matches!(k, EventKind::Pong));
    broker.send(r#"{"type":"stop"}"#);
    let events = broker.wait_close();
    assert_eq!(broker.wait_exit(), 0);
    let exit = events.iter().find_map(|e| match &e.kind {
        EventKind::Exit { status, .. } => Some(*status),
        _ => None,
    });
    assert_eq!(
        exit.and_then(|s| s.signal),
        Some(15),
        "stopped by the operator"
    );
    env.finish();
}

#[test]
fn a_probe_the_broker_cannot_use_refuses_the_launch() {
    let env = TestEnv::new("ready_refused");
    let probe = ReadyProbe::Log {
        pattern: "(unclosed".into(),
    };
    let mut broker = launch(&env, "bad", "true", probe, None, &[]);
    let failure = broker.wait_for("a broker_failure", |k| {
        matches!(k, EventKind::BrokerFailure { .. })
    });
    match &failure.kind {
        EventKind::BrokerFailure { code, message, .. } => {
            assert_eq!(code, "invalid_ready");
            assert!(
                message.starts_with("ready_log: not a valid regex"),
                "{message}"
            );
        }
        _ => unreachable!(),
    }
    assert_eq!(broker.wait_exit(), 1);
    env.finish();
}

#[test]
fn a_try_still_going_when_the_command_exits_is_ended_with_it() {
    let env = TestEnv::new("ready_exec_given_up");
    let started = env.path("probe.pid");
    // The try writes its pid and outlasts the command; the exit ends the probing, and the
    // try is given up: its shell killed by its keeper, nothing left, no orphan journaled.
    let probe = ReadyProbe::Exec {
        shell: format!("echo $$ > '{}'; exec sleep 20", started.display()),
    };
    let script = format!(
        "while [ ! -s '{}' ]; do sleep 0.05; done; exit 3",
        started.display()
    );
    let mut broker = launch(&env, "svc", &script, probe, None, &[]);
    let events = broker.wait_close();
    assert_eq!(broker.wait_exit(), 0);
    let names = kinds(&events);
    assert!(
        !names.iter().any(|k| matches!(*k, "ready" | "not_ready")),
        "{names:?}"
    );
    assert_eq!(orphans_reaped(&events), Vec::<i32>::new(), "{names:?}");
    let pid: i32 = std::fs::read_to_string(&started)
        .expect("the try wrote its pid")
        .trim()
        .parse()
        .expect("a pid");
    common::wait_until(&env, "the given-up try's shell to end", || {
        !std::path::Path::new(&format!("/proc/{pid}")).exists()
    });
    env.finish();
}

/// The shell line that runs the TUI over `file`, in place of the pane's shell.
fn tui_line(env: &TestEnv, file: &std::path::Path) -> String {
    format!(
        "exec {} --state-dir {} -f {}",
        common::BIN,
        env.state_dir().display(),
        file.display()
    )
}

#[test]
fn the_list_says_ready_and_not_ready_from_a_tether_toml() {
    let env = TestEnv::new("ready_tui");
    let port = free_port();
    let config = env.path("tether.toml");
    let toml = format!(
        r#"
[[command]]
name = "api"
shell = "sleep 1; echo 'listening on 8080'; exec sleep 300"
ready_log = '^listening on \d+$'

[[command]]
name = "db"
shell = "exec sleep 300"
ready_tcp = {port}
ready_interval = "200ms"
ready_timeout = "1s"
"#
    );
    std::fs::write(&config, toml).expect("write tether.toml");
    let tmux = common::tmux::Tmux::start(&env, 200, 50);
    tmux.type_line(&env, &tui_line(&env, &config));
    let screen = tmux.wait_screen(&env, "api ready and db not ready", |s| {
        let row = |name: &str| {
            s.lines()
                .find(|l| l.contains(name))
                .unwrap_or("")
                .to_string()
        };
        row("#1 api ").contains(" ready ") && row("#2 db ").contains(" not ready ")
    });
    // The list and `tether ps` say it in the same words.
    let ps = common::run_to_end(&env, env.tether(&["ps"]), "tether ps");
    let ps = String::from_utf8_lossy(&ps.stdout).into_owned();
    let ps_row = |name: &str| {
        (ps.lines())
            .find(|line| line.split_whitespace().any(|word| word == name))
            .unwrap_or_else(|| panic!("no {name} row: {ps}"))
    };
    assert!(
        ps_row("api").contains("ready") && !ps_row("api").contains("not ready"),
        "api is ready: {ps}"
    );
    assert!(ps_row("db").contains("not ready"), "db is not ready: {ps}");
    // The journal has the events the list read.
    let dirs = common::journal::command_dirs(&env.state_dir());
    let events: Vec<Vec<&'static str>> = dirs
        .iter()
        .map(|d| kinds(&common::journal::events_now(d)))
        .collect();
    assert!(
        events.iter().any(|k| k.contains(&"ready"))
            && events.iter().any(|k| k.contains(&"not_ready")),
        "{events:?}\n{screen}"
    );
    tmux.keys(&env, &["q"]);
    tmux.wait_screen(&env, "the quit question", |s| s.contains("stop"));
    tmux.keys(&env, &["y"]);
    for dir in &dirs {
        common::wait_until(&env, "the command's result", || {
            dir.join("result.json").exists()
        });
    }
    drop(tmux);
    env.finish();
}

#[test]
fn tether_exec_takes_a_probe_and_refuses_two_or_a_bad_one() {
    let env = TestEnv::new("ready_exec_cli");
    let done = env.path("done");
    // It runs until the test has seen `ready`: a command that exited proves nothing.
    let script = format!(
        "echo 'up on 80'; while [ ! -e '{}' ]; do sleep 0.05; done",
        done.display()
    );
    let running = env.spawn_exec(
        &["--ready-log", "^up on \\d+$", "--ready-timeout", "20s"],
        &["sh", "-c", &script],
    );
    let dir = env.wait_command_dir();
    common::wait_until(&env, "ready in the journal", || {
        common::journal::events_now(&dir)
            .iter()
            .any(|e| is_decision(&e.kind))
    });
    std::fs::write(&done, "").expect("let the command end");
    let run = running.wait(&env);
    assert_eq!(run.code(), 0, "{}", run.stderr_text());
    let record = load_complete(&dir);
    let ready: Vec<(bool, String, String, u64)> = (record.events.iter())
        .filter(|e| is_decision(&e.kind))
        .map(decision)
        .collect();
    assert_eq!(ready.len(), 1, "{:?}", kinds(&record.events));
    assert_eq!(
        (ready[0].0, ready[0].1.as_str(), ready[0].2.as_str()),
        (true, "log", "up on 80")
    );
    let refusals = [
        (
            &["--ready-tcp", "80", "--ready-log", "x"][..],
            "cannot be used with",
        ),
        (&["--ready-timeout", "1s"][..], "--ready-"),
        (
            &["--ready-http", "https://127.0.0.1/"][..],
            "use ready_exec",
        ),
        (&["--ready-tcp", "db:5432"][..], "not an IP address"),
        (&["--ready-exec", " "][..], "is empty"),
        (
            &["--ready-exec", "true", "--ready-timeout", "0s"][..],
            "above 0",
        ),
        (
            &["--ready-exec", "true", "--ready-interval", "0ms"][..],
            "above 0",
        ),
        (
            &["--ready-http", "http://127.0.0.1/a\r\nX: 1"][..],
            "percent-encoded",
        ),
    ];
    for (options, said) in refusals {
        let out = common::run_to_end(&env, env.exec_command(options, &["true"]), "tether exec");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{options:?}: {stderr}");
        assert!(stderr.contains(said), "{options:?}: {stderr}");
    }
    env.finish();
}
