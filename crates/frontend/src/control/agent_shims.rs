//! `tether agent`'s own shims directories, in the socket directory (ours, 0700): each named
//! for the process that made it, `agent-shims-<pid>-<start ticks>`. Its maker removes it when
//! the agent is done; one whose maker was killed (SIGKILL leaves no chance to) is removed by
//! the next tether that starts and finds that process gone, as a killed broker's journal
//! link is taken up (`supervisor::abandoned`).

use std::path::{Path, PathBuf};

use tether_protocol::protocol::BrokerIdentity;

const PREFIX: &str = "agent-shims-";

/// The name of the shims directory made by the process `owner`.
pub fn dir_name(owner: &BrokerIdentity) -> String {
    format!("{PREFIX}{}", owner.label())
}

/// The process a shims directory's name names; `None` for any other name.
fn owner(name: &str) -> Option<BrokerIdentity> {
    BrokerIdentity::from_label(name.strip_prefix(PREFIX)?)
}

/// Among the socket directory's entry `names`, the shims directories whose maker no longer
/// runs (gone, a zombie, or its pid taken by a later process): one `/proc` read each, none
/// for a directory holding no such name.
pub fn abandoned(dir: &Path, names: &[String]) -> Vec<PathBuf> {
    names
        .iter()
        .filter(|name| owner(name).is_some_and(|owner| !super::broker_alive(&owner)))
        .map(|name| dir.join(name))
        .collect()
}

/// Removes the shims directories `dirs` (links and all; a link in their place is removed as a
/// link, never followed).
pub fn remove(dirs: &[PathBuf]) {
    for dir in dirs {
        let _ = std::fs::remove_dir_all(dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_names_its_maker() {
        let maker = BrokerIdentity {
            pid: 4242,
            start_ticks: 99,
        };
        assert_eq!(dir_name(&maker), "agent-shims-4242-99");
        assert_eq!(owner("agent-shims-4242-99"), Some(maker));
        for other in [
            "4242-99.journal",
            "agent-shims-4242",
            "agent-shims-x-1",
            "agent-shims-1-2-3",
        ] {
            assert_eq!(owner(other), None, "{other}");
        }
    }

    #[test]
    fn only_the_directories_of_gone_makers_are_abandoned() {
        let me = tether_os::procfs::read_stat(std::process::id() as i32).expect("our stat");
        let alive = dir_name(&BrokerIdentity {
            pid: me.pid,
            start_ticks: me.start_ticks,
        });
        // The same pid started at another time is another process: ours is gone.
        let reused = dir_name(&BrokerIdentity {
            pid: me.pid,
            start_ticks: me.start_ticks + 1,
        });
        let names = [alive, reused.clone(), "1-2.journal".to_string()];
        assert_eq!(
            abandoned(Path::new("/run/t"), &names),
            [Path::new("/run/t").join(reused)]
        );
    }
}
