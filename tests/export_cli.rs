//! `tether export` and `tether sessions --json` as commands, over copies of the checked-in
//! session `tests/fixtures/every-kind` in a private state directory: finding sessions (ids,
//! prefixes, paths), the errors for what is not one, `-o FILE`. No terminal; only tether runs.

use crate::common;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::Output;

use serde_json::Value;

use common::{TestEnv, copy_dir, every_kind_fixture, run_to_end};
use tether::export::SessionsDocument;

/// A state directory holding copies of the fixture under the given names, started at the
/// given times.
fn state_with(env: &TestEnv, sessions: &[(&str, u64)]) -> PathBuf {
    let state = env.state_dir();
    let dir = state.join("sessions");
    fs::create_dir_all(&dir).unwrap();
    fs::set_permissions(&state, fs::Permissions::from_mode(0o700)).unwrap();
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)).unwrap();
    for (name, started_ms) in sessions {
        copy_dir(&every_kind_fixture(), &dir.join(name));
        let info_path = dir.join(name).join("session.json");
        let mut info: Value = serde_json::from_slice(&fs::read(&info_path).unwrap()).unwrap();
        info["id"] = Value::from(*name);
        info["started_ms"] = Value::from(*started_ms);
        fs::write(&info_path, serde_json::to_vec(&info).unwrap()).unwrap();
    }
    state
}

/// `tether ARGS` on the test's state directory (where `state_with` put the sessions).
fn tether(env: &TestEnv, args: &[&str]) -> Output {
    run_to_end(env, env.tether(args), &format!("tether {args:?}"))
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn sessions_json_round_trips_newest_last_with_the_cut_short_command() {
    let env = TestEnv::new("sessions-json");
    state_with(&env, &[("zz-older", 1_000), ("aa-newer", 2_000)]);
    let output = tether(&env, &["sessions", "--json"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let document: SessionsDocument =
        serde_json::from_slice(&output.stdout).expect("the documented structure");
    let again: Value = serde_json::to_value(&document).unwrap();
    let raw: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(again, raw, "the document round-trips");
    let ids: Vec<&str> = document.sessions.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, ["zz-older", "aa-newer"], "newest last");
    let session = &document.sessions[1];
    assert!(session.cut_short);
    assert_eq!(session.started.as_deref(), Some("1970-01-01T00:00:02.000Z"));
    assert_eq!(session.commands.len(), 11);
    let cut: Vec<&str> = session
        .commands
        .iter()
        .filter(|c| c.cut_short)
        .map(|c| c.id.as_str())
        .collect();
    assert_eq!(cut, ["10-crashed"]);
    let crashed = &session.commands[9];
    assert_eq!(crashed.state, "lost");
    assert!(
        crashed.damage.iter().any(|d| d.contains("partial line")),
        "{:?}",
        crashed.damage
    );
    let command = |id: &str| session.commands.iter().find(|c| c.id == id).unwrap();
    assert_eq!(command("02-fail").exit_code, Some(3));
    assert_eq!(command("04-killed").signal_name.as_deref(), Some("SIGKILL"));
    assert!(command("04-killed").badges.timeout && command("04-killed").badges.killed);
    assert_eq!(command("04-killed").badges.orphans, 1);
    // Its four workers were kept by the leftovers rule, then stopped with the broker.
    assert!(!command("03-tree").badges.stragglers);
    assert_eq!(command("03-tree").badges.kept, 4);
    assert!(!command("03-tree").badges.drained);
    assert!(command("06-orphaned").badges.parent_lost);
    let capped = command("07-capped");
    assert!(capped.badges.capped);
    assert_eq!((capped.stdout.written, capped.stdout.stored), (950, 100));
    assert_eq!(command("08-missing").state, "failed_to_start");
    assert_eq!(command("01-ok").argv[0], "sh");
    env.finish();
}

#[test]
fn export_writes_a_private_file_and_says_what_the_journal_lacks() {
    let env = TestEnv::new("export-file");
    state_with(&env, &[("every-kind", 1_000)]);
    let file = env.path("trace.json");
    let output = tether(
        &env,
        &[
            "export",
            "--format",
            "chrome-trace",
            "-o",
            file.to_str().unwrap(),
        ],
    );
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(output.stdout.is_empty());
    assert!(
        stderr(&output).contains("10-crashed: journal cut short"),
        "{}",
        stderr(&output)
    );
    let trace: Value = serde_json::from_slice(&fs::read(&file).unwrap()).unwrap();
    assert!(
        trace["traceEvents"]
            .as_array()
            .is_some_and(|e| !e.is_empty())
    );
    assert_eq!(
        fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    // A link is never written through.
    let target = env.path("target");
    fs::write(&target, b"keep").unwrap();
    let link = env.path("link.json");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let output = tether(
        &env,
        &["export", "every-kind", "-o", link.to_str().unwrap()],
    );
    assert!(!output.status.success());
    assert!(
        stderr(&output).contains("symbolic link"),
        "{}",
        stderr(&output)
    );
    assert_eq!(fs::read(&target).unwrap(), b"keep");
    // By id, to stdout, each format.
    for format in ["jsonl", "text", "otlp"] {
        let output = tether(&env, &["export", "every-kind", "--format", format]);
        assert!(output.status.success(), "{format}: {}", stderr(&output));
        assert!(!output.stdout.is_empty());
    }
    env.finish();
}

#[test]
fn a_prefix_of_several_sessions_lists_them() {
    let env = TestEnv::new("export-prefix");
    state_with(
        &env,
        &[("agent-1", 1_000), ("agent-2", 2_000), ("other", 3_000)],
    );
    let output = tether(&env, &["export", "agent"]);
    assert_eq!(output.status.code(), Some(2));
    let err = stderr(&output);
    assert!(err.contains("names 2 sessions"), "{err}");
    assert!(
        err.contains("agent-1") && err.contains("agent-2") && !err.contains("other"),
        "{err}"
    );
    // A unique prefix picks its session.
    let output = tether(&env, &["export", "oth", "--format", "jsonl"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(String::from_utf8_lossy(&output.stdout).contains(r#""session":"other""#));
    env.finish();
}

#[test]
fn a_missing_session_or_a_directory_that_is_no_session_is_a_clear_error() {
    let env = TestEnv::new("export-bad");
    state_with(&env, &[("every-kind", 1_000)]);
    let output = tether(&env, &["export", "nope"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("no session `nope`"),
        "{}",
        stderr(&output)
    );

    let not_session = env.path("just-a-dir");
    fs::create_dir(&not_session).unwrap();
    fs::write(not_session.join("notes.txt"), b"hello").unwrap();
    let output = tether(&env, &["export", not_session.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("is not a tether session"),
        "{}",
        stderr(&output)
    );

    let missing = env.path("gone");
    let output = tether(&env, &["export", missing.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("no such directory"),
        "{}",
        stderr(&output)
    );

    // A session directory given as a path works, wherever it is.
    let output = tether(
        &env,
        &[
            "export",
            every_kind_fixture().to_str().unwrap(),
            "--format",
            "jsonl",
        ],
    );
    assert!(output.status.success(), "{}", stderr(&output));
    env.finish();
}

#[test]
fn a_damaged_session_exports_what_it_has_and_says_what_is_missing() {
    let env = TestEnv::new("export-damaged");
    let state = state_with(&env, &[("damaged", 1_000)]);
    let session = state.join("sessions/damaged");
    // A garbage line in a journal, and a command whose broker never wrote an event.
    let events = session.join("01-ok/events.jsonl");
    let mut journal = fs::read(&events).unwrap();
    journal.extend_from_slice(b"not an event\n");
    fs::write(&events, journal).unwrap();
    fs::create_dir(session.join("11-half")).unwrap();

    let output = tether(&env, &["export", "damaged", "--format", "text"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let err = stderr(&output);
    assert!(err.contains("damaged/01-ok: journal cut short"), "{err}");
    assert!(err.contains("is not an event"), "{err}");
    assert!(err.contains("damaged/11-half: journal cut short"), "{err}");
    assert!(err.contains("cannot read events.jsonl"), "{err}");
    let report = String::from_utf8_lossy(&output.stdout);
    assert!(report.contains("== 11-half ("), "{report}");

    let output = tether(&env, &["sessions", "--json"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let document: SessionsDocument = serde_json::from_slice(&output.stdout).unwrap();
    let commands = &document.sessions[0].commands;
    let half = commands.iter().find(|c| c.id == "11-half").unwrap();
    assert!(half.cut_short);
    assert_eq!((half.started_ms, half.ended_ms), (None, None));
    assert!(commands.iter().find(|c| c.id == "01-ok").unwrap().cut_short);

    for format in ["chrome-trace", "otlp", "jsonl"] {
        let output = tether(&env, &["export", "damaged", "--format", format]);
        assert!(output.status.success(), "{format}: {}", stderr(&output));
    }
    env.finish();
}

/// Exports say each command as every view does: Claude Code's calls (the checked-in real
/// run, `tests/fixtures/claude-code`) as what the model asked for, past its wrapper, with
/// the argv that ran beside it.
#[test]
fn exports_say_an_agents_command_past_its_wrapper() {
    let env = TestEnv::new("export_wrapped");
    let state = env.state_dir();
    let sessions = state.join("sessions");
    fs::create_dir_all(&sessions).unwrap();
    fs::set_permissions(&state, fs::Permissions::from_mode(0o700)).unwrap();
    fs::set_permissions(&sessions, fs::Permissions::from_mode(0o700)).unwrap();
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/claude-code/sessions/claude-run");
    copy_dir(&fixture, &sessions.join("claude-run"));

    let output = tether(&env, &["sessions", "claude-run", "--json"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let document: SessionsDocument = serde_json::from_slice(&output.stdout).unwrap();
    let ls = document.sessions[0]
        .commands
        .iter()
        .find(|c| c.id == "04-ls")
        .expect("04-ls");
    assert_eq!(ls.command, "ls -la");
    assert!(
        ls.argv.iter().any(|a| a.contains("eval 'ls -la'")),
        "{:?}",
        ls.argv
    );

    let output = tether(&env, &["export", "claude-run", "--format", "otlp"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let otlp = String::from_utf8(output.stdout).unwrap();
    assert!(
        otlp.contains(r#"{"key":"tether.command.text","value":{"stringValue":"ls -la"}}"#),
        "{otlp}"
    );
    env.finish();
}
