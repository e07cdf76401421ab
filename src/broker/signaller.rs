//! Delivering a signal to a command's whole tree: its process group and every descendant
//! the broker's subreaper walk finds, each through a pidfd so a reused pid is never hit.

use std::collections::HashSet;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use rustix::process::{PidfdFlags, pidfd_open, pidfd_send_signal};

use crate::procfs::{self, ProcStat};

/// The identity of a process that outlives pid reuse.
pub type ProcessKey = (i32, u64);

pub fn key(stat: &ProcStat) -> ProcessKey {
    (stat.pid, stat.start_ticks)
}

/// Sends `signal` to one process found by a walk, through a pidfd opened for it and checked
/// to still be the process the walk saw. Returns whether it was delivered.
pub fn signal_process(stat: &ProcStat, signal: Signal) -> bool {
    let Some(pid) = rustix::process::Pid::from_raw(stat.pid) else {
        return false;
    };
    let Ok(pidfd) = pidfd_open(pid, PidfdFlags::empty()) else {
        return false;
    };
    // The pidfd now pins one process; if it is not the one the walk saw, the pid was reused.
    match procfs::read_stat(stat.pid) {
        Some(now) if now.start_ticks == stat.start_ticks => {}
        _ => return false,
    }
    let Some(sig) = rustix::process::Signal::from_named_raw(signal as i32) else {
        return false;
    };
    pidfd_send_signal(&pidfd, sig).is_ok()
}

/// Signals the group (while its leader is unreaped, so the pgid cannot have been reused) and
/// every live descendant of `root`, walking again until a walk finds no process not yet
/// signalled. `already` holds processes signalled earlier in the same sequence; they are
/// skipped and the newly reached ones are added. Returns the pids reached this time.
pub fn signal_tree(
    root: i32,
    group: Option<i32>,
    signal: Signal,
    also_cont: bool,
    already: &mut HashSet<ProcessKey>,
) -> Vec<i32> {
    let mut reached = Vec::new();
    if let Some(pgid) = group {
        if killpg(Pid::from_raw(pgid), signal).is_ok() && also_cont {
            let _ = killpg(Pid::from_raw(pgid), Signal::SIGCONT);
        }
    }
    // A process forking as fast as it can may keep adding children; bound the rounds.
    for _ in 0..64 {
        let fresh: Vec<ProcStat> = procfs::descendants(root)
            .into_iter()
            .filter(|p| !p.is_zombie() && !already.contains(&key(p)))
            .collect();
        if fresh.is_empty() {
            break;
        }
        for p in &fresh {
            already.insert(key(p));
            if signal_process(p, signal) {
                if also_cont {
                    signal_process(p, Signal::SIGCONT);
                }
                reached.push(p.pid);
            }
        }
    }
    reached.sort_unstable();
    reached.dedup();
    reached
}

/// Live (non-zombie) descendants of `root`.
pub fn live_descendants(root: i32) -> Vec<ProcStat> {
    procfs::descendants(root)
        .into_iter()
        .filter(|p| !p.is_zombie())
        .collect()
}

/// Parses `TERM`, `SIGTERM`, `term` or `15`.
pub fn parse_signal(name: &str) -> Option<Signal> {
    let name = name.trim();
    if let Ok(n) = name.parse::<i32>() {
        return Signal::try_from(n).ok();
    }
    let upper = name.to_ascii_uppercase();
    let full = if upper.starts_with("SIG") {
        upper
    } else {
        format!("SIG{upper}")
    };
    full.parse().ok()
}

/// `SIGTERM` → `TERM`, the form events carry.
pub fn signal_name(signal: Signal) -> String {
    signal.as_str().trim_start_matches("SIG").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_signal_names() {
        assert_eq!(parse_signal("TERM"), Some(Signal::SIGTERM));
        assert_eq!(parse_signal("sigkill"), Some(Signal::SIGKILL));
        assert_eq!(parse_signal("2"), Some(Signal::SIGINT));
        assert_eq!(parse_signal("NOPE"), None);
        assert_eq!(parse_signal("999"), None);
        assert_eq!(signal_name(Signal::SIGTERM), "TERM");
    }
}
