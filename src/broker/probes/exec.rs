//! An `exec` probe's try: `sh -c CMD`, with stdin, stdout and stderr on /dev/null, run by a
//! keeper as a notify command is (`attention::keeper`): the broker's "clone" child, which
//! its `waitid(P_ALL)` never reaps as an orphan of the command; in a session of its own, so
//! no signal meant for the command's group reaches it; killed with all it started at the
//! try's timeout, or as soon as the broker gives the try up (the cancel pipe's write end
//! closes: dropped, or the broker gone).

use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::time::Duration;

use nix::fcntl::OFlag;
use nix::unistd::pipe2;
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

use crate::attention::keeper::{Start, TIMED_OUT, clone_with_pidfd, exit_status, keeper};
use crate::protocol::LaunchRequest;
use tether_core::state::TryOutcome;

/// How long a try given up is waited for, its keeper reaped: it ends its shell at once.
const GIVEN_UP_WAIT: Duration = Duration::from_secs(1);

/// What every try runs in: the command's directory and its environment, outside the shims.
pub struct Shell {
    envp: Vec<CString>,
    cwd: Option<CString>,
}

impl Shell {
    pub fn new(request: &LaunchRequest) -> Shell {
        // The broker's environment outside the shims (no `TETHER_*`: the probe's shell is
        // not a command of the session), with the command's own variables on top, as the
        // probe checks what the command serves (`pg_isready -p "$PGPORT"`).
        let mut vars: Vec<(Vec<u8>, Vec<u8>)> = crate::shim::this_environment_outside()
            .into_iter()
            .filter(|(k, _)| !request.env.contains_key(&*k.to_string_lossy()))
            .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
            .collect();
        vars.extend(
            (request.env.iter()).map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec())),
        );
        let envp = vars
            .into_iter()
            .filter_map(|(k, v)| CString::new([k, b"=".to_vec(), v].concat()).ok())
            .collect();
        let cwd = (request.cwd.as_ref()).and_then(|c| CString::new(c.as_os_str().as_bytes()).ok());
        Shell { envp, cwd }
    }

    /// A shell with only `PATH` and `vars`, in `cwd`.
    #[cfg(test)]
    pub fn for_tests(cwd: Option<&str>, vars: &[(&str, &str)]) -> Shell {
        let path = std::env::var("PATH").unwrap_or_default();
        let envp = std::iter::once(format!("PATH={path}"))
            .chain(vars.iter().map(|(k, v)| format!("{k}={v}")))
            .map(|var| CString::new(var).expect("no NUL"))
            .collect();
        let cwd = cwd.map(|c| CString::new(c).expect("no NUL"));
        Shell { envp, cwd }
    }

    /// Starts `sh -c script`, killed after `timeout`: its run, or why it could not start.
    pub fn start(&self, script: &str, timeout: Duration) -> Result<Run, String> {
        self.spawn(script, timeout)
            .map_err(|err| format!("cannot run sh: {err}"))
    }

    fn spawn(&self, script: &str, timeout: Duration) -> std::io::Result<Run> {
        let program = c"/bin/sh".to_owned();
        let argv_owned = [
            c"sh".to_owned(),
            c"-c".to_owned(),
            CString::new(script).map_err(std::io::Error::other)?,
        ];
        let pointers = |list: &[CString]| {
            let mut p: Vec<*const std::ffi::c_char> = list.iter().map(|s| s.as_ptr()).collect();
            p.push(std::ptr::null());
            p
        };
        let argv = pointers(&argv_owned);
        let envp = pointers(&self.envp);
        let (report_read, report_write) = pipe2(OFlag::O_CLOEXEC)?;
        let (verdict_read, verdict_write) = pipe2(OFlag::O_CLOEXEC | OFlag::O_NONBLOCK)?;
        let (cancel_read, cancel_write) = pipe2(OFlag::O_CLOEXEC)?;
        let null = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/null")?;
        let start = Start {
            program: &program,
            argv: &argv,
            envp: &envp,
            stdio: [null.as_raw_fd(); 3],
            report: report_write.as_raw_fd(),
            verdict: verdict_write.as_raw_fd(),
            stderr_reader: -1,
            broker: std::process::id() as i32,
            timeout_ms: i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX),
            cancel: cancel_read.as_raw_fd(),
            cwd: self.cwd.as_ref(),
        };
        // No exit signal: a "clone" child, invisible to the broker's `waitid(P_ALL)`.
        let Some((pid, pidfd)) = clone_with_pidfd(0)? else {
            // SAFETY: in the keeper; raw system calls only, never returns.
            unsafe { keeper(&start) }
        };
        drop((report_write, verdict_write, cancel_read, null));
        if let Some(err) = crate::broker::spawn::clone_into::read_report(&report_read) {
            let _ = exit_status(&pidfd, true);
            return Err(err);
        }
        Ok(Run {
            keeper: pid,
            pidfd: Some(pidfd),
            verdict: verdict_read,
            cancel: Some(cancel_write),
        })
    }
}

/// A try's shell running under its keeper.
pub struct Run {
    keeper: i32,
    /// Until the keeper is reaped.
    pidfd: Option<OwnedFd>,
    verdict: OwnedFd,
    cancel: Option<OwnedFd>,
}

impl Run {
    pub fn keeper(&self) -> i32 {
        self.keeper
    }

    /// How the shell ended: `exited 0` passes; `exited 1`, a signal or `timed out` fails.
    pub async fn outcome(mut self) -> TryOutcome {
        let Some(raw) = self.pidfd.as_ref().map(AsRawFd::as_raw_fd) else {
            return Err("the probe's keeper is gone".into());
        };
        // A pidfd is readable once its process has ended. Registered by number: the run
        // keeps the descriptor, so that a try dropped while waiting still reaps its keeper.
        // SAFETY: `raw` is the run's pidfd, which stays open (held in `self.pidfd`) until
        // after `watched` is dropped below, or with it when the try is dropped.
        let registered = unsafe { AsyncFd::register_with_interest(raw, Interest::READABLE) };
        let watched = match registered.map_err(std::io::Error::from) {
            Ok(fd) => fd,
            Err(err) => return Err(format!("cannot watch the probe: {err}")),
        };
        if let Err(err) = watched.readable().await.map(|mut g| g.retain_ready()) {
            return Err(format!("cannot watch the probe: {err}"));
        }
        drop(watched);
        if let Some(pidfd) = self.pidfd.take() {
            let _ = exit_status(&pidfd, true);
        }
        let mut word = [0u8; 4];
        match nix::unistd::read(&self.verdict, &mut word) {
            Ok(4) => describe(u32::from_ne_bytes(word)),
            _ => Err("the probe's keeper ended without a verdict".into()),
        }
    }
}

impl Drop for Run {
    /// A try given up before it ended: its keeper ends the shell at once (the cancel pipe
    /// closes) and is reaped, waited for a moment at most.
    fn drop(&mut self) {
        drop(self.cancel.take());
        let Some(pidfd) = self.pidfd.take() else {
            return;
        };
        let mut poll = libc::pollfd {
            fd: pidfd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: poll reads one valid pollfd on this stack.
        let ended = unsafe { libc::poll(&mut poll, 1, GIVEN_UP_WAIT.as_millis() as i32) } > 0;
        if ended {
            let _ = exit_status(&pidfd, true);
        }
    }
}

/// The keeper's verdict as the journal words it.
fn describe(word: u32) -> TryOutcome {
    if word == TIMED_OUT {
        return Err("timed out".into());
    }
    let status = word as i32;
    if libc::WIFEXITED(status) {
        let code = libc::WEXITSTATUS(status);
        let text = format!("exited {code}");
        return if code == 0 { Ok(text) } else { Err(text) };
    }
    let signal = libc::WTERMSIG(status);
    let name = nix::sys::signal::Signal::try_from(signal)
        .map(|s| s.as_str().to_string())
        .unwrap_or_else(|_| format!("signal {signal}"));
    Err(format!("killed by {name}"))
}
