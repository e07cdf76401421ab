//! `tether exec` end to end: the command starts as a fresh process would (default signals,
//! no broker marker in its environment), and a script whose `#!` interpreter is missing is
//! reported as such, not as a missing file.

use crate::common;

use std::os::unix::process::CommandExt;
use std::process::Command;

use common::journal::{kinds, load_complete};
use common::{ExecRun, TAG_VAR, TestEnv};
use tether::protocol::{EventKind, Stage};

/// Runs `command` (a `tether exec` from [`TestEnv::exec_command`]) to completion, its
/// output captured to files.
fn run_captured(env: &TestEnv, command: Command) -> ExecRun {
    env.spawn_captured(command).wait(env)
}

#[test]
fn command_starts_with_no_signal_ignored_or_blocked() {
    let env = TestEnv::new("default_signals");
    let mut command = env.exec_command(&[], &["grep", "-E", "^Sig(Ign|Blk):", "/proc/self/status"]);
    // As `nohup` or a shell's `&` would leave tether: what its invoker ignored is no
    // business of the command's.
    // SAFETY: sigaction through `signal` is async-signal-safe.
    unsafe {
        command.pre_exec(|| {
            libc::signal(libc::SIGUSR2, libc::SIG_IGN);
            libc::signal(libc::SIGALRM, libc::SIG_IGN);
            Ok(())
        });
    }
    let run = run_captured(&env, command);
    assert_eq!(run.code(), 0, "stderr: {}", run.stderr_text());
    assert_eq!(
        String::from_utf8_lossy(&run.stdout()),
        "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n",
        "the command inherited ignored or blocked signals"
    );
    env.finish();
}

#[test]
fn broker_marker_is_not_in_the_commands_environment() {
    let env = TestEnv::new("no_broker_env");
    let run = env.exec(&[], &["env"]);
    assert_eq!(run.code(), 0, "stderr: {}", run.stderr_text());
    let vars = String::from_utf8_lossy(&run.stdout()).into_owned();
    assert!(
        vars.lines().any(|l| l.starts_with(&format!("{TAG_VAR}="))),
        "the command should inherit tether's environment: {vars}"
    );
    assert!(
        !vars
            .lines()
            .any(|l| l.starts_with(&format!("{}=", tether::broker::BROKER_ENV))),
        "the broker's marker leaked into the command: {vars}"
    );
    assert!(
        !vars
            .lines()
            .any(|l| l.starts_with(&format!("{}=", tether::broker::BROKER_TOKEN_ENV))),
        "the broker's token leaked into the command: {vars}"
    );
    env.finish();
}

#[test]
fn missing_interpreter_is_126_and_named() {
    let env = TestEnv::new("bad_interpreter");
    let script = env.path("x");
    common::write_script(&script, "#!/nonexistent/interp\necho should not run\n");
    let mut command = env.exec_command(&[], &["./x"]);
    command.current_dir(env.dir.path());
    let run = run_captured(&env, command);
    assert_eq!(run.code(), 126, "stderr: {}", run.stderr_text());
    assert_eq!(
        run.stderr_text(),
        "tether: cannot run `./x`: its interpreter `/nonexistent/interp` (from its #! line) was \
         not found; fix the #! line or install it\n"
    );
    assert!(run.stdout().is_empty());

    let record = load_complete(&env.command_dir());
    let codes: Vec<&str> = record
        .events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::SpawnError { code, .. } => Some(code.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        codes,
        ["bad_interpreter"],
        "events: {:?}",
        kinds(&record.events)
    );
    let failure = record
        .result
        .and_then(|r| r.failure)
        .expect("result.json names the failure");
    assert_eq!(
        (failure.stage, failure.code.as_str()),
        (Stage::Spawn, "bad_interpreter")
    );
    env.finish();
}

#[test]
fn missing_program_is_still_127() {
    let env = TestEnv::new("still_enoent");
    let mut command = env.exec_command(&[], &["./no-such-script"]);
    command.current_dir(env.dir.path());
    let run = run_captured(&env, command);
    assert_eq!(run.code(), 127, "stderr: {}", run.stderr_text());
    assert!(
        run.stderr_text().contains("no such file"),
        "{}",
        run.stderr_text()
    );
    env.finish();
}
