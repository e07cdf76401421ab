//! Per-command limits: `max_procs` as `pids.max`, `max_memory` as `memory.max`, applied where
//! the controller is available to the command's cgroup. Where it is not, the command runs all
//! the same and the journal says which limit was not applied and why.
//!
//! A controller is available to a child when the parent's `cgroup.controllers` lists it; it
//! is then enabled by writing `+NAME` to the parent's `cgroup.subtree_control`, which the
//! kernel refuses (`EBUSY`) when the parent is not the root and holds processes itself (the
//! "no internal processes" rule).

use nix::errno::Errno;

use super::CommandCgroup;
use super::file;

pub use tether_protocol::protocol::Limits;

/// Each limit asked: its name in `tether.toml`, its controller, its file and value.
fn asked(limits: &Limits) -> Vec<(&'static str, &'static str, &'static str, u64)> {
    let mut asked = Vec::new();
    if let Some(n) = limits.max_procs {
        asked.push(("max_procs", "pids", "pids.max", n));
    }
    if let Some(n) = limits.max_memory {
        asked.push(("max_memory", "memory", "memory.max", n));
    }
    asked
}

/// Why a limit was not applied, one sentence that names the limit and what to do.
pub type LimitProblem = String;

fn listed(text: &str, controller: &str) -> bool {
    text.split_ascii_whitespace().any(|c| c == controller)
}

/// Applies `limits` to `cgroup`, enabling controllers in its parent as needed. Returns the
/// limits that could not be applied, with why; an empty list when all were.
pub fn apply(cgroup: &CommandCgroup, limits: &Limits) -> Vec<LimitProblem> {
    let parent = cgroup.parent();
    let available = file::read(parent, "cgroup.controllers").unwrap_or_default();
    let mut problems = Vec::new();
    for (limit, controller, file, value) in asked(limits) {
        if !listed(&available, controller) {
            problems.push(format!(
                "{limit} not applied: the {controller} controller is not available in this cgroup v2 hierarchy (its cgroup.controllers lists `{}`); the command runs without it",
                available.trim()
            ));
            continue;
        }
        let enabled = file::read(parent, "cgroup.subtree_control").unwrap_or_default();
        if !listed(&enabled, controller)
            && let Err(err) =
                file::write(parent, "cgroup.subtree_control", &format!("+{controller}"))
        {
            let why = if err.raw_os_error() == Some(Errno::EBUSY as i32) {
                " (the parent cgroup holds processes itself; a delegated subtree must keep them in a leaf)".to_string()
            } else {
                String::new()
            };
            problems.push(format!(
                    "{limit} not applied: cannot enable the {controller} controller for command cgroups: {err}{why}; the command runs without it"
                ));
            continue;
        }
        if let Err(err) = cgroup.write(file, &value.to_string()) {
            problems.push(format!(
                "{limit} not applied: cannot write {value} to {}: {err}; the command runs without it",
                cgroup.path().join(file).display()
            ));
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cgroup::Hierarchy;
    use std::fs;
    use std::path::Path;

    /// A temp directory laid out as a cgroup hierarchy with `controllers` available and one
    /// command cgroup in it with the given limit files (what the kernel creates once a
    /// controller is enabled).
    fn hierarchy(controllers: &str, files: &[&str]) -> (tempfile::TempDir, CommandCgroup) {
        let dir = crate::testing::private_tempdir();
        let root = dir.path();
        crate::testing::write_private(root.join("cgroup.procs"), "");
        crate::testing::write_private(root.join("cgroup.controllers"), controllers);
        crate::testing::write_private(root.join("cgroup.subtree_control"), "");
        let name = "tether.s.c.1-2";
        crate::testing::private_dir(root.join(name));
        for file in files {
            crate::testing::write_private(root.join(name).join(file), "max\n");
        }
        Hierarchy::at(root).expect("hierarchy");
        let cgroup = CommandCgroup::open_fake(&root.join(name)).expect("open");
        (dir, cgroup)
    }

    fn read(path: &Path) -> String {
        fs::read_to_string(path).expect("read")
    }

    #[test]
    fn limits_are_written_where_controllers_are_available() {
        let (dir, cgroup) = hierarchy("cpu memory pids\n", &["pids.max", "memory.max"]);
        let limits = Limits {
            max_procs: Some(64),
            max_memory: Some(256 << 20),
        };
        assert_eq!(apply(&cgroup, &limits), Vec::<String>::new());
        let child = dir.path().join("tether.s.c.1-2");
        assert_eq!(read(&child.join("pids.max")), "64");
        assert_eq!(read(&child.join("memory.max")), (256u64 << 20).to_string());
        // Enabled in the parent for its children (a fake file keeps the last write).
        assert_eq!(read(&dir.path().join("cgroup.subtree_control")), "+memory");
    }

    #[test]
    fn a_missing_controller_is_said_and_the_rest_applied() {
        let (dir, cgroup) = hierarchy("hugetlb\n", &[]);
        let limits = Limits {
            max_procs: Some(10),
            max_memory: None,
        };
        let problems = apply(&cgroup, &limits);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0].starts_with("max_procs not applied: the pids controller is not available"),
            "{}",
            problems[0]
        );
        assert!(problems[0].contains("`hugetlb`"), "{}", problems[0]);
        assert!(!dir.path().join("tether.s.c.1-2/pids.max").exists());

        let (_dir, cgroup) = hierarchy("pids memory\n", &["pids.max"]);
        let both = Limits {
            max_procs: Some(10),
            max_memory: Some(1 << 20),
        };
        // memory.max is missing from the child: the write fails and says where.
        let problems = apply(&cgroup, &both);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains("memory.max"), "{}", problems[0]);
        assert!(Limits::default().is_empty() && !both.is_empty());
    }
}
