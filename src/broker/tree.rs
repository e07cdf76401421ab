//! Recording which processes made up the command's tree, whenever that set changes.

use std::collections::HashMap;

use super::signaller::{ProcessKey, key, live_descendants};
use crate::procfs::{self, ProcStat};
use crate::protocol::ProcessEntry;

#[derive(Default)]
pub struct TreeRecorder {
    last: Vec<ProcessKey>,
    argv: HashMap<ProcessKey, Vec<String>>,
}

impl TreeRecorder {
    /// Walks the broker's descendants; returns the tree when it differs from the last one
    /// returned. `group` is the command's process group, to mark escapees.
    pub fn sample(&mut self, broker_pid: i32, group: i32) -> Option<Vec<ProcessEntry>> {
        let procs = live_descendants(broker_pid);
        self.diff(&procs, group)
    }

    /// Returns an empty tree if the last one recorded was not empty.
    pub fn close(&mut self) -> Option<Vec<ProcessEntry>> {
        self.diff(&[], 0)
    }

    fn diff(&mut self, procs: &[ProcStat], group: i32) -> Option<Vec<ProcessEntry>> {
        let mut keys: Vec<ProcessKey> = procs.iter().map(key).collect();
        keys.sort_unstable();
        if keys == self.last {
            return None;
        }
        self.argv.retain(|k, _| keys.binary_search(k).is_ok());
        self.last = keys;
        let entries = procs
            .iter()
            .map(|p| ProcessEntry {
                pid: p.pid,
                ppid: p.ppid,
                pgid: p.pgid,
                argv: self
                    .argv
                    .entry(key(p))
                    .or_insert_with(|| procfs::cmdline(p.pid))
                    .clone(),
                start_ms: procfs::start_time_ms(p),
                escaped: p.pgid != group,
            })
            .collect();
        Some(entries)
    }
}
