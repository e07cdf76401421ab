//! The operator's control of a command holds against the command and against a forged
//! journal: a command that fills its own control socket cannot keep `tether stop` out, and a
//! `command.json` naming some other process of the user gets nothing signalled.

use crate::common;

use std::fs;
use std::process::{Command, Output, Stdio};

use common::journal::{load_complete, session_of};
use common::procs::is_gone;
use common::{TAG_VAR, TestEnv, wait_for_text};

/// `tether ARGS` with the test's state and runtime directories, to its end.
fn tether(env: &TestEnv, args: &[&str]) -> Output {
    let mut command = env.tether(args);
    command.env("XDG_RUNTIME_DIR", env.runtime_dir());
    common::run_to_end(env, command, &format!("tether {args:?}"))
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Finds its own `command.json` (state dir in `STATE`, the rest in `TETHER_BROKER_ID`),
/// opens 40 connections to the control socket it names, says so, and holds them.
const HOG: &str = r#"
import json, os, socket, time
session, command = os.environ["TETHER_BROKER_ID"].split("/", 1)
path = os.path.join(os.environ["STATE"], "sessions", session, command, "command.json")
while True:
    try:
        with open(path) as f:
            target = json.load(f)["control_socket"]
        break
    except (OSError, ValueError, KeyError):
        time.sleep(0.01)
held = []
for _ in range(40):
    s = socket.socket(socket.AF_UNIX)
    s.connect(target)
    held.append(s)
print("holding", len(held), flush=True)
time.sleep(1000)
"#;

#[test]
fn a_command_holding_40_connections_to_its_socket_is_still_stopped_by_the_operator() {
    let env = TestEnv::new("socket_hog");
    let mut command = env.exec_command(&["--name", "hog"], &["python3", "-c", HOG]);
    command
        .env("XDG_RUNTIME_DIR", env.runtime_dir())
        .env("STATE", env.state_dir());
    let running = env.spawn_captured(command);
    let dir = env.wait_command_dir();
    wait_for_text(&env, &dir.join("stdout.log"), "holding 40");

    let stopped = tether(&env, &["stop", &session_of(&dir)]);
    assert_eq!(stopped.status.code(), Some(0), "{stopped:?}");
    assert!(text(&stopped.stdout).contains("stopped"), "{stopped:?}");
    assert!(
        text(&stopped.stdout).contains("nothing is left"),
        "{stopped:?}"
    );
    let run = running.wait(&env);
    assert_ne!(
        run.code(),
        0,
        "the command was stopped: {}",
        run.stderr_text()
    );
    assert!(load_complete(&dir).result.is_some());
    env.finish();
}

#[test]
fn a_forged_journal_naming_another_process_gets_nothing_signalled() {
    let env = TestEnv::new("forged_journal");
    let run = env.exec(&["--name", "real"], &["true"]);
    assert_eq!(run.code(), 0, "{}", run.stderr_text());
    let real = env.command_dir();
    let session = real.parent().expect("a session directory");
    let forged_session = session.with_file_name("fake");
    common::copy_dir(session, &forged_session);
    let forged = forged_session.join(real.file_name().expect("a command directory"));
    fs::remove_file(forged.join("result.json")).expect("remove result.json");

    let mut sleep = Command::new("sleep")
        .arg("1000")
        .env(TAG_VAR, &env.tag)
        .stdin(Stdio::null())
        .spawn()
        .expect("start sleep");
    let pid = sleep.id() as i32;
    let start_ticks = tether::procfs::read_stat(pid)
        .expect("the sleep's stat")
        .start_ticks;
    let path = forged.join("command.json");
    let mut file: serde_json::Value =
        serde_json::from_slice(&fs::read(&path).expect("read command.json")).expect("JSON");
    file["broker"] = serde_json::json!({ "pid": pid, "start_ticks": start_ticks });
    if let Some(fields) = file.as_object_mut() {
        fields.remove("control_socket");
    }
    fs::write(&path, serde_json::to_vec(&file).expect("JSON")).expect("write command.json");

    let stopped = tether(&env, &["stop", "fake"]);
    let said = text(&stopped.stderr);
    assert_eq!(stopped.status.code(), Some(1), "{stopped:?}");
    assert!(
        said.contains(&format!(
            "its broker pid {pid} is not the tether broker that wrote this journal"
        )) && said.contains("nothing was signalled"),
        "{stopped:?}"
    );
    assert!(!is_gone(pid), "the sleep was signalled: {stopped:?}");
    let _ = sleep.kill();
    let _ = sleep.wait();
    env.finish();
}

/// `tether exec` forks its broker (no second exec): the broker's `/proc/PID/environ` is the
/// front end's, without the token, and its command line is written over. What proves it
/// to a stop by pid (a journal without a control socket) is the memfd named for its token;
/// the same journal with another token gets nothing signalled.
#[test]
fn a_forked_broker_is_proved_by_its_token_memfd_and_a_wrong_token_is_refused() {
    let env = TestEnv::new("forked_broker");
    let mut command = env.exec_command(&["--name", "nap"], &["sleep", "1000"]);
    command.env("XDG_RUNTIME_DIR", env.runtime_dir());
    let running = env.spawn_captured(command);
    let dir = env.wait_command_dir();
    let real = serde_json::from_slice::<serde_json::Value>(
        &fs::read(dir.join("command.json")).expect("read command.json"),
    )
    .expect("JSON");
    let pid = real["broker"]["pid"].as_i64().expect("the broker's pid") as i32;
    let token = real["broker_token"].as_str().expect("a token").to_string();
    let comm = fs::read_to_string(format!("/proc/{pid}/comm")).expect("the broker's comm");
    assert_eq!(comm.trim_end(), "tether-broker");
    let cmdline = common::procs::cmdline(pid);
    // Forked: `tether broker` written over its front end's argv (`/…/tether exec …`); an
    // exec'd broker's starts with the binary's path.
    assert!(
        cmdline.starts_with("tether broker"),
        "a fork of the front end, named as a broker: {cmdline}"
    );
    let environ = fs::read(format!("/proc/{pid}/environ")).expect("its environ");
    assert!(
        !String::from_utf8_lossy(&environ).contains(&token),
        "the token is not in its environment"
    );

    // Two forged copies of the live session, without the socket: one keeps the token.
    let session = dir.parent().expect("a session directory");
    let forge = |name: &str, token: &str| {
        let forged_session = session.with_file_name(name);
        common::copy_dir(session, &forged_session);
        let path = forged_session
            .join(dir.file_name().expect("a command directory"))
            .join("command.json");
        let mut file = real.clone();
        file["broker_token"] = serde_json::json!(token);
        if let Some(fields) = file.as_object_mut() {
            fields.remove("control_socket");
        }
        fs::write(&path, serde_json::to_vec(&file).expect("JSON")).expect("write command.json");
    };
    forge("wrong", "00112233445566778899aabbccddeeff");
    let refused = tether(&env, &["stop", "wrong"]);
    assert_eq!(refused.status.code(), Some(1), "{refused:?}");
    assert!(
        text(&refused.stderr).contains("is not the tether broker that wrote this journal"),
        "{refused:?}"
    );
    assert!(!is_gone(pid), "the broker was signalled: {refused:?}");

    forge("right", &token);
    let stopped = tether(&env, &["stop", "right"]);
    assert_eq!(stopped.status.code(), Some(0), "{stopped:?}");
    let run = running.wait(&env);
    assert_ne!(
        run.code(),
        0,
        "the command was stopped: {}",
        run.stderr_text()
    );
    assert!(load_complete(&dir).result.is_some());
    env.finish();
}

/// A command runs as its broker's user, so without more it could ptrace its broker (read its
/// memory, take its descriptors, make it journal or signal what it likes). The broker is not
/// dumpable: the command's `PTRACE_SEIZE` of its broker gets EPERM. Both run as `nobody`, as
/// root's CAP_SYS_PTRACE passes any such check. Not dumpable, the broker's `/proc/PID/fd` is
/// root's alone; its user can still stop it by its pid (no control socket in its journal),
/// proved by the lock it holds on its event log.
#[test]
fn a_command_cannot_ptrace_its_broker_which_its_user_still_stops_by_pid() {
    use std::os::unix::fs::PermissionsExt;
    const NOBODY: u32 = 65534;
    if !rustix::process::geteuid().is_root() {
        common::skip("running as another user needs root");
        return;
    }
    let env = TestEnv::new("broker_not_dumpable");
    // `nobody` passes through the test's directory to directories of its own.
    fs::set_permissions(env.dir.path(), fs::Permissions::from_mode(0o755)).expect("chmod");
    let private = |name: &str| {
        let dir = env.path(name);
        fs::create_dir(&dir).expect("mkdir");
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)).expect("chmod");
        std::os::unix::fs::chown(&dir, Some(NOBODY), Some(NOBODY)).expect("chown");
        dir
    };
    let (state, runtime) = (private("nobody-state"), private("nobody-run"));
    let as_nobody = |args: &[&std::ffi::OsStr]| {
        let mut command = Command::new("setpriv");
        command
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
            .arg(common::BIN)
            .args(args)
            .env("XDG_RUNTIME_DIR", &runtime)
            .env("XDG_CONFIG_HOME", env.path("config"))
            .env(TAG_VAR, &env.tag)
            .env_remove("TETHER_SESSION")
            .env_remove("TETHER_BROKER_ID")
            .stdin(Stdio::null());
        command
    };
    // PTRACE_SEIZE (0x4206): attaching without stopping the broker, should it succeed.
    let tracer = r#"import ctypes, os, time
libc = ctypes.CDLL(None, use_errno=True)
r = libc.ptrace(0x4206, os.getppid(), 0, 0)
print("seize:", "attached" if r == 0 else os.strerror(ctypes.get_errno()), flush=True)
time.sleep(1000)
"#;
    let os = std::ffi::OsStr::new;
    let running = env.spawn_captured(as_nobody(&[
        os("exec"),
        os("--state-dir"),
        state.as_os_str(),
        os("--name"),
        os("tracer"),
        os("--"),
        os("/usr/bin/python3"),
        os("-c"),
        os(tracer),
    ]));
    // The whole line: `tether exec` copies the output as it comes, and may write a line in
    // two pieces.
    let mut seize = String::new();
    common::wait_until(&env, "the tracer's whole line", || {
        seize = text(&fs::read(&running.stdout_path).unwrap_or_default());
        seize
            .split_once("seize:")
            .is_some_and(|(_, rest)| rest.contains('\n'))
    });

    let dir = common::journal::command_dirs(&state)
        .pop()
        .expect("the command's journal");
    let path = dir.join("command.json");
    let mut file: serde_json::Value =
        serde_json::from_slice(&fs::read(&path).expect("command.json")).expect("JSON");
    let broker = file["broker"]["pid"].as_i64().expect("the broker's pid") as i32;
    // No socket: a stop can only go by the broker's pid, proved without its /proc/PID/fd.
    if let Some(fields) = file.as_object_mut() {
        fields.remove("control_socket");
    }
    fs::write(&path, serde_json::to_vec(&file).expect("JSON")).expect("write command.json");
    let session = dir.parent().and_then(|s| s.file_name()).expect("a session");
    let stop = as_nobody(&[os("stop"), os("--state-dir"), state.as_os_str(), session]);
    let stopped = common::run_to_end(&env, stop, "tether stop");
    let run = running.wait(&env);
    assert!(
        seize.contains("seize: Operation not permitted"),
        "the command could trace its broker {broker}: {seize}"
    );
    assert_eq!(
        stopped.status.code(),
        Some(0),
        "{}{}",
        text(&stopped.stdout),
        text(&stopped.stderr)
    );
    assert_ne!(
        run.code(),
        0,
        "the command was stopped: {}",
        run.stderr_text()
    );
    assert!(is_gone(broker));
    env.finish();
}

/// Writes a forged journal in the state directory (private, as tether makes them) naming
/// `broker` as its dead broker and `victim` (pid, start ticks) as its command's group leader,
/// and links it from the socket directory `runtime` as a killed broker leaves its link.
fn forge_abandoned(
    env: &TestEnv,
    runtime: &std::path::Path,
    model: &serde_json::Value,
    name: &str,
    broker: (i32, u64),
    victim: (i32, u64),
) -> std::path::PathBuf {
    use std::os::unix::fs::DirBuilderExt;
    let dir = env.state_dir().join("sessions").join(name).join("01-sleep");
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .expect("mkdir");
    let mut file = model.clone();
    file["broker"] = serde_json::json!({ "pid": broker.0, "start_ticks": broker.1 });
    file["journal_dir"] = serde_json::json!(dir);
    if let Some(fields) = file.as_object_mut() {
        fields.remove("control_socket");
    }
    let private = |name: &str, bytes: Vec<u8>| {
        use std::os::unix::fs::OpenOptionsExt;
        let mut out = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(dir.join(name))
            .expect("create");
        std::io::Write::write_all(&mut out, &bytes).expect("write");
    };
    private("command.json", serde_json::to_vec(&file).expect("JSON"));
    let spawned = serde_json::json!({
        "ts_ms": 1, "mono_us": 0, "kind": "spawned", "pid": victim.0, "pgid": victim.0,
        "argv": ["sleep"], "start_ticks": victim.1,
    });
    private("events.jsonl", format!("{spawned}\n").into_bytes());
    std::os::unix::fs::symlink(
        &dir,
        common::socket_dir_in(runtime).join(format!("{}-{}.journal", broker.0, broker.1)),
    )
    .expect("link");
    dir
}

/// A link in the socket directory and the journal it points at are files the command itself
/// can write. Forged to name a dead broker and, as its command, a group of the user's that
/// is no broker's: `tether ps` (which takes up what killed brokers left) signals nothing.
/// The group is a command's only if the kernel says so: in the broker's session, dead with
/// its broker. Here one victim leads a group in the test's own session (the link names a
/// pid that is gone), the other in a session whose leader exited (the link names that
/// leader, a zombie, as the broker); both still run.
#[test]
fn a_forged_journal_link_gets_no_group_signalled_by_reclaim() {
    use std::os::unix::process::CommandExt;
    let env = TestEnv::new("forged_link");
    let runtime = env.runtime_dir();
    let mut model = env.exec_command(&[], &["true"]);
    model.env("XDG_RUNTIME_DIR", &runtime);
    let done = env.spawn_captured(model).wait(&env);
    assert_eq!(done.code(), 0, "{}", done.stderr_text());
    let model: serde_json::Value =
        serde_json::from_slice(&fs::read(env.wait_command_dir().join("command.json")).unwrap())
            .expect("JSON");
    let start_of = |pid: i32| {
        tether::procfs::read_stat(pid)
            .expect("its stat")
            .start_ticks
    };

    // A group leader in this test's session, and a pid that no longer runs as the broker.
    let mut own = Command::new("sleep");
    own.arg("1000").env(TAG_VAR, &env.tag).process_group(0);
    let mut own = own.spawn().expect("sleep");
    let mut gone = Command::new("true").spawn().expect("true");
    gone.wait().expect("reaped");
    let a = own.id() as i32;
    let link_a = forge_abandoned(
        &env,
        &runtime,
        &model,
        "forged-a",
        (gone.id() as i32, 1),
        (a, start_of(a)),
    );

    // A group leader in a session whose leader has exited (a zombie until reaped).
    let mut leader = Command::new("/usr/bin/python3")
        .args([
            "-c",
            "import os, subprocess; os.setsid(); \
             p = subprocess.Popen(['sleep', '1000'], process_group=0); print(p.pid, flush=True)",
        ])
        .env(TAG_VAR, &env.tag)
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3");
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(leader.stdout.take().expect("stdout")),
        &mut line,
    )
    .expect("the sleep's pid");
    let b: i32 = line.trim().parse().expect("a pid");
    let session = leader.id() as i32;
    wait_for_zombie(&env, session);
    let link_b = forge_abandoned(
        &env,
        &runtime,
        &model,
        "forged-b",
        (session, start_of(session)),
        (b, start_of(b)),
    );

    let mut ps = env.tether(&["ps"]);
    ps.env("XDG_RUNTIME_DIR", &runtime);
    let out = common::run_to_end(&env, ps, "tether ps");
    let alive = [a, b].map(|pid| !is_gone(pid));
    for pid in [a, b] {
        common::procs::signal(pid, nix::sys::signal::Signal::SIGKILL);
    }
    let _ = own.wait();
    let _ = leader.wait();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        alive,
        [true, true],
        "reclaim signalled a group that was no broker's: {} / {}",
        text(&fs::read(link_a.join("events.jsonl")).unwrap_or_default()),
        text(&fs::read(link_b.join("events.jsonl")).unwrap_or_default())
    );
    env.finish();
}

/// Waits until `pid` has exited and is not yet reaped.
fn wait_for_zombie(env: &TestEnv, pid: i32) {
    common::wait_until(env, "the session's leader to exit", || {
        tether::procfs::read_stat(pid).is_some_and(|s| s.is_zombie())
    });
}
