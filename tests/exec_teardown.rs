//! `tether exec` end to end: stopping a command's whole tree, escapees included, and what
//! happens when tether exec itself is killed.

use crate::common;

use std::path::Path;

use nix::sys::signal::Signal;

use common::journal::{
    broker_pid, events_now, exit_status, kinds, labelled_pid, load_complete, orphans_reaped, read,
    signals_sent, spawned_pid, tree_entries,
};
use common::procs::{self, signal};
use common::{TestEnv, wait_for_text, wait_until};
use tether::protocol::{EventKind, Origin};

/// Runs a command whose whole tree ignores SIGTERM, stops it with SIGTERM to tether exec
/// (which sends `stop` to the broker) and `--grace 300ms`, and returns its journal.
fn stop_term_ignoring_command(env: &TestEnv) -> (common::ExecRun, std::path::PathBuf) {
    let running = env.spawn_exec(
        &["--json", "--grace", "300ms"],
        &["sh", "-c", "trap '' TERM; echo ready; sleep 1000"],
    );
    let dir = env.wait_command_dir();
    wait_for_text(env, &dir.join("stdout.log"), "ready");
    signal(running.pid(), Signal::SIGTERM);
    let run = running.wait(env);
    assert_eq!(run.code(), 137, "stderr: {}", run.stderr_text());
    (run, dir)
}

#[test]
fn term_ignoring_command_is_killed_after_grace() {
    let env = TestEnv::new("ignores_term");
    let (run, dir) = stop_term_ignoring_command(&env);
    let record = load_complete(&dir);
    let sent = signals_sent(&record.events);
    assert_eq!(
        sent.first().map(|s| s.signal.as_str()),
        Some("TERM"),
        "{sent:?}"
    );
    assert!(
        sent.iter().all(|s| s.origin == Origin::Shutdown),
        "{sent:?}"
    );
    assert_eq!(exit_status(&record.events).signal, Some(9));
    let result = record.result.expect("result.json");
    assert_eq!(result.stopped_by, Some(Origin::Shutdown));
    assert_eq!(result.exit.and_then(|s| s.signal), Some(9));
    // What `--json` printed is the journal, line for line.
    assert_eq!(
        String::from_utf8_lossy(&run.stdout()),
        String::from_utf8_lossy(&read(&dir, "events.jsonl"))
    );
    env.finish();
}

/// The hard kill of a group whose members all die at once must still be journaled.
#[test]
fn hard_kill_of_a_term_ignoring_group_is_journaled() {
    let env = TestEnv::new("hard_kill_journaled");
    let (_, dir) = stop_term_ignoring_command(&env);
    let record = load_complete(&dir);
    let names = kinds(&record.events);
    let sent = signals_sent(&record.events);
    let term = record.events.iter().position(
        |e| matches!(&e.kind, EventKind::SignalSent { signal, .. } if signal.name() == "TERM"),
    );
    let hard_kill = names.iter().position(|k| *k == "hard_kill");
    let kill = record.events.iter().position(
        |e| matches!(&e.kind, EventKind::SignalSent { signal, .. } if signal.name() == "KILL"),
    );
    assert!(
        term.is_some() && term < hard_kill && hard_kill < kill,
        "expected signal_sent TERM, hard_kill, signal_sent KILL in that order: {names:?} {sent:?}"
    );
    let after_ms = record.events.iter().find_map(|e| match e.kind {
        EventKind::HardKill { after_ms } => Some(after_ms),
        _ => None,
    });
    assert!(
        after_ms >= Some(300),
        "hard kill before the grace ended: {after_ms:?}"
    );
    let result = record.result.expect("result.json");
    assert!(
        result.hard_killed,
        "the command died of the hard kill: {result:?}"
    );
    env.finish();
}

/// `signal_sent.targets` is documented as the processes the signal reached; the command's
/// own process group is always reached by a group signal.
#[test]
fn group_signal_targets_include_the_command() {
    let env = TestEnv::new("targets_group");
    let running = env.spawn_exec(
        &["--grace", "5s"],
        &["sh", "-c", "echo ready; exec sleep 1000"],
    );
    let dir = env.wait_command_dir();
    wait_for_text(&env, &dir.join("stdout.log"), "ready");
    signal(running.pid(), Signal::SIGTERM);
    let run = running.wait(&env);
    assert_eq!(run.code(), 143, "stderr: {}", run.stderr_text());
    let record = load_complete(&dir);
    let main = spawned_pid(&record.events);
    let sent = signals_sent(&record.events);
    assert!(
        sent.iter()
            .any(|s| s.signal == "TERM" && s.targets.contains(&main)),
        "TERM reached the command ({main}) but its targets do not say so: {sent:?}"
    );
    env.finish();
}

/// A command that starts a `setsid` escapee and a double-forked daemon, each printing
/// `LABEL PID` and touching a marker once it runs, and waits for both markers.
///
/// Both are started from subshells that exit at once, so they are re-parented to the broker
/// before anything is stopped. (A `setsid` child left to the command itself may be reaped by
/// the command's own `wait` while both die, and then no orphan_reaped is due.)
fn escapees_script(markers: &Path) -> String {
    let m = markers.display();
    format!(
        r#"(setsid sh -c 'echo "setsid $$"; touch {m}/a; exec sleep 1000' &)
(sh -c 'echo "daemon $$"; touch {m}/b; exec sleep 1000' &)
while [ ! -e {m}/a ] || [ ! -e {m}/b ]; do sleep 0.02; done
echo main ready"#
    )
}

fn check_escapees_reaped(dir: &Path, stdout: &[u8]) {
    let record = load_complete(dir);
    let setsid = labelled_pid(stdout, "setsid");
    let daemon = labelled_pid(stdout, "daemon");
    let reaped = orphans_reaped(&record.events);
    for (what, pid) in [
        ("setsid grandchild", setsid),
        ("double-forked daemon", daemon),
    ] {
        assert!(
            reaped.contains(&pid),
            "the {what} ({pid}) has no orphan_reaped event: {reaped:?} {:?}",
            kinds(&record.events)
        );
        assert!(procs::is_gone(pid), "the {what} ({pid}) is alive");
    }
    for entry in tree_entries(&record.events) {
        if entry.pid == setsid {
            assert!(
                entry.escaped,
                "the setsid process is not marked escaped: {entry:?}"
            );
        }
        if entry.pid == daemon {
            assert!(!entry.escaped, "the daemon stayed in the group: {entry:?}");
        }
    }
    let result = record.result.expect("result.json");
    assert!(result.orphans_reaped >= 2, "{result:?}");
    assert_eq!(read(dir, "stdout.log"), stdout);
}

#[test]
fn escapees_are_killed_when_the_command_exits() {
    let env = TestEnv::new("escapees_exit");
    let run = env.exec(
        &["--grace", "5s"],
        &["sh", "-c", &escapees_script(env.dir.path())],
    );
    assert_eq!(run.code(), 0, "stderr: {}", run.stderr_text());
    let dir = env.command_dir();
    let stdout = run.stdout();
    let record = load_complete(&dir);
    assert_eq!(exit_status(&record.events).code, Some(0));
    let sent = signals_sent(&record.events);
    assert!(
        sent.iter()
            .any(|s| s.origin == Origin::Leftovers && s.signal == "TERM"),
        "the leftovers were not stopped: {sent:?}"
    );
    check_escapees_reaped(&dir, &stdout);
    env.finish();
}

#[test]
fn escapees_are_killed_when_the_command_is_stopped() {
    let env = TestEnv::new("escapees_stop");
    let script = format!("{}\nsleep 1000", escapees_script(env.dir.path()));
    let running = env.spawn_exec(&["--grace", "5s"], &["sh", "-c", &script]);
    let dir = env.wait_command_dir();
    wait_for_text(&env, &dir.join("stdout.log"), "main ready");
    let stdout = read(&dir, "stdout.log");
    let (setsid, daemon) = (
        labelled_pid(&stdout, "setsid"),
        labelled_pid(&stdout, "daemon"),
    );
    // Both show up in the broker's tree, the setsid one as an escapee.
    wait_until(&env, "a tree event with both escapees", || {
        let entries = tree_entries(&events_now(&dir));
        [setsid, daemon]
            .iter()
            .all(|pid| entries.iter().any(|e| e.pid == *pid))
    });
    signal(running.pid(), Signal::SIGTERM);
    let run = running.wait(&env);
    assert_eq!(run.code(), 143, "stderr: {}", run.stderr_text());
    assert_eq!(run.stdout(), stdout);
    let record = load_complete(&dir);
    let sent = signals_sent(&record.events);
    // The setsid escapee is outside the process group: only the subreaper walk reaches it.
    assert!(
        sent.iter()
            .any(|s| s.signal == "TERM" && s.targets.contains(&setsid)),
        "TERM did not reach the setsid escapee: {sent:?}"
    );
    // The daemon stayed in the group; whichever way TERM reached it, TERM ended it.
    let reaped = |wanted: i32| {
        record.events.iter().find_map(|e| match &e.kind {
            EventKind::OrphanReaped {
                pid,
                status,
                escaped,
            } if *pid == wanted => Some((*status, *escaped)),
            _ => None,
        })
    };
    let daemon_reaped = reaped(daemon);
    assert_eq!(
        daemon_reaped.and_then(|(s, _)| s.signal),
        Some(15),
        "{sent:?}"
    );
    // Re-parented to the broker but still in the command's group: an orphan, no escapee.
    assert_eq!(daemon_reaped.and_then(|(_, e)| e), Some(false));
    assert_eq!(reaped(setsid).and_then(|(_, e)| e), Some(true));
    check_escapees_reaped(&dir, &stdout);
    env.finish();
}

#[test]
fn killed_exec_leaves_nothing_behind() {
    let env = TestEnv::new("exec_killed");
    let script = r#"setsid sh -c 'trap "" TERM; echo "escapee $$"; exec sleep 1000' &
echo "main $$"
sleep 1000"#;
    let running = env.spawn_exec(&["--grace", "500ms"], &["sh", "-c", script]);
    let dir = env.wait_command_dir();
    wait_for_text(&env, &dir.join("stdout.log"), "escapee");
    wait_for_text(&env, &dir.join("stdout.log"), "main");
    let stdout = read(&dir, "stdout.log");
    let escapee = labelled_pid(&stdout, "escapee");
    let broker = broker_pid(&events_now(&dir));

    signal(running.pid(), Signal::SIGKILL);
    let run = running.wait(&env);
    assert_eq!(run.status.code(), None, "tether exec died of SIGKILL");

    // Every process of the command's tree goes (the escapee by KILL after the grace: see
    // `hard_killed` below). How soon is the broker's stop plan, not a wall-clock bound on a
    // loaded machine.
    wait_until(&env, "the command's tree to be gone", || {
        procs::tagged(&env.tag).iter().all(|p| p.pid == broker)
    });
    wait_until(&env, "the broker to finish", || procs::is_gone(broker));

    let record = load_complete(&dir);
    // Not the shim: its caller's signals it does not pass on, and its death is a loss.
    let command = tether::model::replay::command_so_far(&record);
    assert_eq!(command.state_words(), "parent lost (SIGTERM)");
    let result = record.result.expect("result.json is written");
    assert!(result.parent_lost);
    assert_eq!(result.stopped_by, Some(Origin::ParentLost));
    assert!(result.hard_killed, "the TERM-ignoring escapee needed KILL");
    assert!(
        kinds(&record.events).contains(&"parent_lost"),
        "{:?}",
        kinds(&record.events)
    );
    let sent = signals_sent(&record.events);
    assert!(
        sent.iter().all(|s| s.origin == Origin::ParentLost),
        "{sent:?}"
    );
    assert!(
        sent.iter()
            .any(|s| s.signal == "KILL" && s.targets.contains(&escapee)),
        "the escapee got no KILL: {sent:?}"
    );
    assert!(orphans_reaped(&record.events).contains(&escapee));
    assert_eq!(kinds(&record.events).last(), Some(&"close"));
    env.finish();
}

/// A command stopped by SIGSTOP still ends: the stop sequence sends SIGCONT with SIGTERM.
#[test]
fn stopped_command_is_continued_and_terminated() {
    let env = TestEnv::new("sigstopped");
    let running = env.spawn_exec(
        &["--grace", "5s"],
        &["sh", "-c", "echo ready; kill -STOP $$; echo continued"],
    );
    let dir = env.wait_command_dir();
    wait_for_text(&env, &dir.join("stdout.log"), "ready");
    let main = spawned_pid(&events_now(&dir));
    wait_until(&env, "the command to stop itself", || {
        procs::state(main) == Some(b'T')
    });
    signal(running.pid(), Signal::SIGTERM);
    let run = running.wait(&env);
    assert_eq!(run.code(), 143, "stderr: {}", run.stderr_text());
    let record = load_complete(&dir);
    let sent: Vec<String> = signals_sent(&record.events)
        .into_iter()
        .map(|s| s.signal)
        .collect();
    assert_eq!(sent, ["TERM", "CONT"]);
    assert!(!record.result.expect("result.json").hard_killed);
    env.finish();
}

/// The kernel cuts process names to 15 bytes, which can split a UTF-8 character; such a
/// process must still be found and stopped.
#[test]
fn a_process_with_a_cut_multibyte_name_is_still_stopped() {
    let env = TestEnv::new("cut_name");
    let sleeper = env.path("ééééééééé");
    common::copy_program("/bin/sleep", &sleeper);
    let script = format!(
        "(setsid '{}' 1000 &); sleep 0.3; echo done",
        sleeper.display()
    );
    let run = env.exec(&["--json"], &["sh", "-c", &script]);
    assert_eq!(run.code(), 0, "stderr: {}", run.stderr_text());
    let record = load_complete(&env.command_dir());
    assert!(
        !orphans_reaped(&record.events).is_empty(),
        "the escapee was not stopped and reaped: {:?}",
        kinds(&record.events)
    );
    env.finish();
}
