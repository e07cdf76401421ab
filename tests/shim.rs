//! The shell shim end to end: `tether sh -c`, and tether through the links `tether shims`
//! makes, seen from the caller as the real shell: exit status, stdin, stdout and stderr byte
//! for byte, `$0` and `$1`, signals; journaled when brokered, untouched when passed through.

mod common;

use std::fs;
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use common::journal::{exit_status, load_complete, read, signals_sent};
use common::procs::signal;
use common::{BIN, RunningExec, TAG_VAR, TestEnv, wait_for_text};
use nix::sys::signal::Signal;

/// A command for the shim (`program` is tether or one of its links), in the test's state
/// dir, tagged, outside any session or broker the test runner may be in.
fn shim_command(env: &TestEnv, program: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(program);
    command
        .args(args)
        .env("TETHER_STATE_DIR", env.state_dir())
        .env(TAG_VAR, &env.tag)
        .env_remove("TETHER_SESSION")
        .env_remove("TETHER_BROKER_ID")
        .stdin(Stdio::null());
    command
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

#[test]
fn exit_status_is_the_shells() {
    let env = TestEnv::new("shim_exit");
    for (script, code) in [
        ("exit 0", 0),
        ("exit 3", 3),
        ("kill -KILL $$", 128 + 9),
        ("kill -TERM $$", 128 + 15),
        ("nonexistent-command-xyz", 127),
    ] {
        let out = run(&env, tether_sh(&env, &["-c", script]), b"");
        assert_eq!(out.status.code(), Some(code), "`{script}`: {out:?}");
    }
    // Each ran under a broker, with the shell as the command.
    let dirs = journals(&env);
    assert_eq!(dirs.len(), 5, "{dirs:?}");
    let record = load_complete(&dirs[1]);
    assert_eq!(exit_status(&record.events).code, Some(3));
    let request = record.request.unwrap();
    assert_eq!(
        request.command.argv(),
        ["/bin/sh", "-c", "exit 3"].map(String::from)
    );
    assert_eq!(request.name, "exit");
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
    let link_name = sh.to_string_lossy().into_owned();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("via link\n{link_name}\n")
    );
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(journals(&env).len(), 1);

    // Anything else goes to the real shell, exactly as it would have run it: compared with
    // /bin/sh started with the same argv[0].
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
        let mut real = Command::new("/bin/sh");
        real.arg0(&sh).args(args);
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
    // A bad name is a clear error, not a silent fresh session.
    let mut command = shim_command(&env, &dir.join("sh"), &["-c", "true"]);
    command.env("TETHER_SESSION", "no/slashes");
    let out = run(&env, command, b"");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("TETHER_SESSION: invalid session name"));
    env.finish();
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
        sent.first().map(|s| s.signal.as_str()),
        Some("INT"),
        "{sent:?}"
    );
    assert!(sent.iter().all(|s| s.signal != "KILL"), "{sent:?}");

    // A command that ignores it: the second stops it (TERM, then KILL after the grace).
    let script = "trap '' INT TERM; echo ready; while :; do sleep 0.05; done";
    let running = spawn_shim(&env, script);
    wait_for_text(&env, &running.stdout_path, "ready");
    signal(running.pid(), Signal::SIGINT);
    std::thread::sleep(Duration::from_millis(200));
    signal(running.pid(), Signal::SIGTERM);
    let done = running.wait(&env);
    assert_eq!(done.code(), 128 + 9, "stderr: {}", done.stderr_text());
    assert!(done.elapsed < Duration::from_secs(8), "{:?}", done.elapsed);
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
