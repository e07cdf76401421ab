//! The launcher of `tether run`: when each command of a `tether.toml` starts, waits, fails
//! for a dependency, restarts, and in which order a set of them stops. A sans-IO machine in
//! the shape of the broker's ([`crate::state`]): what happened goes in with `now`
//! ([`Launcher::handle`]), what to do comes out ([`Launcher::poll_action`]), and the
//! driver wakes it at [`Launcher::poll_timeout`]. It never reads a clock and never starts a
//! process: the TUI's runner launches, stops and reports as it is told.
//!
//! The rules, as docs/configuration.md tells them to users:
//! - `depends_on`: a command starts once each condition holds (`started`: its dependency
//!   was spawned; `ready`: its readiness check passed; `succeeded`: it exited 0 on its own).
//!   It fails, never starts, once one can no longer hold, unless a restart of that ended
//!   dependency is still to come: a waiter outlives a transient failure. A dependency that
//!   runs on not ready fails its waiters (no restart comes of that). A failed waiter waits
//!   again once its dependency starts again.
//! - `restart`: after an exit that the policy covers, the command starts again after a
//!   delay that doubles from `restart_backoff` up to [`BACKOFF_CAP`], at most
//!   `max_restarts` times in a row; a run that lasted [`RESET_AFTER`] starts the count and
//!   the delay again (as supervisord's `startsecs`). A stop by the operator or by quitting
//!   never restarts. A restart waits for `depends_on` as the first start did.
//! - `restart_on_change`: a changed file restarts the command [`DEBOUNCE`] after the last
//!   change, whatever its policy, unless the operator stopped it (until they start it
//!   again); the operator's stop wins over a change's restart under way.
//! - `ordered_shutdown`: stopping a command stops what depends on it first (and calls off
//!   their waits and restarts to come), and quitting stops dependents before what they
//!   depend on.

mod glob;
mod graph;

use std::collections::VecDeque;
use std::time::{Duration, Instant};

pub use glob::GlobSet;
pub use graph::{find_cycle, with_dependents};

/// Changes closer together than this are one: an editor's save, a build's many files.
pub const DEBOUNCE: Duration = Duration::from_millis(300);
/// A run at least this long was not a crash loop: the next restart waits the first delay
/// again and counts from zero.
pub const RESET_AFTER: Duration = Duration::from_secs(10);
/// The longest wait between two restarts.
pub const BACKOFF_CAP: Duration = Duration::from_secs(30);
/// The first wait before a restart, unless `restart_backoff` says otherwise.
pub const DEFAULT_BACKOFF: Duration = Duration::from_secs(1);
/// Restarts in a row before the launcher gives up, unless `max_restarts` says otherwise.
pub const DEFAULT_MAX_RESTARTS: u32 = 5;

/// What a dependent waits for of a dependency.
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::EnumString)]
#[strum(serialize_all = "snake_case")]
pub enum Condition {
    /// It was spawned.
    Started,
    /// Its readiness check passed (its `ready` event).
    Ready,
    /// It exited 0.
    Succeeded,
}

impl Condition {
    pub const WORDS: &'static str = "\"started\", \"ready\" or \"succeeded\"";

    pub fn parse(word: &str) -> Option<Condition> {
        word.parse().ok()
    }
}

/// When a command that ended starts again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, strum::EnumString)]
#[strum(serialize_all = "kebab-case")]
pub enum Restart {
    #[default]
    No,
    OnFailure,
    Always,
}

impl Restart {
    pub const WORDS: &'static str = "\"no\", \"on-failure\" or \"always\"";

    pub fn parse(word: &str) -> Option<Restart> {
        word.parse().ok()
    }
}

/// One command as the launcher needs it: plain data, read from the config by the front end.
#[derive(Debug, Clone, PartialEq)]
pub struct CommandPlan {
    pub name: String,
    /// Started with the others at the beginning; otherwise only when the operator asks.
    pub autostart: bool,
    /// What it waits for, by the index of the dependency.
    pub depends_on: Vec<(usize, Condition)>,
    pub restart: Restart,
    pub max_restarts: u32,
    /// The first wait before a restart; each one after it doubles, up to [`BACKOFF_CAP`].
    pub backoff: Duration,
}

impl CommandPlan {
    /// Started at once, depending on nothing, never restarted.
    pub fn new(name: impl Into<String>) -> CommandPlan {
        CommandPlan {
            name: name.into(),
            autostart: true,
            depends_on: Vec::new(),
            restart: Restart::No,
            max_restarts: DEFAULT_MAX_RESTARTS,
            backoff: DEFAULT_BACKOFF,
        }
    }
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    Exited {
        /// It did its work: it exited 0, or it was stopped after its final line
        /// (`drain_on`). Never a run the operator stopped, whatever its code.
        done: bool,
        /// The operator stopped it or signalled it (s, t, k): not a failure to restart from.
        by_operator: bool,
        /// The words every view names this ending with (`exit 1`, `killed (SIGKILL)`,
        /// `stopped (SIGTERM)`, `finished`): the driver's, so that what the launcher says
        /// reads as the list does.
        words: String,
    },
    FailedToStart,
}

impl Ending {
    /// It exited 0 (or finished) on its own: `succeeded` holds.
    pub fn succeeded(&self) -> bool {
        matches!(
            self,
            Ending::Exited {
                done: true,
                by_operator: false,
                ..
            }
        )
    }

    /// Ended by a person's hand: no restart follows.
    pub fn by_operator(&self) -> bool {
        matches!(
            self,
            Ending::Exited {
                by_operator: true,
                ..
            }
        )
    }

    /// `web: exit 1`, `db: killed (SIGKILL)`, `db failed to start`.
    fn of(&self, name: &str) -> String {
        match self {
            Ending::Exited { words, .. } => format!("{name}: {words}"),
            Ending::FailedToStart => format!("{name} failed to start"),
        }
    }
}

/// What happened, as the driver saw it.
#[derive(Debug, Clone, PartialEq)]
pub enum Input {
    /// The session begins: every command with `autostart` is wanted.
    Begin,
    /// The operator started the command (`r`, or a command added by hand).
    Start(usize),
    /// The operator stopped it (`s`).
    Stop(usize),
    /// The current run's process was spawned.
    Spawned(usize),
    /// The current run's readiness check passed.
    Ready(usize),
    /// The current run's readiness check gave up after `after`.
    NotReady { command: usize, after: Duration },
    /// The current run ended.
    Ended { command: usize, how: Ending },
    /// A file that `restart_on_change` watches changed.
    FileChanged(usize),
    /// The operator quits: stop everything, start nothing more.
    Quit,
    /// [`Launcher::poll_timeout`] passed.
    Wake,
}

/// What the driver is to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Start run `run` of the command (1 for its first), in a fresh journal directory.
    Launch { command: usize, run: u32 },
    /// Run the command's stop sequence: the operator's stop, or quitting.
    Stop { command: usize },
    /// Run the command's stop sequence to start it again: a file that its
    /// `restart_on_change` watches changed (journaled as that, origin `file_changed`, so
    /// that the run does not read as stopped by the operator).
    Restart { command: usize },
    /// The command will not run (again) on its own: tell the operator why, as a failure.
    Fail { command: usize, reason: String },
    /// Tell the operator (a restart to come).
    Report { command: usize, text: String },
}

/// Where a command is, for its state in the list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State<'a> {
    /// Not started and not wanted (`autostart = false`), or stopped by the operator.
    Idle,
    /// Wanted; `on` is the first dependency whose condition does not hold yet, and
    /// `not_started` says that nothing will start it but the operator.
    Waiting { on: &'a str, not_started: bool },
    /// A run is under way (from its launch to its end).
    Running,
    /// A restart is due `at`, as run `run`.
    Restarting { at: Instant, run: u32 },
    /// It ran and will not run again on its own.
    Ended,
    /// It ended `restarts` restarts in a row and `max_restarts` allows no more.
    GaveUp { restarts: u32 },
    /// A dependency's condition can no longer hold: why.
    Blocked(&'a str),
}

#[derive(Debug, Clone, PartialEq)]
enum Phase {
    Idle,
    Waiting,
    Running,
    RestartDue(Instant),
    Ended,
    GaveUp,
    Blocked(String),
}

/// What the current (or last) run showed.
#[derive(Debug, Clone, Default)]
struct RunFacts {
    spawned: bool,
    ready: bool,
    not_ready: Option<Duration>,
    ended: Option<Ending>,
    started_at: Option<Instant>,
}

#[derive(Debug, Clone)]
struct Entry {
    plan: CommandPlan,
    run: u32,
    phase: Phase,
    facts: RunFacts,
    /// Restarts in a row, and the wait before the next one.
    restarts: u32,
    delay: Duration,
    /// The operator (or quitting) asked the current run to stop.
    stop_asked: bool,
    /// A stop that the launcher sent is under way (ordered shutdown, a file change).
    stop_sent: bool,
    /// The current run stops for a changed file: start it again once it ended.
    restart_after_stop: bool,
    change_due: Option<Instant>,
    /// The operator stopped it: a changed file does not start it again until the operator
    /// does.
    held: bool,
}

impl Entry {
    fn new(plan: CommandPlan) -> Entry {
        let delay = plan.backoff;
        Entry {
            plan,
            run: 0,
            phase: Phase::Idle,
            facts: RunFacts::default(),
            restarts: 0,
            delay,
            stop_asked: false,
            stop_sent: false,
            restart_after_stop: false,
            change_due: None,
            held: false,
        }
    }

    /// Calls off a restart for a changed file whose stop is under way, and returns whether
    /// there was one. Its stop then counts as not sent: the stop that replaces it (the
    /// operator's, the quit's) is sent, and the broker lets it take the change's over, so
    /// that the run ends as stopped, not restarted.
    fn call_off_change(&mut self) -> bool {
        let changing = std::mem::take(&mut self.restart_after_stop);
        if changing {
            self.stop_sent = false;
        }
        changing
    }
}

/// What a dependency's condition is for a waiter now.
enum Verdict {
    Holds,
    Wait,
    Never(String),
}

pub struct Launcher {
    entries: Vec<Entry>,
    actions: VecDeque<Action>,
    /// `ordered_shutdown`: dependents stop before what they depend on.
    ordered: bool,
    quitting: bool,
    /// Commands to stop in order, each once none of the others that depend on it runs.
    stopping: Vec<usize>,
}

impl Launcher {
    pub fn new(plans: Vec<CommandPlan>, ordered_shutdown: bool) -> Launcher {
        Launcher {
            entries: plans.into_iter().map(Entry::new).collect(),
            actions: VecDeque::new(),
            ordered: ordered_shutdown,
            quitting: false,
            stopping: Vec::new(),
        }
    }

    /// A command added while the session runs; its index.
    pub fn add(&mut self, plan: CommandPlan) -> usize {
        self.entries.push(Entry::new(plan));
        self.entries.len() - 1
    }

    pub fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    /// The next moment something is due: a restart, a debounced change.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.entries
            .iter()
            .flat_map(|e| {
                let restart = match e.phase {
                    Phase::RestartDue(at) => Some(at),
                    _ => None,
                };
                [restart, e.change_due]
            })
            .flatten()
            .min()
    }

    /// `ordered_shutdown`: stops go dependents first, one after another.
    pub fn ordered(&self) -> bool {
        self.ordered
    }

    /// A run of the command is under way, as far as the launcher knows.
    pub fn is_running(&self, command: usize) -> bool {
        self.entries
            .get(command)
            .is_some_and(|e| e.phase == Phase::Running)
    }

    /// The run the command is on (0 before its first).
    pub fn run(&self, command: usize) -> u32 {
        self.entries.get(command).map_or(0, |e| e.run)
    }

    pub fn state(&self, command: usize) -> State<'_> {
        let Some(entry) = self.entries.get(command) else {
            return State::Idle;
        };
        match &entry.phase {
            Phase::Idle => State::Idle,
            Phase::Waiting => match self.first_unmet(command) {
                Some(on) => State::Waiting {
                    on: &self.entries[on].plan.name,
                    not_started: self.entries[on].phase == Phase::Idle,
                },
                None => State::Running,
            },
            Phase::Running => State::Running,
            Phase::RestartDue(at) => State::Restarting {
                at: *at,
                run: entry.run + 1,
            },
            Phase::Ended => State::Ended,
            Phase::GaveUp => State::GaveUp {
                restarts: entry.restarts,
            },
            Phase::Blocked(why) => State::Blocked(why),
        }
    }

    pub fn handle(&mut self, input: Input, now: Instant) {
        match input {
            Input::Begin => {
                for i in 0..self.entries.len() {
                    if self.entries[i].plan.autostart && self.entries[i].phase == Phase::Idle {
                        self.entries[i].phase = Phase::Waiting;
                    }
                }
            }
            Input::Start(i) if !self.quitting => {
                if let Some(e) = self.entries.get_mut(i)
                    && e.phase != Phase::Running
                {
                    e.restarts = 0;
                    e.delay = e.plan.backoff;
                    e.held = false;
                    e.phase = Phase::Waiting;
                }
            }
            Input::Stop(i) => self.stop_by_operator(i),
            Input::Spawned(i) => self.with_run(i, |f| f.spawned = true),
            Input::Ready(i) => self.with_run(i, |f| f.ready = true),
            Input::NotReady { command, after } => {
                self.with_run(command, |f| f.not_ready = Some(after))
            }
            Input::Ended { command, how } => self.ended(command, how, now),
            Input::FileChanged(i) if !self.quitting => {
                if let Some(e) = self.entries.get_mut(i)
                    && !e.held
                    && !e.stop_asked
                {
                    e.change_due = Some(now + DEBOUNCE);
                }
            }
            Input::Quit => self.quit(),
            // Nothing starts or restarts once quitting.
            Input::Start(_) | Input::FileChanged(_) | Input::Wake => {}
        }
        self.due(now);
        self.settle(now);
        self.advance_stops();
    }

    fn with_run(&mut self, i: usize, change: impl FnOnce(&mut RunFacts)) {
        if let Some(e) = self.entries.get_mut(i)
            && e.phase == Phase::Running
        {
            change(&mut e.facts);
        }
    }

    fn launch(&mut self, i: usize, now: Instant) {
        let e = &mut self.entries[i];
        e.run += 1;
        e.phase = Phase::Running;
        e.facts = RunFacts {
            started_at: Some(now),
            ..RunFacts::default()
        };
        e.stop_asked = false;
        e.stop_sent = false;
        e.restart_after_stop = false;
        self.actions.push_back(Action::Launch {
            command: i,
            run: e.run,
        });
    }

    fn ended(&mut self, i: usize, how: Ending, now: Instant) {
        let Some(e) = self.entries.get_mut(i) else {
            return;
        };
        if e.phase != Phase::Running {
            return;
        }
        e.facts.ended = Some(how.clone());
        self.stopping.retain(|&s| s != i);
        // A stop the operator (or quitting) asked for wins over a change's restart, also one
        // that reached the broker by another way (`tether stop`, which takes over the
        // change's stop there); the change's own stop is told by `restart_after_stop`.
        if self.quitting || e.stop_asked {
            e.phase = Phase::Ended;
        } else if how.by_operator() {
            e.held = true;
            e.phase = Phase::Ended;
        } else if e.restart_after_stop {
            e.restarts = 0;
            e.delay = e.plan.backoff;
            e.phase = Phase::Waiting;
        }
        e.restart_after_stop = false;
        if e.phase != Phase::Running {
            return;
        }
        let lasted = e.facts.started_at.map_or(Duration::ZERO, |at| now - at);
        if lasted >= RESET_AFTER {
            e.restarts = 0;
            e.delay = e.plan.backoff;
        }
        let covered = match e.plan.restart {
            Restart::No => false,
            Restart::OnFailure => !how.succeeded(),
            Restart::Always => true,
        };
        if !covered {
            e.phase = Phase::Ended;
        } else if e.restarts >= e.plan.max_restarts {
            e.phase = Phase::GaveUp;
            let reason = format!("{} ({})", gave_up(e.restarts), how.of(&e.plan.name));
            self.actions.push_back(Action::Fail { command: i, reason });
        } else {
            e.restarts += 1;
            let wait = e.delay;
            e.delay = (e.delay * 2).min(BACKOFF_CAP.max(e.plan.backoff));
            e.phase = Phase::RestartDue(now + wait);
            let text = format!(
                "{}; restarting in {} (run {})",
                how.of(&e.plan.name),
                seconds(wait),
                e.run + 1
            );
            self.actions.push_back(Action::Report { command: i, text });
        }
    }

    fn stop_by_operator(&mut self, i: usize) {
        if i >= self.entries.len() {
            return;
        }
        if !self.ordered {
            if self.call_off(i) {
                self.actions.push_back(Action::Stop { command: i });
            }
            return;
        }
        let deps = self.depends_on();
        for j in with_dependents(i, &deps) {
            let changing = self.entries[j].restart_after_stop;
            if !self.call_off(j) {
                continue;
            }
            if changing {
                // Already stopping for its change: the order is moot, and the operator's
                // stop is sent at once to take that stop over.
                self.entries[j].stop_sent = true;
                self.actions.push_back(Action::Stop { command: j });
            } else if !self.stopping.contains(&j) {
                self.stopping.push(j);
            }
        }
    }

    /// Calls off what the command was to do: a wait, a restart to come, a change's restart,
    /// until the operator starts it again. True if a run is under way that is to stop and no
    /// stop was sent for it yet.
    fn call_off(&mut self, i: usize) -> bool {
        let e = &mut self.entries[i];
        e.held = true;
        e.change_due = None;
        e.call_off_change();
        match e.phase {
            Phase::Running => {
                e.stop_asked = true;
                !e.stop_sent
            }
            Phase::Waiting | Phase::RestartDue(_) | Phase::Blocked(_) => {
                e.phase = if e.run == 0 {
                    Phase::Idle
                } else {
                    Phase::Ended
                };
                false
            }
            _ => false,
        }
    }

    fn quit(&mut self) {
        self.quitting = true;
        for (i, e) in self.entries.iter_mut().enumerate() {
            e.change_due = None;
            // A run stopping for its change is stopped for the quit instead, at once.
            let changing = e.call_off_change();
            match e.phase {
                Phase::Waiting => e.phase = Phase::Idle,
                Phase::RestartDue(_) => e.phase = Phase::Ended,
                Phase::Running if !e.stop_sent => {
                    e.stop_asked = true;
                    if self.ordered && !changing {
                        if !self.stopping.contains(&i) {
                            self.stopping.push(i);
                        }
                    } else {
                        e.stop_sent = true;
                        self.actions.push_back(Action::Stop { command: i });
                    }
                }
                _ => {}
            }
        }
    }

    /// In an ordered stop, stops each command of `stopping` once nothing that depends on it
    /// is still running.
    fn advance_stops(&mut self) {
        let deps = self.depends_on();
        let running = |j: usize| self.entries[j].phase == Phase::Running;
        let ready: Vec<usize> = (self.stopping.iter().copied())
            .filter(|&j| !self.entries[j].stop_sent)
            .filter(|&j| !(0..self.entries.len()).any(|k| running(k) && deps[k].contains(&j)))
            .collect();
        for j in ready {
            self.entries[j].stop_sent = true;
            self.actions.push_back(Action::Stop { command: j });
        }
    }

    fn depends_on(&self) -> Vec<Vec<usize>> {
        (self.entries.iter())
            .map(|e| e.plan.depends_on.iter().map(|&(on, _)| on).collect())
            .collect()
    }

    /// Restarts and debounced changes whose time came. A start goes through `Waiting`, so
    /// that [`Self::settle`] holds it until its dependencies' conditions hold again.
    fn due(&mut self, now: Instant) {
        for (i, e) in self.entries.iter_mut().enumerate() {
            if let Phase::RestartDue(at) = e.phase
                && at <= now
            {
                e.phase = Phase::Waiting;
            }
            if e.change_due.is_some_and(|at| at <= now) {
                e.change_due = None;
                match e.phase {
                    Phase::Running if !e.stop_sent => {
                        e.restart_after_stop = true;
                        e.stop_sent = true;
                        self.actions.push_back(Action::Restart { command: i });
                    }
                    Phase::Ended | Phase::GaveUp | Phase::RestartDue(_) | Phase::Blocked(_) => {
                        e.restarts = 0;
                        e.delay = e.plan.backoff;
                        e.phase = Phase::Waiting;
                    }
                    _ => {}
                }
            }
        }
    }

    /// Starts the waiters whose conditions hold and fails those whose can no longer hold,
    /// until nothing changes (a failure makes its own waiters fail). A failed waiter whose
    /// dependencies could hold again (one was started again) goes back to waiting.
    fn settle(&mut self, now: Instant) {
        if self.quitting {
            return;
        }
        loop {
            let mut changed = false;
            for i in 0..self.entries.len() {
                let blocked = matches!(self.entries[i].phase, Phase::Blocked(_));
                if self.entries[i].phase != Phase::Waiting && !blocked {
                    continue;
                }
                let verdicts: Vec<Verdict> = (self.entries[i].plan.depends_on.iter())
                    .map(|&(on, condition)| self.verdict(on, condition))
                    .collect();
                let never = verdicts.iter().find_map(|v| match v {
                    Verdict::Never(reason) => Some(reason.clone()),
                    _ => None,
                });
                match never {
                    Some(_) if blocked => {}
                    Some(reason) => {
                        self.entries[i].phase = Phase::Blocked(reason.clone());
                        self.actions.push_back(Action::Fail { command: i, reason });
                        changed = true;
                    }
                    None if blocked => {
                        self.entries[i].phase = Phase::Waiting;
                        changed = true;
                    }
                    None if verdicts.iter().all(|v| matches!(v, Verdict::Holds)) => {
                        self.launch(i, now);
                        changed = true;
                    }
                    None => {}
                }
            }
            if !changed {
                return;
            }
        }
    }

    fn first_unmet(&self, i: usize) -> Option<usize> {
        (self.entries[i].plan.depends_on.iter())
            .find(|&&(on, condition)| !matches!(self.verdict(on, condition), Verdict::Holds))
            .map(|&(on, _)| on)
    }

    fn verdict(&self, on: usize, condition: Condition) -> Verdict {
        let Some(dep) = self.entries.get(on) else {
            return Verdict::Never(format!("command #{} does not exist", on + 1));
        };
        let name = &dep.plan.name;
        let facts = &dep.facts;
        let succeeded = facts.ended.as_ref().is_some_and(Ending::succeeded);
        match (&dep.phase, condition) {
            // Its last run exited 0: a restart to come (`restart = "always"`) does not undo it.
            (Phase::Idle | Phase::Waiting | Phase::RestartDue(_), Condition::Succeeded)
                if succeeded =>
            {
                Verdict::Holds
            }
            (Phase::Idle | Phase::Waiting | Phase::RestartDue(_), _) => Verdict::Wait,
            (Phase::Blocked(why), _) => Verdict::Never(format!("{name} did not start: {why}")),
            (Phase::Running, Condition::Started) if facts.spawned => Verdict::Holds,
            (Phase::Running, Condition::Ready) if facts.ready => Verdict::Holds,
            // It runs on, not ready: nothing will restart it, nor make it ready.
            (Phase::Running, Condition::Ready) => match facts.not_ready {
                Some(after) => {
                    Verdict::Never(format!("{name} was not ready within {}", seconds(after)))
                }
                None => Verdict::Wait,
            },
            (Phase::Running, _) => Verdict::Wait,
            (Phase::Ended | Phase::GaveUp, condition) => {
                let how = facts.ended.clone().unwrap_or(Ending::FailedToStart);
                match condition {
                    Condition::Started if facts.spawned => Verdict::Holds,
                    Condition::Succeeded if succeeded => Verdict::Holds,
                    Condition::Ready if how == Ending::FailedToStart => {
                        Verdict::Never(how.of(name))
                    }
                    Condition::Ready if facts.ready => {
                        Verdict::Never(format!("{} after it was ready", how.of(name)))
                    }
                    Condition::Ready => {
                        Verdict::Never(format!("{} before it was ready", how.of(name)))
                    }
                    _ => Verdict::Never(how.of(name)),
                }
            }
        }
    }
}

/// `gave up after 3 restarts`: how the launcher and the list say it gave up.
pub fn gave_up(restarts: u32) -> String {
    let s = if restarts == 1 { "" } else { "s" };
    format!("gave up after {restarts} restart{s}")
}

/// `2s`, `1.5s`, `300ms`.
pub fn seconds(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        format!("{ms}ms")
    } else if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}

#[cfg(test)]
mod tests;
