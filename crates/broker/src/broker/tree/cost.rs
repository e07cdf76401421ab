//! What the command's tree cost: the figures are weighed in tether-core ([`command_cost`],
//! [`SampledCost`]); the broker's own `RUSAGE_CHILDREN` is read here.

pub use tether_core::cost::*;

/// The broker's `RUSAGE_CHILDREN`: (CPU milliseconds, largest RSS in bytes), less the CPU
/// time of the keepers it reaped (a readiness probe's, the notify command's: not the
/// command's); zeros if the call fails (it cannot, for this process).
///
/// The largest RSS is 0 unless it is above the broker's own: a process's `ru_maxrss` starts
/// at the resident set of the process it was forked from (exec keeps the larger), so every
/// child of the broker (the command, its keepers) begins at the broker's high-water mark,
/// and `true` would read as the broker's 4 MiB. A figure above it is a process of the tree's
/// own; one below it says nothing, and the other sources decide.
pub fn children_usage() -> (u64, u64) {
    use nix::sys::resource::{UsageWho, getrusage};
    use nix::sys::time::TimeVal;
    let Ok(usage) = getrusage(UsageWho::RUSAGE_CHILDREN) else {
        return (0, 0);
    };
    let own = getrusage(UsageWho::RUSAGE_SELF).map_or(i64::MAX, |own| own.max_rss());
    let ms = |t: TimeVal| t.tv_sec() as u64 * 1000 + t.tv_usec() as u64 / 1000;
    let max_rss = Some(usage.max_rss()).filter(|&rss| rss > own).unwrap_or(0);
    (
        (ms(usage.user_time()) + ms(usage.system_time()))
            .saturating_sub(crate::attention::keeper::reaped_keepers_cpu_ms()),
        // Kilobytes on Linux.
        max_rss as u64 * 1024,
    )
}

/// The CPU time (user and system) the command's whole tree used so far, for `max_cpu`: the
/// cgroup's `usage_usec` where the walk is a cgroup's, else what the walk's processes used
/// (with the children each waited for) plus what the broker's reaped children did
/// (`RUSAGE_CHILDREN`, with theirs, less its keepers'). A process is counted once: live or a
/// zombie in /proc, or reaped by the broker, or in a live ancestor's waited-for time.
///
/// `None` when the walk of /proc would last past `deadline` (a fork storm, where reading a
/// forking process's stat waits on it): the broker's loop must stay free for output and a
/// stop, and the caller keeps the figure it had.
pub fn tree_cpu(
    walk: &crate::broker::signaller::Walk,
    deadline: std::time::Instant,
) -> Option<std::time::Duration> {
    if let Some(usec) = walk.cgroup().and_then(|cgroup| cgroup.cpu_usec()) {
        return Some(std::time::Duration::from_micros(usec));
    }
    let ticks_per_second = tether_os::procfs::clock_ticks_per_second().max(1);
    let ticks: u64 = walk
        .processes_until(deadline)?
        .iter()
        .map(|p| p.cpu_ticks + p.waited_cpu_ticks)
        .sum();
    let (reaped_ms, _) = children_usage();
    Some(std::time::Duration::from_millis(
        ticks * 1000 / ticks_per_second + reaped_ms,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::broker::signaller::Walk;
    use std::time::{Duration, Instant};

    /// On the /proc walk a measurement reads every process's stat; one that would last past
    /// its deadline gives nothing (the broker keeps its last figure) rather than hold the
    /// broker's loop.
    #[test]
    fn a_measurement_on_the_proc_walk_gives_up_at_its_deadline() {
        let walk = Walk::below(1);
        assert!(
            tether_os::procfs::pids().len() >= 16,
            "the machine shows too few processes to run out of time"
        );
        assert_eq!(tree_cpu(&walk, Instant::now()), None);
        let far = Instant::now() + Duration::from_secs(600);
        assert!(tree_cpu(&walk, far).is_some());
    }
}
