//! Each agent's offline settings, in one place: the private home (and `CODEX_HOME`) it needs,
//! its environment and the command line of its non-interactive run; and Codex's documented
//! hook into tether.

use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use super::Agent;
use crate::common::{TAG_VAR, TestEnv};

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

/// How the agent runs: its print mode (`-p`, no terminal), or its interactive mode in a
/// terminal, given the prompt to start with (Gemini CLI's `-i`: only there does it run its
/// commands in a pseudo-terminal).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interaction {
    Print,
    Terminal,
}

/// One agent's run, ready to start bare or under a wrapper: the program,
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
    /// (docs/agents.md, "Offline settings the tests use", tells them to users).
    pub fn prepare(
        agent: Agent,
        program: PathBuf,
        dir: &Path,
        cwd: &Path,
        port: u16,
        prompt: &str,
        interaction: Interaction,
    ) -> AgentInvocation {
        assert!(
            interaction == Interaction::Print || agent != Agent::Codex,
            "Codex's interactive run is not prepared here"
        );
        let home = dir.join("home");
        fs::create_dir_all(&home).expect("create the agent's home");
        // Temporary files too stay in the run's directory (Claude Code keeps a directory
        // per working directory under $TMPDIR/claude-UID and leaves it there).
        let tmp = dir.join("tmp");
        fs::create_dir_all(&tmp).expect("create the agent's TMPDIR");
        let mut env: Vec<(OsString, OsString)> = vec![
            ("HOME".into(), home.clone().into()),
            ("TMPDIR".into(), tmp.into()),
            // The user's shell, which Claude Code runs (without one it looks for zsh first):
            // the same bash for every run, whatever the runner's.
            ("SHELL".into(), "/bin/bash".into()),
        ];
        let mut set = |key: &str, value: &str| env.push((key.into(), value.into()));
        let args: Vec<&str> = match agent {
            Agent::Claude => {
                // Interactive, it asks for a theme, whether to trust the folder and whether
                // to use the key, unless these say it was answered.
                let approved = &CLAUDE_KEY[CLAUDE_KEY.len() - 20..];
                let mut projects = serde_json::Map::new();
                projects.insert(
                    cwd.to_string_lossy().into_owned(),
                    json!({"hasTrustDialogAccepted": true}),
                );
                write_json(
                    &home.join(".claude.json"),
                    &json!({"hasCompletedOnboarding": true, "theme": "dark",
                            "projects": projects,
                            "customApiKeyResponses": {"approved": [approved], "rejected": []}}),
                );
                // Interactive, `--dangerously-skip-permissions` asks to be accepted first,
                // unless the user's settings say it was.
                write_json(
                    &home.join(".claude/settings.json"),
                    &json!({"skipDangerousModePermissionPrompt": true}),
                );
                set("ANTHROPIC_BASE_URL", &format!("http://127.0.0.1:{port}"));
                set("ANTHROPIC_API_KEY", CLAUDE_KEY);
                set("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1");
                set("DISABLE_AUTOUPDATER", "1");
                set("DISABLE_TELEMETRY", "1");
                // As root, --dangerously-skip-permissions is refused outside a sandbox.
                set("IS_SANDBOX", "1");
                match interaction {
                    Interaction::Print => vec![
                        "-p",
                        prompt,
                        "--allowedTools",
                        "Bash",
                        "--dangerously-skip-permissions",
                    ],
                    // The prompt as its argument: submitted at start.
                    Interaction::Terminal => vec![prompt, "--dangerously-skip-permissions"],
                }
            }
            Agent::Codex => {
                let codex_home = dir.join("codex-home");
                fs::create_dir_all(&codex_home).expect("create CODEX_HOME");
                fs::write(codex_home.join("config.toml"), codex_config(port))
                    .expect("write config.toml");
                set("CODEX_HOME", &codex_home.to_string_lossy());
                set(CODEX_KEY_VAR, "test-key");
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
                match interaction {
                    Interaction::Print => vec!["-p", prompt, "--yolo"],
                    Interaction::Terminal => vec!["-i", prompt, "--yolo"],
                }
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

/// Codex's documented route into tether by hand (docs/agents.md, "Codex by hand"): the shims
/// made once, and a plain-JSON `hooks.json` in the run's `CODEX_HOME` whose `PreToolUse` hook
/// runs `tether codex-hook` named by its absolute path (Codex's `bash -lc` reads /etc/profile,
/// which resets PATH), turning each command into the shim of the shell Codex started. Codex
/// runs only trusted hooks and `codex exec` skips an untrusted one silently, so the run is
/// given `--dangerously-bypass-hook-trust`; the commands join `session` in `state_dir`.
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
    let shims = codex_home.join("tether-shims");
    let made = std::process::Command::new(tether)
        .arg("shims")
        .arg(&shims)
        .output()
        .expect("run tether shims");
    assert!(made.status.success(), "tether shims: {made:?}");
    let quoted = |path: &Path| format!("'{}'", path.display().to_string().replace('\'', "'\\''"));
    write_json(
        &codex_home.join("hooks.json"),
        &json!({"hooks": {"PreToolUse": [{"matcher": "^Bash$",
        "hooks": [{"type": "command", "command": format!(
            "{} codex-hook --shims {} --journal {}",
            quoted(tether), quoted(&shims), quoted(state_dir)
        )}]}]}}),
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

/// The key Claude Code is given (any key does; interactive, its last 20 characters are marked
/// approved).
const CLAUDE_KEY: &str = "sk-ant-test-0123456789abcdefghijklmn";

/// The variable Codex's mock provider reads its key from (any value does).
pub const CODEX_KEY_VAR: &str = "TEST_MODEL_API_KEY";

/// Codex's `config.toml`: the scripted server as its only provider, and no look-up outside.
pub fn codex_config(port: u16) -> String {
    format!(
        r#"model = "gpt-test"
model_provider = "mock"
check_for_update_on_startup = false

[model_providers.mock]
name = "scripted"
base_url = "http://127.0.0.1:{port}/v1"
env_key = "{CODEX_KEY_VAR}"
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
