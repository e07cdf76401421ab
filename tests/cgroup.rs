//! cgroup v2 containment end to end, and the same guarantees with `TETHER_CGROUP=off`: a
//! double-forked `setsid` daemon is held and stopped, a TERM-ignoring fork storm is gone after
//! grace, a SIGKILLed broker's cgroup is killed and removed by the front end, stale cgroups are
//! removed by the next tether, and no cgroup is left behind.
//!
//! Where this machine has no writable cgroup v2, the cgroup tests print why and return.

use crate::common;

use std::path::{Path, PathBuf};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Duration;

use nix::sys::signal::Signal;

use common::journal::{events_now, load_complete, tree_entries};
use common::procs::{self, signal};
use common::{RunningExec, TestEnv, wait_for_text, wait_until};
use tether::protocol::{ContainmentMode, Event, EventKind};

/// A fork storm loads both cores: the other tests of this file wait while one runs, so that
/// their own timings (exec's patience with its broker) hold.
static STORM: RwLock<()> = RwLock::new(());

fn calm() -> RwLockReadGuard<'static, ()> {
    STORM.read().unwrap_or_else(|e| e.into_inner())
}

fn storm() -> RwLockWriteGuard<'static, ()> {
    STORM.write().unwrap_or_else(|e| e.into_inner())
}

/// `tether exec` with `TETHER_CGROUP` set as given (`None`: as the environment has it).
fn spawn_exec(env: &TestEnv, cgroup: Option<&str>, options: &[&str], argv: &[&str]) -> RunningExec {
    spawn_exec_with(env, cgroup, &[], options, argv)
}

/// As [`spawn_exec`], with more variables in exec's environment (and so its broker's).
fn spawn_exec_with(
    env: &TestEnv,
    cgroup: Option<&str>,
    vars: &[(&str, &str)],
    options: &[&str],
    argv: &[&str],
) -> RunningExec {
    let mut command = env.exec_command(options, argv);
    command.envs(vars.iter().copied());
    match cgroup {
        Some(value) => command.env(tether::cgroup::CGROUP_ENV, value),
        None => command.env_remove(tether::cgroup::CGROUP_ENV),
    };
    env.spawn_captured(command)
}

/// The journal's containment: mode, cgroup path, reason.
fn containment(events: &[Event]) -> Option<(ContainmentMode, Option<PathBuf>, Option<String>)> {
    events.iter().find_map(|e| match &e.kind {
        EventKind::Containment { mode, path, reason } => {
            Some((*mode, path.clone(), reason.clone()))
        }
        _ => None,
    })
}

/// Whether the cgroup path can be tested here; prints why not.
fn cgroup_available(test: &str) -> bool {
    match common::cgroups::hierarchy() {
        Ok(_) => true,
        Err(reason) => {
            common::skip(format!("{test}: no usable cgroup v2 here ({reason})"));
            false
        }
    }
}

/// The `0::` line of a process's `/proc/PID/cgroup`.
fn cgroup_of(pid: i32) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("0::").map(str::to_string))
}

fn read_pid(path: &Path) -> i32 {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or_else(|| panic!("no pid in {}", path.display()))
}

/// A command that starts a double-forked `setsid` daemon ignoring TERM, says so, and waits;
/// stopped with SIGTERM to exec and a 300 ms grace. Returns the journal, the daemon's pid and
/// the cgroup it was in while it ran.
fn daemon_stopped(env: &TestEnv, cgroup: Option<&str>) -> (Vec<Event>, i32, Option<String>) {
    daemon_stopped_with(env, cgroup, &[])
}

fn daemon_stopped_with(
    env: &TestEnv,
    cgroup: Option<&str>,
    vars: &[(&str, &str)],
) -> (Vec<Event>, i32, Option<String>) {
    let pid_file = env.path("daemon.pid");
    let script = format!(
        "(setsid sh -c 'echo $$ > {}; trap \"\" TERM; exec sleep 301' &); echo ready; sleep 1000",
        pid_file.display()
    );
    let running = spawn_exec_with(
        env,
        cgroup,
        vars,
        &["--grace", "300ms"],
        &["sh", "-c", &script],
    );
    let dir = env.wait_command_dir();
    wait_for_text(env, &dir.join("stdout.log"), "ready");
    wait_until(env, "the daemon's pid", || {
        std::fs::read_to_string(&pid_file).is_ok_and(|t| t.ends_with('\n'))
    });
    let daemon = read_pid(&pid_file);
    // It escaped the group and the session, not the broker's tree (nor the cgroup).
    wait_until(env, "the daemon in the journal's tree", || {
        tree_entries(&events_now(&dir))
            .iter()
            .any(|p| p.pid == daemon && p.escaped)
    });
    let held_in = cgroup_of(daemon);
    signal(running.pid(), Signal::SIGTERM);
    let run = running.wait(env);
    assert_eq!(run.code(), 143, "stderr: {}", run.stderr_text());
    assert!(procs::is_gone(daemon), "the daemon survived the stop");
    (load_complete(&dir).events, daemon, held_in)
}

#[test]
fn a_setsid_double_forked_daemon_is_in_the_cgroup_and_killed_by_the_stop() {
    if !cgroup_available("daemon_in_cgroup") {
        return;
    }
    let _calm = calm();
    let env = TestEnv::new("cgroup_daemon");
    let (events, _daemon, held_in) = daemon_stopped(&env, None);
    assert_held_then_removed(&events, held_in);
    env.finish();
}

/// Where clone3 cannot start the command in its cgroup (before Linux 5.7, or refused), the
/// command writes itself into `cgroup.procs` before exec: the same containment.
#[test]
fn without_clone3_the_command_enters_its_cgroup_by_itself() {
    if !cgroup_available("daemon_in_cgroup_without_clone3") {
        return;
    }
    let _calm = calm();
    let env = TestEnv::new("cgroup_no_clone3");
    let (events, _daemon, held_in) =
        daemon_stopped_with(&env, None, &[(tether::broker::spawn::CLONE3_ENV, "off")]);
    assert_held_then_removed(&events, held_in);
    env.finish();
}

/// The daemon was held in the journal's cgroup, hard-killed there, and the cgroup removed.
fn assert_held_then_removed(events: &[Event], held_in: Option<String>) {
    let (mode, path, _) = containment(events).expect("a containment event");
    assert_eq!(mode, ContainmentMode::Cgroup);
    let path = path.expect("the cgroup's path");
    let name = path.file_name().and_then(|n| n.to_str()).expect("a name");
    assert!(
        held_in
            .as_deref()
            .is_some_and(|c| c.ends_with(&format!("/{name}"))),
        "the daemon was in {held_in:?}, not in {}",
        path.display()
    );
    assert!(
        events
            .iter()
            .any(|e| matches!(e.kind, EventKind::HardKill { .. }))
    );
    assert!(
        !path.exists(),
        "the cgroup {} was not removed",
        path.display()
    );
}

#[test]
fn with_tether_cgroup_off_the_procfs_walk_stops_the_daemon_too() {
    let _calm = calm();
    let env = TestEnv::new("cgroup_off_daemon");
    let (events, _daemon, held_in) = daemon_stopped(&env, Some("off"));
    assert_eq!(
        containment(&events),
        Some((
            ContainmentMode::Procfs,
            None,
            Some("TETHER_CGROUP=off".to_string())
        ))
    );
    assert!(
        held_in.as_deref().is_none_or(|c| !c.contains("/tether.")),
        "in a tether cgroup: {held_in:?}"
    );
    env.finish();
}

/// A TERM-ignoring command spawning TERM-ignoring `setsid` children as fast as it can,
/// stopped with a 300 ms grace: nothing survives. Returns the journal and exec's exit code:
/// 137 when the broker finished its stop, 125 when exec gave up waiting for it (grace +
/// 450 ms, more while the kernel shows the broker at work) and stopped what was left itself.
fn fork_storm_stopped(env: &TestEnv, cgroup: Option<&str>) -> (Vec<Event>, i32) {
    let script = "trap '' TERM; echo ready; \
                  while :; do setsid sh -c 'trap \"\" TERM; exec sleep 1000' & done";
    let running = spawn_exec(env, cgroup, &["--grace", "300ms"], &["sh", "-c", script]);
    let dir = env.wait_command_dir();
    wait_for_text(env, &dir.join("stdout.log"), "ready");
    std::thread::sleep(Duration::from_millis(300));
    signal(running.pid(), Signal::SIGTERM);
    let run = running.wait(env);
    let code = run.code();
    assert!(
        code == 137 || (code == 125 && run.stderr_text().contains("broker lost; cleaned up")),
        "exit {code}, stderr: {}",
        run.stderr_text()
    );
    assert!(
        procs::tagged(&env.tag).is_empty(),
        "survivors: {:?}",
        procs::tagged(&env.tag)
    );
    (events_now(&dir), code)
}

#[test]
fn a_term_ignoring_fork_storm_is_gone_after_grace_through_cgroup_kill() {
    if !cgroup_available("fork_storm_cgroup") {
        return;
    }
    let _storm = storm();
    let env = TestEnv::new("cgroup_fork_storm");
    // On two loaded cores the broker may still be reaping a storm of thousands when exec's
    // patience ends (grace + 450 ms, up to 5 s while it is seen at work); exec then kills
    // what the cgroup holds itself.
    let (events, code) = fork_storm_stopped(&env, None);
    let (mode, path, _) = containment(&events).expect("a containment event");
    assert_eq!(mode, ContainmentMode::Cgroup);
    if code == 137 {
        assert!(
            events
                .iter()
                .any(|e| matches!(e.kind, EventKind::HardKill { .. }))
        );
    }
    assert!(!path.expect("a path").exists());
    env.finish();
}

#[test]
fn a_term_ignoring_fork_storm_is_gone_after_grace_with_tether_cgroup_off() {
    let _storm = storm();
    let env = TestEnv::new("cgroup_off_fork_storm");
    // The /proc walk races the forks: under load the broker may not finish within exec's
    // patience, and exec then stops the rest; either way nothing survives.
    let (events, _) = fork_storm_stopped(&env, Some("off"));
    assert_eq!(
        containment(&events).map(|c| c.0),
        Some(ContainmentMode::Procfs)
    );
    env.finish();
}

/// The command SIGKILLs its broker after starting a TERM-ignoring `setsid` escapee: exec, the
/// front end, kills what the cgroup holds and removes it.
#[test]
fn a_sigkilled_brokers_cgroup_is_killed_and_removed_by_the_front_end() {
    if !cgroup_available("broker_sigkill_cgroup") {
        return;
    }
    let _calm = calm();
    let env = TestEnv::new("cgroup_broker_sigkill");
    let script =
        "setsid -f sh -c 'trap \"\" TERM; exec sleep 91'; sleep 0.2; kill -9 $PPID; sleep 90";
    let run = spawn_exec(&env, None, &["--grace", "300ms"], &["sh", "-c", script]).wait(&env);
    assert_eq!(run.code(), 125, "stderr: {}", run.stderr_text());
    assert!(
        run.stderr_text().contains("broker lost; cleaned up"),
        "{}",
        run.stderr_text()
    );
    let events = events_now(&env.command_dir());
    let path = containment(&events)
        .and_then(|c| c.1)
        .expect("a cgroup path");
    assert!(!path.exists(), "the front end left {}", path.display());
    env.finish();
}

/// A cgroup left by a broker that died (empty, ours, named by tether) is removed when the
/// next tether starts; one whose broker lives is left alone.
#[test]
fn a_stale_empty_cgroup_with_a_dead_broker_is_removed_by_the_next_tether() {
    if !cgroup_available("stale_cgroup") {
        return;
    }
    let root = common::cgroups::hierarchy().expect("hierarchy");
    let _calm = calm();
    let env = TestEnv::new("cgroup_stale");
    // A pid that was ours and is gone, with a start time no process had.
    let mut dead = std::process::Command::new("true").spawn().expect("true");
    let dead_pid = dead.id() as i32;
    dead.wait().expect("reaped");
    let stale = root.join(format!(
        "tether.stale-test-{}.01-x.{dead_pid}-1",
        std::process::id()
    ));
    let me = tether::procfs::read_stat(std::process::id() as i32).expect("our stat");
    let live = root.join(format!(
        "tether.stale-test-{}.02-y.{}-{}",
        std::process::id(),
        me.pid,
        me.start_ticks
    ));
    std::fs::create_dir(&stale).expect("mkdir the stale cgroup");
    std::fs::create_dir(&live).expect("mkdir the live one");
    let run = spawn_exec(&env, None, &[], &["true"]).wait(&env);
    let (stale_left, live_left) = (stale.exists(), live.exists());
    let _ = std::fs::remove_dir(&live);
    let _ = std::fs::remove_dir(&stale);
    assert_eq!(run.code(), 0, "stderr: {}", run.stderr_text());
    assert!(!stale_left, "the stale cgroup {} was kept", stale.display());
    assert!(live_left, "a cgroup whose broker lives was removed");
    env.finish();
}

/// A delegated subtree taken away mid-run: the command is moved out of its cgroup and the
/// cgroup removed. The broker says so in one line and the /proc walk stops the command.
#[test]
fn a_cgroup_that_disappears_mid_run_falls_back_to_the_proc_walk() {
    if !cgroup_available("cgroup_disappears") {
        return;
    }
    let _calm = calm();
    let root = common::cgroups::hierarchy().expect("hierarchy");
    let env = TestEnv::new("cgroup_disappears");
    let running = spawn_exec(
        &env,
        None,
        &["--grace", "300ms"],
        &["sh", "-c", "echo ready; sleep 1000"],
    );
    let dir = env.wait_command_dir();
    wait_for_text(&env, &dir.join("stdout.log"), "ready");
    let path = containment(&events_now(&dir))
        .and_then(|c| c.1)
        .expect("a cgroup");
    let members = std::fs::read_to_string(path.join("cgroup.procs")).expect("members");
    for pid in members.lines() {
        std::fs::write(root.join("cgroup.procs"), pid).expect("move a member out");
    }
    std::fs::remove_dir(&path).expect("remove the emptied cgroup");
    wait_until(&env, "the switch to the /proc walk", || {
        events_now(&dir).iter().any(|e| {
            matches!(&e.kind, EventKind::Containment { mode: ContainmentMode::Procfs, reason: Some(r), .. }
                if r.contains("disappeared"))
        })
    });
    signal(running.pid(), Signal::SIGTERM);
    let run = running.wait(&env);
    assert_eq!(run.code(), 143, "stderr: {}", run.stderr_text());
    env.finish();
}

/// A process that moves itself out of the command's cgroup (as `systemd-run --scope`,
/// `cgexec` or a root command writing another `cgroup.procs` would) is still a descendant of
/// the broker: once the cgroup is empty the stop walks /proc for it, and it is killed.
#[test]
fn a_process_that_leaves_the_cgroup_is_still_stopped() {
    if !cgroup_available("leaves_the_cgroup") {
        return;
    }
    let _calm = calm();
    let env = TestEnv::new("cgroup_leaver");
    let outside = common::cgroups::hierarchy().expect("the hierarchy");
    let pid_file = env.path("leaver.pid");
    let script = format!(
        "(setsid sh -c 'echo $$ > {}/cgroup.procs && echo $$ > {}; trap \"\" TERM; exec sleep 302' &); echo ready; sleep 1000",
        outside.display(),
        pid_file.display()
    );
    let running = spawn_exec(&env, None, &["--grace", "300ms"], &["sh", "-c", &script]);
    let dir = env.wait_command_dir();
    wait_for_text(&env, &dir.join("stdout.log"), "ready");
    wait_until(&env, "the leaver's pid", || {
        std::fs::read_to_string(&pid_file).is_ok_and(|t| t.ends_with('\n'))
    });
    let leaver = read_pid(&pid_file);
    let (_, path, _) = containment(&events_now(&dir)).expect("a containment event");
    let path = path.expect("the cgroup's path");
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(&path).expect("the cgroup").permissions(),
    );
    assert_eq!(mode & 0o777, 0o700, "the cgroup is readable by others");
    let name = path.file_name().and_then(|n| n.to_str()).expect("a name");
    assert!(
        cgroup_of(leaver).is_some_and(|c| !c.ends_with(name)),
        "the leaver is still in the command's cgroup"
    );
    signal(running.pid(), Signal::SIGTERM);
    let run = running.wait(&env);
    assert_eq!(run.code(), 143, "stderr: {}", run.stderr_text());
    assert!(
        procs::is_gone(leaver),
        "the process that left the cgroup survived the stop"
    );
    env.finish();
}

/// A command that makes cgroups of its own below its cgroup: their processes are members
/// too (TERM reaches them, `cgroup.kill` ends them), and every one of them is removed with
/// the command's cgroup at the end.
#[test]
fn cgroups_the_command_makes_below_its_own_are_stopped_and_removed() {
    if !cgroup_available("nested_cgroups") {
        return;
    }
    let _calm = calm();
    let env = TestEnv::new("cgroup_nested");
    let hierarchy = common::cgroups::hierarchy().expect("the hierarchy");
    let own = cgroup_of(std::process::id() as i32).expect("our cgroup");
    let hierarchy = hierarchy.to_string_lossy().into_owned();
    let mount = hierarchy
        .strip_suffix(own.trim_end_matches('/'))
        .unwrap_or(&hierarchy)
        .trim_end_matches('/')
        .to_string();
    let pid_file = env.path("nested.pid");
    let script = format!(
        "cg={mount}$(sed -n 's/^0:://p' /proc/self/cgroup); mkdir -p $cg/inner/deeper && \
         (sh -c 'echo $$ > '$cg'/inner/deeper/cgroup.procs && echo $$ > {pid}; trap \"\" TERM; exec sleep 303' &); \
         echo ready; sleep 1000",
        pid = pid_file.display()
    );
    let running = spawn_exec(&env, None, &["--grace", "300ms"], &["sh", "-c", &script]);
    let dir = env.wait_command_dir();
    wait_for_text(&env, &dir.join("stdout.log"), "ready");
    wait_until(&env, "the nested process's pid", || {
        std::fs::read_to_string(&pid_file).is_ok_and(|t| t.ends_with('\n'))
    });
    let nested = read_pid(&pid_file);
    assert!(
        cgroup_of(nested).is_some_and(|c| c.ends_with("/inner/deeper")),
        "not in the nested cgroup: {:?}",
        cgroup_of(nested)
    );
    let (_, path, _) = containment(&events_now(&dir)).expect("a containment event");
    let path = path.expect("the cgroup's path");
    signal(running.pid(), Signal::SIGTERM);
    let run = running.wait(&env);
    assert_eq!(run.code(), 143, "stderr: {}", run.stderr_text());
    assert!(
        procs::is_gone(nested),
        "the process in a nested cgroup survived"
    );
    let events = load_complete(&dir).events;
    assert!(
        events.iter().any(|e| matches!(&e.kind, EventKind::SignalSent { targets, .. } if targets.contains(&nested))),
        "the nested process was not signalled"
    );
    assert!(!path.exists(), "{} was not removed", path.display());
    env.finish();
}
