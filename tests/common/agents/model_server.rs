//! A scripted model server (`tests/agents/*_server.py`) run for one agent, and what the agent
//! sent back to it.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};

use super::{Agent, agents_dir};
use crate::common::{TAG_VAR, TestEnv, wait_until};

/// One call of the agent's shell tool, in the script format of `tests/agents/scripted.py`.
#[derive(Debug, Clone)]
pub struct Step {
    pub command: String,
    pub description: String,
    /// Passed on as Claude Code's `timeout` and Codex's `yield_time_ms`.
    pub timeout_ms: Option<u64>,
    /// Claude Code's `run_in_background`, Gemini CLI's `is_background`.
    pub background: bool,
    /// The shell Codex is asked to run it in (`exec_command`'s `shell`).
    pub shell: Option<String>,
}

impl Step {
    pub fn new(command: &str, description: &str) -> Step {
        Step {
            command: command.to_string(),
            description: description.to_string(),
            timeout_ms: None,
            background: false,
            shell: None,
        }
    }

    /// Codex's `exec_command` with a `shell` the model names.
    pub fn shell(mut self, shell: &str) -> Step {
        self.shell = Some(shell.to_string());
        self
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
        ModelServer::start_slow(env, agent, dir, steps, final_text, 0)
    }

    /// [`ModelServer::start`] with the final text sent `final_delay_ms` after its request
    /// (Claude Code's wire only).
    pub fn start_slow(
        env: &TestEnv,
        agent: Agent,
        dir: &Path,
        steps: &[Step],
        final_text: &str,
        final_delay_ms: u64,
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
                if let Some(shell) = &s.shell {
                    step["shell"] = json!(shell);
                }
                step
            }).collect::<Vec<_>>(),
            "final": final_text,
            "final_delay_ms": final_delay_ms,
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
    /// A last line the server is still writing (no newline yet) is not one yet.
    pub fn requests(&self) -> Vec<Value> {
        let text = fs::read_to_string(&self.log).unwrap_or_default();
        let whole = text.rfind('\n').map_or("", |end| &text[..end]);
        whole
            .lines()
            .map(|line| serde_json::from_str(line).expect("a logged request"))
            .collect()
    }

    /// True once the server has answered the agent's main loop with the final text.
    pub fn answered_final(&self) -> bool {
        self.requests().iter().any(|r| r["step"] == "final")
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
