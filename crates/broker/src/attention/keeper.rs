//! The keeper of a `[notify] command` run (see `notify`): a copy of the broker, started by
//! `clone3` with no exit signal so that the broker's `waitid(P_ALL)` never sees it, which
//! starts the notify command as its own child, waits for it (killing it at the timeout),
//! ends whatever the run left (a subreaper, it adopts every orphan of the run, a `setsid`
//! escapee too, and kills them until none is left), says how it ended on a pipe and exits.
//! It does not die with the broker: a run started as a command ends is let finish on its own
//! deadline while the broker returns (see `notify`). From the clone to its exit (and the
//! notify command's from its clone to exec) only raw system calls run: no allocation, no
//! lock. Hence libc throughout: nix has no `clone3`, its `waitid(P_PIDFD)` fails for a
//! command a real-time signal killed (its `Signal` has none), and its calls may allocate
//! (paths, error conversions).
//!
//! A readiness probe's `exec` try runs under a keeper too (`broker::probes::exec`), with
//! the try's timeout and a cancel pipe: its write end closing (the broker gave the try up,
//! or is gone) ends the run at once, as its timeout would. It goes by the same name, so a
//! shim call inside a probe runs the real shell, unbrokered, as inside a notify run.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use super::sweep::{ChildLister, sweep_descendants};
use crate::broker::spawn::clone_into::{errno, fail};

/// The keeper's word when the notify command timed out (never a wait status).
pub(crate) const TIMED_OUT: u32 = u32::MAX;

/// The keeper's name (comm), which a shim call inside a notify run looks for in its
/// session's leader (`tether_os::shims::inside_notify_run`): such a call runs the real shell, unbrokered.
/// The process sampler leaves a broker's keepers out of its command's tree by this name.
pub const KEEPER_COMM: &std::ffi::CStr = tether_os::sampler::KEEPER_COMM;

// The kernel's `struct clone_args` as the command's own start uses it: any version the
// kernel knows is accepted, and the fields past `tls` stay zero.
use crate::broker::spawn::clone_into::CloneArgs;

const CLONE_PIDFD: u64 = 0x1000;

/// `clone3` as fork, with a pidfd and this exit signal: the child's pid and pidfd in the
/// parent, `None` in the child.
pub(crate) fn clone_with_pidfd(exit_signal: u64) -> io::Result<Option<(i32, OwnedFd)>> {
    let mut pidfd: RawFd = -1;
    let args = CloneArgs {
        flags: CLONE_PIDFD,
        pidfd: &mut pidfd as *mut RawFd as u64,
        exit_signal,
        ..CloneArgs::default()
    };
    // SAFETY: the child runs on a copy of our memory, as after fork; the broker is
    // single-threaded, so no lock is held by a thread missing in the child, and the child
    // makes raw system calls only.
    let pid = unsafe { args.clone3() };
    match pid {
        p if p < 0 => Err(io::Error::last_os_error()),
        0 => Ok(None),
        // SAFETY: clone3 with CLONE_PIDFD wrote a new descriptor, ours alone.
        p => Ok(Some((p as i32, unsafe { OwnedFd::from_raw_fd(pidfd) }))),
    }
}

/// What the keeper and the notify command need, prepared before the clone.
pub(crate) struct Start<'a> {
    pub(crate) program: &'a CString,
    pub(crate) argv: &'a [*const libc::c_char],
    pub(crate) envp: &'a [*const libc::c_char],
    pub(crate) stdio: [RawFd; 3],
    pub(crate) report: RawFd,
    pub(crate) verdict: RawFd,
    /// The read end of the notify command's stderr pipe, which the keeper holds open.
    pub(crate) stderr_reader: RawFd,
    pub(crate) broker: i32,
    /// How long the command may run before the keeper kills it.
    pub(crate) timeout_ms: i32,
    /// A pipe's read end (or -1): its write end closing (the broker gave the run up, or is
    /// gone) ends the run at once, as its timeout would.
    pub(crate) cancel: RawFd,
    /// Where the command runs (a readiness probe runs where its command does), if not here.
    pub(crate) cwd: Option<&'a CString>,
}

/// The CPU time (milliseconds, user and system, with what each waited for) of the children
/// [`exit_status`] reaped in this process: in the broker, its keepers (a probe's, the notify
/// command's), whose time the kernel adds to the broker's `RUSAGE_CHILDREN` and the
/// command's `max_cpu` must leave out.
static REAPED_CPU_MS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// What [`REAPED_CPU_MS`] holds now.
pub(crate) fn reaped_keepers_cpu_ms() -> u64 {
    REAPED_CPU_MS.load(std::sync::atomic::Ordering::Relaxed)
}

/// A child's wait status once it ended (`wait`: block until then), `None` while it runs.
/// Through its pidfd, with `__WALL`: the keeper has no exit signal, the notify command has.
/// The CPU time of a child reaped goes to [`REAPED_CPU_MS`] (the system call's own rusage:
/// libc's `waitid` has no place for it).
pub(crate) fn exit_status(pidfd: &OwnedFd, wait: bool) -> Option<i32> {
    // SAFETY: a zeroed siginfo_t is a valid value; waitid only writes into it.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: likewise for rusage.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let flags = libc::WEXITED | libc::__WALL | if wait { 0 } else { libc::WNOHANG };
    loop {
        // SAFETY: waitid writes only into `info` and `usage`.
        let r = unsafe {
            libc::syscall(
                libc::SYS_waitid,
                libc::P_PIDFD,
                pidfd.as_raw_fd(),
                &mut info as *mut libc::siginfo_t,
                flags,
                &mut usage as *mut libc::rusage,
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
    let ms = |t: libc::timeval| t.tv_sec.max(0) as u64 * 1000 + t.tv_usec.max(0) as u64 / 1000;
    REAPED_CPU_MS.fetch_add(
        ms(usage.ru_utime) + ms(usage.ru_stime),
        std::sync::atomic::Ordering::Relaxed,
    );
    // SAFETY: as above.
    let status = unsafe { info.si_status() };
    Some(match info.si_code {
        libc::CLD_EXITED => status << 8,
        _ => status & 0x7f,
    })
}

unsafe extern "C" {
    static mut environ: *const *const libc::c_char;
}

/// Closes every descriptor from 3 on but `kept`. Raw system calls only.
pub(crate) unsafe fn close_all_but(kept: &mut [RawFd]) {
    kept.sort_unstable();
    let mut from: RawFd = 3;
    for &mut fd in kept {
        // SAFETY: close_range closes only descriptors; none of `kept`.
        if fd > from {
            unsafe { libc::syscall(libc::SYS_close_range, from, fd - 1, 0) };
        }
        from = from.max(fd + 1);
    }
    // SAFETY: as above.
    unsafe { libc::syscall(libc::SYS_close_range, from, u32::MAX, 0) };
}

/// The keeper: a copy of the broker that never execs (it would stop being a "clone" child).
/// Raw system calls only, no allocation, no lock, until it exits.
pub(crate) unsafe fn keeper(start: &Start<'_>) -> ! {
    // SAFETY: raw system calls on descriptors and C strings valid in this copy of memory.
    unsafe {
        // No signal handler of the broker's runs here; SIGKILL still does.
        let mut all: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::sigprocmask(libc::SIG_SETMASK, &all, std::ptr::null_mut());
        // No death signal: the broker returns without waiting for the run, which ends on its
        // own deadline. A broker gone before this point had no use for it.
        if libc::getppid() != start.broker {
            libc::_exit(1);
        }
        libc::prctl(libc::PR_SET_NAME, KEEPER_COMM.as_ptr(), 0, 0, 0);
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
        // Kept: the report and verdict pipes, and the stderr pipe's read end (close-on-exec,
        // so the notify command does not hold it): a run let go by its broker can still
        // write its stderr (curl's progress meter) without dying of SIGPIPE.
        close_all_but(&mut [
            start.report,
            start.verdict,
            start.stderr_reader,
            start.cancel,
        ]);
        let keeper = libc::getpid();
        // What the notify command leaves behind comes back to the keeper, not to the broker
        // (a subreaper), whose reaping would take it for the command's orphan.
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
        let pidfd = match clone_with_pidfd(libc::SIGCHLD as u64) {
            Ok(Some((_, pidfd))) => pidfd,
            Ok(None) => notify_command(start, keeper),
            Err(err) => fail(start.report, err.raw_os_error().unwrap_or(libc::EIO)),
        };
        libc::close(start.report);
        // The run's end, and the broker giving it up (a negative descriptor is ignored).
        let mut polls = [
            libc::pollfd {
                fd: pidfd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: start.cancel,
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        let ended = loop {
            let r = libc::poll(polls.as_mut_ptr(), 2, start.timeout_ms);
            if r < 0 && errno() == libc::EINTR {
                continue;
            }
            break r > 0 && polls[0].revents != 0;
        };
        let word = if !ended {
            let _ = rustix::process::pidfd_send_signal(&pidfd, rustix::process::Signal::KILL);
            let _ = exit_status(&pidfd, true);
            TIMED_OUT
        } else {
            exit_status(&pidfd, true).unwrap_or(0) as u32
        };
        // Whatever the run left ends before the verdict: once the broker hears the run
        // ended, nothing of it runs.
        let swept = sweep_descendants(ChildLister::ChildrenFile);
        let bytes = word.to_ne_bytes();
        // The broker may be gone (EPIPE: SIGPIPE is blocked here).
        libc::write(start.verdict, bytes.as_ptr().cast(), bytes.len());
        if !swept {
            // /proc could not be read to sweep: at least what is left in the keeper's group
            // (its own, made by setsid above) ends with the keeper.
            libc::kill(0, libc::SIGKILL);
        }
        // A clean exit: a keeper that outlived its broker is reaped by whoever adopted it
        // (under `tether agent`, the agent's broker, which journals how it ended).
        libc::_exit(0)
    }
}

/// The notify command (or a readiness probe's shell), from the keeper's clone to exec.
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
        if let Some(cwd) = start.cwd
            && libc::chdir(cwd.as_ptr()) < 0
        {
            fail(start.report, errno());
        }
        environ = start.envp.as_ptr();
        libc::execvp(start.program.as_ptr(), start.argv.as_ptr());
        fail(start.report, errno())
    }
}
