//! What the broker's decisions ask of the kernel while they are made: reaping its children,
//! whether any is left, the processes of its tree, signals to them and the wall clock. (The
//! tree's record is not among them: a walk for it is an output, its result an input.) One
//! trait, so the state machine runs on the kernel in the broker ([`LiveKernel`]) and on a
//! fake table of processes in its tests, as the stop sequence does with [`TreeSignaller`].
//!
//! These answers are needed in the middle of a decision (a stop is done when no child is
//! left, a signal's targets are journaled with it), so they are calls rather than outputs;
//! everything the broker only has done (journal, replies, files) goes out as an
//! [`super::Output`].

use crate::broker::signaller::{self, Walk};
use crate::broker::stop::TreeSignaller;
use crate::procfs::{self, ProcStat};
use crate::protocol::{ExitStatus, ProcessSignal};

/// One ended child, reaped: its pid, how it ended, and where it was (its process group and
/// session, read while it was still a zombie).
#[derive(Debug, Clone)]
pub struct Reaped {
    pub pid: i32,
    pub status: ExitStatus,
    pub place: Option<ProcStat>,
}

pub trait Kernel: TreeSignaller {
    /// This process's pid: the root of the tree on the /proc walk.
    fn own_pid(&self) -> i32;
    /// The wall clock, in milliseconds since the epoch, for the journal's `ts_ms`.
    fn wall_ms(&self) -> u64;
    /// Reaps one ended child without waiting: `Ok(None)` when none has ended, `Err(errno)`
    /// (`ECHILD` when there is no child at all).
    fn reap_one(&mut self) -> Result<Option<Reaped>, i32>;
    /// Whether this process has a child left, alive or not yet reaped.
    fn has_children(&self) -> bool;
    /// The live processes of `walk`.
    fn live(&mut self, walk: &Walk) -> Vec<ProcStat>;
    /// `signal` to one process found by a walk (pidfd-checked); whether it was delivered.
    fn signal_process(&mut self, process: &ProcStat, signal: ProcessSignal) -> bool;
    /// The program of `pid`, for the journal's `client`.
    fn program_label(&mut self, pid: i32) -> Option<String>;
    /// This process's uid.
    fn uid(&self) -> u32;
    /// CPU time and largest RSS of the reaped children, as the kernel accounts them.
    fn children_usage(&mut self) -> (u64, u64);
}

/// The kernel the broker runs on: the stop sequence's own signaller, and the rest.
pub use crate::broker::stop::Kernel as LiveKernel;

impl Kernel for LiveKernel {
    fn own_pid(&self) -> i32 {
        std::process::id() as i32
    }

    fn wall_ms(&self) -> u64 {
        crate::clock::now_ms()
    }

    fn reap_one(&mut self) -> Result<Option<Reaped>, i32> {
        reap_one()
    }

    /// A subreaper with no child has no descendant at all: every process of the command's
    /// tree is a child of the broker or a descendant of one (orphans are re-parented to it).
    /// So the kernel answers in one call what a walk of /proc, reading every process on the
    /// machine, would.
    fn has_children(&self) -> bool {
        !matches!(peek_ended_child(), Err(libc::ECHILD))
    }

    fn live(&mut self, walk: &Walk) -> Vec<ProcStat> {
        walk.live()
    }

    fn signal_process(&mut self, process: &ProcStat, signal: ProcessSignal) -> bool {
        signaller::signal_process(process, signal)
    }

    fn program_label(&mut self, pid: i32) -> Option<String> {
        procfs::program_label(pid)
    }

    fn uid(&self) -> u32 {
        rustix::process::getuid().as_raw()
    }

    fn children_usage(&mut self) -> (u64, u64) {
        crate::broker::tree::cost::children_usage()
    }
}

/// The pid of a child that has ended, left unreaped (`WNOWAIT`); `Ok(None)` when children
/// remain but none has ended; `Err(ECHILD)` when there is no child at all.
fn peek_ended_child() -> Result<Option<i32>, i32> {
    // SAFETY: a zeroed siginfo_t is a valid value; waitid only writes into it.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: waitid writes only into `info`.
    let peeked = unsafe {
        libc::waitid(
            libc::P_ALL,
            0,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        )
    };
    if peeked < 0 {
        return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0));
    }
    // SAFETY: filled in by waitid for a child that has ended; 0 when none has.
    let pid = unsafe { info.si_pid() };
    Ok((pid != 0).then_some(pid))
}

/// Reaps one ended child without waiting. The child is first only looked at (`WNOWAIT`), so
/// that its `/proc` entry, group and session included, can still be read; then reaped.
fn reap_one() -> Result<Option<Reaped>, i32> {
    let Some(pid) = peek_ended_child()? else {
        return Ok(None);
    };
    let place = procfs::read_stat(pid);
    match wait_status(pid)? {
        Some(status) => Ok(Some(Reaped { pid, status, place })),
        None => Ok(None),
    }
}

/// Reaps `pid`, which has ended. `libc` directly: nix turns the status into its `Signal` enum
/// and fails (after the kernel has already reaped the child) for real-time signals, which
/// would lose the exit for good.
fn wait_status(pid: i32) -> Result<Option<ExitStatus>, i32> {
    let mut raw = 0;
    let reaped = loop {
        // SAFETY: waitpid only writes the status into `raw`.
        let reaped = unsafe { libc::waitpid(pid, &mut raw, libc::WNOHANG) };
        match reaped {
            r if r >= 0 => break r,
            _ => match std::io::Error::last_os_error().raw_os_error().unwrap_or(0) {
                libc::EINTR => continue,
                errno => return Err(errno),
            },
        }
    };
    if reaped == 0 {
        return Ok(None);
    }
    let status = if libc::WIFEXITED(raw) {
        ExitStatus {
            code: Some(libc::WEXITSTATUS(raw)),
            signal: None,
            core_dumped: false,
        }
    } else {
        ExitStatus {
            code: None,
            signal: Some(libc::WTERMSIG(raw)),
            core_dumped: libc::WCOREDUMP(raw),
        }
    };
    Ok(Some(status))
}
