//! The command starts with every signal at its default disposition and none blocked, as a
//! fresh process would. Left to itself it would not: glibc's `posix_spawn`, which std uses
//! when it can, sets glibc's own signals 32 and 33 (SIGCANCEL, SIGSETXID) to *ignored* in
//! the child when the parent has handlers for them, and an ignored signal stays ignored
//! across exec. Anything ignored where tether itself was started (`nohup`, a shell's `&`)
//! would otherwise pass on to the command too.
//!
//! Raw `rt_sigaction`/`rt_sigprocmask` through libc: they run in the child between clone and
//! exec, and over the kernel's whole signal set, where nix's `SigSet` and `sigaction` go
//! through glibc, which hides its own signals 32 and 33.

use std::io;

/// Signals the kernel knows (`_NSIG` in the kernel's headers), and the size of its sigset.
#[cfg(any(
    target_arch = "mips",
    target_arch = "mips32r6",
    target_arch = "mips64",
    target_arch = "mips64r6"
))]
const KERNEL_NSIG: usize = 128;
#[cfg(not(any(
    target_arch = "mips",
    target_arch = "mips32r6",
    target_arch = "mips64",
    target_arch = "mips64r6"
)))]
const KERNEL_NSIG: usize = 64;
const KERNEL_SIGSET_BYTES: usize = KERNEL_NSIG / 8;

/// Sets every signal to SIG_DFL and empties the signal mask, in that order: a child that
/// shares the broker's memory (`clone_into`) comes with every signal blocked, and none may
/// reach one of the broker's handlers. It runs in the child just before exec, so it makes
/// raw system calls only: those are async-signal-safe and touch no lock a fork may have
/// copied held, and glibc's `sigaction` refuses 32 and 33.
pub fn reset_in_child() -> io::Result<()> {
    // All zeros is SIG_DFL with no flags and an empty mask in the kernel's `struct
    // sigaction` on every architecture, whatever the order of its fields; 64 bytes is more
    // than any architecture's.
    let default_action = [0u64; 8];
    let empty_set = [0u64; 2];
    for signal in 1..=KERNEL_NSIG {
        // SAFETY: both pointers are valid for as many bytes as the kernel reads, and setting
        // a disposition to SIG_DFL runs no code. The kernel refuses SIGKILL and SIGSTOP,
        // which are never anything but default, so a failure leaves nothing to reset.
        unsafe {
            libc::syscall(
                libc::SYS_rt_sigaction,
                signal as libc::c_long,
                default_action.as_ptr(),
                std::ptr::null_mut::<u64>(),
                KERNEL_SIGSET_BYTES,
            );
        }
    }
    sigprocmask(libc::SIG_SETMASK, &empty_set, None)
}

/// `rt_sigprocmask(how, set)` over the kernel's whole set, keeping the mask it replaced in
/// `old` when asked: a raw system call, as it runs between clone and exec too.
fn sigprocmask(how: libc::c_int, set: &[u64; 2], old: Option<&mut [u64; 2]>) -> io::Result<()> {
    let old = old.map_or(std::ptr::null_mut(), |old| old.as_mut_ptr());
    // SAFETY: `set`, and `old` unless it is null, are valid for KERNEL_SIGSET_BYTES bytes.
    let changed = unsafe {
        libc::syscall(
            libc::SYS_rt_sigprocmask,
            how as libc::c_long,
            set.as_ptr(),
            old,
            KERNEL_SIGSET_BYTES,
        )
    };
    if changed == -1 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Blocks every signal the kernel has in the calling thread, glibc's own 32 and 33 too
/// (its `pthread_sigmask` leaves those two open), and gives back the mask it replaced: the
/// broker's, around a clone whose child shares its memory, as glibc's `posix_spawn` blocks
/// them, so that no handler of the broker's runs in the child before `reset_in_child` has
/// set them all to default. The kernel leaves SIGKILL and SIGSTOP out by itself.
#[cfg(target_arch = "x86_64")]
pub fn block_all() -> io::Result<[u64; 2]> {
    let mut old = [0u64; 2];
    sigprocmask(libc::SIG_SETMASK, &[u64::MAX; 2], Some(&mut old))?;
    Ok(old)
}

/// Puts back the mask `block_all` replaced.
#[cfg(target_arch = "x86_64")]
pub fn set_mask(mask: &[u64; 2]) {
    // It cannot fail with a valid set and size.
    let _ = sigprocmask(libc::SIG_SETMASK, mask, None);
}

/// In the forked child, before exec, once it leads a process group of its own in the
/// broker's session: makes that group the foreground one of the terminal on descriptor `fd`
/// (1 or 2, already in place). SIGTTOU is held off meanwhile: from a background group, as
/// the child still is, `tcsetpgrp` would otherwise stop it. Raw system calls only.
pub fn join_foreground(fd: i32) -> io::Result<()> {
    let ttou = [1u64 << (libc::SIGTTOU - 1), 0];
    let _ = sigprocmask(libc::SIG_BLOCK, &ttou, None);
    // SAFETY: `fd` is one of the child's standard descriptors, open until exec; it is only
    // borrowed for the call.
    let tty = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
    // rustix, not nix: this runs between fork and exec, where only raw system calls may be
    // made. rustix makes the TIOCSPGRP ioctl and getpid itself; nix calls glibc's wrappers.
    let placed = rustix::termios::tcsetpgrp(tty, rustix::process::getpid());
    let _ = sigprocmask(libc::SIG_UNBLOCK, &ttou, None);
    Ok(placed?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;
    use std::process::Command;

    /// The SigBlk and SigIgn lines of a program's /proc status when its child, before
    /// exec, ignores and blocks signals as glibc's posix_spawn and `nohup` leave them, then
    /// resets them or not.
    fn masks_of_a_program(reset: bool) -> String {
        let mut command = Command::new("grep");
        command.args(["-E", "^Sig(Ign|Blk):", "/proc/self/status"]);
        // SAFETY: raw system calls only, as in `reset_in_child`.
        unsafe {
            command.pre_exec(move || {
                let ignore = [libc::SIG_IGN as u64, 0, 0, 0, 0, 0, 0, 0];
                for signal in [libc::SIGHUP, libc::SIGUSR1, 32, 33] {
                    libc::syscall(
                        libc::SYS_rt_sigaction,
                        signal as libc::c_long,
                        ignore.as_ptr(),
                        std::ptr::null_mut::<u64>(),
                        KERNEL_SIGSET_BYTES,
                    );
                }
                let blocked = [1u64 << (libc::SIGUSR2 - 1), 0];
                libc::syscall(
                    libc::SYS_rt_sigprocmask,
                    libc::SIG_BLOCK as libc::c_long,
                    blocked.as_ptr(),
                    std::ptr::null_mut::<u64>(),
                    KERNEL_SIGSET_BYTES,
                );
                if reset { reset_in_child() } else { Ok(()) }
            });
        }
        let output = command.output().expect("run grep");
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    #[test]
    fn the_program_starts_with_nothing_ignored_or_blocked() {
        // The test's own setup, over whatever this process inherited (a test run from a
        // shell's background job ignores SIGINT and SIGQUIT too).
        let setup = masks_of_a_program(false);
        let mask = |name: &str| {
            let line = setup
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .expect("a mask");
            u64::from_str_radix(line.trim(), 16).expect("hex")
        };
        assert_eq!(mask("SigBlk:") & 0x800, 0x800, "{setup}");
        assert_eq!(mask("SigIgn:") & 0x1_8000_0201, 0x1_8000_0201, "{setup}");
        assert_eq!(
            masks_of_a_program(true),
            "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n"
        );
    }
}
