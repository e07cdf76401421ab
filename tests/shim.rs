//! The shell shim end to end: `tether sh -c`, and tether through the links `tether shims`
//! makes, seen from the caller as the real shell: exit status, stdin, stdout and stderr byte
//! for byte, `$0` and `$1`, signals; journaled when brokered, untouched when passed through.

use crate::common;

use std::fs;
use std::io::Write;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use common::disk::SmallDisk;
use common::journal::{command_dirs, events_now, exit_status, load_complete, read, signals_sent};
use common::procs::signal;
use common::tmux::Tmux;
use common::{BIN, RunningExec, TestEnv, wait_for_text};
use nix::sys::signal::Signal;

/// A command for the shim (`program` is tether or one of its links), in the test's state
/// dir and config dir, tagged, outside any session or broker the test runner may be in.
fn shim_command(env: &TestEnv, program: &Path, args: &[&str]) -> Command {
    env.shim(program, args)
}

fn tether_sh(env: &TestEnv, args: &[&str]) -> Command {
    let mut command = shim_command(env, Path::new(BIN), &["sh"]);
    command.args(args);
    command
}

/// Runs to completion within the tests' deadline, with `input` on stdin.
fn run(env: &TestEnv, mut command: Command, input: &[u8]) -> Output {
    command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().expect("start the shim");
    let pid = child.id() as i32;
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let (done, output) = std::sync::mpsc::channel();
    std::thread::spawn(move || done.send(child.wait_with_output()));
    let output = match output.recv_timeout(common::DEADLINE) {
        Ok(output) => output.unwrap(),
        Err(_) => {
            signal(pid, Signal::SIGKILL);
            let killed = common::procs::kill_tagged(&env.tag);
            panic!("the shim did not finish; killed it and {killed:?}");
        }
    };
    writer.join().unwrap();
    output
}

/// The links `tether shims` makes, in the test's scratch space.
fn shims(env: &TestEnv) -> PathBuf {
    let dir = env.path("shims");
    let out = Command::new(BIN).arg("shims").arg(&dir).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    dir
}

fn journals(env: &TestEnv) -> Vec<PathBuf> {
    env.command_dirs()
}

/// How a process ended, as its caller's `wait` tells it: an exit code or a signal.
fn ending(status: std::process::ExitStatus) -> (Option<i32>, Option<i32>) {
    use std::os::unix::process::ExitStatusExt;
    (status.code(), status.signal())
}

#[test]
fn exit_status_is_the_shells() {
    let env = TestEnv::new("shim_exit");
    let scripts = [
        "exit 0",
        "exit 3",
        // Death by a signal is a death by that signal, as the shell's caller would see it:
        // not exit 128+N (an agent reads 143 as its own timeout, 137 as its interrupt).
        "kill -KILL $$",
        "kill -TERM $$",
        "kill -SEGV $$",
        "nonexistent-command-xyz",
    ];
    for script in scripts {
        // In the test's scratch space: a shell that dies by SIGSEGV may leave a core file.
        let mut shim = tether_sh(&env, &["-c", script]);
        shim.current_dir(env.dir.path());
        let out = run(&env, shim, b"");
        let mut real = Command::new("/bin/sh");
        real.args(["-c", script]).current_dir(env.dir.path());
        let real = run(&env, real, b"");
        assert_eq!(
            ending(out.status),
            ending(real.status),
            "`{script}`: {}",
            stderr_text(&out)
        );
        assert!(
            !stderr_text(&out).contains("tether"),
            "`{script}`: {}",
            stderr_text(&out)
        );
    }
    assert_eq!(
        ending(run(&env, tether_sh(&env, &["-c", "kill -TERM $$"]), b"").status),
        (None, Some(15))
    );
    // Each ran under a broker, with the shell as the command.
    let dirs = journals(&env);
    assert_eq!(dirs.len(), scripts.len() + 1, "{dirs:?}");
    // Found by its command, not by its place: each call is a session of its own, named for
    // the second and the pid it started in, which need not sort in the calls' order.
    let record = dirs
        .iter()
        .map(|dir| load_complete(dir))
        .find(|r| {
            r.request
                .as_ref()
                .is_some_and(|q| q.command.argv().last().is_some_and(|a| a == "exit 3"))
        })
        .expect("the journal of `exit 3`");
    assert_eq!(exit_status(&record.events).code, Some(3));
    let request = record.request.unwrap();
    assert_eq!(
        request.command.argv(),
        ["/bin/sh", "-c", "exit 3"].map(String::from)
    );
    assert_eq!(request.name, "exit");
    // `tether exec` keeps 128+N, as documented.
    let exec = env.exec(&[], &["sh", "-c", "kill -TERM $$"]);
    assert_eq!(exec.code(), 128 + 15);
    env.finish();
}

#[test]
fn stdin_stdout_and_stderr_are_the_shells() {
    let env = TestEnv::new("shim_streams");
    // Every byte value on both streams, the input echoed back, nothing of tether's own.
    let script = r#"printf 'out\000\377\r\n'; cat; printf 'err\033[31m\377' >&2; printf 'tail'"#;
    let input: Vec<u8> = (0..=255u8).cycle().take(300_000).collect();
    let shim = run(&env, tether_sh(&env, &["-c", script]), &input);
    let mut real = Command::new("/bin/sh");
    real.args(["-c", script]);
    let real = run(&env, real, &input);
    assert_eq!(shim.status.code(), Some(0));
    assert!(shim.stdout == real.stdout, "stdout differs from /bin/sh's");
    assert_eq!(shim.stderr, real.stderr, "stderr differs from /bin/sh's");
    assert!(shim.stdout.len() > input.len());
    let dir = &journals(&env)[0];
    assert!(read(dir, "stdout.log") == real.stdout, "stdout.log differs");
    assert_eq!(read(dir, "stderr.log"), real.stderr);
    env.finish();
}

#[test]
fn dollar_zero_and_arguments() {
    let env = TestEnv::new("shim_args");
    let out = run(
        &env,
        tether_sh(&env, &["-c", "echo \"$0|$1|$2|$#\"", "a", "b c"]),
        b"",
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "a|b c||1\n");
    // Without NAME, $0 is the shell's argv[0], as the caller gave it: `sh` here.
    let out = run(&env, tether_sh(&env, &["-c", "echo $0"]), b"");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "sh\n");
    // -lc and -c -l (Claude Code's form) are brokered too.
    for flags in [&["-lc"][..], &["-c", "-l"]] {
        let mut args = flags.to_vec();
        args.push("echo login");
        let out = run(&env, tether_sh(&env, &args), b"");
        assert_eq!(String::from_utf8_lossy(&out.stdout), "login\n", "{flags:?}");
    }
    assert_eq!(journals(&env).len(), 4);
    env.finish();
}

#[test]
fn links_broker_dash_c_and_pass_everything_else_through() {
    let env = TestEnv::new("shim_links");
    let dir = shims(&env);
    let sh = dir.join("sh");
    assert_eq!(
        fs::read_link(&sh).unwrap(),
        Path::new(BIN).canonicalize().unwrap()
    );

    // -c through the link: brokered, journaled, quiet.
    let out = run(
        &env,
        shim_command(&env, &sh, &["-c", "echo via link; echo $0"]),
        b"",
    );
    assert_eq!(out.status.code(), Some(0));
    // Called by its path, the shell is named as the caller would have named it without
    // tether: by the real shell's path, never the link's (a tether path in an agent's
    // `$0` and in every message of its shell: `/tmp/.../bash: line 1: foo: command not found`).
    let real_sh = tether::shim::Shell::Sh.real_path().expect("a real sh");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("via link\n{}\n", real_sh.display())
    );
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(journals(&env).len(), 1);

    // Anything else goes to the real shell, exactly as it would have run it: compared with
    // that shell called by its path.
    let script = env.path("script.sh");
    fs::write(&script, "echo \"script $0 $1\"; exit 4\n").unwrap();
    let script = script.to_string_lossy().into_owned();
    let cases: [(&[&str], &[u8]); 4] = [
        (&["--version"], b""),
        (&[&script, "arg"], b""),
        (&[], b"echo from stdin; exit 6\n"),
        (&["-s", "x"], b"echo \"$1\"\n"),
    ];
    for (args, input) in cases {
        let through = run(&env, shim_command(&env, &sh, args), input);
        let mut real = Command::new(&real_sh);
        real.args(args);
        let real = run(&env, real, input);
        assert_eq!(
            (through.status.code(), &through.stdout, &through.stderr),
            (real.status.code(), &real.stdout, &real.stderr),
            "{args:?}"
        );
    }
    assert_eq!(journals(&env).len(), 1, "nothing else was brokered");

    if Path::new("/bin/bash").exists() {
        let out = run(
            &env,
            shim_command(&env, &dir.join("bash"), &["--version"]),
            b"",
        );
        assert!(String::from_utf8_lossy(&out.stdout).starts_with("GNU bash"));
        let out = run(
            &env,
            shim_command(&env, &dir.join("bash"), &["-c", "echo $BASH_VERSION"]),
            b"",
        );
        assert!(!out.stdout.is_empty() && out.status.success());
        assert_eq!(journals(&env).len(), 2);
    } else {
        eprintln!("no /bin/bash: its link is not tried");
    }
    env.finish();
}

#[test]
fn inside_a_broker_the_shim_steps_aside() {
    let env = TestEnv::new("shim_nested");
    let dir = shims(&env);
    let sh = dir.join("sh").to_string_lossy().into_owned();
    // The brokered command's own `sh -c` runs directly: one journal, not two.
    let inner = format!("{sh} -c 'echo inner $TETHER_BROKER_ID'");
    let out = run(
        &env,
        shim_command(&env, Path::new(&sh), &["-c", &inner]),
        b"",
    );
    let dirs = journals(&env);
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    let session = dirs[0]
        .parent()
        .unwrap()
        .file_name()
        .unwrap()
        .to_string_lossy();
    let command = dirs[0].file_name().unwrap().to_string_lossy();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("inner {session}/{command}\n")
    );
    // Set by hand, it does the same.
    let mut command = shim_command(&env, Path::new(&sh), &["-c", "echo direct"]);
    command.env("TETHER_BROKER_ID", "elsewhere/01-x");
    let out = run(&env, command, b"");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "direct\n");
    assert_eq!(journals(&env).len(), 1);
    env.finish();
}

#[test]
fn the_shims_commands_join_tether_session() {
    let env = TestEnv::new("shim_session");
    let dir = shims(&env);
    for shell in ["sh", "sh"] {
        let mut command = shim_command(&env, &dir.join(shell), &["-c", "echo $TETHER_SESSION"]);
        command.env("TETHER_SESSION", "agent-run-7");
        let out = run(&env, command, b"");
        assert_eq!(String::from_utf8_lossy(&out.stdout), "agent-run-7\n");
    }
    let session = env.state_dir().join("sessions/agent-run-7");
    let names: Vec<String> = fs::read_dir(&session)
        .unwrap()
        .flatten()
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
    env.finish();
}

/// A session name tether refuses (`.hidden` starts with a dot: the names of what tether sets
/// aside, which no lister shows) neither hides the command nor loses it: the shim says so in
/// one line of its notices (never in the command's stderr) and runs it, journaled in a new
/// session of its own that `tether sessions` lists.
#[test]
fn a_refused_tether_session_runs_the_command_in_a_new_listed_session() {
    let env = TestEnv::new("shim_bad_session");
    let dir = shims(&env);
    for refused in [".hidden", ".pruning-x-1", "no/slashes"] {
        let mut command = shim_command(
            &env,
            &dir.join("sh"),
            &["-c", "echo \"in $TETHER_SESSION\""],
        );
        command.env("TETHER_SESSION", refused);
        let out = run(&env, command, b"");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{refused}: {stderr}");
        // Said to the operator, not into the command's stderr, which its caller reads.
        assert!(stderr.is_empty(), "{refused}: {stderr}");
        let notices = fs::read_to_string(env.state_dir().join(tether::exec::NOTICES_FILE)).unwrap();
        let said = notices.lines().last().unwrap_or_default();
        assert!(
            said.contains("TETHER_SESSION: invalid session name")
                && said.contains("journaled in a new session instead"),
            "{refused}: {notices}"
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        let session = stdout
            .strip_prefix("in ")
            .map(str::trim_end)
            .unwrap_or_default()
            .to_string();
        assert!(
            !session.is_empty() && session != refused && !session.starts_with('.'),
            "{refused}: the command ran in `{stdout}`"
        );
        let listed = Command::new(BIN)
            .args(["sessions", "--state-dir"])
            .arg(env.state_dir())
            .output()
            .unwrap();
        assert!(
            String::from_utf8_lossy(&listed.stdout).contains(&session),
            "{refused}: `tether sessions` does not list {session}: {}",
            String::from_utf8_lossy(&listed.stdout)
        );
    }
    let hidden: Vec<String> = fs::read_dir(env.state_dir().join("sessions"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.') || n.contains('/'))
        .collect();
    assert!(hidden.is_empty(), "sessions nobody lists: {hidden:?}");
    assert_eq!(journals(&env).len(), 3);
    env.finish();
}

/// The origins of the stops `events` journal, in order.
fn stop_origins(events: &[tether::protocol::Event]) -> Vec<tether::protocol::Origin> {
    (events.iter())
        .filter_map(|e| match e.kind {
            tether::protocol::EventKind::StopStarted { origin, .. } => Some(origin),
            _ => None,
        })
        .collect()
}

/// Starts `tether sh -c SCRIPT` with its output captured to files, for signalling.
fn spawn_shim(env: &TestEnv, script: &str) -> RunningExec {
    env.spawn_captured(tether_sh(env, &["-c", script]))
}

#[test]
fn a_signal_to_the_shim_reaches_the_command_as_itself() {
    let env = TestEnv::new("shim_sigint");
    let script = "trap 'echo got INT; exit 5' INT; echo ready; while :; do sleep 0.05; done";
    let running = spawn_shim(&env, script);
    wait_for_text(&env, &running.stdout_path, "ready");
    signal(running.pid(), Signal::SIGINT);
    let done = running.wait(&env);
    assert_eq!(done.code(), 5, "stderr: {}", done.stderr_text());
    assert_eq!(String::from_utf8_lossy(&done.stdout()), "ready\ngot INT\n");
    let record = load_complete(&env.command_dir());
    let sent = signals_sent(&record.events);
    assert_eq!(
        sent.first().map(|s| (s.signal.as_str(), s.origin)),
        Some(("INT", tether::protocol::Origin::Caller)),
        "{sent:?}"
    );
    assert!(sent.iter().all(|s| s.signal != "KILL"), "{sent:?}");
    // Attributed to who sent it: the shim's caller (this test), through its shell, not to
    // some tether front end.
    let program = record.events.iter().find_map(|e| match &e.kind {
        tether::protocol::EventKind::SignalSent {
            client: Some(peer), ..
        } => peer.program.clone(),
        _ => None,
    });
    let caller = format!("(pid {}) through its shell", std::process::id());
    assert!(
        program.as_deref().is_some_and(|p| p.ends_with(&caller)),
        "{program:?}"
    );

    // A command that ignores it: the second stops it (TERM, then KILL after the grace).
    let script = "trap '' INT TERM; echo ready; while :; do sleep 0.05; done";
    let running = spawn_shim(&env, script);
    wait_for_text(&env, &running.stdout_path, "ready");
    signal(running.pid(), Signal::SIGINT);
    // The first is passed on (journaled as sent) before the second comes: two commands
    // have had an INT now.
    common::wait_until(&env, "the INT passed on", || {
        command_dirs(&env.state_dir())
            .iter()
            .filter(|d| {
                signals_sent(&events_now(d))
                    .iter()
                    .any(|s| s.signal == "INT")
            })
            .count()
            == 2
    });
    signal(running.pid(), Signal::SIGTERM);
    // How soon KILL follows the grace is the conversation's and the broker's to keep, and
    // their machine tests check it on a fake clock; here, that the kernel ends it by KILL.
    let done = running.wait(&env);
    assert_eq!(
        ending(done.status),
        (None, Some(9)),
        "{}",
        done.stderr_text()
    );
    // The stop the second one started is the caller's, as the first one passed on was.
    let events: Vec<_> = (command_dirs(&env.state_dir()).iter())
        .flat_map(|d| events_now(d))
        .collect();
    assert_eq!(stop_origins(&events), [tether::protocol::Origin::Caller]);
    env.finish();
}

/// Runs `echo ready; sleep 1000` through the shim, lets `stop` signal what it picks (its
/// argument: the journal's directory), and checks that the shim ended by `ends_by` and that
/// the one stop journaled was the caller's. The journal, complete.
fn stopped_as_the_callers(
    env: &TestEnv,
    stop: impl FnOnce(&RunningExec, &Path),
    ends_by: i32,
) -> tether::journal::CommandRecord {
    let running = spawn_shim(env, "echo ready; sleep 1000");
    wait_for_text(env, &running.stdout_path, "ready");
    let dir = env.command_dir();
    stop(&running, &dir);
    let done = running.wait(env);
    assert_eq!(ending(done.status), (None, Some(ends_by)));
    common::wait_until(env, "the broker's result", || {
        dir.join("result.json").exists()
    });
    let record = load_complete(&dir);
    assert_eq!(
        stop_origins(&record.events),
        [tether::protocol::Origin::Caller]
    );
    record
}

/// An agent that ends a command by killing the group it started the shim in (Codex, at each
/// call's end and as it exits) kills the shim, which passes on every signal but that one:
/// the broker stops the command as the caller's doing, and it reads `stopped`, not `parent
/// lost`, with no `parent-lost` badge.
#[test]
fn a_shim_its_caller_kills_leaves_its_command_stopped_by_the_caller() {
    let env = TestEnv::new("shim_killed");
    let kill = |shim: &RunningExec, _: &Path| signal(shim.pid(), Signal::SIGKILL);
    let record = stopped_as_the_callers(&env, kill, 9);
    let command = tether::model::replay::command_so_far(&record);
    assert!(command.parent_lost.is_some(), "the loss is journaled");
    assert_eq!(command.state_words(), "stopped (SIGTERM)");
    assert!(!tether::model::badges::Badges::of(&command).parent_lost);
    env.finish();
}

/// Claude Code ends a background task by a TERM to every process of its tree, the shim's
/// broker among them: a stop signal to the broker from the process that ran the shim (here
/// the test) is the caller's doing, as the kernel names its sender; the command reads
/// `stopped by its caller`, not `by shutdown`.
#[test]
fn a_term_to_the_shims_broker_from_its_caller_is_the_callers() {
    let env = TestEnv::new("shim_broker_term");
    let term_the_broker = |_: &RunningExec, dir: &Path| {
        let broker = (events_now(dir).iter())
            .find_map(|e| match e.kind {
                tether::protocol::EventKind::BrokerStarted { broker_pid, .. } => Some(broker_pid),
                _ => None,
            })
            .expect("broker_started");
        signal(broker, Signal::SIGTERM);
    };
    stopped_as_the_callers(&env, term_the_broker, 15);
    env.finish();
}

#[test]
fn shims_refuses_to_overwrite_what_is_not_its_link() {
    let env = TestEnv::new("shims_refuse");
    let dir = env.path("bin");
    fs::create_dir(&dir).unwrap();
    fs::write(dir.join("bash"), "#!/bin/sh\n").unwrap();
    let out = Command::new(BIN).arg("shims").arg(&dir).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("bash is a file, not a link to tether; nothing was changed"),
        "{stderr}"
    );
    assert!(!dir.join("sh").exists(), "nothing was created");
    assert_eq!(fs::read(dir.join("bash")).unwrap(), b"#!/bin/sh\n");
    // Run again once the place is free: created; and again: already there.
    fs::remove_file(dir.join("bash")).unwrap();
    for verb in ["created", "already"] {
        let out = Command::new(BIN).arg("shims").arg(&dir).output().unwrap();
        assert!(out.status.success());
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(stdout.matches(verb).count(), 3, "{stdout}");
    }
    env.finish();
}

/// The shim's stderr, as text.
fn stderr_text(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `tether sh -c SCRIPT a b` in `state`, and `/bin/sh -c SCRIPT a b`: same stdout, same
/// status, and the shim's stderr is one `tether: not journaled:` line.
fn runs_as_the_shell_unjournaled(env: &TestEnv, state: &Path, what: &str) {
    let script = "echo hi; echo \"$0 $1\"; exit 3";
    let mut shim = tether_sh(env, &["-c", script, "a", "b"]);
    shim.env("TETHER_STATE_DIR", state);
    let shim = run(env, shim, b"");
    let mut real = Command::new("/bin/sh");
    real.args(["-c", script, "a", "b"]);
    let real = run(env, real, b"");
    assert_eq!(
        (shim.status.code(), &shim.stdout),
        (real.status.code(), &real.stdout),
        "{what}: {}",
        stderr_text(&shim)
    );
    let said = stderr_text(&shim);
    assert_eq!(said.lines().count(), 1, "{what}: {said}");
    assert!(
        said.starts_with("tether: not journaled: "),
        "{what}: {said}"
    );
}

#[test]
fn a_state_dir_that_cannot_be_written_leaves_the_shell_unjournaled_not_refused() {
    let env = TestEnv::new("shim_fail_open");
    // Someone else's state directory: refused by tether, not by the shell.
    let foreign = env.path("foreign");
    fs::create_dir(&foreign).unwrap();
    std::os::unix::fs::chown(&foreign, Some(65534), Some(65534)).unwrap();
    runs_as_the_shell_unjournaled(&env, &foreign, "a state dir owned by nobody");
    let Some(disk) = SmallDisk::mount(&env, "256k") else {
        return env.finish();
    };
    let state = disk.path().join("state");
    disk.fill();
    runs_as_the_shell_unjournaled(&env, &state, "a full disk");
    // `tether exec` fails closed there, unless --fail-open.
    let exec = |options: &[&str]| {
        let mut command = Command::new(BIN);
        command
            .arg("exec")
            .arg("--state-dir")
            .arg(&state)
            .args(options)
            .args(["--", "sh", "-c", "echo ran; exit 6"])
            .env("XDG_CONFIG_HOME", env.path("config"))
            .env(common::TAG_VAR, &env.tag);
        run(&env, command, b"")
    };
    let closed = exec(&[]);
    assert_eq!(closed.status.code(), Some(125), "{}", stderr_text(&closed));
    assert!(closed.stdout.is_empty(), "the command did not run");
    let open = exec(&["--fail-open"]);
    assert_eq!(open.status.code(), Some(6), "{}", stderr_text(&open));
    assert_eq!(open.stdout, b"ran\n");
    let said = stderr_text(&open);
    assert!(
        said.lines().count() == 1 && said.starts_with("tether: not journaled: "),
        "{said}"
    );
    // Read-only: the same.
    disk.unfill();
    if disk.read_only() {
        runs_as_the_shell_unjournaled(&env, &state, "a read-only disk");
    } else {
        common::skip("cannot remount the disk read-only");
    }
    drop(disk);
    env.finish();
}

#[test]
fn a_disk_that_fills_during_a_run_adds_one_line_at_most() {
    let env = TestEnv::new("shim_fills");
    let Some(disk) = SmallDisk::mount(&env, "256k") else {
        return env.finish();
    };
    // Far more than the disk holds, on both streams.
    let script = "head -c 400000 /dev/zero | tr '\\0' a; head -c 400000 /dev/zero | tr '\\0' b >&2; echo end >&2; exit 4";
    let mut shim = tether_sh(&env, &["-c", script]);
    shim.env("TETHER_STATE_DIR", disk.path().join("state"));
    let out = run(&env, shim, b"");
    assert_eq!(out.status.code(), Some(4), "{}", stderr_text(&out));
    assert_eq!(out.stdout, vec![b'a'; 400_000]);
    let mut expected = vec![b'b'; 400_000];
    expected.extend_from_slice(b"end\n");
    assert!(
        out.stderr.starts_with(&expected),
        "the command's stderr comes first, whole"
    );
    let ours = String::from_utf8_lossy(&out.stderr[expected.len()..]).into_owned();
    assert!(ours.lines().count() <= 1, "{ours}");
    assert!(ours.is_empty() || ours.starts_with("tether: "), "{ours}");
    drop(disk);
    env.finish();
}

/// How many sessions the test's state dir holds.
fn session_count(env: &TestEnv) -> usize {
    fs::read_dir(env.state_dir().join("sessions"))
        .map_or(0, |dir| dir.flatten().filter(|e| e.path().is_dir()).count())
}

/// Waits until nothing the test started runs (a detached retention included).
fn settle(env: &TestEnv) {
    common::wait_until(env, "the detached retention to end", || {
        common::procs::tagged(&env.tag).is_empty()
    });
}

/// The retention stamp, made as old as if the last run were two minutes ago.
fn age_stamp(env: &TestEnv) {
    let stamp = fs::File::options()
        .write(true)
        .open(env.state_dir().join("retention.stamp"))
        .expect("the shim made a retention stamp");
    let then = std::time::SystemTime::now() - Duration::from_secs(120);
    stamp.set_modified(then).unwrap();
}

#[test]
fn shim_calls_apply_retention_detached_at_most_once_a_minute() {
    let env = TestEnv::new("shim_retention");
    let config = env.path("config").join("tether");
    fs::create_dir_all(&config).unwrap();
    fs::write(config.join("config.toml"), "[retention]\nkeep = 5\n").unwrap();
    let call = || {
        let out = run(&env, tether_sh(&env, &["-c", "echo x"]), b"");
        assert_eq!(out.stdout, b"x\n", "{}", stderr_text(&out));
        assert!(out.stderr.is_empty(), "{}", stderr_text(&out));
    };
    for _ in 0..30 {
        call();
    }
    settle(&env);
    // The first call's run was the only one within the minute.
    assert!(session_count(&env) >= 25, "{}", session_count(&env));
    // A minute later, the next call applies it.
    age_stamp(&env);
    call();
    common::wait_until(&env, "retention to keep 5 sessions", || {
        session_count(&env) <= 5
    });
    settle(&env);
    assert_eq!(session_count(&env), 5);
    // Turned off: nothing goes, however old the stamp.
    fs::write(
        config.join("config.toml"),
        "[retention]\nkeep = 1\nenabled = false\n",
    )
    .unwrap();
    age_stamp(&env);
    call();
    settle(&env);
    assert_eq!(session_count(&env), 6);
    env.finish();
}

/// A command can reach the retention stamp: a FIFO put in its place held every later shim
/// call, after its command, in an open for writing that waited for a reader (SIGTERM
/// ignored). It is opened non-blocking, and a stamp that is not a regular file starts no run.
#[test]
fn a_fifo_at_the_retention_stamp_holds_no_shim_call() {
    let env = TestEnv::new("shim_stamp_fifo");
    let shims = shims(&env);
    let plant =
        "rm -f \"$TETHER_STATE_DIR/retention.stamp\"; mkfifo \"$TETHER_STATE_DIR/retention.stamp\"";
    let out = run(
        &env,
        shim_command(&env, &shims.join("sh"), &["-c", plant]),
        b"",
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
    let stamp = fs::symlink_metadata(env.state_dir().join("retention.stamp")).unwrap();
    assert!(stamp.file_type().is_fifo());
    for _ in 0..3 {
        // `run` fails the test if the call does not return within the tests' deadline.
        let out = run(
            &env,
            shim_command(&env, &shims.join("sh"), &["-c", "echo hi"]),
            b"",
        );
        assert_eq!(out.stdout, b"hi\n", "{}", stderr_text(&out));
        assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
    }
    assert_eq!(journals(&env).len(), 4);
    settle(&env);
    env.finish();
}

#[test]
fn sh_help_is_the_shims() {
    let env = TestEnv::new("shim_help");
    let out = run(&env, tether_sh(&env, &["--help"]), b"");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.starts_with("tether's shell shim"), "{help}");
    assert!(help.contains("-c COMMAND"), "{help}");
    assert!(out.stderr.is_empty(), "{}", stderr_text(&out));
    assert!(journals(&env).is_empty());
    env.finish();
}

#[test]
fn a_command_under_a_terminal_reads_dev_tty_as_under_the_shell() {
    let env = TestEnv::new("shim_dev_tty");
    let tmux = Tmux::start(&env, 100, 20);
    tmux.type_line(
        &env,
        &format!(
            "TETHER_STATE_DIR={} XDG_CONFIG_HOME={} {BIN} sh -c 'printf ask:; read x </dev/tty; echo got:$x; read y; echo stdin:$y'; echo rc=$?",
            env.state_dir().display(),
            env.path("config").display(),
        ),
    );
    tmux.wait_screen(&env, "the prompt", |s| {
        s.lines().any(|l| l.starts_with("ask:"))
    });
    tmux.type_line(&env, "typed");
    tmux.wait_screen(&env, "what /dev/tty read", |s| s.contains("got:typed"));
    tmux.type_line(&env, "second");
    let screen = tmux.wait_screen(&env, "the shim's end", |s| s.contains("rc=0"));
    assert!(screen.contains("stdin:second"), "{screen}");
    // Echoed once, by the command's terminal.
    assert_eq!(screen.matches("typed").count(), 2, "{screen}");
    assert_eq!(journals(&env).len(), 1);
    drop(tmux);
    env.finish();
}

/// The pids the broker kept in custody (`leftovers_kept`), once it says so.
fn kept_leftovers(env: &TestEnv, dir: &Path) -> Vec<i32> {
    let mut kept = Vec::new();
    common::wait_until(env, "leftovers_kept", || {
        let events = tether::journal::CommandRecord::load(dir).events;
        kept = events
            .iter()
            .find_map(|e| match &e.kind {
                tether::protocol::EventKind::LeftoversKept { pids } => Some(pids.clone()),
                _ => None,
            })
            .unwrap_or_default();
        !kept.is_empty()
    });
    kept
}

/// Under a terminal the command's main process is not its terminal's controlling process (the
/// broker is): its exit hangs nothing up, so a job it left with `&` runs on, as under the
/// shell, in custody until the shim's caller exits.
#[test]
fn under_a_terminal_a_job_left_running_outlives_the_main_process_until_the_caller_exits() {
    let env = TestEnv::new("shim_tty_leftover");
    let tmux = Tmux::start(&env, 100, 20);
    tmux.type_line(
        &env,
        &format!(
            "TETHER_STATE_DIR={} XDG_CONFIG_HOME={} sh -c '{BIN} sh -c \"sleep 300 & echo hi\"; echo rc=$?; read x'",
            env.state_dir().display(),
            env.path("config").display(),
        ),
    );
    let screen = tmux.wait_screen(&env, "the shim's end", |s| s.contains("rc=0"));
    // Its own line: the typed command line says `echo hi` too.
    assert!(screen.lines().any(|l| l.trim() == "hi"), "{screen}");
    let dir = env.wait_command_dir();
    let leftovers = kept_leftovers(&env, &dir);
    // A hangup would have been sent as the main process exited, before the shim's caller
    // printed its status: it would be pending now, or have done its work. Neither.
    for pid in &leftovers {
        assert!(
            !common::procs::is_gone(*pid),
            "leftover {pid} is gone: {:#?}",
            tether::journal::CommandRecord::load(&dir).events
        );
        assert!(
            !common::procs::pending(*pid, Signal::SIGHUP),
            "leftover {pid} was hung up"
        );
    }
    let events = tether::journal::CommandRecord::load(&dir).events;
    assert_eq!(common::journal::orphans_reaped(&events), Vec::<i32>::new());
    assert!(!dir.join("result.json").exists());
    let ps = common::run_to_end(&env, env.tether(&["ps", "--json"]), "tether ps");
    let rows: serde_json::Value = serde_json::from_slice(&ps.stdout).expect("ps --json");
    let state = rows[0]["state"].as_str().unwrap_or_default();
    assert!(state.starts_with("left running"), "{rows}");

    // The caller goes (its `read` gets a line): so do the leftovers.
    tmux.type_line(&env, "x");
    common::wait_until(&env, "result.json", || dir.join("result.json").exists());
    for pid in &leftovers {
        common::wait_until(&env, "the leftovers to be gone", || {
            common::procs::is_gone(*pid)
        });
    }
    let record = load_complete(&dir);
    assert_eq!(
        common::journal::leftovers_stopped(&record.events).map(|(reason, _)| reason),
        Some(tether::protocol::LeftoversEnd::CallerExited)
    );
    drop(tmux);
    env.finish();
}

/// `tether shims DIR` run by root on a directory another user could write (mode 0777, owned
/// by `nobody`, or under a directory `nobody` owns): `nobody` could swap `DIR/bash` for a
/// program of theirs, which root's next `DIR/bash -c ...` would run as root. Refused with
/// the reason and what to do, and no link is made.
#[test]
fn tether_shims_refuses_a_directory_others_can_write() {
    use std::os::unix::fs::PermissionsExt;
    let env = TestEnv::new("shims_unsafe_dir");
    let nobody = nix::unistd::User::from_name("nobody")
        .unwrap()
        .expect("user nobody");
    let open = env.path("open");
    fs::create_dir(&open).unwrap();
    fs::set_permissions(&open, fs::Permissions::from_mode(0o777)).unwrap();
    let theirs = env.path("theirs");
    fs::create_dir(&theirs).unwrap();
    nix::unistd::chown(&theirs, Some(nobody.uid), None).unwrap();
    let parent = env.path("parent");
    fs::create_dir(&parent).unwrap();
    nix::unistd::chown(&parent, Some(nobody.uid), None).unwrap();
    for (dir, why) in [
        (open.clone(), "is writable by other users (mode 0777)"),
        (theirs.clone(), "is owned by uid 65534"),
        (parent.join("shims"), "is owned by uid 65534"),
    ] {
        let out = Command::new(BIN).arg("shims").arg(&dir).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{}: {stderr}", dir.display());
        assert!(
            stderr.contains(why) && stderr.contains("no link was made"),
            "{}: {stderr}",
            dir.display()
        );
        assert!(
            !dir.join("bash").exists() && !dir.join("sh").exists(),
            "{}: links were made",
            dir.display()
        );
    }
    // Made private, the same directory takes the links.
    fs::set_permissions(&open, fs::Permissions::from_mode(0o755)).unwrap();
    let out = Command::new(BIN).arg("shims").arg(&open).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(open.join("bash").symlink_metadata().is_ok());
    env.finish();
}

/// `tether stop` from outside, on a command the shim runs: its caller (an agent reading the
/// command's output and status) sees the command die by SIGTERM, as from a `kill` without
/// tether, and no words of tether's in its stderr; the stop is told to the operator, in the
/// journal (who sent it) and the shim's notices.
#[test]
fn a_stop_from_outside_reaches_the_caller_as_a_death_by_sigterm_with_no_words() {
    let env = TestEnv::new("shim_stopped");
    let runtime = env.runtime_dir();
    let mut shim = tether_sh(&env, &["-c", "echo ready; exec sleep 300"]);
    shim.env("XDG_RUNTIME_DIR", &runtime);
    let running = env.spawn_captured(shim);
    wait_for_text(&env, &running.stdout_path, "ready");
    let dir = env.command_dir();
    let target = common::journal::session_of(&dir);
    let mut stop = Command::new(BIN);
    stop.args(["stop", &target, "--state-dir"])
        .arg(env.state_dir())
        .env("XDG_RUNTIME_DIR", &runtime);
    let stopped = common::run_to_end(&env, stop, "tether stop");
    assert_eq!(stopped.status.code(), Some(0), "{stopped:?}");
    let done = running.wait(&env);
    assert_eq!(
        ending(done.status),
        (None, Some(15)),
        "{}",
        done.stderr_text()
    );
    assert_eq!(done.stderr_text(), "");
    assert_eq!(String::from_utf8_lossy(&done.stdout()), "ready\n");
    let notices = fs::read_to_string(env.state_dir().join(tether::exec::NOTICES_FILE)).unwrap();
    assert!(
        notices.contains("stopped by the operator: SIGTERM"),
        "{notices}"
    );
    let sent = signals_sent(&load_complete(&dir).events);
    assert_eq!(
        sent.first().map(|s| s.signal.as_str()),
        Some("TERM"),
        "{sent:?}"
    );
    env.finish();
}
