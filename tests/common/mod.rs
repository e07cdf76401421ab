//! Helpers shared by the end-to-end tests: a per-test environment (temp state dir, unique
//! process tag), running `tether exec` with deadlines, and reading journals back.
//!
//! Each test binary uses only some of these.
#![allow(dead_code)]

pub mod agents;
pub mod cgroups;
pub mod direct;
pub mod disk;
pub mod follower;
pub mod journal;
pub mod mounts;
pub mod otlp_receiver;
pub mod procs;
pub mod tmux;

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
pub use tether::testing::copy_dir;

use tempfile::TempDir;

pub use procs::{TAG_VAR, assert_none_left};

pub const BIN: &str = env!("CARGO_BIN_EXE_tether");

/// A test that cannot run here says why: a failure where tests must run (`CI`,
/// `TETHER_TESTS_MUST_RUN`), else a line on stderr. The caller returns after it.
pub use tether::testing::skip;

/// The checked-in session that holds every kind of event (see `tests/fixtures/README.md`).
pub fn every_kind_fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/every-kind")
}

/// Upper bound for anything a test waits on; reaching it means the test is broken, not slow.
pub const DEADLINE: Duration = Duration::from_secs(30);

static COUNTER: AtomicUsize = AtomicUsize::new(0);

/// One test's world: a temp directory holding the state dir and captured output, and the tag
/// that marks every process the test starts. Dropping it kills, by pid, whatever still carries
/// the tag, so a failing test does not leak processes into the next.
pub struct TestEnv {
    pub tag: String,
    pub dir: TempDir,
    runs: AtomicUsize,
}

impl TestEnv {
    pub fn new(name: &str) -> TestEnv {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let tag = format!(
            "{name}-{}-{nanos}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        let dir = tempfile::Builder::new()
            .prefix("tether-e2e-")
            .tempdir()
            .expect("create a temp dir");
        fs::create_dir(dir.path().join("state")).expect("create the state dir");
        TestEnv {
            tag,
            dir,
            runs: AtomicUsize::new(0),
        }
    }

    pub fn state_dir(&self) -> PathBuf {
        self.dir.path().join("state")
    }

    /// A runtime directory whose path is too long for a control socket in it (over the
    /// 107-byte limit): given as `XDG_RUNTIME_DIR`, a broker has no socket, as in a sandbox.
    pub fn socketless_runtime_dir(&self) -> PathBuf {
        let dir = self.path(&"l".repeat(100));
        fs::create_dir_all(&dir).expect("create the socketless runtime dir");
        dir
    }

    /// The test's own runtime directory (0700), where its brokers put their control sockets
    /// when it is given them as `XDG_RUNTIME_DIR`.
    pub fn runtime_dir(&self) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let dir = self.path("run");
        if !dir.exists() {
            fs::create_dir(&dir).expect("create the runtime dir");
            fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)).expect("chmod");
        }
        dir
    }

    /// A path in the test's scratch space (outside the state dir).
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// `tether --state-dir <state> ARGS`, with a config directory of the test's own
    /// (`config/` in its scratch space: the user config tether reads) and none of the
    /// variables that would join another session.
    pub fn tether(&self, args: &[&str]) -> Command {
        let mut command = Command::new(BIN);
        command
            .arg("--state-dir")
            .arg(self.state_dir())
            .args(args)
            .env("XDG_CONFIG_HOME", self.path("config"))
            .env_remove("TETHER_SESSION")
            .env_remove("TETHER_BROKER_ID")
            .env_remove("NO_COLOR");
        command
    }

    /// `program ARGS` as a shell shim call is made (`program` is tether, one of its shell
    /// links, or `tether sh`'s binary): in the test's state and config directories, tagged,
    /// outside any session or broker the test runner may be in, stdin from /dev/null.
    pub fn shim(&self, program: &Path, args: &[&str]) -> Command {
        let mut command = Command::new(program);
        command
            .args(args)
            .env("TETHER_STATE_DIR", self.state_dir())
            .env("XDG_CONFIG_HOME", self.path("config"))
            .env(TAG_VAR, &self.tag)
            .env_remove("TETHER_SESSION")
            .env_remove("TETHER_BROKER_ID")
            .stdin(Stdio::null());
        command
    }

    /// `tether exec --state-dir <state> OPTIONS -- ARGV`, tagged, stdin from /dev/null.
    pub fn exec_command(&self, options: &[&str], argv: &[&str]) -> Command {
        let mut command = Command::new(BIN);
        command
            .arg("exec")
            .arg("--state-dir")
            .arg(self.state_dir())
            .args(options)
            .arg("--")
            .args(argv)
            .env(TAG_VAR, &self.tag)
            .stdin(Stdio::null());
        command
    }

    /// Starts `tether exec` with its stdout and stderr captured to files.
    pub fn spawn_exec(&self, options: &[&str], argv: &[&str]) -> RunningExec {
        self.spawn_captured(self.exec_command(options, argv))
    }

    /// Starts `command` (a `tether exec` from [`TestEnv::exec_command`], adjusted) with its
    /// stdout and stderr captured to files of their own.
    pub fn spawn_captured(&self, mut command: Command) -> RunningExec {
        let n = self.runs.fetch_add(1, Ordering::Relaxed);
        let stdout_path = self.path(&format!("exec-{n}.stdout"));
        let stderr_path = self.path(&format!("exec-{n}.stderr"));
        let stdout = File::create(&stdout_path).expect("create the stdout capture");
        let stderr = File::create(&stderr_path).expect("create the stderr capture");
        let child = command
            .stdout(stdout)
            .stderr(stderr)
            .spawn()
            .expect("start tether exec");
        RunningExec {
            child,
            started: Instant::now(),
            stdout_path,
            stderr_path,
        }
    }

    /// Runs `tether exec` to completion (within [`DEADLINE`]).
    pub fn exec(&self, options: &[&str], argv: &[&str]) -> ExecRun {
        self.spawn_exec(options, argv).wait(self)
    }

    /// Every command directory under the state dir.
    pub fn command_dirs(&self) -> Vec<PathBuf> {
        journal::command_dirs(&self.state_dir())
    }

    /// The one command directory this test's single `tether exec` created.
    pub fn command_dir(&self) -> PathBuf {
        let dirs = self.command_dirs();
        assert_eq!(
            dirs.len(),
            1,
            "expected exactly one command journal: {dirs:?}"
        );
        dirs.into_iter().next().unwrap()
    }

    /// Waits until the single command's journal directory exists under its final name (the
    /// command is starting). The number is reserved as a bare `NN` that is then renamed to
    /// `NN-name`; its files are made after the rename, so a directory holding `events.jsonl`
    /// keeps its name.
    pub fn wait_command_dir(&self) -> PathBuf {
        wait_until(self, "the command's journal directory", || {
            let dirs = self.command_dirs();
            dirs.len() == 1 && dirs[0].join("events.jsonl").exists()
        });
        self.command_dir()
    }

    /// A failing test's world, for a post-mortem: copied into the folder `TETHER_TEST_KEEP`
    /// names, if it names one. Done when the test panics with its world still held, and by a
    /// test that reports its failures after [`TestEnv::finish`].
    pub fn keep(&self) {
        let Some(keep) = std::env::var_os("TETHER_TEST_KEEP") else {
            return;
        };
        // It holds journals: the user's alone, as the state directory is.
        {
            use std::os::unix::fs::DirBuilderExt;
            let _ = fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&keep);
        }
        let _ = Command::new("cp")
            .arg("-a")
            .arg(self.dir.path())
            .arg(Path::new(&keep).join(&self.tag))
            .status();
    }

    /// Checks that nothing the test started is still alive (with a short retry window).
    pub fn finish(self) {
        assert_none_left(&self.tag);
        cgroups::assert_none_left(&self.state_dir());
    }
}

impl Drop for TestEnv {
    fn drop(&mut self) {
        procs::kill_tagged(&self.tag);
        if std::thread::panicking() {
            self.keep();
        }
    }
}

/// A `tether exec` still running.
pub struct RunningExec {
    pub child: Child,
    pub started: Instant,
    pub stdout_path: PathBuf,
    pub stderr_path: PathBuf,
}

impl RunningExec {
    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    pub fn wait(self, env: &TestEnv) -> ExecRun {
        self.wait_within(env, DEADLINE)
    }

    /// Waits for tether exec to exit; past `timeout` kills it and everything tagged, and fails.
    pub fn wait_within(mut self, env: &TestEnv, timeout: Duration) -> ExecRun {
        let status = loop {
            match self.child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) => {}
                Err(err) => panic!("waiting for tether exec failed: {err}"),
            }
            if self.started.elapsed() > timeout {
                let _ = self.child.kill();
                let _ = self.child.wait();
                let killed = procs::kill_tagged(&env.tag);
                panic!(
                    "tether exec did not exit within {timeout:?}; killed it and {killed:?}\nstderr: {}",
                    String::from_utf8_lossy(&fs::read(&self.stderr_path).unwrap_or_default())
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        ExecRun {
            status,
            elapsed: self.started.elapsed(),
            stdout_path: self.stdout_path,
            stderr_path: self.stderr_path,
        }
    }
}

/// A finished `tether exec`.
pub struct ExecRun {
    pub status: std::process::ExitStatus,
    pub elapsed: Duration,
    pub stdout_path: PathBuf,
    pub stderr_path: PathBuf,
}

impl ExecRun {
    /// tether's exit code; fails if tether itself died of a signal.
    pub fn code(&self) -> i32 {
        self.status.code().unwrap_or_else(|| {
            panic!(
                "tether exec ended by a signal ({:?}); stderr: {}",
                self.status,
                self.stderr_text()
            )
        })
    }

    pub fn stdout(&self) -> Vec<u8> {
        fs::read(&self.stdout_path).expect("read captured stdout")
    }

    pub fn stderr(&self) -> Vec<u8> {
        fs::read(&self.stderr_path).expect("read captured stderr")
    }

    /// Captured stderr for messages; empty if it cannot be read.
    pub fn stderr_text(&self) -> String {
        String::from_utf8_lossy(&fs::read(&self.stderr_path).unwrap_or_default()).into_owned()
    }

    /// The lines `tether exec --json` printed, parsed.
    pub fn json_events(&self) -> Vec<tether::protocol::Event> {
        journal::parse_lines(&self.stdout())
    }
}

/// The socket directory tether uses under the runtime directory `runtime`
/// (`XDG_RUNTIME_DIR`): `runtime/tether`, or `tether-pidns-<inode>` when the tests run in a
/// PID namespace other than the first (a container's).
pub fn socket_dir_in(runtime: &Path) -> PathBuf {
    use tether::control::socket_dir;
    socket_dir::socket_dir_for(
        Some(runtime.as_os_str()),
        nix::unistd::geteuid().as_raw(),
        socket_dir::own_pid_namespace(),
    )
}

/// An executable script at `path` (0755), written so that no fork elsewhere makes it busy
/// (`tether::testing::write_script`).
pub fn write_script(path: &Path, text: &str) {
    tether::testing::write_script(path, text, 0o755);
}

/// A copy of the program `from` at `to` (0700), made by `cp` so that no fork elsewhere
/// makes it busy (ETXTBSY) when it is run, as [`write_script`] writes scripts.
pub fn copy_program(from: &str, to: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let copied = Command::new("cp")
        .arg(from)
        .arg(to)
        .status()
        .expect("run cp");
    assert!(copied.success(), "copy {from} to {to:?}");
    fs::set_permissions(to, fs::Permissions::from_mode(0o700)).expect("chmod 0700");
}

/// A TCP port on 127.0.0.1 that nothing listens on, for a server a test starts, kept for
/// this test process alone for its life. Taken outside the kernel's ephemeral range
/// (`ip_local_port_range`), where no program binding port 0 (a model server, an agent) is
/// given it, and reserved by a lock file other tether test processes, any user's, check
/// (two suites at once took the same free port: one test's server answered another's probe).
pub fn free_port() -> u16 {
    use nix::fcntl::{Flock, FlockArg};
    use std::os::unix::fs::PermissionsExt;
    use std::sync::Mutex;
    static HELD: Mutex<Vec<Flock<fs::File>>> = Mutex::new(Vec::new());
    // Shared by every user's suites, as /tmp is: anyone may add a lock, nobody remove
    // another's.
    let dir = std::env::temp_dir().join("tether-test-ports");
    let _ = fs::create_dir(&dir);
    // Its maker's to open to all (another user's chmod fails and changes nothing).
    let _ = fs::set_permissions(&dir, fs::Permissions::from_mode(0o1777));
    let (ports, count) = ports_outside_the_ephemeral_range();
    let offset = std::process::id() * 101;
    for i in 0..count {
        let port = (ports + (offset + i) % count) as u16;
        let path = dir.join(port.to_string());
        let created = !path.exists();
        let Ok(file) = fs::OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(false)
            .open(&path)
        else {
            continue;
        };
        if created {
            let _ = file.set_permissions(fs::Permissions::from_mode(0o666));
        }
        // Another process's (or this one's, earlier): taken.
        let Ok(held) = Flock::lock(file, FlockArg::LockExclusiveNonblock) else {
            continue;
        };
        if std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, port)).is_ok() {
            HELD.lock().unwrap_or_else(|e| e.into_inner()).push(held);
            return port;
        }
    }
    panic!("no free port among {count} from {ports}");
}

/// The first port and how many of them the kernel never gives a bind to port 0: below
/// `ip_local_port_range` (32768-60999 by default), or above it where it starts too low.
fn ports_outside_the_ephemeral_range() -> (u32, u32) {
    let range = fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok();
    let mut bounds = (range.iter()).flat_map(|r| r.split_whitespace().map(str::parse::<u32>));
    let (low, high) = match (bounds.next(), bounds.next()) {
        (Some(Ok(low)), Some(Ok(high))) => (low, high),
        _ => (32_768, 60_999),
    };
    if low >= 8_000 {
        let first = low.saturating_sub(12_000).max(2_000);
        (first, low - first)
    } else {
        (high + 1, 65_535 - high)
    }
}

/// Polls `done` every 10 ms until it holds; past [`DEADLINE`] kills everything tagged and
/// fails, naming `what` was awaited.
pub fn wait_until(env: &TestEnv, what: &str, done: impl FnMut() -> bool) {
    wait_until_within(env, DEADLINE, what, done);
}

/// [`wait_until`] for something that takes `patience` on an idle machine and longer on a
/// loaded one (a rule that needs a stretch of time to pass, then a sample to see it).
pub fn wait_until_within(
    env: &TestEnv,
    patience: Duration,
    what: &str,
    done: impl FnMut() -> bool,
) {
    waiting(env, patience, what, || None, done);
}

/// [`wait_until`], its failure also saying what `tell` finds then (the states of the
/// processes awaited, what the journal has), read before anything is killed.
pub fn wait_until_telling(
    env: &TestEnv,
    what: &str,
    tell: impl Fn() -> String,
    done: impl FnMut() -> bool,
) {
    waiting(env, DEADLINE, what, || Some(tell()), done);
}

/// The one wait under the others: `done` polled until `patience` is up, then the test's
/// processes killed and the failure said, with what `tell` finds first.
fn waiting(
    env: &TestEnv,
    patience: Duration,
    what: &str,
    tell: impl Fn() -> Option<String>,
    mut done: impl FnMut() -> bool,
) {
    let deadline = Instant::now() + patience;
    while !done() {
        if Instant::now() >= deadline {
            let told = tell().map(|t| format!(" ({t})")).unwrap_or_default();
            let killed = procs::kill_tagged(&env.tag);
            panic!("timed out after {patience:?} waiting for {what}{told}; killed {killed:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Waits until the file at `path` contains `needle`.
pub fn wait_for_text(env: &TestEnv, path: &Path, needle: &str) {
    wait_until(env, &format!("`{needle}` in {}", path.display()), || {
        fs::read(path).is_ok_and(|b| String::from_utf8_lossy(&b).contains(needle))
    });
}

/// Runs `command` (tagged, stdin from /dev/null, output captured) to its end; past
/// [`DEADLINE`] kills it and fails, naming `what`.
pub fn run_to_end(env: &TestEnv, command: Command, what: &str) -> std::process::Output {
    run_reaped(env, command, what)
}

/// [`run_to_end`], also giving the command's peak resident set in bytes, as GNU time
/// measures it. Not from the rusage this process gets back: a process forked from this one
/// starts its `ru_maxrss` at what this one held (exec keeps the larger), and the test binary,
/// running other tests on its threads, is often larger than tether. `time` is small, and the
/// figure it gives is its child's own.
pub fn run_measured(env: &TestEnv, command: Command, what: &str) -> (std::process::Output, u64) {
    static MEASURED: AtomicUsize = AtomicUsize::new(0);
    let file = env.path(&format!(
        "peak-{}",
        MEASURED.fetch_add(1, Ordering::Relaxed)
    ));
    let mut timed = Command::new("/usr/bin/time");
    timed
        .args(["-f", "%M", "-o"])
        .arg(&file)
        .arg(command.get_program())
        .args(command.get_args());
    for (key, value) in command.get_envs() {
        match value {
            Some(value) => timed.env(key, value),
            None => timed.env_remove(key),
        };
    }
    if let Some(dir) = command.get_current_dir() {
        timed.current_dir(dir);
    }
    let output = run_to_end(env, timed, what);
    // `Command exited with non-zero status N` may come first; the figure is the last line.
    let said = fs::read_to_string(&file).unwrap_or_default();
    let kib: u64 = said
        .lines()
        .last()
        .and_then(|line| line.trim().parse().ok())
        .unwrap_or_else(|| panic!("GNU time measured no peak for {what}: {said:?}"));
    (output, kib << 10)
}

/// Runs `command` to its end as [`run_to_end`] says.
fn run_reaped(env: &TestEnv, mut command: Command, what: &str) -> std::process::Output {
    let mut child = command
        .env(TAG_VAR, &env.tag)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|err| panic!("cannot start {what}: {err}"));
    // Read on threads while waiting: output past a pipe's 64 KiB would otherwise block the
    // child for ever.
    let drain = |pipe: Option<Box<dyn std::io::Read + Send>>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut bytes);
            }
            bytes
        })
    };
    let stdout = drain(child.stdout.take().map(|p| Box::new(p) as _));
    let stderr = drain(child.stderr.take().map(|p| Box::new(p) as _));
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for the child") {
            break status;
        }
        if started.elapsed() > DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} did not finish within {DEADLINE:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    std::process::Output {
        status,
        stdout: stdout.join().expect("read stdout"),
        stderr: stderr.join().expect("read stderr"),
    }
}
