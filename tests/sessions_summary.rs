//! `tether sessions` on an agent-sized session: one line per session within the width,
//! whatever the number of commands, with its counts and first failures; `--long` and
//! `tether sessions SESSION` with one line per command, each within the width too; a
//! session that still runs lasts until now.

use crate::common;

use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::process::{Output, Stdio};

use common::{TestEnv, copy_dir, every_kind_fixture, run_to_end, wait_for_text, wait_until};
use serde_json::Value;
use tether::journal::CommandId;
use tether::model::output::text_width;

const COMMANDS: usize = 1000;

/// A session `agent-run` of [`COMMANDS`] recorded commands (journals copied from the
/// fixture's): every 20th fails with exit 3 (the first at 07), every 250th is killed by the
/// watchdog, the rest exit 0. Returns the numbers of the failed and the killed.
fn agent_session(env: &TestEnv) -> (Vec<usize>, Vec<usize>) {
    let state = env.state_dir();
    let sessions = state.join("sessions");
    let session = sessions.join("agent-run");
    fs::create_dir_all(&session).unwrap();
    for dir in [&state, &sessions, &session] {
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700)).unwrap();
    }
    let mut info: serde_json::Value =
        serde_json::from_slice(&fs::read(every_kind_fixture().join("session.json")).unwrap())
            .unwrap();
    info["id"] = "agent-run".into();
    fs::write(session.join("session.json"), info.to_string()).unwrap();
    let (mut failed, mut killed) = (Vec::new(), Vec::new());
    for n in 1..=COMMANDS {
        let (from, name) = if n % 250 == 0 {
            killed.push(n);
            ("04-killed", "sleep")
        } else if n % 20 == 7 {
            failed.push(n);
            ("02-fail", "make")
        } else {
            ("01-ok", "echo")
        };
        copy_dir(
            &every_kind_fixture().join(from),
            &session.join(CommandId::new("s", n as u64, name).dir_name()),
        );
    }
    (failed, killed)
}

fn sessions(env: &TestEnv, columns: usize, args: &[&str]) -> Output {
    let mut command = env.tether(&[&["sessions"][..], args].concat());
    command.env("COLUMNS", columns.to_string());
    let output = run_to_end(env, command, "tether sessions");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

fn lines(output: &Output) -> Vec<String> {
    String::from_utf8(output.stdout.clone())
        .unwrap()
        .lines()
        .map(String::from)
        .collect()
}

#[test]
fn a_thousand_commands_are_one_line_within_the_width() {
    let env = TestEnv::new("sessions_thousand");
    let (failed, killed) = agent_session(&env);
    let ok = COMMANDS - failed.len() - killed.len();
    for columns in [50, 80, 120, 200] {
        let out = lines(&sessions(&env, columns, &[]));
        assert_eq!(
            out.len(),
            1,
            "one line for the session at {columns}: {out:?}"
        );
        let line = &out[0];
        assert!(
            text_width(line) <= columns,
            "{columns} columns: {} wide: {line}",
            text_width(line)
        );
        assert!(line.starts_with("agent-run"), "{line}");
        let counts = format!(
            "{COMMANDS} cmds: {ok} ok, {} failed, {} killed",
            failed.len(),
            killed.len()
        );
        if columns >= 80 {
            assert!(line.contains(&counts), "{columns}: {line}");
            // The first failures by NN-name, as many as fit, then how many more.
            assert!(line.contains(" 07-make"), "{columns}: {line}");
            let named = line.matches("-make").count() + line.matches("-sleep").count();
            let more: usize = line
                .rsplit('+')
                .next()
                .and_then(|m| m.strip_suffix(" more"))
                .unwrap_or_else(|| panic!("no `+N more` at {columns}: {line}"))
                .parse()
                .unwrap();
            assert_eq!(named + more, failed.len() + killed.len(), "{line}");
        }
        if columns >= 120 {
            assert!(line.contains("2026-01-02 03:04:05"), "the start: {line}");
        }
    }
    env.finish();
}

#[test]
fn long_lists_every_command_within_the_width() {
    let env = TestEnv::new("sessions_long");
    agent_session(&env);
    for columns in [60, 100] {
        for args in [&["--long"][..], &["agent-run"]] {
            let out = lines(&sessions(&env, columns, args));
            // The session's line, a header, then each command.
            assert_eq!(out.len(), 2 + COMMANDS, "{args:?}");
            for line in &out {
                assert!(text_width(line) <= columns, "{args:?} at {columns}: {line}");
            }
            assert!(out[1].trim_start().starts_with('#'), "{}", out[1]);
            assert!(out[2].trim_start().starts_with("01-echo"), "{}", out[2]);
            assert!(out[8].contains("exit 3"), "{}", out[8]);
            let killed = out.iter().find(|l| l.contains("250-sleep")).unwrap();
            assert!(killed.contains("SIGKILL"), "{killed}");
            assert!(
                out[COMMANDS + 1].contains("1000-sleep"),
                "{}",
                out[COMMANDS + 1]
            );
        }
    }
    // Wide enough, each command's start counts from the session's start.
    let wide = lines(&sessions(&env, 200, &["agent-run"]));
    assert!(
        wide[1].contains("START") && wide[1].contains("CPU"),
        "{}",
        wide[1]
    );
    assert!(wide[2].contains("+0:00.104"), "{}", wide[2]);
    env.finish();
}

#[test]
fn printed_text_is_sanitized() {
    let env = TestEnv::new("sessions_sanitized");
    agent_session(&env);
    // A command whose name and command line carry escapes.
    let dir = env.state_dir().join("sessions/agent-run/1001-evil");
    copy_dir(&every_kind_fixture().join("02-fail"), &dir);
    let request = dir.join("command.json");
    let mut json: serde_json::Value = serde_json::from_slice(&fs::read(&request).unwrap()).unwrap();
    json["name"] = "evil\u{1b}]0;owned\u{7}".into();
    json["command"] = serde_json::json!({ "argv": ["printf", "\u{1b}[2J\u{9b}31m"] });
    fs::write(&request, json.to_string()).unwrap();
    let out = sessions(&env, 200, &["--long"]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        !text.chars().any(|c| c.is_control() && c != '\n'),
        "{text:?}"
    );
    assert!(text.contains("1001-evil"), "{text}");
    env.finish();
}

/// A session while a command of it runs: its duration is the time so far, not the time to
/// its last event, and `--json` gives it no end until the command ends.
#[test]
fn a_running_sessions_duration_runs_until_now() {
    let env = TestEnv::new("sessions-live");
    let mut command = env.exec_command(
        &["--session", "live"],
        &["sh", "-c", "echo started; read line"],
    );
    command
        .env_remove("TETHER_SESSION")
        .env_remove("TETHER_BROKER_ID")
        .stdin(Stdio::piped());
    let mut running = env.spawn_captured(command);
    let mut stdin = running.child.stdin.take().unwrap();
    let dir = env.wait_command_dir();
    wait_for_text(&env, &dir.join("stdout.log"), "started");
    let ended = |env: &TestEnv| {
        let json: Value = serde_json::from_slice(&sessions(env, 200, &["--json"]).stdout).unwrap();
        json["sessions"][0]["ended"].clone()
    };
    assert_eq!(ended(&env), Value::Null, "no end while it runs");
    // Its last event was the echo; the line's duration goes on past it: `1.0s`, not `4ms`.
    let duration = |env: &TestEnv| {
        let line = lines(&sessions(env, 200, &[]))[0].clone();
        assert!(line.contains("1 running"), "{line}");
        line.split_whitespace()
            .nth(3)
            .unwrap_or_default()
            .to_string()
    };
    wait_until(&env, "the duration to pass a second", || {
        !duration(&env).ends_with("ms")
    });
    // So does the command's, in the session's table.
    let table = lines(&sessions(&env, 200, &["live"]));
    let row: Vec<&str> = table[2].split_whitespace().collect();
    assert_eq!(row[3], "running", "{table:?}");
    assert!(!["-", "0ms"].contains(&row[2]), "{table:?}");
    stdin.write_all(b"go\n").unwrap();
    drop(stdin);
    let run = running.wait(&env);
    assert_eq!(run.code(), 0, "{}", run.stderr_text());
    assert!(ended(&env).is_string(), "an end once it ended");
    env.finish();
}
