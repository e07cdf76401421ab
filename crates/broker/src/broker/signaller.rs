//! Delivering a signal to a command's whole tree: its process group and every descendant
//! a subreaper's walk finds, each through a pidfd so a reused pid is never hit.
//!
//! The broker walks its own descendants; a front end whose broker is gone walks its own
//! descendants minus the brokers that still live (they look after their own trees). A walk
//! of /proc leaves out every other broker below its root, with its tree, for the same
//! reason: the tree sample, the leftovers and the stop all see a nested command (a shell
//! call's, a `tether exec` in the command) as its own broker's, as a cgroup's members do,
//! where a nested broker makes its command's cgroup beside. Where
//! the command has a cgroup, the walk is its members instead (`cgroup.procs`): the kernel's
//! list, escapees included, without reading every process on the machine.
//!
//! rustix for `pidfd_open` and `setpriority`, which nix does not have; the signals go
//! through [`ProcessSignal`]'s own calls.

use std::collections::HashSet;
use std::os::fd::OwnedFd;
use std::sync::Arc;

use rustix::process::{PidfdFlags, pidfd_open};

use tether_os::cgroup::CommandCgroup;
use tether_os::procfs::{self, ProcStat};
use tether_os::sys::SendSignal;
use tether_protocol::protocol::ProcessSignal;

pub use tether_core::process::{ProcessKey, TreeWalk, key};

/// A pidfd on a process found by a walk, checked to still be that process (same start
/// time), so a signal sent through it can never hit a reused pid.
fn open_verified(stat: &ProcStat) -> Option<Handle> {
    let pid = rustix::process::Pid::from_raw(stat.pid)?;
    let handle = match pidfd_open(pid, PidfdFlags::empty()) {
        Ok(pidfd) => Handle::Pidfd(pidfd),
        Err(rustix::io::Errno::SRCH) => return None,
        // No pidfds here (ENOSYS, EPERM): the start-time check below is all that guards
        // against reuse, in the moment between it and kill().
        Err(_) => Handle::Pid(stat.pid),
    };
    match procfs::read_stat(stat.pid) {
        Some(now) if now.start_ticks == stat.start_ticks => Some(handle),
        _ => None,
    }
}

/// A way to signal one process: a pidfd where the kernel gives one, else its pid.
enum Handle {
    Pidfd(OwnedFd),
    Pid(i32),
}

fn send(handle: &Handle, signal: ProcessSignal) -> bool {
    match handle {
        Handle::Pidfd(pidfd) => signal.send_to_pidfd(pidfd).is_ok(),
        Handle::Pid(pid) => signal.send_to_pid(*pid).is_ok(),
    }
}

/// Which processes a tree signal reaches: every descendant of `root`, except the subtrees
/// rooted at `pruned` (live brokers, under a front end; the broker's notify keeper) and, in
/// a walk of /proc, at another broker. A plain pid means all below it.
/// With a cgroup, the cgroup's members instead; the /proc walk stays the answer if the
/// cgroup cannot be read (a delegated subtree taken away mid-run).
#[derive(Debug, Clone)]
pub struct Walk {
    root: i32,
    pruned: Vec<i32>,
    cgroup: Option<Arc<CommandCgroup>>,
    /// What a recent walk found, taken instead of walking /proc again (see [`Walk::known`]).
    known: Option<Vec<ProcStat>>,
}

impl PartialEq for Walk {
    fn eq(&self, other: &Walk) -> bool {
        self.root == other.root
            && self.pruned == other.pruned
            && self.cgroup.as_ref().map(|c| c.path()) == other.cgroup.as_ref().map(|c| c.path())
    }
}

impl Eq for Walk {}

impl Walk {
    /// Every descendant of `root`.
    pub fn below(root: i32) -> Walk {
        Walk {
            root,
            pruned: Vec::new(),
            cgroup: None,
            known: None,
        }
    }

    /// The processes a recent walk found, taken as the walk: a stop's first signal reaches
    /// them (each checked by pid and start time through its pidfd) at once, where a walk of
    /// all of /proc by each of hundreds of brokers at the same moment (their TUI killed)
    /// would take seconds. Whatever the list misses (forked since) is still a descendant,
    /// found by the stop's sweeps, which walk again.
    pub fn known(mut self, processes: Vec<ProcStat>) -> Walk {
        self.known = Some(processes);
        self
    }

    /// The walk the broker's state asked for, over the command's cgroup `cgroup` (the
    /// handle the I/O layer holds) where it asked for the cgroup's members.
    pub fn of(tree: &TreeWalk, cgroup: Option<&Arc<CommandCgroup>>) -> Walk {
        Walk {
            root: tree.root,
            pruned: tree.pruned.clone(),
            cgroup: cgroup.filter(|_| tree.in_cgroup).cloned(),
            known: tree.known.clone(),
        }
    }

    /// Leaves out these processes and everything below them.
    pub fn pruning(mut self, subtrees: impl IntoIterator<Item = i32>) -> Walk {
        self.pruned.extend(subtrees);
        self
    }

    /// The members of `cgroup` instead of the walk of /proc, when there is one.
    pub fn in_cgroup(mut self, cgroup: Option<Arc<CommandCgroup>>) -> Walk {
        self.cgroup = cgroup;
        self
    }

    pub fn cgroup(&self) -> Option<&CommandCgroup> {
        self.cgroup.as_deref()
    }

    /// The walk over a given process list, parents before children (the pure part), leaving
    /// out as well each process `custodian` says is another command's broker, with
    /// everything below it.
    fn select_but(&self, processes: &[ProcStat], custodian: impl Fn(i32) -> bool) -> Vec<ProcStat> {
        procfs::Family::of(processes).descendants_but(self.root, |pid| {
            self.pruned.contains(&pid) || (pid != self.root && custodian(pid))
        })
    }

    /// The walk now, zombies included: the cgroup's members (each read through the one /proc
    /// reader), or the walk of `/proc`.
    pub fn processes(&self) -> Vec<ProcStat> {
        (self.processes_until(no_deadline())).unwrap_or_default()
    }

    /// Whether the walk is below this very process and it has no child, zombie or not: then
    /// nothing descends from it, which the kernel says in one call where the walk would read
    /// every process on the machine (the broker's look at the tree once its command has
    /// exited, on every call of the shell shim).
    fn below_childless_self(&self) -> bool {
        self.root == std::process::id() as i32 && !crate::broker::reap::has_children()
    }

    /// The cgroup's members, when there is a cgroup and it holds any. An empty cgroup is not
    /// the whole answer: a process that moved itself to another cgroup (`systemd-run
    /// --scope`, `cgexec`, a root command writing another `cgroup.procs`) is still a
    /// descendant, which the /proc walk then finds.
    fn members(&self) -> Option<Vec<i32>> {
        self.cgroup
            .as_ref()
            .and_then(|c| c.members().ok())
            .filter(|members| !members.is_empty())
    }

    /// As [`Walk::live`], or `None` if reading it would last past `deadline`.
    pub fn live_until(&self, deadline: std::time::Instant) -> Option<Vec<ProcStat>> {
        let processes = self.processes_until(deadline)?;
        Some(processes.into_iter().filter(|p| !p.is_zombie()).collect())
    }

    /// As [`Walk::processes`] (zombies included), or `None` if reading it would last past
    /// `deadline`.
    pub fn processes_until(&self, deadline: std::time::Instant) -> Option<Vec<ProcStat>> {
        if let Some(known) = &self.known {
            return Some(known.clone());
        }
        Some(match self.members() {
            Some(members) => procfs::stats_until(members, deadline)?,
            None if self.below_childless_self() => Vec::new(),
            // The walk of what /proc lists. A broker below the root is another command's (a
            // shell call's, kept for the agent that made it; a `tether exec` in the command):
            // it stops its own command, journaled as its own, when it loses its front end or
            // its session's owner. Signalled as part of this tree, its leftovers would die of
            // a TERM nobody journaled, before their own broker could say why they ended.
            None => self.select_but(&procfs::stats_until(procfs::pids(), deadline)?, is_broker),
        })
    }

    /// The walk now, without zombies.
    pub fn live(&self) -> Vec<ProcStat> {
        (self.live_until(no_deadline())).unwrap_or_default()
    }

    /// SIGKILL to the whole cgroup at once (`cgroup.kill`), where the walk is a cgroup's.
    /// Returns the members it held just before (keyed by pid alone, see [`member_key`]), or
    /// `None` when there is no cgroup to kill (the caller signals process by process).
    pub fn kill_cgroup(&self) -> Option<Vec<ProcessKey>> {
        let cgroup = self.cgroup.as_ref()?;
        // Empty: whatever is left of the tree left the cgroup, and is signalled one by one.
        let members = self.members()?;
        cgroup.kill().ok()?;
        Some(members.into_iter().map(member_key).collect())
    }
}

/// A deadline no walk reaches: the walk takes as long as it takes.
fn no_deadline() -> std::time::Instant {
    std::time::Instant::now() + std::time::Duration::from_secs(365 * 24 * 3600)
}

impl From<i32> for Walk {
    fn from(root: i32) -> Walk {
        Walk::below(root)
    }
}

impl From<&Walk> for Walk {
    fn from(walk: &Walk) -> Walk {
        walk.clone()
    }
}

/// Sends `signal` to one process found by a walk, through a verified pidfd. Returns whether
/// it was delivered.
pub fn signal_process(stat: &ProcStat, signal: ProcessSignal) -> bool {
    open_verified(stat).is_some_and(|pidfd| send(&pidfd, signal))
}

/// Signals the group (while its leader is unreaped, so the pgid cannot have been reused) and
/// every live process of the walk, walking again until a walk finds no process not yet
/// signalled. `already` holds processes signalled earlier in the same sequence; they are
/// skipped and the newly reached ones are added. Returns the pids reached this time.
///
/// Each round pins the processes it found with pidfds *before* the group signal, so the
/// processes that signal ends at once are still counted among those it reached.
///
/// Rounds of any signal but KILL stop after [`CHASE_LIMIT`]: a command that ignores the
/// signal and forks as fast as it can would otherwise keep this call (and the broker's loop)
/// busy for as long as it forks. The stop sequence's sweeps take up the newcomers, and its
/// KILL (the group's, or the cgroup's at once) ends the forking.
pub fn signal_tree(
    walk: impl Into<Walk>,
    group: Option<i32>,
    signal: impl Into<ProcessSignal>,
    also_cont: bool,
    already: &mut HashSet<ProcessKey>,
) -> Vec<i32> {
    let walk = walk.into();
    let signal = signal.into();
    if let (Some(pgid), true) = (group, also_cont) {
        // A stop's TERM (the one signal sent with CONT after it), before anything that
        // takes time (a walk, a listing): the group's CPU priority to the lowest, so that a
        // command forking as fast as it can stops crowding out the broker the moment its
        // stop starts (see [`yield_cpu`]). Never for another signal: a TSTP then CONT
        // (Ctrl-Z, `fg`) or an operator's HUP leaves the command running on, at its own
        // priority.
        // A pgid that is no pid (0) would be our own group: never that.
        if let Some(pgid) = rustix::process::Pid::from_raw(pgid) {
            let _ = rustix::process::setpriority_pgrp(Some(pgid), 19);
        }
    }
    if let Some(reached) = walk
        .cgroup()
        .and_then(|c| signal_members(c, group, signal, also_cont, already))
    {
        return reached;
    }
    let mut reached = Vec::new();
    let mut group_pending = group;
    let started = std::time::Instant::now();
    // A process forking as fast as it can may keep adding children; bound the rounds.
    for _ in 0..64 {
        // KILL walks to the end. Any other signal gives up a walk that a fork storm drags
        // past WALK_LIMIT (reads of processes being forked wait on them): the group has it,
        // the stop's KILL reaches the rest, and the broker is not held past its grace period.
        let listed = match signal {
            ProcessSignal::KILL => walk.processes(),
            _ => match walk.live_until(started + WALK_LIMIT) {
                Some(listed) => listed,
                None => {
                    signal_group(group_pending.take(), signal, also_cont);
                    break;
                }
            },
        };
        let fresh: Vec<(ProcStat, Handle)> = listed
            .into_iter()
            .filter(|p| !p.is_zombie() && !already.contains(&key(p)))
            .filter_map(|p| open_verified(&p).map(|fd| (p, fd)))
            .collect();
        signal_group(group_pending.take(), signal, also_cont);
        if fresh.is_empty() {
            break;
        }
        // KILL is chased longer: it ends the forking, so the rounds are few; still bounded,
        // so that the broker reports (and its front end hears from it) between sweeps.
        let limit = match signal {
            ProcessSignal::KILL => KILL_CHASE_LIMIT,
            _ => CHASE_LIMIT,
        };
        let past_limit = started.elapsed() >= limit;
        for (p, pidfd) in &fresh {
            already.insert(key(p));
            let in_group = group.is_some_and(|g| g == p.pgid);
            // A member of the group got the group signal (and its CONT); a dead one was
            // reached by it.
            if deliver(pidfd, p.pid, signal, also_cont) || in_group || procfs::is_gone(p.pid) {
                reached.push(p.pid);
            }
        }
        if past_limit {
            break;
        }
    }
    reached.sort_unstable();
    reached.dedup();
    reached
}

/// How a cgroup member is known to a stop sequence: by pid alone. Reading each member's start
/// time means reading its `/proc/PID/stat`, which a fork storm makes slow (the reads wait on
/// processes being forked); the pidfd and the second listing in [`signal_members`] are what
/// make a signal reach the member and no other process. A pid reused by a new member during
/// one stop is taken for one already signalled: it still gets the cgroup's KILL.
pub fn member_key(pid: i32) -> ProcessKey {
    (pid, 0)
}

/// [`signal_tree`] over a cgroup's members, without reading `/proc`: the members are listed,
/// each new one pinned with a pidfd, the members listed again, and a pinned process is
/// signalled only if its pid is still a member (so the pidfd is that member, not a process
/// that took a freed pid in between). `None` when the cgroup cannot be read or is empty:
/// the caller walks /proc instead.
///
/// The cgroup is frozen meanwhile (for the milliseconds the round takes): nothing in it
/// forks, so one listing has every member, and a fork storm does not take the CPU the
/// broker needs to signal it (on two cores it preempted the broker for ~50 ms between two
/// signals). The signals wait in the frozen processes and are acted on once it is thawed.
fn signal_members(
    cgroup: &CommandCgroup,
    group: Option<i32>,
    signal: ProcessSignal,
    also_cont: bool,
    already: &mut HashSet<ProcessKey>,
) -> Option<Vec<i32>> {
    let frozen = signal != ProcessSignal::KILL && cgroup.freeze(true).is_ok();
    // Thawed however the round ends, an unreadable listing (`?`) included.
    let _thaw = Thaw(frozen.then_some(cgroup));
    let mut reached = Vec::new();
    let mut group_pending = group;
    let chase_until = std::time::Instant::now() + CHASE_LIMIT;
    for round in 0..64 {
        let listed = cgroup.members().ok()?;
        // An empty cgroup is not the whole tree (see `Walk::members`): the /proc walk then.
        if round == 0 && listed.is_empty() {
            return None;
        }
        let pinned: Vec<(i32, OwnedFd)> = listed
            .into_iter()
            .filter(|pid| !already.contains(&member_key(*pid)))
            .filter_map(|pid| {
                let raw = rustix::process::Pid::from_raw(pid)?;
                pidfd_open(raw, PidfdFlags::empty())
                    .ok()
                    .map(|fd| (pid, fd))
            })
            .collect();
        if pinned.is_empty() {
            signal_group(group_pending.take(), signal, also_cont);
            break;
        }
        let still: HashSet<i32> = cgroup.members().ok()?.into_iter().collect();
        // The group's signal only after the second listing: a SIGKILLed member leaves
        // `cgroup.procs` at once, and would not be counted as reached. Signalled after it,
        // a member still exists (a zombie at worst), so its own signal succeeds too.
        signal_group(group_pending.take(), signal, also_cont);
        for (pid, pidfd) in pinned {
            already.insert(member_key(pid));
            if still.contains(&pid) && deliver(&Handle::Pidfd(pidfd), pid, signal, also_cont) {
                reached.push(pid);
            }
        }
        if std::time::Instant::now() >= chase_until {
            break;
        }
    }
    reached.sort_unstable();
    reached.dedup();
    Some(reached)
}

/// Sends `signal` to one process just checked to be the one meant, and CONT after it if
/// asked (a stop's TERM); a process being stopped so has its priority lowered first
/// ([`yield_cpu`]), right after the check: once signalled it may end at once, and its pid be
/// taken by another. Returns whether `signal` was delivered.
fn deliver(handle: &Handle, pid: i32, signal: ProcessSignal, also_cont: bool) -> bool {
    if also_cont {
        yield_cpu(pid);
    }
    let sent = send(handle, signal);
    if sent && also_cont {
        send(handle, ProcessSignal::CONT);
    }
    sent
}

/// Thaws the cgroup it holds when dropped.
struct Thaw<'a>(Option<&'a CommandCgroup>);

impl Drop for Thaw<'_> {
    fn drop(&mut self) {
        if let Some(cgroup) = self.0 {
            let _ = cgroup.freeze(false);
        }
    }
}

/// A member being stopped gets the lowest CPU priority (nice 19, which any owner may set):
/// during the grace period it still runs its TERM handler, but a fork storm no longer takes
/// the CPU from the broker, which must wake on time for the cgroup's KILL. What it forks
/// inherits the priority. The pid is still a member (listed twice around its pidfd), so the
/// call reaches no other process (on the /proc path, the process was checked by its start
/// time a moment before).
fn yield_cpu(pid: i32) {
    // A failure (the process just exited) is of no consequence. A pid that is no pid (0)
    // would be this process: never that.
    if let Some(pid) = rustix::process::Pid::from_raw(pid) {
        let _ = rustix::process::setpriority_process(Some(pid), 19);
    }
}

fn signal_group(group: Option<i32>, signal: ProcessSignal, also_cont: bool) {
    if let Some(pgid) = group
        && signal.send_to_group(pgid).is_ok()
        && also_cont
    {
        let _ = ProcessSignal::CONT.send_to_group(pgid);
    }
}

/// How long one KILL keeps walking again for processes forked meanwhile; the stop's sweeps
/// go on after it.
const KILL_CHASE_LIMIT: std::time::Duration = std::time::Duration::from_millis(250);

/// How long a walk for a signal other than KILL may last (one walks a few thousand
/// processes in about 10 ms, unless they fork as fast as they can).
const WALK_LIMIT: std::time::Duration = std::time::Duration::from_millis(100);

/// How long one tree signal keeps walking again for processes forked meanwhile.
const CHASE_LIMIT: std::time::Duration = std::time::Duration::from_millis(30);

/// Whether `pid` is a tether broker: it runs this very program (the kernel's `exe` link,
/// which no process can set) and names itself so. A name alone is not enough: a command may
/// call itself `tether-broker` (`prctl`, or a file of that name) to be left out of its
/// stop.
fn is_broker(pid: i32) -> bool {
    procfs::runs_this_program_as(pid, crate::broker::BROKER_COMM)
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Walk {
        fn root(&self) -> i32 {
            self.root
        }

        /// The walk over a given process list, every broker below the root included.
        fn select(&self, processes: &[ProcStat]) -> Vec<ProcStat> {
            self.select_but(processes, |_| false)
        }
    }

    fn stat(pid: i32, ppid: i32, state: u8) -> ProcStat {
        ProcStat {
            pid,
            ppid,
            pgid: pid,
            sid: pid,
            state,
            start_ticks: 1,
            ..ProcStat::default()
        }
    }

    #[test]
    fn a_front_end_walk_leaves_live_brokers_and_their_trees_alone() {
        // The front end (1) runs two brokers (2, 3); 2 died, its command (4, 5) came to 1.
        let procs = [
            stat(3, 1, b'S'),
            stat(6, 3, b'S'),
            stat(4, 1, b'Z'),
            stat(5, 4, b'S'),
            stat(7, 1, b'S'),
        ];
        let walk = Walk::below(1).pruning([3]);
        let pids: Vec<i32> = walk.select(&procs).iter().map(|p| p.pid).collect();
        assert_eq!(pids.len(), 3);
        for pid in [4, 5, 7] {
            assert!(pids.contains(&pid), "{pid} missing from {pids:?}");
        }
        assert_eq!(Walk::from(1).select(&procs).len(), 5);
        assert_eq!(Walk::from(&walk), walk);
        assert_eq!(walk.root(), 1);
    }

    #[test]
    fn a_walk_of_proc_leaves_another_commands_broker_and_its_tree_to_it() {
        // The agent's broker (1): the agent (2), and a shell call's broker (3) it inherited,
        // which keeps that call's server (4) for the agent.
        let procs = [stat(2, 1, b'S'), stat(3, 1, b'S'), stat(4, 3, b'S')];
        let walk = Walk::below(1);
        let pids: Vec<i32> = walk
            .select_but(&procs, |pid| pid == 3)
            .iter()
            .map(|p| p.pid)
            .collect();
        assert_eq!(pids, [2]);
        // The root itself is never left out, were it a broker.
        assert_eq!(walk.select_but(&procs, |pid| pid == 1).len(), 3);
    }

    /// A command that names itself as a broker is still part of its tree: only this very
    /// program, named so, is another command's broker.
    #[test]
    fn a_process_that_only_calls_itself_a_broker_is_not_one() {
        // The kernel names a process after the file it runs: `sleep` through a link called
        // tether-broker is named tether-broker.
        let dir = tether_os::testing::private_tempdir();
        let link = dir.path().join("tether-broker");
        std::os::unix::fs::symlink("/bin/sleep", &link).expect("a link named tether-broker");
        let mut fake = std::process::Command::new(&link)
            .arg("30")
            .spawn()
            .expect("sleep");
        let pid = fake.id() as i32;
        // The kernel lets a vfork parent go before it renames the child: wait for the name.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let comm = loop {
            let comm = std::fs::read(format!("/proc/{pid}/comm")).unwrap_or_default();
            if comm == b"tether-broker\n" || std::time::Instant::now() > deadline {
                break comm;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        };
        let judged = is_broker(pid);
        let _ = fake.kill();
        let _ = fake.wait();
        assert_eq!(comm, b"tether-broker\n", "named after its file");
        assert!(
            !judged,
            "a sleep named tether-broker was taken for a broker"
        );
    }

    /// Only a stop's TERM lowers the CPU priority of what it signals: a TSTP then CONT
    /// (Ctrl-Z, then `fg`) or an operator's HUP leaves the command at its own.
    #[test]
    fn only_a_stops_term_lowers_the_priority_of_what_it_signals() {
        use std::io::BufRead;
        use std::os::unix::process::CommandExt;
        let mut child = std::process::Command::new("sh")
            .args(["-c", "trap '' TERM HUP; echo ready; read -r _"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .process_group(0)
            .spawn()
            .expect("run sh");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.as_mut().expect("its stdout"))
            .read_line(&mut line)
            .expect("sh is ready");
        let pid = child.id() as i32;
        let nice = || {
            rustix::process::getpriority_process(rustix::process::Pid::from_raw(pid))
                .expect("its priority")
        };
        let ours = rustix::process::getpriority_process(None).expect("our priority");
        if ours >= 19 {
            let _ = child.kill();
            let _ = child.wait();
            tether_os::testing::skip("the tests run at nice 19: a lowered priority cannot show");
            return;
        }
        let walk = || Walk::below(-1).known(procfs::read_stat(pid).into_iter().collect());
        let signal = |signal, also_cont| {
            signal_tree(walk(), Some(pid), signal, also_cont, &mut HashSet::new())
        };
        let mut seen = Vec::new();
        for sent in [ProcessSignal::TSTP, ProcessSignal::CONT, ProcessSignal::HUP] {
            assert_eq!(signal(sent, false), [pid]);
            seen.push(nice());
        }
        assert_eq!(signal(ProcessSignal::TERM, true), [pid]);
        seen.push(nice());
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(seen, [ours, ours, ours, 19]);
    }

    /// The walk below this very process asks the kernel whether it has a child before it
    /// reads /proc: a child, and what it forked, are still found.
    #[test]
    fn a_walk_below_ourselves_finds_our_child_and_its_child() {
        let mut child = std::process::Command::new("sh")
            .args(["-c", "sleep 30 & echo $!; wait"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("run sh");
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.as_mut().expect("its stdout")),
            &mut line,
        )
        .expect("the sleep's pid");
        let grandchild: i32 = line.trim().parse().expect("a pid");
        let walk = Walk::below(std::process::id() as i32);
        let found: Vec<i32> = walk.live().iter().map(|p| p.pid).collect();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let until = walk.live_until(deadline);
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(grandchild),
            nix::sys::signal::Signal::SIGKILL,
        );
        let _ = child.kill();
        let _ = child.wait();
        let until: Vec<i32> = until
            .expect("within the deadline")
            .iter()
            .map(|p| p.pid)
            .collect();
        for pids in [&found, &until] {
            assert!(pids.contains(&(child.id() as i32)), "{pids:?}");
            assert!(pids.contains(&grandchild), "{pids:?}");
        }
    }
}
