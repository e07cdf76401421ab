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
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::time::Duration;

use tokio::time::Instant;

use super::keeper::{Start, TIMED_OUT, clone_with_pidfd, exit_status, keeper};

/// How long one run may take.
pub const NOTIFY_TIMEOUT: Duration = Duration::from_secs(5);
/// Runs a minute per command, at most.
pub const PER_MINUTE: usize = 3;
/// When the broker is done, how long runs still going get before they are killed.
pub const END_WAIT: Duration = Duration::from_secs(2);
/// What of its stderr a failure message quotes.
const STDERR_QUOTED: usize = 200;

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
        if let Some(err) = crate::broker::spawn::clone_into::read_report(&report_read) {
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
        assert!(n.running.is_empty(), "a run still going after 10 s");
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
