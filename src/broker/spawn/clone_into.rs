//! Starting the command directly inside its cgroup: `clone3(CLONE_INTO_CGROUP)` (Linux 5.7).
//!
//! Why not the child writing itself into `cgroup.procs`, as before: a write to
//! `cgroup.procs` migrates a running task, which takes the cgroup threadgroup rwsem for
//! writing and so waits for an RCU grace period, 10 to 20 ms on a busy machine, on every
//! command's path. A process born in its cgroup migrates nothing. std's `Command` cannot
//! pass clone3 flags, so the fork and exec are written here, as std writes them: everything
//! the child needs (argv, envp, paths) is allocated before the clone, and an exec failure is
//! reported through a close-on-exec pipe.
//!
//! Without `CLONE_VM` the child is a copy of the broker, as after fork(2); the broker is
//! single-threaded (see `spawn`), so no lock can be held by a thread that does not exist in
//! the child, and the child still makes raw system calls only until exec.
//!
//! libc for the clone and the child: nix has no `clone3`, and from the clone to exec the
//! child may make only raw system calls, which neither allocate nor take a lock.

use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::process::Command;

/// The kernel's `struct clone_args` (linux/sched.h), version 2 (`CLONE_ARGS_SIZE_VER2`, 88
/// bytes), the first with `cgroup`. glibc's libc crate does not define it.
#[repr(C)]
#[derive(Default)]
pub(crate) struct CloneArgs {
    pub(crate) flags: u64,
    pub(crate) pidfd: u64,
    pub(crate) child_tid: u64,
    pub(crate) parent_tid: u64,
    pub(crate) exit_signal: u64,
    pub(crate) stack: u64,
    pub(crate) stack_size: u64,
    pub(crate) tls: u64,
    pub(crate) set_tid: u64,
    pub(crate) set_tid_size: u64,
    pub(crate) cgroup: u64,
}

impl CloneArgs {
    /// `clone3` with these arguments: the child's pid in the parent, 0 in the child, below 0
    /// when it failed (errno says why).
    ///
    /// # Safety
    ///
    /// Without `CLONE_VM` and with no stack the child runs on a copy of the caller's memory,
    /// as after fork: until it execs or exits it must make raw system calls only, and no
    /// other thread of the caller may hold a lock it needs.
    pub(crate) unsafe fn clone3(&self) -> libc::c_long {
        // SAFETY: `self` is a valid clone_args of the size given; the child's side is the
        // caller's to uphold.
        unsafe {
            libc::syscall(
                libc::SYS_clone3,
                self as *const CloneArgs,
                std::mem::size_of::<CloneArgs>(),
            )
        }
    }
}

/// linux/sched.h; libc's constant is a c_int, which it does not fit.
const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

/// Set to `off` in the broker's environment: always the write to `cgroup.procs`, as on a
/// kernel without clone3 (for tests of that path).
pub const CLONE3_ENV: &str = "TETHER_CLONE3";

pub fn disabled() -> bool {
    std::env::var_os(CLONE3_ENV).is_some_and(|v| v == "off")
}

/// How the attempt ended.
pub enum Cloned {
    /// The command runs, born in the cgroup.
    Started(i32),
    /// clone3 itself failed (ENOSYS before 5.7 or under a seccomp filter, EINVAL or E2BIG
    /// for a kernel that knows no `cgroup` field, EBUSY or EACCES for that cgroup): no
    /// child exists, so the caller starts it the old way.
    Unavailable,
    /// The child existed and could not become the command (exec failed): reaped here.
    Failed(io::Error),
}

/// What the child needs, allocated before the clone: a child may not allocate.
struct Prepared {
    program: CString,
    argv: Vec<CString>,
    envp: Vec<CString>,
    cwd: Option<CString>,
}

fn c_string(bytes: &[u8]) -> io::Result<CString> {
    CString::new(bytes).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

/// The command's environment as std would give it: ours, with the `Command`'s changes.
fn environment(command: &Command) -> io::Result<Vec<CString>> {
    let mut env: std::collections::BTreeMap<OsString, OsString> = std::env::vars_os().collect();
    for (key, value) in command.get_envs() {
        match value {
            Some(value) => env.insert(key.to_owned(), value.to_owned()),
            None => env.remove(key),
        };
    }
    env.iter()
        .map(|(k, v)| c_string(&[k.as_bytes(), b"=", v.as_bytes()].concat()))
        .collect()
}

fn prepare(command: &Command, arg0: Option<&str>) -> io::Result<Prepared> {
    let program = c_string(command.get_program().as_bytes())?;
    let first = arg0.map_or(command.get_program(), OsStr::new);
    let argv = std::iter::once(first)
        .chain(command.get_args())
        .map(|a| c_string(a.as_bytes()))
        .collect::<io::Result<_>>()?;
    let cwd = command
        .get_current_dir()
        .map(|d| c_string(d.as_os_str().as_bytes()))
        .transpose()?;
    Ok(Prepared {
        program,
        argv,
        envp: environment(command)?,
        cwd,
    })
}

/// The child's start: what std's `pre_exec` closure did, after the standard streams.
pub struct ChildStart {
    /// Descriptors for 0, 1 and 2.
    pub stdio: [RawFd; 3],
    /// Its own process group (pipes, or a terminal the broker controls); with a terminal of
    /// its own, setsid makes it one.
    pub own_group: bool,
    /// The descriptor of the broker's controlling terminal, whose foreground group the
    /// child's becomes.
    pub foreground: Option<i32>,
    /// The descriptor whose terminal becomes the child's own controlling one, in a session
    /// of its own (the broker could not take it).
    pub controlling: Option<i32>,
    pub broker_pid: i32,
}

unsafe extern "C" {
    static mut environ: *const *const libc::c_char;
}

/// Starts `command` (program, args, env, cwd as set on it; stdio from `start`) in the
/// cgroup `cgroup_dir`.
pub fn spawn(
    command: &Command,
    arg0: Option<&str>,
    start: &ChildStart,
    cgroup_dir: BorrowedFd<'_>,
) -> Cloned {
    let prepared = match prepare(command, arg0) {
        Ok(prepared) => prepared,
        Err(err) => return Cloned::Failed(err),
    };
    let pointers = |list: &[CString]| {
        let mut p: Vec<*const libc::c_char> = list.iter().map(|s| s.as_ptr()).collect();
        p.push(std::ptr::null());
        p
    };
    let argv = pointers(&prepared.argv);
    let envp = pointers(&prepared.envp);
    let (report_read, report_write) = match nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC) {
        Ok(pair) => pair,
        Err(_) => return Cloned::Unavailable,
    };
    let args = CloneArgs {
        flags: CLONE_INTO_CGROUP,
        exit_signal: libc::SIGCHLD as u64,
        cgroup: cgroup_dir.as_raw_fd() as u64,
        ..CloneArgs::default()
    };
    // SAFETY: the child runs on a copy of our memory from here, as after fork, and `child`
    // makes raw system calls only; the broker forks from its only thread.
    let pid = unsafe { args.clone3() };
    if pid == 0 {
        // SAFETY: in the child; `child` makes raw system calls only and never returns.
        unsafe { child(&prepared, &argv, &envp, start, report_write.as_raw_fd()) }
    }
    if pid < 0 {
        return Cloned::Unavailable;
    }
    let pid = pid as i32;
    drop(report_write);
    match read_report(&report_read) {
        None => Cloned::Started(pid),
        Some(err) => {
            // It exited at once (`_exit`): reaped here, as std reaps a child whose exec
            // failed, so the broker's loop never sees a pid that was never the command.
            let _ = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(pid), None);
            Cloned::Failed(err)
        }
    }
}

/// The child's errno, if it wrote one before exec closed the pipe.
pub(crate) fn read_report(pipe: &OwnedFd) -> Option<io::Error> {
    let mut buf = [0u8; 4];
    loop {
        match nix::unistd::read(pipe, &mut buf) {
            Ok(4) => return Some(io::Error::from_raw_os_error(i32::from_ne_bytes(buf))),
            Ok(_) => return None,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(err) => return Some(err.into()),
        }
    }
}

/// In the child, from clone3 to exec: raw system calls only, no allocation, no lock.
unsafe fn child(
    prepared: &Prepared,
    argv: &[*const libc::c_char],
    envp: &[*const libc::c_char],
    start: &ChildStart,
    report: RawFd,
) -> ! {
    let fail = |errno: i32| -> ! {
        let bytes = errno.to_ne_bytes();
        // SAFETY: raw write and _exit; `bytes` lives on this stack.
        unsafe {
            libc::write(report, bytes.as_ptr().cast(), bytes.len());
            libc::_exit(127)
        }
    };
    let errno = || {
        io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO)
    };
    // SAFETY: each call below is a raw system call on descriptors and C strings that are
    // valid in this copy of the broker's memory.
    unsafe {
        for (target, &source) in start.stdio.iter().enumerate() {
            let target = target as RawFd;
            // dup2 onto itself keeps close-on-exec: cleared by hand then.
            let placed = if source == target {
                libc::fcntl(target, libc::F_SETFD, 0)
            } else {
                libc::dup2(source, target)
            };
            if placed < 0 {
                fail(errno());
            }
        }
        if start.own_group && libc::setpgid(0, 0) < 0 {
            fail(errno());
        }
        if let Some(cwd) = &prepared.cwd
            && libc::chdir(cwd.as_ptr()) < 0
        {
            fail(errno());
        }
        // As on the fork path (see `spawn`): dies with its broker, which must still be there.
        libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGKILL as libc::c_ulong,
            0,
            0,
            0,
        );
        if libc::getppid() != start.broker_pid {
            libc::_exit(1);
        }
        if let Err(err) = super::signals::reset_in_child() {
            fail(err.raw_os_error().unwrap_or(libc::EIO));
        }
        if let Some(fd) = start.foreground
            && let Err(err) = super::signals::join_foreground(fd)
        {
            fail(err.raw_os_error().unwrap_or(libc::EIO));
        }
        if let Some(fd) = start.controlling
            && let Err(err) = crate::broker::pty::take_controlling_terminal(fd)
        {
            fail(err.raw_os_error().unwrap_or(libc::EIO));
        }
        // execvp searches the PATH of `environ`: the command's, as std arranges it.
        environ = envp.as_ptr();
        libc::execvp(prepared.program.as_ptr(), argv.as_ptr());
        fail(errno())
    }
}
