//! When a command needs the operator, decided from what the broker already sees: samples of
//! the tree (taken on the tree's own schedule), the moments it wrote, and its end. Pure: time
//! comes in with each call, and what it decides comes out as events, once per episode.

use std::collections::HashMap;
use std::time::Duration;

use std::time::Instant;

use super::agent_wait::AgentWait;
use crate::protocol::{AttentionKind, AttentionRequest, Budget, EventKind, ExitStatus};
use crate::units::{duration, format_size};

/// A tree at or above this share of one core is busy.
const BUSY_SHARE: f64 = 0.9;
/// Below this share it is idle (a timer tick or two is not work).
const IDLE_SHARE: f64 = 0.02;
/// A process first seen blocked on input is looked at again this much later, to be sure it
/// did not read in between (a loop of short reads is seen blocked at any one moment).
pub const CONFIRM_GAP: Duration = Duration::from_millis(500);

/// How an agent's `needs_input` detail begins, and the words its row shows for it.
pub const WAITING_FOR_YOU: &str = "waiting for you";

/// What a blocked process is reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputKind {
    /// The pipe (or other file) the command was given as stdin.
    Pipe,
    /// The command's terminal.
    Terminal,
}

/// A process asleep in a read of the command's input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blocked {
    pub fd: i32,
    pub input: InputKind,
    /// `read`, `readv`, `pread64`...
    pub call: &'static str,
    /// Its program name, for the detail.
    pub program: String,
    /// Read system calls it made so far (`syscr` of /proc/PID/io), where readable: one that
    /// went up read in between.
    pub reads: Option<u64>,
}

/// One process as a sample saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessSample {
    pub pid: i32,
    pub start_ticks: u64,
    /// `utime + stime`, in clock ticks.
    pub cpu_ticks: u64,
    pub rss_bytes: u64,
    /// Nanoseconds its main thread ran or waited to run (`/proc/PID/schedstat`), where read:
    /// on a machine with more work than cores, a runaway that gets half a core still wants
    /// all of one.
    pub demand_ns: Option<u64>,
    pub blocked: Option<Blocked>,
    /// It is the broker of a command of the agent's that runs (an agent's sample only).
    pub runs_command: bool,
    /// It is a process of a command of the agent's: such a broker or anything below it (an
    /// agent's sample only). Not the agent's own work: left out of its CPU and memory, which
    /// a sandbox that keeps its commands in the agent's own cgroup and tree (Codex's) would
    /// otherwise count as the agent's, and flag the agent as the runaway its command is.
    pub of_command: bool,
}

/// One look at the tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sample {
    /// Its live processes now.
    Fresh(Vec<ProcessSample>),
    /// Nothing in the tree ran since the last look (the tree's own check, see
    /// `TreeRecorder::unchanged`): every process is where it was.
    Unchanged,
    /// A look was due and could not be had (a tree forked too fast to read in time).
    Missed,
}

/// How the command ended, for `failed` and `finished`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    Exited(ExitStatus),
    /// tether stopped it after its final line (`drain_on`): its work was done, as an exit 0.
    Drained,
    /// A budget's stop ended it: a failure, in the words every view has for it.
    OverBudget(Budget),
    /// Its watchdog stopped it (no output for this long).
    TimedOut {
        silent: Duration,
        status: ExitStatus,
    },
    SpawnFailed,
    /// The operator (or the agent, through the shim) stopped or signalled it: their own
    /// doing, never a failure to tell them about.
    ByHand,
    /// tether stopped it because what ran it ended (its front end, the agent whose session
    /// it was: a server left running is stopped with its session), or at a shutdown or a
    /// reclaim: the end of what ran it, told there if anywhere, not a failure of its own.
    WithWhatRanIt,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Waiting {
    pid: i32,
    start_ticks: u64,
    blocked: Blocked,
    /// When it was first seen so.
    seen: Instant,
    /// Seen again since with no read in between.
    confirmed: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RunawayCause {
    Cpu,
    Memory,
}

/// Each process's CPU readings at a sample, by pid and start time: (ticks used, nanoseconds
/// wanted).
type Readings = HashMap<(i32, u64), (u64, Option<u64>)>;

/// The decisions for one command.
#[derive(Debug)]
pub struct Detector {
    /// The thresholds, each `None` when off; `agent`: `needs_input` means the agent waits for
    /// its human (see [`Detector::sampled`]).
    thresholds: AttentionRequest,
    ticks_per_second: u64,
    started: Instant,
    last_output: Instant,
    /// The last sample: when, and each process's CPU reading then.
    last_sample: Option<(Instant, Readings)>,
    /// The last look, had or missed: no deadline is ever before it.
    looked_at: Option<Instant>,
    /// The last tree's resident memory.
    rss_bytes: u64,
    waiting: Option<Waiting>,
    /// The start of the run of busy (idle) intervals the tree is in.
    busy_since: Option<Instant>,
    idle_since: Option<Instant>,
    needs_input: bool,
    /// An agent's wait for its human, when the command is one.
    agent: Option<AgentWait>,
    quiet: bool,
    runaway: Option<RunawayCause>,
    ended: bool,
    out: Vec<EventKind>,
}

impl Detector {
    pub fn new(thresholds: AttentionRequest, ticks_per_second: u64, started: Instant) -> Detector {
        let agent = (thresholds.input_after)
            .filter(|_| thresholds.agent)
            .map(|after| AgentWait::new(after, started));
        Detector {
            thresholds,
            ticks_per_second: ticks_per_second.max(1),
            started,
            last_output: started,
            last_sample: None,
            looked_at: None,
            rss_bytes: 0,
            waiting: None,
            busy_since: None,
            idle_since: None,
            needs_input: false,
            agent,
            quiet: false,
            runaway: None,
            ended: false,
            out: Vec::new(),
        }
    }

    /// What samples should read beyond the walk: which processes are blocked on input (a
    /// read of `/proc/PID/syscall` per sleeping process), how much CPU each wanted (one of
    /// `/proc/PID/schedstat` per process).
    pub fn wants(&self) -> super::inputs::Looks {
        super::inputs::Looks {
            blocked: self.thresholds.input_after.is_some()
                && !self.ended
                && !(self.thresholds.agent && self.needs_input),
            demand: self.thresholds.runaway_after.is_some() && !self.ended,
            waiting: match &self.agent {
                Some(agent) => agent.waiting_pid(),
                None => self.waiting.as_ref().map(|w| w.pid),
            },
            agent: self.thresholds.agent,
        }
    }

    /// The events decided since the last call.
    pub fn take(&mut self) -> Vec<EventKind> {
        std::mem::take(&mut self.out)
    }

    /// The command wrote: it is not waiting, nor quiet.
    pub fn output(&mut self, at: Instant) {
        self.last_output = at;
        if let Some(agent) = self.agent.as_mut() {
            agent.output(at);
        }
        // A prompt written and then waited on is a new episode, confirmed afresh.
        self.waiting = None;
        self.clear(AttentionKind::NeedsInput);
        self.clear(AttentionKind::Quiet);
    }

    /// The operator typed into the command's terminal: whatever waited for them is answered.
    pub fn typed(&mut self, at: Instant) {
        if let Some(agent) = self.agent.as_mut() {
            agent.typed(at);
        }
        self.waiting = None;
        self.clear(AttentionKind::NeedsInput);
    }

    /// The agent said itself that it waits for its human (its own hook: a prompt for
    /// permission, an idle prompt): told at once, over as any other wait is.
    pub fn told_waiting(&mut self, what: &str) {
        if self.ended || self.needs_input {
            return;
        }
        self.needs_input = true;
        self.raise(
            AttentionKind::NeedsInput,
            format!("{WAITING_FOR_YOU}: {what}"),
        );
    }

    /// A look at the tree. For an agent, `needs_input` is "waiting for you": a thread of its
    /// waits on its terminal (a read, or a poll, epoll or select set that holds it), no
    /// command of its runs in the foreground (one it wrote after is in the background), and
    /// for `input_after` it wrote nothing, used no CPU (below 5 % of a core), started or
    /// ended no command and was typed nothing to.
    pub fn sampled(&mut self, at: Instant, sample: Sample) {
        if self.ended {
            return;
        }
        self.looked_at = Some(at);
        let previous = self.last_sample.as_ref().map(|(when, _)| *when);
        let share = match &sample {
            Sample::Fresh(processes) => self.cpu_share(at, processes),
            Sample::Unchanged => previous.map(|_| 0.0),
            Sample::Missed => None,
        };
        match &sample {
            Sample::Fresh(processes) => {
                let own = processes.iter().filter(|p| !p.of_command);
                self.rss_bytes = own.map(|p| p.rss_bytes).sum();
                let ticks = processes
                    .iter()
                    .map(|p| ((p.pid, p.start_ticks), (p.cpu_ticks, p.demand_ns)))
                    .collect();
                self.last_sample = Some((at, ticks));
                if let Some(agent) = self.agent.as_mut() {
                    if agent.look(at, processes) {
                        self.clear(AttentionKind::NeedsInput);
                    }
                } else {
                    self.look_for_waiting(at, processes);
                }
            }
            Sample::Unchanged => {
                if let Some((when, _)) = self.last_sample.as_mut() {
                    *when = at;
                }
                // Nothing ran: whoever was blocked on input did not read since.
                if let Some(waiting) = self.waiting.as_mut() {
                    waiting.confirmed = true;
                }
                // And a command that ran still runs.
                if let Some(agent) = self.agent.as_mut() {
                    agent.unchanged(at);
                }
            }
            Sample::Missed => return,
        }
        if let (Some(share), Some(from)) = (share, previous) {
            self.track_cpu(share, from);
            if let Some(agent) = self.agent.as_mut() {
                agent.interval(from, at, share);
            }
        }
        self.decide(at);
    }

    /// The tree's share of a core since the last sample; `None` for the first.
    fn cpu_share(&self, at: Instant, processes: &[ProcessSample]) -> Option<f64> {
        let (then, before) = self.last_sample.as_ref()?;
        let elapsed = at.saturating_duration_since(*then).as_secs_f64();
        if elapsed <= 0.0 {
            return None;
        }
        // A process new since then did all of its work since then; one gone took its
        // last interval with it (a lower bound, as every source of CPU time here is).
        let mut ticks = 0;
        let mut demand_ns = 0;
        for p in processes.iter().filter(|p| !p.of_command) {
            // New since: all its time is this interval's. Its demand counts only between two
            // readings (a process asleep at the last sample has none then).
            let (old_ticks, old_demand) = before
                .get(&(p.pid, p.start_ticks))
                .copied()
                .unwrap_or((0, Some(0)));
            ticks += p.cpu_ticks.saturating_sub(old_ticks);
            if let (Some(now), Some(then)) = (p.demand_ns, old_demand) {
                demand_ns += now.saturating_sub(then);
            }
        }
        let used = ticks as f64 / self.ticks_per_second as f64 / elapsed;
        let wanted = demand_ns as f64 / 1e9 / elapsed;
        Some(used.max(wanted))
    }

    /// `share` of a core was used over the interval that began at `start`.
    fn track_cpu(&mut self, share: f64, start: Instant) {
        if share >= BUSY_SHARE {
            self.busy_since = self.busy_since.or(Some(start));
        } else {
            self.busy_since = None;
        }
        if share < IDLE_SHARE {
            self.idle_since = self.idle_since.or(Some(start));
        } else {
            self.idle_since = None;
            self.clear(AttentionKind::Quiet);
        }
    }

    fn look_for_waiting(&mut self, at: Instant, processes: &[ProcessSample]) {
        let previous = self.waiting.take();
        let found = processes.iter().find_map(|p| {
            let blocked = p.blocked.as_ref()?;
            Some((p, blocked))
        });
        let Some((process, blocked)) = found else {
            self.clear(AttentionKind::NeedsInput);
            return;
        };
        let same = previous.as_ref().filter(|w| {
            w.pid == process.pid
                && w.start_ticks == process.start_ticks
                && w.blocked.fd == blocked.fd
                && w.blocked.reads == blocked.reads
        });
        self.waiting = Some(match same {
            Some(w) => Waiting {
                confirmed: true,
                ..w.clone()
            },
            None => {
                // It read since (or another process waits now): the episode, if one was
                // open, is over.
                self.clear(AttentionKind::NeedsInput);
                Waiting {
                    pid: process.pid,
                    start_ticks: process.start_ticks,
                    blocked: blocked.clone(),
                    seen: at,
                    confirmed: false,
                }
            }
        });
    }

    fn decide(&mut self, at: Instant) {
        let silent = at.saturating_duration_since(self.last_output);
        if let Some(agent) = self.agent.as_mut() {
            if let Some(detail) = agent.waits(at).filter(|_| !self.needs_input) {
                self.needs_input = true;
                self.raise(AttentionKind::NeedsInput, detail);
            }
        } else if let (Some(after), false, Some(waiting)) =
            (self.thresholds.input_after, self.needs_input, &self.waiting)
            && waiting.confirmed
            && silent >= after
        {
            let b = &waiting.blocked;
            let on = match b.input {
                InputKind::Pipe => "a pipe",
                InputKind::Terminal => "its terminal",
            };
            let detail = format!(
                "{} {}({}) blocked on {on}; no output for {}",
                b.program,
                b.call,
                b.fd,
                duration(silent)
            );
            self.needs_input = true;
            self.raise(AttentionKind::NeedsInput, detail);
        }
        if let (Some(after), false, Some(idle)) =
            (self.thresholds.quiet_after, self.quiet, self.idle_since)
            && silent >= after
            && at.saturating_duration_since(idle) >= after
        {
            self.quiet = true;
            let detail = format!("no output for {}, no CPU used", duration(silent));
            self.raise(AttentionKind::Quiet, detail);
        }
        let memory_over = self
            .thresholds
            .memory_above
            .filter(|limit| self.rss_bytes > *limit);
        let busy_for = self
            .busy_since
            .map(|since| at.saturating_duration_since(since));
        let cpu_over = self
            .thresholds
            .runaway_after
            .zip(busy_for)
            .filter(|(after, busy)| busy >= after)
            .map(|(_, busy)| busy);
        match self.runaway {
            None => {
                if let Some(limit) = memory_over {
                    self.runaway = Some(RunawayCause::Memory);
                    let detail = format!(
                        "memory {} above {}",
                        format_size(self.rss_bytes),
                        format_size(limit)
                    );
                    self.raise(AttentionKind::Runaway, detail);
                } else if let Some(busy) = cpu_over {
                    self.runaway = Some(RunawayCause::Cpu);
                    let detail = format!(
                        "at least {:.0}% of a core for {}",
                        BUSY_SHARE * 100.0,
                        duration(busy)
                    );
                    self.raise(AttentionKind::Runaway, detail);
                }
            }
            Some(RunawayCause::Memory) if memory_over.is_none() => {
                self.clear(AttentionKind::Runaway)
            }
            Some(RunawayCause::Cpu) if self.busy_since.is_none() => {
                self.clear(AttentionKind::Runaway)
            }
            Some(_) => {}
        }
    }

    /// The command ended: open episodes are over, and it `failed` or `finished`.
    pub fn exited(&mut self, at: Instant, ending: Ending) {
        if self.ended {
            return;
        }
        self.ended = true;
        self.clear(AttentionKind::NeedsInput);
        self.clear(AttentionKind::Quiet);
        self.clear(AttentionKind::Runaway);
        let ran = at.saturating_duration_since(self.started);
        let ran_text = duration(ran);
        let quick = (self.thresholds.failed_after).is_some_and(|after| ran < after);
        let long = (self.thresholds.finished_after).is_some_and(|after| ran >= after);
        let failed = |detail: String| Some((AttentionKind::Failed, detail));
        let told = match ending {
            Ending::ByHand | Ending::WithWhatRanIt => None,
            Ending::SpawnFailed => failed("could not start".to_string()),
            Ending::OverBudget(budget) => {
                failed(format!("{} after {ran_text}", budget.ended_words()))
            }
            Ending::TimedOut { silent, .. } => {
                failed(format!("timed out: no output for {}", duration(silent)))
            }
            // A drained run's work was done: told as an exit 0, whatever signal then stopped it.
            Ending::Drained | Ending::Exited(ExitStatus { code: Some(0), .. }) => {
                long.then(|| (AttentionKind::Finished, format!("exit 0 after {ran_text}")))
            }
            // A quick failure of an agent's command: its row says it, nobody is called.
            Ending::Exited(_) if quick => None,
            Ending::Exited(status) => match status.code {
                Some(code) => failed(format!("exit {code} after {ran_text}")),
                None => {
                    let name = crate::protocol::signal_label(status.signal.unwrap_or(0));
                    failed(format!("killed by {name} after {ran_text}"))
                }
            },
        };
        if let Some((attention, detail)) = told {
            self.raise(attention, detail);
        }
    }

    /// The next moment a threshold may be crossed, when a look at the tree then could tell:
    /// at most one wake-up per threshold, never one already past the last look.
    pub fn next_deadline(&self) -> Option<Instant> {
        if self.ended {
            return None;
        }
        let looked = self.looked_at;
        let mut next: Vec<Instant> = Vec::new();
        if let (Some(agent), false) = (&self.agent, self.needs_input) {
            next.extend(agent.deadline(looked));
        } else if let (Some(after), false, None) =
            (self.thresholds.input_after, self.needs_input, &self.agent)
        {
            let silent_at = self.last_output + after;
            match &self.waiting {
                Some(w) if !w.confirmed => next.push(silent_at.max(w.seen + CONFIRM_GAP)),
                _ => next.push(silent_at),
            }
        }
        if let (Some(after), false) = (self.thresholds.quiet_after, self.quiet) {
            let from = self
                .idle_since
                .map_or(self.last_output, |idle| idle.max(self.last_output));
            next.push(from + after);
        }
        if let (Some(after), None, Some(since)) =
            (self.thresholds.runaway_after, self.runaway, self.busy_since)
        {
            next.push(since + after);
        }
        next.into_iter()
            .filter(|at| looked.is_none_or(|looked| *at > looked))
            .min()
    }

    fn raise(&mut self, attention: AttentionKind, detail: String) {
        self.out.push(EventKind::Attention { attention, detail });
    }

    /// Ends the episode of `attention`, if one is open.
    fn clear(&mut self, attention: AttentionKind) {
        let open = match attention {
            AttentionKind::NeedsInput => std::mem::take(&mut self.needs_input),
            AttentionKind::Quiet => std::mem::take(&mut self.quiet),
            AttentionKind::Runaway => self.runaway.take().is_some(),
            AttentionKind::Failed | AttentionKind::Finished => false,
        };
        if open {
            self.out.push(EventKind::AttentionCleared { attention });
        }
    }
}
