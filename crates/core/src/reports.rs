//! What the broker's I/O layer reports back to its state machine, as data: a child reaped,
//! the input a terminal took, a look at the tree.

use crate::attention::detector::ProcessSample;
use crate::process::ProcStat;
use crate::protocol::{EventKind, ExitStatus};

/// One ended child, reaped: its pid, how it ended, and where it was (its process group and
/// session, read while it was still a zombie).
#[derive(Debug, Clone, PartialEq)]
pub struct Reaped {
    pub pid: i32,
    pub status: ExitStatus,
    pub place: Option<ProcStat>,
    /// For a process named as tether's own are (`tether-broker`, `tether-prune`), the
    /// cgroup it ended in (the path of its `0::` line). The broker of a shell call of an
    /// agent's that kept leftovers (re-parented here when its shell returned) and the
    /// retention run a shell call starts (a double fork) end outside the command's cgroup,
    /// where they moved themselves (`cgroup::Hierarchy::enter`).
    pub tether_cgroup: Option<String>,
}

/// What became of input the front end sent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InputTaken {
    pub bytes: u64,
    pub dropped: u64,
}

/// What one look at the tree found.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct TreeSample {
    /// The live processes the walk found; `None` when it was skipped (a quiet tree on the
    /// /proc walk whose processes did nothing since) or took too long (`missed`).
    pub processes: Option<Vec<ProcStat>>,
    /// The event to journal: a tree that changed, or the one `events_capped`.
    pub record: Option<EventKind>,
    /// The walk did not finish within its budget: nothing is known of the tree now (unlike
    /// a skipped walk, which knows nothing in it ran).
    pub missed: bool,
    /// What attention's probe found of each of `processes`, when the walk was asked for one
    /// (`Output::SampleTree`'s `probe`).
    pub probed: Option<Vec<ProcessSample>>,
}
