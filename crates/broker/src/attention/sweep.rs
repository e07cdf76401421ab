//! The notify keeper's sweep of what a run left (see `keeper`): as a child subreaper the
//! keeper adopts every orphan of the run, a `setsid` escapee too, and kills its children
//! until it has none. Its children are listed by `/proc/thread-self/children` or, on a
//! kernel built without that file (`CONFIG_PROC_CHILDREN`; see `tether_os::procfs`), by a scan
//! of every `/proc/PID/stat` for the keeper as parent: one loop over either. The keeper runs
//! in a copy of a process that may have had other threads, so only raw system calls on stack
//! buffers run here: no allocation, no lock.

use tether_os::procfs::StatFields;

/// How long the keeper goes on killing what the run left before it gives up: a killed
/// process ends at once unless the kernel holds it (an I/O in uninterruptible sleep).
const SWEEP_PATIENCE_MS: u64 = 5_000;

/// Where the sweep learns the keeper's children.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ChildLister {
    /// `/proc/thread-self/children`, or [`ChildLister::ProcScan`] where the kernel lacks it.
    ChildrenFile,
    /// A scan of every `/proc/PID/stat` for the keeper's pid as the parent (field 4).
    #[cfg_attr(
        not(test),
        expect(
            dead_code,
            reason = "reached by the fallback; the tests ask for it by name"
        )
    )]
    ProcScan,
}

/// A child as a lister found it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Found {
    /// Running, or not known to have ended (the children file says nothing of state).
    Running,
    /// A zombie (its threads all ended): nothing left to kill, only to reap.
    Ended,
}

/// Kills every child of the keeper, and reaps them, until it has none: as a subreaper it
/// adopts the orphans of those it kills, so the run's whole tree comes to it a generation at
/// a time, a `setsid` escapee too, which the keeper's group does not hold. A killed process
/// cannot fork, so each round leaves only what the round before adopted. Gives up after
/// [`SWEEP_PATIENCE_MS`], or at once when /proc cannot be read (the group kill after it is
/// all there is then): whether it swept.
///
/// # Safety
/// For the keeper (or a test's stand-in for it): it kills and reaps every child of the
/// calling process.
pub(super) unsafe fn sweep_descendants(lister: ChildLister) -> bool {
    // SAFETY: raw system calls on buffers of this frame and of the listers'.
    unsafe {
        let keeper = libc::getpid();
        let give_up_at = monotonic_ms().saturating_add(SWEEP_PATIENCE_MS);
        loop {
            reap_ended();
            let mut again = false;
            let listed = list_children(lister, keeper, &mut |pid, found| match found {
                Found::Running => {
                    libc::kill(pid, libc::SIGKILL);
                    again = true;
                }
                // Ended after the reap above, so its orphans may have come to the keeper
                // behind the scan's position: once reaped, another round looks for them. A
                // zombie that cannot be reaped (a tracer outside the run holds it) has no
                // more to give, and waiting on it would only spend the patience.
                Found::Ended => again |= reap(pid),
            });
            if !listed {
                return false;
            }
            if !again || monotonic_ms() >= give_up_at {
                reap_ended();
                return !again;
            }
            let pause = libc::timespec {
                tv_sec: 0,
                tv_nsec: 1_000_000,
            };
            libc::nanosleep(&pause, std::ptr::null_mut());
        }
    }
}

/// Calls `each` for every child of `keeper` (the calling process) that `lister` finds:
/// whether it could list them.
unsafe fn list_children(
    lister: ChildLister,
    keeper: i32,
    each: &mut dyn FnMut(i32, Found),
) -> bool {
    // SAFETY: raw system calls on a buffer of this frame.
    unsafe {
        if lister == ChildLister::ChildrenFile {
            let fd = libc::open(
                c"/proc/thread-self/children".as_ptr(),
                libc::O_RDONLY | libc::O_CLOEXEC,
            );
            if fd >= 0 {
                let mut listed = [0u8; 4096];
                let n = libc::read(fd, listed.as_mut_ptr().cast(), listed.len());
                libc::close(fd);
                let n = if n < 0 { 0 } else { n as usize };
                let mut pid: i32 = 0;
                // The kernel ends every pid with a space: a number without one was cut by
                // the buffer, and is left for the next round rather than read as another pid.
                for &b in &listed[..n] {
                    if b.is_ascii_digit() {
                        pid = pid.saturating_mul(10).saturating_add(i32::from(b - b'0'));
                    } else if pid > 0 {
                        each(pid, Found::Running);
                        pid = 0;
                    }
                }
                return true;
            }
        }
        scan_children(keeper, each)
    }
}

/// [`ChildLister::ProcScan`]: one pass over /proc by `getdents64`, each numeric entry's
/// `stat` read for its parent. A child that ends during the pass may have its orphans handed
/// to the keeper behind the pass's position; it shows as a zombie, and the sweep looks again.
unsafe fn scan_children(keeper: i32, each: &mut dyn FnMut(i32, Found)) -> bool {
    // SAFETY: raw system calls on buffers of this frame.
    unsafe {
        let proc_dir = libc::open(
            c"/proc".as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        );
        if proc_dir < 0 {
            return false;
        }
        let mut entries = [0u8; 4096];
        let complete = loop {
            let n = libc::syscall(
                libc::SYS_getdents64,
                proc_dir,
                entries.as_mut_ptr(),
                entries.len(),
            );
            if n <= 0 {
                break n == 0;
            }
            let mut at = 0;
            while let Some((name, record)) = entries.get(at..n as usize).and_then(first_dirent) {
                at += record;
                let Some(pid) = pid_named(name) else {
                    continue;
                };
                if let Some(found) = child_of(proc_dir, name, keeper) {
                    each(pid, found);
                }
            }
        };
        libc::close(proc_dir);
        complete
    }
}

/// The name and record length of the first `struct linux_dirent64` in `records`: `d_ino`
/// (8 bytes), `d_off` (8), `d_reclen` (2), `d_type` (1), then the name, ended by a NUL.
fn first_dirent(records: &[u8]) -> Option<(&[u8], usize)> {
    let record = usize::from(u16::from_ne_bytes([*records.get(16)?, *records.get(17)?]));
    let name = records.get(19..record)?;
    let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
    Some((&name[..end], record))
}

/// The pid a /proc entry names, if it names a process.
fn pid_named(name: &[u8]) -> Option<i32> {
    if name.is_empty() || !name.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(name).ok()?.parse().ok()
}

/// Whether the process of /proc entry `name` is a child of `keeper`, read from its `stat`
/// (`None`: not a child, or gone).
unsafe fn child_of(proc_dir: i32, name: &[u8], keeper: i32) -> Option<Found> {
    const SUFFIX: &[u8] = b"/stat\0";
    let mut path = [0u8; 32];
    path.get_mut(..name.len())?.copy_from_slice(name);
    path.get_mut(name.len()..name.len() + SUFFIX.len())?
        .copy_from_slice(SUFFIX);
    // Fields up to the thread count (20) fit with room to spare: the name is at most 15
    // bytes and the rest numbers.
    let mut stat = [0u8; 512];
    // SAFETY: `path` is NUL-terminated; read writes only into `stat`.
    let n = unsafe {
        let fd = libc::openat(
            proc_dir,
            path.as_ptr().cast(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        );
        if fd < 0 {
            return None;
        }
        let n = libc::read(fd, stat.as_mut_ptr().cast(), stat.len());
        libc::close(fd);
        n
    };
    found_in_stat(stat.get(..usize::try_from(n).ok()?)?, keeper)
}

/// Pure part of [`child_of`]: a `stat` line's parent (field 4), state (3) and thread count
/// (20). A zombie whose other threads still run has not ended: killing it ends them.
fn found_in_stat(stat: &[u8], keeper: i32) -> Option<Found> {
    let fields = StatFields::split_bytes(stat)?;
    if fields.number::<i32>(4)? != keeper {
        return None;
    }
    let zombie = matches!(fields.state()?, b'Z' | b'X');
    let threads = fields.number::<u32>(20).unwrap_or(0);
    Some(if zombie && threads <= 1 {
        Found::Ended
    } else {
        Found::Running
    })
}

/// Reaps `pid` if it is an ended child: whether it did.
unsafe fn reap(pid: i32) -> bool {
    // SAFETY: a waitid on the keeper's own children.
    unsafe { reap_one(libc::P_PID, pid as libc::id_t) }
}

/// Reaps every child of the keeper that ended, without waiting.
unsafe fn reap_ended() {
    // SAFETY: a waitid on the keeper's own children.
    while unsafe { reap_one(libc::P_ALL, 0) } {}
}

/// Reaps one ended child that `idtype` and `id` name, without waiting: whether it did.
unsafe fn reap_one(idtype: libc::idtype_t, id: libc::id_t) -> bool {
    // SAFETY: a zeroed siginfo_t is a valid value; waitid only writes into it. Zeroed each
    // time: with WNOHANG and nothing ended, `si_pid` 0 is how that is told.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: waitid writes only into `info`.
    let r = unsafe {
        libc::waitid(
            idtype,
            id,
            &mut info,
            libc::WEXITED | libc::__WALL | libc::WNOHANG,
        )
    };
    // SAFETY: filled in by waitid; 0 when nothing ended.
    r == 0 && unsafe { info.si_pid() } != 0
}

/// Milliseconds on the monotonic clock (a vDSO read, no lock): the sweep's patience is
/// time, whatever a round of listing costs.
fn monotonic_ms() -> u64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes only into `now`.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    (now.tv_sec as u64)
        .saturating_mul(1000)
        .saturating_add(now.tv_nsec as u64 / 1_000_000)
}

#[cfg(test)]
mod tests;
