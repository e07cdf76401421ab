//! `tether watch` in a real terminal: it lists every command of the sessions it follows,
//! however short, each with how it really ended. tmux runs the watch, `capture-pane` reads it.

use crate::common;

use std::time::{Duration, Instant};

use common::tmux::Tmux;
use common::{BIN, TestEnv};

fn watch_line(env: &TestEnv, args: &str) -> String {
    format!(
        "exec {BIN} --state-dir {} watch {args}",
        env.state_dir().display()
    )
}

/// Whether a row named `name` (`SESSION/NAME` in the watch of every session) shows `state`.
fn shows(screen: &str, name: &str, state: &str) -> bool {
    screen.lines().any(|l| {
        l.contains(state)
            && l.split_whitespace()
                .any(|word| word == name || word.ends_with(&format!("/{name}")))
    })
}

/// Issue 15: 40 commands of a few ms each, half failing, 50 ms apart, all started while the
/// watch runs: every one is listed, with its own exit code (polling twice a second showed 1).
#[test]
fn forty_short_commands_are_all_listed_with_their_exit_codes() {
    let env = TestEnv::new("watch-burst");
    let tmux = Tmux::start(&env, 200, 60);
    tmux.type_line(&env, &watch_line(&env, ""));
    tmux.wait_screen(&env, "the watch", |s| s.contains("Commands"));
    let code = |i: usize| if i % 2 == 1 { 3 } else { 0 };
    for i in 0..40 {
        let name = format!("c{i:02}");
        let script = format!("exit {}", code(i));
        let run = env.exec(
            &["--session", "burst", "--name", &name],
            &["sh", "-c", &script],
        );
        assert_eq!(run.code(), code(i), "{}", run.stderr_text());
        std::thread::sleep(Duration::from_millis(50));
    }
    // The list is shorter than 40 rows: its top (Home; g in a watch goes to the latest
    // attention) and its bottom (G) in turn.
    let mut missing: Vec<usize> = (0..40).collect();
    let start = Instant::now();
    for key in ["Home", "G"].iter().cycle() {
        let screen = tmux.screen(&env);
        // No row but the 40 (none for a reserved number renamed to its command's name).
        // (The title and the session's header count failures, the status bar names the
        // latest one; no row's state says it.)
        assert!(
            !screen.lines().any(|l| l.contains(" failed ")
                && !l.contains("Commands")
                && !l.contains('▾')
                && !l.contains("quit")),
            "{screen}"
        );
        missing.retain(|&i| !shows(&screen, &format!("c{i:02}"), &format!("exit {}", code(i))));
        if missing.is_empty() {
            break;
        }
        assert!(
            start.elapsed() < common::DEADLINE,
            "rows {missing:?} not listed with their exit codes; screen:\n{screen}"
        );
        tmux.keys(&env, &[key]);
        std::thread::sleep(Duration::from_millis(100));
    }
    tmux.keys(&env, &["q"]);
    drop(tmux);
    env.finish();
}

/// Issue 15: a command that ended before the watch started is listed as it ended (its
/// session ended within the hour), not as `failed 0ms`.
#[test]
fn a_command_ended_before_the_watch_is_listed_as_it_ended() {
    let env = TestEnv::new("watch-before");
    let run = env.exec(
        &["--session", "earlier", "--name", "early"],
        &["sh", "-c", "exit 5"],
    );
    assert_eq!(run.code(), 5, "{}", run.stderr_text());
    let tmux = Tmux::start(&env, 200, 60);
    tmux.type_line(&env, &watch_line(&env, ""));
    let screen = tmux.wait_screen(&env, "the ended command", |s| shows(s, "early", "exit 5"));
    assert!(!screen.contains("failed 0ms"), "{screen}");
    tmux.keys(&env, &["q"]);
    drop(tmux);
    env.finish();
}

/// Issue 15: `tether watch SESSION` shows that session whole though nothing in it runs.
#[test]
fn a_named_session_is_shown_whole() {
    let env = TestEnv::new("watch-session");
    for (name, script) in [("first", "exit 0"), ("second", "exit 7")] {
        env.exec(
            &["--session", "done", "--name", name],
            &["sh", "-c", script],
        );
    }
    let tmux = Tmux::start(&env, 200, 60);
    tmux.type_line(&env, &watch_line(&env, "done"));
    tmux.wait_screen(&env, "the whole session", |s| {
        shows(s, "first", "exit 0") && shows(s, "second", "exit 7")
    });
    tmux.keys(&env, &["q"]);
    drop(tmux);
    env.finish();
}

/// Issue 15: a watch started before any state directory exists makes it (privately) and
/// lists the first command that comes.
#[test]
fn a_watch_without_a_state_dir_lists_the_first_command() {
    let env = TestEnv::new("watch-fresh");
    let fresh = env.path("fresh-state");
    let tmux = Tmux::start(&env, 200, 60);
    tmux.type_line(
        &env,
        &format!("exec {BIN} --state-dir {} watch", fresh.display()),
    );
    tmux.wait_screen(&env, "the watch", |s| s.contains("Commands"));
    let mut exec = std::process::Command::new(BIN);
    exec.arg("exec")
        .arg("--state-dir")
        .arg(&fresh)
        .args(["--session", "late", "--name", "late", "--", "true"])
        .env(common::TAG_VAR, &env.tag)
        .stdin(std::process::Stdio::null());
    let run = env.spawn_captured(exec).wait(&env);
    assert_eq!(run.code(), 0, "{}", run.stderr_text());
    tmux.wait_screen(&env, "the first command of a new state dir", |s| {
        shows(s, "late", "exit 0")
    });
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(&fresh)
            .expect("the state dir")
            .permissions(),
    );
    assert_eq!(mode & 0o777, 0o700);
    tmux.keys(&env, &["q"]);
    drop(tmux);
    env.finish();
}
