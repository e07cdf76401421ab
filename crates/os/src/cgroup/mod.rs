//! cgroup v2 containment: each command in a cgroup of its own, below this process's own
//! cgroup when we may write there. A cgroup holds whatever the command forks, however it
//! detaches (a double-forked `setsid` daemon included), lists its members without a walk of
//! `/proc`, is killed whole and at once with `cgroup.kill`, says when it is empty
//! (`cgroup.events`), accounts CPU time and memory, and takes limits.
//!
//! Nothing here knows the terminal or the broker: the broker's stop sequence signals through
//! a [`CommandCgroup`] (see `broker::signaller::Walk`), and tests point the code at a
//! directory of their own ([`Hierarchy::at`]).

mod command;
mod file;
mod hierarchy;
pub mod limits;
pub mod name;
pub mod stale;
mod watch;

use std::path::{Path, PathBuf};

use thiserror::Error;

pub use command::{CgroupStats, CommandCgroup};
pub use hierarchy::{CGROUP_ENV, Hierarchy, parse_own_cgroup};
pub use limits::Limits;
pub use watch::EventsWatch;

/// Why no cgroup v2 containment is possible: the reason the journal gives in
/// `containment: procfs (<reason>)`.
#[derive(Debug, Error)]
pub enum Unavailable {
    #[error("{CGROUP_ENV}=off")]
    Disabled,
    #[error("no cgroup v2 filesystem is mounted")]
    NoV2,
    #[error("this process is in no cgroup v2 hierarchy (no `0::` line in /proc/self/cgroup)")]
    NotInV2,
    #[error("the cgroup v2 filesystem at {} is mounted read-only", .0.display())]
    ReadOnly(PathBuf),
    #[error("our own cgroup was removed")]
    OwnCgroupDeleted,
    #[error("our cgroup {0} is outside the cgroup v2 mount")]
    OutsideMount(String),
    #[error("cannot read {what}: {reason}")]
    Unreadable { what: String, reason: String },
    #[error("cannot create cgroups in {}: {reason}", path.display())]
    NotWritable { path: PathBuf, reason: String },
    #[error(transparent)]
    Cgroup(#[from] CgroupError),
}

#[derive(Debug, Error)]
pub enum CgroupError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{} belongs to uid {owner}, not to us", path.display())]
    NotOurs { path: PathBuf, owner: u32 },
    #[error("{} is not a tether command cgroup", .0.display())]
    NotACommandCgroup(PathBuf),
    #[error("this kernel has no cgroup.kill (it came with Linux 5.14)")]
    NoKill,
}

impl CgroupError {
    fn io(path: &Path, source: std::io::Error) -> CgroupError {
        CgroupError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}
