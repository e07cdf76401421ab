//! What `tether exec` prints never depends on the journal, and a copy it could not make is
//! never reported as success (issue: hardening, item 6).

use crate::common;

use std::fs::{self, File};
use std::process::{Command, Stdio};

use common::disk::SmallDisk;
use common::{BIN, TAG_VAR, TestEnv};
use tether::protocol::{EventKind, Stream};

fn expected_seq(n: u32) -> Vec<u8> {
    (1..=n)
        .flat_map(|i| format!("{i}\n").into_bytes())
        .collect()
}

#[test]
fn a_failed_write_to_our_stdout_is_an_error_not_success() {
    let env = TestEnv::new("dev_full");
    let full = File::options()
        .write(true)
        .open("/dev/full")
        .expect("open /dev/full");
    let run = env
        .exec_command(&[], &["seq", "1", "100000"])
        .stdout(full)
        .stderr(Stdio::piped())
        .output()
        .expect("run tether exec");
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(125), "{stderr}");
    assert!(
        stderr.contains("writing the command's stdout failed"),
        "{stderr}"
    );
    assert!(stderr.contains("not copied"), "{stderr}");
    // The journal has it all.
    let dir = env.command_dir();
    assert_eq!(
        fs::read(dir.join("stdout.log")).unwrap(),
        expected_seq(100000)
    );
    env.finish();
}

#[test]
fn a_full_journal_disk_caps_the_journal_not_the_copy() {
    let env = TestEnv::new("full_disk");
    let Some(disk) = SmallDisk::mount(&env, "128k") else {
        return;
    };
    let run = Command::new(BIN)
        .args(["exec", "--state-dir"])
        .arg(disk.path().join("state"))
        .args(["--", "sh", "-c", "seq 1 200000; echo last-words >&2"])
        .env(TAG_VAR, &env.tag)
        .stdin(Stdio::null())
        .output()
        .expect("run tether exec");
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(0), "{stderr}");
    assert_eq!(run.stdout.len(), expected_seq(200000).len(), "{stderr}");
    assert!(
        run.stdout == expected_seq(200000),
        "the copy is byte for byte"
    );
    assert!(stderr.contains("last-words\n"), "{stderr}");
    assert!(stderr.contains("the disk is full"), "says so: {stderr}");
    drop(disk);
    env.finish();
}

#[test]
fn stdin_is_passed_on_unless_no_stdin() {
    let env = TestEnv::new("no_stdin");
    for (options, expected) in [(&[][..], &b"piped\n"[..]), (&["--no-stdin"][..], &b""[..])] {
        let mut child = env
            .exec_command(options, &["cat"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start tether exec");
        use std::io::Write;
        let mut stdin = child.stdin.take().expect("piped stdin");
        // With --no-stdin the command never reads it: a closed pipe is fine either way.
        let _ = stdin.write_all(b"piped\n");
        drop(stdin);
        let out = child.wait_with_output().expect("wait for tether exec");
        assert!(out.status.success(), "{out:?}");
        assert_eq!(out.stdout, expected, "{options:?}");
    }
    env.finish();
}

/// `S/sh -c yes | sleep 1000`, then `tether stop` (issue: hardening, item 10): a caller that
/// takes no more of the copy holds neither the broker nor the stop. Once `yes` is gone the
/// broker journals its end and closes, saying how many bytes never reached the caller; the
/// shim returns without waiting for its copy.
#[test]
fn a_stop_does_not_wait_on_a_caller_that_takes_nothing() {
    let env = TestEnv::new("stuck_reader");
    let runtime = env.runtime_dir();
    // Our read end, never read: the pipe fills, as `| sleep 1000` leaves it.
    let (unread, caller_stdout) = nix::unistd::pipe().expect("a pipe");
    let stderr_path = env.path("shim.stderr");
    let shim = env
        .shim(std::path::Path::new(BIN), &["sh", "-c", "yes"])
        .env("XDG_RUNTIME_DIR", &runtime)
        .stdout(caller_stdout)
        .stderr(File::create(&stderr_path).expect("the stderr capture"))
        .spawn()
        .expect("start the shim");
    let dir = env.wait_command_dir();
    // More than our pipe (64 KiB) and the copy pipe (1 MiB) hold: the copy is behind, and
    // `yes` waits on its pipe, as it would on ours without tether.
    let full = (1 << 20) + (64 << 10) + 1;
    common::wait_until(&env, "the copy to fall behind", || {
        fs::metadata(dir.join("stdout.log")).is_ok_and(|m| m.len() >= full)
    });

    let target = format!("{}/yes", common::journal::session_of(&dir));
    let mut stop = Command::new(BIN);
    stop.args(["stop", &target, "--state-dir"])
        .arg(env.state_dir())
        .env("XDG_RUNTIME_DIR", &runtime);
    let stopped = common::run_to_end(&env, stop, "tether stop");
    let said = String::from_utf8_lossy(&stopped.stdout).into_owned();
    assert_eq!(stopped.status.code(), Some(0), "{stopped:?}");
    assert!(said.contains("stopped: SIGTERM"), "{said}");
    assert!(said.contains("nothing is left"), "{said}");

    // The journal has the end and what the caller never got.
    let record = common::journal::load_complete(&dir);
    let result = record.result.expect("result.json");
    assert_eq!(result.exit.and_then(|s| s.signal), Some(15));
    let undelivered: Vec<(Stream, u64)> = record
        .events
        .iter()
        .filter_map(|e| match e.kind {
            EventKind::OutputUndelivered { stream, bytes } => Some((stream, bytes)),
            _ => None,
        })
        .collect();
    assert_eq!(
        undelivered.len(),
        1,
        "{:?}",
        common::journal::kinds(&record.events)
    );
    let (stream, bytes) = undelivered[0];
    assert_eq!(stream, Stream::Stdout);
    assert_eq!(result.stdout.undelivered, bytes);
    // What our pipe took, plus what was never delivered, is every byte `yes` wrote.
    let in_our_pipe = rustix::io::ioctl_fionread(&unread).expect("FIONREAD");
    assert_eq!(bytes + in_our_pipe, result.stdout.bytes);

    // The shim returns as the shell would, dead by the SIGTERM that killed the command, and
    // tells the operator (its notices, never the command's stderr) what its reader never got.
    let shim = common::RunningExec {
        child: shim,
        started: std::time::Instant::now(),
        stdout_path: env.path("unread"),
        stderr_path,
    };
    let run = shim.wait(&env);
    let stderr = run.stderr_text();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(run.status.signal(), Some(15), "{stderr}");
    assert_eq!(stderr, "");
    let notices = fs::read_to_string(env.state_dir().join(tether::exec::NOTICES_FILE))
        .expect("the shim's notices");
    assert!(
        notices.contains(&format!(
            "{bytes} bytes of the command's stdout were not delivered"
        )),
        "{notices}"
    );
    drop(unread);
    env.finish();
}

/// exec's stdout is a pipe left non-blocking by whoever shares it (Node makes its end so),
/// and the command is quiet for a second: the copy waits for data, not spins. A non-blocking
/// end makes splice return at once when there is nothing to move; waiting only for room,
/// which there was, it called splice again straight away, a core busy for as long as the
/// command was quiet. Measured in CPU time (GNU time), not wall-clock time.
#[test]
fn a_quiet_command_does_not_make_exec_spin_on_a_non_blocking_pipe() {
    use nix::fcntl::{FcntlArg, OFlag, fcntl};
    use std::io::Read;
    let env = TestEnv::new("exec_nonblocking_quiet");
    let (read, write) = nix::unistd::pipe2(OFlag::O_CLOEXEC).expect("a pipe");
    fcntl(&write, FcntlArg::F_SETFL(OFlag::O_NONBLOCK)).expect("a non-blocking end");
    let reader = std::thread::spawn(move || {
        let mut out = Vec::new();
        let _ = File::from(read).read_to_end(&mut out);
        out
    });
    let times = env.path("exec.times");
    let mut timed = Command::new("/usr/bin/time");
    timed
        .args(["-f", "%U %S", "-o"])
        .arg(&times)
        .arg(BIN)
        .args(["exec", "--state-dir"])
        .arg(env.state_dir())
        .args(["--", "sh", "-c", "sleep 1; echo done"])
        .env(TAG_VAR, &env.tag)
        .stdin(Stdio::null())
        .stdout(Stdio::from(write));
    // Not `run_to_end`, which captures stdout: exec's must be this pipe.
    let mut child = timed.spawn().expect("start tether exec under time");
    drop(timed);
    let mut status = None;
    common::wait_until(&env, "tether exec to end", || {
        status = child.try_wait().expect("wait for tether exec");
        status.is_some()
    });
    assert!(status.is_some_and(|s| s.success()), "{status:?}");
    let out = reader.join().expect("the reader");
    assert_eq!(out, b"done\n");
    let said = fs::read_to_string(&times).unwrap_or_default();
    let cpu: f64 = said
        .split_whitespace()
        .filter_map(|s| s.parse::<f64>().ok())
        .sum();
    // Spinning took the whole second; waiting takes a few milliseconds.
    assert!(
        cpu < 0.5,
        "exec used {cpu} s of CPU over a quiet second: {said:?}"
    );
    env.finish();
}
