//! Claude Code under `tether agent`: its own word that it waits for its human. Claude Code
//! runs a `Notification` hook when it asks permission for a tool (`permission_prompt`), has
//! sat idle at its prompt (`idle_prompt`, after a minute) or asks a question of an MCP
//! server's (`elicitation_dialog`). `tether agent -- claude ARGS` starts `claude --settings
//! JSON ARGS`, the JSON holding that one hook, for this run only (nothing is written to the
//! user's settings; settings given with `--settings` join the user's, hooks included). The
//! hook runs `tether agent-hook`, which tells the agent's broker over its control socket; the
//! broker raises `needs_input`, "waiting for you: MESSAGE", cleared as the kernel's look at
//! the agent is (output, typing, a command).
//!
//! The hook finds its broker by the session's owner, `TETHER_SESSION_OWNER` (`PID:TICKS` of
//! the agent, which Claude Code passes on to its hooks): the live command of the session
//! whose process that is. The broker takes the word only from a process of its own tree
//! (see `broker::state::attention`).

use std::io::Read;
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::config::naming::shell_quoted;
use crate::control::client::ControlClient;
use crate::control::discover;
use crate::exec::SESSION_OWNER_ENV;
use crate::journal::{SESSION_ENV, state_dir};
use crate::protocol::{EventKind, Request};

/// The subcommand Claude Code runs as its hook.
pub const HOOK_SUBCOMMAND: &str = "agent-hook";

/// The notifications that mean "your turn" (not `auth_success`, nor an elicitation's end).
const MATCHER: &str = "^(permission_prompt|idle_prompt|elicitation_dialog)$";

/// How much of the hook's input is read: a notification is a few hundred bytes.
const INPUT_CAP: u64 = 64 * 1024;

/// How long the hook waits for the broker's answer: it must never hold Claude Code up.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(3);

/// Whether `program` is Claude Code (`claude`, by its file name).
pub fn is_claude(program: &str) -> bool {
    Path::new(program)
        .file_name()
        .is_some_and(|name| name == "claude")
}

/// `--settings JSON`: the `Notification` hook that runs `EXE agent-hook`.
pub fn settings_args(exe: &Path) -> Vec<String> {
    let command = format!("{} {HOOK_SUBCOMMAND}", shell_quoted(&exe.to_string_lossy()));
    let settings = json!({"hooks": {"Notification": [{
        "matcher": MATCHER,
        "hooks": [{"type": "command", "command": command, "timeout": 10}],
    }]}});
    vec!["--settings".to_string(), settings.to_string()]
}

/// `tether agent-hook`: reads Claude Code's notification on stdin and tells the agent's
/// broker. Always exits 0 (a hook that fails would be shown to the user by Claude Code);
/// what went wrong is one line on stderr.
pub fn hook_main() -> i32 {
    let mut input = Vec::new();
    let _ = std::io::stdin().take(INPUT_CAP).read_to_end(&mut input);
    let what = what_it_waits_for(&input);
    if let Err(message) = tell_broker(&what) {
        eprintln!("tether agent-hook: {message}");
    }
    0
}

/// The notification's message (`Claude needs your permission to use Bash`), else its type.
pub fn what_it_waits_for(input: &[u8]) -> String {
    let value: Value = serde_json::from_slice(input).unwrap_or(Value::Null);
    let text = |key: &str| value.get(key).and_then(Value::as_str).map(str::to_string);
    text("message")
        .or_else(|| text("notification_type"))
        .unwrap_or_else(|| "its own notification".to_string())
}

fn tell_broker(what: &str) -> Result<(), String> {
    let owner = std::env::var(SESSION_OWNER_ENV)
        .map_err(|_| format!("no {SESSION_OWNER_ENV}: not run by an agent under `tether agent`"))?;
    let owner_pid: i32 = owner
        .split(':')
        .next()
        .and_then(|pid| pid.parse().ok())
        .ok_or_else(|| format!("{SESSION_OWNER_ENV} is not PID:TICKS: {owner}"))?;
    let session = std::env::var(SESSION_ENV).map_err(|_| format!("no {SESSION_ENV}"))?;
    let state = state_dir(None).map_err(|err| err.to_string())?;
    let live = discover::live_commands(&state, Some(&session)).map_err(|err| err.to_string())?;
    let agent = live
        .into_iter()
        .find(|command| command.pid == Some(owner_pid))
        .ok_or_else(|| format!("no live command of session {session} is the agent {owner}"))?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|err| format!("cannot start the event loop: {err}"))?;
    runtime.block_on(async {
        let mut client = ControlClient::connect_to(&agent)
            .await
            .map_err(|err| err.to_string())?;
        let request = Request::AgentWaiting {
            what: what.to_string(),
        };
        client.post(&request).map_err(|err| err.to_string())?;
        let answer = async {
            while let Some(line) = client.next_line().await {
                match line.event.map(|e| e.kind) {
                    Ok(EventKind::ControlAck { .. }) => return Ok(()),
                    Ok(EventKind::ControlError { message, .. }) => return Err(message),
                    _ => {}
                }
            }
            Err("the broker closed the connection".to_string())
        };
        tokio::time::timeout(ANSWER_TIMEOUT, answer)
            .await
            .map_err(|_| "the broker did not answer in time".to_string())?
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_settings_hold_one_notification_hook_running_tether() {
        let args = settings_args(Path::new("/opt/my tether/tether"));
        assert_eq!(args[0], "--settings");
        let settings: Value = serde_json::from_str(&args[1]).unwrap();
        let hook = &settings["hooks"]["Notification"][0];
        assert_eq!(hook["matcher"], MATCHER);
        assert_eq!(
            hook["hooks"][0]["command"],
            "'/opt/my tether/tether' agent-hook"
        );
        assert!(is_claude("/usr/local/bin/claude"));
        assert!(!is_claude("claude-code"));
    }

    #[test]
    fn the_notification_says_what_it_waits_for() {
        // As Claude Code 2.1.197 sent it for a permission prompt (recorded by a hook).
        let input = br#"{"session_id":"389e92c6-7c22-4c16-be54-2af88070fc25","transcript_path":"/tmp/exp-w/home/.claude/projects/-tmp-exp-w-work/389e92c6-7c22-4c16-be54-2af88070fc25.jsonl","cwd":"/tmp/exp-w/work","prompt_id":"84cfd13e-625f-4fb6-97fd-7eed82d4f64f","hook_event_name":"Notification","message":"Claude needs your permission","notification_type":"permission_prompt"}"#;
        assert_eq!(what_it_waits_for(input), "Claude needs your permission");
        assert_eq!(
            what_it_waits_for(br#"{"notification_type":"idle_prompt"}"#),
            "idle_prompt"
        );
        assert_eq!(what_it_waits_for(b"not json"), "its own notification");
    }
}
