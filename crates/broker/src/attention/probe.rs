//! What a sample of the tree says of each process, for the detector: the CPU and memory the
//! tree walk read already, and, for a process asleep, whether it sleeps in a read of the
//! command's input.
//!
//! "In a read" comes from `/proc/PID/syscall` (the system call and its first argument, the
//! descriptor), or where that cannot be read from `/proc/PID/wchan` (the kernel function it
//! sleeps in, `pipe_read`, `n_tty_read`...), taken as a read of descriptor 0. "The command's
//! input" is the file behind `/proc/PID/fd/N` compared with what the broker gave the command:
//! its stdin (a pipe, by device and inode) or its terminal (by device number, `/dev/tty`
//! included). Only sleeping processes are read beyond their `stat`, and only when the
//! detector asks.

use std::io::Read;
use std::os::fd::AsFd;

use nix::sys::stat::{self, SFlag};

use super::detector::{Blocked, InputKind, ProcessSample};
pub use tether_core::attention::inputs::{InputFile, Looks};
use tether_os::procfs::ProcStat;

/// `/dev/null` and `/dev/tty`'s device numbers.
const DEV_NULL: (u64, u64) = (1, 3);
const DEV_TTY: (u64, u64) = (5, 0);

/// The file open at `fd`: a terminal if it is a character device, else a pipe (or whatever
/// file the command was given); `None` for /dev/null (a read of it never waits) or a
/// descriptor that cannot be looked at.
pub fn input_file(fd: impl AsFd) -> Option<InputFile> {
    let stat = stat::fstat(fd).ok()?;
    let file = input_file_from_stat(&stat);
    let null = stat::makedev(DEV_NULL.0, DEV_NULL.1);
    (file.rdev != Some(null)).then_some(file)
}

fn input_file_from_stat(stat: &stat::FileStat) -> InputFile {
    let is_char = stat.st_mode & SFlag::S_IFMT.bits() == SFlag::S_IFCHR.bits();
    InputFile {
        dev: stat.st_dev,
        ino: stat.st_ino,
        rdev: is_char.then_some(stat.st_rdev),
        input: if is_char {
            InputKind::Terminal
        } else {
            InputKind::Pipe
        },
    }
}

/// Which input a file open in some process is, if it is one of `inputs`.
pub fn which_input(inputs: &[InputFile], file: &InputFile) -> Option<InputKind> {
    if let Some(found) = inputs.iter().find(|i| i.matches(file)) {
        return Some(found.input);
    }
    // `/dev/tty` is the process's controlling terminal: the command's, where it has one
    // (a process that left its session has none, and could not have opened it).
    let tty = stat::makedev(DEV_TTY.0, DEV_TTY.1);
    (file.rdev == Some(tty) && inputs.iter().any(|i| i.input == InputKind::Terminal))
        .then_some(InputKind::Terminal)
}

/// The samples of the tree's live processes.
///
/// One process waiting on the input is all the detector needs: the one it saw last is looked
/// at first, and once one is found no other is read (a thousand processes blocked on the
/// same pipe cost one look, not a thousand). `schedstat` is read only for a process that can
/// run now (state `R`): a runaway is one almost always, and a process asleep wants nothing.
pub fn sample(
    processes: &[ProcStat],
    inputs: &[InputFile],
    looks: Looks,
    page_size: u64,
) -> Vec<ProcessSample> {
    let mut look = looks.blocked && !inputs.is_empty();
    let mut samples: Vec<ProcessSample> = processes
        .iter()
        .filter(|p| !p.is_zombie())
        .map(|p| ProcessSample {
            pid: p.pid,
            start_ticks: p.start_ticks,
            cpu_ticks: p.cpu_ticks,
            rss_bytes: p.rss_pages * page_size,
            demand_ns: (looks.demand && p.state == b'R')
                .then(|| demand_ns(p.pid))
                .flatten(),
            blocked: None,
            runs_command: false,
            of_command: false,
        })
        .collect();
    if looks.agent {
        sample_agent(processes, inputs, looks, &mut samples);
        return samples;
    }
    let asleep = |pid: i32| processes.iter().any(|p| p.pid == pid && p.state == b'S');
    if let Some(pid) = looks.waiting.filter(|&pid| look && asleep(pid))
        && let Some(blocked) = blocked_on(pid, inputs)
        && let Some(sample) = samples.iter_mut().find(|s| s.pid == pid)
    {
        sample.blocked = Some(blocked);
        look = false;
    }
    if look {
        for (sample, process) in samples
            .iter_mut()
            .zip(processes.iter().filter(|p| !p.is_zombie()))
        {
            if process.state == b'S'
                && let Some(blocked) = blocked_on(process.pid, inputs)
            {
                sample.blocked = Some(blocked);
                break;
            }
        }
    }
    samples
}

/// The processes of `roots` (the agent's commands' shell calls and brokers) and all below
/// them.
fn of_commands(processes: &[ProcStat], roots: &[i32]) -> std::collections::HashSet<i32> {
    if roots.is_empty() {
        return Default::default();
    }
    let family = tether_os::procfs::Family::of(processes);
    (roots.iter())
        .flat_map(|&root| {
            let below = family.descendants(root).into_iter().map(|p| p.pid);
            std::iter::once(root).chain(below)
        })
        .collect()
}

/// An agent's sample: which processes are brokers of its running commands, and the first of
/// its own processes (none of a command's) with a thread waiting on its terminal. A command
/// running is no reason not to look: the detector tells one the agent waits for from one it
/// left in the background.
fn sample_agent(
    processes: &[ProcStat],
    inputs: &[InputFile],
    looks: Looks,
    samples: &mut [ProcessSample],
) {
    use super::waits::{CommandRole, command_role};
    let own = std::process::id() as i32;
    let live = processes.iter().filter(|p| !p.is_zombie());
    let mut roots = Vec::new();
    for (sample, process) in samples.iter_mut().zip(live) {
        let role = command_role(process, own);
        sample.runs_command = role == Some(CommandRole::Running);
        if role.is_some() {
            roots.push(process.pid);
        }
    }
    // Each command's processes, its shell call or broker (a kept one too) and all below it:
    // none is the agent's own.
    let commands = of_commands(processes, &roots);
    for sample in samples.iter_mut() {
        sample.of_command = commands.contains(&sample.pid);
    }
    if !looks.blocked || inputs.is_empty() {
        return;
    }
    // The one last seen waiting first: it is the agent's main process almost always.
    let first = looks
        .waiting
        .filter(|&pid| samples.iter().any(|s| s.pid == pid))
        .into_iter();
    let rest = samples
        .iter()
        .map(|s| s.pid)
        .filter(|&pid| Some(pid) != looks.waiting);
    for pid in first.chain(rest).collect::<Vec<_>>() {
        if commands.contains(&pid) {
            continue;
        }
        if let Some(blocked) = super::waits::terminal_wait(pid, inputs)
            && let Some(sample) = samples.iter_mut().find(|s| s.pid == pid)
        {
            sample.blocked = Some(blocked);
            return;
        }
    }
}

/// The read system calls, by number on this architecture.
const READ_CALLS: [(i64, &str); 5] = [
    (libc::SYS_read, "read"),
    (libc::SYS_readv, "readv"),
    (libc::SYS_pread64, "pread64"),
    (libc::SYS_preadv, "preadv"),
    (libc::SYS_preadv2, "preadv2"),
];

/// Kernel functions a process reading a pipe or a terminal sleeps in.
const READ_WAITS: [&str; 5] = [
    "pipe_read",
    "anon_pipe_read",
    "pipe_wait",
    "n_tty_read",
    "wait_woken",
];

/// The system call a process sleeps in and its first argument, from `/proc/PID/syscall`
/// (`0 0x3 0x7ffd... ...`); `None` when it runs or is in none (`running`, `-1 ...`).
pub fn parse_syscall(text: &str) -> Option<(i64, u64)> {
    let mut fields = text.split_ascii_whitespace();
    let number: i64 = fields.next()?.parse().ok()?;
    let first = fields.next()?.strip_prefix("0x")?;
    let first = u64::from_str_radix(first, 16).ok()?;
    (number >= 0).then_some((number, first))
}

/// Which read of the command's input `pid` sleeps in, if any.
fn blocked_on(pid: i32, inputs: &[InputFile]) -> Option<Blocked> {
    let mut buf = [0u8; 256];
    let (call, fd) = match read_small(&format!("/proc/{pid}/syscall"), &mut buf) {
        Some(text) => {
            let (number, first) = parse_syscall(text)?;
            let (_, call) = READ_CALLS.iter().find(|(n, _)| *n == number)?;
            (*call, i32::try_from(first).ok()?)
        }
        // No syscall file (a kernel without it, or one that hides it): the wait channel,
        // and descriptor 0.
        None => {
            let wchan = read_small(&format!("/proc/{pid}/wchan"), &mut buf)?;
            READ_WAITS.contains(&wchan.trim()).then_some(("read", 0))?
        }
    };
    let input = fd_input(pid, fd, inputs)?;
    let program = program_name(pid);
    let mut io = [0u8; 512];
    let reads = read_small(&format!("/proc/{pid}/io"), &mut io).and_then(parse_reads);
    Some(Blocked {
        fd,
        input,
        call,
        program,
        reads,
    })
}

/// Which of the command's inputs descriptor `fd` of `pid` is, if it is one.
pub(super) fn fd_input(pid: i32, fd: i32, inputs: &[InputFile]) -> Option<InputKind> {
    let stat = stat::stat(format!("/proc/{pid}/fd/{fd}").as_str()).ok()?;
    which_input(inputs, &input_file_from_stat(&stat))
}

/// The name `pid` runs under (its `comm`), or its pid when that cannot be read.
pub(super) fn program_name(pid: i32) -> String {
    let mut buf = [0u8; 64];
    read_small(&format!("/proc/{pid}/comm"), &mut buf)
        .map_or_else(|| pid.to_string(), |comm| comm.trim().to_string())
}

/// Run time plus run-queue wait of the main thread, from `/proc/PID/schedstat`.
fn demand_ns(pid: i32) -> Option<u64> {
    let mut buf = [0u8; 128];
    parse_demand(read_small(&format!("/proc/{pid}/schedstat"), &mut buf)?)
}

/// `schedstat`'s first two fields, summed: `1234 5678 9` is 6912.
pub fn parse_demand(text: &str) -> Option<u64> {
    let mut fields = text.split_ascii_whitespace();
    let ran: u64 = fields.next()?.parse().ok()?;
    let waited: u64 = fields.next()?.parse().ok()?;
    Some(ran + waited)
}

/// `syscr` of `/proc/PID/io`: the read system calls made so far.
pub fn parse_reads(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|line| line.strip_prefix("syscr:"))
        .and_then(|v| v.trim().parse().ok())
}

/// A small /proc file as text, without allocating for it.
pub(super) fn read_small<'b>(path: &str, buf: &'b mut [u8]) -> Option<&'b str> {
    let mut file = std::fs::File::open(path).ok()?;
    let mut len = 0;
    while len < buf.len() {
        match file.read(&mut buf[len..]) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return None,
        }
    }
    std::str::from_utf8(&buf[..len]).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_syscall_file_says_the_call_and_its_descriptor() {
        let read = format!(
            "{} 0x0 0x7ffd4a2b 0x1 0x0 0x0 0x0 0x7ffd 0x7f12",
            libc::SYS_read
        );
        assert_eq!(parse_syscall(&read), Some((libc::SYS_read, 0)));
        assert_eq!(parse_syscall("7 0x5 0x1 0x0"), Some((7, 5)));
        assert_eq!(parse_syscall("running"), None);
        assert_eq!(parse_syscall("-1 0x7ffd 0x7f12"), None);
        assert_eq!(parse_syscall(""), None);
    }

    #[test]
    fn the_io_file_says_the_reads() {
        let io = "rchar: 1948\nwchar: 0\nsyscr: 12\nsyscw: 0\nread_bytes: 0\n";
        assert_eq!(parse_reads(io), Some(12));
        assert_eq!(parse_reads("rchar: 1\n"), None);
        assert_eq!(parse_demand("1234 5678 9\n"), Some(6912));
        assert_eq!(parse_demand(""), None);
    }

    #[test]
    fn a_pipe_matches_by_inode_and_a_terminal_by_device() {
        let pipe = InputFile {
            dev: 12,
            ino: 400,
            rdev: None,
            input: InputKind::Pipe,
        };
        let other_pipe = InputFile { ino: 401, ..pipe };
        assert_eq!(which_input(&[pipe], &pipe), Some(InputKind::Pipe));
        assert_eq!(which_input(&[pipe], &other_pipe), None);
        let slave = InputFile {
            dev: 25,
            ino: 3,
            rdev: Some(stat::makedev(136, 4)),
            input: InputKind::Terminal,
        };
        // Opened again (`/dev/pts/4` by path): another inode, the same device.
        let reopened = InputFile { ino: 9, ..slave };
        assert_eq!(which_input(&[slave], &reopened), Some(InputKind::Terminal));
        let tty = InputFile {
            rdev: Some(stat::makedev(5, 0)),
            ..slave
        };
        assert_eq!(which_input(&[slave], &tty), Some(InputKind::Terminal));
        assert_eq!(which_input(&[pipe], &tty), None);
    }

    #[test]
    fn a_process_blocked_reading_a_pipe_it_was_given_is_seen() {
        let (read, write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).unwrap();
        let input = input_file(&read).unwrap();
        let mut child = std::process::Command::new("sh")
            .args(["-c", "read line"])
            .stdin(std::process::Stdio::from(read))
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let mut seen = None;
        while seen.is_none() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(20));
            let stat = tether_os::procfs::read_stat(pid).unwrap();
            let looks = Looks {
                blocked: true,
                demand: true,
                waiting: None,
                agent: false,
            };
            let sampled = sample(&[stat], &[input], looks, 4096);
            seen = sampled[0].blocked.clone();
            // Asleep once seen blocked: it wants no CPU, and its schedstat is not read (while
            // it starts it may still be runnable).
            if seen.is_some() {
                assert_eq!(sampled[0].demand_ns, None);
            }
        }
        drop(write);
        let _ = child.wait();
        let blocked = seen.expect("sh seen blocked in read(0)");
        assert_eq!((blocked.fd, blocked.input), (0, InputKind::Pipe));
        assert_eq!(blocked.call, "read");
        assert_eq!(blocked.program, "sh");
        assert!(input_file(std::fs::File::open("/dev/null").unwrap()).is_none());
    }
}

#[cfg(test)]
mod agent_tests {
    use super::*;

    /// A command's processes are its root (a shell call, a broker, one kept in custody) and
    /// everything below it; the agent's own processes beside them are not.
    #[test]
    fn a_commands_processes_are_its_root_and_all_below_it() {
        // The agent 10 with a helper 11; a call 20 with its broker 21 and command 22 below;
        // a kept broker 30 (adopted) with its server 31 and that server's worker 32.
        let processes = [
            (10, 1),
            (11, 10),
            (20, 10),
            (21, 20),
            (22, 21),
            (30, 1),
            (31, 30),
            (32, 31),
        ]
        .map(|(pid, ppid)| ProcStat::leader(pid, ppid));
        let mut found: Vec<i32> = of_commands(&processes, &[20, 30]).into_iter().collect();
        found.sort_unstable();
        assert_eq!(found, [20, 21, 22, 30, 31, 32]);
        assert!(of_commands(&processes, &[]).is_empty());
    }
}
