//! Recording which processes made up the command's tree, whenever that set changes, within a
//! budget of journal bytes.
//!
//! A tree event lists every process, but carries a process's command line only the first time
//! the journal records that process, and again once it runs another (an exec): a command with
//! a huge argv that keeps forking would otherwise write its argv again every second (7 MB in
//! 6 s for a 1 MB argv). The events
//! together may take [`tree_budget`] bytes; past it one `events_capped` event says so and the
//! tree is no longer recorded, while lifecycle events still are.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};

use super::signaller::{ProcessKey, Walk, key};
use cost::SampledCost;
use tether_core::process::is_escaped;
use tether_os::procfs::{self, ProcStat, ProcessImage};
use tether_protocol::protocol::{CappedKind, EventKind, ProcessEntry, capped_argv};
use tether_protocol::units::format_size;

/// The least a journal's tree events may take, however small `--max-output` is: a few hundred
/// changes of a small tree, or a dozen processes with 4 KiB command lines.
pub const MIN_TREE_BUDGET: u64 = 64 << 10;
/// The most they may take, however large `--max-output` is: the tree is metadata, and a
/// post-mortem reads every event into memory; 64 MiB is hours of a tree that changes every
/// second.
pub const MAX_TREE_BUDGET: u64 = 64 << 20;

/// The longest one sample of the tree may take (a thousand processes take about 10 ms).
const SAMPLE_BUDGET: std::time::Duration = std::time::Duration::from_millis(50);

/// The longest one measurement of the tree's CPU time for `max_cpu` may take on the /proc
/// walk: as long as a sample of it.
pub const CPU_MEASURE_BUDGET: std::time::Duration = SAMPLE_BUDGET;

/// What a journal line adds to an event's own JSON: `{"ts_ms":…,"mono_us":…,` and the
/// newline, with room for any timestamp.
const LINE_OVERHEAD: u64 = 64;

/// The bytes a journal's tree events may take: the journal cap the operator chose
/// for output (`max_output`), which says how much they are prepared to store for a command,
/// kept within [`MIN_TREE_BUDGET`, `MAX_TREE_BUDGET`].
pub fn tree_budget(max_output: u64) -> u64 {
    max_output.clamp(MIN_TREE_BUDGET, MAX_TREE_BUDGET)
}

/// The longest a quiet tree on the /proc walk goes without a full walk: the safety net for a
/// new process that its parent's counters did not show (a kernel without schedstat, where a
/// vfork within one clock tick of CPU moves none of the others).
pub const SAFETY_WALK: std::time::Duration = std::time::Duration::from_secs(300);

pub use tether_core::reports::TreeSample;

/// What the journal holds of one process.
#[derive(Debug, Clone, Copy)]
struct Recorded {
    /// Its start time as first recorded: a process's identity in the journal (pid and start
    /// time) never shifts by a millisecond between events.
    start_ms: u64,
    /// A hash of the command line recorded last; `None` while none was read (the walk's
    /// deadline had passed, or the process was a zombie, whose command line reads empty),
    /// which is read again in the next tree recorded.
    argv: Option<u64>,
    /// The program it ran when that command line was read: once it runs another (an exec:
    /// same pid, same start time), its command line is read again and, if it changed,
    /// recorded again.
    image: ProcessImage,
}

impl Recorded {
    /// Whether `process` (this one, by its key) runs another program than the one its
    /// recorded command line was read from. A zombie's image is empty: it ran nothing new.
    fn execed(&self, process: &ProcStat) -> bool {
        self.argv.is_some() && !process.is_zombie() && self.image != process.image
    }
}

fn argv_hash(argv: &[String]) -> u64 {
    let mut hasher = DefaultHasher::new();
    argv.hash(&mut hasher);
    hasher.finish()
}

#[derive(Default)]
pub struct TreeRecorder {
    /// The processes of the last tree recorded.
    last: Vec<ProcessKey>,
    /// What the journal holds of each process of the last tree; a process that left the
    /// tree cannot come back under the same key, so it is forgotten.
    recorded: HashMap<ProcessKey, Recorded>,
    budget: u64,
    /// Bytes the tree events recorded so far take in the journal.
    used: u64,
    capped: bool,
    /// What each process of the last full walk had done by then, and when it ran: see
    /// [`TreeRecorder::unchanged`].
    marks: Vec<(i32, procfs::Activity)>,
    walked_at: Option<std::time::Instant>,
    /// What the samples saw the tree use.
    cost: SampledCost,
}

impl TreeRecorder {
    pub fn new(budget: u64) -> TreeRecorder {
        TreeRecorder {
            budget,
            ..TreeRecorder::default()
        }
    }

    /// What the samples so far saw the tree use.
    pub fn cost(&self) -> &SampledCost {
        &self.cost
    }

    /// Whether the processes of the last walk are all still there and have done nothing
    /// since (no fault, no CPU time, no thread, no scheduling: see [`procfs::Activity`]), so
    /// that none of them can have forked and the tree is the same: a few small reads instead
    /// of a walk of all of /proc. False when nothing is known (no walk yet, or one that
    /// found nothing), or when the last walk is older than `longest`.
    pub fn unchanged(&self, longest: std::time::Duration) -> bool {
        !self.marks.is_empty()
            && self.walked_at.is_some_and(|at| at.elapsed() < longest)
            && self
                .marks
                .iter()
                .all(|(pid, then)| procfs::activity(*pid).as_ref() == Some(then))
    }

    /// Takes the command's processes (its cgroup's members, or the broker's descendants);
    /// returns the event to record when the tree differs from the last one recorded. `group`
    /// is the command's process group, to mark escapees.
    ///
    /// A sample that would take more than [`SAMPLE_BUDGET`] is dropped (nothing recorded,
    /// as if nothing changed): the broker's loop must stay free for a stop, and a tree being
    /// forked as fast as it can is not one a record would keep up with anyway. Command lines
    /// not read within the budget are left out of the record.
    ///
    /// Once the record is capped the tree is still walked, for what the broker keeps of it
    /// (the processes a stop starts with, what attention looks at, the cost figures), and
    /// nothing more is recorded.
    pub fn sample(&mut self, walk: &Walk, group: i32) -> TreeSample {
        let deadline = std::time::Instant::now() + SAMPLE_BUDGET;
        let Some(procs) = walk.live_until(deadline) else {
            return TreeSample {
                missed: true,
                ..TreeSample::default()
            };
        };
        self.cost.sampled(&procs);
        // What the /proc path needs to skip its next walks (the broker keeps the processes, to
        // start a stop without one); a cgroup's members are read at the cost of the tree
        // alone.
        if walk.cgroup().is_none() {
            self.remember_walk(&procs);
        }
        if self.capped {
            return TreeSample {
                processes: Some(procs),
                ..TreeSample::default()
            };
        }
        let record = self.update(&procs, group, |p| {
            let argv = if std::time::Instant::now() < deadline {
                procfs::cmdline(p.pid)
            } else {
                Vec::new()
            };
            (argv, procfs::start_time_ms(p))
        });
        TreeSample {
            processes: Some(procs),
            record,
            ..TreeSample::default()
        }
    }

    /// Whether the tree on the /proc walk did nothing since `at`: the last full walk came
    /// before it and none of that walk's processes did anything since (see
    /// [`TreeRecorder::unchanged`]), so its CPU time is what it was at `at`.
    pub fn quiet_since(&self, at: std::time::Instant) -> bool {
        self.walked_at.is_some_and(|walked| walked <= at) && self.unchanged(SAFETY_WALK)
    }

    /// A look at the tree for its record: skipped when `may_skip` (a quiet tree on the /proc
    /// walk) and the last walk's processes did nothing since, else [`TreeRecorder::sample`].
    pub fn look(&mut self, walk: &Walk, group: i32, may_skip: bool) -> TreeSample {
        if may_skip && self.unchanged(SAFETY_WALK) {
            return TreeSample::default();
        }
        self.sample(walk, group)
    }

    /// Keeps what `procs`, a full walk, found and what each process had done by then.
    fn remember_walk(&mut self, procs: &[ProcStat]) {
        let marks: Vec<(i32, procfs::Activity)> = procs
            .iter()
            .filter_map(|p| {
                let activity = procfs::activity(p.pid)?;
                (activity.start_ticks == p.start_ticks).then_some((p.pid, activity))
            })
            .collect();
        // One that ended meanwhile: the tree is changing, the next look walks again.
        self.marks = if marks.len() == procs.len() {
            marks
        } else {
            Vec::new()
        };
        self.walked_at = Some(std::time::Instant::now());
    }

    /// Returns an empty tree if the last one recorded was not empty.
    pub fn close(&mut self) -> Option<EventKind> {
        self.update(&[], 0, |_| (Vec::new(), 0))
    }

    /// The event that records `procs`: a tree if it changed (a process came or went, or one
    /// runs a new command line) and fits the budget, the one `events_capped` if it does not,
    /// then nothing. `details` reads the argv and start time of a process recorded for the
    /// first time, or whose program changed.
    fn update(
        &mut self,
        procs: &[ProcStat],
        group: i32,
        mut details: impl FnMut(&ProcStat) -> (Vec<String>, u64),
    ) -> Option<EventKind> {
        if self.capped {
            return None;
        }
        let mut keys: Vec<ProcessKey> = procs.iter().map(key).collect();
        keys.sort_unstable();
        let execed = |p: &ProcStat| self.recorded.get(&key(p)).is_some_and(|r| r.execed(p));
        let same_set = keys == self.last;
        if same_set && !procs.iter().any(execed) {
            return None;
        }
        self.recorded.retain(|k, _| keys.binary_search(k).is_ok());
        self.last = keys;
        let mut argv_changed = false;
        let processes: Vec<ProcessEntry> = procs
            .iter()
            .map(|p| {
                let known = self.recorded.get(&key(p)).copied();
                let (argv, start_ms) = match known {
                    Some(recorded) if recorded.argv.is_some() && !recorded.execed(p) => {
                        (Vec::new(), recorded.start_ms)
                    }
                    // New, an argv not read yet, or another program: read; the start time,
                    // once recorded, is kept.
                    _ => {
                        let (argv, read_start_ms) = details(p);
                        let start_ms = known.map_or(read_start_ms, |r| r.start_ms);
                        let argv = capped_argv(argv);
                        let recorded = self.record_argv(p, known, start_ms, &argv);
                        argv_changed |= recorded;
                        (if recorded { argv } else { Vec::new() }, start_ms)
                    }
                };
                ProcessEntry {
                    pid: p.pid,
                    ppid: p.ppid,
                    pgid: p.pgid,
                    argv,
                    start_ms,
                    escaped: is_escaped(p, group),
                }
            })
            .collect();
        // An exec whose command line could not be read, or reads as before (a program that
        // renamed itself): nothing the last tree did not say.
        if same_set && !argv_changed {
            return None;
        }
        let tree = EventKind::Tree { processes };
        let size = serde_json::to_vec(&tree).map_or(0, |json| json.len() as u64) + LINE_OVERHEAD;
        if self.used + size <= self.budget {
            self.used += size;
            return Some(tree);
        }
        self.capped = true;
        Some(EventKind::EventsCapped {
            kind_capped: CappedKind::Tree,
            budget: self.budget,
            message: capped_message(self.budget),
        })
    }

    /// Keeps what the journal holds of `process` now that `argv` was read (empty: it could
    /// not be), and says whether the tree lists that argv: a process seen for the first time
    /// with whatever was read, a known one only with a command line the journal does not
    /// hold yet. An argv not read keeps the image it was last read from, so that it is read
    /// again at the next tree.
    fn record_argv(
        &mut self,
        process: &ProcStat,
        known: Option<Recorded>,
        start_ms: u64,
        argv: &[String],
    ) -> bool {
        let hash = (!argv.is_empty()).then(|| argv_hash(argv));
        let before = known.and_then(|r| r.argv);
        let image = match (hash, known) {
            (None, Some(known)) => known.image,
            _ => process.image,
        };
        self.recorded.insert(
            key(process),
            Recorded {
                start_ms,
                argv: hash.or(before),
                image,
            },
        );
        known.is_none() || (hash.is_some() && hash != before)
    }
}

fn capped_message(budget: u64) -> String {
    let raise = if budget < MAX_TREE_BUDGET {
        format!(
            "raise --max-output above {} to record more (up to {})",
            format_size(budget),
            format_size(MAX_TREE_BUDGET)
        )
    } else {
        "this is the most tether records".to_string()
    };
    format!(
        "events.jsonl no longer records the process tree: tree events reached their budget of \
         {} for this run; signals, exits and reaped orphans are still recorded; {raise}",
        format_size(budget)
    )
}

pub mod cost;

#[cfg(test)]
mod tests;
