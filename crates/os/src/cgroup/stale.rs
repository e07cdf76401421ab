//! Removing command cgroups that a dead broker left: empty ones, ours, named by tether, whose
//! broker (pid and start time) no longer runs. A cgroup whose broker lives is never touched,
//! nor one that still holds a process (the front end's cleanup stops those).

use nix::unistd::UnlinkatFlags;

use super::command::parse_populated;
use super::file;
use super::{Hierarchy, name};
use tether_protocol::protocol::BrokerIdentity;

/// What is known of one directory in the hierarchy, for [`is_stale`].
pub struct Candidate<'a> {
    pub name: &'a str,
    pub ours: bool,
    /// `None` when `cgroup.events` could not be read.
    pub populated: Option<bool>,
}

/// Whether a directory is a stale command cgroup to remove. `broker_alive` says whether the
/// broker (the process with that pid and start time) runs.
pub fn is_stale(candidate: &Candidate, broker_alive: impl Fn(&BrokerIdentity) -> bool) -> bool {
    let Some(broker) = name::owner(candidate.name) else {
        return false;
    };
    candidate.ours && candidate.populated == Some(false) && !broker_alive(&broker)
}

/// Removes the stale command cgroups in `hierarchy`; returns how many.
pub fn remove_stale(hierarchy: &Hierarchy) -> usize {
    let Ok(entries) = std::fs::read_dir(hierarchy.path()) else {
        return 0;
    };
    let me = nix::unistd::geteuid().as_raw();
    let mut removed = 0;
    for entry in entries.flatten() {
        let file_name = entry.file_name();
        let Some(dir_name) = file_name.to_str() else {
            continue;
        };
        if name::owner(dir_name).is_none() {
            continue;
        }
        let Ok(dir) = file::open_dir(hierarchy.dir(), dir_name) else {
            continue;
        };
        let ours = nix::sys::stat::fstat(&dir).is_ok_and(|s| s.st_uid == me);
        let populated = file::read(&dir, "cgroup.events")
            .ok()
            .and_then(|text| parse_populated(&text));
        let candidate = Candidate {
            name: dir_name,
            ours,
            populated,
        };
        if !is_stale(&candidate, crate::procfs::broker_alive) {
            continue;
        }
        // `populated 0` counts the cgroups below it too: those the command made go first.
        super::command::remove_below(&dir, 0);
        if nix::unistd::unlinkat(hierarchy.dir(), dir_name, UnlinkatFlags::RemoveDir).is_ok() {
            removed += 1;
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_empty_cgroup_of_ours_whose_broker_is_dead_is_stale() {
        let dead = |_: &BrokerIdentity| false;
        let alive = |_: &BrokerIdentity| true;
        let empty = Candidate {
            name: "tether.s.01-a.4242-99",
            ours: true,
            populated: Some(false),
        };
        assert!(is_stale(&empty, dead));
        assert!(!is_stale(&empty, alive), "its broker lives");
        let busy = Candidate {
            populated: Some(true),
            ..empty
        };
        assert!(!is_stale(&busy, dead), "a process is still in it");
        let unknown = Candidate {
            populated: None,
            ..empty
        };
        assert!(!is_stale(&unknown, dead));
        let theirs = Candidate {
            ours: false,
            ..empty
        };
        assert!(!is_stale(&theirs, dead), "another user's");
        let other = Candidate {
            name: "user.slice",
            ..empty
        };
        assert!(!is_stale(&other, dead), "not tether's");
        // The pid and start time both count: a reused pid is another process.
        let reused = |b: &BrokerIdentity| b.pid == 4242 && b.start_ticks == 100;
        assert!(is_stale(&empty, reused));
    }
}
