//! Reading processes from `/proc`: enough to walk a broker's descendants and name them.
//!
//! This kernel may lack `/proc/PID/task/TID/children`, so descendants are found from one scan
//! of every `/proc/PID/stat`, which always works.

use std::collections::HashMap;
use std::fs;
use std::path::Path;

use nix::unistd::SysconfVar;

pub use tether_core::process::{ProcStat, ProcessImage};

/// The fields after the name that anyone reads: state (field 3 of proc(5)) to startstack
/// (28).
const STAT_FIELDS: usize = 26;

/// `/proc/PID/stat` split into its fields, the one reading of its format. The command name
/// may hold spaces and parentheses, so it is what lies between the first `(` and the last
/// `)`, and the fields are counted after it. No allocation: a scan of every process does
/// this once a second.
pub struct StatFields<'a> {
    pid: &'a str,
    /// `comm`: at most 15 bytes of the executable's name.
    pub comm: &'a str,
    /// Fields 3 to 28; "" past the end of a short line.
    after_name: [&'a str; STAT_FIELDS],
}

impl<'a> StatFields<'a> {
    pub fn split(text: &'a str) -> Option<StatFields<'a>> {
        StatFields::split_bytes(text.as_bytes())
    }

    /// As [`StatFields::split`], from the bytes the kernel gave: the name, which a process
    /// sets to any bytes it likes, is "" when it is not UTF-8 (decoding it lossily would
    /// allocate), and the fields after it are read all the same. For the notify keeper
    /// (`attention::sweep`), which may not allocate.
    pub fn split_bytes(stat: &'a [u8]) -> Option<StatFields<'a>> {
        let open = stat.iter().position(|&b| b == b'(')?;
        let close = stat.iter().rposition(|&b| b == b')')?;
        let rest = std::str::from_utf8(stat.get(close + 1..)?).ok()?;
        let mut after_name = [""; STAT_FIELDS];
        for (slot, field) in after_name.iter_mut().zip(rest.split_ascii_whitespace()) {
            *slot = field;
        }
        Some(StatFields {
            pid: std::str::from_utf8(&stat[..open]).ok()?.trim(),
            comm: std::str::from_utf8(stat.get(open + 1..close)?).unwrap_or(""),
            after_name,
        })
    }

    /// Field `n` as proc(5) numbers them (1 the pid, 2 the name, 3 the state, ...), parsed.
    pub fn number<T: std::str::FromStr>(&self, n: usize) -> Option<T> {
        match n {
            1 => self.pid.parse().ok(),
            3..=28 => self.after_name[n - 3].parse().ok(),
            _ => None,
        }
    }

    /// `R`, `S`, `D`, `Z`, `T`, ...
    pub fn state(&self) -> Option<u8> {
        self.after_name[0].bytes().next()
    }

    pub fn to_stat(&self) -> Option<ProcStat> {
        Some(ProcStat {
            pid: self.number(1)?,
            state: self.state()?,
            ppid: self.number(4)?,
            pgid: self.number(5)?,
            sid: self.number(6)?,
            cpu_ticks: self.number::<u64>(14)? + self.number::<u64>(15)?,
            // Signed in the kernel, never negative in practice: a bad one counts nothing.
            waited_cpu_ticks: self.number::<u64>(16).unwrap_or(0)
                + self.number::<u64>(17).unwrap_or(0),
            start_ticks: self.number(22)?,
            // Negative (a kernel's accounting race) or missing: none.
            rss_pages: self.number(24).unwrap_or(0),
            image: ProcessImage::new(
                self.comm.as_bytes(),
                self.number(26).unwrap_or(0),
                self.number(28).unwrap_or(0),
            ),
        })
    }
}

/// Parses the contents of `/proc/PID/stat` (see [`StatFields`]).
pub fn parse_stat(text: &str) -> Option<ProcStat> {
    StatFields::split(text)?.to_stat()
}

/// The cgroup v2 path of `pid` (its `/proc/PID/cgroup` line `0::PATH`), which a zombie
/// still shows: where it was when it ended.
pub fn cgroup_of(pid: i32) -> Option<String> {
    let file = fs::File::open(format!("/proc/{pid}/cgroup")).ok()?;
    crate::cgroup::parse_own_cgroup(&read_small(file, 8192).ok()?)
}

pub fn read_stat(pid: i32) -> Option<ProcStat> {
    parse_stat(&read_stat_text(pid, &mut vec![0u8; 1024])?)
}

/// The text of `/proc/PID/stat`, read with one `read` into `buffer` (reused across a whole
/// scan: the kernel renders `stat` whole, so a short read is all of it). The name field may
/// be cut mid-character by the kernel (15 bytes): bytes are read, then decoded lossily, or
/// such a process (and its whole subtree) would vanish from every walk. `None` when the
/// process is gone.
pub fn read_stat_text(pid: i32, buffer: &mut Vec<u8>) -> Option<std::borrow::Cow<'_, str>> {
    let mut file = fs::File::open(format!("/proc/{pid}/stat")).ok()?;
    let mut filled = 0;
    loop {
        // An error means the process exited between listing and reading.
        let n = std::io::Read::read(&mut file, &mut buffer[filled..]).ok()?;
        filled += n;
        if n == 0 || filled < buffer.len() {
            break;
        }
        buffer.resize(buffer.len() * 2, 0);
    }
    Some(String::from_utf8_lossy(&buffer[..filled]))
}

/// The whole text of a small file the kernel renders on read (`/proc/self/mountinfo`,
/// `/proc/self/cgroup`, a cgroup's `cgroup.events`): read into room for `expected` bytes at
/// once, so that one `read` and the one that finds its end do, where `fs::read_to_string`
/// (whose size hint is 0 for these) starts at 32 bytes and doubles, a `read` each time.
pub fn read_small(mut file: impl std::io::Read, expected: usize) -> std::io::Result<String> {
    let mut text = String::with_capacity(expected);
    file.read_to_string(&mut text)?;
    Ok(text)
}

/// What a process has done so far, in counters that any fork, vfork, exec, new thread or
/// run of code moves: minor faults (a fork's copy-on-write touches the parent's pages at
/// once), CPU time, threads, and how often its threads were scheduled (a vfork parent
/// sleeps until the child execs). Two equal readings say the process made no new child in
/// between, which is what lets a broker skip a walk of all of /proc.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Activity {
    pub start_ticks: u64,
    pub minor_faults: u64,
    pub cpu_ticks: u64,
    pub threads: u64,
    pub slices: u64,
}

/// Reads [`Activity`] from `/proc/PID/stat` and each thread's `schedstat`; `None` when the
/// process is gone or a zombie.
pub fn activity(pid: i32) -> Option<Activity> {
    let stat = read_stat_text(pid, &mut vec![0u8; 1024])?.into_owned();
    let mut activity = parse_activity(&stat, "")?;
    // Every thread's count: a thread other than the main one may spawn (posix_spawn is a
    // vfork: no fault in the parent, only its calling thread sleeps).
    activity.slices = fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten()
        .filter_map(|task| fs::read_to_string(task.ok()?.path().join("schedstat")).ok())
        .map(|schedstat| slices(&schedstat))
        .sum();
    Some(activity)
}

/// The third field of a `schedstat`: how many times the thread was scheduled in.
fn slices(schedstat: &str) -> u64 {
    schedstat
        .split_ascii_whitespace()
        .nth(2)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// Pure part of [`activity`]. A kernel without schedstat gives 0 slices: the other counters
/// still move.
pub fn parse_activity(stat: &str, schedstat: &str) -> Option<Activity> {
    let fields = StatFields::split(stat)?;
    // A zombie is no longer part of a live tree: its reading says "changed".
    if matches!(fields.state()?, b'Z' | b'X') {
        return None;
    }
    let field = |n: usize| fields.number::<u64>(n);
    Some(Activity {
        start_ticks: field(22)?,
        minor_faults: field(10)?,
        cpu_ticks: field(14)? + field(15)?,
        threads: field(20)?,
        slices: slices(schedstat),
    })
}

pub use tether_core::process::escaped;

/// The pids `/proc` lists at this instant.
pub fn pids() -> Vec<i32> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .collect()
}

/// Every process on the machine, as far as `/proc` shows it at this instant.
pub fn all_processes() -> Vec<ProcStat> {
    let mut buffer = vec![0u8; 1024];
    pids()
        .into_iter()
        .filter_map(|pid| parse_stat(&read_stat_text(pid, &mut buffer)?))
        .collect()
}

/// The stat of each of `pids` that still runs, or `None` once `deadline` has passed: reads
/// of processes being forked or exec'd wait on them, so a fork storm can make a whole scan
/// take seconds, which a caller with other work to do cannot afford.
pub fn stats_until(
    pids: impl IntoIterator<Item = i32>,
    deadline: std::time::Instant,
) -> Option<Vec<ProcStat>> {
    let mut buffer = vec![0u8; 1024];
    let mut stats = Vec::new();
    for (i, pid) in pids.into_iter().enumerate() {
        if i % 16 == 15 && std::time::Instant::now() >= deadline {
            return None;
        }
        if let Some(stat) = read_stat_text(pid, &mut buffer).and_then(|t| parse_stat(&t)) {
            stats.push(stat);
        }
    }
    Some(stats)
}

/// Every descendant of `root` in `processes`, parents before children.
pub fn descendants_in(processes: &[ProcStat], root: i32) -> Vec<ProcStat> {
    Family::of(processes).descendants(root)
}

/// Who is whose child among a list of processes: built once, it answers for many roots (the
/// sampler asks for every broker's tree; building the map per broker made a sample of 500
/// brokers quadratic).
pub struct Family<'a> {
    children: HashMap<i32, Vec<&'a ProcStat>>,
}

impl<'a> Family<'a> {
    pub fn of(processes: &'a [ProcStat]) -> Family<'a> {
        let mut children: HashMap<i32, Vec<&ProcStat>> = HashMap::new();
        for p in processes {
            children.entry(p.ppid).or_default().push(p);
        }
        Family { children }
    }

    /// Every descendant of `root`, parents before children.
    pub fn descendants(&self, root: i32) -> Vec<ProcStat> {
        self.descendants_but(root, |_| false)
    }

    /// [`Family::descendants`], leaving out each pid `pruned` says yes to, together with
    /// everything below it.
    pub fn descendants_but(&self, root: i32, pruned: impl Fn(i32) -> bool) -> Vec<ProcStat> {
        let mut out = Vec::new();
        let mut queue = vec![root];
        while let Some(pid) = queue.pop() {
            if let Some(kids) = self.children.get(&pid) {
                for kid in kids {
                    if kid.pid != root && kid.pid != pid && !pruned(kid.pid) {
                        out.push(**kid);
                        queue.push(kid.pid);
                    }
                }
            }
        }
        out
    }
}

/// Whether process group `pgid` is orphaned: no member has a parent in the same session but
/// another group, so no shell is there to continue it once stopped (the kernel drops
/// terminal stop signals to such a group for that reason).
pub fn group_orphaned(processes: &[ProcStat], pgid: i32) -> bool {
    let by_pid: HashMap<i32, &ProcStat> = processes.iter().map(|p| (p.pid, p)).collect();
    !processes.iter().filter(|p| p.pgid == pgid).any(|member| {
        by_pid
            .get(&member.ppid)
            .is_some_and(|parent| parent.pgid != pgid && parent.sid == member.sid)
    })
}

/// A process's argv; a kernel thread or an exited process gives `[comm]` or nothing.
pub fn cmdline(pid: i32) -> Vec<String> {
    let Ok(raw) = fs::read(format!("/proc/{pid}/cmdline")) else {
        return Vec::new();
    };
    let mut argv: Vec<String> = raw
        .split(|&b| b == 0)
        .map(|s| String::from_utf8_lossy(s).into_owned())
        .collect();
    if argv.last().is_some_and(|s| s.is_empty()) {
        argv.pop();
    }
    if argv.is_empty()
        && let Ok(comm) = fs::read_to_string(format!("/proc/{pid}/comm"))
    {
        argv.push(format!("[{}]", comm.trim_end()));
    }
    argv
}

/// tether's subcommands that can signal or stop a command, as a peer's label names them
/// (`run`, `demo` and none at all are the TUI).
const FRONT_ENDS: [&str; 7] = ["watch", "stop", "kill", "signal", "exec", "sh", "open"];
/// tether's options that come before a subcommand and take a value.
const VALUE_OPTIONS: [&str; 3] = ["--state-dir", "--file", "-f"];

/// What to call the process `pid` on a timeline: its executable's name (the file it runs,
/// not the argv[0] it claims), with tether's subcommand (`tether watch`) or, for tether
/// with none, `tether TUI`. Read while the process is known to be there (it is connected,
/// or it is this broker's parent). `None` when /proc says nothing of it.
pub fn program_label(pid: i32) -> Option<String> {
    if pid <= 0 {
        return None;
    }
    let label = plain_label(pid)?;
    if label != SHIM_LABEL {
        return Some(label);
    }
    // The shim asks for a signal it was sent, on behalf of its caller (the agent): named by
    // that caller, whose shell it stands in for.
    let caller = read_stat(pid)
        .map(|s| s.ppid)
        .and_then(|ppid| Some((plain_label(ppid)?, ppid)));
    Some(match caller {
        Some((caller, ppid)) => format!("{caller} (pid {ppid}) through its shell"),
        None => label,
    })
}

/// [`program_label`] of `pid` itself.
fn plain_label(pid: i32) -> Option<String> {
    let exe = fs::read_link(format!("/proc/{pid}/exe"))
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .or_else(|| fs::read_to_string(format!("/proc/{pid}/comm")).ok())?;
    Some(label_of(&exe, &cmdline(pid)))
}

/// What [`label_of`] calls tether run as a shell (`tether sh`, or a link named `sh`, `bash`
/// or `zsh`): the shim.
pub const SHIM_LABEL: &str = "tether shell shim";

/// The names of the shells tether stands in for, as its links are named: the shim's `Shell`,
/// in its order. Here so that [`label_of`] knows them without reaching up into the shim.
pub const SHELL_NAMES: [&str; 3] = ["sh", "bash", "zsh"];

/// Pure part of [`program_label`]: `exe` the executable's file name, `argv` its command line.
pub fn label_of(exe: &str, argv: &[String]) -> String {
    let exe: String = exe
        .trim_end()
        .trim_end_matches(" (deleted)")
        .chars()
        .filter(|c| !c.is_control())
        .take(32)
        .collect();
    if exe != "tether" {
        return exe;
    }
    let argv0 = argv.first().map(|a| a.rsplit('/').next().unwrap_or(a));
    if argv0.is_some_and(|name| SHELL_NAMES.contains(&name)) {
        return SHIM_LABEL.into();
    }
    // The subcommand is the first word that is no option nor an option's value
    // (`--state-dir DIR watch`).
    let mut words = argv.iter().skip(1).map(String::as_str);
    let subcommand = loop {
        match words.next() {
            Some(option) if VALUE_OPTIONS.contains(&option) => {
                words.next();
            }
            Some(option) if option.starts_with('-') && option != "--" => {}
            other => break other,
        }
    };
    match subcommand.filter(|w| FRONT_ENDS.contains(w)) {
        Some("sh") => SHIM_LABEL.into(),
        Some(sub) => format!("tether {sub}"),
        None => "tether TUI".into(),
    }
}

/// Whether processes `a` and `b` (as `/proc` names them: a pid, or `self`) run the very same
/// program: their `exe` links, which no process can set, name the same file.
pub fn same_program(a: impl std::fmt::Display, b: impl std::fmt::Display) -> bool {
    use std::os::unix::fs::MetadataExt;
    let exe = |p: &dyn std::fmt::Display| {
        fs::metadata(format!("/proc/{p}/exe")).map(|m| (m.dev(), m.ino()))
    };
    matches!((exe(&a), exe(&b)), (Ok(theirs), Ok(ours)) if theirs == ours)
}

/// Whether process `pid` runs this very program ([`same_program`]) and names itself `comm`.
/// The name alone is not enough: any process may take it (`prctl`, or a file so named).
pub fn runs_this_program_as(pid: i32, comm: &std::ffi::CStr) -> bool {
    let named = fs::read(format!("/proc/{pid}/comm"))
        .is_ok_and(|name| name.strip_suffix(b"\n") == Some(comm.to_bytes()));
    named && same_program(pid, "self")
}

/// True when `pid` no longer runs: absent, or a zombie nobody has reaped yet.
pub fn is_gone(pid: i32) -> bool {
    read_stat(pid).is_none_or(|s| s.is_zombie())
}

/// Bytes in a page of memory (RSS is counted in pages).
pub fn page_size() -> u64 {
    sysconf(SysconfVar::PAGE_SIZE, 4096)
}

pub fn clock_ticks_per_second() -> u64 {
    sysconf(SysconfVar::CLK_TCK, 100)
}

/// `sysconf(var)`, or `fallback` where the system gives no positive answer.
fn sysconf(var: SysconfVar, fallback: u64) -> u64 {
    match nix::unistd::sysconf(var) {
        Ok(Some(value)) if value > 0 => value as u64,
        _ => fallback,
    }
}

/// Wall-clock start of a process, milliseconds since the Unix epoch. Computed against
/// `CLOCK_BOOTTIME` (the clock `starttime` counts in) rather than `btime`, which drifts from
/// the wall clock on machines whose clock was set after boot.
pub fn start_time_ms(stat: &ProcStat) -> u64 {
    use nix::time::{ClockId, clock_gettime};
    // CLOCK_BOOTTIME cannot fail to be read on Linux (it exists since 2.6.39).
    let boot_now = clock_gettime(ClockId::CLOCK_BOOTTIME).map_or(0, |ts| {
        ts.tv_sec() as u64 * 1000 + ts.tv_nsec() as u64 / 1_000_000
    });
    let started = stat.start_ticks * 1000 / clock_ticks_per_second();
    crate::clock::now_ms().saturating_sub(boot_now.saturating_sub(started))
}

/// Leeway when comparing a process's start (counted in clock ticks since boot, turned into
/// wall-clock milliseconds by [`start_time_ms`]) with a wall-clock moment it recorded.
const START_SLACK_MS: u64 = 2_000;

/// Whether the process of `stat` started no later than `at_ms` (wall clock, ms since the
/// epoch), within [`START_SLACK_MS`]: a process that recorded `at_ms` did, and one that
/// started after it only got the pid again.
pub fn started_by(stat: &ProcStat, at_ms: u64) -> bool {
    start_time_ms(stat) <= at_ms.saturating_add(START_SLACK_MS)
}

/// Whether the process of `stat` is the one that started at `at_ms` (wall clock, ms since
/// the epoch: a journal's `start_ms`), within [`START_SLACK_MS`]: not another that got its
/// pid since.
pub fn started_at(stat: &ProcStat, at_ms: u64) -> bool {
    start_time_ms(stat).abs_diff(at_ms) <= START_SLACK_MS
}

/// Whether `broker` runs: its pid names a process with the journaled start time that is not
/// a zombie.
pub fn broker_alive(broker: &tether_protocol::protocol::BrokerIdentity) -> bool {
    read_stat(broker.pid).is_some_and(|s| s.start_ticks == broker.start_ticks && !s.is_zombie())
}

/// The broker a `command.json` names, as this process sees it (see
/// [`broker_seen_from_here`]).
pub fn journaled_broker(
    file: &tether_protocol::protocol::CommandFile,
) -> Option<tether_protocol::protocol::BrokerIdentity> {
    let journal = &file.request.journal_dir;
    Some(broker_seen_from_here(
        file.broker?,
        file.broker_pid_ns,
        journal,
    ))
}

/// The real and effective uids of a `/proc/PID/status` text.
pub fn status_uids(status: &str) -> Option<(u32, u32)> {
    let line = status.lines().find_map(|l| l.strip_prefix("Uid:"))?;
    let mut ids = line.split_whitespace().map(str::parse::<u32>);
    Some((ids.next()?.ok()?, ids.next()?.ok()?))
}

/// Whether process `pid` holds the shared lock a broker keeps on its journal's event log
/// (`journal::writer::EventLog`) for its life, as `/proc/locks` lists it (its pids are this
/// namespace's): a process that is not that journal's broker holds no lock on that file.
pub fn holds_journal_lock(pid: i32, journal: &Path) -> bool {
    let events = journal.join(crate::journal::writer::EVENTS_FILE);
    let Ok(events) = crate::journal::secure::open_regular(&events) else {
        return false;
    };
    let Ok(stat) = nix::sys::stat::fstat(&events) else {
        return false;
    };
    let file = lock_file_id(stat.st_dev, stat.st_ino);
    fs::read_to_string("/proc/locks").is_ok_and(|locks| lock_held(&locks, pid, &file))
}

/// A file as `/proc/locks` names it: `MAJOR:MINOR:INODE`, the device numbers in hex.
fn lock_file_id(dev: libc::dev_t, ino: libc::ino_t) -> String {
    format!("{:02x}:{:02x}:{ino}", libc::major(dev), libc::minor(dev))
}

/// Whether `/proc/locks` text `locks` has a granted `flock` by `pid` on `file`
/// (`1: FLOCK  ADVISORY  READ  4242 fe:00:1234 0 EOF`; a waiter's line has `->` after the
/// number, and is not a lock held).
fn lock_held(locks: &str, pid: i32, file: &str) -> bool {
    let pid = pid.to_string();
    locks.lines().any(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        matches!(fields.as_slice(), [_, "FLOCK", _, _, holder, id, ..] if *holder == pid && *id == file)
    })
}

/// `broker` as this process sees it, given the PID namespace the broker journaled
/// (`broker_pid_ns`: set only outside the first one). A broker in a namespace of its own (an
/// agent's sandbox runs its commands so, and the shim's broker with them) journals the pid
/// it has there, which names another process here, or none: see [`pid_seen_from_here`]. In
/// the same namespace, or where it is not found, `broker` as journaled (then judged gone).
pub fn broker_seen_from_here(
    broker: tether_protocol::protocol::BrokerIdentity,
    pid_ns: Option<u64>,
    journal: &Path,
) -> tether_protocol::protocol::BrokerIdentity {
    // Two alike (brokers of two sandboxes started in the same tick): the one that holds
    // this journal's lock, as every broker does for its life.
    let holds = |here: i32| holds_journal_lock(here, journal);
    match pid_seen_from_here_by(broker.pid, broker.start_ticks, pid_ns, holds) {
        Some(pid) => tether_protocol::protocol::BrokerIdentity { pid, ..broker },
        None => broker,
    }
}

/// Whether a journal's pids are of another PID namespace than this process's: `pid_ns` is
/// the namespace its broker journaled, set only outside the first one. A journal without one
/// read in a namespace of this process's own (a container) is taken as before: its pids are
/// not to be found from here either way.
pub fn is_foreign_namespace(pid_ns: Option<u64>) -> bool {
    pid_ns.is_some() && pid_ns != crate::socket_dir::own_pid_namespace()
}

/// A process here that may be one a journal of another PID namespace names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Candidate {
    /// Its pid here.
    here: i32,
    /// Its pid in the innermost namespace it is in (`NSpid`'s last).
    inner: i32,
    uid: u32,
    /// Its PID namespace, where its `ns/pid` could be read (not a broker's, by another
    /// than root: a broker is not dumpable).
    ns: Option<u64>,
}

/// Of the processes that started at the journaled tick, the one that is `pid` in namespace
/// `ns` and runs as `uid`: those of another namespace (where it could be read) ruled out,
/// the one left, or the one whose namespace is known to be `ns`, or the one `tie` picks
/// (a broker: the holder of its journal's lock); `None` when none is, or several are
/// (two sandboxes whose brokers started in the same tick, neither told apart).
fn choose(
    candidates: &[Candidate],
    pid: i32,
    uid: u32,
    ns: u64,
    tie: impl Fn(i32) -> bool,
) -> Option<i32> {
    let survivors: Vec<&Candidate> = (candidates.iter())
        .filter(|c| c.inner == pid && c.uid == uid && c.ns.is_none_or(|n| n == ns))
        .collect();
    let one = |picked: Vec<i32>| match picked.as_slice() {
        [only] => Some(*only),
        _ => None,
    };
    match survivors.as_slice() {
        [only] => Some(only.here),
        many => one(many
            .iter()
            .filter(|c| c.ns == Some(ns))
            .map(|c| c.here)
            .collect())
        .or_else(|| {
            one(many
                .iter()
                .map(|c| c.here)
                .filter(|&here| tie(here))
                .collect())
        }),
    }
}

/// The pid here of the process that has `pid` in PID namespace `pid_ns` and started at
/// `start_ticks`: found among this user's processes that started then, by their innermost
/// pid (`NSpid`'s last) and, where two match, their namespace. `pid` itself where `pid_ns`
/// is not foreign ([`is_foreign_namespace`]); `None` where it is not found for sure.
pub fn pid_seen_from_here(pid: i32, start_ticks: u64, pid_ns: Option<u64>) -> Option<i32> {
    pid_seen_from_here_by(pid, start_ticks, pid_ns, |_| false)
}

/// [`pid_seen_from_here`], two alike told apart by `tie`.
fn pid_seen_from_here_by(
    pid: i32,
    start_ticks: u64,
    pid_ns: Option<u64>,
    tie: impl Fn(i32) -> bool,
) -> Option<i32> {
    use std::os::unix::fs::MetadataExt;
    use std::sync::Mutex;
    type Key = (i32, u64, u64);
    // Found once, then checked by its start: a watch asks again at every refresh. One not
    // found is gone for good (it ran before its journal named it), and is not looked for
    // again; an answer two processes left open is looked for again.
    static FOUND: Mutex<Option<HashMap<Key, Option<i32>>>> = Mutex::new(None);
    let Some(ns) = pid_ns.filter(|_| is_foreign_namespace(pid_ns)) else {
        return Some(pid);
    };
    let key = (pid, start_ticks, ns);
    let started = |here: i32| read_stat(here).is_some_and(|s| s.start_ticks == start_ticks);
    let mut found = FOUND.lock().unwrap_or_else(|e| e.into_inner());
    let cache = found.get_or_insert_with(HashMap::new);
    match cache.get(&key) {
        Some(None) => return None,
        Some(&Some(here)) if started(here) => return Some(here),
        _ => {}
    }
    let candidate = |here: i32| {
        // The start first: one stat read rules out nearly every process.
        if !started(here) {
            return None;
        }
        let status = std::fs::read_to_string(format!("/proc/{here}/status")).ok()?;
        let field = |name: &str| status.lines().find_map(|l| l.strip_prefix(name));
        // Only a process of a namespace below this one has more than one pid.
        let mut pids = field("NSpid:")?.split_whitespace();
        pids.next()?;
        let inner = pids.last()?.parse().ok()?;
        let (uid, _) = status_uids(&status)?;
        let ns = std::fs::metadata(format!("/proc/{here}/ns/pid"))
            .ok()
            .map(|m| m.ino());
        Some(Candidate {
            here,
            inner,
            uid,
            ns,
        })
    };
    let candidates: Vec<Candidate> = pids().into_iter().filter_map(candidate).collect();
    let uid = nix::unistd::geteuid().as_raw();
    let here = choose(&candidates, pid, uid, ns, tie);
    let matching = (candidates.iter())
        .filter(|c| c.inner == pid && c.uid == uid)
        .count();
    if here.is_some() || matching == 0 {
        cache.insert(key, here);
    }
    here
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two sandboxes whose brokers are both pid 3 there and started in the same tick are
    /// told apart by their namespace where it can be read, else by the tie-breaker (a
    /// broker's journal lock), else by nobody; another user's process is never taken.
    #[test]
    fn a_pid_of_another_namespace_is_found_only_where_it_is_certain() {
        let candidate = |here, inner, uid, ns| Candidate {
            here,
            inner,
            uid,
            ns,
        };
        let none = |_| false;
        let ours = candidate(100, 3, 1000, Some(7));
        assert_eq!(choose(&[ours], 3, 1000, 7, none), Some(100));
        assert_eq!(choose(&[ours], 4, 1000, 7, none), None, "another pid");
        assert_eq!(choose(&[ours], 3, 1001, 7, none), None, "another user's");
        assert_eq!(choose(&[ours], 3, 1000, 8, none), None, "another namespace");
        // Its namespace unreadable (a broker, not dumpable): the one candidate is taken.
        let unread = candidate(100, 3, 1000, None);
        assert_eq!(choose(&[unread], 3, 1000, 7, none), Some(100));
        // Two alike: the namespace tells, a known other one ruling its process out.
        let other = candidate(200, 3, 1000, Some(8));
        assert_eq!(choose(&[other, ours], 3, 1000, 7, none), Some(100));
        assert_eq!(choose(&[ours, other], 3, 1000, 8, none), Some(200));
        assert_eq!(choose(&[other, unread], 3, 1000, 7, none), Some(100));
        // Two alike, neither namespace read: the tie-breaker, else nobody.
        let unread_other = candidate(200, 3, 1000, None);
        assert_eq!(choose(&[unread, unread_other], 3, 1000, 7, none), None);
        let holds_200 = |here| here == 200;
        assert_eq!(
            choose(&[unread, unread_other], 3, 1000, 7, holds_200),
            Some(200)
        );
        // Another user's twin does not make ours uncertain.
        let theirs = candidate(300, 3, 1001, None);
        assert_eq!(choose(&[theirs, unread], 3, 1000, 7, none), Some(100));
    }

    #[test]
    fn uids_are_read_from_status() {
        let status = "Name:\tx\nUid:\t1000\t1001\t1000\t1000\nGid:\t5\t5\t5\t5\n";
        assert_eq!(status_uids(status), Some((1000, 1001)));
        assert_eq!(status_uids("Name:\tx\n"), None);
    }

    #[test]
    fn only_a_granted_flock_of_that_pid_on_that_file_is_a_lock_held() {
        // As /proc/locks writes them, a waiter's line included.
        let locks = "1: POSIX  ADVISORY  WRITE 77 fe:00:555 0 EOF\n\
                     2: FLOCK  ADVISORY  READ 4242 fe:00:1234 0 EOF\n\
                     2: -> FLOCK  ADVISORY  WRITE 99 fe:00:1234 0 EOF\n\
                     3: OFDLCK ADVISORY  READ -1 fe:00:1234 0 EOF\n";
        assert!(lock_held(locks, 4242, "fe:00:1234"));
        assert!(!lock_held(locks, 4242, "fe:00:12345"));
        assert!(
            !lock_held(locks, 99, "fe:00:1234"),
            "a waiter holds nothing"
        );
        assert!(!lock_held(locks, 77, "fe:00:555"), "not a flock");
        assert!(!lock_held(locks, 424, "fe:00:1234"));
        assert_eq!(lock_file_id(libc::makedev(254, 0), 1234), "fe:00:1234");
        assert_eq!(lock_file_id(libc::makedev(8, 17), 9), "08:11:9");
    }

    /// A process is the one a journal recorded by its start, within the slack; one that
    /// started seconds later only has its pid.
    #[test]
    fn a_process_is_known_by_its_start_within_the_slack() {
        let me = read_stat(std::process::id() as i32).expect("our own stat");
        let at = start_time_ms(&me);
        assert!(started_at(&me, at) && started_at(&me, at + 1_000));
        assert!(!started_at(&me, at + 10_000) && !started_at(&me, at.saturating_sub(10_000)));
    }

    #[test]
    fn a_small_read_takes_the_whole_file_whatever_its_size() {
        let long: String = (0..5000).map(|i| format!("line {i}\n")).collect();
        assert_eq!(read_small(long.as_bytes(), 64).unwrap(), long);
        assert_eq!(
            read_small(&b"populated 0\n"[..], 1024).unwrap(),
            "populated 0\n"
        );
        assert_eq!(read_small(&b""[..], 16).unwrap(), "");
        // What the kernel renders, read as it is read on the broker's path.
        let own = read_small(fs::File::open("/proc/self/stat").unwrap(), 1024).unwrap();
        assert_eq!(
            parse_stat(&own).map(|s| s.pid),
            Some(std::process::id() as i32)
        );
    }

    #[test]
    fn activity_reads_faults_cpu_threads_and_slices() {
        let stat = "1 (process api) S 0 0 0 0 -1 4194560 172712 549654655 0 128999 950 7413 \
                    1197851 297120 20 0 13 0 25 39149568 2453";
        let parsed = parse_activity(stat, "3190 120 17\n").expect("parsed");
        assert_eq!(
            parsed,
            Activity {
                start_ticks: 25,
                minor_faults: 172712,
                cpu_ticks: 950 + 7413,
                threads: 13,
                slices: 17,
            }
        );
        assert_eq!(parse_activity(stat, "").map(|a| a.slices), Some(0));
        assert_eq!(parse_activity("1 (cut", ""), None);
        assert_eq!(parse_activity(&stat.replace(") S ", ") Z "), ""), None);
        // Live figures: this very process before and after it touched fresh memory, a
        // minor fault at each new page whatever else runs. (A spawn did not always move
        // them: Rust spawns with vfork, which faults nothing in the parent, and a CPU tick
        // or a slice of the main thread need not come.)
        let me = std::process::id() as i32;
        let before = activity(me).expect("our own activity");
        let mut fresh = vec![0u8; 16 << 20];
        for page in fresh.chunks_mut(4096) {
            page[0] = 1;
        }
        std::hint::black_box(&fresh);
        let after = activity(me).expect("our own activity");
        assert!(
            after.minor_faults > before.minor_faults,
            "{before:?} {after:?}"
        );
    }

    #[test]
    fn a_scan_past_its_deadline_gives_up() {
        let me = std::process::id() as i32;
        let later = std::time::Instant::now() + std::time::Duration::from_secs(60);
        let found = stats_until([me, -1], later).expect("within the deadline");
        assert_eq!(found.iter().map(|s| s.pid).collect::<Vec<_>>(), [me]);
        let past = std::time::Instant::now();
        assert!(stats_until(std::iter::repeat_n(me, 64), past).is_none());
        assert!(stats_until([me], past).is_some(), "checked every 16 reads");
    }

    fn stat(pid: i32, ppid: i32) -> ProcStat {
        ProcStat::leader(pid, ppid)
    }

    #[test]
    fn a_peer_is_named_by_its_executable_and_tethers_subcommand() {
        let argv = |words: &[&str]| words.iter().map(|w| w.to_string()).collect::<Vec<_>>();
        assert_eq!(
            label_of("tether", &argv(&["tether", "watch"])),
            "tether watch"
        );
        assert_eq!(
            label_of("tether", &argv(&["t", "--state-dir", "stop", "kill", "x"])),
            "tether kill"
        );
        assert_eq!(
            label_of("tether", &argv(&["tether", "run", "-c", "stop"])),
            "tether TUI"
        );
        assert_eq!(label_of("tether", &argv(&["tether"])), "tether TUI");
        assert_eq!(label_of("tether", &argv(&["bash", "-c", "x"])), SHIM_LABEL);
        assert_eq!(
            label_of("tether", &argv(&["/s/zsh", "-lc", "x"])),
            SHIM_LABEL
        );
        assert_eq!(
            label_of("tether", &argv(&["tether", "sh", "-c", "x"])),
            SHIM_LABEL
        );
        // argv[0] claims nothing: the executable's name is what counts.
        assert_eq!(label_of("python3\n", &argv(&["tether", "stop"])), "python3");
        assert_eq!(label_of("socat\x1b", &[]), "socat");
        assert_eq!(
            label_of("tether (deleted)", &argv(&["x", "stop"])),
            "tether stop"
        );
    }

    #[test]
    fn parses_names_with_spaces_and_parens() {
        let line = "4242 (evil) (name) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 4 8 20 0 1 0 987654 1000 50";
        let s = parse_stat(line).unwrap();
        assert_eq!((s.pid, s.ppid, s.pgid, s.sid), (4242, 1, 4242, 4242));
        assert_eq!((s.state, s.start_ticks), (b'S', 987654));
        // utime 1 + stime 2; cutime 4 + cstime 8; rss 50 pages.
        assert_eq!((s.cpu_ticks, s.waited_cpu_ticks, s.rss_pages), (3, 12, 50));
        // A line that ends before startcode: an image of the name alone.
        assert_eq!(s.image, ProcessImage::new(b"evil) (name", 0, 0));
    }

    #[test]
    fn an_exec_changes_the_image_and_nothing_that_names_the_process() {
        use std::io::Write;
        // A shell that waits for a line, then execs sleep: the same process all along.
        let mut child = std::process::Command::new("sh")
            .args(["-c", "read line; exec sleep 30"])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .expect("sh runs");
        let pid = child.id() as i32;
        // Once its exec of `comm` is over: the name comes first, the code's address last.
        // Bounded: where the kernel hides the addresses (0), the test fails, not spins.
        let runs = |comm: &[u8]| {
            std::iter::repeat_with(|| read_stat(pid))
                .take(1_000_000)
                .find(|s| {
                    s.is_none_or(|s| s.image.comm.starts_with(comm) && s.image.code_start != 0)
                })
                .flatten()
        };
        let before = runs(b"sh\0");
        let _ = writeln!(child.stdin.as_mut().expect("its stdin"), "go");
        let after = runs(b"sleep\0");
        let _ = child.kill();
        let _ = child.wait();
        let (before, after) = (before.expect("sh's stat"), after.expect("sleep's stat"));
        let key = |s: &ProcStat| (s.pid, s.start_ticks);
        assert_eq!(key(&after), key(&before), "pid and start time stay");
        assert_ne!(after.image.code_start, before.image.code_start);
        assert_ne!(after.image.stack_start, before.image.stack_start);
    }

    #[test]
    fn finds_all_descendants_and_nothing_else() {
        let procs = [
            stat(10, 1),
            stat(11, 10),
            stat(12, 11),
            stat(13, 10),
            stat(20, 1),
        ];
        let mut found: Vec<i32> = descendants_in(&procs, 10).iter().map(|p| p.pid).collect();
        found.sort();
        assert_eq!(found, [11, 12, 13]);
    }

    #[test]
    fn pruned_subtrees_are_left_out_whole() {
        // 10 is the front end; 11 and 20 are brokers, 20 is live; 12 was left by 11.
        let procs = [
            stat(11, 10),
            stat(12, 10),
            stat(13, 12),
            stat(20, 10),
            stat(21, 20),
            stat(22, 21),
        ];
        let family = Family::of(&procs);
        let pruned = |pruned: &'static [i32]| family.descendants_but(10, |p| pruned.contains(&p));
        let mut found: Vec<i32> = pruned(&[20]).iter().map(|p| p.pid).collect();
        found.sort();
        assert_eq!(found, [11, 12, 13]);
        assert!(pruned(&[11, 12, 20]).is_empty());
    }

    #[test]
    fn a_group_is_orphaned_without_a_parent_in_its_session_outside_it() {
        let member = |pid, ppid, pgid, sid| ProcStat {
            pgid,
            sid,
            ..stat(pid, ppid)
        };
        // A shell (100, its own group) runs a job (group 200) in its session (100).
        let job = [
            member(100, 1, 100, 100),
            member(200, 100, 200, 100),
            member(201, 200, 200, 100),
        ];
        assert!(!group_orphaned(&job, 200));
        // The shell is gone: the job's members were re-parented to a process elsewhere.
        let orphaned = [
            member(50, 1, 50, 50),
            member(200, 50, 200, 100),
            member(201, 200, 200, 100),
        ];
        assert!(group_orphaned(&orphaned, 200));
    }

    #[test]
    fn reads_own_process() {
        let me = read_stat(std::process::id() as i32).unwrap();
        assert_eq!(me.pid, std::process::id() as i32);
        assert!(!is_gone(me.pid));
        let started = start_time_ms(&me);
        assert!(started <= crate::clock::now_ms() && started > crate::clock::now_ms() - 600_000);
    }
}
