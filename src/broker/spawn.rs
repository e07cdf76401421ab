//! Starting the command: its own process group, stdin from /dev/null or the front end's,
//! one pipe per stream, the session it belongs to in its environment, and otherwise the
//! start a fresh process would get: default signals, no broker marker.

mod interpreter;
mod signals;

use std::ffi::OsString;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

use super::BROKER_ENV;
use crate::journal::{BROKER_ID_ENV, SESSION_ENV, STATE_DIR_ENV};
use crate::protocol::{LaunchRequest, StdinSource};

pub struct SpawnedCommand {
    pub pid: i32,
    pub argv: Vec<String>,
    pub stdout: OwnedFd,
    pub stderr: OwnedFd,
}

/// Why a command could not start, classified for people and for exit codes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpawnFailure {
    /// `enoent`, `bad_interpreter`, `eacces`, `enoexec`, `cwd_not_found`, ...
    pub code: String,
    pub message: String,
}

/// Bigger pipes mean fewer wake-ups per megabyte; refusal (a limit) is harmless.
const PIPE_SIZE: i32 = 1 << 20;

/// Starts the request's command. `stdin` is the front end's stdin, handed over when the
/// request asks for it; the command gets it (the broker's copy closes when this returns).
pub fn spawn(
    request: &LaunchRequest,
    stdin: Option<OwnedFd>,
) -> Result<SpawnedCommand, SpawnFailure> {
    let argv = request.command.argv();
    let Some(program) = argv.first().filter(|p| !p.is_empty()) else {
        return Err(SpawnFailure {
            code: "empty_command".into(),
            message: "the command is empty; give a program to run".into(),
        });
    };
    if let Some(cwd) = &request.cwd {
        match std::fs::metadata(cwd) {
            Ok(meta) if meta.is_dir() => {}
            Ok(_) => {
                return Err(SpawnFailure {
                    code: "cwd_not_a_directory".into(),
                    message: format!(
                        "cannot run `{program}` in {}: not a directory",
                        cwd.display()
                    ),
                });
            }
            Err(err) => {
                return Err(SpawnFailure {
                    code: "cwd_not_found".into(),
                    message: format!(
                        "cannot run `{program}` in {}: {}; check the working directory",
                        cwd.display(),
                        describe(&err)
                    ),
                });
            }
        }
    }
    let stdin = match (request.stdin, stdin) {
        (StdinSource::Null, _) => Stdio::null(),
        (StdinSource::Inherit, Some(fd)) => Stdio::from(fd),
        (StdinSource::Inherit, None) => {
            return Err(SpawnFailure {
                code: "no_stdin".into(),
                message: format!(
                    "cannot run `{program}`: the launch request asks for the front end's stdin, but none was handed over (descriptor {}); brokers are started by tether itself",
                    super::STDIN_FD
                ),
            });
        }
    };
    let mut command = Command::new(program);
    if let Some(arg0) = &request.arg0 {
        command.arg0(arg0);
    }
    command
        .args(&argv[1..])
        // The marker is for `tether broker` alone: a command that runs tether would have its
        // `tether broker` misbehave, or take itself for one. Set on purpose in the request's
        // variables, it is kept.
        .env_remove(BROKER_ENV)
        .envs(&request.env);
    // Where the command is journaled: a `tether exec` or shell shim inside it joins the same
    // session, and the shim knows it already runs under a broker. These are facts about
    // this run, so they win over the request's variables and the inherited ones.
    match &request.session {
        Some(session) => {
            command
                .env(SESSION_ENV, &session.id)
                .env(BROKER_ID_ENV, session.broker_id());
            if let Some(state) = &session.state_dir {
                command.env(STATE_DIR_ENV, state);
            }
        }
        None => {
            command.env_remove(BROKER_ID_ENV);
        }
    }
    command
        .stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    if let Some(cwd) = &request.cwd {
        command.current_dir(cwd);
    }
    // SAFETY: `reset_in_child` makes raw system calls only, which are async-signal-safe and
    // touch no memory shared with the parent. Having a pre_exec makes std fork and exec
    // rather than posix_spawn, which is what leaves signals 32 and 33 ignored.
    unsafe {
        command.pre_exec(signals::reset_in_child);
    }
    let mut child = command
        .spawn()
        .map_err(|err| spawn_failure(program, request, &err))?;
    let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
        unreachable!("both streams were asked to be piped");
    };
    let (stdout, stderr) = (OwnedFd::from(stdout), OwnedFd::from(stderr));
    for fd in [&stdout, &stderr] {
        let _ = rustix::pipe::fcntl_setpipe_size(fd, PIPE_SIZE as usize);
    }
    // `child` is dropped without waiting: the broker's waitpid(-1) loop reaps it.
    Ok(SpawnedCommand {
        pid: child.id() as i32,
        argv,
        stdout,
        stderr,
    })
}

/// Why `program` did not start. exec's ENOENT also means a missing `#!` interpreter, so
/// before calling it "no such file" the program is looked for where exec looked.
fn spawn_failure(program: &str, request: &LaunchRequest, err: &io::Error) -> SpawnFailure {
    if err.raw_os_error() == Some(libc::ENOENT) {
        let path = match request.env.get("PATH") {
            Some(path) => Some(OsString::from(path)),
            None => std::env::var_os("PATH"),
        };
        if let Some(failure) =
            interpreter::diagnose(program, request.cwd.as_deref(), path.as_deref())
        {
            return failure;
        }
    }
    classify(program, err)
}

fn classify(program: &str, err: &io::Error) -> SpawnFailure {
    let (code, hint) = match err.raw_os_error() {
        Some(libc::ENOENT) => (
            "enoent",
            if program.contains('/') {
                "check the path"
            } else {
                "is it on PATH?"
            },
        ),
        Some(libc::EACCES) => (
            "eacces",
            "is it executable, and are its directories searchable?",
        ),
        Some(libc::ENOEXEC) => (
            "enoexec",
            "it is not a program this system can run; does a script lack its #! line?",
        ),
        Some(libc::ENOTDIR) => ("enotdir", "a part of the path is not a directory"),
        Some(libc::EISDIR) => ("eisdir", "that is a directory"),
        Some(libc::E2BIG) => ("e2big", "the arguments and environment are too large"),
        Some(libc::ENOMEM) | Some(libc::EAGAIN) => {
            ("enomem", "the system is out of memory or processes")
        }
        Some(libc::ETXTBSY) => ("etxtbsy", "the file is being written; try again"),
        Some(libc::ELOOP) => ("eloop", "too many symbolic links"),
        Some(libc::EPERM) => ("eperm", "the system does not allow it"),
        _ => ("other", "see the error above"),
    };
    let code = if code == "other" {
        err.raw_os_error()
            .map_or_else(|| "unknown".to_string(), |n| format!("errno_{n}"))
    } else {
        code.to_string()
    };
    SpawnFailure {
        code,
        message: format!("cannot run `{program}`: {}; {hint}", describe(err)),
    }
}

/// An OS error without Rust's "(os error N)" suffix, in lower case.
fn describe(err: &io::Error) -> String {
    let text = err.to_string();
    let text = text.split(" (os error").next().unwrap_or(&text);
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_common_errors() {
        let e = classify("nope", &io::Error::from_raw_os_error(libc::ENOENT));
        assert_eq!(e.code, "enoent");
        assert_eq!(
            e.message,
            "cannot run `nope`: no such file or directory; is it on PATH?"
        );
        let e = classify("./x", &io::Error::from_raw_os_error(libc::EACCES));
        assert_eq!(e.code, "eacces");
        assert!(e.message.starts_with("cannot run `./x`: permission denied"));
        assert_eq!(
            classify("x", &io::Error::from_raw_os_error(libc::EXDEV)).code,
            format!("errno_{}", libc::EXDEV)
        );
    }
}
