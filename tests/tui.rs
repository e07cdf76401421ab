//! End-to-end tests of the real TUI in a real terminal: tmux runs `tether`, `send-keys` types,
//! `capture-pane` reads the screen. Each test has its own tmux server (socket) and kills it.

use crate::common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use common::journal::command_dirs;
use common::tmux::Tmux;
use common::{BIN, TAG_VAR, TestEnv, copy_dir, procs, run_to_end};

/// The shell line that runs tether in place of the pane's shell (so the pane's pid is
/// tether's).
fn tether_line(env: &TestEnv, args: &str) -> String {
    format!("exec {}", tether_child_line(env, args))
}

/// The shell line that runs tether as a child of the pane's shell, which is there again
/// when tether exits.
fn tether_child_line(env: &TestEnv, args: &str) -> String {
    format!("{BIN} --state-dir {} {args}", env.state_dir().display())
}

fn events(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("events.jsonl")).unwrap_or_default()
}

/// The pids a command's broker recorded in its latest non-empty tree event.
fn tree_pids(dir: &Path) -> Vec<i32> {
    let record = tether::journal::CommandRecord::load(dir);
    record
        .events
        .iter()
        .rev()
        .find_map(|e| match &e.kind {
            tether::protocol::EventKind::Tree { processes } if !processes.is_empty() => {
                Some(processes.iter().map(|p| p.pid).collect())
            }
            _ => None,
        })
        .unwrap_or_default()
}

fn wait_tree(env: &TestEnv, dir: &Path, at_least: usize) -> Vec<i32> {
    common::wait_until(env, "the tree to be recorded", || {
        tree_pids(dir).len() >= at_least
    });
    tree_pids(dir)
}

#[test]
fn sigterm_and_sigkill_from_the_keyboard() {
    let env = TestEnv::new("tui-signals");
    let tmux = Tmux::start(&env, 200, 50);
    tmux.type_line(
        &env,
        &tether_line(
            &env,
            "run -c 'sleep 300 & sleep 300 & wait' -c 'trap \"\" TERM; sleep 300 & while :; do sleep 1; done'",
        ),
    );
    tmux.wait_screen(&env, "the tree of the first command", |s| {
        s.contains("Process tree: sleep") && s.contains("sleep 300")
    });
    let dirs = command_dirs(&env.state_dir());
    assert_eq!(dirs.len(), 2);
    let first = wait_tree(&env, &dirs[0], 3);

    // t: SIGTERM to the first command's group; its tree vanishes.
    tmux.keys(&env, &["t"]);
    assert!(
        procs::wait_gone(&first, Duration::from_secs(10)).is_empty(),
        "SIGTERM left processes"
    );
    tmux.wait_screen(&env, "the operator's SIGTERM on the timeline", |s| {
        s.contains("SIGTERM by tether TUI, pid")
    });
    assert!(events(&dirs[0]).contains(r#""signal":"TERM","scope":"group","origin":"operator""#));

    // Select the TERM-ignoring command; t does not end it, K + y does.
    tmux.keys(&env, &["j"]);
    tmux.wait_screen(&env, "the second command selected", |s| {
        s.contains("Process tree: sleep-2")
    });
    let second = wait_tree(&env, &dirs[1], 3);
    tmux.keys(&env, &["t"]);
    tmux.wait_screen(&env, "SIGTERM on the second timeline", |s| {
        s.contains("SIGTERM by tether TUI, pid")
    });
    // The TERM was sent before the timeline showed it, and the kernel discards a signal
    // that is ignored as it is sent: whoever ignores it is untouched, no waiting needed.
    assert!(
        second
            .iter()
            .any(|p| procs::ignores(*p, Signal::SIGTERM) && !procs::is_gone(*p)),
        "a TERM-ignoring process should survive SIGTERM"
    );
    assert!(
        !events(&dirs[1]).contains(r#""signal":"KILL""#),
        "t sends TERM only"
    );
    tmux.keys(&env, &["K"]);
    tmux.wait_screen(&env, "the SIGKILL confirmation", |s| {
        s.contains("Confirm SIGKILL")
    });
    tmux.keys(&env, &["y"]);
    assert!(
        procs::wait_gone(&second, Duration::from_secs(10)).is_empty(),
        "SIGKILL left processes"
    );
    tmux.wait_screen(&env, "the operator's SIGKILL on the timeline", |s| {
        s.contains("SIGKILL by tether TUI, pid") && s.contains("every process seen during the run")
    });

    // q with nothing running quits at once.
    tmux.keys(&env, &["q"]);
    tmux.wait_screen(&env, "the shell back", |s| !s.contains("Commands"));
    drop(tmux);
    env.finish();
}

#[test]
fn kill_9_of_the_tui_leaves_nothing_and_a_complete_journal() {
    let env = TestEnv::new("tui-kill9");
    let tmux = Tmux::start(&env, 200, 50);
    tmux.type_line(
        &env,
        &tether_line(
            &env,
            "run --grace 500ms -c 'sleep 300 & sleep 300 & wait' -c 'trap \"\" TERM; setsid sh -c \"trap \\\"\\\" TERM; sleep 300\" & while :; do sleep 1; done'",
        ),
    );
    tmux.wait_screen(&env, "the TUI", |s| s.contains("Process tree"));
    let dirs = command_dirs(&env.state_dir());
    assert_eq!(dirs.len(), 2);
    let mut all = wait_tree(&env, &dirs[0], 3);
    all.extend(wait_tree(&env, &dirs[1], 3));
    let tui = tmux.pane_pid(&env);
    procs::signal(tui, nix::sys::signal::Signal::SIGKILL);
    assert!(
        procs::wait_gone(&all, Duration::from_secs(5)).is_empty(),
        "processes outlived the TUI"
    );
    for dir in &dirs {
        common::wait_until(&env, "result.json", || dir.join("result.json").exists());
        let record = tether::journal::CommandRecord::load(dir);
        assert!(record.damage.is_empty(), "{:?}", record.damage);
        assert!(events(dir).contains(r#""kind":"parent_lost""#));
        assert!(events(dir).contains(r#""kind":"close""#));
    }
    drop(tmux);
    env.finish();
}

#[test]
fn escape_sequences_from_a_command_never_reach_the_terminal() {
    let env = TestEnv::new("tui-escapes");
    let tmux = Tmux::start(&env, 200, 50);
    tmux.type_line(&env, "echo BEFORE-TETHER-MARKER");
    tmux.wait_screen(&env, "the marker", |s| s.contains("BEFORE-TETHER-MARKER\n"));
    tmux.type_line(
        &env,
        &tether_child_line(
            &env,
            r#"run -c 'printf "\033]52;c;aGVsbG8gY2xpcGJvYXJk\007\033[2J\033]0;PWNED-TITLE\007\033[5;5Hvisible-after-escapes\n"; sleep 300'"#,
        ),
    );
    let screen = tmux.wait_screen(&env, "the output in the stdout pane", |s| {
        s.contains("Commands") && s.contains("visible-after-escapes")
    });
    // The layout is intact: the clear screen and the cursor move did not reach the terminal.
    assert!(
        screen.contains("Commands") && screen.contains("Timeline"),
        "{screen}"
    );
    // OSC 52 did not reach tmux's clipboard, nor the title the window.
    let buffers = tmux.cmd(&["list-buffers"], &env);
    assert!(
        !String::from_utf8_lossy(&buffers.stdout).contains("hello clipboard"),
        "OSC 52 reached the terminal"
    );
    let title = tmux.cmd(&["display-message", "-p", "-t", "0", "#{pane_title}"], &env);
    assert!(!String::from_utf8_lossy(&title.stdout).contains("PWNED"));
    // Quit (stop the running command), and the shell's screen is as it was.
    tmux.keys(&env, &["q"]);
    tmux.wait_screen(&env, "the quit question", |s| s.contains("still running"));
    tmux.keys(&env, &["y"]);
    let after = tmux.wait_screen(&env, "the shell back", |s| s.contains("session journal in"));
    assert!(after.contains("BEFORE-TETHER-MARKER"), "{after}");
    // Quit by the operator: exit status 0.
    tmux.type_line(&env, "echo tether-status=$?");
    tmux.wait_screen(&env, "the TUI's exit status", |s| {
        s.contains("tether-status=0")
    });
    drop(tmux);
    env.finish();
}

/// The broker of a command, from its journal.
fn broker_of(dir: &Path) -> i32 {
    tether::journal::CommandRecord::load(dir)
        .events
        .iter()
        .find_map(|e| match e.kind {
            tether::protocol::EventKind::BrokerStarted { broker_pid, .. } => Some(broker_pid),
            _ => None,
        })
        .expect("broker_started")
}

/// A shell command with a TERM-ignoring member of its group and a TERM-ignoring `setsid`
/// escapee, for the TUI's fallbacks.
const STUBBORN: &str =
    r#"-c 'setsid sh -c "trap \"\" TERM; sleep 301" & trap "" TERM; sleep 300 & wait'"#;

/// The TUI in tmux running [`STUBBORN`] with a 500 ms grace; its journal directory.
fn start_stubborn(env: &TestEnv) -> (Tmux, std::path::PathBuf) {
    let tmux = Tmux::start(env, 200, 50);
    // Pipes: with a terminal, a broker's death hangs it up and the kernel's SIGHUP ends part
    // of the tree before the TUI's cleanup counts it.
    tmux.type_line(
        env,
        &tether_line(env, &format!("run --no-pty --grace 500ms {STUBBORN}")),
    );
    tmux.wait_screen(env, "the TUI", |s| s.contains("Process tree"));
    (tmux, command_dirs(&env.state_dir()).remove(0))
}

#[test]
fn an_unanswering_broker_is_bypassed_and_the_operator_told() {
    let env = TestEnv::new("tui-fallback");
    let tmux = Tmux::start(&env, 200, 50);
    tmux.type_line(
        &env,
        &tether_line(&env, r#"run -c 'setsid sleep 301 & sleep 300 & wait'"#),
    );
    tmux.wait_screen(&env, "the TUI", |s| s.contains("Process tree"));
    let dir = command_dirs(&env.state_dir()).remove(0);
    let tree = wait_tree(&env, &dir, 3);
    let broker = broker_of(&dir);
    procs::signal(broker, nix::sys::signal::Signal::SIGSTOP);
    tmux.keys(&env, &["t"]);
    tmux.wait_screen(&env, "the fallback message", |s| {
        s.contains("the broker did not answer: tether sent SIGTERM itself to process group")
    });
    // The escapee too: the fallback walks the broker's descendants, not just the group.
    assert!(
        procs::wait_gone(&tree, Duration::from_secs(10)).is_empty(),
        "the TUI's own SIGTERM did not end the tree"
    );
    procs::signal(broker, nix::sys::signal::Signal::SIGCONT);
    tmux.wait_screen(&env, "the command ended", |s| s.contains("(SIGTERM)"));
    tmux.keys(&env, &["q"]);
    drop(tmux);
    env.finish();
}

/// Item 3 of issue 6: `kill -9` of a broker. The TUI, a subreaper, stops what the broker
/// left (the escapee and the TERM-ignoring members too), says so, and the run ends `lost`.
#[test]
fn a_broker_killed_with_sigkill_leaves_nothing_behind() {
    let env = TestEnv::new("tui-broker-kill9");
    let (tmux, dir) = start_stubborn(&env);
    let tree = wait_tree(&env, &dir, 4);
    let broker = broker_of(&dir);
    // The clock starts before the kill: read after it, a test thread descheduled between
    // the two (a loaded machine) starts it late, and the TUI's grace, counted from the
    // broker's death it sees, seems to end early.
    let killed = Instant::now();
    procs::signal(broker, nix::sys::signal::Signal::SIGKILL);
    assert!(
        procs::wait_gone(&tree, Duration::from_secs(10)).is_empty(),
        "the dead broker's tree survived"
    );
    let took = killed.elapsed();
    assert!(
        took >= Duration::from_millis(500),
        "KILL before the grace: {took:?}"
    );
    // The command's main process has PR_SET_PDEATHSIG: it may die with the broker before
    // the front end's cleanup lists it, which then finds the 3 others.
    tmux.wait_screen(&env, "the cleanup on screen, the run lost", |s| {
        (s.contains("broker lost; cleaned up 4 processes")
            || s.contains("broker lost; cleaned up 3 processes"))
            && s.contains(" lost ")
    });
    // Nothing runs any more: q leaves at once.
    tmux.keys(&env, &["q"]);
    drop(tmux);
    env.finish();
}

/// Item 5 of issue 6: `s` to a stopped broker kills the broker and runs the whole sequence
/// over what it left: TERM, grace, KILL, escapees included, until nothing is alive.
#[test]
fn a_stop_to_a_stopped_broker_kills_it_and_everything_it_left() {
    let env = TestEnv::new("tui-stop-stopped");
    let (tmux, dir) = start_stubborn(&env);
    let tree = wait_tree(&env, &dir, 4);
    let broker = broker_of(&dir);
    procs::signal(broker, nix::sys::signal::Signal::SIGSTOP);
    tmux.keys(&env, &["s"]);
    // As above, the main process may die with the broker (PR_SET_PDEATHSIG).
    tmux.wait_screen(&env, "the fallback's result, the run lost", |s| {
        (s.contains("tether killed it; broker lost; cleaned up 4 processes")
            || s.contains("tether killed it; broker lost; cleaned up 3 processes"))
            && s.contains(" lost ")
    });
    assert!(procs::wait_gone(&tree, Duration::from_secs(5)).is_empty());
    assert!(procs::is_gone(broker), "the stopped broker was left behind");
    tmux.keys(&env, &["q"]);
    drop(tmux);
    env.finish();
}

/// Item 5 of issue 6: quitting with a stopped broker leaves nothing behind, the broker
/// included.
#[test]
fn quit_with_a_stopped_broker_leaves_nothing_behind() {
    let env = TestEnv::new("tui-quit-stopped");
    let (tmux, dir) = start_stubborn(&env);
    wait_tree(&env, &dir, 4);
    let broker = broker_of(&dir);
    let tui = tmux.pane_pid(&env);
    procs::signal(broker, nix::sys::signal::Signal::SIGSTOP);
    tmux.keys(&env, &["q"]);
    tmux.wait_screen(&env, "the quit question", |s| s.contains("still running"));
    tmux.keys(&env, &["y"]);
    assert!(
        procs::wait_gone(&[tui], Duration::from_secs(10)).is_empty(),
        "the TUI did not quit"
    );
    drop(tmux);
    env.finish();
}

/// A broker that acknowledges the stop at quit but never finishes (stopped right after) is
/// killed when the quit deadline passes, and what it left is killed.
#[test]
fn quit_kills_a_broker_that_does_not_finish_in_time() {
    let env = TestEnv::new("tui-quit-wedged");
    let (tmux, dir) = start_stubborn(&env);
    let tree = wait_tree(&env, &dir, 4);
    let broker = broker_of(&dir);
    let tui = tmux.pane_pid(&env);
    tmux.keys(&env, &["q"]);
    tmux.wait_screen(&env, "the quit question", |s| s.contains("still running"));
    tmux.keys(&env, &["y"]);
    common::wait_until(&env, "the broker to start the stop", || {
        events(&dir).contains(r#""signal":"TERM""#)
    });
    procs::signal(broker, nix::sys::signal::Signal::SIGSTOP);
    assert!(
        procs::wait_gone(&[tui], Duration::from_secs(15)).is_empty(),
        "the TUI did not quit"
    );
    assert!(procs::wait_gone(&tree, Duration::from_secs(10)).is_empty());
    assert!(procs::is_gone(broker));
    drop(tmux);
    env.finish();
}

#[test]
fn sigterm_to_the_tui_stops_everything_and_restores_the_terminal() {
    let env = TestEnv::new("tui-sigterm");
    let tmux = Tmux::start(&env, 200, 50);
    tmux.type_line(&env, "echo BEFORE-TETHER-MARKER");
    tmux.type_line(
        &env,
        &tether_child_line(&env, "run -c 'sleep 300' -c 'trap \"\" TERM; sleep 300'"),
    );
    tmux.wait_screen(&env, "the TUI", |s| s.contains("Process tree"));
    let dirs = command_dirs(&env.state_dir());
    let mut all = wait_tree(&env, &dirs[0], 1);
    all.extend(wait_tree(&env, &dirs[1], 1));
    let shell = tmux.pane_pid(&env);
    let tui = tether::procfs::all_processes()
        .into_iter()
        .find(|p| p.ppid == shell)
        .expect("tether runs under the pane's shell")
        .pid;
    procs::signal(tui, nix::sys::signal::Signal::SIGTERM);
    let after = tmux.wait_screen(&env, "the shell back", |s| s.contains("session journal in"));
    assert!(after.contains("BEFORE-TETHER-MARKER"), "{after}");
    // Ended by SIGTERM: 128 + 15, as a shell reports it.
    tmux.type_line(&env, "echo tether-status=$?");
    tmux.wait_screen(&env, "the TUI's exit status", |s| {
        s.contains("tether-status=143")
    });
    assert!(procs::wait_gone(&all, Duration::from_secs(10)).is_empty());
    for dir in &dirs {
        let events = events(dir);
        assert!(events.contains(r#""origin":"shutdown""#), "{events}");
        assert!(dir.join("result.json").exists());
    }
    drop(tmux);
    env.finish();
}

/// Runs `sh -c script` named `name` through `tether exec` (no terminal) to its end, into the
/// test's state directory: a session to open. Returns its exit code.
fn record(env: &TestEnv, name: &str, script: &str) -> Option<i32> {
    let exec = env.tether(&["exec", "--no-pty", "--name", name, "--", "sh", "-c", script]);
    run_to_end(env, exec, "tether exec").status.code()
}

#[test]
fn a_finished_session_opens_read_only_as_it_looked() {
    let env = TestEnv::new("tui-open");
    let state = env.state_dir();
    let state = state.to_str().expect("utf-8 temp path");
    let recorded = record(
        &env,
        "recorded-job",
        "echo from-the-journal; sleep 1.5 & sleep 1.2; exit 4",
    );
    assert_eq!(recorded, Some(4));

    let listed = Command::new(BIN)
        .args(["--state-dir", state, "sessions"])
        .output()
        .expect("tether sessions");
    let listed = String::from_utf8_lossy(&listed.stdout).into_owned();
    assert!(
        listed.contains("1 cmd: 0 ok, 1 failed  01-recorded-job"),
        "{listed}"
    );

    let tmux = Tmux::start(&env, 200, 50);
    tmux.type_line(&env, &tether_line(&env, "open"));
    let screen = tmux.wait_screen(&env, "the recorded session", |s| {
        s.contains("recorded-job") && s.contains("from-the-journal") && s.contains("exit 4")
    });
    assert!(
        screen.contains("every process seen during the run"),
        "{screen}"
    );
    assert!(
        screen.contains("sleep 1.5"),
        "the tree lists what ran: {screen}"
    );
    tmux.keys(&env, &["t"]);
    tmux.wait_screen(&env, "the read-only notice", |s| s.contains("read-only"));
    tmux.keys(&env, &["q"]);
    drop(tmux);
    env.finish();
}

/// Issue 7: `tether watch` lists a command that `tether exec` started elsewhere, with its
/// output, and stops it with `s` through the broker's control socket: escapee included, and
/// the exec learns who stopped it.
#[test]
fn watch_shows_an_exec_started_elsewhere_and_stops_it() {
    let env = TestEnv::new("tui-watch");
    let tmux = Tmux::start(&env, 200, 50);
    tmux.type_line(&env, &tether_line(&env, "watch"));
    tmux.wait_screen(&env, "the watch", |s| s.contains("Commands"));
    let exec = env.spawn_exec(
        &[
            "--session",
            "agent-7",
            "--name",
            "looper",
            "--grace",
            "500ms",
        ],
        &[
            "sh",
            "-c",
            "setsid sh -c 'trap \"\" TERM; sleep 301' & while :; do echo tick; sleep 0.2; done",
        ],
    );
    tmux.wait_screen(&env, "the exec'd command and its output", |s| {
        // The session is its header; the row is the command's own name.
        s.contains("▾ agent-7")
            && s.contains(" looper ")
            && s.contains("tick")
            && s.contains("sleep 301")
    });
    tmux.keys(&env, &["s"]);
    let run = exec.wait(&env);
    assert_eq!(run.code(), 143, "{}", run.stderr_text());
    assert!(
        run.stderr_text().contains("stopped by the operator"),
        "{}",
        run.stderr_text()
    );
    // The watch names itself as the stop's origin, with its pid.
    tmux.wait_screen(&env, "the command ended", |s| {
        s.contains("SIGTERM by tether watch, pid")
    });
    tmux.keys(&env, &["q"]);
    drop(tmux);
    env.finish();
}

/// A watched command whose broker has no control socket (an agent's sandbox: its `/tmp` is
/// read-only) is stopped with `s` all the same, by its broker's pid, as `tether stop` does
/// (the watch said `its broker has no control socket` and stopped nothing).
#[test]
fn watch_stops_a_command_whose_broker_has_no_socket() {
    let env = TestEnv::new("tui-watch-nosocket");
    let long = env.socketless_runtime_dir();
    let tmux = Tmux::start(&env, 200, 50);
    tmux.type_line(&env, &tether_line(&env, "watch"));
    tmux.wait_screen(&env, "the watch", |s| s.contains("Commands"));
    let mut command = env.exec_command(&["--name", "socketless"], &["sleep", "300"]);
    command.env("XDG_RUNTIME_DIR", &long);
    let exec = env.spawn_captured(command);
    tmux.wait_screen(&env, "the command running", |s| {
        s.lines()
            .any(|l| l.contains("socketless") && l.contains(" running "))
    });
    tmux.keys(&env, &["s"]);
    let run = exec.wait(&env);
    assert_eq!(run.code(), 143, "{}", run.stderr_text());
    tmux.wait_screen(&env, "the stop told", |s| {
        s.contains("stopped through its broker's pid")
    });
    tmux.keys(&env, &["q"]);
    drop(tmux);
    env.finish();
}

/// Issue 7: `tether open` of a session whose commands still run signals them too.
#[test]
fn open_of_a_live_session_controls_its_commands() {
    let env = TestEnv::new("tui-open-live");
    let exec = env.spawn_exec(
        &["--session", "agent-8", "--name", "sleeper"],
        &["sleep", "300"],
    );
    env.wait_command_dir();
    let tmux = Tmux::start(&env, 200, 50);
    tmux.type_line(&env, &tether_line(&env, "open agent-8"));
    tmux.wait_screen(&env, "the live session", |s| {
        s.lines()
            .any(|l| l.contains("sleeper") && l.contains(" running "))
    });
    tmux.keys(&env, &["t"]);
    tmux.wait_screen(&env, "the signal sent", |s| s.contains("SIGTERM sent to"));
    let run = exec.wait(&env);
    assert_eq!(run.code(), 143, "{}", run.stderr_text());
    tmux.wait_screen(&env, "the command ended", |s| s.contains("(SIGTERM)"));
    tmux.keys(&env, &["q"]);
    drop(tmux);
    env.finish();
}

/// A watched broker that stops answering (stopped here, with the exec that would give it
/// up) is bypassed as the TUI's own is: after a second without an acknowledgement the watch
/// sends the signal itself, the broker's pid proved first, and says so.
#[test]
fn a_watched_broker_that_does_not_answer_is_bypassed() {
    let env = TestEnv::new("tui-watch-fallback");
    let exec = env.spawn_exec(
        &["--session", "agent-9", "--name", "sleeper"],
        &["sleep", "300"],
    );
    let dir = env.wait_command_dir();
    let tmux = Tmux::start(&env, 200, 50);
    tmux.type_line(&env, &tether_line(&env, "open agent-9"));
    tmux.wait_screen(&env, "the live session", |s| {
        s.lines()
            .any(|l| l.contains("sleeper") && l.contains(" running "))
    });
    let broker = broker_of(&dir);
    let front_end = exec.child.id() as i32;
    procs::signal(front_end, nix::sys::signal::Signal::SIGSTOP);
    procs::signal(broker, nix::sys::signal::Signal::SIGSTOP);
    tmux.keys(&env, &["t"]);
    tmux.wait_screen(&env, "the fallback message", |s| {
        s.contains("the broker did not answer, so by its broker's pid: tether sent SIGTERM itself")
    });
    procs::signal(broker, nix::sys::signal::Signal::SIGCONT);
    procs::signal(front_end, nix::sys::signal::Signal::SIGCONT);
    let run = exec.wait(&env);
    assert_eq!(run.code(), 143, "{}", run.stderr_text());
    tmux.keys(&env, &["q"]);
    drop(tmux);
    env.finish();
}

/// Issue 8: each command is named by the first program it runs (past `cd … &&`,
/// assignments and wrappers), made unique; a search whose match lies far to the right of a
/// long line scrolls it into sight.
#[test]
fn commands_are_named_by_their_program_and_a_match_off_to_the_right_is_shown() {
    let env = TestEnv::new("tui-names");
    let tmux = Tmux::start(&env, 200, 50);
    tmux.type_line(
        &env,
        &tether_line(
            &env,
            "run -c 'cd /tmp && ls >/dev/null; sleep 300' -c 'FOO=1 env >/dev/null; sleep 300' \
             -c 'echo a; sleep 300' \
             -c 'echo b; printf \"%0250d nee%sle-here\\n\" 0 d; sleep 300'",
        ),
    );
    tmux.wait_screen(&env, "the four commands named", |s| {
        ["▶ #1 ls ", "  #2 env ", "  #3 echo ", "  #4 echo-2 "]
            .iter()
            .all(|row| s.contains(row))
    });
    let dirs = command_dirs(&env.state_dir());
    assert_eq!(dirs.len(), 4);
    // The last command, its stdout focused (commands, tree, stdout), searched.
    tmux.keys(&env, &["j", "j", "j", "Tab", "Tab"]);
    tmux.wait_screen(&env, "echo-2's output", |s| {
        // Between name and command line: the containment (and the cgroup's CPU time).
        s.contains("Process tree: echo-2 · ")
            && s.contains(" · echo b;")
            && s.contains("stdout · 2 lines")
    });
    let before = tmux.screen(&env);
    assert!(
        !before.contains("needle-here"),
        "in sight already: {before}"
    );
    tmux.keys(&env, &["/"]);
    tmux.wait_screen(&env, "the search prompt", |s| {
        s.contains("Search stdout for:")
    });
    tmux.type_line(&env, "needle");
    tmux.wait_screen(&env, "the match in sight", |s| {
        s.contains("needle-here") && s.contains("from column")
    });
    // 0 goes back to the start of the line: the match is out of sight again.
    tmux.keys(&env, &["0"]);
    tmux.wait_screen(&env, "the start of the line", |s| {
        !s.contains("needle-here") && !s.contains("from column")
    });

    tmux.keys(&env, &["q"]);
    tmux.wait_screen(&env, "the quit question", |s| s.contains("Stop them all"));
    tmux.keys(&env, &["y"]);
    common::wait_until(&env, "every command stopped", || {
        dirs.iter().all(|d| d.join("result.json").exists())
    });
    drop(tmux);
    env.finish();
}

/// `-n` names `-c` commands too, one per command in order; one `-n` for two commands is
/// ambiguous: refused (exit 2) before anything starts.
#[test]
fn one_name_for_two_commands_is_refused() {
    let env = TestEnv::new("tui-ambiguous-name");
    let out = Command::new(BIN)
        .args(["--state-dir", &env.state_dir().to_string_lossy()])
        .args(["run", "-n", "web", "-c", "sleep 1", "-c", "sleep 2"])
        .env(TAG_VAR, &env.tag)
        .output()
        .expect("run tether");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("-n was given 1 time for 2 commands"),
        "{stderr}"
    );
    assert!(command_dirs(&env.state_dir()).is_empty());
    env.finish();
}

/// A private runtime directory for the test's TUI, so that its clipboard file (and control
/// sockets) land in the test's scratch space: the line that runs tether under it.
fn with_runtime_dir(env: &TestEnv, line: &str) -> (std::path::PathBuf, String) {
    use std::os::unix::fs::PermissionsExt;
    let runtime = env.path("runtime");
    std::fs::create_dir_all(&runtime).expect("create the runtime dir");
    std::fs::set_permissions(&runtime, std::fs::Permissions::from_mode(0o700))
        .expect("chmod the runtime dir");
    let line = format!("XDG_RUNTIME_DIR={} {line}", runtime.display());
    (common::socket_dir_in(&runtime), line)
}

fn tmux_buffer(tmux: &Tmux, env: &TestEnv) -> String {
    String::from_utf8_lossy(&tmux.cmd(&["show-buffer"], env).stdout).into_owned()
}

/// Issue 8: a program that draws with cursor moves on the alternate screen is seen as its
/// screen (by itself since issue 15; `v` toggles), and `y` there copies the screen through OSC 52 (tmux keeps it as a buffer)
/// and to the clipboard file; the program's own OSC 52 and title reach nothing.
#[test]
fn the_screen_view_shows_a_program_that_draws_and_y_copies_it() {
    let env = TestEnv::new("tui-screen");
    let tmux = Tmux::start(&env, 200, 50);
    let script = "printf \"\\033[?1049h\"; for i in 0 1 2; do printf \"\\033[H\\033[2J\\033[1;1Hscreen-frame-$i\\033[5;10Hmoved-here\\033]52;c;cHduZWQ=\\007\\033]0;PWNED-TITLE\\007\\033[3;1Hstatus-line\"; sleep 0.2; done; sleep 300";
    let (clip_dir, line) = with_runtime_dir(
        &env,
        &tether_child_line(&env, &format!("run -c '{script}'")),
    );
    tmux.type_line(&env, &line);
    // Issue 15: on the alternate screen, the pane shows the screen without `v`.
    tmux.wait_screen(&env, "the screen view by itself", |s| {
        s.contains("stdout · screen") && s.contains("alternate screen")
    });
    tmux.keys(&env, &["Tab", "Tab"]);
    tmux.wait_screen(&env, "stdout focused", |s| s.contains("┏ stdout"));
    // `v` still gives the line log, which points back to the screen.
    tmux.keys(&env, &["v"]);
    tmux.wait_screen(&env, "the hint in the line log", |s| {
        s.contains("full-screen program: v shows its screen")
    });
    tmux.keys(&env, &["v"]);
    let screen = tmux.wait_screen(&env, "the last frame in the screen view", |s| {
        s.contains("stdout · screen")
            && s.contains("screen-frame-2")
            && s.contains("alternate screen")
    });
    assert!(!screen.contains("screen-frame-1"), "{screen}");
    // `moved-here` is in column 10 of the pane (its border, then 9 columns).
    // The last such row: the tree's title above holds the command line, which says it too.
    let row = screen
        .lines()
        .rfind(|l| l.contains("moved-here"))
        .expect("the moved text");
    let chars: Vec<char> = row.chars().collect();
    let at = row[..row.find("moved-here").unwrap()].chars().count();
    assert_eq!(chars[at - 10], '┃', "{row:?}");
    assert!(chars[at - 9..at].iter().all(|&c| c == ' '), "{row:?}");
    // Nothing the program wrote reached the terminal: no buffer, no title.
    assert!(!tmux_buffer(&tmux, &env).contains("pwned"));
    let title = tmux.cmd(&["display-message", "-p", "-t", "0", "#{pane_title}"], &env);
    assert!(!String::from_utf8_lossy(&title.stdout).contains("PWNED"));

    tmux.keys(&env, &["y"]);
    tmux.wait_screen(&env, "the copy reported", |s| {
        s.contains("copied the screen") && s.contains("clipboard.txt")
    });
    let expected = "screen-frame-2\n\nstatus-line\n\n         moved-here";
    common::wait_until(&env, "the OSC 52 copy in tmux's buffer", || {
        tmux_buffer(&tmux, &env) == expected
    });
    let file = clip_dir.join("clipboard.txt");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), expected);
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);

    tmux.keys(&env, &["q"]);
    tmux.wait_screen(&env, "the quit question", |s| s.contains("still running"));
    tmux.keys(&env, &["y"]);
    tmux.wait_screen(&env, "the shell back", |s| s.contains("session journal in"));
    drop(tmux);
    env.finish();
}

/// Issue 8: `y` copies the last line on screen, `V` and a move select lines, and the copy is
/// their plain text (no colour escapes).
#[test]
fn y_copies_lines_and_a_selection_as_plain_text() {
    let env = TestEnv::new("tui-copy");
    let tmux = Tmux::start(&env, 200, 50);
    let command = "printf \"alpha\\n\\033[31mbeta\\033[0m\\ngamma\\n\"; sleep 300";
    let (clip_dir, line) = with_runtime_dir(
        &env,
        &tether_child_line(&env, &format!("run -c '{command}'")),
    );
    tmux.type_line(&env, &line);
    // The typed command line holds the words too: wait for the pane's title.
    tmux.wait_screen(&env, "the output", |s| s.contains("stdout · 3 lines"));
    tmux.keys(&env, &["Tab", "Tab", "y"]);
    tmux.wait_screen(&env, "the copy reported", |s| s.contains("copied line 3"));
    common::wait_until(&env, "the line in tmux's buffer", || {
        tmux_buffer(&tmux, &env) == "gamma"
    });
    tmux.keys(&env, &["V", "k"]);
    tmux.wait_screen(&env, "the selection", |s| s.contains("V 2 lines"));
    tmux.keys(&env, &["y"]);
    tmux.wait_screen(&env, "the copy reported", |s| s.contains("copied 2 lines"));
    common::wait_until(&env, "the lines in tmux's buffer", || {
        tmux_buffer(&tmux, &env) == "beta\ngamma"
    });
    assert_eq!(
        std::fs::read_to_string(clip_dir.join("clipboard.txt")).unwrap(),
        "beta\ngamma"
    );
    tmux.keys(&env, &["q"]);
    tmux.wait_screen(&env, "the quit question", |s| s.contains("still running"));
    tmux.keys(&env, &["y"]);
    tmux.wait_screen(&env, "the shell back", |s| s.contains("session journal in"));
    drop(tmux);
    env.finish();
}

/// Issue 8: `top -b` through a pipe, seen in the screen view as its last screenful.
#[test]
fn top_in_batch_mode_in_the_screen_view() {
    if Command::new("top").arg("-v").output().is_err() {
        common::skip("no `top` on this machine");
        return;
    }
    let env = TestEnv::new("tui-top");
    let tmux = Tmux::start(&env, 200, 50);
    tmux.type_line(
        &env,
        &tether_child_line(&env, "run -c 'top -b -n 3 -d 0.2 -p $$; sleep 300'"),
    );
    tmux.wait_screen(&env, "top's output", |s| {
        s.contains("stdout ·") && s.contains("load average")
    });
    tmux.keys(&env, &["Tab", "Tab", "v"]);
    let screen = tmux.wait_screen(&env, "the screen view", |s| {
        s.contains("stdout · screen") && s.contains("load average") && s.contains("PID USER")
    });
    assert!(!screen.contains("alternate screen"), "{screen}");
    tmux.keys(&env, &["q"]);
    tmux.wait_screen(&env, "the quit question", |s| s.contains("still running"));
    tmux.keys(&env, &["y"]);
    tmux.wait_screen(&env, "the shell back", |s| s.contains("session journal in"));
    drop(tmux);
    env.finish();
}

/// The soft open-files limit in `/proc/PID/limits`.
fn open_files_soft(pid: i32) -> Option<u64> {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

/// What the TUI's brokers and commands inherit stays what the TUI was given: a crate that
/// reads the machine can raise the open-files soft limit (sysinfo did, when the TUI used it),
/// and so could a change to the sampler.
#[test]
fn launched_commands_keep_the_open_files_limit_the_tui_was_given() {
    let env = TestEnv::new("tui-nofile");
    let tmux = Tmux::start(&env, 200, 50);
    tmux.type_line(
        &env,
        &format!(
            "ulimit -Sn 512 && {}",
            tether_line(&env, "run -c 'sleep 300 & wait'")
        ),
    );
    // A CPU figure needs two readings of the machine: the sampler has read it twice by then.
    tmux.wait_screen(&env, "the tree and a CPU figure in the header", |s| {
        s.contains("sleep 300") && s.contains("procs") && !s.contains("CPU –")
    });
    let dirs = command_dirs(&env.state_dir());
    let tree = wait_tree(&env, &dirs[0], 2);
    let tui = tmux.pane_pid(&env);
    assert_eq!(open_files_soft(tui), Some(512), "the TUI's own limit");
    for pid in &tree {
        assert_eq!(open_files_soft(*pid), Some(512), "pid {pid} of the tree");
    }

    tmux.keys(&env, &["t"]);
    assert!(
        procs::wait_gone(&tree, Duration::from_secs(10)).is_empty(),
        "SIGTERM left processes"
    );
    tmux.wait_screen(&env, "the command ended", |s| {
        s.contains("stopped (SIGTERM)")
    });
    tmux.keys(&env, &["q"]);
    tmux.wait_screen(&env, "the TUI gone", |s| !s.contains("Commands"));
    drop(tmux);
    env.finish();
}

/// Issue 10: `tether open --search` opens at the first match (stdout before stderr), with the
/// pane's search set; `m` merges stdout and stderr in the order read and `T` stamps lines.
#[test]
fn open_at_a_search_match_and_the_merged_view() {
    let env = TestEnv::new("tui-open-search");
    let recorded = record(
        &env,
        "searched",
        "seq 1 50000; echo the-needle-in-stderr >&2; sleep 0.2; \
         seq 50001 100000; echo the-needle-line; seq 100001 200000",
    );
    assert_eq!(recorded, Some(0));

    let tmux = Tmux::start(&env, 200, 50);
    tmux.type_line(&env, &tether_line(&env, "open --search THE-NEEDLE"));
    let screen = tmux.wait_screen(&env, "the first match", |s| {
        // The match is mid-pane, the log around it in sight, not the end.
        s.contains("the-needle-line")
            && s.contains("/THE-NEEDLE (line 100001)")
            && s.contains("100000")
    });
    assert!(!screen.contains("200000"), "{screen}");
    tmux.keys(&env, &["G", "m", "T"]);
    tmux.wait_screen(&env, "the merged view with times", |s| {
        s.contains("stdout+stderr")
            && s.contains("merged")
            && s.contains("1│200000")
            && s.contains("+0:")
    });
    tmux.keys(&env, &["g"]);
    tmux.wait_screen(&env, "the merged view from its first line", |s| {
        s.contains("1│1 ")
    });
    tmux.keys(&env, &["q"]);
    drop(tmux);
    env.finish();
}

/// Issue 10: the time cursor of `tether open` in a real terminal, over a copy of the
/// every-kind fixture: each key moves what every pane shows, and `q` gives the terminal back.
#[test]
fn the_time_cursor_moves_what_open_shows() {
    let env = TestEnv::new("tui-time-cursor");
    let session = env.path("every-kind");
    copy_dir(&common::every_kind_fixture(), &session);
    let tmux = Tmux::start(&env, 160, 45);
    tmux.type_line(&env, "echo BEFORE-OPEN-MARKER");
    tmux.wait_screen(&env, "the marker", |s| s.contains("BEFORE-OPEN-MARKER\n"));
    tmux.type_line(
        &env,
        &tether_child_line(&env, &format!("open {}", session.display())),
    );
    // The whole first frame, its status bar's hints included: on a loaded machine tmux can
    // show a frame whose last rows are still being written.
    let end = tmux.wait_screen(&env, "the session at its end", |s| {
        s.contains("Commands") && s.contains("compiling 2 of 2") && s.contains("[ ]  event")
    });
    assert!(!end.contains('⏱'), "no cursor at first: {end}");

    // Home: the first event; nothing written yet, and no other command listed: none had
    // begun.
    tmux.keys(&env, &["Home"]);
    let first = tmux.wait_screen(&env, "the cursor at the first event", |s| {
        s.contains("⏱ 03:04:05.100 (+0:00.100)")
            && s.contains("stdout · 0 lines · 0 B")
            && s.contains("Commands at +0:00.100 · 1 · 1 running · 0 failed")
    });
    assert!(!first.contains(" idle "), "{first}");

    // ] ]: on past ok's spawn to its first line of stdout.
    tmux.keys(&env, &["]", "]"]);
    let output = tmux.wait_screen(&env, "the first line written", |s| {
        s.contains("(+0:00.105)") && s.contains("compiling 1 of 2") && s.contains("running")
    });
    assert!(!output.contains("compiling 2 of 2"), "{output}");

    // }: the next notable event, ok's final drain as it exited; [ goes back one event
    // from it.
    tmux.keys(&env, &["}"]);
    tmux.wait_screen(&env, "ok's drain and exit", |s| {
        s.contains("(+0:00.520)") && s.contains("exit 0")
    });
    tmux.keys(&env, &["["]);
    tmux.wait_screen(&env, "the event before the exit", |s| {
        s.contains("(+0:00.413)")
    });
    // {: back to no notable event before it.
    tmux.keys(&env, &["{"]);
    tmux.wait_screen(&env, "nothing notable before", |s| {
        s.contains("no signal, error, timeout or exit before this")
    });
    // +, >: a longer step, and a step on by it.
    tmux.keys(&env, &["+", ">"]);
    tmux.wait_screen(&env, "a 2 s step", |s| s.contains("(+0:02.413)"));

    // End: off, the end again.
    tmux.keys(&env, &["End"]);
    tmux.wait_screen(&env, "the end again", |s| {
        !s.contains('⏱') && s.contains("compiling 2 of 2") && s.contains("lost")
    });

    tmux.keys(&env, &["q"]);
    let after = tmux.wait_screen(&env, "the shell back", |s| {
        s.contains("BEFORE-OPEN-MARKER") && !s.contains("Commands")
    });
    let alternate = tmux.cmd(
        &["display-message", "-p", "-t", "0", "#{alternate_on}"],
        &env,
    );
    assert_eq!(
        String::from_utf8_lossy(&alternate.stdout).trim(),
        "0",
        "the alternate screen is left: {after}"
    );
    drop(tmux);
    env.finish();
}

/// `lines` lines of 100 bytes (with their line end), each saying which paste it is in.
fn paste_text(name: &str, lines: usize) -> String {
    (0..lines)
        .map(|i| format!("{:<99}\n", format!("{name} line {i:05} ")).replace(' ', "."))
        .collect()
}

/// Hardening 3: a paste reaches the command whole and at once, bracketed or not, small or
/// large, with no key after it to push it along; Ctrl-a right after it leaves input mode.
#[test]
fn a_paste_reaches_the_command_whole_and_ctrl_a_after_it_leaves_input_mode() {
    let env = TestEnv::new("tui-paste");
    let tmux = Tmux::start(&env, 160, 45);
    let received = env.path("received");
    tmux.type_line(
        &env,
        &tether_child_line(
            &env,
            &format!("run -n sink -- sh -c 'cat > {}'", received.display()),
        ),
    );
    // Its terminal on the timeline, not only `running` (shown from the broker's start, before
    // the spawn): `i` before the spawn is refused as "still starting".
    tmux.wait_screen(&env, "the command running in its terminal", |s| {
        s.contains("Commands") && s.contains("running") && s.contains("terminal stdout")
    });
    let mut expected = String::new();
    for (name, lines, bracketed) in [
        ("keys", 50, false),
        ("bracketed", 50, true),
        ("big-bracketed", 1000, true),
        ("big-keys", 1000, false),
    ] {
        tmux.keys(&env, &["i"]);
        tmux.wait_screen(&env, "the input mode on the status bar", |s| {
            s.contains("INPUT") && s.contains("→ sink")
        });
        let text = paste_text(name, lines);
        tmux.paste(&env, &text, bracketed);
        tmux.keys(&env, &["C-a"]);
        expected.push_str(&text);
        common::wait_until(&env, &format!("the whole {name} paste"), || {
            std::fs::read(&received).is_ok_and(|got| got.len() >= expected.len())
        });
        assert_eq!(
            std::fs::read_to_string(&received).unwrap_or_default(),
            expected,
            "the {name} paste"
        );
        tmux.wait_screen(&env, "the input mode left", |s| !s.contains("INPUT"));
    }
    tmux.keys(&env, &["q"]);
    tmux.wait_screen(&env, "the quit question", |s| s.contains("still running"));
    tmux.keys(&env, &["y"]);
    tmux.wait_screen(&env, "the shell back", |s| s.contains("session journal in"));
    drop(tmux);
    env.finish();
}

/// At 80×24 the list takes the screen; Enter opens the selected command's panes, Esc goes
/// back; grown to 120×40, the list and the panes share it again.
#[test]
fn a_small_terminal_shows_the_list_then_the_command_opened() {
    let env = TestEnv::new("tui-small");
    let tmux = Tmux::start(&env, 80, 24);
    tmux.type_line(
        &env,
        &tether_line(&env, "run -c 'echo said-by-the-command; sleep 300'"),
    );
    let list = tmux.wait_screen(&env, "the list alone, offering Enter", |s| {
        s.contains("Enter  open") && s.contains("echo said-by-the-command")
    });
    assert!(!list.contains("Process tree"), "{list}");
    tmux.keys(&env, &["Enter"]);
    tmux.wait_screen(&env, "the command's panes, offering Esc", |s| {
        s.contains("Process tree: echo")
            && s.contains("said-by-the-command")
            && s.contains("Esc  list")
            && !s.contains("Commands 1")
    });
    tmux.keys(&env, &["Escape"]);
    tmux.wait_screen(&env, "the list again", |s| {
        s.contains("Enter  open") && !s.contains("Process tree")
    });
    tmux.resize(&env, 120, 40);
    tmux.wait_screen(&env, "the list beside the panes", |s| {
        s.contains("Commands 1") && s.contains("Process tree: echo")
    });
    tmux.keys(&env, &["q"]);
    tmux.wait_screen(&env, "the question to stop it", |s| s.contains("Quit"));
    tmux.keys(&env, &["y"]);
    tmux.wait_screen(&env, "the shell back", |s| !s.contains("Commands"));
    drop(tmux);
    env.finish();
}
