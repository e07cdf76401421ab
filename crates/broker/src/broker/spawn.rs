//! Starting the command: its own process group, stdin from /dev/null, the front end's or its
//! terminal, one pipe or pseudo-terminal per stream, the session it belongs to in its
//! environment, and otherwise the start a fresh process would get: default signals, no
//! broker marker.
//!
//! With a terminal the broker takes it as its own controlling terminal and the command's
//! process group becomes its foreground group: the command gets the keys' signals and
//! `/dev/tty` as under a shell, and, the broker being the controlling process, the command's
//! main process exiting hangs nothing up (its `&` jobs run on, as under a shell). Where the
//! broker cannot take it, the command leads a session of its own with the terminal as its
//! controlling one, as before. Either way it leads its process group, whose id is its pid,
//! as with pipes: group signals work the same.
//!
//! libc in the forked child (`write`, `prctl(PR_SET_PDEATHSIG)`, `getppid`, `_exit`): raw
//! calls between fork and exec, which allocate nothing; the errno values exec fails with
//! are libc's constants.

pub(crate) mod clone_into;
mod interpreter;
pub(crate) mod signals;

pub use clone_into::CLONE3_ENV;

use std::ffi::OsString;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

use super::pty::{self, Pty, PtyError};
use super::{BROKER_ENV, BROKER_TOKEN_ENV};
use tether_os::fdio::ReadyOrder;
use tether_os::journal::{BROKER_ID_ENV, SESSION_ENV, STATE_DIR_ENV};
use tether_protocol::protocol::trace::{TRACEPARENT_ENV, TRACESTATE_ENV};
use tether_protocol::protocol::{LaunchRequest, StdinSource, TerminalRequest, WindowSize};

pub struct SpawnedCommand {
    pub pid: i32,
    pub argv: Vec<String>,
    /// What the broker reads each stream from: a pipe, or a terminal's master side; no
    /// stderr when the request merges it into stdout.
    pub stdout: OwnedFd,
    pub stderr: Option<OwnedFd>,
    /// The streams that are terminals, as asked for; `None` with pipes.
    pub terminal: Option<TerminalRequest>,
    /// Terminals were asked for and could not be had: the command runs with pipes.
    pub terminal_unavailable: Option<PtyError>,
    /// What the command reads input from (its stdin, its terminals), for attention to tell
    /// a process waiting on them.
    pub inputs: Vec<crate::attention::probe::InputFile>,
}

/// The terminals a request asks for, every one or none: a command gets a terminal for each
/// stream asked, or pipes for all (and the reason).
fn open_terminals(request: Option<TerminalRequest>) -> ([Option<Pty>; 2], Option<PtyError>) {
    let Some(asked) = request.filter(|t| t.stdout || t.stderr) else {
        return ([None, None], None);
    };
    let open = |wanted: bool| wanted.then(|| Pty::open(asked.size)).transpose();
    match (open(asked.stdout), open(asked.stderr)) {
        (Ok(out), Ok(err)) => ([out, err], None),
        (Err(failure), _) | (_, Err(failure)) => ([None, None], Some(failure)),
    }
}

/// Why a command could not start, classified for people and for exit codes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpawnFailure {
    /// `enoent`, `bad_interpreter`, `eacces`, `enoexec`, `cwd_not_found`, ...
    pub code: String,
    pub message: String,
}

impl SpawnFailure {
    fn new(code: &str, message: String) -> SpawnFailure {
        let code = code.into();
        SpawnFailure { code, message }
    }
}

/// Bigger pipes mean fewer wake-ups per megabyte; refusal (a limit) is harmless.
const PIPE_SIZE: i32 = 1 << 20;

/// The command's cgroup, for the child to be started in.
pub struct CgroupEntry {
    /// The cgroup's directory: `clone3(CLONE_INTO_CGROUP)` starts the child in it.
    pub dir: OwnedFd,
    /// Its `cgroup.procs`, open for writing, where clone3 cannot be had: the child writes
    /// itself into it before exec.
    pub procs: Option<OwnedFd>,
}

/// Starts the request's command. `stdin` is the front end's stdin, handed over when the
/// request asks for it; the command gets it (the broker's copy closes when this returns).
/// `cgroup`: the command's cgroup; nothing the command runs ever forks outside it.
pub fn spawn(
    request: &LaunchRequest,
    stdin: Option<OwnedFd>,
    cgroup: Option<CgroupEntry>,
    order: Option<&mut ReadyOrder>,
) -> Result<SpawnedCommand, SpawnFailure> {
    let argv = request.command.argv();
    let Some(program) = argv.first().filter(|p| !p.is_empty()) else {
        let message = "the command is empty; give a program to run".into();
        return Err(SpawnFailure::new("empty_command", message));
    };
    if let Some(cwd) = &request.cwd {
        match std::fs::metadata(cwd) {
            Ok(meta) if meta.is_dir() => {}
            Ok(_) => {
                let message = format!(
                    "cannot run `{program}` in {}: not a directory",
                    cwd.display()
                );
                return Err(SpawnFailure::new("cwd_not_a_directory", message));
            }
            Err(err) => {
                let message = format!(
                    "cannot run `{program}` in {}: {}; check the working directory",
                    cwd.display(),
                    describe(&err)
                );
                return Err(SpawnFailure::new("cwd_not_found", message));
            }
        }
    }
    // Merged streams have one terminal at most: stdout's.
    let asked = request.terminal.map(|t| TerminalRequest {
        stderr: t.stderr && !request.merge_stderr,
        stdout: t.stdout || (t.stderr && request.merge_stderr),
        ..t
    });
    let ([out_pty, err_pty], terminal_unavailable) = open_terminals(asked);
    let terminal = (out_pty.is_some() || err_pty.is_some()).then(|| TerminalRequest {
        stdout: out_pty.is_some(),
        stderr: err_pty.is_some(),
        size: (request.terminal).map_or(WindowSize::DEFAULT, |t| t.size.or_default()),
    });
    // The controlling terminal: stdout's, else stderr's; the broker's if it can take it
    // (then the command joins its foreground), else the command's own.
    let terminal_fd = match (&out_pty, &err_pty) {
        (Some(_), _) => Some(1),
        (None, Some(_)) => Some(2),
        (None, None) => None,
    };
    let broker_controls = out_pty
        .as_ref()
        .or(err_pty.as_ref())
        .is_some_and(pty::become_controlling_process);
    let (foreground, controlling) = match broker_controls {
        true => (terminal_fd, None),
        false => (None, terminal_fd),
    };
    // What the command cannot be given, as `cannot run PROGRAM: cannot WHAT: ERR`.
    let cannot = |code: &str, what: &str, err: io::Error| {
        SpawnFailure::new(
            code,
            format!("cannot run `{program}`: cannot {what}: {err}"),
        )
    };
    let clone_slave = |pty: &Pty| {
        (pty.slave.try_clone()).map_err(|e| cannot("terminal", "pass it its terminal", e))
    };
    let null = || {
        std::fs::File::open("/dev/null")
            .map(OwnedFd::from)
            .map_err(|err| cannot("other", "open /dev/null", err))
    };
    let stdin = match (request.stdin, stdin) {
        (StdinSource::Null, _) => null()?,
        (StdinSource::Terminal, _) => match out_pty.as_ref().or(err_pty.as_ref()) {
            Some(pty) => clone_slave(pty)?,
            None => null()?,
        },
        (StdinSource::Inherit, Some(fd)) => fd,
        (StdinSource::Inherit, None) => {
            let message = format!(
                "cannot run `{program}`: the launch request asks for the front end's stdin, but none was handed over (descriptor {}); brokers are started by tether itself",
                super::STDIN_FD
            );
            return Err(SpawnFailure::new("no_stdin", message));
        }
    };
    let inputs = std::iter::once(stdin.as_fd())
        .chain(
            [&out_pty, &err_pty]
                .into_iter()
                .flatten()
                .map(|p| p.slave.as_fd()),
        )
        .filter_map(crate::attention::probe::input_file)
        .collect();
    // A stream with a terminal gets its slave side and the broker keeps the master; one
    // without gets a pipe's write end and the broker keeps the read end.
    let stream = |pty: Option<Pty>| -> Result<(OwnedFd, OwnedFd), SpawnFailure> {
        match pty {
            Some(pty) => Ok((pty.master, pty.slave)),
            None => {
                use nix::fcntl::{FcntlArg, OFlag, fcntl};
                let (read, write) = nix::unistd::pipe2(OFlag::O_CLOEXEC)
                    .map_err(|err| cannot("other", "make a pipe", err.into()))?;
                let _ = fcntl(&read, FcntlArg::F_SETPIPE_SZ(PIPE_SIZE));
                Ok((read, write))
            }
        }
    };
    let (stdout, child_stdout) = stream(out_pty)?;
    // Merged: the command's stderr is a second descriptor of its stdout's pipe or terminal,
    // so what it writes to either reaches the broker in the order it wrote it.
    let (stderr, child_stderr) = if request.merge_stderr {
        let child_stderr = (child_stdout.try_clone())
            .map_err(|err| cannot("other", "share its stdout with stderr", err))?;
        (None, child_stderr)
    } else {
        let (stderr, child_stderr) = stream(err_pty)?;
        (Some(stderr), child_stderr)
    };
    // Watched before the command can write: a pipe readable when it joins the set would be
    // placed by when it joined, not by when it was written.
    if let Some(order) = order {
        let _ = order.watch(0, Some(stdout.as_fd()), true);
        let _ = order.watch(1, stderr.as_ref().map(AsFd::as_fd), true);
    }
    let mut command = Command::new(program);
    command
        .args(&argv[1..])
        // The marker is for `tether broker` alone: a command that runs tether would have its
        // `tether broker` misbehave, or take itself for one. Set on purpose in the request's
        // variables, it is kept.
        .env_remove(BROKER_ENV)
        .envs(&request.env)
        // The broker's proof of identity is its own, whatever the request says.
        .env_remove(BROKER_TOKEN_ENV);
    // The command's own span in its caller's trace, for programs that nest their spans
    // beneath it; without one, whatever `TRACEPARENT` the caller had is left as it was.
    if let Some(trace) = &request.trace {
        command.env(TRACEPARENT_ENV, trace.command_traceparent());
        if let Some(state) = &trace.state {
            command.env(TRACESTATE_ENV, state);
        }
    }
    // Where the command is journaled: a `tether exec` or shell shim inside it joins the same
    // session, and the shim knows it already runs under a broker. These are facts about
    // this run, so they win over the request's variables and the inherited ones.
    match &request.session {
        Some(session) => {
            command
                .env(SESSION_ENV, &session.command.session)
                .env(BROKER_ID_ENV, session.broker_id());
            if let Some(state) = &session.state_dir {
                command.env(STATE_DIR_ENV, state);
            }
        }
        None => {
            command.env_remove(BROKER_ID_ENV);
        }
    }
    if let Some(cwd) = &request.cwd {
        command.current_dir(cwd);
    }
    // The broker forks from its main thread (its event loop runs on it, and it starts no
    // other), which lives as long as the broker: the death signal below fires when the
    // broker dies, not when some helper thread ends.
    let broker_pid = nix::unistd::getpid().as_raw();
    let start = clone_into::ChildStart {
        stdio: [
            stdin.as_raw_fd(),
            child_stdout.as_raw_fd(),
            child_stderr.as_raw_fd(),
        ],
        own_group: controlling.is_none(),
        foreground,
        controlling,
        broker_pid,
    };
    // The broker's side of the command, whichever way it started (`argv` passed in: the
    // program's name borrows it until then).
    let spawned = move |pid, argv| SpawnedCommand {
        pid,
        argv,
        stdout,
        stderr,
        terminal,
        terminal_unavailable,
        inputs,
    };
    let mut procs = None;
    if let Some(cgroup) = cgroup {
        procs = cgroup.procs;
        if !clone_into::disabled() {
            match clone_into::spawn(
                &command,
                request.arg0.as_deref(),
                &start,
                cgroup.dir.as_fd(),
            ) {
                clone_into::Cloned::Started(pid) => return Ok(spawned(pid, argv)),
                clone_into::Cloned::Failed(err) => {
                    return Err(spawn_failure(program, request, &err));
                }
                // The kernel cannot: the write to `cgroup.procs` below does it.
                clone_into::Cloned::Unavailable => {}
            }
        }
    }
    // The child's ends go with the `Command`: the broker keeps none open, so a master or a
    // pipe reads its end once the command's tree has closed them all.
    command
        .stdin(Stdio::from(stdin))
        .stdout(Stdio::from(child_stdout))
        .stderr(Stdio::from(child_stderr));
    if let Some(arg0) = &request.arg0 {
        command.arg0(arg0);
    }
    if controlling.is_none() {
        command.process_group(0);
    }
    let cgroup_procs = procs.as_ref().map(|fd| fd.as_raw_fd());
    // SAFETY: `reset_in_child`, `join_foreground`, `take_controlling_terminal`, the `write`
    // of the cgroup, `prctl`, `getppid` and `_exit` make raw system calls only, which are
    // async-signal-safe and touch no memory shared with the parent. Having a pre_exec makes
    // std fork and exec rather than posix_spawn, which is what leaves signals 32 and 33
    // ignored. It runs after the streams are in place on 0, 1 and 2, and after std's
    // `setpgid` (`process_group`), which `join_foreground` needs.
    unsafe {
        command.pre_exec(move || {
            // First, before anything else: `0` is "the writer". Unchecked here (the broker
            // checks membership once spawned, and falls back to /proc if it failed): a
            // cgroup problem must never fail the command.
            if let Some(fd) = cgroup_procs {
                libc::write(fd, b"0".as_ptr().cast(), 1);
            }
            // The command dies with its broker, even by SIGKILL: a front end killed at the
            // same instant cannot stop it, and nothing else would. Checked again after it is
            // set: a broker that died before the call left us to another parent already.
            libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            );
            if libc::getppid() != broker_pid {
                libc::_exit(1);
            }
            signals::reset_in_child()?;
            if let Some(fd) = foreground {
                signals::join_foreground(fd)?;
            }
            match controlling {
                // setsid makes the child the leader of a new group too (its pgid is its pid),
                // which is why `process_group` is not asked for: setsid would refuse a
                // group leader.
                Some(fd) => pty::take_controlling_terminal(fd),
                None => Ok(()),
            }
        });
    }
    let child = command.spawn();
    drop(command);
    let child = child.map_err(|err| spawn_failure(program, request, &err))?;
    // `child` is dropped without waiting: the broker's waitpid(-1) loop reaps it.
    Ok(spawned(child.id() as i32, argv))
}

/// Why `program` did not start. exec's ENOENT also means a missing `#!` interpreter, so
/// before calling it "no such file" the program is looked for where exec looked.
fn spawn_failure(program: &str, request: &LaunchRequest, err: &io::Error) -> SpawnFailure {
    if err.raw_os_error() == Some(libc::EACCES)
        && let Some(failure) = directory(program, request.cwd.as_deref())
    {
        return failure;
    }
    if err.raw_os_error() == Some(libc::ENOENT) {
        let path =
            (request.env.get("PATH").map(OsString::from)).or_else(|| std::env::var_os("PATH"));
        if let Some(failure) =
            interpreter::diagnose(program, request.cwd.as_deref(), path.as_deref())
        {
            return failure;
        }
    }
    classify(program, err)
}

/// exec says "permission denied" of a directory, which sends people to its mode bits: a
/// `program` path (one with a slash; relative ones from `cwd`, as exec takes them) that is a
/// directory is called one.
fn directory(program: &str, cwd: Option<&std::path::Path>) -> Option<SpawnFailure> {
    let path = interpreter::resolve(std::path::Path::new(program), cwd);
    (program.contains('/') && path.is_dir()).then(|| SpawnFailure {
        code: "eisdir".into(),
        message: format!("cannot run `{program}`: it is a directory, not a program"),
    })
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
    let code = match (code, err.raw_os_error()) {
        ("other", Some(n)) => format!("errno_{n}"),
        ("other", None) => "unknown".into(),
        _ => code.into(),
    };
    let message = format!("cannot run `{program}`: {}; {hint}", describe(err));
    SpawnFailure { code, message }
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

    #[test]
    fn a_directory_is_called_one_not_unexecutable() {
        let dir = tether_os::testing::private_tempdir();
        {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .mode(0o700)
                .create(dir.path().join("sub"))
                .unwrap();
        }
        let absolute = dir.path().to_str().unwrap();
        let e = directory(absolute, None).expect("a directory");
        assert_eq!(e.code, "eisdir");
        assert_eq!(
            e.message,
            format!("cannot run `{absolute}`: it is a directory, not a program")
        );
        // A relative path is taken from the command's directory, as exec takes it.
        assert!(directory("./sub", Some(dir.path())).is_some());
        assert!(directory("./sub", None).is_none());
        // A bare name is looked up on PATH, not taken as a path; a file is no directory.
        assert!(directory("sub", Some(dir.path())).is_none());
        tether_os::testing::write_script(&dir.path().join("file"), "", 0o600);
        assert!(directory("./file", Some(dir.path())).is_none());
    }
}
