//! The broker driven through whole lives with a fake kernel and a fake clock: no process is
//! started, no file written, no time waited. A [`Rig`] hands inputs to the broker, carries
//! out its outputs as the interpreter would (a journal of parsed events, the parent's lines,
//! the replies to control clients) and moves the clock to the broker's next deadline.

mod attention;
mod budgets;
mod cgroup;
mod copy;
mod custody;
mod lifecycle;
mod output;
mod ready;
mod requests;
mod stop;

use std::cell::RefCell;
use std::collections::{HashSet, VecDeque};
use std::rc::Rc;
use std::time::Duration;

use std::time::Instant;

use super::requests::{OperatorSignal, OperatorSignaller};
use super::{
    Broker, CgroupReleased, CgroupState, CommandNames, CopyProgress, Host, Input, Now, Output,
    Reaped, Sender,
};
use crate::attention::detector::ProcessSample;
use crate::cost::SampledCost;
use crate::process::ProcStat;
use crate::process::ProcessKey;
use crate::process::TreeWalk;
use crate::protocol::{
    CommandResult, CommandSpec, Event, EventKind, ExitStatus, LaunchRequest, PROTOCOL_VERSION,
    Peer, ProcessSignal, Request, StdinSource,
};
use crate::reports::TreeSample;
use crate::stop::TreeSignaller;

/// The command's pid in every test.
const CMD: i32 = 100;
/// The broker's own pid, the root of the fake tree.
const BROKER: i32 = 10;
/// The front end that launched the broker.
const PARENT: i32 = 7;
/// The fake notify keepers' pids are this plus the run's number.
const NOTIFY_KEEPER: i32 = 9000;

/// A request from the front end that launched the broker, on its pipe.
fn from_parent(request: Request) -> Input<'static> {
    Input::Request {
        from: Sender::Parent,
        request: Ok(request),
    }
}

/// The operator at a control client: `tether stop`, outside the command's tree.
fn operator() -> Peer {
    Peer {
        pid: 4242,
        uid: 1000,
        program: Some("tether stop".into()),
    }
}

/// A request from the operator's control client `client`.
fn from_client(client: u64, request: Request) -> Input<'static> {
    Input::Request {
        from: Sender::Client {
            client,
            peer: operator(),
            in_tree: false,
        },
        request: Ok(request),
    }
}

/// What a process of the fake tree does with TERM.
#[derive(Clone, Copy, PartialEq, Eq)]
enum OnTerm {
    Exit,
    Ignore,
}

/// The kernel as the fake sees it: the live processes of the command's tree (all children
/// of the broker here, as a subreaper's orphans are), the ended ones not reaped yet, and
/// every signal sent.
#[derive(Default)]
struct World {
    alive: Vec<(ProcStat, Option<OnTerm>)>,
    ended: VecDeque<(i32, ExitStatus)>,
    /// Each delivery: the signal and the pids it reached.
    sent: Vec<(ProcessSignal, Vec<i32>)>,
    /// Tree records the next walks return, in order.
    trees: VecDeque<EventKind>,
    walks: usize,
    wall_ms: u64,
    /// The command's cgroup as the fake kernel keeps it, when the test gives one.
    cgroup: Option<FakeCgroup>,
    /// What attention's probe finds a process blocked on, by pid (every other is running
    /// its course); each probe asked for, with what it looked for.
    blocked: Vec<(i32, crate::attention::detector::Blocked)>,
    probes: Vec<super::machine::Probe>,
    /// Processes of the tree that run commands of an agent (brokers of its shell calls).
    runs_command: Vec<i32>,
    /// The leftovers' listings asked for ([`Output::ListLeftovers`]).
    listings: usize,
    /// The tree's CPU time as a measurement finds it, and the measurements asked for
    /// ([`Output::MeasureCpu`]).
    cpu: Duration,
    cpu_measures: usize,
}

/// A command's cgroup in the fake kernel: every live process of the tree is in it unless it
/// was left out, it may be taken away, and its removal may be refused.
#[derive(Default)]
struct FakeCgroup {
    /// Processes that are not in it (the command that could not enter it).
    outside: Vec<i32>,
    /// Processes in it that are no children of the broker (nothing reaps them here).
    strangers: Vec<i32>,
    gone: bool,
    /// The error its removal gives, if it is refused.
    remove_fails: Option<std::io::ErrorKind>,
    cpu_usec: Option<u64>,
    memory_peak: Option<u64>,
    /// Removals asked for: `true` at the end (released), `false` abandoned mid-run.
    removals: Vec<bool>,
}

impl World {
    /// How the cgroup stands, as the interpreter reads it after each reaping.
    fn cgroup_state(&self) -> Option<CgroupState> {
        let cgroup = self.cgroup.as_ref()?;
        let populated = !cgroup.strangers.is_empty()
            || self
                .alive
                .iter()
                .any(|(p, _)| !cgroup.outside.contains(&p.pid));
        Some(if cgroup.gone {
            CgroupState::Gone
        } else if populated {
            CgroupState::Populated
        } else {
            CgroupState::Empty
        })
    }

    /// What a probe finds of the live processes: the blocked ones as set, the rest running.
    fn probe(&self, looks: crate::attention::inputs::Looks) -> Vec<ProcessSample> {
        self.alive
            .iter()
            .map(|(p, _)| ProcessSample {
                pid: p.pid,
                start_ticks: p.start_ticks,
                cpu_ticks: p.cpu_ticks,
                rss_bytes: p.rss_pages * 4096,
                demand_ns: None,
                blocked: self
                    .blocked
                    .iter()
                    .find(|(pid, _)| looks.blocked && *pid == p.pid)
                    .map(|(_, b)| b.clone()),
                runs_command: looks.agent && self.runs_command.contains(&p.pid),
                of_command: false,
            })
            .collect()
    }

    fn spawn(&mut self, pid: i32, on_term: OnTerm) {
        let stat = ProcStat {
            pid,
            ppid: BROKER,
            pgid: CMD,
            sid: BROKER,
            state: b'S',
            start_ticks: pid as u64,
            ..ProcStat::default()
        };
        self.alive.push((stat, Some(on_term)));
    }

    /// `pid` ends with `status` (and waits to be reaped).
    fn end(&mut self, pid: i32, status: ExitStatus) {
        self.alive.retain(|(p, _)| p.pid != pid);
        self.ended.push_back((pid, status));
    }

    fn deliver(&mut self, pid: i32, signal: ProcessSignal) {
        let on_term = self.alive.iter().find(|(p, _)| p.pid == pid).map(|p| p.1);
        let ends = match signal {
            ProcessSignal::KILL => true,
            ProcessSignal::TERM => on_term == Some(Some(OnTerm::Exit)),
            _ => false,
        };
        if ends {
            self.end(pid, killed_by(signal));
        }
    }

    fn pids(&self) -> Vec<i32> {
        self.alive.iter().map(|(p, _)| p.pid).collect()
    }
}

fn killed_by(signal: ProcessSignal) -> ExitStatus {
    ExitStatus {
        code: None,
        signal: Some(signal.number()),
        core_dumped: false,
    }
}

fn exited(code: i32) -> ExitStatus {
    ExitStatus {
        code: Some(code),
        signal: None,
        core_dumped: false,
    }
}

#[derive(Clone, Default)]
struct FakeKernel(Rc<RefCell<World>>);

impl TreeSignaller for FakeKernel {
    type Walk = TreeWalk;

    fn signal_tree(
        &mut self,
        _walk: &TreeWalk,
        _group: Option<i32>,
        signal: ProcessSignal,
        _also_cont: bool,
        already: &mut HashSet<ProcessKey>,
    ) -> Vec<i32> {
        let mut world = self.0.borrow_mut();
        let fresh: Vec<ProcStat> = world
            .alive
            .iter()
            .map(|(p, _)| *p)
            .filter(|p| !already.contains(&(p.pid, p.start_ticks)))
            .collect();
        let pids: Vec<i32> = fresh.iter().map(|p| p.pid).collect();
        for p in &fresh {
            already.insert((p.pid, p.start_ticks));
            world.deliver(p.pid, signal);
        }
        world.sent.push((signal, pids.clone()));
        pids
    }

    fn kill_all(&mut self, _walk: &TreeWalk) -> Option<Vec<ProcessKey>> {
        None
    }
}

impl OperatorSignaller for FakeKernel {
    fn signal_one(&mut self, _walk: &TreeWalk, pid: i32, signal: ProcessSignal) -> Option<bool> {
        let mut world = self.0.borrow_mut();
        world.alive.iter().find(|(p, _)| p.pid == pid)?;
        world.deliver(pid, signal);
        world.sent.push((signal, vec![pid]));
        Some(true)
    }
}

/// The broker's own facts in every test.
fn host() -> Host {
    Host {
        pid: BROKER,
        uid: 1000,
        parent_program: Some("front-end".into()),
        ticks_per_second: 100,
        page_size: 4096,
    }
}

/// Linux's errno values the fake kernel fails with (the core takes no libc).
const EIO: i32 = 5;
const ENOSPC: i32 = 28;

fn request() -> LaunchRequest {
    LaunchRequest {
        v: PROTOCOL_VERSION,
        name: "test".into(),
        command: CommandSpec::Argv(vec!["cmd".into()]),
        cwd: None,
        env: Default::default(),
        journal_dir: "/journal/01-test".into(),
        parent_pid: PARENT,
        caller_stand_in: false,
        grace: Duration::from_secs(1),
        no_output_timeout: None,
        drain_on: None,
        drain: None,
        max_output: 1 << 20,
        heartbeat: None,
        mirror: false,
        stdin: StdinSource::Null,
        session: None,
        arg0: None,
        terminal: None,
        merge_stderr: false,
        limits: Default::default(),
        leftovers: Default::default(),
        trace: None,
        trace_ignored: None,
        // Attention has tests of its own (`attention.rs`); elsewhere the journal holds what
        // each test is about.
        attention: crate::protocol::AttentionRequest {
            enabled: false,
            ..Default::default()
        },
        ready: None,
        budgets: Default::default(),
        run: 1,
    }
}

/// One journaled line, as the interpreter was asked to route it.
struct Line {
    event: Event,
    journal: bool,
    parent: bool,
    subscribers: bool,
}

/// A broker, its fake kernel and clock, and what it asked for.
struct Rig {
    broker: Broker,
    world: Rc<RefCell<World>>,
    t0: Instant,
    now: Instant,
    lines: Vec<Line>,
    /// `Store` outputs: stream and bytes kept.
    stored: Vec<(crate::protocol::Stream, usize)>,
    flushes: usize,
    /// Journal lines appended since the last flush.
    unflushed: usize,
    /// [`Rig::unflushed`] when `result.json` was asked for.
    unflushed_at_result: Option<usize>,
    /// The record the tree's close gives (none: the last one recorded was empty).
    closing_record: Option<EventKind>,
    replies: Vec<(u64, Event)>,
    subscribed: Vec<u64>,
    let_go: usize,
    /// The notify command as the fake runs it: the payloads it was given, the runs going
    /// (fake keeper pids), each [`Output::CheckNotify`]'s overdue runs, and whether a run
    /// cannot start.
    notified: Vec<Vec<u8>>,
    notify_running: Vec<i32>,
    notify_checks: Vec<Vec<i32>>,
    notify_unstartable: bool,
    wind_downs: usize,
    /// Each [`Output::Signal`]'s plan: its signal and whether CONT follows.
    plans: Vec<(ProcessSignal, bool)>,
    /// Each [`Output::OperatorSignal`], as asked for.
    operator_signals: Vec<OperatorSignal>,
    result: Option<CommandResult>,
    exit: Option<i32>,
    /// The front end's copy as the fake interpreter reports it at each tick, what giving it
    /// up finds undelivered, and how many times it was given up.
    copy: CopyProgress,
    undelivered: [u64; 2],
    copies_given_up: usize,
    /// Each [`Output::TryReady`], as asked for: its attempt, the probe's kind, its timeout and
    /// when it was asked. The test answers them ([`Input::ReadyTried`]).
    tries: Vec<(u64, &'static str, Duration, Instant)>,
}

impl Rig {
    fn new(request: LaunchRequest) -> Rig {
        Rig::with_drain(request, None)
    }

    fn with_drain(request: LaunchRequest, final_line: Option<regex::bytes::Regex>) -> Rig {
        Rig::with_patterns(request, final_line, None)
    }

    /// A broker given the compiled `drain_on` and `ready_log` patterns, as `run.rs` gives them.
    fn with_patterns(
        request: LaunchRequest,
        final_line: Option<regex::bytes::Regex>,
        ready_line: Option<regex::bytes::Regex>,
    ) -> Rig {
        let kernel = FakeKernel::default();
        let world = kernel.0.clone();
        world.borrow_mut().wall_ms = 1_700_000_000_000;
        let t0 = Instant::now();
        // The I/O layer words it as the operator reads it (`config::naming`); the plain
        // words are enough here.
        let names = CommandNames {
            id: None,
            text: match &request.command {
                CommandSpec::Argv(argv) => argv.join(" "),
                CommandSpec::Shell(script) => script.clone(),
            },
        };
        Rig {
            broker: Broker::new(
                host(),
                t0,
                Now {
                    at: t0,
                    wall_ms: 1_700_000_000_000,
                },
                request,
                names,
                final_line,
                ready_line,
            ),
            world,
            t0,
            now: t0,
            lines: Vec::new(),
            stored: Vec::new(),
            flushes: 0,
            unflushed: 0,
            unflushed_at_result: None,
            closing_record: None,
            replies: Vec::new(),
            subscribed: Vec::new(),
            let_go: 0,
            notified: Vec::new(),
            notify_running: Vec::new(),
            notify_checks: Vec::new(),
            notify_unstartable: false,
            wind_downs: 0,
            plans: Vec::new(),
            operator_signals: Vec::new(),
            result: None,
            exit: None,
            copy: CopyProgress::default(),
            undelivered: [0; 2],
            copies_given_up: 0,
            tries: Vec::new(),
        }
    }

    /// A broker whose command runs, as `pid` [`CMD`], doing `on_term` with TERM.
    fn running(request: LaunchRequest, on_term: OnTerm) -> Rig {
        Rig::new(request).launched(on_term)
    }

    /// The command is started, as `pid` [`CMD`], doing `on_term` with TERM.
    fn launched(mut self, on_term: OnTerm) -> Rig {
        self.world.borrow_mut().spawn(CMD, on_term);
        let in_cgroup = self
            .world
            .borrow()
            .cgroup
            .as_ref()
            .is_some_and(|c| !c.outside.contains(&CMD));
        self.feed(Input::Spawned {
            pid: CMD,
            start_ticks: Some(CMD as u64),
            argv: vec!["cmd".into()],
            inputs: Vec::new(),
            in_cgroup,
            ended: false,
        });
        self
    }

    /// The time of an input now: the fake clock, and the fake kernel's wall clock.
    fn at(&self) -> Now {
        Now {
            at: self.now,
            wall_ms: self.world.borrow().wall_ms,
        }
    }

    fn feed(&mut self, input: Input<'_>) {
        self.broker.handle(input, self.at());
        self.drain();
    }

    /// What the interpreter reaps: every ended child of the fake, in order, and whether one
    /// is left.
    fn reaped(&self) -> Input<'static> {
        let mut world = self.world.borrow_mut();
        let children = world
            .ended
            .drain(..)
            .map(|(pid, status)| Reaped {
                pid,
                status,
                place: None,
                tether_cgroup: None,
            })
            .collect();
        Input::Reaped {
            children,
            children_left: !world.alive.is_empty(),
            cgroup: world.cgroup_state(),
        }
    }

    /// Reaps, as `run.rs` does on SIGCHLD, before every tick and before the end.
    fn reap(&mut self) {
        let reaped = self.reaped();
        self.feed(reaped);
    }

    /// Carries out the broker's outputs, as `run.rs` does. A child that a signal ended is
    /// reaped at the next [`Rig::reap`] (its SIGCHLD) or [`Rig::tick`].
    fn drain(&mut self) {
        while let Some(output) = self.broker.poll_output() {
            match output {
                Output::Event {
                    line,
                    journal,
                    subscribers,
                    parent,
                } => {
                    let event = serde_json::from_slice(&line).expect("an event line");
                    self.unflushed += usize::from(journal);
                    self.lines.push(Line {
                        event,
                        journal,
                        parent,
                        subscribers,
                    });
                }
                Output::FlushJournal => {
                    self.flushes += 1;
                    self.unflushed = 0;
                }
                Output::Store { stream, keep } => self.stored.push((stream, keep)),
                Output::Subscribe { client } => self.subscribed.push(client),
                Output::Reply { client, line } => {
                    let event = serde_json::from_slice(&line).expect("a reply line");
                    self.replies.push((client, event));
                }
                // The tree as the fake has it: its live processes, and the next record.
                Output::SampleTree { probe, .. } => {
                    let sample = {
                        let mut world = self.world.borrow_mut();
                        world.walks += 1;
                        let probed = probe.map(|probe| {
                            let samples = world.probe(probe.looks);
                            world.probes.push(probe);
                            samples
                        });
                        TreeSample {
                            processes: Some(world.alive.iter().map(|(p, _)| *p).collect()),
                            record: world.trees.pop_front(),
                            missed: false,
                            probed,
                        }
                    };
                    self.broker.handle(Input::TreeSampled(sample), self.at());
                }
                Output::ListLeftovers { .. } => {
                    let pids = {
                        let mut world = self.world.borrow_mut();
                        world.listings += 1;
                        world.pids()
                    };
                    self.broker.handle(Input::Leftovers(pids), self.at());
                }
                Output::AbandonCgroup => {
                    let mut world = self.world.borrow_mut();
                    let cgroup = world.cgroup.as_mut().expect("a cgroup to abandon");
                    cgroup.removals.push(false);
                }
                Output::ReleaseCgroup => {
                    let released = {
                        let mut world = self.world.borrow_mut();
                        let cgroup = world.cgroup.as_mut().expect("a cgroup to release");
                        cgroup.removals.push(true);
                        CgroupReleased {
                            cpu_usec: cgroup.cpu_usec,
                            memory_peak: cgroup.memory_peak,
                            removed: cgroup.remove_fails.map_or(Ok(()), |kind| Err(kind.into())),
                        }
                    };
                    self.broker
                        .handle(Input::CgroupReleased(released), self.at());
                }
                // Delivered by the fake kernel, at once, as `outlets.rs` does.
                Output::Signal { plan, walk, group } => {
                    self.plans.push((plan.signal, plan.also_cont));
                    let mut kernel = FakeKernel(self.world.clone());
                    let delivered = plan.deliver(&mut kernel, &walk, group);
                    self.broker.handle(Input::Signalled(delivered), self.at());
                }
                // The same, for a signal the operator asked for.
                Output::OperatorSignal(signal) => {
                    self.operator_signals.push(signal.clone());
                    let walk = signal.walk.clone();
                    let delivered = signal.deliver(&mut FakeKernel(self.world.clone()), &walk);
                    self.broker
                        .handle(Input::OperatorSignalled(delivered), self.at());
                }
                Output::MeasureCpu { .. } => {
                    let used = {
                        let mut world = self.world.borrow_mut();
                        world.cpu_measures += 1;
                        world.cpu
                    };
                    self.broker.handle(Input::CpuMeasured(used), self.at());
                }
                Output::CloseTree => {
                    let cost = SampledCost::default();
                    let closed = Input::TreeClosed {
                        record: self.closing_record.take(),
                        cost: &cost,
                        children: (0, 0),
                    };
                    self.broker.handle(closed, self.at());
                }
                Output::GiveUpCopy => {
                    self.copies_given_up += 1;
                    self.copy.behind = false;
                    let undelivered = self.undelivered;
                    self.broker
                        .handle(Input::CopyGivenUp { undelivered }, self.at());
                }
                Output::LetFrontEndGo => {
                    self.let_go += 1;
                    self.broker
                        .handle(Input::FrontEndLetGo { stderr: Ok(()) }, self.at());
                }
                Output::Notify { payload, .. } => {
                    let mut line = serde_json::to_vec(&payload).unwrap();
                    line.push(b'\n');
                    self.notified.push(line);
                    let input = if self.notify_unstartable {
                        Input::NotifyUnstarted {
                            message: "cannot run `notify`: no such file".into(),
                        }
                    } else {
                        let pid = NOTIFY_KEEPER + self.notified.len() as i32;
                        self.notify_running.push(pid);
                        Input::NotifyStarted { pid }
                    };
                    self.broker.handle(input, self.at());
                }
                // An overdue run is killed: a failure. Runs that end by themselves are fed by
                // the test ([`Rig::notify_run_ends`]).
                Output::CheckNotify { overdue } => {
                    self.notify_checks.push(overdue.clone());
                    for pid in overdue {
                        self.notify_running.retain(|p| *p != pid);
                        let failure = Some("`notify` was killed before it finished".into());
                        self.broker
                            .handle(Input::NotifyEnded { pid, failure }, self.at());
                    }
                }
                // The runs still going are let go, as `Notifier::let_go` does: nothing waits.
                Output::WindDownNotify => {
                    self.wind_downs += 1;
                    self.notify_running.clear();
                    self.broker.handle(Input::NotifyWoundDown, self.at());
                }
                Output::WriteResult(result) => {
                    self.unflushed_at_result = Some(self.unflushed);
                    self.result = Some(*result);
                    self.broker.handle(Input::ResultWritten(Ok(())), self.at());
                }
                Output::TryReady {
                    attempt,
                    probe,
                    timeout,
                } => self.tries.push((attempt, probe.kind(), timeout, self.now)),
                Output::Exit(code) => self.exit = Some(code),
            }
        }
    }

    fn tick(&mut self) {
        self.reap();
        let copy = self.copy;
        self.feed(Input::Tick { copy });
    }

    /// End of file on both of the command's streams.
    fn close_pipes(&mut self) {
        for stream in [
            crate::protocol::Stream::Stdout,
            crate::protocol::Stream::Stderr,
        ] {
            self.feed(Input::Closed { stream });
        }
    }

    /// Run `pid` of the notify command ends, as `failure` says.
    fn notify_run_ends(&mut self, pid: i32, failure: Option<&str>) {
        self.notify_running.retain(|p| *p != pid);
        let failure = failure.map(str::to_string);
        self.feed(Input::NotifyEnded { pid, failure });
    }

    /// Moves the clock on by `by` and ticks.
    fn advance(&mut self, by: Duration) {
        self.now += by;
        self.tick();
    }

    /// Moves the clock to each of the broker's deadlines in turn up to `limit` after the
    /// start, ticking at each, then to `limit` itself; stops early once the broker is done.
    fn run_until(&mut self, limit: Duration) {
        for _ in 0..10_000 {
            if self.broker.is_done() {
                return;
            }
            let Some(next) = self.broker.poll_timeout() else {
                break;
            };
            if next > self.t0 + limit {
                break;
            }
            self.now = self.now.max(next);
            self.tick();
        }
        if self.now < self.t0 + limit {
            self.now = self.t0 + limit;
            self.tick();
        }
    }

    /// The command ends with `status`, and its SIGCHLD is handled.
    fn command_ends(&mut self, status: ExitStatus) {
        self.world.borrow_mut().end(CMD, status);
        self.reap();
    }

    /// Its pipes close, it is seen through to the end: `result.json` and the exit code.
    fn finish(&mut self) -> i32 {
        self.close_pipes();
        self.run_until(Duration::from_secs(3600));
        assert!(self.broker.is_done(), "done: {:?}", self.kinds());
        self.reap();
        self.feed(Input::Finish);
        self.exit.expect("an exit code")
    }

    /// The journal's event kinds, in order.
    fn kinds(&self) -> Vec<&'static str> {
        self.journal().map(|e| e.kind.name()).collect()
    }

    fn journal(&self) -> impl Iterator<Item = &Event> {
        self.lines.iter().filter(|l| l.journal).map(|l| &l.event)
    }

    /// The lines the parent was sent, as kinds.
    fn to_parent(&self) -> Vec<&'static str> {
        self.lines
            .iter()
            .filter(|l| l.parent)
            .map(|l| l.event.kind.name())
            .collect()
    }

    /// Every `signal_sent` journaled: signal name and targets.
    fn signals(&self) -> Vec<(String, Vec<i32>)> {
        self.journal()
            .filter_map(|e| match &e.kind {
                EventKind::SignalSent {
                    signal, targets, ..
                } => Some((signal.to_string(), targets.clone())),
                _ => None,
            })
            .collect()
    }

    fn count(&self, kind: &str) -> usize {
        self.kinds().iter().filter(|k| **k == kind).count()
    }

    fn result(&self) -> &CommandResult {
        self.result.as_ref().expect("result.json was asked for")
    }
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}
