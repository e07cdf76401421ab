//! Leftovers in custody, end to end: what a shim command leaves running when its main process
//! exits (a server started with `&`) keeps running, seen (`tether ps`: left running), while
//! the one that ran the shim lives; it is stopped when that caller exits, on `tether stop`,
//! or after `TETHER_LEFTOVERS_MAX`; `TETHER_LEFTOVERS=stop` stops it at once, as before.

use crate::common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::direct::DirectBroker;
use common::journal::{leftovers_stopped, load_complete, orphans_reaped};
use common::procs::{is_gone, signal};
use common::{BIN, DEADLINE, TAG_VAR, TestEnv, free_port, run_to_end, wait_until};
use nix::sys::signal::Signal;
use tether::protocol::{Event, EventKind, LeftoversEnd};

/// The `bash` link `tether shims` makes, in the test's scratch space.
fn bash_shim(env: &TestEnv) -> PathBuf {
    let dir = env.path("shims");
    let out = Command::new(BIN).arg("shims").arg(&dir).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    dir.join("bash")
}

/// `program ARGS` in the test's state dir, tagged, outside any session the runner is in.
fn tagged(env: &TestEnv, program: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(program);
    command
        .args(args)
        .env("TETHER_STATE_DIR", env.state_dir())
        .env(TAG_VAR, &env.tag)
        .env_remove("TETHER_SESSION")
        .env_remove("TETHER_BROKER_ID")
        .env_remove("TETHER_LEFTOVERS")
        .env_remove("TETHER_LEFTOVERS_MAX")
        .stdin(Stdio::null());
    command
}

/// Whether an HTTP GET to 127.0.0.1:`port` gets an answer.
fn http_answers(port: u16) -> bool {
    let Ok(mut stream) = TcpStream::connect((Ipv4Addr::LOCALHOST, port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    if stream
        .write_all(b"GET / HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    answer.starts_with(b"HTTP/")
}

fn kept(events: &[Event]) -> Vec<i32> {
    events
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::LeftoversKept { pids } => Some(pids.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

/// Waits for the single command's `result.json`: its broker is done.
fn wait_result(env: &TestEnv) -> PathBuf {
    let dir = env.wait_command_dir();
    wait_until(env, "result.json", || dir.join("result.json").exists());
    dir
}

/// `tether ps --json`'s state for each live command.
fn ps_states(env: &TestEnv) -> Vec<String> {
    let out = run_to_end(env, env.tether(&["ps", "--json"]), "tether ps");
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).expect("ps --json");
    rows.as_array()
        .expect("a list")
        .iter()
        .map(|row| row["state"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[test]
fn a_server_started_with_and_runs_until_the_shims_caller_exits() {
    let env = TestEnv::new("custody_server");
    let shim = bash_shim(&env);
    let port = free_port();
    let out = env.path("shim.out");
    // The caller runs the shim with its stdout and stderr on a pipe, as an agent does, then
    // stays: `cat` ends (and `returned` is said) only when nothing holds that pipe any more,
    // the shim and its broker included.
    let script = format!(
        r#""$SHIM" -c 'python3 -m http.server {port} --bind 127.0.0.1 & echo started' 2>&1 | cat > "$OUT"; echo returned; exec sleep 600"#
    );
    let mut caller = tagged(&env, Path::new("/bin/sh"), &["-c", &script])
        .env("SHIM", &shim)
        .env("OUT", &out)
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the caller");
    let caller_pid = caller.id() as i32;
    let (said, lines) = std::sync::mpsc::channel();
    let stdout = caller.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = said.send(line);
        }
    });
    let first = lines.recv_timeout(DEADLINE);
    assert_eq!(first.as_deref(), Ok("returned"), "the shim did not return");
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "started\n");

    // The server runs, answers, and is listed as left running.
    wait_until(&env, "the server to answer", || http_answers(port));
    let dir = env.command_dir();
    let states = ps_states(&env);
    assert!(
        states.len() == 1 && states[0].starts_with("left running"),
        "{states:?}"
    );
    let events = tether::journal::CommandRecord::load(&dir).events;
    let leftovers = kept(&events);
    assert!(!leftovers.is_empty(), "no leftovers_kept: {events:?}");
    assert!(!dir.join("result.json").exists());
    // The pid to act on is the server's, which runs, not the shell's, which exited.
    let listed = run_to_end(&env, env.tether(&["ps", "--json"]), "tether ps");
    let rows: serde_json::Value = serde_json::from_slice(&listed.stdout).expect("ps --json");
    let pid = rows[0]["left_running_pid"].as_i64().map(|p| p as i32);
    assert!(
        pid.is_some_and(|pid| leftovers.contains(&pid)),
        "{pid:?} not among {leftovers:?}"
    );

    // The caller goes: so does the server.
    signal(caller_pid, Signal::SIGKILL);
    let _ = caller.wait();
    wait_result(&env);
    for pid in &leftovers {
        wait_until(&env, "the leftovers to be gone", || is_gone(*pid));
    }
    assert!(!http_answers(port));
    let record = load_complete(&dir);
    assert_eq!(
        leftovers_stopped(&record.events),
        Some((LeftoversEnd::CallerExited, Some(caller_pid)))
    );
    let result = record.result.expect("result.json");
    assert_eq!(result.exit.and_then(|e| e.code), Some(0));
    let custody = result.leftovers.expect("the leftovers in result.json");
    assert_eq!(custody.stopped, Some(LeftoversEnd::CallerExited));
    assert_eq!(custody.kept, leftovers);
    assert!(ps_states(&env).is_empty());
    env.finish();
}

#[test]
fn leftovers_stop_rule_stops_them_with_the_command() {
    let env = TestEnv::new("custody_stop_rule");
    let shim = bash_shim(&env);
    let mut command = tagged(&env, &shim, &["-c", "sleep 600 & echo $!"]);
    command.env("TETHER_LEFTOVERS", "stop");
    let out = run_to_end(&env, command, "the shim");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let sleep: i32 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    // Done when the shim returned: stopped and reaped, as before custody existed.
    let record = load_complete(&env.command_dir());
    assert!(record.result.is_some());
    assert!(kept(&record.events).is_empty());
    assert_eq!(orphans_reaped(&record.events), [sleep]);
    env.finish();
}

#[test]
fn leftovers_max_stops_them_after_that_long() {
    let env = TestEnv::new("custody_max");
    let shim = bash_shim(&env);
    let mut command = tagged(&env, &shim, &["-c", "sleep 600 & echo $!"]);
    command.env("TETHER_LEFTOVERS_MAX", "1s");
    let out = run_to_end(&env, command, "the shim");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let sleep: i32 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    // The caller (this test) lives on; the rule's longest custody ends it.
    let dir = wait_result(&env);
    assert!(is_gone(sleep));
    let record = load_complete(&dir);
    assert_eq!(kept(&record.events), [sleep]);
    assert_eq!(
        leftovers_stopped(&record.events),
        Some((LeftoversEnd::MaxDuration, None))
    );
    let custody = record.result.and_then(|r| r.leftovers).unwrap();
    assert!(custody.kept_ms >= 1000, "{custody:?}");
    // The post-mortem says what was kept and why it ended, not a plain `exit 0`.
    let session = dir.parent().unwrap().file_name().unwrap().to_str().unwrap();
    // Wide enough for the whole state: at 80 columns it is cut to leave the command room.
    let mut sessions = env.tether(&["sessions", session]);
    sessions.env("COLUMNS", "160");
    let listed = sessions.output().unwrap();
    let listed = String::from_utf8_lossy(&listed.stdout);
    assert!(
        listed.contains("exit 0, kept 1 until TETHER_LEFTOVERS_MAX"),
        "{listed}"
    );
    env.finish();
}

#[test]
fn tether_stop_reaches_leftovers_and_kills_one_that_ignores_term() {
    let env = TestEnv::new("custody_stop");
    // `tether exec --keep-leftovers`: its own parent (this test) is the caller.
    let mut command = tagged(
        &env,
        Path::new(BIN),
        &[
            "exec",
            "--session",
            "kept",
            "--grace",
            "500ms",
            "--keep-leftovers",
            "--",
            "sh",
            "-c",
            "trap '' TERM; sleep 600 & echo $!",
        ],
    );
    command.stdout(Stdio::piped());
    let out = run_to_end(&env, command, "tether exec");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let sleep: i32 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    assert!(!is_gone(sleep));
    assert_eq!(ps_states(&env), ["left running (1)"]);

    let stop = run_to_end(&env, env.tether(&["stop", "kept"]), "tether stop");
    assert!(stop.status.success(), "{stop:?}");
    let dir = wait_result(&env);
    assert!(is_gone(sleep));
    let record = load_complete(&dir);
    assert_eq!(
        leftovers_stopped(&record.events),
        Some((LeftoversEnd::Operator, None))
    );
    let result = record.result.unwrap();
    assert!(result.hard_killed, "the TERM-ignoring sleep was KILLed");
    env.finish();
}

#[test]
fn bad_leftovers_values_are_refused_with_the_rule() {
    let env = TestEnv::new("custody_bad_env");
    let shim = bash_shim(&env);
    for (var, value) in [
        ("TETHER_LEFTOVERS", "forever"),
        ("TETHER_LEFTOVERS_MAX", "soon"),
    ] {
        let mut command = tagged(&env, &shim, &["-c", "echo ran"]);
        command.env(var, value);
        let out = run_to_end(&env, command, "the shim");
        assert_eq!(out.status.code(), Some(2), "{var}={value}: {out:?}");
        assert!(out.stdout.is_empty(), "the command ran");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(value) && stderr.contains("TETHER_LEFTOVERS is `keep`"),
            "{stderr}"
        );
    }
    assert!(env.command_dirs().is_empty());
    env.finish();
}

#[test]
fn leftovers_of_a_caller_already_gone_are_stopped_at_once() {
    let env = TestEnv::new("custody_caller_gone");
    let mut gone = Command::new("true").spawn().unwrap();
    let gone_pid = gone.id() as i32;
    gone.wait().unwrap();
    let mut broker = DirectBroker::spawn(&env, "01-gone");
    let mut request = broker.launch_request("gone", &["sh", "-c", "sleep 600 &"], 500);
    request["leftovers"] = serde_json::json!({
        "keep": true,
        "custodians": [{ "pid": gone_pid, "start_ticks": 1, "role": "caller" }],
    });
    broker.send(&request.to_string());
    let events = broker.wait_close();
    assert!(kept(&events).is_empty(), "{events:?}");
    assert_eq!(
        leftovers_stopped(&events),
        Some((LeftoversEnd::CallerGone, Some(gone_pid)))
    );
    assert_eq!(orphans_reaped(&events).len(), 1);
    broker.wait_exit();
    env.finish();
}
