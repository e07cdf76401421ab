//! What a broker leaves behind when it dies or is killed, and the front end's stop of it.
//!
//! Every front end is a child subreaper, so whatever a dead broker leaves is re-parented to
//! it. The leftovers are then the command's group plus every descendant of the front end
//! that is neither a live broker nor under one; they are stopped by the broker's own
//! [`StopSequence`] over that walk, and the front end reaps what it adopted.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::wait::{WaitPidFlag, waitpid};
use nix::unistd::Pid;
use std::time::Instant;
use tokio::sync::{Mutex, MutexGuard};

use tokio::time::sleep_until;

use tether_broker::broker::signaller::{Walk, signal_tree};
use tether_broker::broker::stop::{self, Kernel, Settling};
use tether_os::cgroup::CommandCgroup;
use tether_os::procfs::{self, ProcStat};
use tether_protocol::protocol::Origin;

/// A front end's live brokers. Walks for leftovers and reaping of adopted processes happen
/// under its lock, and so does starting a broker, so a broker just forked is never taken for
/// a leftover.
#[derive(Clone)]
pub struct LiveBrokers {
    registry: Arc<Mutex<Registry>>,
}

#[derive(Default)]
pub struct Registry {
    me: i32,
    /// pid → the registration that holds it, so a late unregistration of a reaped broker
    /// never drops a new broker that got the same pid.
    brokers: HashMap<i32, u64>,
    next_ticket: u64,
    /// Leaders of groups a running cleanup still signals: reaping one would free its pgid.
    protected: HashSet<i32>,
}

/// A broker's place in the registry, returned by [`Registry::register`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ticket {
    pub pid: i32,
    id: u64,
}

impl LiveBrokers {
    pub fn new() -> LiveBrokers {
        LiveBrokers {
            registry: Arc::new(Mutex::new(Registry {
                me: std::process::id() as i32,
                ..Registry::default()
            })),
        }
    }

    pub async fn lock(&self) -> MutexGuard<'_, Registry> {
        self.registry.lock().await
    }
}

impl Default for LiveBrokers {
    fn default() -> Self {
        LiveBrokers::new()
    }
}

impl Registry {
    /// Records a broker just started; until it is unregistered, walks leave its tree alone
    /// and nothing reaps it but its own `Child`.
    pub fn register(&mut self, pid: i32) -> Ticket {
        self.next_ticket += 1;
        self.brokers.insert(pid, self.next_ticket);
        Ticket {
            pid,
            id: self.next_ticket,
        }
    }

    /// The broker was reaped (by its `Child`): what it left counts as leftovers from now on.
    pub fn unregister(&mut self, ticket: Ticket) {
        if self.brokers.get(&ticket.pid) == Some(&ticket.id) {
            self.brokers.remove(&ticket.pid);
        }
    }

    /// Everything below the front end that no live broker looks after.
    pub fn leftovers(&self) -> Walk {
        Walk::below(self.me).pruning(self.brokers.keys().copied())
    }

    /// Reaps the zombies re-parented to the front end, one pid at a time: `waitpid(-1)`
    /// would take brokers from under their `Child`. Returns how many were reaped.
    pub fn reap_adopted(&self) -> usize {
        let zombies = adopted_zombies(&procfs::all_processes(), self.me, |pid| {
            self.brokers.contains_key(&pid) || self.protected.contains(&pid)
        });
        zombies
            .into_iter()
            .filter(|&pid| {
                // The pid is our own unreaped child (a zombie only its parent can reap), so
                // it names that process.
                let pid = Pid::from_raw(pid);
                match waitpid(pid, Some(WaitPidFlag::WNOHANG)) {
                    Ok(status) => status.pid() == Some(pid),
                    // nix's `Signal` has no real-time signals: it fails so for a child one
                    // killed, once the kernel has reaped it (the kernel's own EINVAL is for
                    // flags, and these are valid).
                    Err(Errno::EINVAL) => true,
                    Err(_) => false,
                }
            })
            .count()
    }
}

/// The pure part of [`Registry::reap_adopted`]: zombie children of `me` that are not kept.
fn adopted_zombies(processes: &[ProcStat], me: i32, kept: impl Fn(i32) -> bool) -> Vec<i32> {
    processes
        .iter()
        .filter(|p| p.ppid == me && p.is_zombie() && !kept(p.pid))
        .map(|p| p.pid)
        .collect()
}

/// The leader of a command's process group, known by pid and start time. While it is
/// unreaped (alive or a zombie) the pgid cannot be reused, so the group may be signalled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupLeader {
    pgid: i32,
    start_ticks: u64,
}

impl GroupLeader {
    /// The process the `spawned` event names, if it is still that: leader of its own group
    /// and a child of one of `parents` (its broker, or the front end once the broker is gone).
    pub fn find(pgid: i32, parents: &[i32]) -> Option<GroupLeader> {
        GroupLeader::identify(procfs::read_stat(pgid).as_ref(), pgid, parents)
    }

    fn identify(stat: Option<&ProcStat>, pgid: i32, parents: &[i32]) -> Option<GroupLeader> {
        let stat = stat.filter(|s| s.pid == pgid && s.pgid == pgid && parents.contains(&s.ppid))?;
        Some(GroupLeader {
            pgid,
            start_ticks: stat.start_ticks,
        })
    }

    /// The group to signal, while its leader is unreaped.
    pub fn live_group(&self) -> Option<i32> {
        self.group_if(procfs::read_stat(self.pgid).as_ref())
    }

    fn group_if(&self, stat: Option<&ProcStat>) -> Option<i32> {
        stat.filter(|s| s.pgid == self.pgid && s.start_ticks == self.start_ticks)
            .map(|_| self.pgid)
    }
}

/// What a front end's stop of the leftovers did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cleanup {
    /// Processes signalled.
    pub reached: usize,
    /// Processes still alive when the front end gave up.
    pub survivors: usize,
}

impl Cleanup {
    /// `cleaned up 3 processes` (and what survived, if anything did).
    pub fn describe(&self) -> String {
        let plural = |n: usize| if n == 1 { "process" } else { "processes" };
        let mut text = format!("cleaned up {} {}", self.reached, plural(self.reached));
        if self.survivors > 0 {
            text.push_str(&format!(
                "; {} {} survived SIGKILL",
                self.survivors,
                plural(self.survivors)
            ));
        }
        text
    }
}

/// Stops the leftovers with the broker's sequence: TERM and CONT to the group and every
/// leftover, `grace` (none: KILL at once), then KILL until two walks in a row find nothing
/// alive, or `patience` after the KILL. Reaps what it adopted on the way.
///
/// With the command's `cgroup` (named by the broker's `containment` event), the leftovers are
/// its members, the KILL is its `cgroup.kill`, the end is `populated 0` as well, and the
/// cgroup is removed once empty.
pub async fn stop_leftovers(
    live: &LiveBrokers,
    leader: Option<GroupLeader>,
    cgroup: Option<&Path>,
    grace: Duration,
    patience: Duration,
) -> Cleanup {
    let cgroup = cgroup.and_then(|path| CommandCgroup::open_existing(path).ok().map(Arc::new));
    // A broker killed in the milliseconds it held the cgroup frozen (while signalling it)
    // left it so: thawed first, so that the TERM below can be acted on.
    if let Some(cgroup) = &cgroup {
        let _ = cgroup.freeze(false);
    }
    let group = || leader.and_then(|l| l.live_group());
    let populated = || {
        cgroup
            .as_ref()
            .is_some_and(|c| c.populated().unwrap_or(false))
    };
    let mut reached: HashSet<i32> = HashSet::new();
    let (mut sequence, mut killed_at) = {
        let mut registry = live.lock().await;
        if let Some(l) = leader {
            registry.protected.insert(l.pgid);
        }
        let walk = registry.leftovers().in_cgroup(cgroup.clone());
        let now = Instant::now();
        let (mut sequence, delivery) = stop::start(Origin::Shutdown, grace, &walk, group(), now);
        reached.extend(delivery.targets);
        let killed_at = grace.is_zero().then(|| {
            reached.extend(stop::escalate(&mut sequence, &walk, group(), now).targets);
            now
        });
        (sequence, killed_at)
    };
    let mut settling = Settling::default();
    let survivors = loop {
        sleep_until(sequence.next_wake().into()).await;
        let registry = live.lock().await;
        let walk = registry.leftovers().in_cgroup(cgroup.clone());
        let now = Instant::now();
        // The broker's own step: its plan, delivered here through the kernel.
        let (delivery, escalated) = sequence.step_with(&mut Kernel, &walk, group(), now);
        if escalated {
            killed_at = Some(now);
        }
        reached.extend(delivery.into_iter().flat_map(|d| d.targets));
        registry.reap_adopted();
        if let Some(survivors) =
            settling.settled(walk.live().len(), populated(), killed_at, patience, now)
        {
            break survivors;
        }
    };
    let mut registry = live.lock().await;
    if let Some(l) = leader {
        registry.protected.remove(&l.pgid);
    }
    registry.reap_adopted();
    if let Some(cgroup) = cgroup.as_ref().filter(|_| !populated()) {
        let _ = cgroup.remove();
    }
    Cleanup {
        reached: reached.len(),
        survivors,
    }
}

/// Sends `signal` to the group (while its leader is unreaped) and every descendant of the
/// broker, which is alive but cannot be asked (`why`), so its tree is still its own. Says
/// what was done, after `why`.
pub fn signal_directly(
    broker_pid: i32,
    leader: Option<GroupLeader>,
    signal: tether_protocol::protocol::ProcessSignal,
    why: &str,
) -> String {
    let name = signal.name();
    let group = leader.and_then(|l| l.live_group());
    let reached = signal_tree(broker_pid, group, signal, false, &mut HashSet::new());
    let processes = match reached.len() {
        1 => "1 process".to_string(),
        n => format!("{n} processes"),
    };
    match group {
        Some(pgid) => format!(
            "{why}: tether sent SIG{name} itself to process group {pgid} and the broker's descendants ({processes})"
        ),
        None if reached.is_empty() => {
            format!("{why} and nothing of the command is left; SIG{name} not sent")
        }
        None => {
            format!("{why}: tether sent SIG{name} itself to the broker's descendants ({processes})")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl GroupLeader {
        fn pgid(&self) -> i32 {
            self.pgid
        }
    }

    fn stat(pid: i32, ppid: i32, pgid: i32, state: u8, start_ticks: u64) -> ProcStat {
        ProcStat {
            pid,
            ppid,
            pgid,
            sid: pgid,
            state,
            start_ticks,
            ..ProcStat::default()
        }
    }

    #[test]
    fn only_non_broker_zombie_children_are_reaped() {
        let procs = [
            stat(10, 1, 10, b'Z', 5),  // a zombie, but not ours
            stat(11, 7, 11, b'Z', 5),  // adopted, dead: reaped
            stat(12, 7, 12, b'S', 5),  // adopted, alive
            stat(13, 7, 13, b'Z', 5),  // a broker that exited: its Child reaps it
            stat(14, 7, 14, b'Z', 5),  // a group leader still protected
            stat(15, 11, 15, b'Z', 5), // a grandchild
        ];
        let kept = |pid| pid == 13 || pid == 14;
        assert_eq!(adopted_zombies(&procs, 7, kept), [11]);
    }

    #[test]
    fn a_group_leader_is_known_by_pid_and_start_time_until_it_is_reaped() {
        let leader_stat = stat(40, 30, 40, b'S', 900);
        // Not a leader of its own group, or nobody's child we know: not the command.
        assert!(GroupLeader::identify(Some(&stat(40, 30, 39, b'S', 900)), 40, &[30]).is_none());
        assert!(GroupLeader::identify(Some(&leader_stat), 40, &[31, 32]).is_none());
        assert!(GroupLeader::identify(None, 40, &[30]).is_none());
        let leader = GroupLeader::identify(Some(&leader_stat), 40, &[30, 1]).expect("the leader");
        assert_eq!(leader.pgid(), 40);
        assert_eq!(leader.group_if(Some(&leader_stat)), Some(40));
        // Adopted by the front end and dead, but unreaped: the pgid is still the command's.
        assert_eq!(leader.group_if(Some(&stat(40, 1, 40, b'Z', 900))), Some(40));
        // Reaped: gone, or the pid now names another process.
        assert_eq!(leader.group_if(None), None);
        assert_eq!(leader.group_if(Some(&stat(40, 2, 40, b'S', 901))), None);
    }

    #[test]
    fn registry_walks_around_live_brokers_and_keeps_a_reused_pid() {
        let mut registry = Registry {
            me: 7,
            ..Registry::default()
        };
        let first = registry.register(20);
        assert_eq!(registry.leftovers(), Walk::below(7).pruning([20]));
        // The first broker was reaped and its pid went to a new broker before the first one
        // was unregistered: the new one stays registered.
        let second = registry.register(20);
        registry.unregister(first);
        assert_eq!(registry.leftovers(), Walk::below(7).pruning([20]));
        registry.unregister(second);
        assert_eq!(registry.leftovers(), Walk::below(7));
    }

    #[test]
    fn cleanup_says_what_it_did() {
        let clean = Cleanup {
            reached: 1,
            survivors: 0,
        };
        assert_eq!(clean.describe(), "cleaned up 1 process");
        let stubborn = Cleanup {
            reached: 3,
            survivors: 2,
        };
        assert_eq!(
            stubborn.describe(),
            "cleaned up 3 processes; 2 processes survived SIGKILL"
        );
    }
}
