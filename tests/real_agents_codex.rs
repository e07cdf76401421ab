//! The real Codex (npm `@openai/codex`, pinned), driven offline by the scripted Responses-API
//! server `tests/agents/openai_server.py`: the same script of tool calls run once bare and
//! once under `tether agent -- codex`. Under tether every command is one journaled command
//! of the agent's session with its text and exit status, and what Codex sends back to the
//! model (each tool result) is what it sent back bare. The documented hook route (a
//! `hooks.json` of the user's own) is run too.
//!
//! Needs `npm` and the npm registry (the first run installs Codex into
//! `target/test-agents/`), and `python3`: without them these tests fail, they do not skip.

use crate::common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Instant;

use common::agents::Agent;
use common::agents::model_server::{ModelServer, Step};
use common::agents::offline::{CODEX_KEY_VAR, codex_config};
use common::journal::{command_dirs, load_complete};
use common::procs::is_gone;
use common::{TAG_VAR, TestEnv, wait_until};
use tether::config::naming::command_text;

/// Codex, installed once (per build directory): its `codex`.
fn codex_binary() -> &'static Path {
    static INSTALLED: OnceLock<PathBuf> = OnceLock::new();
    // The pinned version, by the one installer the real-agent tests share
    // (tests/agents/install.sh, under flock).
    INSTALLED.get_or_init(|| Agent::Codex.install())
}

/// The shared scripted Responses API (`tests/agents/openai_server.py`, see
/// `common::agents::model_server`), for a run named `name`, answering `steps` then `final`.
fn model_server(env: &TestEnv, name: &str, steps: &[Step], final_text: &str) -> ModelServer {
    let dir = env.path(&format!("{name}-model"));
    fs::create_dir_all(&dir).unwrap();
    ModelServer::start(env, Agent::Codex, &dir, steps, final_text)
}

/// A private Codex home pointed at `server`, with every look-up outside turned off (the
/// settings every real-agent test uses: `common::agents::offline`).
fn codex_home(env: &TestEnv, name: &str, server: &ModelServer) -> PathBuf {
    let home = env.path(&format!("{name}-home"));
    let codex_home = home.join(".codex");
    fs::create_dir_all(&codex_home).unwrap();
    fs::write(codex_home.join("config.toml"), codex_config(server.port)).unwrap();
    home
}

/// A working directory for one run, with the helper scripts the tool calls run.
fn work_dir(env: &TestEnv, name: &str) -> PathBuf {
    let work = env.path(&format!("{name}-work"));
    fs::create_dir_all(&work).unwrap();
    // A server that says nothing (so its tool result does not depend on timing) and writes
    // its port and pid once it listens.
    fs::write(
        work.join("server.py"),
        r#"import http.server, os
class Pong(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"pong\n")
    def log_message(self, *args):
        pass
server = http.server.HTTPServer(("127.0.0.1", 0), Pong)
with open("server.tmp", "w") as f:
    f.write("%d %d\n" % (server.server_port, os.getpid()))
os.rename("server.tmp", "server.port")
server.serve_forever()
"#,
    )
    .unwrap();
    fs::write(
        work.join("fetch.py"),
        r#"import os, time, urllib.request
deadline = time.time() + 30
while not os.path.exists("server.port") and time.time() < deadline:
    time.sleep(0.02)
port = open("server.port").read().split()[0]
print(urllib.request.urlopen("http://127.0.0.1:%s/" % port).read().decode(), end="")
"#,
    )
    .unwrap();
    work
}

/// The script: short commands (one fails with exit 3, one is not found: the shell's message
/// begins with its `$0`), one in a shell the model names, a server Codex keeps running as a
/// session of its own (the tool call returns while it runs), and a later request to it.
fn script() -> Vec<Step> {
    vec![
        Step::new("echo one; echo two", "two lines"),
        Step::new("echo failing >&2; exit 3", "a failure"),
        Step::new("no-such-command-here", "not found"),
        Step::new("echo \"$0\"", "a shell the model names").shell("sh"),
        // Still running when the call returns after a second: Codex keeps it as a session.
        Step::new("exec python3 server.py", "a server").timeout_ms(1000),
        Step::new("python3 fetch.py", "a request to it"),
    ]
}

/// Each command's text and exit code (`None`: ended by a signal, when Codex exited).
const COMMANDS: [(&str, Option<i32>); 6] = [
    ("echo one; echo two", Some(0)),
    ("echo failing >&2; exit 3", Some(3)),
    ("no-such-command-here", Some(127)),
    ("echo \"$0\"", Some(0)),
    ("exec python3 server.py", None),
    ("python3 fetch.py", Some(0)),
];

/// No approvals, no sandbox: the agents-offline setting.
const UNSANDBOXED: &[&str] = &["--dangerously-bypass-approvals-and-sandbox"];

/// `codex exec FLAGS` from `work`, with `home` as HOME.
fn codex_exec(
    mut command: Command,
    env: &TestEnv,
    home: &Path,
    work: &Path,
    flags: &[&str],
) -> Command {
    command
        .arg("exec")
        .args(flags)
        .args(["--skip-git-repo-check", "run the script"])
        .current_dir(work)
        .env("HOME", home)
        .env("CODEX_HOME", home.join(".codex"))
        .env(CODEX_KEY_VAR, "not-a-key")
        .env(TAG_VAR, &env.tag)
        .env_remove("TETHER_SESSION")
        .env_remove("TETHER_LEFTOVERS")
        .env_remove("TETHER_SESSION_OWNER")
        .stdin(Stdio::null());
    command
}

/// Runs `command` to its end within the deadline; its exit code and stderr.
fn run(env: &TestEnv, command: Command) -> (i32, String) {
    let run = env.spawn_captured(command).wait(env);
    (run.code(), run.stderr_text())
}

/// A tool result without what differs from run to run: the chunk id, the wall time and the
/// number of a session still running.
fn normalized(output: &str) -> String {
    let chunk = regex::Regex::new(r"Chunk ID: \w+").unwrap();
    let wall = regex::Regex::new(r"Wall time: [0-9.]+ seconds").unwrap();
    let session = regex::Regex::new(r"session ID \d+").unwrap();
    let output = chunk.replace_all(output, "Chunk ID: X");
    let output = wall.replace_all(&output, "Wall time: X");
    session.replace_all(&output, "session ID N").into_owned()
}

/// What Codex sent back for each call, in order, with what differs between runs masked.
fn normalized_results(server: &ModelServer) -> Vec<(String, String)> {
    server
        .tool_results()
        .into_iter()
        .enumerate()
        .map(|(i, result)| (format!("call_{}", i + 1), normalized(&result.output)))
        .collect()
}

/// The server's pid, as it wrote it.
fn server_pid(work: &Path) -> i32 {
    let text = fs::read_to_string(work.join("server.port")).expect("the server never listened");
    text.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn codex_under_tether_agent_has_every_command_brokered_and_sends_back_what_it_sends_bare() {
    let env = TestEnv::new("real_codex");
    let codex = codex_binary();

    let bare_server = model_server(&env, "bare", &script(), "all done");
    let home = codex_home(&env, "bare", &bare_server);
    let work = work_dir(&env, "bare");
    let started = Instant::now();
    let (code, stderr) = run(
        &env,
        codex_exec(Command::new(codex), &env, &home, &work, UNSANDBOXED),
    );
    let bare_time = started.elapsed();
    assert_eq!(code, 0, "bare codex: {stderr}");
    let bare = normalized_results(&bare_server);
    // Codex ends what a command left running when it exits (the server's process group).
    let pid = server_pid(&work);
    wait_until(&env, "the bare run's server to be gone", || is_gone(pid));
    assert!(
        command_dirs(&env.state_dir()).is_empty(),
        "bare Codex journaled something"
    );

    let server = model_server(&env, "tether", &script(), "all done");
    let home = codex_home(&env, "tether", &server);
    let work = work_dir(&env, "tether");
    let mut agent = env.tether(&["agent", "--session", "codex", "--"]);
    agent.arg(codex);
    let started = Instant::now();
    let (code, stderr) = run(&env, codex_exec(agent, &env, &home, &work, UNSANDBOXED));
    let tether_time = started.elapsed();
    assert_eq!(code, 0, "codex under tether: {stderr}");
    eprintln!("wall time: bare {bare_time:?}, under tether {tether_time:?}");
    eprintln!("tool results, bare and under tether:\n{bare:#?}");

    // What Codex told the model, call by call, is what it told it bare: the not-found
    // message begins with the same `$0`, the named shell's `$0` is the same.
    let under_tether = normalized_results(&server);
    assert_eq!(under_tether, bare);
    assert!(
        bare[2]
            .1
            .ends_with(": no-such-command-here: command not found\n"),
        "{bare:?}"
    );
    let expected_starts = [
        "Process exited with code 0\nOriginal token count: 2\nOutput:\none\ntwo\n",
        "Process exited with code 3\nOriginal token count: 2\nOutput:\nfailing\n",
        "Process exited with code 127\n",
        "Process exited with code 0\n",
        "Process running with session ID N\n",
        "Process exited with code 0\nOriginal token count: 2\nOutput:\npong\n",
    ];
    assert_eq!(bare.len(), expected_starts.len(), "{bare:#?}");
    for ((id, output), (n, wanted)) in bare.iter().zip(expected_starts.iter().enumerate()) {
        assert_eq!(id, &format!("call_{}", n + 1));
        assert!(
            output.starts_with("Chunk ID: X\nWall time: X\n")
                && output["Chunk ID: X\nWall time: X\n".len()..].starts_with(wanted),
            "call {}: {output:?}",
            n + 1
        );
    }

    // Every tool call is one journaled command of the agent's session, with its text and
    // its exit status; the server ended with the agent.
    let pid = server_pid(&work);
    wait_until(&env, "the server to be gone", || is_gone(pid));
    let session: Vec<PathBuf> = command_dirs(&env.state_dir())
        .into_iter()
        .filter(|dir| dir.parent().and_then(Path::file_name) == Some("codex".as_ref()))
        .collect();
    assert_eq!(session.len(), 1 + COMMANDS.len(), "{session:?}");
    wait_until(&env, "every command's result.json", || {
        session.iter().all(|dir| dir.join("result.json").exists())
    });
    for (dir, (text, code)) in session[1..].iter().zip(COMMANDS) {
        let record = load_complete(dir);
        let command = &record.request.as_ref().unwrap().command;
        assert_eq!(command_text(command), text, "{}", dir.display());
        assert_eq!(command.argv()[1..3], ["-c", text]);
        if code.is_none() {
            // Codex ended it as it exited, with a SIGKILL to the group it started the shim
            // in: its caller's stop, which reads as one, not as a failure (`parent lost`).
            let command = tether::model::replay::command_so_far(&record);
            assert_eq!(command.state_words(), "stopped (SIGTERM)", "{text}");
            let badges = tether::model::badges::Badges::of(&command);
            assert!(!badges.parent_lost, "{text}: {badges:?}");
        }
        let exit = record.result.and_then(|r| r.exit).unwrap();
        assert_eq!(exit.code, code, "{text}: {exit:?}");
    }
    drop(bare_server);
    drop(server);
    env.finish();
}

/// The route docs/agents.md gives for Codex without `tether agent`: the shims made once, a
/// plain-JSON `hooks.json` naming tether and the shims by absolute path, and the hook trusted
/// (here for one `codex exec` with `--dangerously-bypass-hook-trust`; the TUI's `/hooks`
/// trusts it for good).
#[test]
fn the_documented_hook_route_brokers_codex_exec() {
    let env = TestEnv::new("real_codex_hook");
    let codex = codex_binary();
    let shims = env.path("shims");
    let made = env.tether(&["shims"]).arg(&shims).output().unwrap();
    assert!(made.status.success(), "{made:?}");

    let script = [
        Step::new("echo one; echo two", "two lines"),
        Step::new("echo failing >&2; exit 3", "a failure"),
    ];
    let server = model_server(&env, "hook", &script, "all done");
    let home = codex_home(&env, "hook", &server);
    let hook = format!("'{}' codex-hook --shims '{}'", common::BIN, shims.display());
    let hooks = serde_json::json!({"hooks": {"PreToolUse": [
        {"matcher": "^Bash$", "hooks": [{"type": "command", "command": hook}]}
    ]}});
    fs::write(home.join(".codex/hooks.json"), hooks.to_string()).unwrap();
    let work = work_dir(&env, "hook");
    let mut codex = codex_exec(Command::new(codex), &env, &home, &work, UNSANDBOXED);
    codex
        .arg("--dangerously-bypass-hook-trust")
        .env("TETHER_SESSION", "manual")
        .env("TETHER_STATE_DIR", env.state_dir());
    let (code, stderr) = run(&env, codex);
    assert_eq!(code, 0, "{stderr}");

    let results = normalized_results(&server);
    assert_eq!(
        results,
        [
            (
                "call_1".to_string(),
                "Chunk ID: X\nWall time: X\nProcess exited with code 0\nOriginal token count: 2\nOutput:\none\ntwo\n".to_string()
            ),
            (
                "call_2".to_string(),
                "Chunk ID: X\nWall time: X\nProcess exited with code 3\nOriginal token count: 2\nOutput:\nfailing\n".to_string()
            ),
        ]
    );
    let session = command_dirs(&env.state_dir());
    assert_eq!(session.len(), 2, "{session:?}");
    for (dir, (text, code)) in session
        .iter()
        .zip([("echo one; echo two", 0), ("echo failing >&2; exit 3", 3)])
    {
        assert_eq!(
            dir.parent().and_then(Path::file_name),
            Some("manual".as_ref())
        );
        let record = load_complete(dir);
        assert_eq!(
            command_text(&record.request.as_ref().unwrap().command),
            text
        );
        assert_eq!(
            record.result.and_then(|r| r.exit).and_then(|e| e.code),
            Some(code)
        );
    }
    drop(server);
    env.finish();
}

/// In Codex's own sandbox (`workspace-write`, here without /tmp, where the test's state
/// directory is), a command's broker is forked inside the sandbox: it journals because
/// `tether agent` makes the session's directory writable there (`--add-dir`), and nothing
/// of tether's reaches the tool result.
#[test]
fn a_sandboxed_codex_command_is_journaled() {
    let env = TestEnv::new("real_codex_sandbox");
    let codex = codex_binary();
    let outside = env.path("outside-the-sandbox");
    let touch = format!(
        "echo sandboxed; touch '{}' 2>/dev/null || echo read-only",
        outside.display()
    );
    let server = model_server(
        &env,
        "sandbox",
        &[Step::new(&touch, "write outside")],
        "all done",
    );
    let home = codex_home(&env, "sandbox", &server);
    let work = work_dir(&env, "sandbox");
    let mut agent = env.tether(&["agent", "--session", "codex", "--"]);
    agent.arg(codex);
    let sandboxed = [
        "-s",
        "workspace-write",
        "-c",
        "sandbox_workspace_write.exclude_slash_tmp=true",
        "-c",
        "sandbox_workspace_write.exclude_tmpdir_env_var=true",
    ];
    let (code, stderr) = run(&env, codex_exec(agent, &env, &home, &work, &sandboxed));
    assert_eq!(code, 0, "{stderr}");
    assert!(!outside.exists(), "the command wrote outside the sandbox");
    assert_eq!(
        normalized_results(&server),
        [(
            "call_1".to_string(),
            "Chunk ID: X\nWall time: X\nProcess exited with code 0\nOriginal token count: 5\nOutput:\nsandboxed\nread-only\n".to_string()
        )]
    );
    let session = command_dirs(&env.state_dir());
    assert_eq!(session.len(), 2, "{session:?}");
    let record = load_complete(&session[1]);
    assert_eq!(
        record.result.and_then(|r| r.exit).and_then(|e| e.code),
        Some(0)
    );
    drop(server);
    env.finish();
}

/// In Codex's read-only sandbox (`codex exec`'s default), where nothing a command runs can
/// write a journal, the command runs as it does without tether: its tool result is the bare
/// run's, with no line of tether's, and only the agent is journaled.
#[test]
fn a_read_only_codex_command_runs_as_bare() {
    let env = TestEnv::new("real_codex_read_only");
    let codex = codex_binary();
    // Both lines on stderr: Codex interleaves a command's two streams in no fixed order,
    // bare too.
    let script = [Step::new("echo \"$0\" >&2; echo hi > written.txt", "write")];
    let read_only: &[&str] = &["-s", "read-only"];

    let bare_server = model_server(&env, "bare", &script, "all done");
    let home = codex_home(&env, "bare", &bare_server);
    let work = work_dir(&env, "bare");
    let (code, stderr) = run(
        &env,
        codex_exec(Command::new(codex), &env, &home, &work, read_only),
    );
    assert_eq!(code, 0, "{stderr}");
    let bare = normalized_results(&bare_server);
    assert!(
        bare[0].1.contains("Read-only file system"),
        "not sandboxed: {bare:?}"
    );

    let server = model_server(&env, "tether", &script, "all done");
    let home = codex_home(&env, "tether", &server);
    let work = work_dir(&env, "tether");
    let mut agent = env.tether(&["agent", "--session", "codex", "--"]);
    agent.arg(codex);
    let (code, stderr) = run(&env, codex_exec(agent, &env, &home, &work, read_only));
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(normalized_results(&server), bare);
    let session = command_dirs(&env.state_dir());
    assert_eq!(session.len(), 1, "{session:?}");
    drop(bare_server);
    drop(server);
    env.finish();
}

/// A command in Codex's own workspace-write sandbox (`codex sandbox`: a PID namespace of its
/// own, a read-only `/tmp`, a seccomp filter that denies `sendto`) is listed from outside
/// with its pids here and stopped by `tether stop` through its broker's pid. The broker
/// heard no signal there while tokio's handler woke it with a `send` on a socket pair:
/// the stop waited its 12 s and the command ran on.
#[test]
fn a_command_in_codexs_sandbox_is_listed_and_stopped_from_outside() {
    let env = TestEnv::new("codex_sandbox_stop");
    let home = env.path("codex-home");
    fs::create_dir_all(&home).unwrap();
    // `tether exec --name NAME -- sleep 300` in Codex's sandbox.
    let sandboxed = |name: &str| {
        let mut command = Command::new(codex_binary());
        // As Codex's interactive sandbox has it: /tmp and $TMPDIR read-only (no control
        // socket, whose directory is under /tmp without a runtime directory).
        command
            .args(["sandbox", "-c", "sandbox_mode=\"workspace-write\""])
            .args(["-c", "sandbox_workspace_write.exclude_slash_tmp=true"])
            .args([
                "-c",
                "sandbox_workspace_write.exclude_tmpdir_env_var=true",
                "--",
            ])
            .arg(common::BIN)
            .arg("exec")
            .arg("--state-dir")
            .arg(env.state_dir())
            .args(["--session", "sbx", "--name", name, "--", "sleep", "300"])
            .current_dir(env.dir.path())
            .env("CODEX_HOME", &home)
            .env(TAG_VAR, &env.tag)
            .env_remove("XDG_RUNTIME_DIR")
            .stdin(Stdio::null());
        env.spawn_captured(command)
    };
    let running = sandboxed("sleeper");
    let dir = env.wait_command_dir();
    wait_until(&env, "the sleep spawned in the sandbox", || {
        common::journal::events_now(&dir)
            .iter()
            .any(|e| matches!(e.kind, tether::protocol::EventKind::Spawned { .. }))
    });
    let tether = |args: &[&str]| {
        let mut command = env.tether(args);
        command.env(TAG_VAR, &env.tag);
        common::run_to_end(&env, command, &format!("tether {args:?}"))
    };
    let listed = tether(&["ps", "--json"]);
    let rows: serde_json::Value = serde_json::from_slice(&listed.stdout).expect("JSON");
    assert_eq!(rows[0]["state"], "running", "{rows}");
    let broker = rows[0]["broker_pid"]
        .as_i64()
        .expect("its broker's pid here");
    assert!(!is_gone(broker as i32), "{rows}");
    let stopped = tether(&["stop", "sbx/01"]);
    assert_eq!(stopped.status.code(), Some(0), "{stopped:?}");
    let said = String::from_utf8_lossy(&stopped.stdout);
    assert!(said.contains("stopped through its broker's pid"), "{said}");
    assert!(
        said.contains("the command ended: stopped (SIGTERM)"),
        "{said}"
    );
    let run = running.wait(&env);
    assert_eq!(run.code(), 143, "{}", run.stderr_text());
    // Its broker ended too: the sandbox's processes are not all found by their tag here.
    wait_until(&env, "the sandboxed broker gone", || is_gone(broker as i32));

    // The front end in the sandbox hears its caller's signals: a TERM to `tether exec`
    // there (as the agent's interrupt sends its call's group) stops the command at once.
    // It heard none while tokio's handler woke it with a `send`.
    let running = sandboxed("second");
    let mut exec = None;
    let mut sandbox = Vec::new();
    wait_until(
        &env,
        "tether exec and its sleep running in the sandbox",
        || {
            let all = tether::procfs::all_processes();
            let below = tether::procfs::descendants_in(&all, running.pid());
            let named = |p: &tether::procfs::ProcStat, name: &[u8]| {
                p.image.comm.split(|&b| b == 0).next() == Some(name)
            };
            // It names itself so while its command runs.
            let call = tether_protocol::names::CALL_COMM.to_bytes();
            exec = below.iter().find(|p| named(p, call)).map(|p| p.pid);
            sandbox = below.iter().map(|p| p.pid).collect();
            exec.is_some() && below.iter().any(|p| named(p, b"sleep"))
        },
    );
    let exec = exec.expect("tether exec");
    common::procs::signal(exec, nix::sys::signal::Signal::SIGTERM);
    let run = running.wait(&env);
    assert_eq!(run.code(), 143, "{}", run.stderr_text());
    // Everything the sandbox ran (its broker and the sleep among them) ended with it.
    wait_until(&env, "the sandbox's processes gone", || {
        sandbox.iter().all(|&pid| is_gone(pid))
    });
    env.finish();
}
