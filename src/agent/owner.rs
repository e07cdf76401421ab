//! The first moments of the agent's process, in the agent's broker's child: `tether
//! session-owner --shims DIR -- AGENT [ARGS...]` sets the hookup and becomes the agent with
//! exec(2), which keeps the pid and the start time it named as the session's owner.

use std::ffi::OsString;
use std::path::Path;
use std::process::Command;

use crate::exec::{self, EXIT_NOT_FOUND, SESSION_OWNER_ENV};
use crate::journal::BROKER_ID_ENV;
use crate::shim::Shell;

pub use tether_protocol::names::OWNER_SUBCOMMAND;

/// The shell settings pointed at a shim (see [`shell_settings`]): Claude Code's, goose's,
/// and the one most others (and the agents' own `$SHELL -c`) read.
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
        let path = std::env::var_os("PATH").unwrap_or_else(|| DEFAULT_PATH.into());
        let mut joined = OsString::from(shims);
        joined.push(":");
        joined.push(path);
        command.env("PATH", joined);
        let installed = |shell: Shell| shell.real_path().is_ok();
        for (var, shell) in shell_settings(|var| std::env::var_os(var), installed) {
            command.env(var, shims.join(shell.name()));
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

/// The shim each of [`SHELL_VARS`] is pointed at: the shell the agent would run without
/// tether, so that a zsh user's commands stay zsh's. `SHELL` keeps its own kind (`sh`, `bash`
/// or `zsh`); Claude Code's and goose's setting, its own where it names bash or zsh, else
/// `SHELL`'s where that is one of those two. Past those, Claude Code 2.1 looks for zsh
/// first, then bash: so does its setting here; goose's and any other is bash. Never a shell
/// the shim finds no real one of (a zsh in `/usr/local/bin` only).
fn shell_settings(
    var: impl Fn(&str) -> Option<OsString>,
    installed: impl Fn(Shell) -> bool,
) -> [(&'static str, Shell); 3] {
    let kind = |name: &str| {
        var(name)
            .and_then(|value| Shell::from_program(&value))
            .filter(|shell| installed(*shell))
    };
    let login = kind("SHELL");
    let bash_or_zsh = |shell: Option<Shell>| shell.filter(|s| *s != Shell::Sh);
    SHELL_VARS.map(|name| {
        let shell = match name {
            "SHELL" => login,
            "CLAUDE_CODE_SHELL" => bash_or_zsh(kind(name))
                .or(bash_or_zsh(login))
                .or(Some(Shell::Zsh).filter(|zsh| installed(*zsh))),
            _ => bash_or_zsh(kind(name)).or(bash_or_zsh(login)),
        };
        (name, shell.unwrap_or(Shell::Bash))
    })
}

/// `PID:START_TICKS` of this process, which the agent will be.
fn own_identity() -> Option<String> {
    let pid = std::process::id() as i32;
    let stat = crate::procfs::read_stat(pid)?;
    Some(format!("{pid}:{}", stat.start_ticks))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(vars: &[(&str, &str)]) -> Vec<(&'static str, &'static str)> {
        settings_with(vars, |_| true)
    }

    fn settings_with(
        vars: &[(&str, &str)],
        installed: impl Fn(Shell) -> bool,
    ) -> Vec<(&'static str, &'static str)> {
        let vars: Vec<(String, OsString)> = (vars.iter())
            .map(|(k, v)| (k.to_string(), v.into()))
            .collect();
        let lookup = |name: &str| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
        shell_settings(lookup, installed)
            .into_iter()
            .map(|(var, shell)| (var, shell.name()))
            .collect()
    }

    #[test]
    fn each_shell_setting_points_at_the_shim_of_the_shell_it_would_run() {
        let all = |shell| {
            vec![
                ("CLAUDE_CODE_SHELL", shell),
                ("GOOSE_SHELL", shell),
                ("SHELL", shell),
            ]
        };
        assert_eq!(settings_with(&[], |s| s != Shell::Zsh), all("bash"));
        assert_eq!(settings(&[("SHELL", "/bin/bash")]), all("bash"));
        assert_eq!(settings(&[("SHELL", "/usr/bin/zsh")]), all("zsh"));
        // A zsh the shim would find no real one of: bash, as before.
        let no_zsh = |s: Shell| s != Shell::Zsh;
        assert_eq!(
            settings_with(&[("SHELL", "/usr/local/bin/zsh")], no_zsh),
            all("bash")
        );
        // A login shell agents do not run (fish): Claude Code looks for zsh first, the
        // others run bash; without zsh, bash for all.
        let fish = [("SHELL", "/usr/bin/fish")];
        assert_eq!(
            settings(&fish),
            [
                ("CLAUDE_CODE_SHELL", "zsh"),
                ("GOOSE_SHELL", "bash"),
                ("SHELL", "bash")
            ]
        );
        assert_eq!(settings_with(&fish, no_zsh), all("bash"));
        // `sh` stays `sh` for `$SHELL -c`; goose runs bash instead.
        assert_eq!(
            settings_with(&[("SHELL", "/bin/sh")], no_zsh),
            [
                ("CLAUDE_CODE_SHELL", "bash"),
                ("GOOSE_SHELL", "bash"),
                ("SHELL", "sh")
            ]
        );
        // An agent's own setting wins over SHELL.
        assert_eq!(
            settings(&[("SHELL", "/bin/zsh"), ("CLAUDE_CODE_SHELL", "/bin/bash")]),
            [
                ("CLAUDE_CODE_SHELL", "bash"),
                ("GOOSE_SHELL", "zsh"),
                ("SHELL", "zsh")
            ]
        );
    }
}
