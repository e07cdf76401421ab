//! The first moments of the agent's process, in the agent's broker's child: `tether
//! session-owner --shims DIR -- AGENT [ARGS...]` sets the hookup and becomes the agent with
//! exec(2), which keeps the pid and the start time it named as the session's owner.

use std::ffi::OsString;
use std::path::Path;
use std::process::Command;

use crate::exec::{self, EXIT_NOT_FOUND, SESSION_OWNER_ENV};
use crate::journal::BROKER_ID_ENV;

pub use tether_protocol::names::OWNER_SUBCOMMAND;

/// The shell settings pointed at the bash shim: Claude Code's, goose's, and the one most
/// others (and the agents' own `$SHELL -c`) read.
pub const SHELL_VARS: [&str; 3] = ["CLAUDE_CODE_SHELL", "GOOSE_SHELL", "SHELL"];

/// Where PATH looks when it was not set at all (as a shell's default).
const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// Becomes the agent `argv`, hooked up to the shims in `shims`, with tether's own
/// `agent_args` right after its program. Returns only when it cannot run it (127 not found,
/// 126 not executable, as exec gives).
pub fn become_session_owner(shims: &Path, agent_args: &[OsString], argv: &[OsString]) -> i32 {
    let Some(program) = argv.first() else {
        exec::say_line("name the agent to run: tether agent -- claude");
        return EXIT_NOT_FOUND;
    };
    let mut command = Command::new(program);
    command.args(agent_args).args(&argv[1..]);
    // Codex is hooked up by the hook on its command line, and reads none of these: its
    // commands keep the PATH and SHELL they have without tether (with the shims first on
    // PATH, a shell the model names, found on PATH, would be the shim, around the hook's
    // own call of it).
    if !super::codex::is_codex(program) {
        let bash = shims.join("bash");
        let path = std::env::var_os("PATH").unwrap_or_else(|| DEFAULT_PATH.into());
        let mut joined = OsString::from(shims);
        joined.push(":");
        joined.push(path);
        command.env("PATH", joined);
        for var in SHELL_VARS {
            command.env(var, &bash);
        }
    }
    // The agent's commands are brokered as commands of the session, not passed through as
    // the inner `sh -c` of this broker's command would be.
    command.env_remove(BROKER_ID_ENV);
    match own_identity() {
        Some(owner) => {
            command.env(SESSION_OWNER_ENV, owner);
        }
        None => {
            // Unseen, the agent's commands still end with their caller (the agent itself).
            command.env_remove(SESSION_OWNER_ENV);
            exec::say_line(
                "cannot read this process's start time in /proc: the agent's commands end with their caller only",
            );
        }
    }
    exec::become_command(command)
}

/// `PID:START_TICKS` of this process, which the agent will be.
fn own_identity() -> Option<String> {
    let pid = std::process::id() as i32;
    let stat = crate::procfs::read_stat(pid)?;
    Some(format!("{pid}:{}", stat.start_ticks))
}
