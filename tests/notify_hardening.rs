//! The `[notify] command` against what made it misbehave: a notify program whose `sh` was the
//! shim (brokered, failing, notifying again for ever), a burst of failures that ran it once
//! each, and a slow one that held the command's return.
//!
//! A notify run gets no `TETHER_*` variable, so not the test's tag either: its scripts here
//! write their pid, and the test checks that pid is gone.

use crate::common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::procs::wait_gone;
use common::{BIN, DEADLINE, TAG_VAR, TestEnv, wait_until};

/// Writes the test's user config, which the front ends read through `XDG_CONFIG_HOME`.
fn notify_config(env: &TestEnv, argv: &[&str]) {
    let dir = env.path("config").join("tether");
    std::fs::create_dir_all(&dir).unwrap();
    let argv: Vec<String> = argv.iter().map(|a| format!("{a:?}")).collect();
    // Every failure told, an agent's quick ones too (through the shim they are counted only,
    // by default): each test here fails a command on purpose.
    let text = format!(
        "[notify]\ncommand = [{}]\n[attention]\nagent_failures_after = \"off\"\n",
        argv.join(", ")
    );
    std::fs::write(dir.join("config.toml"), text).unwrap();
}

/// No notify command any more: on a build that loops, the loop ends.
fn no_notify_config(env: &TestEnv) {
    let _ = std::fs::remove_file(env.path("config").join("tether/config.toml"));
}

/// The links `tether shims` makes, in the test's scratch space.
fn shims(env: &TestEnv) -> PathBuf {
    let dir = env.path("shims");
    let out = Command::new(BIN).arg("shims").arg(&dir).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    dir
}

/// `program ARGS`, a shim call as the manual set-up makes it: the shims directory first on
/// PATH, in the test's state and config directories, tagged, outside any session.
fn shim_call(env: &TestEnv, shims: &Path, program: &str, args: &[&str]) -> Command {
    let mut command = env.shim(&shims.join(program), args);
    let path = std::env::var("PATH").unwrap_or_default();
    command.env("PATH", format!("{}:{path}", shims.display()));
    command
}

/// A notify script that reads the event, writes its environment and pid to `seen` (whole,
/// by a rename) and fails: brokered, it would be a failing command that notifies again.
fn env_writing_script(seen: &Path) -> String {
    format!(
        "cat >/dev/null; env > '{seen}.tmp'; echo \"notify_pid=$$\" >> '{seen}.tmp'; mv '{seen}.tmp' '{seen}'; exit 1",
        seen = seen.display()
    )
}

/// The environment a notify run wrote, once it did, and its pid.
fn seen_environment(env: &TestEnv, seen: &Path) -> (Vec<String>, i32) {
    wait_until(env, "the notify run's environment", || seen.exists());
    let text = std::fs::read_to_string(seen).unwrap();
    let lines: Vec<String> = text.lines().map(str::to_string).collect();
    let pid = lines
        .iter()
        .find_map(|l| l.strip_prefix("notify_pid=")?.parse().ok())
        .expect("the run's pid");
    (lines, pid)
}

/// The run ran outside the shims: nothing of tether's in its environment, no shims
/// directory on its PATH, and no second command journaled (a brokered `sh` would have been
/// one, journaled before its script ran).
fn assert_outside_the_shims(env: &TestEnv, lines: &[String], shims: &Path) {
    let tether: Vec<&String> = lines.iter().filter(|l| l.starts_with("TETHER_")).collect();
    assert!(
        tether.is_empty(),
        "tether's variables in a notify run: {tether:?}"
    );
    let path = lines
        .iter()
        .find_map(|l| l.strip_prefix("PATH="))
        .expect("a PATH");
    assert!(
        !path.split(':').any(|dir| Path::new(dir) == shims),
        "the shims directory on a notify run's PATH: {path}"
    );
    let dirs = env.command_dirs();
    assert_eq!(dirs.len(), 1, "the notify run was brokered: {dirs:?}");
}

/// A failing shim command, with the notify program `program` (given the shims directory)
/// running `env_writing_script`: the run is outside the shims and ends whole.
fn notify_runs_outside_the_shims(name: &str, program: impl Fn(&Path) -> String) {
    let env = TestEnv::new(name);
    let shims = shims(&env);
    let seen = env.path("seen.env");
    notify_config(&env, &[&program(&shims), "-c", &env_writing_script(&seen)]);
    let done = env
        .spawn_captured(shim_call(&env, &shims, "bash", &["-c", "exit 1"]))
        .wait(&env);
    assert_eq!(done.code(), 1, "{}", done.stderr_text());
    let (lines, pid) = seen_environment(&env, &seen);
    no_notify_config(&env);
    assert_outside_the_shims(&env, &lines, &shims);
    assert_eq!(wait_gone(&[pid], DEADLINE), Vec::<i32>::new());
    env.finish();
}

#[test]
fn a_notify_program_s_sh_is_the_real_shell_even_with_the_shims_first_on_path() {
    notify_runs_outside_the_shims("notify-path", |_| "sh".into());
}

#[test]
fn a_shim_called_by_its_full_path_inside_a_notify_run_runs_the_real_shell() {
    notify_runs_outside_the_shims("notify-shim-path", |shims| {
        shims.join("sh").to_string_lossy().into_owned()
    });
}

#[test]
fn a_slow_notify_program_does_not_hold_the_command_s_return() {
    let env = TestEnv::new("notify-slow");
    let (go, done_file, pid_file) = (env.path("go"), env.path("done"), env.path("pid"));
    // It finishes only when the test says so, after the command returned: the command's
    // return cannot have waited for it.
    let script = format!(
        "cat >/dev/null; echo $$ > '{pid}'; while [ ! -e '{go}' ]; do sleep 0.02; done; echo done > '{done}'",
        pid = pid_file.display(),
        go = go.display(),
        done = done_file.display()
    );
    notify_config(&env, &["sh", "-c", &script]);
    let mut exec = env.exec_command(&[], &["sh", "-c", "exit 1"]);
    exec.env("XDG_CONFIG_HOME", env.path("config"));
    let run = env.spawn_captured(exec).wait(&env);
    assert_eq!(run.code(), 1, "{}", run.stderr_text());
    wait_until(&env, "the notify run's pid", || {
        std::fs::read_to_string(&pid_file).is_ok_and(|t| t.ends_with('\n'))
    });
    let pid: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(!done_file.exists());
    std::fs::write(&go, "").unwrap();
    // Let go, not killed: it finishes its job after the command returned.
    wait_until(&env, "the notify run to finish", || done_file.exists());
    assert_eq!(wait_gone(&[pid], DEADLINE), Vec::<i32>::new());
    env.finish();
}

/// Twelve commands fail; the first three at once while another broker holds the rate
/// file's lock for longer than the tries (as a holder preempted on a loaded machine does):
/// they are held all the same, counted beside the file, and told with the next run that
/// starts, though runs were still to be had. Five runs start; every other event is told by
/// one or still held, none lost.
#[test]
fn a_burst_of_failures_runs_the_notify_program_a_few_times_and_counts_the_rest() {
    let env = TestEnv::new("notify-burst");
    let got = env.path("notified.jsonl");
    notify_config(&env, &["sh", "-c", &format!("cat >> '{}'", got.display())]);
    let fail = |n: usize| {
        let runs: Vec<_> = (0..n)
            .map(|_| {
                let mut exec = env.exec_command(&[], &["sh", "-c", "exit 1"]);
                exec.env("XDG_CONFIG_HOME", env.path("config"));
                env.spawn_captured(exec)
            })
            .collect();
        for run in runs {
            assert_eq!(run.wait(&env).code(), 1);
        }
    };
    let rate_path = env.state_dir().join("notify-rate");
    tether::testing::private_dir(env.state_dir());
    tether::testing::write_private(&rate_path, "");
    let holder = tether::testing::LockHolder::lock(&rate_path);
    fail(3);
    drop(holder);
    // One after another: none of the nine finds the lock busy (each broker decided before
    // its command returned), so the figures below are exact.
    for _ in 0..9 {
        fail(1);
    }
    // Each broker decided before its command returned: the user's rate is final now.
    let rate: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&rate_path).unwrap()).unwrap();
    let runs_allowed = tether::attention::rate::RUNS_PER_WINDOW as u64;
    assert_eq!(rate["started"], runs_allowed, "{rate}");
    let held: u64 = rate["held"]["counts"]
        .as_array()
        .map_or(0, |counts| counts.iter().map(|n| n.as_u64().unwrap()).sum());
    // Those that found the lock busy are counted beside it, a byte each; the bytes before
    // `held_taken` were taken into the counts already.
    let held_beside = std::fs::read(env.state_dir().join("notify-rate.held"))
        .map_or(0, |b| b.len() as u64)
        - rate["held_taken"].as_u64().unwrap_or(0);
    wait_until(&env, "the runs that were let start", || {
        std::fs::read_to_string(&got).is_ok_and(|t| t.lines().count() as u64 == runs_allowed)
    });
    let runs = std::fs::read_to_string(&got).unwrap();
    let mut told: Vec<u64> = (runs.lines())
        .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
        .map(|run| run["held_back"]["count"].as_u64().unwrap_or(0))
        .collect();
    // The first of the nine told the three held while the lock was busy; the four after the
    // fifth run are held, in the state.
    told.sort_unstable();
    assert_eq!(told, [0, 0, 0, 0, 3], "{runs}");
    assert_eq!((held, held_beside), (4, 0), "{rate}");
    assert_eq!(
        held + held_beside + told.iter().sum::<u64>(),
        12 - runs_allowed,
        "{rate}\nthe runs:\n{runs}"
    );
    env.finish();
}

/// The issue's own set-up: an agent under `tether agent`, whose shims directory is first on
/// the PATH its broker runs the notify program with, runs one failing command. The notify
/// program's `sh` is the real shell: one run, never brokered, no `TETHER_*` variable, the
/// agent's shims directory off its PATH.
#[test]
fn under_tether_agent_a_failing_command_notifies_once_outside_the_shims() {
    let env = TestEnv::new("notify-agent");
    let seen = env.path("seen.env");
    notify_config(&env, &["sh", "-c", &env_writing_script(&seen)]);
    let agent = env.path("fake-agent");
    std::fs::write(
        &agent,
        "#!/bin/sh\n\"$CLAUDE_CODE_SHELL\" -c 'exit 1'\nwhile [ ! -e \"$GO\" ]; do sleep 0.05; done\n",
    )
    .unwrap();
    std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut command = env.tether(&["agent", "--session", "S", "--", "./fake-agent"]);
    command
        .current_dir(env.dir.path())
        .env(TAG_VAR, &env.tag)
        .env("GO", env.path("go"))
        .env("XDG_CONFIG_HOME", env.path("config"))
        .stdin(std::process::Stdio::null());
    let run = env.spawn_captured(command);
    let (lines, pid) = seen_environment(&env, &seen);
    std::fs::write(env.path("go"), "").unwrap();
    let done = run.wait(&env);
    assert_eq!(done.code(), 0, "{}", done.stderr_text());
    no_notify_config(&env);
    let tether: Vec<&String> = lines.iter().filter(|l| l.starts_with("TETHER_")).collect();
    assert!(tether.is_empty(), "tether's variables: {tether:?}");
    let path = lines
        .iter()
        .find_map(|l| l.strip_prefix("PATH="))
        .expect("a PATH");
    assert!(
        !path.split(':').any(|dir| dir.contains("agent-shims")),
        "the agent's shims directory on a notify run's PATH: {path}"
    );
    // The agent and its one command: the notify run was not brokered.
    let dirs = env.command_dirs();
    assert_eq!(dirs.len(), 2, "{dirs:?}");
    assert_eq!(wait_gone(&[pid], DEADLINE), Vec::<i32>::new());
    env.finish();
}

/// A command cannot pass its shell calls off as a notify run's by naming a session leader as
/// the keeper is named: the shim also asks that the leader run tether's own program.
#[test]
fn a_session_leader_that_only_takes_the_keepers_name_does_not_hide_shell_calls() {
    let env = TestEnv::new("notify-name-only");
    let shims = shims(&env);
    let impostor = env.path("tether-notify");
    common::copy_program("/bin/sh", &impostor);
    let script = format!("'{}' -c 'echo journaled'", shims.join("bash").display());
    let impostor = impostor.to_string_lossy().into_owned();
    let done = env
        .spawn_captured(env.shim(Path::new("/usr/bin/setsid"), &[&impostor, "-c", &script]))
        .wait(&env);
    assert_eq!(done.code(), 0, "{}", done.stderr_text());
    assert_eq!(
        env.command_dirs().len(),
        1,
        "the shell call was not journaled: the shim took a name for a keeper"
    );
    env.finish();
}
