//! Command cgroups a test's sessions created, to check that none is left behind.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use tether::cgroup::{Hierarchy, name};

/// The cgroup hierarchy tether would use here, or why there is none.
pub fn hierarchy() -> Result<PathBuf, String> {
    Hierarchy::find()
        .map(|h| h.path().to_path_buf())
        .map_err(|e| e.to_string())
}

/// The session ids journaled under `state_dir`.
fn sessions(state_dir: &Path) -> Vec<String> {
    std::fs::read_dir(state_dir.join("sessions"))
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|e| e.file_name().to_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// The brokers journaled under `state_dir`, by pid; `None` if a command has no
/// `broker_started` line (its broker died before it wrote one).
fn brokers(state_dir: &Path) -> Option<Vec<i32>> {
    super::journal::command_dirs(state_dir)
        .iter()
        .map(|dir| {
            super::journal::events_now(dir)
                .iter()
                .find_map(|e| match &e.kind {
                    tether::protocol::EventKind::BrokerStarted { broker_pid, .. } => {
                        Some(*broker_pid)
                    }
                    _ => None,
                })
        })
        .collect()
}

/// Cgroup directories named after one of the sessions under `state_dir` and owned by one
/// of its brokers: tests running at once may use the same session name.
pub fn left_for(state_dir: &Path) -> Vec<PathBuf> {
    let Ok(root) = hierarchy() else {
        return Vec::new();
    };
    let prefixes: Vec<String> = sessions(state_dir)
        .iter()
        .map(|s| format!("{}.{}.", name::PREFIX, name::sanitize(s)))
        .collect();
    let brokers = brokers(state_dir);
    let ours = |file: &str| {
        let owner = name::owner(file).map(|broker| broker.pid);
        brokers
            .as_ref()
            .is_none_or(|brokers| owner.is_some_and(|pid| brokers.contains(&pid)))
    };
    let Ok(entries) = std::fs::read_dir(&root) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| {
            let file = e.file_name();
            let file = file.to_string_lossy();
            prefixes.iter().any(|p| file.starts_with(p.as_str())) && ours(&file)
        })
        .map(|e| e.path())
        .collect()
}

/// Fails if a cgroup of the test's sessions is still there after a short window.
pub fn assert_none_left(state_dir: &Path) {
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let left = left_for(state_dir);
        if left.is_empty() {
            return;
        }
        if Instant::now() >= deadline {
            panic!("command cgroups left after the test: {left:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
