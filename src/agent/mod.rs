//! `tether agent [--session NAME] -- AGENT [ARGS...]`: an agent hooked up in one command. The
//! agent runs as `tether exec` runs a command (the same code: its own terminal, keys, resize,
//! its exit status), as command 01 of a session of its own, with every shell setting the
//! agents read pointed at the shell shim; Codex, which reads none, gets a hook on its command
//! line instead (`codex.rs`). Claude Code is given a hook that tells when it waits for its
//! human (`claude.rs`). It is the session's owner: when it exits, its
//! commands' leftovers and any command still running are stopped, and the session is over.
//!
//! The agent is started through [`owner::become_session_owner`], which sets the hookup and
//! names itself (pid and start time, kept by exec(2)) as the owner before it becomes the
//! agent: the shim's brokers watch that process through a pidfd.

mod claude;
mod codex;
mod owner;
mod shims_dir;

pub use claude::hook_main as agent_hook_main;
pub use codex::hook_main as codex_hook_main;
pub use owner::{OWNER_SUBCOMMAND, become_session_owner};

use std::path::{Path, PathBuf};

use crate::exec::{self, EXIT_TETHER_FAILED, ExecOptions};
use crate::journal::paths::{MAX_SESSION_NAME, compact_utc, sessions_dir};
use crate::journal::{SessionName, state_dir};
use shims_dir::PrivateShims;

pub struct AgentOptions {
    /// `--session`; `None`: `<agent name>-<UTC time>`.
    pub session: Option<SessionName>,
    pub state_dir: Option<PathBuf>,
    /// The agent and its arguments.
    pub argv: Vec<String>,
}

/// Runs the agent; returns its exit status (or tether's failure, 125).
pub fn main(options: AgentOptions) -> i32 {
    let Some(program) = options.argv.first() else {
        exec::say_line("name the agent to run: tether agent -- claude");
        return 2;
    };
    let name = agent_name(program);
    let codex = codex::is_codex(program);
    let claude = claude::is_claude(program);
    let session = options.session.unwrap_or_else(|| {
        default_session(&name, options.state_dir.as_deref(), crate::clock::now_ms())
    });
    let shims = match PrivateShims::create() {
        Ok(shims) => shims,
        Err(message) => {
            exec::say_line(&message);
            return EXIT_TETHER_FAILED;
        }
    };
    let (Ok(exe), Some(shims_path)) = (std::env::current_exe(), shims.path().to_str()) else {
        exec::say_line("cannot tell where the tether binary or the shims directory is");
        return EXIT_TETHER_FAILED;
    };
    let mut argv = vec![
        exe.to_string_lossy().into_owned(),
        OWNER_SUBCOMMAND.to_string(),
        "--shims".to_string(),
        shims_path.to_string(),
    ];
    // What tether gives the agent goes before `--`, each as `--agent-arg ARG`: the session
    // owner puts it right after the agent's program, and the journaled argv keeps the
    // operator's own after `--`, which the agent's row shows.
    let mut given = Vec::new();
    // Claude Code says itself when it waits for its human: a hook for this run only.
    if claude {
        given.extend(claude::settings_args(&exe));
    }
    // Codex runs its commands through the account's shell, whatever SHELL and PATH say: it
    // is given a hook, on its command line, that sends them through the shim instead.
    if codex {
        // Absolute: the hook's test for it runs in each command's own directory.
        let session_dir = state_dir(options.state_dir.as_deref())
            .ok()
            .and_then(|state| std::path::absolute(state).ok())
            .map(|state| sessions_dir(&state).join(session.as_str()));
        given.extend(codex::config_overrides(
            &exe,
            shims.path(),
            session_dir.as_deref(),
        ));
    }
    for arg in given {
        argv.extend(["--agent-arg".to_string(), arg]);
    }
    argv.push("--".to_string());
    argv.extend(options.argv);
    let code = exec::main(ExecOptions {
        name: Some(name),
        state_dir: options.state_dir,
        session: Some(session),
        argv,
        pty: true,
        agent: true,
        // The rest as `tether exec` has it: SIGINT stops, the exit status is a code, the
        // retention runs at the session's end. Nothing outlives the agent (the default
        // leftovers): its broker stops what is left of its tree, the brokers of its
        // commands among it (they say why: their session's owner exited).
        ..ExecOptions::default()
    });
    drop(shims);
    code
}

/// The agent's name in the journal and its session's: the program's file name, made fit
/// for a session name (`claude`, `/opt/goose/bin/goose` → `goose`).
fn agent_name(program: &str) -> String {
    let base = Path::new(program)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let fit: String = base
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            }
        })
        // Room for `-20261201T201500Z-NN`.
        .take(MAX_SESSION_NAME - 20)
        .collect();
    if fit.trim_matches(['.', '-']).is_empty() {
        "agent".into()
    } else {
        fit
    }
}

/// `<agent name>-<UTC time>`, e.g. `claude-20261201T201500Z`; `-2`, `-3`... after it when
/// another agent started in the same second (a session name is joined, not made unique).
fn default_session(name: &str, explicit_state: Option<&Path>, now_ms: u64) -> SessionName {
    let base = format!("{name}-{}", compact_utc(now_ms));
    let taken = |candidate: &str| {
        state_dir(explicit_state).is_ok_and(|state| sessions_dir(&state).join(candidate).exists())
    };
    let chosen = std::iter::once(base.clone())
        .chain((2..100).map(|n| format!("{base}-{n}")))
        .find(|candidate| !taken(candidate))
        .unwrap_or(base);
    SessionName::parse(&chosen).unwrap_or_else(|_| {
        SessionName::parse(&format!("agent-{}", compact_utc(now_ms)))
            .expect("a fixed pattern of allowed characters")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_names_fit_session_names() {
        assert_eq!(agent_name("claude"), "claude");
        assert_eq!(agent_name("/opt/goose/bin/goose"), "goose");
        assert_eq!(agent_name("./fake agent!"), "fake-agent-");
        assert_eq!(agent_name("..."), "agent");
        assert_eq!(agent_name(&"x".repeat(200)).len(), MAX_SESSION_NAME - 20);
    }

    #[test]
    fn the_default_session_is_the_agent_and_the_time() {
        let state = tether_os::testing::private_tempdir();
        // 2026-12-01 20:15:00 UTC.
        let at = 1_796_156_100_000;
        let first = default_session("claude", Some(state.path()), at);
        assert_eq!(first.as_str(), "claude-20261201T201500Z");
        crate::testing::private_dir(sessions_dir(state.path()).join(first.as_str()));
        let second = default_session("claude", Some(state.path()), at);
        assert_eq!(second.as_str(), "claude-20261201T201500Z-2");
    }
}
