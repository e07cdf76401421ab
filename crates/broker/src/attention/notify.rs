//! Running the `[notify] command` for an attention event: the event as one JSON object on its
//! stdin, bounded, and out of the command's way.
//!
//! - Bounded: killed after [`NOTIFY_TIMEOUT`], with all it started; at most [`PER_MINUTE`]
//!   runs a minute per command (the others are skipped: the journal has every event anyway),
//!   and at most `rate::RUNS_PER_WINDOW` a minute for all of the user's brokers (the others
//!   are counted, and told with the next run that starts); once it fails (cannot start,
//!   times out, exits non-zero) that is journaled once and it is not run again for this
//!   command, so a broken one never runs in a loop.
//! - Outside the shims: no `TETHER_*` variable and no shims directory on its PATH
//!   (`tether_os::shims::this_environment_outside`), so nothing it runs is brokered, or notifies.
//! - Out of the command's way: it is the broker's child, not the command's, so it is in the
//!   broker's cgroup (never the command's), in a session of its own, with its own stdio
//!   (the event on stdin, stdout to /dev/null, stderr to a pipe read for the failure message),
//!   and the tree walk leaves it out.
//! - Never mistaken for a command process: the broker reaps with `waitid(P_ALL)`, which would
//!   take it for an orphan of the command. So the broker's child is a keeper started with
//!   `clone3` and no exit signal: a "clone" child, which a wait without `__WCLONE` never sees
//!   (exec would make it an ordinary child again, so the keeper never execs). The keeper
//!   starts the notify command as its own child, waits for it (killing it at the timeout),
//!   ends whatever it left (a subreaper, the keeper adopts its orphans and kills them: a
//!   `setsid` child goes too), says how it ended on a pipe, and exits; the broker reaps the
//!   keeper through its pidfd while it runs.
//! - Never delaying the command or blocking the loop: starting it waits only for its exec;
//!   the event is written without blocking (bounded far below a pipe's buffer by the
//!   caller); its end is looked at when the broker wakes anyway, and at its deadline, the one
//!   wake-up it adds. When the broker is done it does not wait for runs still going
//!   ([`Notifier::let_go`]): their keepers finish them on their own deadline, so a notify
//!   program that takes a second never holds the command's return.
//! - Decided in the state machine, done by the interpreter: [`NotifyPolicy`] (the broker's
//!   state) says when a run may start and when one is overdue; [`Notifier`] (the
//!   interpreter's) starts, looks at and kills runs when told, and its answers go back to the
//!   machine as inputs.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;

use super::keeper::{Start, TIMED_OUT, clone_with_pidfd, exit_status, keeper};
use super::rate::{Held, Verdict};
use super::rate_file::RateFile;
pub use tether_core::attention::notify_policy::{
    NOTIFY_TIMEOUT, NotifyPolicy, PER_MINUTE, runnable,
};
use tether_protocol::protocol::AttentionKind;

/// What of its stderr a failure message quotes.
const STDERR_QUOTED: usize = 200;

struct Running {
    /// The keeper's.
    pid: i32,
    pidfd: OwnedFd,
    stderr: OwnedFd,
    /// The keeper writes the notify command's wait status here, or [`TIMED_OUT`].
    verdict: OwnedFd,
}

/// The notify command of one command's broker, as the interpreter runs it: the runs going
/// and their descriptors. What to run when is [`NotifyPolicy`]'s to say.
pub struct Notifier {
    /// The user's rate across all brokers; `None`: this broker's own limit only.
    rate: Option<RateFile>,
    shown: String,
    program: CString,
    argv: Vec<CString>,
    envp: Vec<CString>,
    running: Vec<Running>,
    /// How long a run may take: [`NOTIFY_TIMEOUT`] but in the tests of the keeper.
    timeout: std::time::Duration,
}

impl Notifier {
    /// `None` for a command that is not [`runnable`]. `rate`: where the user's rate is kept.
    pub fn new(argv: &[String], rate: Option<RateFile>) -> Option<Notifier> {
        if !runnable(argv) {
            return None;
        }
        let program = CString::new(argv.first()?.as_bytes()).ok()?;
        let argv = argv
            .iter()
            .map(|a| CString::new(a.as_bytes()).ok())
            .collect::<Option<Vec<_>>>()?;
        // The broker's environment outside the shims: no `TETHER_*` variable (a notify
        // command that runs tether must not take itself for a broker, or join the session)
        // and no shims directory on PATH (its `sh` would be the shim: brokered, and a
        // failing run would notify again, for ever).
        let envp = tether_os::shims::this_environment_outside()
            .into_iter()
            .filter_map(|(k, v)| CString::new([k.as_bytes(), b"=", v.as_bytes()].concat()).ok())
            .collect();
        Some(Notifier {
            rate,
            shown: argv[0].to_string_lossy().into_owned(),
            program,
            argv,
            envp,
            running: Vec::new(),
            timeout: NOTIFY_TIMEOUT,
        })
    }

    /// Starts a run for an event of `kind` at `at_ms` with `payload` (and what the user's
    /// rate held back before it) on its stdin, unless the rate holds this one back
    /// (`Ok(None)`): the keeper's pid, or why it could not start. A rate file that cannot
    /// be used (not private, unwritable) holds nothing back: the broker's own limit stays.
    pub fn notify(
        &mut self,
        kind: AttentionKind,
        at_ms: u64,
        mut payload: serde_json::Value,
    ) -> Result<Option<i32>, String> {
        let verdict = self
            .rate
            .as_ref()
            .and_then(|rate| rate.admit(kind, at_ms).ok());
        let Verdict::Run { held } = verdict.unwrap_or(Verdict::Run { held: None }) else {
            return Ok(None);
        };
        if let (Some(held), Some(fields)) = (held, payload.as_object_mut()) {
            fields.insert("held_back".into(), held_back(&held));
        }
        let mut line = serde_json::to_vec(&payload).unwrap_or_default();
        line.push(b'\n');
        self.start(&line).map(Some)
    }

    /// Starts a run with `payload` on its stdin: the keeper's pid, or why it could not start.
    pub fn start(&mut self, payload: &[u8]) -> Result<i32, String> {
        let running =
            (self.spawn(payload)).map_err(|err| format!("cannot run `{}`: {err}", self.shown))?;
        let pid = running.pid;
        self.running.push(running);
        Ok(pid)
    }

    /// Takes the runs that ended, killing first those in `kill` (past their deadline: the
    /// keeper itself is stuck); each with its failure, `None` when it did its job.
    pub fn check(&mut self, kill: &[i32]) -> Vec<(i32, Option<String>)> {
        let ended: Vec<Running> = (self.running.extract_if(.., |run| {
            if exit_status(&run.pidfd, false).is_some() {
                return true;
            }
            if !kill.contains(&run.pid) {
                return false;
            }
            // The keeper leads its own group (its `setsid`), which the notify command and
            // whatever it started share: all of it goes, not the keeper alone (its
            // children's children would be re-parented to the broker, which reaps the
            // command's tree). The keeper is unreaped, so its pid names no other group.
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(run.pid),
                nix::sys::signal::Signal::SIGKILL,
            );
            // rustix: nix has no pidfds.
            let _ = rustix::process::pidfd_send_signal(&run.pidfd, rustix::process::Signal::KILL);
            let _ = exit_status(&run.pidfd, true);
            true
        }))
        .collect();
        (ended.iter())
            .map(|run| (run.pid, self.failure(run)))
            .collect()
    }

    /// The broker is done: the runs that ended, each with its failure; the others are let
    /// go, never waited for (the command's return does not wait on a notification), and end
    /// on their keeper's own deadline, with whatever they started.
    pub fn let_go(&mut self) -> Vec<(i32, Option<String>)> {
        let ended = self.check(&[]);
        // Dropping a run closes its descriptors only: the keeper's verdict, written later,
        // meets a closed pipe, which it ignores.
        self.running.clear();
        ended
    }

    /// How run `run`, ended, went: its verdict read from the keeper.
    fn failure(&self, run: &Running) -> Option<String> {
        match read_word(&run.verdict) {
            Some(0) => None,
            Some(TIMED_OUT) => Some(format!(
                "`{}` did not finish within {:?} and was killed",
                self.shown, self.timeout
            )),
            Some(status) => Some(format!(
                "`{}` {}{}",
                self.shown,
                describe_status(status as i32),
                quoted_stderr(&run.stderr)
            )),
            None => Some(format!("`{}` was killed before it finished", self.shown)),
        }
    }

    /// Starts a run: the keeper, which starts the notify command.
    fn spawn(&self, payload: &[u8]) -> io::Result<Running> {
        use nix::fcntl::OFlag;
        use nix::unistd::pipe2;
        let (stdin_read, stdin_write) = pipe2(OFlag::O_CLOEXEC)?;
        // Never waited on: the notify program reads its end as it likes.
        nix::fcntl::fcntl(
            &stdin_write,
            nix::fcntl::FcntlArg::F_SETFL(OFlag::O_NONBLOCK),
        )?;
        let (stderr_read, stderr_write) = pipe2(OFlag::O_CLOEXEC | OFlag::O_NONBLOCK)?;
        let (report_read, report_write) = pipe2(OFlag::O_CLOEXEC)?;
        let (verdict_read, verdict_write) = pipe2(OFlag::O_CLOEXEC | OFlag::O_NONBLOCK)?;
        let null = std::fs::OpenOptions::new().write(true).open("/dev/null")?;
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
            stderr_reader: stderr_read.as_raw_fd(),
            broker: std::process::id() as i32,
            timeout_ms: self.timeout.as_millis() as i32,
            cancel: -1,
            cwd: None,
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
        // on (a pipe made smaller than it, a user over their pipe quota, gets what fits). A
        // run that exits without reading it gets EPIPE here, ignored.
        let _ = nix::unistd::write(&stdin_write, payload);
        Ok(Running {
            pid,
            pidfd,
            stderr: stderr_read,
            verdict: verdict_read,
        })
    }
}

/// `list` as exec takes it: pointers to each string, then a null one. The keeper's `Start`
/// borrows them, for a notify run and for a readiness probe's `exec` try alike.
pub(crate) fn pointers(list: &[CString]) -> Vec<*const std::ffi::c_char> {
    list.iter()
        .map(|s| s.as_ptr())
        .chain([std::ptr::null()])
        .collect()
}

/// The 4-byte word a keeper writes on a pipe (a verdict, an errno), read without waiting;
/// `None` when it wrote none.
pub(crate) fn read_word(pipe: &OwnedFd) -> Option<u32> {
    let mut word = [0u8; 4];
    match nix::unistd::read(pipe, &mut word) {
        Ok(4) => Some(u32::from_ne_bytes(word)),
        _ => None,
    }
}

/// The events the user's rate held back, as the payload's `held_back` field tells them.
fn held_back(held: &Held) -> serde_json::Value {
    serde_json::json!({
        "count": held.total(),
        "text": held.text(),
        "from": tether_protocol::units::iso_utc(held.first_ms),
        "to": tether_protocol::units::iso_utc(held.last_ms),
    })
}

/// `status` as `waitpid` would give it: an exit or a killing signal (the keeper waits for
/// nothing else).
fn describe_status(status: i32) -> String {
    use nix::sys::wait::WaitStatus;
    // The pid is no part of the message: any stands in.
    match WaitStatus::from_raw(nix::unistd::Pid::from_raw(0), status) {
        Ok(WaitStatus::Exited(_, code)) => format!("exited with status {code}"),
        Ok(WaitStatus::Signaled(_, signal, _)) => format!("was killed by {}", signal.as_str()),
        // nix's `Signal` has no real-time signals, so it refuses their statuses: the number
        // then, through libc's macro.
        _ => format!("was killed by signal {}", libc::WTERMSIG(status)),
    }
}

/// The first of what it wrote to stderr, for the message.
fn quoted_stderr(stderr: &OwnedFd) -> String {
    let mut buf = [0u8; STDERR_QUOTED];
    let n = nix::unistd::read(stderr, &mut buf).unwrap_or(0);
    let text = String::from_utf8_lossy(&buf[..n]);
    let first_line = text.trim().lines().next();
    first_line.map_or_else(String::new, |line| format!(": {line}"))
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;

    impl Notifier {
        /// The pids of runs still going.
        fn pids(&self) -> Vec<i32> {
            self.running.iter().map(|r| r.pid).collect()
        }
    }

    fn notifier(script: &str) -> Notifier {
        Notifier::new(&["sh".into(), "-c".into(), script.into()], None).unwrap()
    }

    /// Every run's end, as the interpreter sees them: looked at until none is left.
    fn finish(n: &mut Notifier) -> Vec<(i32, Option<String>)> {
        let until = std::time::Instant::now() + Duration::from_secs(10);
        let mut ended = Vec::new();
        while !n.running.is_empty() && std::time::Instant::now() < until {
            ended.extend(n.check(&[]));
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(n.running.is_empty(), "a run still going after 10 s");
        ended
    }

    fn failures(ended: Vec<(i32, Option<String>)>) -> Vec<String> {
        ended.into_iter().filter_map(|e| e.1).collect()
    }

    #[test]
    fn it_gets_the_payload_on_stdin_and_is_no_child_a_plain_wait_sees() {
        let tmp = tether_os::testing::private_tempdir();
        let out = tmp.path().join("got");
        let mut n = notifier(&format!("cat > {}", out.display()));
        let pid = n.start(b"{\"kind\":\"needs_input\"}\n").unwrap();
        assert_eq!(n.pids(), [pid]);
        use nix::sys::wait::{WaitPidFlag, waitpid};
        let seen = waitpid(nix::unistd::Pid::from_raw(pid), Some(WaitPidFlag::WNOHANG));
        assert_eq!(
            seen,
            Err(nix::errno::Errno::ECHILD),
            "a plain waitpid must not see it"
        );
        assert_eq!(finish(&mut n), [(pid, None)]);
        assert_eq!(
            std::fs::read_to_string(&out).unwrap(),
            "{\"kind\":\"needs_input\"}\n"
        );
    }

    #[test]
    fn a_status_is_worded_and_a_real_time_signal_named_by_number() {
        assert_eq!(describe_status(3 << 8), "exited with status 3");
        assert_eq!(describe_status(15), "was killed by SIGTERM");
        // Signal 36, real-time, which nix's `Signal` cannot hold.
        assert_eq!(describe_status(36), "was killed by signal 36");
    }

    #[test]
    fn a_missing_program_cannot_start_and_the_policy_gives_up() {
        let mut n = Notifier::new(&["/nonexistent/notify-me".into()], None).unwrap();
        let err = n.start(b"{}").unwrap_err();
        assert!(err.contains("cannot run `/nonexistent/notify-me`"), "{err}");
        assert!(n.pids().is_empty());
        let mut policy = NotifyPolicy::default();
        assert!(policy.admit(Instant::now()));
        let journaled = policy.start_failed(err);
        assert!(journaled.contains("not run again"), "{journaled}");
        assert!(!policy.admit(Instant::now()), "never run again");
    }

    #[test]
    fn a_failing_one_is_quoted_and_a_hanging_one_killed() {
        let mut n = notifier("echo 'no route to ntfy' >&2; exit 4");
        n.start(b"{}").unwrap();
        let failure = failures(finish(&mut n)).remove(0);
        assert!(failure.contains("exited with status 4"), "{failure}");
        assert!(failure.contains("no route to ntfy"), "{failure}");

        let tmp = tether_os::testing::private_tempdir();
        let named = tmp.path().join("setsid.pid");
        let mut n = notifier(&escaping_then(&named, "sleep 30"));
        // The keeper's own clock, shortened (but long enough for the `setsid` child to
        // name itself on a loaded machine): the broker's deadline is the policy's, tested on
        // a simulated clock below.
        n.timeout = Duration::from_secs(2);
        let keeper = n.start(b"{}").unwrap();
        assert_eq!(n.check(&[]), []);
        let escapee = pid_in(&named);
        let failure = failures(finish(&mut n)).remove(0);
        // Ended at its timeout (the failure says so), not when its `sleep 30` would have.
        assert!(failure.contains("did not finish within 2s"), "{failure}");
        assert!(n.pids().is_empty());
        assert!(tether_os::procfs::is_gone(keeper));
        assert!(
            gone_soon(escapee),
            "an overdue run ends with all it started"
        );
    }

    /// A notify command that leaves a process of its own (a `sleep` in the background) and
    /// waits for it, and the file that names that process once it runs.
    fn leaving_a_sleep() -> (Notifier, tempfile::TempDir, std::path::PathBuf) {
        let tmp = tether_os::testing::private_tempdir();
        let named = tmp.path().join("sleep.pid");
        let n = notifier(&format!("sleep 30 & echo $! > {}; wait", named.display()));
        (n, tmp, named)
    }

    /// A script that starts a `sleep` in a session of its own, which writes its pid to
    /// `named` once there, waits for that, then runs `rest`.
    fn escaping_then(named: &std::path::Path, rest: &str) -> String {
        format!(
            "setsid sh -c 'echo $$ > {named}; exec sleep 30' & while [ ! -s {named} ]; do sleep 0.01; done; {rest}",
            named = named.display()
        )
    }

    /// Whether `pid` is gone within a few seconds (a zombie counts as gone).
    fn gone_soon(pid: i32) -> bool {
        let until = std::time::Instant::now() + Duration::from_secs(5);
        while !tether_os::procfs::is_gone(pid) {
            if std::time::Instant::now() >= until {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        true
    }

    /// The pid written to `named`, once it is there.
    fn pid_in(named: &std::path::Path) -> i32 {
        let until = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(pid) = std::fs::read_to_string(named)
                .ok()
                .and_then(|t| t.trim().parse().ok())
            {
                return pid;
            }
            assert!(
                std::time::Instant::now() < until,
                "the notify command never ran"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    #[test]
    fn an_overdue_run_is_killed_when_told() {
        let (mut n, _tmp, named) = leaving_a_sleep();
        let keeper = n.start(b"{}").unwrap();
        let sleep = pid_in(&named);
        let ended = n.check(&[keeper]);
        assert_eq!(ended.len(), 1, "{ended:?}");
        assert!(ended[0].1.is_some(), "a killed run is a failure");
        assert!(tether_os::procfs::is_gone(keeper));
        assert!(
            gone_soon(sleep),
            "what the notify command started goes with it"
        );
    }

    #[test]
    fn at_the_end_a_run_is_let_go_not_waited_for_and_finishes_on_its_own() {
        let tmp = tether_os::testing::private_tempdir();
        let (go, done) = (tmp.path().join("go"), tmp.path().join("done"));
        // It finishes only once the test says so: `let_go` cannot have waited for it.
        let mut n = notifier(&format!(
            "cat >/dev/null; while [ ! -e {go} ]; do sleep 0.02; done; echo $$ > {done}",
            go = go.display(),
            done = done.display()
        ));
        let keeper = n.start(b"{}").unwrap();
        assert_eq!(n.let_go(), [], "nothing ended yet");
        assert!(n.pids().is_empty(), "the run is let go");
        assert!(!done.exists());
        tether_os::testing::write_private(&go, "");
        let shell = pid_in(&done);
        assert!(gone_soon(shell), "the run ends on its own");
        assert!(gone_soon(keeper), "and its keeper with it");
    }

    #[test]
    fn a_payload_the_program_never_reads_never_holds_the_start() {
        // More than a pipe holds, to a program that does not read: a blocking write would
        // return only once the keeper killed the run at its deadline.
        let mut n = notifier("sleep 30");
        let keeper = n.start(&vec![b'x'; 200 << 10]).unwrap();
        assert_eq!(n.check(&[]), [], "the run is still going once started");
        let ended = n.check(&[keeper]);
        assert_eq!(ended.len(), 1, "{ended:?}");
        assert!(gone_soon(keeper));
    }

    #[test]
    fn a_run_let_go_can_still_write_its_stderr() {
        let tmp = tether_os::testing::private_tempdir();
        let (go, done) = (tmp.path().join("go"), tmp.path().join("done"));
        // It writes to stderr only after the broker's side of the pipe is gone.
        let mut n = notifier(&format!(
            "while [ ! -e {go} ]; do sleep 0.02; done; echo progress >&2; echo $$ > {done}",
            go = go.display(),
            done = done.display()
        ));
        let keeper = n.start(b"{}").unwrap();
        assert_eq!(n.let_go(), []);
        tether_os::testing::write_private(&go, "");
        let shell = pid_in(&done);
        assert!(gone_soon(shell));
        assert!(gone_soon(keeper));
    }

    #[test]
    fn what_a_run_started_in_a_session_of_its_own_ends_with_it() {
        let tmp = tether_os::testing::private_tempdir();
        let named = tmp.path().join("setsid.pid");
        // The escapee names itself once in a session (and group) of its own, and the notify
        // command exits only then, leaving it behind.
        let mut n = notifier(&escaping_then(&named, "exit 0"));
        let keeper = n.start(b"{}").unwrap();
        assert_eq!(finish(&mut n), [(keeper, None)]);
        let escapee = pid_in(&named);
        assert!(
            gone_soon(escapee),
            "a setsid child of the notify command outlived its run"
        );
    }

    #[test]
    fn at_most_a_few_runs_a_minute_and_the_first_failure_only() {
        let mut policy = NotifyPolicy::default();
        let start = Instant::now();
        let admitted = (0..10)
            .filter(|i| policy.admit(start + Duration::from_secs(*i)))
            .count();
        assert_eq!(admitted, PER_MINUTE);
        assert!(policy.admit(start + Duration::from_secs(61)));
        policy.started(1, start);
        policy.started(2, start);
        assert_eq!(
            policy.deadline(),
            Some(start + NOTIFY_TIMEOUT + Duration::from_secs(1))
        );
        assert_eq!(policy.overdue(start), Vec::<i32>::new());
        assert_eq!(policy.overdue(start + Duration::from_secs(10)), [1, 2]);
        let first = policy.ended(1, Some("`x` exited with status 1".into()));
        assert!(first.unwrap().contains("not run again"));
        assert_eq!(policy.ended(2, Some("again".into())), None);
        assert!(!policy.is_running());
    }
}
