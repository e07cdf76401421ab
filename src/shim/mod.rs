//! The shell shim: `tether sh -c CMD`, or tether invoked through a link named `sh`, `bash`
//! or `zsh`, runs `CMD` under a broker exactly as the real shell would run it for its caller
//! (same stdin, the same bytes on stdout and stderr, the same exit status), and journals it.
//! So an agent that runs its commands through `$SHELL -c` or a configurable shell has every
//! command brokered without knowing it.
//!
//! Only `-c` (with `-l`) is brokered. Anything else (`--version`, a script file, an
//! interactive shell), any call made inside a broker already (`TETHER_BROKER_ID` set: the
//! brokered command's own `sh -c`, make's recipes) and any call made inside a notify run
//! ([`inside_notify_run`]) is handed to the real shell with exec(2), unchanged. The real shell is found at a fixed absolute path, never through PATH, which
//! would find the link itself.

pub use tether_os::shims::{Shell, inside_notify_run, make_links};

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::config::naming::derive_name;
use crate::exec::{self, EXIT_NOT_FOUND, ExecOptions, RetentionRun, SignalMode};
use crate::journal::BROKER_ID_ENV;
use crate::protocol::CommandSpec;

/// Creates the links, or changes nothing at all if any place holds something that is not
/// such a link. Returns the exit code; prints what it did.
pub fn install(dir: &Path) -> i32 {
    match make_links(dir) {
        Ok(report) => {
            print!("{report}");
            0
        }
        Err(message) => {
            exec::say_line(&message);
            1
        }
    }
}

/// When this process was started through a link named like a shell, that shell.
pub fn invoked_as_shell() -> Option<Shell> {
    Shell::from_program(&std::env::args_os().next()?)
}

/// What the shim does with a shell's arguments.
#[derive(Debug, PartialEq, Eq)]
pub enum Plan {
    /// `-c CMD [NAME ARGS...]`, with `-l` maybe: run the real shell with the same arguments
    /// under a broker. `command` is CMD.
    Broker { command: String },
    /// Anything else: exec the real shell with the same arguments.
    PassThrough,
}

/// Decides from the arguments after `argv[0]`. Brokered: option words made only of `c` and
/// `l` (`-c`, `-lc`, `-c -l`, ...) with a `c` among them, then `--` maybe, then the command.
/// Every argument must be UTF-8 (the launch request is JSON); otherwise the real shell gets
/// the exact bytes, unbrokered.
pub fn plan(args: &[OsString]) -> Plan {
    let mut dash_c = false;
    let mut rest = args.iter();
    let command = loop {
        let Some(arg) = rest.next() else {
            return Plan::PassThrough;
        };
        let bytes = arg.as_bytes();
        if bytes == b"--" {
            match rest.next() {
                Some(command) => break command,
                None => return Plan::PassThrough,
            }
        }
        match bytes.strip_prefix(b"-") {
            Some(flags) if !flags.is_empty() && flags.iter().all(|f| matches!(f, b'c' | b'l')) => {
                dash_c |= flags.contains(&b'c');
            }
            _ => break arg,
        }
    };
    if !dash_c || args.iter().any(|a| a.to_str().is_none()) {
        return Plan::PassThrough;
    }
    Plan::Broker {
        command: command.to_string_lossy().into_owned(),
    }
}

/// tether started through a link named `shell`: the shim. Returns the exit code, unless it
/// became the real shell.
pub fn main_as_link(shell: Shell) -> i32 {
    let mut args = std::env::args_os();
    let argv0 = args.next().unwrap_or_else(|| shell.name().into());
    run(shell, argv0, args.collect(), None)
}

/// `tether sh ARGS...`: the shim for `/bin/sh`.
pub fn main_subcommand(args: Vec<OsString>, state_dir: Option<PathBuf>) -> i32 {
    run(Shell::Sh, Shell::Sh.name().into(), args, state_dir)
}

fn run(shell: Shell, argv0: OsString, args: Vec<OsString>, state_dir: Option<PathBuf>) -> i32 {
    if args.first().is_some_and(|a| a == "--help") {
        print!("{}", help(shell));
        return 0;
    }
    let real = match shell.real_path() {
        Ok(real) => real,
        Err(message) => {
            exec::say_line(&message);
            return EXIT_NOT_FOUND;
        }
    };
    let argv0 = shell_name(argv0, &real);
    // Inside a notify run (called by its full path: its PATH has no shims directory), the
    // call is the operator's own, never a command of a session: brokered, a failing one
    // would notify again, for ever.
    let nested =
        std::env::var_os(BROKER_ID_ENV).is_some_and(|v| !v.is_empty()) || inside_notify_run();
    let plan = if nested {
        Plan::PassThrough
    } else {
        plan(&args)
    };
    let (Plan::Broker { command }, Some(arg0)) = (plan, argv0.to_str()) else {
        // Becomes the real shell, with the same `argv[0]` and arguments.
        let argv: Vec<&OsStr> = std::iter::once(real.as_os_str())
            .chain(args.iter().map(OsString::as_os_str))
            .collect();
        return exec::exec_directly(&argv, Some(&argv0));
    };
    let leftovers = match exec::LeftoversChoice::for_shim() {
        Ok(leftovers) => leftovers,
        Err(err) => {
            exec::say_line(&err.to_string());
            return 2;
        }
    };
    // From here on the command runs, whatever befalls the journal: its caller reads its
    // stderr as the command's, so tether's own lines go to the operator's notices file.
    if let Ok(state) = crate::journal::state_dir(state_dir.as_deref()) {
        exec::divert_notices(&state);
    }
    let session = match crate::journal::paths::chosen_session(None) {
        Ok(session) => session,
        // The caller asked for a shell and gets one: the command runs, journaled in a new
        // session of its own that every lister shows (its command sees that session's id in
        // TETHER_SESSION), never in the refused one nor unjournaled.
        Err(message) => {
            exec::say_line(&format!("{message}; journaled in a new session instead"));
            None
        }
    };
    let mut argv = vec![real.to_string_lossy().into_owned()];
    argv.extend(args.iter().map(|a| a.to_string_lossy().into_owned()));
    exec::main(ExecOptions {
        // Named as every front end names a script: `cd sub && make` is `make`.
        name: Some(derive_name(&CommandSpec::Shell(command))),
        state_dir,
        session,
        argv,
        arg0: Some(arg0.to_string()),
        signals: SignalMode::Forward,
        // Transparent: a terminal where the shim's own stream is one, as the shell had.
        pty: true,
        leftovers,
        // The caller asked for a shell: it gets one whatever state tether's journal is in.
        die_by_signal: true,
        agents_command: true,
        fail_open: true,
        retention: RetentionRun::Detached,
        // A prompt on /dev/tty gets the keys, as under the shell.
        relay_keys: true,
        ..ExecOptions::default()
    })
}

/// The `argv[0]` the real shell is given. Called by its path (`CLAUDE_CODE_SHELL=
/// SHIMS_DIR/bash`), the shell is named by the real one's path (a login shell's `-` kept):
/// `$0` and the shell's messages (`/bin/bash: line 1: foo: command not found`) never show a
/// path into a shims directory. Called by name (found on PATH, `bash`, `-bash`), by that name.
fn shell_name(argv0: OsString, real: &Path) -> OsString {
    if !argv0.as_bytes().contains(&b'/') {
        return argv0;
    }
    let mut named = OsString::from(if argv0.as_bytes().starts_with(b"-") {
        "-"
    } else {
        ""
    });
    named.push(real);
    named
}

/// What `sh --help` prints: what the shim is, rather than the real shell's complaint.
fn help(shell: Shell) -> String {
    let name = shell.name();
    let real = shell
        .real_path()
        .map_or_else(|message| message, |p| p.display().to_string());
    format!(
        "tether's shell shim, standing in for {name} ({real})

Usage: {name} -c COMMAND [NAME [ARGS...]]   (also -lc, -c -l)

Runs COMMAND under a tether broker, journaled, exactly as {name} would run it for you: the
same stdin, the same bytes on stdout and stderr, the same exit status, $0 and $1.
Anything else (a script, -s, an interactive shell, --version) runs {name} itself, as does
any call made inside a tether command already.

Nothing of tether's is written into COMMAND's output: once it runs, what tether has to say
(a stop, a refused session name, what the journal lost) goes to shim-notices.log in the
state directory. When the journal cannot be written (a full disk, a read-only state
directory), COMMAND runs all the same, unjournaled, after one line on stderr (`tether: not
journaled: ...`). After each command, retention keeps the state directory bounded (see
`tether prune`).

Environment: TETHER_SESSION (the session to journal in; a name tether refuses gets a notice
and a new session instead), TETHER_STATE_DIR, TETHER_SHIM_NOTICES=stderr (notices on stderr).
The real shell's own help: {real} --help. tether's: tether --help.
"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shell_called_by_path_is_named_by_the_real_ones() {
        let real = Path::new("/bin/bash");
        let named = |argv0: &str| shell_name(argv0.into(), real);
        assert_eq!(named("/tmp/tether-0/agent-shims-1-2/bash"), "/bin/bash");
        assert_eq!(named("-/tmp/tether-0/agent-shims-1-2/bash"), "-/bin/bash");
        assert_eq!(named("bash"), "bash");
        assert_eq!(named("-bash"), "-bash");
    }
    use std::os::unix::ffi::OsStringExt;

    fn args(list: &[&str]) -> Vec<OsString> {
        list.iter().map(OsString::from).collect()
    }

    fn brokered(command: &str) -> Plan {
        Plan::Broker {
            command: command.into(),
        }
    }

    #[test]
    fn only_dash_c_is_brokered() {
        assert_eq!(plan(&args(&["-c", "echo hi"])), brokered("echo hi"));
        assert_eq!(plan(&args(&["-lc", "make"])), brokered("make"));
        assert_eq!(plan(&args(&["-cl", "make"])), brokered("make"));
        // Claude Code's form.
        assert_eq!(plan(&args(&["-c", "-l", "make"])), brokered("make"));
        assert_eq!(plan(&args(&["-c", "--", "-x"])), brokered("-x"));
        assert_eq!(
            plan(&args(&["-c", "echo $0 $1", "a", "b"])),
            brokered("echo $0 $1")
        );
        for other in [
            &[][..],
            &["--version"],
            &["script.sh"],
            &["script.sh", "-c"],
            &["-l"],
            &["-i"],
            &["-e", "-c", "x"],
            &["-ec", "x"],
            &["-c"],
            &["-c", "--"],
            &["-s"],
            &["--login", "-c", "x"],
            &["-"],
        ] {
            assert_eq!(plan(&args(other)), Plan::PassThrough, "{other:?}");
        }
        let not_utf8 = vec![OsString::from("-c"), OsString::from_vec(vec![0xff])];
        assert_eq!(plan(&not_utf8), Plan::PassThrough);
    }

    #[test]
    fn shells_by_program_name() {
        let of = |s: &str| Shell::from_program(OsStr::new(s));
        assert_eq!(of("sh"), Some(Shell::Sh));
        assert_eq!(of("/tmp/shims/bash"), Some(Shell::Bash));
        assert_eq!(of("-zsh"), Some(Shell::Zsh));
        assert_eq!(of("tether"), None);
        assert_eq!(of("bash5"), None);
        assert_eq!(of("/bin/"), None);
    }

    #[test]
    fn command_names() {
        let name = |script: &str| derive_name(&CommandSpec::Shell(script.into()));
        assert_eq!(name("cargo test --all"), "cargo");
        assert_eq!(name("  /usr/bin/make -j2"), "make");
        assert_eq!(name(""), "sh");
        assert_eq!(name("dir/"), "sh");
        assert_eq!(name("cd sub && FOO=1 make"), "make");
    }
}
