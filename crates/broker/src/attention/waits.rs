//! Whether an agent waits on its terminal, read from /proc: a thread of one of its processes
//! asleep in `read` of the terminal, or in `epoll_wait`, `poll` or `select` with the terminal
//! in the set it waits on; and whether one of its commands is running.
//!
//! An agent is an event loop (node, Bun): its main thread sleeps in `epoll_wait` on a set
//! that holds its terminal among sockets, timers and pipes; a read of the terminal comes
//! only after the wait says a key is there. So "waits on its terminal" is the set's content:
//!
//! - `epoll_wait`, `epoll_pwait`, `epoll_pwait2` (first argument: the epoll descriptor):
//!   `/proc/PID/fdinfo/EPFD` lists every descriptor registered (`tfd: N`);
//! - `poll`, `ppoll` (the `pollfd` array and its length) and `select`, `pselect6` (the number
//!   of descriptors and the read set): the set is in the process's memory, read with
//!   `process_vm_readv` (as ptrace would be allowed: the broker is the agent's ancestor, of
//!   the same user);
//! - `read`, `readv` on the terminal, as for any command.
//!
//! Each thread's call is in `/proc/PID/task/TID/syscall`. A descriptor is the terminal when
//! `/proc/PID/fd/N` is one of the command's terminals (see [`super::probe::which_input`]).

use std::os::unix::ffi::OsStrExt;

use nix::sys::uio::{RemoteIoVec, process_vm_readv};
use nix::unistd::Pid;

use super::detector::{Blocked, InputKind};
use super::probe::{InputFile, fd_input, program_name, read_small};
use tether_os::procfs::ProcStat;

/// A set larger than this is not read (a loop waiting on more descriptors is no terminal
/// program's prompt).
const MAX_SET: u64 = 4096;

/// How a call names the descriptors it waits on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Waits {
    /// The first argument, itself.
    Read,
    /// An epoll descriptor (the first argument) whose registrations fdinfo lists.
    Epoll,
    /// A `pollfd` array (first argument) of the second argument's length.
    Poll,
    /// A read `fd_set` (second argument) of the first argument's descriptors.
    Select,
}

/// The calls a thread waiting on its terminal sleeps in, by number on this architecture.
fn call(number: i64) -> Option<(&'static str, Waits)> {
    let calls: &[(i64, &str, Waits)] = &[
        (libc::SYS_read, "read", Waits::Read),
        (libc::SYS_readv, "readv", Waits::Read),
        #[cfg(any(target_arch = "x86_64", target_arch = "x86"))]
        (libc::SYS_epoll_wait, "epoll_wait", Waits::Epoll),
        (libc::SYS_epoll_pwait, "epoll_pwait", Waits::Epoll),
        (libc::SYS_epoll_pwait2, "epoll_pwait2", Waits::Epoll),
        #[cfg(any(target_arch = "x86_64", target_arch = "x86"))]
        (libc::SYS_poll, "poll", Waits::Poll),
        (libc::SYS_ppoll, "ppoll", Waits::Poll),
        #[cfg(any(target_arch = "x86_64", target_arch = "x86"))]
        (libc::SYS_select, "select", Waits::Select),
        (libc::SYS_pselect6, "pselect6", Waits::Select),
    ];
    calls
        .iter()
        .find(|(n, _, _)| *n == number)
        .map(|(_, name, waits)| (*name, *waits))
}

/// `/proc/PID/syscall`: the call's number and its six arguments (`232 0x3 0x7ffd 0x400 ...`);
/// `None` when the thread runs or is in no call.
pub fn parse_call(text: &str) -> Option<(i64, [u64; 6])> {
    let mut fields = text.split_ascii_whitespace();
    let number: i64 = fields.next()?.parse().ok()?;
    if number < 0 {
        return None;
    }
    let mut args = [0u64; 6];
    for arg in &mut args {
        *arg = u64::from_str_radix(fields.next()?.strip_prefix("0x")?, 16).ok()?;
    }
    Some((number, args))
}

/// The descriptors an epoll instance waits to read, from its fdinfo (`tfd: 11 events:
/// 40000019 ...`, the events in hex): those whose events ask for input (`EPOLLIN`,
/// `EPOLLPRI`). A one-shot registration that fired keeps only its flags (`40000000`) until
/// it is armed again: it waits for nothing.
pub fn parse_epoll_fds(fdinfo: &str) -> Vec<i32> {
    let input = (libc::EPOLLIN | libc::EPOLLPRI) as u32;
    fdinfo
        .lines()
        .filter_map(|line| line.strip_prefix("tfd:"))
        .filter_map(|rest| {
            let mut fields = rest.split_ascii_whitespace();
            let fd = fields.next()?.parse().ok()?;
            (fields.next()? == "events:").then_some(())?;
            let events = u32::from_str_radix(fields.next()?, 16).ok()?;
            (events & input != 0).then_some(fd)
        })
        .collect()
}

/// The descriptors a `pollfd` array waits to read (`POLLIN` or `POLLPRI` asked).
pub fn parse_pollfds(bytes: &[u8]) -> Vec<i32> {
    bytes
        .chunks_exact(8)
        .filter_map(|entry| {
            let fd = i32::from_ne_bytes(entry[0..4].try_into().ok()?);
            let events = i16::from_ne_bytes(entry[4..6].try_into().ok()?);
            (fd >= 0 && events & (libc::POLLIN | libc::POLLPRI) != 0).then_some(fd)
        })
        .collect()
}

/// The descriptors set in an `fd_set` of `count` descriptors: an array of longs, bit B of
/// long L being descriptor `L * bits + B`.
pub fn parse_fd_set(bytes: &[u8], count: u64) -> Vec<i32> {
    let bits = libc::c_ulong::BITS as usize;
    let (longs, _) = bytes.as_chunks::<{ std::mem::size_of::<libc::c_ulong>() }>();
    longs
        .iter()
        .map(|long| libc::c_ulong::from_ne_bytes(*long))
        .enumerate()
        .flat_map(|(i, word)| {
            (0..bits)
                .filter(move |bit| word & (1 << bit) != 0)
                .map(move |bit| i * bits + bit)
        })
        .filter(|&fd| (fd as u64) < count)
        .map(|fd| fd as i32)
        .collect()
}

/// What a thread of `pid` waits on that is the command's terminal, if any: the first thread
/// found so.
pub fn terminal_wait(pid: i32, inputs: &[InputFile]) -> Option<Blocked> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut buf = [0u8; 256];
    for task in tasks.flatten() {
        let name = task.file_name();
        let Ok(tid) = std::str::from_utf8(name.as_bytes()) else {
            continue;
        };
        let Some((number, args)) =
            read_small(&format!("/proc/{pid}/task/{tid}/syscall"), &mut buf).and_then(parse_call)
        else {
            continue;
        };
        let Some((name, waits)) = call(number) else {
            continue;
        };
        let fds = match waits {
            Waits::Read => i32::try_from(args[0])
                .map(|fd| vec![fd])
                .unwrap_or_default(),
            Waits::Epoll => epoll_fds(pid, args[0]),
            Waits::Poll => poll_fds(pid, args[0], args[1]),
            Waits::Select => select_fds(pid, args[1], args[0]),
        };
        let terminal = |&fd: &i32| fd_input(pid, fd, inputs) == Some(InputKind::Terminal);
        if let Some(fd) = fds.into_iter().find(terminal) {
            return Some(Blocked {
                fd,
                input: InputKind::Terminal,
                call: name,
                program: program_name(pid),
                reads: None,
            });
        }
    }
    None
}

/// What `process`, one of the agent's, is of its commands (see [`command_role`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommandRole {
    /// A shell call in flight, or the broker of a command its front end waits for.
    Running,
    /// A broker in custody of what a command left running, adopted by the agent's broker.
    Kept,
}

/// What `process`, one of the agent's, is of its commands, if anything. `Running`: the
/// front end of a shell call in flight (the shim the agent called, named
/// [`CALL_COMM`](tether_protocol::names::CALL_COMM) while it waits for its broker), or, on the /proc
/// walk, where the agent's tree holds its commands' brokers too, such a broker while its
/// front end still waits for it. A broker leads a session of its own and names itself
/// `tether-broker`; once its command's main process has exited its front end returns, and
/// it (in custody of what the command left running) is adopted by the nearest subreaper,
/// the agent's broker `own_pid`: `Kept`, as a server left running is no command running.
pub fn command_role(process: &ProcStat, own_pid: i32) -> Option<CommandRole> {
    if process.is_zombie() || process.pid == own_pid {
        return None;
    }
    let mut buf = [0u8; 64];
    let comm = read_small(&format!("/proc/{}/comm", process.pid), &mut buf)?;
    let comm = comm.trim().as_bytes();
    if comm == tether_protocol::names::CALL_COMM.to_bytes() {
        return Some(CommandRole::Running);
    }
    let broker =
        process.pid == process.sid && comm == tether_protocol::names::BROKER_COMM.to_bytes();
    match (broker, process.ppid == own_pid) {
        (false, _) => None,
        (true, false) => Some(CommandRole::Running),
        (true, true) => Some(CommandRole::Kept),
    }
}

fn epoll_fds(pid: i32, epfd: u64) -> Vec<i32> {
    let mut buf = vec![0u8; 64 * 1024];
    read_small(&format!("/proc/{pid}/fdinfo/{epfd}"), &mut buf)
        .map(parse_epoll_fds)
        .unwrap_or_default()
}

fn poll_fds(pid: i32, array: u64, count: u64) -> Vec<i32> {
    if count == 0 || count > MAX_SET {
        return Vec::new();
    }
    read_memory(pid, array, count as usize * 8)
        .map(|bytes| parse_pollfds(&bytes))
        .unwrap_or_default()
}

fn select_fds(pid: i32, set: u64, count: u64) -> Vec<i32> {
    if set == 0 || count == 0 || count > MAX_SET {
        return Vec::new();
    }
    let long = std::mem::size_of::<libc::c_ulong>() as u64;
    let bytes = count.div_ceil(long * 8) * long;
    read_memory(pid, set, bytes as usize)
        .map(|read| parse_fd_set(&read, count))
        .unwrap_or_default()
}

/// `len` bytes at `address` in `pid`'s memory.
fn read_memory(pid: i32, address: u64, len: usize) -> Option<Vec<u8>> {
    let mut bytes = vec![0u8; len];
    let remote = [RemoteIoVec {
        base: usize::try_from(address).ok()?,
        len,
    }];
    let read = process_vm_readv(
        Pid::from_raw(pid),
        &mut [std::io::IoSliceMut::new(&mut bytes)],
        &remote,
    )
    .ok()?;
    (read == len).then_some(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_syscall_file_gives_every_argument() {
        let text = format!(
            "{} 0x4 0x7ffc1000 0x400 0xffffffff 0x0 0x8 0x7ffc0ff8 0x7f00",
            libc::SYS_epoll_pwait
        );
        assert_eq!(
            parse_call(&text),
            Some((
                libc::SYS_epoll_pwait,
                [4, 0x7ffc1000, 0x400, 0xffffffff, 0, 8]
            ))
        );
        assert_eq!(parse_call("running"), None);
        assert_eq!(parse_call("-1 0x7ffd 0x7f12"), None);
        assert_eq!(parse_call("7 0x5 0x1"), None, "cut short");
    }

    #[test]
    fn an_epoll_fdinfo_lists_its_descriptors() {
        // Claude Code 2.1.197 at its prompt under `tether agent` (its event loop's thread):
        // 11 is its stdin's terminal, armed to read; 12 and 13 its output terminal, one-shot
        // registrations for writing that fired; the rest timers and eventfds.
        let fdinfo = "pos:\t0\nflags:\t02000002\nmnt_id:\t17\nino:\t20\n\
             tfd:       12 events: 40000000 data:  80005f133940028  pos:0 ino:4 sdev:1a\n\
             tfd:       13 events: 40000000 data:  80005f133940050  pos:0 ino:4 sdev:1a\n\
             tfd:        7 events:       19 data:      5f133650320  pos:0 ino:14 sdev:10\n\
             tfd:       11 events: 40000019 data:  80005f133940000  pos:0 ino:3 sdev:1a\n\
             tfd:        6 events: 80000019 data:      5f133e50480  pos:0 ino:14 sdev:10\n\
             tfd:        8 events:       19 data:      5f133650370  pos:0 ino:14 sdev:10\n";
        assert_eq!(parse_epoll_fds(fdinfo), vec![7, 11, 6, 8]);
        assert_eq!(parse_epoll_fds("pos:\t0\n"), Vec::<i32>::new());
    }

    #[test]
    fn a_poll_array_and_a_select_set_say_what_they_wait_to_read() {
        let entry = |fd: i32, events: i16| {
            let mut e = fd.to_ne_bytes().to_vec();
            e.extend(events.to_ne_bytes());
            e.extend(0i16.to_ne_bytes());
            e
        };
        let mut array = entry(0, libc::POLLIN);
        array.extend(entry(1, libc::POLLOUT));
        array.extend(entry(-1, libc::POLLIN));
        array.extend(entry(7, libc::POLLIN | libc::POLLOUT));
        assert_eq!(parse_pollfds(&array), vec![0, 7]);
        let mut set = vec![0u8; 16];
        set[0] = 0b0000_0101;
        set[8] = 0b0000_0001;
        assert_eq!(parse_fd_set(&set, 65), vec![0, 2, 64]);
        assert_eq!(parse_fd_set(&set, 64), vec![0, 2]);
    }

    /// A process waiting on a terminal through Python's `select` module, as each call.
    fn seen_waiting(script: &str) -> Blocked {
        let pty = nix::pty::openpty(None, None).expect("a pty");
        let input = crate::attention::probe::input_file(&pty.slave).expect("the pty is a file");
        let mut child = std::process::Command::new("python3")
            .args(["-c", script])
            .stdin(std::process::Stdio::from(pty.slave))
            .spawn()
            .expect("python3");
        let pid = child.id() as i32;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let mut seen = None;
        while seen.is_none() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(20));
            seen = terminal_wait(pid, &[input]);
        }
        let _ = child.kill();
        let _ = child.wait();
        drop(pty.master);
        seen.unwrap_or_else(|| panic!("`{script}` never seen waiting on its terminal"))
    }

    #[test]
    fn a_process_in_epoll_poll_or_select_on_its_terminal_is_seen() {
        // Other descriptors in the set first (a pipe), as an event loop has them.
        let epoll = seen_waiting(
            "import os, select; r, w = os.pipe(); e = select.epoll(); \
             e.register(r, select.EPOLLIN); e.register(0, select.EPOLLIN); e.poll(60)",
        );
        assert!(epoll.call.starts_with("epoll_"), "{epoll:?}");
        assert_eq!((epoll.fd, epoll.input), (0, InputKind::Terminal));
        assert_eq!(epoll.program, "python3");
        let poll = seen_waiting(
            "import os, select; r, w = os.pipe(); p = select.poll(); \
             p.register(r, select.POLLIN); p.register(0, select.POLLIN); p.poll(60000)",
        );
        assert!(poll.call.ends_with("poll"), "{poll:?}");
        assert_eq!(poll.fd, 0);
        let select =
            seen_waiting("import os, select; r, w = os.pipe(); select.select([r, 0], [], [], 60)");
        assert!(select.call.contains("select"), "{select:?}");
        assert_eq!(select.fd, 0);
        // From a thread other than the main one, as a runtime's I/O thread would wait.
        let threaded = seen_waiting(
            "import select, threading; t = threading.Thread(target=lambda: select.select([0], [], [], 60)); \
             t.start(); t.join()",
        );
        assert_eq!(threaded.fd, 0);
    }

    #[test]
    fn a_process_waiting_on_other_descriptors_only_is_not() {
        let pty = nix::pty::openpty(None, None).expect("a pty");
        let input = crate::attention::probe::input_file(&pty.slave).expect("the pty is a file");
        let mut child = std::process::Command::new("python3")
            .args([
                "-c",
                "import os, select; r, w = os.pipe(); select.select([r], [], [], 60)",
            ])
            .stdin(std::process::Stdio::null())
            .spawn()
            .expect("python3");
        let pid = child.id() as i32;
        // Once it sleeps in its select (seen in its syscall file), the look says no.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let in_select = || {
            let mut buf = [0u8; 256];
            read_small(&format!("/proc/{pid}/syscall"), &mut buf)
                .and_then(parse_call)
                .and_then(|(number, _)| call(number))
                .is_some_and(|(_, waits)| waits == Waits::Select)
        };
        while !in_select() {
            assert!(std::time::Instant::now() < deadline, "never in select");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert_eq!(terminal_wait(pid, &[input]), None);
        let _ = child.kill();
        let _ = child.wait();
    }
}
