//! An `exec` probe's try: `sh -c CMD`, with stdin, stdout and stderr on /dev/null, run by a
//! keeper as a notify command is (`attention::keeper`): the broker's "clone" child, which
//! its `waitid(P_ALL)` never reaps as an orphan of the command; in a session of its own, so
//! no signal meant for the command's group reaches it; killed with all it started at the
//! try's timeout, or as soon as the broker gives the try up (the cancel pipe's write end
//! closes: given up, dropped, or the broker gone). Nothing here waits: the shell's start
//! (its chdir into the command's directory, its exec) and the keeper's end are waited for
//! with everything else, through the keeper's pidfd.

use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::task::{Context, Poll};
use std::time::Duration;

use nix::fcntl::OFlag;
use nix::unistd::pipe2;
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

use crate::attention::keeper::{Start, TIMED_OUT, clone_with_pidfd, exit_status, keeper};
use crate::attention::notify::{pointers, read_word};
use tether_core::state::TryOutcome;
use tether_protocol::protocol::LaunchRequest;

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
        let outside = tether_os::shims::this_environment_outside()
            .into_iter()
            .filter(|(k, _)| !request.env.contains_key(&*k.to_string_lossy()))
            .map(|(k, v)| [k.as_bytes(), b"=", v.as_bytes()].concat());
        let own = (request.env.iter()).map(|(k, v)| [k.as_bytes(), b"=", v.as_bytes()].concat());
        let envp = outside
            .chain(own)
            .filter_map(|var| CString::new(var).ok())
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
        let argv = pointers(&argv_owned);
        let envp = pointers(&self.envp);
        // Read once the keeper has ended, when nothing holds its write end any more: never
        // waited on (non-blocking all the same, should a shell outlive its keeper).
        let (report_read, report_write) = pipe2(OFlag::O_CLOEXEC | OFlag::O_NONBLOCK)?;
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
        // Watched by the loop: readable once the keeper has ended. Should that fail (it
        // does not, short of the broker's descriptors running out), the cancel pipe closes
        // with the error and the keeper ends its shell at once.
        let pidfd = tether_os::fdio::register(pidfd, Interest::READABLE)?;
        Ok(Run {
            keeper: pid,
            pidfd: Some(pidfd),
            report: report_read,
            verdict: verdict_read,
            cancel: Some(cancel_write),
        })
    }
}

/// A try's shell running under its keeper.
pub struct Run {
    keeper: i32,
    /// The keeper's pidfd, watched by the loop (readable once the keeper has ended), until
    /// the keeper is reaped.
    pidfd: Option<AsyncFd<OwnedFd>>,
    /// The shell's start: an errno if it could not (a `cwd` gone, no `sh`), nothing once it
    /// exec'd.
    report: OwnedFd,
    verdict: OwnedFd,
    cancel: Option<OwnedFd>,
}

impl Run {
    pub fn keeper(&self) -> i32 {
        self.keeper
    }

    /// How the try ended, once its keeper has: `exited 0` passes; `exited 1`, a signal,
    /// `timed out` or a shell that could not start fails.
    pub fn poll_outcome(&mut self, cx: &mut Context<'_>) -> Poll<TryOutcome> {
        let Some(pidfd) = self.pidfd.as_ref() else {
            return Poll::Ready(Err("the probe's keeper is gone".into()));
        };
        match pidfd.poll_read_ready(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(Err(err)) => {
                return Poll::Ready(Err(format!("cannot watch the probe: {err}")));
            }
            Poll::Ready(Ok(_)) => {}
        }
        if let Some(pidfd) = self.pidfd.take() {
            let _ = exit_status(pidfd.get_ref(), true);
        }
        // The errno the keeper or the shell reported before the shell's exec, if any. Read
        // without waiting: the keeper has ended, and the shell exec'd (the write end closes
        // on exec) or ended too.
        if let Some(errno) = read_word(&self.report) {
            let err = std::io::Error::from_raw_os_error(errno as i32);
            return Poll::Ready(Err(format!("cannot run sh: {err}")));
        }
        Poll::Ready(match read_word(&self.verdict) {
            Some(word) => describe(word),
            None => Err("the probe's keeper ended without a verdict".into()),
        })
    }

    /// The try given up before it ended: its keeper ends the shell at once (the cancel pipe
    /// closes); what is left to reap it, if it has not ended yet.
    pub fn give_up(mut self) -> Option<Dying> {
        drop(self.cancel.take());
        let pidfd = self.pidfd.take()?;
        Some(Dying {
            keeper: self.keeper,
            pidfd,
        })
    }
}

impl Drop for Run {
    /// Dropped while going (the broker is done): the keeper ends the shell (the cancel
    /// pipe closes), and is reaped here if it has already ended; never waited for.
    fn drop(&mut self) {
        drop(self.cancel.take());
        if let Some(pidfd) = self.pidfd.take() {
            let _ = exit_status(pidfd.get_ref(), false);
        }
    }
}

/// The keeper of a try given up, ending its shell: reaped once it has ended, meanwhile no
/// part of the command's tree.
pub struct Dying {
    keeper: i32,
    pidfd: AsyncFd<OwnedFd>,
}

impl Dying {
    pub fn keeper(&self) -> i32 {
        self.keeper
    }

    /// Ready once the keeper has ended and is reaped.
    pub fn poll_reaped(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        match self.pidfd.poll_read_ready(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(_) => {
                let _ = exit_status(self.pidfd.get_ref(), true);
                Poll::Ready(())
            }
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
