//! `tether watch` in a real terminal tells what needs the operator: a session that appears
//! while it runs, whose command journaled a `failed` attention, gets a row in the "needs
//! you" count and the status bar, and the watch writes an OSC 9 notification and BEL to its
//! terminal (tmux has no focus reports on by default: the window may not be looked at).
//! `pipe-pane` keeps what the watch wrote; `capture-pane` reads the screen.

use crate::common;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use common::tmux::Tmux;
use common::{BIN, TestEnv, wait_for_text};

const FIXTURE_T0: u64 = 1_767_323_045_000;

/// The fixture's `02-fail` as a session of its own journaled just now: every time moved by
/// the same amount, the directories and files private as tether's are.
fn journal_now(into: &Path, session: &str) {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let shift = |text: &str| -> String {
        let mut value: serde_json::Value = serde_json::from_str(text).unwrap();
        for key in ["ts_ms", "started_ms", "ended_ms"] {
            if let Some(ms) = value.get(key).and_then(serde_json::Value::as_u64) {
                value[key] = (ms - FIXTURE_T0 + now).into();
            }
        }
        value.to_string()
    };
    let fixture = common::every_kind_fixture();
    let session_dir = into.join(session);
    let command_dir = session_dir.join("02-fail");
    fs::create_dir_all(&command_dir).unwrap();
    let session_json = fs::read_to_string(fixture.join("session.json")).unwrap();
    fs::write(session_dir.join("session.json"), shift(&session_json)).unwrap();
    for file in ["command.json", "stdout.log", "stderr.log"] {
        fs::copy(fixture.join("02-fail").join(file), command_dir.join(file)).unwrap();
    }
    let events = fs::read_to_string(fixture.join("02-fail/events.jsonl")).unwrap();
    let events: String = events.lines().map(|l| shift(l) + "\n").collect();
    fs::write(command_dir.join("events.jsonl"), events).unwrap();
    let result = fs::read_to_string(fixture.join("02-fail/result.json")).unwrap();
    fs::write(command_dir.join("result.json"), shift(&result)).unwrap();
    for dir in [&session_dir, &command_dir] {
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700)).unwrap();
        for entry in fs::read_dir(dir).unwrap().flatten() {
            if entry.path().is_file() {
                fs::set_permissions(entry.path(), fs::Permissions::from_mode(0o600)).unwrap();
            }
        }
    }
}

#[test]
fn a_failed_command_appearing_in_a_watch_is_told_with_osc_9_and_bel() {
    let env = TestEnv::new("attention-watch");
    let config = env.path("config/tether");
    fs::create_dir_all(&config).unwrap();
    fs::write(
        config.join("config.toml"),
        "[notify]\nterminal = \"osc9\"\ndesktop = false\n",
    )
    .unwrap();
    let tmux = Tmux::start(&env, 160, 40);
    let written = env.path("pane.out");
    tmux.cmd(
        &[
            "pipe-pane",
            "-o",
            "-t",
            "0",
            &format!("cat >> {}", written.display()),
        ],
        &env,
    );
    tmux.type_line(
        &env,
        &format!(
            "XDG_CONFIG_HOME={} exec {BIN} --state-dir {} watch",
            env.path("config").display(),
            env.state_dir().display()
        ),
    );
    tmux.wait_screen(&env, "the watch", |s| s.contains("Commands"));
    // Made aside and renamed in whole, as a session appears to the watch at once.
    let sessions = env.state_dir().join("sessions");
    journal_now(&env.path("aside"), "told");
    fs::rename(env.path("aside/told"), sessions.join("told")).unwrap();
    // The count and the status bar are waited for together: a capture may catch a frame
    // half drawn, its top (the count) new and its bottom (the status bar) not yet.
    tmux.wait_screen(&env, "the failed mark, named in the status bar", |s| {
        s.contains("1 needs you")
            && s.lines()
                .last()
                .is_some_and(|status| status.contains("told/02 fail: failed"))
    });
    let first = "]9;tether: told/02 failed: fail: exit 3";
    wait_for_text(&env, &written, first);
    // Inside tmux the OSC goes through its passthrough, BEL after it as it is.
    let osc = "\x1bPtmux;\x1b\x1b]9;tether: told/02 failed: fail: exit 3\x07\x1b\\\x07";
    // Told once: counted only once the watch has looked again and told of a later failure
    // (after the gap between notices), so a second telling of the first would be written by
    // then; counted at the first telling, a repeat could not be seen.
    journal_now(&env.path("aside"), "later");
    fs::rename(env.path("aside/later"), sessions.join("later")).unwrap();
    wait_for_text(&env, &written, "]9;tether: later/02 failed: fail: exit 3");
    let told = String::from_utf8_lossy(&fs::read(&written).unwrap()).into_owned();
    assert!(told.contains(osc), "the watch wrote: {told:?}");
    assert_eq!(told.matches(first).count(), 1, "told once: {told:?}");
    assert_eq!(told.matches("]9;tether:").count(), 2, "{told:?}");
    tmux.keys(&env, &["q"]);
    drop(tmux);
    env.finish();
}
