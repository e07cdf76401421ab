//! `tether agent`, end to end, with a fake agent (a sh script) that runs its commands as the
//! agents do: through `$CLAUDE_CODE_SHELL -c` and through `bash -c` found on PATH. The agent
//! is command 01 of its session, its commands follow; what they leave running lives while
//! the agent does and is stopped when it exits, as is a command still running then.

use crate::common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::journal::{leftovers_stopped, load_complete, spawned_pid};
use common::procs::is_gone;
use common::{TAG_VAR, TestEnv, wait_until};
use tether::protocol::{LeftoversEnd, Origin};

/// Writes the fake agent `body` (sh) as `./fake-agent` in the test's scratch space.
fn fake_agent(env: &TestEnv, body: &str) {
    let path = env.path("fake-agent");
    common::write_script(&path, &format!("#!/bin/sh\n{body}"));
}

/// `tether agent --session S -- ./fake-agent`, tagged, run from the scratch space, with
/// `GO` (the file the agent waits for before it exits) and `PIDS` (where it writes pids).
fn agent_command(env: &TestEnv) -> Command {
    agent_command_in(env, "S")
}

/// [`agent_command`] in the session `session`. Command cgroups are named for the session,
/// and a test that looks at cgroups must not see another test's session of the same name.
fn agent_command_in(env: &TestEnv, session: &str) -> Command {
    let mut command = env.tether(&["agent", "--session", session, "--", "./fake-agent"]);
    command
        .current_dir(env.dir.path())
        .env(TAG_VAR, &env.tag)
        .env("GO", env.path("go"))
        .env("PIDS", env.path("pids"))
        .env_remove("TETHER_LEFTOVERS")
        .env_remove("TETHER_LEFTOVERS_MAX")
        .env_remove("TETHER_SESSION_OWNER")
        // The shims the agent is given follow the user's shell: bash here, whatever the
        // runner's.
        .env("SHELL", "/bin/bash")
        .stdin(std::process::Stdio::null());
    command
}

/// The pid the agent's command wrote to `PIDS`, once it has.
fn written_pid(env: &TestEnv) -> i32 {
    let path = env.path("pids");
    wait_until(env, "the command's pid", || {
        fs::read_to_string(&path).is_ok_and(|t| t.ends_with('\n'))
    });
    fs::read_to_string(&path).unwrap().trim().parse().unwrap()
}

/// The session's command directories, in order.
fn session_commands(env: &TestEnv) -> Vec<PathBuf> {
    commands_of(env, "S")
}

fn commands_of(env: &TestEnv, session: &str) -> Vec<PathBuf> {
    common::journal::command_dirs(&env.state_dir())
        .into_iter()
        .filter(|dir| dir.parent().and_then(Path::file_name) == Some(session.as_ref()))
        .collect()
}

fn name_of(dir: &Path) -> String {
    dir.file_name().unwrap().to_string_lossy().into_owned()
}

#[test]
fn the_agent_owns_its_session_and_what_its_commands_leave_ends_with_it() {
    let env = TestEnv::new("agent_session");
    fake_agent(
        &env,
        r#"echo "shell=$CLAUDE_CODE_SHELL goose=$GOOSE_SHELL sh=$SHELL"
"$CLAUDE_CODE_SHELL" -c 'sleep 300 & echo $! > "$PIDS"'
bash -c 'echo "through PATH: $0 in $TETHER_SESSION"'
while [ ! -e "$GO" ]; do sleep 0.05; done
exit 3
"#,
    );
    let run = env.spawn_captured(agent_command(&env));
    let sleep = written_pid(&env);
    wait_until(&env, "the agent's second command", || {
        session_commands(&env).len() == 3
    });
    // The agent runs: what its command left runs too.
    assert!(!is_gone(sleep), "the sleep was stopped while the agent ran");

    fs::write(env.path("go"), "").unwrap();
    let run = run.wait(&env);
    assert_eq!(run.code(), 3, "stderr: {}", run.stderr_text());
    wait_until(&env, "the leftover to be gone", || is_gone(sleep));

    let stdout = String::from_utf8(run.stdout()).unwrap();
    let shell = stdout
        .lines()
        .find_map(|l| l.strip_prefix("shell="))
        .and_then(|l| l.split(' ').next())
        .expect("the agent's first line");
    assert!(shell.ends_with("/bash"), "{stdout}");
    assert!(
        stdout.contains(&format!("goose={shell} sh={shell}")),
        "{stdout}"
    );
    assert!(stdout.contains("through PATH: bash in S"), "{stdout}");
    assert!(
        !Path::new(shell).parent().unwrap().exists(),
        "the agent's shims directory outlived it"
    );

    let commands = session_commands(&env);
    let names: Vec<String> = commands.iter().map(|d| name_of(d)).collect();
    assert_eq!(names, ["01-fake-agent", "02-sleep", "03-echo"]);
    let agent = load_complete(&commands[0]);
    let agent_pid = spawned_pid(&agent.events);
    assert_eq!(
        agent.result.and_then(|r| r.exit).and_then(|e| e.code),
        Some(3)
    );
    let with_leftover = load_complete(&commands[1]);
    assert_eq!(
        leftovers_stopped(&with_leftover.events),
        Some((LeftoversEnd::SessionOwnerExited, Some(agent_pid))),
        "{:?}",
        with_leftover.events
    );
    let result = with_leftover.result.expect("result.json");
    assert_eq!(result.exit.and_then(|e| e.code), Some(0));
    assert_eq!(
        result.leftovers.and_then(|l| l.stopped),
        Some(LeftoversEnd::SessionOwnerExited)
    );
    env.finish();
}

#[test]
fn a_command_still_running_when_the_agent_exits_is_stopped_with_the_session() {
    let env = TestEnv::new("agent_running_command");
    fake_agent(
        &env,
        r#""$CLAUDE_CODE_SHELL" -c 'echo $$ > "$PIDS"; exec sleep 300' &
while [ ! -e "$GO" ]; do sleep 0.05; done
exit 0
"#,
    );
    let run = env.spawn_captured(agent_command(&env));
    let command = written_pid(&env);
    assert!(!is_gone(command));
    fs::write(env.path("go"), "").unwrap();
    let run = run.wait(&env);
    assert_eq!(run.code(), 0, "stderr: {}", run.stderr_text());
    wait_until(&env, "the command to be gone", || is_gone(command));

    let commands = session_commands(&env);
    assert_eq!(commands.len(), 2, "{commands:?}");
    let record = load_complete(&commands[1]);
    let result = record.result.expect("result.json");
    // Stopped because the session's owner went, not by the agent's broker's teardown.
    assert_eq!(result.stopped_by, Some(Origin::ParentLost), "{result:?}");
    assert_eq!(result.exit.and_then(|e| e.signal), Some(15), "{result:?}");
    env.finish();
}

/// `tether agent` and its broker SIGKILLed together cannot remove the agent's shims
/// directory; the next tether to start (here `tether ps`) finds its maker gone and removes
/// it. The directory lives in the socket directory, named for the `tether agent` process.
#[test]
fn a_killed_agents_shims_directory_is_removed_by_the_next_tether() {
    use common::procs::{signal, state};
    use nix::sys::signal::Signal;
    let env = TestEnv::new("agent_killed_shims");
    let runtime = env.runtime_dir();
    fake_agent(
        &env,
        r#"echo "$CLAUDE_CODE_SHELL" > "$PIDS.shell"
while [ ! -e "$GO" ]; do sleep 0.05; done
"#,
    );
    let mut command = agent_command(&env);
    command.env("XDG_RUNTIME_DIR", &runtime);
    let running = env.spawn_captured(command);
    let agent = running.pid();
    let shell_file = env.path("pids.shell");
    wait_until(&env, "the agent's shell", || {
        fs::read_to_string(&shell_file).is_ok_and(|t| t.ends_with('\n'))
    });
    let shell = PathBuf::from(fs::read_to_string(&shell_file).unwrap().trim());
    let shims = shell.parent().unwrap().to_path_buf();
    assert!(shims.is_dir(), "{}", shims.display());
    let mut broker = None;
    wait_until(&env, "the agent's broker", || {
        broker = tether::procfs::all_processes()
            .into_iter()
            .find(|p| p.ppid == agent)
            .map(|p| p.pid);
        broker.is_some()
    });
    let broker = broker.unwrap_or_default();
    // Stopped first, so that neither acts on the other's death: as if killed at once.
    signal(broker, Signal::SIGSTOP);
    signal(agent, Signal::SIGSTOP);
    wait_until(&env, "tether agent and its broker to stop", || {
        state(agent) == Some(b'T') && state(broker) == Some(b'T')
    });
    signal(agent, Signal::SIGKILL);
    signal(broker, Signal::SIGKILL);
    let _ = running.wait(&env);
    assert!(shims.is_dir(), "SIGKILL left nothing to remove it");

    let mut ps = env.tether(&["ps"]);
    ps.env("XDG_RUNTIME_DIR", &runtime);
    let out = common::run_to_end(&env, ps, "tether ps");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !shims.exists(),
        "the killed agent's shims directory {} outlived it",
        shims.display()
    );
    env.finish();
}

/// The cgroup path a command's `containment` event names.
fn cgroup_path(events: &[tether::protocol::Event]) -> PathBuf {
    events
        .iter()
        .find_map(|e| match &e.kind {
            tether::protocol::EventKind::Containment { path, .. } => path.clone(),
            _ => None,
        })
        .expect("a cgroup: this test needs cgroup v2 (tests run as root)")
}

/// The agent's row is the agent's: its commands' cgroups are beside its own, not in it, and
/// their brokers live outside it, so neither a command's processes nor a broker are in the
/// agent's tree, and the broker that kept a server, re-parented to the agent's broker when
/// its shell call returned, is no orphan of the agent's.
#[test]
fn an_agents_commands_are_beside_the_agent_not_in_it() {
    common::cgroups::hierarchy().expect("this test needs cgroup v2 (tests run as root)");
    let env = TestEnv::new("agent_beside");
    fake_agent(
        &env,
        r#""$CLAUDE_CODE_SHELL" -c 'sleep 300 & echo $! > "$PIDS"'
"$CLAUDE_CODE_SHELL" -c 'exit 3'
"$CLAUDE_CODE_SHELL" -c 'echo $$ > "$PIDS.running"; exec sleep 301' &
while [ ! -e "$GO" ]; do sleep 0.05; done
"#,
    );
    let run = env.spawn_captured(agent_command_in(&env, "beside"));
    let server = written_pid(&env);
    let running_file = env.path("pids.running");
    wait_until(&env, "the running command's pid", || {
        fs::read_to_string(&running_file).is_ok_and(|t| t.ends_with('\n'))
    });
    let running: i32 = fs::read_to_string(&running_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let contained = |dir: &PathBuf| {
        common::journal::events_now(dir)
            .iter()
            .any(|e| matches!(e.kind, tether::protocol::EventKind::Containment { .. }))
    };
    wait_until(&env, "four commands in their cgroups", || {
        let commands = commands_of(&env, "beside");
        commands.len() == 4 && commands.iter().all(contained)
    });
    let commands = commands_of(&env, "beside");
    let agent_cgroup = cgroup_path(&common::journal::events_now(&commands[0]));
    let members = |cgroup: &Path| -> Vec<i32> {
        let text = fs::read_to_string(cgroup.join("cgroup.procs")).unwrap_or_default();
        text.lines().filter_map(|l| l.parse().ok()).collect()
    };
    for dir in &commands[1..] {
        let events = common::journal::events_now(dir);
        let cgroup = cgroup_path(&events);
        assert_eq!(
            cgroup.parent(),
            agent_cgroup.parent(),
            "{} is not beside the agent's {}",
            cgroup.display(),
            agent_cgroup.display()
        );
        let broker = common::journal::broker_pid(&events);
        assert!(
            !members(&agent_cgroup).contains(&broker),
            "the broker of {} is in the agent's cgroup",
            name_of(dir)
        );
    }
    // Nothing below the agent's cgroup: its commands are not in it.
    let below: Vec<PathBuf> = fs::read_dir(&agent_cgroup)
        .unwrap()
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .collect();
    assert!(below.is_empty(), "cgroups in the agent's: {below:?}");
    let agent_members = members(&agent_cgroup);
    assert!(!agent_members.contains(&server) && !agent_members.contains(&running));

    fs::write(env.path("go"), "").unwrap();
    let run = run.wait(&env);
    assert_eq!(run.code(), 0, "stderr: {}", run.stderr_text());
    wait_until(
        &env,
        "the server and the running command to be gone",
        || is_gone(server) && is_gone(running),
    );
    let agent = load_complete(&commands[0]);
    // The shell call the agent left running when it exited is the agent's orphan; the
    // brokers re-parented to the agent's broker are not.
    let brokers: Vec<i32> = commands[1..]
        .iter()
        .map(|dir| common::journal::broker_pid(&load_complete(dir).events))
        .collect();
    let orphans = common::journal::orphans_reaped(&agent.events);
    assert!(
        orphans.iter().all(|pid| !brokers.contains(pid)),
        "the agent's journal counts its commands' brokers {brokers:?} as its orphans: {orphans:?}"
    );
    let in_tree: Vec<Vec<String>> = common::journal::tree_entries(&agent.events)
        .into_iter()
        .map(|p| p.argv)
        .filter(|argv| !argv.is_empty())
        .collect();
    assert!(
        in_tree
            .iter()
            .all(|argv| argv[0] != "sleep" && argv[0] != "tether broker"),
        "the agent's tree holds its commands' processes: {in_tree:?}"
    );
    let kept = load_complete(&commands[1]);
    assert_eq!(
        leftovers_stopped(&kept.events),
        Some((
            LeftoversEnd::SessionOwnerExited,
            Some(spawned_pid(&agent.events))
        )),
        "{:?}",
        kept.events
    );
    env.finish();
}
