//! Where the broker's outputs go: the journal's files, the parent's queue, the control
//! clients, the tree's recorder, the stop sequence's and the operator's signals, the notify
//! command. [`Outlets::apply`] carries out each [`Output`] the state machine asks for, in
//! order, and hands any answer or failure back to it as an [`Input`] at once;
//! [`Outlets::reap`] reaps and says what it reaped.

use std::time::Instant;

use super::control::ControlServer;
use super::parent::ParentLink;
use std::sync::Arc;

use super::signaller::Walk;
use super::state::{Broker, CgroupReleased, CgroupState, Input, Now, Output};
use super::stop::Kernel as LiveKernel;
use super::tree::TreeRecorder;
use crate::attention::notify::Notifier;
use crate::attention::probe;
use tether_os::cgroup::CommandCgroup;
use tether_os::journal::JournalDir;
use tether_os::journal::writer::{EventLog, RESULT_FILE, StreamLog};

/// The time now, as the broker takes it with each input.
pub(super) fn now() -> Now {
    Now {
        at: Instant::now(),
        wall_ms: tether_os::clock::now_ms(),
    }
}

/// The command's journal as the interpreter writes it: the broker says what goes in.
pub(super) struct JournalFiles {
    pub(super) dir: JournalDir,
    pub(super) events: Option<EventLog>,
    /// Uncapped: the broker decides what of each chunk is stored ([`Output::Store`]).
    pub(super) streams: [StreamLog; 2],
}

pub(super) struct Outlets {
    pub(super) journal: JournalFiles,
    /// The tree's record: the walks the broker asks for, and what they found.
    pub(super) tree: TreeRecorder,
    pub(super) link: ParentLink,
    pub(super) control: Option<ControlServer>,
    /// Lines for subscribers since the last broadcast; kept only while there are any.
    pub(super) for_subscribers: Vec<u8>,
    pub(super) subscribed: bool,
    /// The `[notify] command`'s runs, started, looked at and killed as the broker says.
    pub(super) notify: Option<Notifier>,
    /// The command's cgroup, while the broker has it: read for the broker
    /// ([`Outlets::cgroup_state`]), the members of the walks it asks for
    /// ([`Walk::of`]), and removed when it says.
    pub(super) cgroup: Option<Arc<CommandCgroup>>,
    /// The readiness probe's try going, started as the broker asks ([`Output::TryReady`]).
    pub(super) probes: super::probes::Probes,
    /// The broker asked for its front end to be let go.
    pub(super) let_go: bool,
    /// The broker asked for the front end's copy of the output to be given up.
    pub(super) give_up_copy: bool,
    pub(super) exit: Option<i32>,
    /// The tree's CPU time as last measured for `max_cpu`: told again when a measurement
    /// runs out of time.
    pub(super) cpu_used: std::time::Duration,
    /// When the walk that measured `cpu_used` started.
    pub(super) cpu_measured_at: Option<Instant>,
}

impl Outlets {
    /// Hands `input` to the broker and carries out what it asks.
    pub(super) fn feed(&mut self, broker: &mut Broker, input: Input<'_>) {
        self.feed_at(broker, input, now());
    }

    /// [`Self::feed`] with what happened at `at`, read before the work that told of it.
    pub(super) fn feed_at(&mut self, broker: &mut Broker, input: Input<'_>, at: Now) {
        broker.handle(input, at);
        self.apply(broker, &[]);
    }

    /// Reaps every child that ended and tells the broker, with whether any is left and how
    /// the cgroup stands.
    pub(super) fn reap(&mut self, broker: &mut Broker) {
        let (children, children_left) = super::reap::reap_ended();
        // Read whole once it can matter; until then only whether it is still there (one
        // system call, as the tick's look always took).
        let cgroup = if !children.is_empty() || broker.cgroup_state_wanted() {
            self.cgroup_state()
        } else {
            self.cgroup_gone()
        };
        let reaped = Input::Reaped {
            children,
            children_left,
            cgroup,
        };
        self.feed(broker, reaped);
    }

    /// The walk the broker asked for, over the cgroup's members or /proc; on /proc, the
    /// keepers of `exec` probe tries (going, or given up and not reaped yet), the broker's
    /// children, are no part of the command's tree.
    fn walk(&self, tree: &tether_core::process::TreeWalk) -> Walk {
        Walk::of(tree, self.cgroup.as_ref()).pruning(self.probes.keepers())
    }

    /// `Gone` if the command's cgroup was taken away, else nothing new.
    fn cgroup_gone(&self) -> Option<CgroupState> {
        let cgroup = self.cgroup.as_ref()?;
        (!cgroup.exists()).then_some(CgroupState::Gone)
    }

    /// How the command's cgroup stands now (`None` once the broker has none).
    pub(super) fn cgroup_state(&self) -> Option<CgroupState> {
        let cgroup = self.cgroup.as_ref()?;
        Some(match cgroup.populated() {
            Ok(true) => CgroupState::Populated,
            Ok(false) => CgroupState::Empty,
            Err(_) if !cgroup.exists() => CgroupState::Gone,
            Err(_) => CgroupState::Empty,
        })
    }

    /// Carries out every output the broker has, in order; `chunk` is the chunk of output
    /// last read, which [`Output::Store`] names. A failure goes back to the broker at once.
    pub(super) fn apply(&mut self, broker: &mut Broker, chunk: &[u8]) {
        while let Some(output) = broker.poll_output() {
            match output {
                Output::Event {
                    line,
                    journal,
                    subscribers,
                    parent,
                } => {
                    if journal
                        && let Some(events) = self.journal.events.as_mut()
                        && let Err(error) = events.append(&line)
                    {
                        self.journal.events = None;
                        let unwritten = line.len() as u64;
                        broker.handle(Input::JournalFailed { error, unwritten }, now());
                    }
                    if subscribers && self.subscribed {
                        self.for_subscribers.extend_from_slice(&line);
                    }
                    if parent {
                        self.link.queue.push(&line);
                    }
                }
                Output::FlushJournal => {
                    if let Some(Err(error)) = self.journal.events.as_mut().map(EventLog::flush) {
                        self.journal.events = None;
                        let failed = Input::JournalFailed {
                            error,
                            unwritten: 0,
                        };
                        broker.handle(failed, now());
                    }
                }
                Output::Store { stream, keep } => {
                    let log = &mut self.journal.streams[stream as usize];
                    if let Some((reason, message)) = log.write(&chunk[..keep]).capped {
                        let stored = log.stored();
                        let failed = Input::StoreFailed {
                            stream,
                            reason,
                            message,
                            stored,
                        };
                        broker.handle(failed, now());
                    }
                }
                Output::Subscribe { client } => {
                    self.broadcast();
                    if let Some(server) = self.control.as_mut() {
                        server.subscribe(client);
                        self.subscribed = true;
                    }
                }
                Output::Reply { client, line } => {
                    self.broadcast();
                    if let Some(server) = self.control.as_mut() {
                        server.reply(client, &line);
                    }
                }
                Output::SampleTree {
                    walk,
                    group,
                    may_skip,
                    probe,
                } => {
                    let walk = self.walk(&walk);
                    let mut sample = self.tree.look(&walk, group, may_skip);
                    if let (Some(probe), Some(processes)) = (probe, sample.processes.as_deref()) {
                        let page_size = tether_os::procfs::page_size();
                        let samples =
                            probe::sample(processes, &probe.inputs, probe.looks, page_size);
                        sample.probed = Some(samples);
                    }
                    broker.handle(Input::TreeSampled(sample), now());
                }
                Output::ListLeftovers { walk } => {
                    let walk = self.walk(&walk);
                    let pids = walk.live().iter().map(|p| p.pid).collect();
                    broker.handle(Input::Leftovers(pids), now());
                }
                Output::AbandonCgroup => {
                    // Empty (the command never entered it), it goes now; one still holding a
                    // process stays, for a later tether to remove once empty. The state names
                    // the cgroup only: the handle is held here, and its descriptors close here.
                    if let Some(cgroup) = self.cgroup.take() {
                        let _ = cgroup.remove();
                    }
                }
                Output::ReleaseCgroup => {
                    // The handle is held here alone (the state names the cgroup only): its
                    // descriptors close here.
                    let cgroup = self.cgroup.take();
                    let released = CgroupReleased {
                        cpu_usec: cgroup.as_ref().and_then(|c| c.stats().cpu_usec),
                        memory_peak: cgroup.as_ref().and_then(|c| c.memory_peak()),
                        removed: cgroup.as_ref().map_or(Ok(()), |c| c.remove()),
                    };
                    broker.handle(Input::CgroupReleased(released), now());
                    drop(cgroup);
                }
                Output::Signal { plan, walk, group } => {
                    let walk = self.walk(&walk);
                    let delivered = plan.deliver(&mut LiveKernel, &walk, group);
                    broker.handle(Input::Signalled(delivered), now());
                }
                Output::OperatorSignal(signal) => {
                    let walk = self.walk(&signal.walk);
                    let delivered = signal.deliver(&mut LiveKernel, &walk);
                    broker.handle(Input::OperatorSignalled(delivered), now());
                }
                Output::MeasureCpu { walk } => {
                    // The walk without the probe's keeper. On the /proc walk, a tree quiet
                    // since the last measurement used nothing since: a few small reads
                    // instead of a walk of every process on the machine. A walk that runs
                    // out of time leaves the last figure.
                    let walk = self.walk(&walk);
                    let started = std::time::Instant::now();
                    let quiet = walk.cgroup().is_none()
                        && (self.cpu_measured_at).is_some_and(|at| self.tree.quiet_since(at));
                    let deadline = started + super::tree::CPU_MEASURE_BUDGET;
                    if !quiet && let Some(used) = super::tree::cost::tree_cpu(&walk, deadline) {
                        self.cpu_used = used;
                        self.cpu_measured_at = Some(started);
                    }
                    broker.handle(Input::CpuMeasured(self.cpu_used), now());
                }
                Output::CloseTree => {
                    let record = self.tree.close();
                    let cost = self.tree.cost();
                    let children = super::tree::cost::children_usage();
                    let closed = Input::TreeClosed {
                        record,
                        cost,
                        children,
                    };
                    broker.handle(closed, now());
                }
                Output::Notify {
                    kind,
                    at_ms,
                    payload,
                } => {
                    let started = match self.notify.as_mut() {
                        Some(notifier) => notifier.notify(kind, at_ms, payload),
                        None => Err("no notify command can be run".into()),
                    };
                    let input = match started {
                        Ok(Some(pid)) => Input::NotifyStarted { pid },
                        // Held back by the user's rate: told with the next run.
                        Ok(None) => continue,
                        Err(message) => Input::NotifyUnstarted { message },
                    };
                    broker.handle(input, now());
                }
                Output::CheckNotify { overdue } => {
                    let ended = self.notify.as_mut().map(|n| n.check(&overdue));
                    for (pid, failure) in ended.into_iter().flatten() {
                        broker.handle(Input::NotifyEnded { pid, failure }, now());
                    }
                }
                Output::WindDownNotify => {
                    // The runs that ended are told; the others are let go, not waited for
                    // (see `Notifier::let_go`).
                    let ended = self.notify.as_mut().map(Notifier::let_go);
                    for (pid, failure) in ended.into_iter().flatten() {
                        broker.handle(Input::NotifyEnded { pid, failure }, now());
                    }
                    broker.handle(Input::NotifyWoundDown, now());
                }
                Output::LetFrontEndGo => self.let_go = true,
                Output::GiveUpCopy => self.give_up_copy = true,
                Output::WriteResult(result) => {
                    let written = self.journal.dir.write_json_once(RESULT_FILE, &*result);
                    broker.handle(Input::ResultWritten(written), now());
                }
                Output::TryReady {
                    attempt,
                    probe,
                    timeout,
                } => self.probes.start(attempt, &probe, timeout),
                Output::Exit(code) => self.exit = Some(code),
            }
        }
    }

    /// Sends subscribers what was gathered for them.
    pub(super) fn broadcast(&mut self) {
        if let Some(server) = self.control.as_mut() {
            server.broadcast(&self.for_subscribers);
            self.subscribed = server.has_subscribers();
        }
        self.for_subscribers.clear();
    }
}
