//! What a broker killed together with its front end left running, stopped by a later tether.
//!
//! A broker SIGKILLed stops nothing; its front end, a subreaper, stops what it left (see
//! [`super::leftovers`]). Killed at the same instant, neither does: the command's main process
//! dies with the broker (`PR_SET_PDEATHSIG`), but what it forked runs on, re-parented to
//! init. Any tether that starts then looks, off its own path, for such commands:
//!
//! * found cheaply: the broker's link in the socket directory (`journal_link`), left behind
//!   by a killed broker, names the journal; nothing walks the sessions;
//! * provably abandoned: the link points at a private command directory of a state
//!   directory, the broker (pid and start time) is dead, the journal has no
//!   `result.json`, `command.json` names that broker, and nobody holds the journal's lock: a
//!   front end holds it while it looks after the command, so a live front end's own cleanup
//!   is never raced, and of two tethers starting at once one takes the command;
//! * stopped with the broker's [`StopSequence`]: TERM and CONT, the command's grace period
//!   (counted from the first TERM any later tether sent, so a run of short-lived tethers
//!   still gets to KILL), then KILL; over the command's cgroup when its journal names one
//!   (ending with `cgroup.kill`, then the cgroup removed), else over its process group and
//!   its descendants, the group signalled only while the kernel proves it the command's
//!   (pid and start time, the broker's session, dead with its broker: [`super::reclaim_proof`]);
//! * journaled in its `events.jsonl` (`signal_sent`, origin `reclaim`), then `result.json`
//!   is written so the command reads as ended, and the link is removed. The work is cut
//!   short when this process ends, but never between a signal and its line in the journal
//!   ([`settle`]): a later tether finds the processes it killed gone, and only the journal
//!   can say who killed them.

use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use nix::fcntl::AtFlags;
// rustix's flock: nix's is deprecated for a `Flock` that takes the descriptor over.
use rustix::fs::FlockOperation;
use std::time::Instant;

use super::intervals::KILL_PATIENCE;
use super::reclaim_proof;
use crate::control::{agent_shims, discover, journal_link, socket_dir};
use tether_broker::broker::signaller::Walk;
use tether_broker::broker::stop::{self, Delivery, Kernel as StopKernel, Settling};
use tether_os::cgroup::{CommandCgroup, name};
use tether_os::journal::JournalDir;
use tether_os::journal::bounded::{METADATA_LIMIT, read_bounded};
use tether_os::journal::secure::{open_dir_nofollow, open_regular_at};
use tether_os::journal::writer::{COMMAND_FILE, EVENTS_FILE, RESULT_FILE};
use tether_os::procfs::{self, ProcStat};
use tether_protocol::protocol::{
    BrokerIdentity, CommandFile, CommandResult, Event, EventKind, Failure, Origin, ProcessSignal,
    Scope, Stage,
};

/// Which signal a reclaim journaled for which pid: a sweep tells only of processes not
/// told of before for the same signal, as the broker's own stop reports them.
type Told = HashSet<(ProcessSignal, i32)>;

/// Held from a signal's line in the journal to the signal the reclaim sends after it;
/// taken for good by [`settle`].
static DELIVERING: Mutex<()> = Mutex::new(());

/// Waits for a signal being sent to be journaled, and keeps any other from being sent: for
/// a process about to end while its reclaim may be at work (an `exec` whose command ended).
/// Called more than once (by `exec`, then as the process exits), it waits only the first
/// time.
pub fn settle() {
    static SETTLED: AtomicBool = AtomicBool::new(false);
    if !SETTLED.swap(true, Ordering::SeqCst) {
        std::mem::forget(DELIVERING.lock().unwrap_or_else(PoisonError::into_inner));
    }
}

/// While the value lives, this process does not end (see [`settle`]).
fn delivering() -> MutexGuard<'static, ()> {
    DELIVERING.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A command whose broker and front end are gone, taken over by this process: its journal
/// stays locked until the value is dropped.
pub struct Abandoned {
    broker: BrokerIdentity,
    journal: JournalDir,
    file: CommandFile,
    events: Vec<Event>,
}

/// Finds the commands to stop and stops them, one after the other, on a thread of its own:
/// a tether's start does not wait for it. The work is cut short if this process ends first;
/// the next tether to start takes it up. The same thread removes the shims directories of
/// `tether agent`s that were killed ([`agent_shims`]). `None` when the socket directory
/// holds neither a broker's link nor such a directory: nothing to look at, no thread.
pub fn reclaim_in_background() -> Option<std::thread::JoinHandle<()>> {
    let dir = socket_dir::socket_dir();
    let names = socket_dir::entry_names(&dir);
    let links = journal_link::any_in(&names);
    let shims = agent_shims::abandoned(&dir, &names);
    if !links && shims.is_empty() {
        return None;
    }
    std::thread::Builder::new()
        .name("tether-reclaim".into())
        .spawn(move || {
            // Only in a directory fit for sockets (ours, private): what is there is ours.
            if !shims.is_empty() && socket_dir::check(&dir).is_ok() {
                agent_shims::remove(&shims);
            }
            if links {
                find().into_iter().for_each(Abandoned::stop);
            }
        })
        .ok()
}

/// The abandoned commands, each claimed. Links to journals that are complete, gone, or not
/// that broker's are removed on the way.
fn find() -> Vec<Abandoned> {
    journal_link::of_dead_brokers()
        .into_iter()
        .filter_map(|(broker, journal)| match claim(broker, &journal) {
            Claim::Taken(abandoned) => Some(*abandoned),
            Claim::Nothing => {
                journal_link::remove(&broker);
                None
            }
            Claim::Busy => None,
        })
        .collect()
}

enum Claim {
    Taken(Box<Abandoned>),
    /// Someone holds the journal: its front end, or another tether taking it over.
    Busy,
    /// Nothing to stop there: the link is of no more use.
    Nothing,
}

fn claim(broker: BrokerIdentity, journal: &Path) -> Claim {
    // A link is only a file: one pointing anywhere but at a private command directory of a
    // state directory is no broker's (see `reclaim_proof`).
    if !reclaim_proof::journal_in_place(journal) {
        return Claim::Nothing;
    }
    let Ok(fd) = open_dir_nofollow(journal) else {
        return Claim::Nothing;
    };
    if rustix::fs::flock(&fd, FlockOperation::NonBlockingLockExclusive).is_err() {
        return Claim::Busy;
    }
    // Ours, 0700 (as every journal directory), or not touched.
    let Ok(dir) = JournalDir::from_fd(fd, journal.to_path_buf()) else {
        return Claim::Nothing;
    };
    if nix::sys::stat::fstatat(&dir, RESULT_FILE, AtFlags::AT_SYMLINK_NOFOLLOW).is_ok() {
        return Claim::Nothing;
    }
    let file: Option<CommandFile> = open_regular_at(&dir, COMMAND_FILE)
        .ok()
        .filter(reclaim_proof::private_file)
        .and_then(|file| read_bounded(file, COMMAND_FILE, METADATA_LIMIT).ok())
        .and_then(|bytes| serde_json::from_slice(&bytes).ok());
    match file {
        Some(file) if file.broker == Some(broker) => Claim::Taken(Box::new(Abandoned {
            broker,
            events: discover::log_window(&journal.join(EVENTS_FILE)),
            journal: dir,
            file,
        })),
        _ => Claim::Nothing,
    }
}

/// A walk's root that no process descends from: the walk is its cgroup's or its list alone.
const NO_PROCESS: i32 = -1;

/// The members of the process group `pgid` and every descendant of theirs, from one walk of
/// /proc.
fn group_and_descendants(pgid: i32) -> Vec<ProcStat> {
    let all = procfs::all_processes();
    let family = procfs::Family::of(&all);
    let mut found: Vec<ProcStat> = all.iter().filter(|p| p.pgid == pgid).copied().collect();
    let below: Vec<ProcStat> = found
        .iter()
        .flat_map(|p| family.descendants(p.pid))
        .collect();
    found.extend(below);
    found.sort_unstable_by_key(|p| p.pid);
    found.dedup_by_key(|p| p.pid);
    found
}

impl Abandoned {
    /// The command's cgroup as its last `containment` event names it, else (a broker killed
    /// before that event reached the disk) the one in our hierarchy named after this broker;
    /// only a cgroup of this broker's (by its name) that still exists.
    fn cgroup(&self) -> Option<Arc<CommandCgroup>> {
        let journaled = self.events.iter().rev().find_map(|e| match &e.kind {
            EventKind::Containment { path, .. } => path.clone(),
            _ => None,
        });
        let path = journaled.or_else(|| self.named_cgroup())?;
        let owner = name::owner(path.file_name()?.to_str()?)?;
        if owner != self.broker {
            return None;
        }
        CommandCgroup::open_existing(&path).ok().map(Arc::new)
    }

    fn named_cgroup(&self) -> Option<PathBuf> {
        let hierarchy = tether_os::cgroup::Hierarchy::find().ok()?;
        std::fs::read_dir(hierarchy.path())
            .ok()?
            .flatten()
            .find(|entry| {
                entry
                    .file_name()
                    .to_str()
                    .and_then(name::owner)
                    .is_some_and(|o| o == self.broker)
            })
            .map(|entry| entry.path())
    }

    /// The command's pid and start time, from its `spawned` event.
    fn leader(&self) -> Option<(i32, u64)> {
        self.events.iter().find_map(|e| match e.kind {
            EventKind::Spawned {
                pid,
                pgid,
                start_ticks: Some(start),
                ..
            } if pid == pgid => Some((pid, start)),
            _ => None,
        })
    }

    /// The grace period still to give: the command's, less what passed since a later
    /// tether's first TERM to it.
    fn grace_left(&self) -> Duration {
        let grace = self.file.request.grace;
        let first_term = self.events.iter().find_map(|e| match &e.kind {
            EventKind::SignalSent {
                signal,
                origin: Origin::Reclaim,
                ..
            } if *signal == ProcessSignal::TERM => Some(e.ts_ms),
            _ => None,
        });
        match first_term {
            Some(at) => {
                let passed = Duration::from_millis(tether_os::clock::now_ms().saturating_sub(at));
                grace.saturating_sub(passed)
            }
            None => grace,
        }
    }

    /// Runs the stop sequence over what the command left, journals it, writes `result.json`
    /// and removes the broker's link (and its stale socket).
    pub fn stop(mut self) {
        let cgroup = self.cgroup();
        let leader = self.leader();
        let broker = self.broker;
        // Looked at again before each signal: while its leader is unreaped the group's id
        // cannot have been reused.
        let group = || reclaim_proof::proven_group(leader, &broker);
        if let Some(cgroup) = &cgroup {
            // A broker killed while it held the cgroup frozen (signalling it) left it so.
            let _ = cgroup.freeze(false);
        }
        // The cgroup's members; without one, the command's group (only while the kernel
        // proves it the command's) and what descends from its members, wherever they were
        // re-parented.
        let walk = || match &cgroup {
            Some(cgroup) => Walk::below(NO_PROCESS).in_cgroup(Some(cgroup.clone())),
            None => {
                Walk::below(NO_PROCESS).known(group().map_or_else(Vec::new, group_and_descendants))
            }
        };
        let populated = || {
            cgroup
                .as_ref()
                .is_some_and(|c| c.populated().unwrap_or(false))
        };
        // Counted with what an earlier tether's reclaim of it reached, as journaled.
        let mut reached: Vec<i32> = (self.events.iter())
            .flat_map(|e| match &e.kind {
                EventKind::SignalSent {
                    origin: Origin::Reclaim,
                    targets,
                    ..
                } => targets.clone(),
                _ => Vec::new(),
            })
            .collect();
        let grace = self.grace_left();
        let now = Instant::now();
        let mut told = Told::default();
        let (targets, proven) = (walk(), group());
        let pair = delivering();
        self.announce(ProcessSignal::TERM, &targets, &mut told);
        let (mut sequence, first) = stop::start(Origin::Reclaim, grace, targets, proven, now);
        self.journal_beyond(&first, &mut told, &mut reached);
        drop(pair);
        let mut killed_at = None;
        if grace.is_zero() {
            let (targets, proven) = (walk(), group());
            let pair = delivering();
            self.announce(ProcessSignal::KILL, &targets, &mut told);
            let kill = stop::escalate(&mut sequence, targets, proven, now);
            self.journal_beyond(&kill, &mut told, &mut reached);
            drop(pair);
            killed_at = Some(now);
        }
        let mut settling = Settling::default();
        let survivors = loop {
            std::thread::sleep(
                sequence
                    .next_wake()
                    .saturating_duration_since(Instant::now()),
            );
            let now = Instant::now();
            let (targets, proven) = (walk(), group());
            let pair = delivering();
            let signal = if killed_at.is_some() || sequence.kill_due(now) {
                ProcessSignal::KILL
            } else {
                ProcessSignal::TERM
            };
            self.announce(signal, &targets, &mut told);
            let (delivery, escalated) = sequence.step_with(&mut StopKernel, &targets, proven, now);
            if escalated {
                killed_at = Some(now);
            }
            if let Some(delivery) = delivery {
                self.journal_beyond(&delivery, &mut told, &mut reached);
            }
            drop(pair);
            let alive = walk().live().len();
            if let Some(survivors) =
                settling.settled(alive, populated(), killed_at, KILL_PATIENCE, now)
            {
                break survivors;
            }
        };
        if let Some(cgroup) = cgroup.as_ref().filter(|_| !populated()) {
            let _ = cgroup.remove();
        }
        if survivors == 0 {
            reached.sort_unstable();
            reached.dedup();
            self.write_result(leader.map(|(pid, _)| pid), reached.len());
            journal_link::remove(&self.broker);
            if let Some(socket) = &self.file.control_socket {
                socket_dir::remove_if_stale(socket);
            }
        }
    }

    /// Journals that `signal` goes to what `walk` holds now and was not told of for it
    /// before: the line goes before the signal, so that a tether killed between the two (a
    /// front end SIGKILLed as it reclaims) never leaves processes dead with nobody named; a
    /// line may then name a signal that never went, which the next tether sends. The
    /// cgroup's members are listed, not read one by one (a fork storm's thousands, before
    /// the signal that stops them). A journal that cannot be written stops nothing: the
    /// signal goes all the same (a command that put a FIFO in its log's place is stopped).
    fn announce(&mut self, signal: ProcessSignal, walk: &Walk, told: &mut Told) {
        let listed = match walk.cgroup() {
            Some(cgroup) => cgroup.members().unwrap_or_default(),
            None => walk.live().iter().map(|p| p.pid).collect(),
        };
        let pids: Vec<i32> = (listed.into_iter())
            .filter(|&pid| !told.contains(&(signal, pid)))
            .collect();
        self.journal_signal(signal, &pids, told);
    }

    /// Journals what `delivery` reached that was not announced for it (a process forked
    /// between the listing and the signal), and counts what it reached for `result.json`.
    fn journal_beyond(&mut self, delivery: &Delivery, told: &mut Told, reached: &mut Vec<i32>) {
        reached.extend(&delivery.targets);
        let beyond: Vec<i32> = (delivery.targets.iter().copied())
            .filter(|pid| !told.contains(&(delivery.signal, *pid)))
            .collect();
        self.journal_signal(delivery.signal, &beyond, told);
    }

    /// Appends a `signal_sent` of `signal` to `pids` (nothing when there are none).
    fn journal_signal(&mut self, signal: ProcessSignal, pids: &[i32], told: &mut Told) {
        if pids.is_empty() {
            return;
        }
        told.extend(pids.iter().map(|&pid| (signal, pid)));
        self.append(EventKind::SignalSent {
            signal,
            scope: Scope::Group,
            origin: Origin::Reclaim,
            targets: pids.to_vec(),
            client: None,
        });
    }

    /// Appends one event to the command's `events.jsonl` (never through a link), after a
    /// newline if the killed broker left a partial last line.
    fn append(&mut self, kind: EventKind) {
        let ts_ms = tether_os::clock::now_ms();
        // The broker's monotonic clock went with it: carried on from its last event.
        let mono_us = self.events.last().map_or(0, |last| {
            last.mono_us + ts_ms.saturating_sub(last.ts_ms).saturating_mul(1000)
        });
        let event = Event {
            ts_ms,
            mono_us,
            kind,
        };
        // A command may have put a FIFO in its log's place: never waited on.
        if let Ok(mut file) = self.journal.open_append(EVENTS_FILE) {
            let partial = file
                .metadata()
                .is_ok_and(|m| m.len() > 0 && !ends_in_newline(&self.journal, m.len()));
            let mut line = if partial { b"\n".to_vec() } else { Vec::new() };
            line.extend(event.to_line());
            let _ = file.write_all(&line);
        }
        self.events.push(event);
    }

    /// `result.json` for a command whose broker was killed: how it ended is unknown (no
    /// exit), a failure says so, and who stopped what it left.
    fn write_result(&self, pid: Option<i32>, reached: usize) {
        let started_ms = self.events.first().map_or(0, |e| e.ts_ms);
        let ended_ms = tether_os::clock::now_ms();
        let result = CommandResult {
            pid,
            failure: Some(Failure {
                stage: Stage::Internal,
                code: "broker_killed".into(),
                message: format!(
                    "the broker (pid {}) was killed with its front end; a later tether stopped what was left ({reached} processes)",
                    self.broker.pid
                ),
            }),
            started_ms,
            ended_ms,
            duration_ms: ended_ms.saturating_sub(started_ms),
            stopped_by: Some(Origin::Reclaim),
            ..CommandResult::default()
        };
        let _ = self.journal.write_json_atomic(RESULT_FILE, &result);
    }
}

/// Whether the file `events.jsonl` of `dir`, `len` bytes long, ends in a newline.
fn ends_in_newline(dir: &JournalDir, len: u64) -> bool {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut file) = tether_os::journal::secure::open_regular(&dir.path().join(EVENTS_FILE))
    else {
        return true;
    };
    let mut last = [0u8; 1];
    file.seek(SeekFrom::Start(len - 1)).is_ok()
        && file.read_exact(&mut last).is_ok()
        && last[0] == b'\n'
}
