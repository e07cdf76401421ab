//! Shell completions: `tether completions bash|zsh|fish` prints a script that asks tether
//! itself for each completion (clap_complete's dynamic engine, `TETHER_COMPLETE=SHELL tether
//! -- WORDS`), so that subcommands and options come from the one definition of the command
//! line and session ids from the state directory at the moment of the TAB. A static script
//! could hold the subcommands but not the sessions, which change with every run; the
//! engine's one protocol serves all three shells (bash's `complete -F`, zsh's `compdef`,
//! fish's `complete --arguments`).

use std::collections::HashSet;
use std::ffi::OsStr;
use std::io::Write as _;
use std::path::PathBuf;

use clap_complete::CompleteEnv;
use clap_complete::engine::{ArgValueCompleter, CompletionCandidate};
use clap_complete::env::{Bash, EnvCompleter, Fish, Zsh};

use tether::journal::paths::command_dirs;
use tether::journal::{CommandId, SessionName};
use tether::model::replay::dir_name;
use tether::postmortem::{exit_of_writing, session_dirs};

/// The variable the scripts set to ask for completions. Not clap's default `COMPLETE`: tether
/// also runs as a shell shim and a broker under whatever environment a command has, where a
/// variable with so common a name must not turn a run into a completion.
const VAR: &str = "TETHER_COMPLETE";

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
}

/// When a completion script called this run (`TETHER_COMPLETE` set), prints the candidates
/// for the words after `--` and exits; otherwise returns at once. Hidden subcommands are
/// never offered: the engine sees [`super::visible`]'s command line.
pub fn answer_if_asked(cli: fn() -> clap::Command) {
    CompleteEnv::with_factory(move || super::visible(cli()))
        .var(VAR)
        .complete();
}

/// `tether completions SHELL`: the script to source (README: Shell completions).
pub fn print(shell: Shell) -> i32 {
    let completer: &dyn EnvCompleter = match shell {
        Shell::Bash => &Bash,
        Shell::Zsh => &Zsh,
        Shell::Fish => &Fish,
    };
    let mut script = Vec::new();
    let written = completer
        .write_registration(VAR, "tether", "tether", &this_program(), &mut script)
        .and_then(|()| std::io::stdout().lock().write_all(&script));
    exit_of_writing(written, "the completion script")
}

/// How the script calls tether back: as this run was called, made absolute when it was a
/// path (`./target/debug/tether`), left to PATH when it was a bare name (as clap_complete's
/// own `COMPLETE=bash tether` does).
fn this_program() -> String {
    let called = std::env::args_os()
        .next()
        .unwrap_or_else(|| "tether".into());
    let mut program = PathBuf::from(called);
    if program.components().count() > 1
        && let Ok(cwd) = std::env::current_dir()
    {
        program = cwd.join(program);
    }
    program.to_string_lossy().into_owned()
}

/// For an argument that names a session: the session ids that start with what is typed,
/// newest first.
pub fn session_ids() -> ArgValueCompleter {
    ArgValueCompleter::new(|current: &OsStr| {
        sessions_newest_first(current.to_str().unwrap_or_default())
    })
}

/// For `stop`, `kill` and `signal`'s SESSION/NAME: session ids, and once a `/` is typed the
/// commands of that session (`SESSION/NAME`).
pub fn targets() -> ArgValueCompleter {
    ArgValueCompleter::new(|current: &OsStr| {
        let typed = current.to_str().unwrap_or_default();
        let Some((session, _)) = typed.split_once('/') else {
            return sessions_newest_first(typed);
        };
        command_names(session)
            .into_iter()
            .map(|name| format!("{session}/{name}"))
            .filter(|target| target.starts_with(typed))
            .map(CompletionCandidate::new)
            .collect()
    })
}

/// The ids that start with `typed` of those `tether sessions` lists (the state directory tether would use: `$TETHER_STATE_DIR`
/// and the rest, not a `--state-dir` on the line being completed), newest first; none when
/// it cannot be read (a completion has nowhere to say why). Only names a session could be
/// given ([`SessionName::parse`]): bash's script puts the candidates in `COMPREPLY=( $(...) )`
/// unquoted, where a directory named `*` would be a glob and one named `$(...)` shell text.
fn sessions_newest_first(typed: &str) -> Vec<CompletionCandidate> {
    let dirs = session_dirs(None).map_or_else(|_| Vec::new(), |(_, dirs)| dirs);
    dirs.iter()
        .rev()
        .map(|dir| dir_name(dir))
        .filter(|name| name.starts_with(typed) && SessionName::parse(name).is_ok())
        .map(CompletionCandidate::new)
        .collect()
}

/// The names of a session's commands, from their directories (`01-build` is `build`),
/// without reading their journals: each once (a command restarted has a directory per
/// run), and only names of the characters a command's name is made of (as
/// [`sessions_newest_first`], for bash).
fn command_names(session: &str) -> Vec<String> {
    // Looked up among the listed sessions, so that what is typed is never a path.
    let dirs = (session_dirs(None).ok())
        .and_then(|(_, sessions)| sessions.into_iter().find(|dir| dir_name(dir) == session))
        .and_then(|dir| command_dirs(&dir).ok())
        .unwrap_or_default();
    let mut names: Vec<String> = Vec::new();
    let mut offered = HashSet::new();
    for dir in &dirs {
        let dir = dir_name(dir);
        let Some(command) = CommandId::parse(session, &dir) else {
            continue;
        };
        let safe = !command.name.is_empty()
            && (command.name.chars()).all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
        if safe && offered.insert(command.name.clone()) {
            names.push(command.name);
        }
    }
    names
}
