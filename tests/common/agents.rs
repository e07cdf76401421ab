//! The real agents (Claude Code, Codex, Gemini CLI) as test fixtures: installing the pinned
//! versions, a scripted model server per wire API (`tests/agents/*_server.py`), and the one
//! place that knows each agent's offline settings: the private home it needs and the command
//! line of its non-interactive run.
//!
//! Nothing here reaches the network but `npm install` (through `tests/agents/install.sh`, once
//! per version into `target/test-agents/`); every agent talks to a server on 127.0.0.1.

use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{TAG_VAR, TestEnv, wait_until};

/// How long one agent run may take before the test calls it hung: a run takes seconds, and
/// a loaded machine many times that, never minutes.
pub const AGENT_DEADLINE: Duration = Duration::from_secs(180);

/// The variables that would make an agent (or the shim under it) join something outside the
/// test, or reach a real service with a real key.
const CLEARED: &[&str] = &[
    "TETHER_SESSION",
    "TETHER_BROKER_ID",
    "TETHER_SESSION_OWNER",
    "TETHER_LEFTOVERS",
    "TETHER_LEFTOVERS_MAX",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_BASE_URL",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "CODEX_HOME",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "GOOGLE_GEMINI_BASE_URL",
    "CLAUDE_CODE_SHELL",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Agent {
    Claude,
    Codex,
    Gemini,
}

impl Agent {
    /// The name in `tests/agents/pins` and `install.sh`.
    pub fn name(self) -> &'static str {
        match self {
            Agent::Claude => "claude",
            Agent::Codex => "codex",
            Agent::Gemini => "gemini",
        }
    }

    /// The pinned version, from `tests/agents/pins` (the one place pins are kept).
    pub fn version(self) -> String {
        let pins = fs::read_to_string(agents_dir().join("pins")).expect("read tests/agents/pins");
        pins.lines()
            .filter(|line| !line.starts_with('#'))
            .map(|line| line.split_whitespace().collect::<Vec<_>>())
            .find(|fields| fields.first() == Some(&self.name()))
            .and_then(|fields| fields.get(2).map(|v| v.to_string()))
            .unwrap_or_else(|| panic!("no pin for {} in tests/agents/pins", self.name()))
    }

    /// The scripted model server that speaks this agent's wire API.
    fn server(self) -> &'static str {
        match self {
            Agent::Claude => "anthropic_server.py",
            Agent::Codex => "openai_server.py",
            Agent::Gemini => "gemini_server.py",
        }
    }

    /// Installs the pinned version if the shared cache lacks it (idempotent, locked against
    /// parallel tests) and returns its executable. An agent that cannot be installed fails
    /// the test: it is never skipped.
    pub fn install(self) -> PathBuf {
        let output = Command::new(agents_dir().join("install.sh"))
            .arg(self.name())
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|err| panic!("cannot run tests/agents/install.sh: {err}"));
        assert!(
            output.status.success(),
            "installing {} failed ({}): {}",
            self.name(),
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        let exe = String::from_utf8_lossy(&output.stdout).trim().to_string();
        let exe = PathBuf::from(exe);
        assert!(exe.is_file(), "install.sh named no executable: {exe:?}");
        exe
    }
}

pub fn agents_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/agents")
}

/// One call of the agent's shell tool, in the script format of `tests/agents/scripted.py`.
#[derive(Debug, Clone)]
pub struct Step {
    pub command: String,
    pub description: String,
    /// Passed on as Claude Code's `timeout` and Codex's `yield_time_ms`.
    pub timeout_ms: Option<u64>,
    /// Claude Code's `run_in_background`, Gemini CLI's `is_background`.
    pub background: bool,
}

impl Step {
    pub fn new(command: &str, description: &str) -> Step {
        Step {
            command: command.to_string(),
            description: description.to_string(),
            timeout_ms: None,
            background: false,
        }
    }

    pub fn in_background(mut self) -> Step {
        self.background = true;
        self
    }

    pub fn timeout_ms(mut self, ms: u64) -> Step {
        self.timeout_ms = Some(ms);
        self
    }
}

/// What the agent sent back to the model for one tool call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolResult {
    pub output: String,
    /// The agent's own error flag (Claude Code's `is_error`), `None` where the wire has none.
    pub error: Option<bool>,
}

/// A scripted model server, tagged like everything else the test starts, killed on drop.
pub struct ModelServer {
    child: Child,
    pub port: u16,
    pub log: PathBuf,
}

impl ModelServer {
    /// Starts the server for `agent` in `dir` with `steps` then `final_text`, and waits for
    /// its port.
    pub fn start(
        env: &TestEnv,
        agent: Agent,
        dir: &Path,
        steps: &[Step],
        final_text: &str,
    ) -> ModelServer {
        let script = json!({
            "steps": steps.iter().map(|s| {
                let mut step = json!({"command": s.command, "description": s.description});
                if let Some(ms) = s.timeout_ms {
                    step["timeout_ms"] = json!(ms);
                }
                if s.background {
                    step["background"] = json!(true);
                }
                step
            }).collect::<Vec<_>>(),
            "final": final_text,
        });
        let script_path = dir.join("model-script.json");
        fs::write(&script_path, script.to_string()).expect("write the model script");
        let log = dir.join("model-requests.jsonl");
        let port_file = dir.join("model-port");
        let child = Command::new("python3")
            .arg(agents_dir().join(agent.server()))
            .arg("--script")
            .arg(&script_path)
            .arg("--log")
            .arg(&log)
            .arg("--port-file")
            .arg(&port_file)
            .env(TAG_VAR, &env.tag)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(fs::File::create(dir.join("model-server.stderr")).expect("stderr file"))
            .spawn()
            .unwrap_or_else(|err| panic!("cannot start the model server (python3): {err}"));
        wait_until(env, "the model server's port", || {
            fs::read_to_string(&port_file).is_ok_and(|t| t.ends_with('\n'))
        });
        let port = fs::read_to_string(&port_file)
            .expect("read the port")
            .trim()
            .parse()
            .expect("a port number");
        ModelServer { child, port, log }
    }

    /// Every request the agent made, as logged (`{method, path, step, tool_results, body}`).
    pub fn requests(&self) -> Vec<Value> {
        fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|line| serde_json::from_str(line).expect("a logged request"))
            .collect()
    }

    /// The tool results of the request that carried the most of them: all that the agent
    /// sent back in its run, in order.
    pub fn tool_results(&self) -> Vec<ToolResult> {
        let requests = self.requests();
        let most = requests
            .iter()
            .filter_map(|r| r["tool_results"].as_array())
            .max_by_key(|results| results.len());
        most.map(|results| {
            results
                .iter()
                .map(|r| ToolResult {
                    output: r["output"].as_str().unwrap_or_default().to_string(),
                    error: r["error"].as_bool(),
                })
                .collect()
        })
        .unwrap_or_default()
    }
}

impl Drop for ModelServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One agent's non-interactive run, ready to start bare or under a wrapper: the program,
/// its arguments, the environment and working directory of its offline settings.
#[derive(Clone)]
pub struct AgentInvocation {
    pub agent: Agent,
    pub program: PathBuf,
    pub args: Vec<OsString>,
    pub env: Vec<(OsString, OsString)>,
    pub cwd: PathBuf,
}

impl AgentInvocation {
    /// Writes `agent`'s private home under `dir` (`dir/home`, and `dir/codex-home` for
    /// Codex), pointed at the model server on `port`, and returns its run with `prompt` from
    /// the working directory `cwd`. The offline settings of each agent are here and only here
    /// (docs/agents.md, "Offline settings", tells them to users).
    pub fn prepare(
        agent: Agent,
        program: PathBuf,
        dir: &Path,
        cwd: &Path,
        port: u16,
        prompt: &str,
    ) -> AgentInvocation {
        let home = dir.join("home");
        fs::create_dir_all(&home).expect("create the agent's home");
        // Temporary files too stay in the run's directory (Claude Code keeps a directory
        // per working directory under $TMPDIR/claude-UID and leaves it there).
        let tmp = dir.join("tmp");
        fs::create_dir_all(&tmp).expect("create the agent's TMPDIR");
        let mut env: Vec<(OsString, OsString)> = vec![
            ("HOME".into(), home.clone().into()),
            ("TMPDIR".into(), tmp.into()),
        ];
        let mut set = |key: &str, value: &str| env.push((key.into(), value.into()));
        let args: Vec<&str> = match agent {
            Agent::Claude => {
                write_json(
                    &home.join(".claude.json"),
                    &json!({"hasCompletedOnboarding": true}),
                );
                set("ANTHROPIC_BASE_URL", &format!("http://127.0.0.1:{port}"));
                set("ANTHROPIC_API_KEY", "sk-ant-test-0123456789abcdefghijklmn");
                set("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1");
                set("DISABLE_AUTOUPDATER", "1");
                set("DISABLE_TELEMETRY", "1");
                // As root, --dangerously-skip-permissions is refused outside a sandbox.
                set("IS_SANDBOX", "1");
                vec![
                    "-p",
                    prompt,
                    "--allowedTools",
                    "Bash",
                    "--dangerously-skip-permissions",
                ]
            }
            Agent::Codex => {
                let codex_home = dir.join("codex-home");
                fs::create_dir_all(&codex_home).expect("create CODEX_HOME");
                fs::write(codex_home.join("config.toml"), codex_config(port))
                    .expect("write config.toml");
                set("CODEX_HOME", &codex_home.to_string_lossy());
                set("TEST_MODEL_API_KEY", "test-key");
                vec![
                    "exec",
                    "--skip-git-repo-check",
                    "--dangerously-bypass-approvals-and-sandbox",
                    prompt,
                ]
            }
            Agent::Gemini => {
                write_json(
                    &home.join(".gemini/settings.json"),
                    &json!({
                        // Without it, -p exits 41, "Invalid auth method selected".
                        "security": {"auth": {"selectedType": "gemini-api-key"},
                                     // Else an untrusted folder drops --yolo.
                                     "folderTrust": {"enabled": false}},
                        "general": {"enableAutoUpdate": false,
                                    "enableAutoUpdateNotification": false},
                        "privacy": {"usageStatisticsEnabled": false},
                        "telemetry": {"enabled": false},
                    }),
                );
                set(
                    "GOOGLE_GEMINI_BASE_URL",
                    &format!("http://127.0.0.1:{port}"),
                );
                set("GEMINI_API_KEY", "test-key");
                vec!["-p", prompt, "--yolo"]
            }
        };
        AgentInvocation {
            agent,
            program,
            args: args.into_iter().map(OsString::from).collect(),
            env,
            cwd: cwd.to_path_buf(),
        }
    }

    /// The agent run directly, tagged, stdin from /dev/null.
    pub fn bare(&self, env: &TestEnv) -> Command {
        let mut command = Command::new(&self.program);
        command.args(&self.args);
        self.apply(env, &mut command);
        command
    }

    /// The agent as the last arguments of `wrapper` (e.g. `tether agent ... --`), with the
    /// same environment as [`AgentInvocation::bare`].
    pub fn wrapped(&self, env: &TestEnv, mut wrapper: Command) -> Command {
        wrapper.arg(&self.program).args(&self.args);
        self.apply(env, &mut wrapper);
        wrapper
    }

    fn apply(&self, env: &TestEnv, command: &mut Command) {
        for key in CLEARED {
            command.env_remove(key);
        }
        command
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .env(TAG_VAR, &env.tag)
            .current_dir(&self.cwd)
            .stdin(Stdio::null());
    }
}

/// Codex's documented route into tether (docs/agents.md): a `PreToolUse` hook, written into
/// the run's `CODEX_HOME`, that rewrites each shell command to run under `tether exec` named
/// by its absolute path (Codex's `bash -lc` reads /etc/profile, which resets PATH), through
/// `bash -c` (Codex's commands are bash). Codex runs only trusted hooks and `codex exec`
/// skips an untrusted one silently, so the run is given `--dangerously-bypass-hook-trust`;
/// the commands join `session` in `state_dir`.
pub fn with_codex_tether_hook(
    invocation: &AgentInvocation,
    tether: &Path,
    state_dir: &Path,
    session: &str,
) -> AgentInvocation {
    assert_eq!(invocation.agent, Agent::Codex, "the hook route is Codex's");
    let mut hooked = invocation.clone();
    let codex_home = invocation
        .env
        .iter()
        .find(|(k, _)| k == "CODEX_HOME")
        .map(|(_, v)| PathBuf::from(v))
        .expect("CODEX_HOME");
    let hook = codex_home.join("tether-hook.py");
    fs::write(
        &hook,
        format!(
            r#"#!/usr/bin/env python3
# Every shell command of Codex, under `tether exec`.
import json, shlex, sys
TETHER = {tether:?}
event = json.load(sys.stdin)
command = event.get("tool_input", {{}}).get("command")
if isinstance(command, str) and not command.startswith(TETHER + " "):
    rewritten = TETHER + " exec --name codex -- bash -c " + shlex.quote(command)
    print(json.dumps({{"hookSpecificOutput": {{"hookEventName": "PreToolUse",
        "permissionDecision": "allow", "updatedInput": {{"command": rewritten}}}}}}))
"#
        ),
    )
    .expect("write the hook");
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(&hook, fs::Permissions::from_mode(0o755)).expect("chmod the hook");
    write_json(
        &codex_home.join("hooks.json"),
        &json!({"hooks": {"PreToolUse": [{"matcher": "Bash",
            "hooks": [{"type": "command", "command": hook}]}]}}),
    );
    let config = codex_home.join("config.toml");
    let mut text = fs::read_to_string(&config).expect("read config.toml");
    // `[features]` is the file's last table.
    text.push_str("hooks = true\n");
    fs::write(&config, text).expect("write config.toml");
    let prompt = hooked.args.pop().expect("the prompt");
    hooked.args.push("--dangerously-bypass-hook-trust".into());
    hooked.args.push(prompt);
    hooked.env.push(("TETHER_SESSION".into(), session.into()));
    hooked
        .env
        .push(("TETHER_STATE_DIR".into(), state_dir.into()));
    hooked
}

/// Codex's `config.toml`: the scripted server as its only provider, and no look-up outside.
fn codex_config(port: u16) -> String {
    format!(
        r#"model = "gpt-test"
model_provider = "mock"
check_for_update_on_startup = false

[model_providers.mock]
name = "scripted"
base_url = "http://127.0.0.1:{port}/v1"
env_key = "TEST_MODEL_API_KEY"
wire_api = "responses"

[analytics]
enabled = false

[features]
apps = false
plugins = false
remote_plugin = false
api_key_model_discovery = false
"#
    )
}

fn write_json(path: &Path, value: &Value) {
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).expect("create a config directory");
    }
    fs::write(path, serde_json::to_vec_pretty(value).expect("json")).expect("write a config");
}

/// A child run to its end within [`AGENT_DEADLINE`]; past it, kills it and fails.
pub fn wait_agent(env: &TestEnv, child: &mut Child, what: &str) -> std::process::ExitStatus {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("wait for the agent") {
            return status;
        }
        if started.elapsed() > AGENT_DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            let killed = super::procs::kill_tagged(&env.tag);
            panic!("{what} did not end within {AGENT_DEADLINE:?}; killed {killed:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A TCP port nobody listens on now (bound and released), for a server a script starts.
pub fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a port");
    listener.local_addr().expect("its address").port()
}

/// Waits until `path` holds a whole line with a pid and returns it, while `child` (the agent
/// that is to write it through one of its commands) runs; fails if the agent ends first.
pub fn pid_written_by(env: &TestEnv, child: &mut Child, path: &Path) -> i32 {
    let started = Instant::now();
    loop {
        if let Ok(text) = fs::read_to_string(path)
            && text.ends_with('\n')
        {
            return text.trim().parse().expect("a pid");
        }
        if let Some(status) = child.try_wait().expect("wait for the agent") {
            panic!(
                "the agent ended ({status}) before writing {}",
                path.display()
            );
        }
        if started.elapsed() > AGENT_DEADLINE {
            let killed = super::procs::kill_tagged(&env.tag);
            panic!(
                "no pid in {} within {AGENT_DEADLINE:?}; killed {killed:?}",
                path.display()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
