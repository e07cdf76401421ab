//! Journals are private and follow no link (issue: hardening, items 1, 2 and the journal
//! parts of 8). The attacks run as user `nobody` where the tests run as root, and are skipped
//! with a message otherwise.

use crate::common;

use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use common::journal::command_dirs;
use common::{BIN, TAG_VAR, TestEnv};

const NOBODY: u32 = 65534;

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// Runs a command as `nobody`, or returns `None` (and says why) where that is impossible.
fn as_nobody(args: &[&OsStr]) -> Option<Output> {
    if !is_root() {
        common::skip("running as another user needs root");
        return None;
    }
    let output = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .args(args)
        .output();
    match output {
        Ok(output) => Some(output),
        Err(err) => {
            common::skip(format!("setpriv is not available: {err}"));
            None
        }
    }
}

/// `tether SUBCOMMAND --state-dir STATE ARGS`, tagged, run to its end.
fn tether(env: &TestEnv, state: &Path, subcommand: &str, args: &[&OsStr]) -> Output {
    let mut command = Command::new(BIN);
    command
        .arg(subcommand)
        .arg("--state-dir")
        .arg(state)
        .args(args);
    common::run_to_end(env, command, &format!("tether {subcommand}"))
}

fn os(s: &str) -> &OsStr {
    OsStr::new(s)
}

fn mode(path: &Path) -> u32 {
    fs::symlink_metadata(path).expect("stat").mode() & 0o7777
}

/// Every path below `root`, itself included.
fn walk(root: &Path) -> Vec<PathBuf> {
    let mut out = vec![root.to_path_buf()];
    if fs::symlink_metadata(root).is_ok_and(|m| m.is_dir()) {
        for entry in fs::read_dir(root).expect("read_dir").flatten() {
            out.extend(walk(&entry.path()));
        }
    }
    out
}

/// Lets `nobody` reach paths inside the test's temp directory (0700 by default), so that
/// only the state directory's own modes stand between it and the journals.
fn open_up(env: &TestEnv) {
    fs::set_permissions(env.dir.path(), fs::Permissions::from_mode(0o755)).expect("chmod");
}

#[test]
fn a_state_directory_others_can_write_is_refused_and_nothing_is_written_through() {
    let env = TestEnv::new("shared_state");
    open_up(&env);
    let shared = env.path("S");
    fs::create_dir(&shared).expect("mkdir");
    fs::set_permissions(&shared, fs::Permissions::from_mode(0o1777)).expect("chmod");
    let victim = env.path("victim");
    fs::write(&victim, "root's secret\n").expect("write the victim");
    fs::set_permissions(&victim, fs::Permissions::from_mode(0o600)).expect("chmod");

    // The attack: another user owns `sessions/` in a world-writable state directory.
    let Some(made) = as_nobody(&[os("mkdir"), shared.join("sessions").as_os_str()]) else {
        return;
    };
    assert!(made.status.success(), "{made:?}");
    let planted = shared.join("sessions/planted");
    let made = as_nobody(&[os("ln"), os("-s"), victim.as_os_str(), planted.as_os_str()])
        .expect("ran as nobody before");
    assert!(made.status.success(), "{made:?}");

    let run = tether(&env, &shared, "exec", &[os("--"), os("echo"), os("pwned")]);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(125), "stderr: {stderr}");
    assert!(stderr.contains("writable by other users"), "{stderr}");
    assert!(stderr.contains("mkdir -m 700"), "says what to do: {stderr}");

    // The same with a private state directory whose `sessions/` someone else owns.
    fs::set_permissions(&shared, fs::Permissions::from_mode(0o700)).expect("chmod");
    let run = tether(&env, &shared, "exec", &[os("--"), os("echo"), os("pwned")]);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(125), "stderr: {stderr}");
    assert!(
        stderr.contains(&format!("owned by uid {NOBODY}")),
        "{stderr}"
    );
    // Readers refuse it too: its journals could say anything.
    let listed = tether(&env, &shared, "sessions", &[]);
    assert_eq!(listed.status.code(), Some(2), "{listed:?}");

    // `sessions` as a link to a directory of the attacker's: refused, not followed.
    fs::remove_dir_all(shared.join("sessions")).expect("remove");
    let theirs = env.path("theirs");
    fs::create_dir(&theirs).expect("mkdir");
    std::os::unix::fs::chown(&theirs, Some(NOBODY), Some(NOBODY)).expect("chown");
    std::os::unix::fs::symlink(&theirs, shared.join("sessions")).expect("symlink");
    let run = tether(&env, &shared, "exec", &[os("--"), os("echo"), os("pwned")]);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(125), "stderr: {stderr}");
    assert!(stderr.contains("symbolic link"), "{stderr}");

    assert_eq!(fs::read(&victim).expect("read"), b"root's secret\n");
    assert_eq!(fs::read_dir(&theirs).expect("read_dir").count(), 0);
    env.finish();
}

#[test]
fn journals_are_private_whatever_the_umask() {
    for umask in ["022", "000"] {
        let env = TestEnv::new("private_journal");
        open_up(&env);
        // A fresh state directory, made by tether itself.
        let state = env.path("fresh/state");
        let script = format!(
            "umask {umask}; exec \"$0\" exec --state-dir \"$1\" -- sh -c 'echo SECRET_TOKEN=$SECRET_TOKEN; echo err >&2'"
        );
        let run = Command::new("sh")
            .args(["-c", &script, BIN])
            .arg(&state)
            .env(TAG_VAR, &env.tag)
            .env("SECRET_TOKEN", "hunter2")
            .stdin(Stdio::null())
            .output()
            .expect("run tether exec");
        assert!(run.status.success(), "{run:?}");
        assert_eq!(run.stdout, b"SECRET_TOKEN=hunter2\n");

        let paths = walk(&env.path("fresh"));
        assert!(paths.len() > 8, "{paths:?}");
        for path in &paths {
            let meta = fs::symlink_metadata(path).expect("stat");
            let want = if meta.is_dir() { 0o700 } else { 0o600 };
            assert_eq!(
                mode(path),
                want,
                "umask {umask}: {} is {:o}",
                path.display(),
                mode(path)
            );
        }
        let dir = command_dirs(&state).pop().expect("a command journal");
        let Some(read) = as_nobody(&[os("cat"), dir.join("stdout.log").as_os_str()]) else {
            return;
        };
        assert!(!read.status.success(), "nobody read the output: {read:?}");
        assert!(!String::from_utf8_lossy(&read.stdout).contains("hunter2"));
        let listed = as_nobody(&[os("ls"), state.join("sessions").as_os_str()]).expect("nobody");
        assert!(!listed.status.success(), "nobody listed the sessions");
        env.finish();
    }
}

#[test]
fn an_existing_state_directory_of_ours_is_made_private() {
    let env = TestEnv::new("narrowed");
    let state = env.state_dir();
    fs::set_permissions(&state, fs::Permissions::from_mode(0o755)).expect("chmod");
    let run = env.exec(&[], &["true"]);
    assert_eq!(run.code(), 0, "{}", run.stderr_text());
    assert_eq!(mode(&state), 0o700);
    env.finish();
}

#[test]
fn session_ids_do_not_collide_across_pid_namespaces() {
    let env = TestEnv::new("pidns");
    if !is_root() {
        common::skip("PID namespaces need root");
        return;
    }
    let state = env.state_dir();
    // A live agent's shims directory in the socket directory, named for its maker (this
    // test's process): a tether in another PID namespace, reading its own /proc, would find
    // no such process and remove it, as it would reclaim a live broker's journal. It keeps
    // to a socket directory of its own.
    let runtime = env.runtime_dir();
    let me = tether::procfs::read_stat(std::process::id() as i32).expect("our own stat");
    let shims = common::socket_dir_in(&runtime).join(format!(
        "agent-shims-{}-{}",
        std::process::id(),
        me.start_ticks
    ));
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&shims)
        .expect("a shims directory");
    // In its own PID namespace every tether is pid 1, so all three ask for the same id in
    // the same second.
    let children: Vec<_> = (0..3)
        .map(|_| {
            Command::new("unshare")
                .args(["-p", "-f", "--mount-proc", BIN, "exec", "--state-dir"])
                .arg(&state)
                .args(["--", "sleep", "0.2"])
                .env(TAG_VAR, &env.tag)
                .env("XDG_RUNTIME_DIR", &runtime)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("start unshare")
        })
        .collect();
    let outputs: Vec<Output> = children
        .into_iter()
        .map(|c| c.wait_with_output().expect("wait"))
        .collect();
    if outputs
        .iter()
        .any(|o| String::from_utf8_lossy(&o.stderr).contains("unshare failed"))
    {
        common::skip(format!(
            "this machine refuses new PID namespaces: {outputs:?}"
        ));
        return;
    }
    for output in &outputs {
        assert!(output.status.success(), "{output:?}");
    }
    let sessions: Vec<_> = fs::read_dir(state.join("sessions"))
        .expect("sessions")
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(sessions.len(), 3, "{sessions:?}");
    assert!(
        shims.is_dir(),
        "a tether in another PID namespace removed a live agent's shims directory"
    );
    env.finish();
}

#[test]
fn a_state_directory_that_is_not_utf8_works() {
    let env = TestEnv::new("not_utf8");
    let state = env.dir.path().join(OsStr::from_bytes(b"st\xffate"));
    let run = tether(&env, &state, "exec", &[os("--"), os("echo"), os("hi")]);
    assert_eq!(run.status.code(), Some(0), "{run:?}");
    assert_eq!(run.stdout, b"hi\n");
    let listed = tether(&env, &state, "sessions", &[]);
    let text = String::from_utf8_lossy(&listed.stdout);
    assert!(listed.status.success(), "{listed:?}");
    assert!(text.contains("1 cmd: 1 ok"), "{text}");
    // A start time read as zero would show as the epoch; the session id
    // ends in a pid, which may well be 1970, so look for the whole date.
    assert!(!text.contains("1970-01-01"), "{text}");
    env.finish();
}

#[test]
fn readers_never_open_a_fifo_from_a_journal() {
    let env = TestEnv::new("fifo");
    let run = env.exec(&[], &["echo", "hi"]);
    assert_eq!(run.code(), 0);
    let dir = env.command_dir();
    for file in ["events.jsonl", "result.json", "stdout.log"] {
        fs::remove_file(dir.join(file)).expect("remove");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            dir.join(file),
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .expect("mkfifo");
    }
    // Would block for ever in open(2) if the reader opened the FIFO.
    let listed = tether(&env, &env.state_dir(), "sessions", &[]);
    assert!(listed.status.success(), "{listed:?}");
    assert!(
        String::from_utf8_lossy(&listed.stdout).contains("cut short"),
        "{listed:?}"
    );
    let mut stream = tether::model::output::StreamFile::new(dir.join("stdout.log"));
    let err = stream.refresh(3).expect_err("a FIFO is refused");
    assert!(err.to_string().contains("not a regular file"), "{err}");
    env.finish();
}

#[test]
fn a_launch_request_over_the_limit_fails_at_once() {
    let env = TestEnv::new("too_long");
    // Control bytes take six bytes each in JSON: 15 arguments of 100 KB make 9 MB of request.
    let arg = "\u{1}".repeat(100_000);
    let mut argv = vec!["true"];
    argv.extend(std::iter::repeat_n(arg.as_str(), 15));
    let run = env.exec(&[], &argv);
    let stderr = run.stderr_text();
    assert_eq!(run.code(), 125, "{stderr}");
    assert!(stderr.contains("limit"), "{stderr}");
    assert!(stderr.contains("shorten the command line"), "{stderr}");
    env.finish();
}
