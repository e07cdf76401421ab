//! Reaping the broker's children, the interpreter's work: on SIGCHLD, before every tick and
//! before the end, every child that ended is reaped and handed to the state machine as one
//! `Input::Reaped`, with whether any child is left, read right after.
//!
//! The waits themselves through libc: nix's `waitid` and `waitpid` decode the status into
//! its `Signal` enum, which has no real-time signals, and fail when a child died of one. The
//! peek would then never name that child (so it would never be reaped), and the reap, which
//! the kernel has done by then, would lose its exit for good. (rustix's `waitid` names no pid.)

use nix::errno::Errno;

use tether_os::procfs;
use tether_protocol::protocol::ExitStatus;

pub use tether_core::reports::Reaped;

/// Reaps every child that has ended, in the order the kernel gives them: the command itself,
/// or a descendant re-parented to this subreaper. Then whether a child is left, which the
/// last look already says (children but none ended, or none at all) but for an odd end.
pub fn reap_ended() -> (Vec<Reaped>, bool) {
    let mut children = Vec::new();
    loop {
        let pid = match peek_ended_child() {
            Ok(Some(pid)) => pid,
            Ok(None) => return (children, true),
            Err(Errno::ECHILD) => return (children, false),
            Err(Errno::EINTR) => continue,
            // Nothing else is expected of waitid(WNOHANG); the next SIGCHLD retries.
            Err(_) => break,
        };
        // Looked at unreaped (`WNOWAIT`), so that its `/proc` entry, group and session
        // included, can still be read; then reaped.
        let mut buffer = vec![0u8; 1024];
        let stat = procfs::read_stat_text(pid, &mut buffer);
        let fields = stat.as_deref().and_then(procfs::StatFields::split);
        let place = fields.as_ref().and_then(procfs::StatFields::to_stat);
        let tethers = [
            crate::broker::BROKER_COMM,
            tether_protocol::names::PRUNE_COMM,
        ];
        let named_ours =
            fields.is_some_and(|f| tethers.iter().any(|c| f.comm.as_bytes() == c.to_bytes()));
        let tether_cgroup = named_ours.then(|| procfs::cgroup_of(pid)).flatten();
        match wait_status(pid) {
            Ok(Some(status)) => children.push(Reaped {
                pid,
                status,
                place,
                tether_cgroup,
            }),
            Ok(None) | Err(_) => break,
        }
    }
    (children, has_children())
}

/// Whether this process has a child left, alive or not yet reaped. A subreaper with no
/// child has no descendant at all: every process of the command's tree is a child of the
/// broker or a descendant of one (orphans are re-parented to it). So the kernel answers in
/// one call what a walk of /proc, reading every process on the machine, would. The notify
/// command's keepers are "clone" children, which this wait does not see.
pub(crate) fn has_children() -> bool {
    !matches!(peek_ended_child(), Err(Errno::ECHILD))
}

/// The pid of a child that has ended, left unreaped (`WNOWAIT`); `Ok(None)` when children
/// remain but none has ended; `Err(ECHILD)` when there is no child at all.
fn peek_ended_child() -> Result<Option<i32>, Errno> {
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
    Errno::result(peeked)?;
    // SAFETY: filled in by waitid for a child that has ended; 0 when none has.
    let pid = unsafe { info.si_pid() };
    Ok((pid != 0).then_some(pid))
}

/// Reaps `pid`, which has ended. `libc` directly, as the module says: nix would fail for a
/// real-time signal after the kernel has already reaped the child.
fn wait_status(pid: i32) -> Result<Option<ExitStatus>, Errno> {
    let mut raw = 0;
    let reaped = loop {
        // SAFETY: waitpid only writes the status into `raw`.
        match Errno::result(unsafe { libc::waitpid(pid, &mut raw, libc::WNOHANG) }) {
            Ok(reaped) => break reaped,
            Err(Errno::EINTR) => continue,
            Err(errno) => return Err(errno),
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
