//! Starting the command directly inside its cgroup: `clone3(CLONE_INTO_CGROUP)` (Linux 5.7).
//!
//! Why not the child writing itself into `cgroup.procs`, as before: a write to
//! `cgroup.procs` migrates a running task, which takes the cgroup threadgroup rwsem for
//! writing and so waits for an RCU grace period, 10 to 20 ms on a busy machine, on every
//! command's path. A process born in its cgroup migrates nothing. std's `Command` cannot
//! pass clone3 flags, so the clone and exec are written here, as std and glibc write them:
//! everything the child needs (argv, envp, the paths exec tries) is allocated before the
//! clone, and an exec failure is reported through a close-on-exec pipe.
//!
//! On x86_64 the child shares the broker's memory until it execs, as glibc's `posix_spawn`
//! starts one (`CLONE_VM | CLONE_VFORK`): a fork copies the broker's page tables and then
//! takes a copy-on-write fault for each page either side writes before the exec throws the
//! copy away. Sharing asks this of the child, which runs on a stack of its own (mmap'd,
//! with a guard page, freed once the clone returns: the broker is suspended until the child
//! execs or exits):
//! - it writes none of the broker's memory: no `environ = envp` for execvp's PATH search,
//!   which is done before the clone instead (`search_path`, as glibc's execvp searches), the
//!   child only calling execve on each path in turn. Its one write is a file's path into
//!   the `/bin/sh` argv the broker made for it (execvp's way with a file exec cannot run).
//!   errno, set by a failing libc call, is the broker's thread's: harmless, read by nothing
//!   after.
//! - no handler of the broker's runs in it: the broker blocks every signal around the
//!   clone, as `posix_spawn` does, and the child sets every disposition to default in its
//!   own copy of the table (no `CLONE_SIGHAND`) before it unblocks them
//!   (`signals::reset_in_child`).
//!
//! A child stopped before its exec (a ^Z in the microseconds between joining the terminal's
//! foreground and exec) holds the broker in clone3 until it is continued or killed, as it
//! would hold `posix_spawn`'s caller.
//!
//! Elsewhere, and where the kernel refuses those flags or no stack can be had, the child is
//! a copy of the broker, as after fork(2), and runs the same code; the broker is
//! single-threaded (see `spawn`), so no lock can be held by a thread that does not exist in
//! the child. Either way the child makes raw system calls only until exec.
//!
//! libc for the clone and the child: nix has no `clone3`, and from the clone to exec the
//! child may make only raw system calls, which neither allocate nor take a lock.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::ffi::{CStr, CString, OsStr, OsString, c_char};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::process::Command;

use libc::c_long;

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
    /// The paths exec tries, in order (`search_path`).
    candidates: Vec<CString>,
    argv: Vec<CString>,
    envp: Vec<CString>,
    cwd: Option<CString>,
}

fn c_string(bytes: &[u8]) -> io::Result<CString> {
    CString::new(bytes).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

/// The command's environment as std would give it: ours, with the `Command`'s changes.
fn environment(command: &Command) -> BTreeMap<OsString, OsString> {
    let mut env: BTreeMap<OsString, OsString> = std::env::vars_os().collect();
    for (key, value) in command.get_envs() {
        match value {
            Some(value) => env.insert(key.to_owned(), value.to_owned()),
            None => env.remove(key),
        };
    }
    env
}

/// glibc's `confstr(_CS_PATH)`: where execvp looks when there is no PATH.
const DEFAULT_PATH: &[u8] = b"/bin:/usr/bin";

/// What execvp runs a file exec cannot (ENOEXEC) with.
const SHELL: &CStr = c"/bin/sh";

/// Where execvp, with the command's environment, would look for `program` (glibc's
/// `__execvpe_common`): the program alone if it has a slash, else the program in each
/// directory of `path`, an empty entry being the working directory (the command's: exec
/// runs after its chdir). Done before the clone: glibc's execvp reads PATH from `environ`,
/// which the child may not point at the command's environment without writing the broker's.
fn search_path(program: &[u8], path: Option<&[u8]>) -> io::Result<Vec<CString>> {
    if program.is_empty() {
        // Nothing to try: the child reports ENOENT, as execvp does.
        return Ok(Vec::new());
    }
    if program.contains(&b'/') {
        return Ok(vec![c_string(program)?]);
    }
    path.unwrap_or(DEFAULT_PATH)
        .split(|&b| b == b':')
        .map(|dir| match dir.is_empty() {
            true => c_string(program),
            false => c_string(&[dir, b"/", program].concat()),
        })
        .collect()
}

fn prepare(command: &Command, arg0: Option<&str>) -> io::Result<Prepared> {
    let env = environment(command);
    let path = env.get(OsStr::new("PATH")).map(|p| p.as_bytes());
    let candidates = search_path(command.get_program().as_bytes(), path)?;
    let first = arg0.map_or(command.get_program(), OsStr::new);
    let argv = std::iter::once(first)
        .chain(command.get_args())
        .map(|a| c_string(a.as_bytes()))
        .collect::<io::Result<_>>()?;
    let cwd = command
        .get_current_dir()
        .map(|d| c_string(d.as_os_str().as_bytes()))
        .transpose()?;
    let envp = env
        .iter()
        .map(|(k, v)| c_string(&[k.as_bytes(), b"=", v.as_bytes()].concat()))
        .collect::<io::Result<_>>()?;
    Ok(Prepared {
        candidates,
        argv,
        envp,
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

/// Everything the child reads, made by the broker before the clone.
struct ChildContext<'a> {
    candidates: &'a [CString],
    cwd: Option<&'a CStr>,
    /// Null-terminated, as execve takes them.
    argv: &'a [*const c_char],
    envp: &'a [*const c_char],
    /// execvp's argv for a file exec cannot run: `/bin/sh`, the file's path, then `argv`
    /// past its first. The path's slot is the child's one write.
    script: &'a [Cell<*const c_char>],
    start: &'a ChildStart,
    report: RawFd,
}

/// Starts `command` (program, args, env, cwd as set on it; stdio from `start`) in the
/// cgroup `cgroup_dir`.
pub fn spawn(
    command: &Command,
    arg0: Option<&str>,
    start: &ChildStart,
    cgroup_dir: BorrowedFd<'_>,
) -> Cloned {
    spawn_with(command, arg0, start, cgroup_dir, clone_child)
}

/// `spawn`, the clone made by `clone` (the tests' choice of one way).
fn spawn_with(
    command: &Command,
    arg0: Option<&str>,
    start: &ChildStart,
    cgroup_dir: BorrowedFd<'_>,
    clone: impl FnOnce(&ChildContext<'_>, RawFd) -> c_long,
) -> Cloned {
    let prepared = match prepare(command, arg0) {
        Ok(prepared) => prepared,
        Err(err) => return Cloned::Failed(err),
    };
    let pointers = crate::attention::notify::pointers;
    let argv = pointers(&prepared.argv);
    let envp = pointers(&prepared.envp);
    let script: Vec<Cell<*const c_char>> = [SHELL.as_ptr(), std::ptr::null()]
        .into_iter()
        .chain(argv[1..].iter().copied())
        .map(Cell::new)
        .collect();
    let (report_read, report_write) = match nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC) {
        Ok(pair) => pair,
        Err(_) => return Cloned::Unavailable,
    };
    let context = ChildContext {
        candidates: &prepared.candidates,
        cwd: prepared.cwd.as_deref(),
        argv: &argv,
        envp: &envp,
        script: &script,
        start,
        report: report_write.as_raw_fd(),
    };
    let pid = clone(&context, cgroup_dir.as_raw_fd());
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

/// clone3 into `cgroup`, the child running `child(context)`: sharing our memory where it
/// can (x86_64), else as fork. The child's pid, or below 0 when no child exists.
fn clone_child(context: &ChildContext<'_>, cgroup: RawFd) -> c_long {
    #[cfg(target_arch = "x86_64")]
    if let Some(pid) = shared::clone(context, cgroup) {
        return pid;
    }
    clone_as_fork(context, cgroup)
}

/// clone3 into `cgroup` as fork: the child, on a copy of our memory, runs `child(context)`.
fn clone_as_fork(context: &ChildContext<'_>, cgroup: RawFd) -> c_long {
    let args = CloneArgs {
        flags: CLONE_INTO_CGROUP,
        exit_signal: libc::SIGCHLD as u64,
        cgroup: cgroup as u64,
        ..CloneArgs::default()
    };
    // SAFETY: the child runs on a copy of our memory from here, as after fork, and `child`
    // makes raw system calls only; the broker forks from its only thread.
    let pid = unsafe { args.clone3() };
    if pid == 0 {
        // SAFETY: in the child; `child` makes raw system calls only and never returns.
        unsafe { child(context) }
    }
    pid
}

/// The child that shares the broker's memory until exec, as `posix_spawn`'s (module doc).
#[cfg(target_arch = "x86_64")]
mod shared {
    use std::ffi::c_void;
    use std::num::NonZeroUsize;
    use std::os::fd::RawFd;
    use std::ptr::NonNull;

    use nix::sys::mman::{MapFlags, ProtFlags, mmap_anonymous, mprotect, munmap};

    use super::{CLONE_INTO_CGROUP, ChildContext, CloneArgs, child};
    use crate::broker::spawn::signals;

    /// x86_64's page size: it has no other base page.
    const PAGE: usize = 4096;
    /// The child's stack, above its guard page. What the child runs (`child` and libc's
    /// wrappers, unoptimised in a debug build) needs a few KiB of it; a page it never
    /// touches is never backed.
    const STACK: usize = 64 * 1024;

    /// The child's stack and its guard page, unmapped when dropped.
    struct Stack(NonNull<c_void>);

    impl Stack {
        fn map() -> Option<Stack> {
            let flags = MapFlags::MAP_PRIVATE | MapFlags::MAP_STACK | MapFlags::MAP_NORESERVE;
            let protection = ProtFlags::PROT_READ | ProtFlags::PROT_WRITE;
            // SAFETY: a new anonymous mapping, which aliases nothing.
            let base = unsafe {
                mmap_anonymous(None, NonZeroUsize::new(PAGE + STACK)?, protection, flags)
            }
            .ok()?;
            let stack = Stack(base);
            // The lowest page: a child that overruns its stack faults there, instead of
            // writing whatever the broker has mapped below.
            // SAFETY: the first page of the mapping just made, used by nothing yet.
            unsafe { mprotect(base, PAGE, ProtFlags::PROT_NONE) }.ok()?;
            Some(stack)
        }

        /// The stack's lowest usable address, as clone3 takes it: the child's stack
        /// pointer starts at `bottom + STACK`, page-aligned and so 16-byte aligned, as the
        /// ABI wants it before a call.
        fn bottom(&self) -> u64 {
            (self.0.as_ptr() as usize + PAGE) as u64
        }
    }

    impl Drop for Stack {
        fn drop(&mut self) {
            // SAFETY: the whole mapping `map` made; the child that ran on it has exec'd or
            // exited (CLONE_VFORK), so nothing uses it.
            let _ = unsafe { munmap(self.0, PAGE + STACK) };
        }
    }

    /// The child's pid, or `None` where no child exists: no stack, or the kernel refused
    /// (the caller then clones as fork, which fails too if clone3 itself cannot).
    pub(super) fn clone(context: &ChildContext<'_>, cgroup: RawFd) -> Option<libc::c_long> {
        let stack = Stack::map()?;
        let args = CloneArgs {
            flags: CLONE_INTO_CGROUP | libc::CLONE_VM as u64 | libc::CLONE_VFORK as u64,
            exit_signal: libc::SIGCHLD as u64,
            stack: stack.bottom(),
            stack_size: STACK as u64,
            cgroup: cgroup as u64,
            ..CloneArgs::default()
        };
        let mask = signals::block_all().ok()?;
        // SAFETY: `args` is a valid clone_args with a stack of its own for the child, which
        // runs `run` on it: `context` stays alive in our frame, and we are suspended until
        // the child execs or exits (CLONE_VFORK). Every signal is blocked until its
        // handlers are the defaults.
        let pid = unsafe { clone3_on_stack(&args, run, context as *const ChildContext<'_>) };
        signals::set_mask(&mask);
        drop(stack);
        (pid > 0).then_some(pid)
    }

    /// The child's start, on its own stack.
    extern "C" fn run(context: *const c_void) -> ! {
        // SAFETY: `context` is the `ChildContext` given to `clone`, alive in the suspended
        // broker's frame until the child execs or exits; `child` never returns.
        unsafe { child(&*context.cast::<ChildContext<'_>>()) }
    }

    /// `clone3(args)` whose child calls `entry(arg)` on the stack `args` gives it: the
    /// child's pid, or the error as a negative errno (no libc wrapper, so nothing but the
    /// registers is touched).
    ///
    /// # Safety
    ///
    /// `args` must give the child a stack of its own and `entry` must never return;
    /// with `CLONE_VM` the child shares our memory, so what `entry` does is the caller's
    /// to uphold.
    unsafe fn clone3_on_stack<T>(
        args: &CloneArgs,
        entry: extern "C" fn(*const c_void) -> !,
        arg: *const T,
    ) -> libc::c_long {
        let result: libc::c_long;
        // SAFETY: the caller's. In the parent the asm is one system call (which clobbers
        // rcx and r11); in the child (rax 0), on its new stack, entry and argument were
        // carried in r12 and r13, which the kernel and the syscall preserve: no frame
        // above it (rbp 0), the argument in rdi, and the call never returns (ud2 if it
        // did).
        unsafe {
            std::arch::asm!(
                "syscall",
                "test rax, rax",
                "jnz 2f",
                "xor ebp, ebp",
                "mov rdi, r13",
                "call r12",
                "ud2",
                "2:",
                inlateout("rax") libc::SYS_clone3 => result,
                in("rdi") args as *const CloneArgs,
                in("rsi") std::mem::size_of::<CloneArgs>(),
                in("r12") entry as usize,
                in("r13") arg,
                lateout("rcx") _,
                lateout("r11") _,
                options(nostack),
            );
        }
        result
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

/// Writes an errno to the report pipe and exits, in a child before exec (the command's, a
/// keeper's notify command's) or in a keeper: the broker says the command could not run.
///
/// # Safety
///
/// Only in such a child of the broker, which ends here.
pub(crate) unsafe fn fail(report: RawFd, errno: i32) -> ! {
    let bytes = errno.to_ne_bytes();
    // SAFETY: raw write and _exit; `bytes` lives on this stack.
    unsafe {
        libc::syscall(
            libc::SYS_write,
            report as c_long,
            bytes.as_ptr(),
            bytes.len(),
        );
        libc::_exit(127)
    }
}

/// The errno a libc call that failed left.
pub(crate) fn errno() -> i32 {
    io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

/// In the child, from clone3 to exec: raw system calls only, no allocation, no lock, and no
/// write to memory but the child's own stack and `context.script`'s slot (with `CLONE_VM`
/// all the rest is the broker's).
unsafe fn child(context: &ChildContext<'_>) -> ! {
    let start = context.start;
    // SAFETY: a raw write and _exit.
    let fail = |errno: i32| -> ! { unsafe { fail(context.report, errno) } };
    // Every argument below is a c_long, as glibc's variadic `syscall` reads them.
    let check = |result: c_long| {
        if result < 0 {
            fail(errno());
        }
    };
    // SAFETY: each call below is a raw system call on descriptors and C strings that are
    // valid in the broker's memory, shared or copied.
    unsafe {
        for (target, &source) in start.stdio.iter().enumerate() {
            // dup3 refuses a descriptor onto itself, which besides keeps close-on-exec:
            // cleared by hand then.
            check(if source as usize == target {
                libc::syscall(
                    libc::SYS_fcntl,
                    target as c_long,
                    libc::F_SETFD as c_long,
                    0 as c_long,
                )
            } else {
                libc::syscall(
                    libc::SYS_dup3,
                    source as c_long,
                    target as c_long,
                    0 as c_long,
                )
            });
        }
        if start.own_group {
            check(libc::syscall(libc::SYS_setpgid, 0 as c_long, 0 as c_long));
        }
        if let Some(cwd) = context.cwd {
            check(libc::syscall(libc::SYS_chdir, cwd.as_ptr()));
        }
        // As on the fork path (see `spawn`): dies with its broker, which must still be there.
        libc::syscall(
            libc::SYS_prctl,
            libc::PR_SET_PDEATHSIG as c_long,
            libc::SIGKILL as c_long,
            0 as c_long,
            0 as c_long,
            0 as c_long,
        );
        if libc::syscall(libc::SYS_getppid) != start.broker_pid as c_long {
            libc::_exit(1);
        }
        let fail_on = |result: io::Result<()>| {
            if let Err(err) = result {
                fail(err.raw_os_error().unwrap_or(libc::EIO));
            }
        };
        fail_on(super::signals::reset_in_child());
        if let Some(fd) = start.foreground {
            fail_on(super::signals::join_foreground(fd));
        }
        if let Some(fd) = start.controlling {
            fail_on(crate::broker::pty::take_controlling_terminal(fd));
        }
        fail(exec(context))
    }
}

/// execvp's way over the paths `search_path` found (glibc's `__execvpe_common`): each is
/// tried in turn, a file exec cannot run (ENOEXEC) is run by `/bin/sh`, a path missing or
/// not searchable is passed over. Returns only if none ran: the errno to report, EACCES if
/// any was denied, else the last one's.
unsafe fn exec(context: &ChildContext<'_>) -> i32 {
    let execve = |path: *const c_char, argv: *const *const c_char| {
        // SAFETY: null-terminated arrays of C strings, all alive in the broker's memory.
        unsafe { libc::syscall(libc::SYS_execve, path, argv, context.envp.as_ptr()) };
        errno()
    };
    let mut denied = false;
    let mut last = libc::ENOENT;
    for path in context.candidates {
        let mut err = execve(path.as_ptr(), context.argv.as_ptr());
        if err == libc::ENOEXEC {
            context.script[1].set(path.as_ptr());
            // `Cell<T>` has `T`'s layout: the slots are a null-terminated pointer array.
            err = execve(SHELL.as_ptr(), context.script.as_ptr().cast());
        }
        match err {
            libc::EACCES => denied = true,
            libc::ENOENT | libc::ESTALE | libc::ENOTDIR | libc::ENODEV | libc::ETIMEDOUT => {}
            _ => return err,
        }
        last = err;
    }
    if denied { libc::EACCES } else { last }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    /// The test process's own cgroup, open as clone3 takes it; `None` (and why, printed)
    /// where there is none to start a child in.
    fn own_cgroup() -> Option<OwnedFd> {
        let hierarchy = tether_os::cgroup::Hierarchy::find()
            .map_err(|err| tether_os::testing::skip(format!("no cgroup: {err}")))
            .ok()?;
        std::fs::File::open(hierarchy.path())
            .ok()
            .map(OwnedFd::from)
    }

    /// The calling thread's blocked signals, from the kernel.
    fn blocked_signals() -> String {
        let status = std::fs::read_to_string("/proc/thread-self/status").expect("status");
        let line = status.lines().find(|l| l.starts_with("SigBlk:"));
        line.expect("SigBlk").to_owned()
    }

    /// How a child started by `spawn_with` ended: its exit code and what it wrote on
    /// stdout and stderr, or why it did not start. `None`: clone3 was unavailable.
    type Outcome = Option<Result<(i32, String), io::Error>>;

    /// A way of cloning the child.
    type CloneWay = fn(&ChildContext<'_>, RawFd) -> c_long;

    /// Runs `command` as the broker would, the clone made by `clone`, and waits for it;
    /// checks that our signal mask and environment are as they were.
    fn run(command: &Command, arg0: Option<&str>, cgroup: &OwnedFd, clone: CloneWay) -> Outcome {
        let (mask, path) = (blocked_signals(), std::env::var_os("PATH"));
        let null = std::fs::File::open("/dev/null").expect("/dev/null");
        let (read, write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).expect("pipe");
        let start = ChildStart {
            stdio: [null.as_raw_fd(), write.as_raw_fd(), write.as_raw_fd()],
            own_group: true,
            foreground: None,
            controlling: None,
            broker_pid: std::process::id() as i32,
        };
        let cloned = spawn_with(command, arg0, &start, cgroup.as_fd(), clone);
        drop(write);
        assert_eq!(blocked_signals(), mask, "our signal mask is put back");
        assert_eq!(
            std::env::var_os("PATH"),
            path,
            "our environment is untouched"
        );
        let pid = match cloned {
            Cloned::Unavailable => return None,
            Cloned::Failed(err) => return Some(Err(err)),
            Cloned::Started(pid) => nix::unistd::Pid::from_raw(pid),
        };
        let mut output = String::new();
        io::Read::read_to_string(&mut std::fs::File::from(read), &mut output).expect("read");
        let status = nix::sys::wait::waitpid(pid, None).expect("wait");
        let nix::sys::wait::WaitStatus::Exited(_, code) = status else {
            panic!("the child ended as {status:?}");
        };
        Some(Ok((code, output)))
    }

    /// Each way of cloning, by name: the one `spawn` takes, and each it may fall back to.
    fn clones() -> Vec<(&'static str, CloneWay)> {
        let mut clones: Vec<(&str, CloneWay)> =
            vec![("spawn's", clone_child), ("as fork", clone_as_fork)];
        #[cfg(target_arch = "x86_64")]
        clones.push(("sharing memory", |context, cgroup| {
            shared::clone(context, cgroup).unwrap_or(-1)
        }));
        clones
    }

    #[test]
    fn the_command_runs_with_its_path_arguments_environment_and_directory() {
        let Some(cgroup) = own_cgroup() else { return };
        let dir = tether_os::testing::private_tempdir();
        tether_os::testing::write_script(
            &dir.path().join("hello"),
            "#!/bin/sh\necho \"$1 $GREETING $(pwd)\"\nexit 3\n",
            0o700,
        );
        // No `#!`: exec refuses it and execvp has /bin/sh run it.
        tether_os::testing::write_script(&dir.path().join("bare"), "echo bare \"$1\"\n", 0o700);
        // The first entry is missing: the search passes over it, as execvp's does.
        let path = format!("/nonexistent:{}", dir.path().display());
        for (name, clone) in clones() {
            let mut hello = Command::new("hello");
            hello.arg("one").env("PATH", &path).env("GREETING", "hi");
            hello.current_dir("/");
            let Some(outcome) = run(&hello, None, &cgroup, clone) else {
                return tether_os::testing::skip("clone3 into a cgroup is unavailable");
            };
            assert_eq!(outcome.unwrap(), (3, "one hi /\n".into()), "{name}");
            let mut bare = Command::new("bare");
            bare.arg("two").env("PATH", &path);
            let outcome = run(&bare, None, &cgroup, clone).expect("clone3");
            assert_eq!(outcome.unwrap(), (0, "bare two\n".into()), "{name}");
            let mut named = Command::new("/bin/sh");
            named.args(["-c", "echo $0"]);
            let outcome = run(&named, Some("named"), &cgroup, clone).expect("clone3");
            assert_eq!(outcome.unwrap(), (0, "named\n".into()), "{name}");
        }
    }

    #[test]
    fn a_command_that_cannot_start_says_why_as_execvp_would() {
        let Some(cgroup) = own_cgroup() else { return };
        let dir = tether_os::testing::private_tempdir();
        tether_os::testing::write_script(&dir.path().join("locked"), "#!/bin/sh\n", 0o600);
        let path = dir.path().display().to_string();
        for (name, clone) in clones() {
            let cases: [(Command, i32); 4] = [
                (Command::new("missing"), libc::ENOENT),
                (Command::new("/nonexistent/missing"), libc::ENOENT),
                (Command::new("locked"), libc::EACCES),
                (Command::new("true"), libc::ENOENT),
            ];
            for (mut command, errno) in cases {
                command.env("PATH", &path);
                if command.get_program() == "true" {
                    command
                        .env("PATH", "/bin:/usr/bin")
                        .current_dir("/nonexistent");
                }
                let Some(outcome) = run(&command, None, &cgroup, clone) else {
                    return tether_os::testing::skip("clone3 into a cgroup is unavailable");
                };
                let err = outcome.expect_err("it cannot start");
                assert_eq!(err.raw_os_error(), Some(errno), "{name}: {command:?}");
            }
        }
    }

    #[test]
    fn search_path_tries_what_execvp_tries() {
        let found = |program: &str, path: Option<&str>| -> Vec<String> {
            search_path(program.as_bytes(), path.map(str::as_bytes))
                .unwrap()
                .into_iter()
                .map(|c| c.into_string().unwrap())
                .collect()
        };
        assert_eq!(found("ls", Some("/a::/b")), ["/a/ls", "ls", "/b/ls"]);
        assert_eq!(found("ls", None), ["/bin/ls", "/usr/bin/ls"]);
        assert_eq!(found("./ls", Some("/a")), ["./ls"]);
        assert!(found("", Some("/a")).is_empty());
    }
}
