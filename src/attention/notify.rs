//! Running the `[notify] command` for an attention event: the event as one JSON object on its
//! stdin, bounded, and out of the command's way.
//!
//! - Bounded: killed after [`NOTIFY_TIMEOUT`]; at most [`PER_MINUTE`] runs a minute per
//!   command (the others are skipped: the journal has every event anyway); once it fails
//!   (cannot start, times out, exits non-zero) that is journaled once and it is not run again
//!   for this command, so a broken one never runs in a loop.
//! - Out of the command's way: it is the broker's child, not the command's, so it is in the
//!   broker's cgroup (never the command's), in a session of its own, with its own stdio
//!   (the event on stdin, stdout to /dev/null, stderr to a pipe read for the failure message),
//!   and the tree walk leaves it out.
//! - Never mistaken for a command process: the broker reaps with `waitid(P_ALL)`, which would
//!   take it for an orphan of the command. So the broker's child is a keeper started with
//!   `clone3` and no exit signal: a "clone" child, which a wait without `__WCLONE` never sees
//!   (exec would make it an ordinary child again, so the keeper never execs). The keeper
//!   starts the notify command as its own child, waits for it (killing it at the timeout),
//!   says how it ended on a pipe, and exits; the broker reaps the keeper through its pidfd.
//!   The command is never orphaned to the broker: the keeper outlives it, and dies with it.
//! - Never blocking the loop: starting it waits only for its exec; its end is looked at when
//!   the broker wakes anyway, and at its deadline, the one wake-up it adds.

use std::collections::VecDeque;
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::time::Duration;

use tokio::time::Instant;

/// How long one run may take.
pub const NOTIFY_TIMEOUT: Duration = Duration::from_secs(5);
/// Runs a minute per command, at most.
pub const PER_MINUTE: usize = 3;
/// When the broker is done, how long runs still going get before they are killed.
pub const END_WAIT: Duration = Duration::from_secs(2);
/// What of its stderr a failure message quotes.
const STDERR_QUOTED: usize = 200;

/// The kernel's `struct clone_args`, version 0 (64 bytes): all this needs.
#[repr(C)]
#[derive(Default)]
struct CloneArgs {
    flags: u64,
    pidfd: u64,
    child_tid: u64,
    parent_tid: u64,
    exit_signal: u64,
    stack: u64,
    stack_size: u64,
    tls: u64,
}

const CLONE_PIDFD: u64 = 0x1000;

/// The keeper's word when the notify command timed out (never a wait status).
const TIMED_OUT: u32 = u32::MAX;

struct Running {
    /// The keeper's.
    pid: i32,
    pidfd: OwnedFd,
    /// A backstop past the keeper's own timeout.
    deadline: Instant,
    stderr: OwnedFd,
    /// The keeper writes the notify command's wait status here, or [`TIMED_OUT`].
    verdict: OwnedFd,
}

/// The notify command of one command's broker.
pub struct Notifier {
    shown: String,
    program: CString,
    argv: Vec<CString>,
    envp: Vec<CString>,
    running: Vec<Running>,
    /// When the runs of the last minute started.
    started: VecDeque<Instant>,
    given_up: bool,
}

impl Notifier {
    /// `None` for an empty command (or one with a NUL, which no exec takes).
    pub fn new(argv: &[String]) -> Option<Notifier> {
        let program = CString::new(argv.first()?.as_bytes()).ok()?;
        let argv = argv
            .iter()
            .map(|a| CString::new(a.as_bytes()).ok())
            .collect::<Option<Vec<_>>>()?;
        // The broker's environment, less what marks a broker: a notify command that runs
        // tether must not take itself for one.
        let envp = std::env::vars_os()
            .filter(|(k, _)| k != crate::broker::BROKER_ENV && k != crate::broker::BROKER_TOKEN_ENV)
            .filter_map(|(k, v)| CString::new([k.as_bytes(), b"=", v.as_bytes()].concat()).ok())
            .collect();
        Some(Notifier {
            shown: argv[0].to_string_lossy().into_owned(),
            program,
            argv,
            envp,
            running: Vec::new(),
            started: VecDeque::new(),
            given_up: false,
        })
    }

    /// The pids of runs still going, which the tree walk leaves out.
    pub fn pids(&self) -> Vec<i32> {
        self.running.iter().map(|r| r.pid).collect()
    }

    /// The earliest deadline of a run still going.
    pub fn deadline(&self) -> Option<Instant> {
        self.running.iter().map(|r| r.deadline).min()
    }

    /// Runs it with `payload` on its stdin, unless the minute's runs are spent or it failed
    /// before. `Err`: it could not start (given up since, journaled once by the caller).
    pub fn send(&mut self, now: Instant, payload: &[u8]) -> Result<(), String> {
        if self.given_up {
            return Ok(());
        }
        while self
            .started
            .front()
            .is_some_and(|at| now.saturating_duration_since(*at) >= Duration::from_secs(60))
        {
            self.started.pop_front();
        }
        if self.started.len() >= PER_MINUTE {
            return Ok(());
        }
        self.started.push_back(now);
        match self.spawn(payload) {
            Ok(running) => {
                self.running.push(Running {
                    deadline: now + NOTIFY_TIMEOUT + Duration::from_secs(1),
                    ..running
                });
                Ok(())
            }
            Err(err) => Err(self.give_up(format!("cannot run `{}`: {err}", self.shown))),
        }
    }

    /// Reaps runs that ended and kills those past their deadline; the first failure, once.
    pub fn poll(&mut self, now: Instant) -> Option<String> {
        let mut failure = None;
        let mut index = 0;
        while index < self.running.len() {
            let run = &self.running[index];
            if exit_status(&run.pidfd, false).is_none() {
                if now < run.deadline {
                    index += 1;
                    continue;
                }
                // The keeper itself is stuck: the backstop.
                let _ =
                    rustix::process::pidfd_send_signal(&run.pidfd, rustix::process::Signal::KILL);
                let _ = exit_status(&run.pidfd, true);
            }
            let run = self.running.swap_remove(index);
            let mut word = [0u8; 4];
            let verdict = match rustix::io::read(&run.verdict, &mut word) {
                Ok(4) => Some(u32::from_ne_bytes(word)),
                _ => None,
            };
            let message = match verdict {
                Some(0) => None,
                Some(TIMED_OUT) => Some(format!(
                    "`{}` did not finish within {}s and was killed",
                    self.shown,
                    NOTIFY_TIMEOUT.as_secs()
                )),
                Some(status) => Some(format!(
                    "`{}` {}{}",
                    self.shown,
                    describe_status(status as i32),
                    quoted_stderr(&run.stderr)
                )),
                None => Some(format!("`{}` was killed before it finished", self.shown)),
            };
            if let Some(message) = message {
                failure.get_or_insert(message);
            }
        }
        let failure = failure?;
        (!self.given_up).then(|| self.give_up(failure))
    }

    /// The broker is done: runs still going get until [`END_WAIT`] to finish (a `failed`
    /// sent just now is the one that matters most), then are killed.
    pub fn wind_down(&mut self) -> Option<String> {
        let until = Instant::now() + END_WAIT;
        let mut failure = None;
        while !self.running.is_empty() {
            let now = Instant::now();
            if let Some(message) = self.poll(now.min(until)) {
                failure = Some(message);
            }
            if now >= until {
                for run in &mut self.running {
                    run.deadline = now;
                }
                if let Some(message) = self.poll(now) {
                    failure = Some(message);
                }
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        failure
    }

    fn give_up(&mut self, message: String) -> String {
        self.given_up = true;
        format!("{message}; not run again for this command")
    }

    /// Starts a run: the keeper, which starts the notify command.
    fn spawn(&self, payload: &[u8]) -> io::Result<Running> {
        use rustix::pipe::{PipeFlags, pipe_with};
        let (stdin_read, stdin_write) = pipe_with(PipeFlags::CLOEXEC)?;
        let (stderr_read, stderr_write) = pipe_with(PipeFlags::CLOEXEC | PipeFlags::NONBLOCK)?;
        let (report_read, report_write) = pipe_with(PipeFlags::CLOEXEC)?;
        let (verdict_read, verdict_write) = pipe_with(PipeFlags::CLOEXEC | PipeFlags::NONBLOCK)?;
        let null = std::fs::OpenOptions::new().write(true).open("/dev/null")?;
        let pointers = |list: &[CString]| {
            let mut p: Vec<*const libc::c_char> = list.iter().map(|s| s.as_ptr()).collect();
            p.push(std::ptr::null());
            p
        };
        let argv = pointers(&self.argv);
        let envp = pointers(&self.envp);
        let start = Start {
            program: &self.program,
            argv: &argv,
            envp: &envp,
            stdio: [
                stdin_read.as_raw_fd(),
                null.as_raw_fd(),
                stderr_write.as_raw_fd(),
            ],
            report: report_write.as_raw_fd(),
            verdict: verdict_write.as_raw_fd(),
            broker: std::process::id() as i32,
        };
        // No exit signal: a "clone" child, invisible to the broker's `waitid(P_ALL)`.
        let Some((pid, pidfd)) = clone_with_pidfd(0)? else {
            // SAFETY: in the keeper; raw system calls only, never returns.
            unsafe { keeper(&start) }
        };
        drop((report_write, verdict_write, stdin_read, stderr_write, null));
        if let Some(err) = read_report(&report_read) {
            let _ = exit_status(&pidfd, true);
            return Err(err);
        }
        // Far below a pipe's capacity (the caller bounds it): written at once, never waited
        // on. A run that exits without reading it gets EPIPE here, ignored.
        let _ = rustix::io::write(&stdin_write, payload);
        Ok(Running {
            pid,
            pidfd,
            deadline: Instant::now(),
            stderr: stderr_read,
            verdict: verdict_read,
        })
    }
}

/// `clone3` as fork, with a pidfd and this exit signal: the child's pid and pidfd in the
/// parent, `None` in the child.
fn clone_with_pidfd(exit_signal: u64) -> io::Result<Option<(i32, OwnedFd)>> {
    let mut pidfd: RawFd = -1;
    let args = CloneArgs {
        flags: CLONE_PIDFD,
        pidfd: &mut pidfd as *mut RawFd as u64,
        exit_signal,
        ..CloneArgs::default()
    };
    // SAFETY: `args` is a valid clone_args of the size given. Without CLONE_VM and with no
    // stack the child runs on a copy of our memory, as after fork; the broker is
    // single-threaded, so no lock is held by a thread missing in the child, and the child
    // makes raw system calls only.
    let pid = unsafe {
        libc::syscall(
            libc::SYS_clone3,
            &args as *const CloneArgs,
            std::mem::size_of::<CloneArgs>(),
        )
    };
    match pid {
        p if p < 0 => Err(io::Error::last_os_error()),
        0 => Ok(None),
        // SAFETY: clone3 with CLONE_PIDFD wrote a new descriptor, ours alone.
        p => Ok(Some((p as i32, unsafe { OwnedFd::from_raw_fd(pidfd) }))),
    }
}

/// What the keeper and the notify command need, prepared before the clone.
struct Start<'a> {
    program: &'a CString,
    argv: &'a [*const libc::c_char],
    envp: &'a [*const libc::c_char],
    stdio: [RawFd; 3],
    report: RawFd,
    verdict: RawFd,
    broker: i32,
}

/// A child's wait status once it ended (`wait`: block until then), `None` while it runs.
/// Through its pidfd, with `__WALL`: the keeper has no exit signal, the notify command has.
fn exit_status(pidfd: &OwnedFd, wait: bool) -> Option<i32> {
    // SAFETY: a zeroed siginfo_t is a valid value; waitid only writes into it.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    let flags = libc::WEXITED | libc::__WALL | if wait { 0 } else { libc::WNOHANG };
    loop {
        // SAFETY: waitid writes only into `info`.
        let r = unsafe {
            libc::waitid(
                libc::P_PIDFD,
                pidfd.as_raw_fd() as libc::id_t,
                &mut info,
                flags,
            )
        };
        if r < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
            continue;
        }
        if r < 0 {
            // Gone already (reaped): nothing more to learn.
            return Some(0);
        }
        break;
    }
    // SAFETY: filled in by waitid for a child that ended; 0 while it runs.
    if unsafe { info.si_pid() } == 0 {
        return None;
    }
    // SAFETY: as above.
    let status = unsafe { info.si_status() };
    Some(match info.si_code {
        libc::CLD_EXITED => status << 8,
        _ => status & 0x7f,
    })
}

/// `status` as `waitpid` would give it.
fn describe_status(status: i32) -> String {
    if libc::WIFEXITED(status) {
        format!("exited with status {}", libc::WEXITSTATUS(status))
    } else {
        let signal = libc::WTERMSIG(status);
        match nix::sys::signal::Signal::try_from(signal) {
            Ok(signal) => format!("was killed by {}", signal.as_str()),
            Err(_) => format!("was killed by signal {signal}"),
        }
    }
}

/// The first of what it wrote to stderr, for the message.
fn quoted_stderr(stderr: &OwnedFd) -> String {
    let mut buf = [0u8; STDERR_QUOTED];
    let n = rustix::io::read(stderr, &mut buf).unwrap_or(0);
    let text = String::from_utf8_lossy(&buf[..n]);
    let text = text.trim();
    if text.is_empty() {
        String::new()
    } else {
        format!(": {}", text.lines().next().unwrap_or(text))
    }
}

/// The child's errno, if it wrote one before exec closed the pipe.
fn read_report(pipe: &OwnedFd) -> Option<io::Error> {
    let mut buf = [0u8; 4];
    loop {
        match rustix::io::read(pipe, &mut buf) {
            Ok(4) => return Some(io::Error::from_raw_os_error(i32::from_ne_bytes(buf))),
            Ok(_) => return None,
            Err(rustix::io::Errno::INTR) => continue,
            Err(err) => return Some(err.into()),
        }
    }
}

unsafe extern "C" {
    static mut environ: *const *const libc::c_char;
}

/// Writes an errno to the report pipe and exits: the broker says the command could not run.
unsafe fn fail(report: RawFd, errno: i32) -> ! {
    let bytes = errno.to_ne_bytes();
    // SAFETY: raw write and _exit; `bytes` lives on this stack.
    unsafe {
        libc::write(report, bytes.as_ptr().cast(), bytes.len());
        libc::_exit(127)
    }
}

fn errno() -> i32 {
    io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

/// The keeper: a copy of the broker that never execs (it would stop being a "clone" child).
/// Raw system calls only, no allocation, no lock, until it exits.
unsafe fn keeper(start: &Start<'_>) -> ! {
    // SAFETY: raw system calls on descriptors and C strings valid in this copy of memory.
    unsafe {
        // No signal handler of the broker's runs here; SIGKILL still does.
        let mut all: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::sigprocmask(libc::SIG_SETMASK, &all, std::ptr::null_mut());
        libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGKILL as libc::c_ulong,
            0,
            0,
            0,
        );
        if libc::getppid() != start.broker {
            libc::_exit(1);
        }
        // A session of its own, which the notify command shares: no signal meant for the
        // command's group reaches either.
        libc::setsid();
        // The notify command's stdio as the keeper's own, then nothing else of the broker's
        // held open (its event pipe, the command's terminal) while it runs.
        for (target, &source) in start.stdio.iter().enumerate() {
            if libc::dup2(source, target as RawFd) < 0 {
                fail(start.report, errno());
            }
        }
        let (low, high) = if start.report < start.verdict {
            (start.report, start.verdict)
        } else {
            (start.verdict, start.report)
        };
        libc::syscall(libc::SYS_close_range, 3, low - 1, 0);
        libc::syscall(libc::SYS_close_range, low + 1, high - 1, 0);
        libc::syscall(libc::SYS_close_range, high + 1, u32::MAX, 0);
        let keeper = libc::getpid();
        let pidfd = match clone_with_pidfd(libc::SIGCHLD as u64) {
            Ok(Some((_, pidfd))) => pidfd,
            Ok(None) => notify_command(start, keeper),
            Err(err) => fail(start.report, err.raw_os_error().unwrap_or(libc::EIO)),
        };
        libc::close(start.report);
        let mut poll = libc::pollfd {
            fd: pidfd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let word = if libc::poll(&mut poll, 1, NOTIFY_TIMEOUT.as_millis() as i32) == 0 {
            let _ = rustix::process::pidfd_send_signal(&pidfd, rustix::process::Signal::KILL);
            let _ = exit_status(&pidfd, true);
            TIMED_OUT
        } else {
            exit_status(&pidfd, true).unwrap_or(0) as u32
        };
        let bytes = word.to_ne_bytes();
        libc::write(start.verdict, bytes.as_ptr().cast(), bytes.len());
        libc::_exit(0)
    }
}

/// The notify command, from the keeper's clone to exec.
unsafe fn notify_command(start: &Start<'_>, keeper: i32) -> ! {
    // SAFETY: raw system calls on descriptors and C strings valid in this copy of memory.
    unsafe {
        libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGKILL as libc::c_ulong,
            0,
            0,
            0,
        );
        if libc::getppid() != keeper {
            libc::_exit(1);
        }
        if let Err(err) = crate::broker::spawn::signals::reset_in_child() {
            fail(start.report, err.raw_os_error().unwrap_or(libc::EIO));
        }
        environ = start.envp.as_ptr();
        libc::execvp(start.program.as_ptr(), start.argv.as_ptr());
        fail(start.report, errno())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn notifier(script: &str) -> Notifier {
        Notifier::new(&["sh".into(), "-c".into(), script.into()]).unwrap()
    }

    fn finish(n: &mut Notifier) -> Option<String> {
        let until = Instant::now() + Duration::from_secs(10);
        let mut failure = None;
        while !n.running.is_empty() && Instant::now() < until {
            failure = failure.or(n.poll(Instant::now()));
            std::thread::sleep(Duration::from_millis(10));
        }
        failure
    }

    #[test]
    fn it_gets_the_payload_on_stdin_and_is_no_child_a_plain_wait_sees() {
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("got");
        let mut n = notifier(&format!("cat > {}", out.display()));
        n.send(Instant::now(), b"{\"kind\":\"needs_input\"}\n")
            .unwrap();
        let pid = n.pids()[0];
        // SAFETY: waitpid on a pid; nothing else is written.
        let seen = unsafe { libc::waitpid(pid, std::ptr::null_mut(), libc::WNOHANG) };
        assert_eq!(seen, -1, "a plain waitpid must not see it");
        assert_eq!(finish(&mut n), None);
        assert_eq!(
            std::fs::read_to_string(&out).unwrap(),
            "{\"kind\":\"needs_input\"}\n"
        );
    }

    #[test]
    fn a_missing_program_fails_once_and_is_not_run_again() {
        let mut n = Notifier::new(&["/nonexistent/notify-me".into()]).unwrap();
        let err = n.send(Instant::now(), b"{}").unwrap_err();
        assert!(err.contains("cannot run `/nonexistent/notify-me`"), "{err}");
        assert!(err.contains("not run again"), "{err}");
        assert_eq!(n.send(Instant::now(), b"{}"), Ok(()));
        assert!(n.pids().is_empty());
    }

    #[test]
    fn a_failing_one_is_quoted_and_a_hanging_one_killed() {
        let mut n = notifier("echo 'no route to ntfy' >&2; exit 4");
        n.send(Instant::now(), b"{}").unwrap();
        let failure = finish(&mut n).unwrap();
        assert!(failure.contains("exited with status 4"), "{failure}");
        assert!(failure.contains("no route to ntfy"), "{failure}");

        let mut n = notifier("sleep 30");
        let start = Instant::now();
        n.send(start, b"{}").unwrap();
        let keeper = n.pids()[0];
        assert_eq!(n.poll(start), None);
        let failure = finish(&mut n).unwrap();
        assert!(failure.contains("did not finish within 5s"), "{failure}");
        assert!(start.elapsed() < NOTIFY_TIMEOUT + Duration::from_secs(1));
        assert!(n.pids().is_empty());
        assert!(crate::procfs::is_gone(keeper));
    }

    #[test]
    fn at_most_a_few_runs_a_minute() {
        let mut n = notifier("cat >/dev/null");
        let start = Instant::now();
        for i in 0..10 {
            n.send(start + Duration::from_secs(i), b"{}").unwrap();
        }
        assert_eq!(n.running.len(), PER_MINUTE);
        assert_eq!(finish(&mut n), None);
        n.send(start + Duration::from_secs(61), b"{}").unwrap();
        assert_eq!(n.running.len(), 1);
        assert_eq!(finish(&mut n), None);
    }
}
