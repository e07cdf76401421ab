//! The broker's use of attention (see `crate::attention`): the detector is fed from the
//! few places the broker already learns something (the command started, wrote, was sampled,
//! ended), its events are journaled and handed to the notify command: [`Output::Notify`]
//! asks the interpreter to start a run, [`Output::CheckNotify`] to look at the runs going
//! (killing the overdue), [`Output::WindDownNotify`] to let them go when the broker is done;
//! how each went comes back as an input (`Input::Notify*`), which is where a failure is
//! journaled.
//!
//! It costs an idle tree nothing: it looks only when the tree is sampled anyway, and asks for
//! at most one wake-up of its own per threshold that may be crossed (`attention_deadline`),
//! at which the tree is sampled as on the tree's own schedule (a few reads when nothing in
//! the tree ran, see `TreeRecorder::unchanged`).

use std::time::Instant;

use super::machine::{Output, Probe};
use super::{Broker, Phase};
use crate::attention::detector::{Detector, Ending, ProcessSample, Sample};
use crate::attention::inputs::InputFile;
use crate::attention::notify_policy::{NotifyPolicy, runnable};
use crate::by_hand::SignalsByHand;
use crate::protocol::{AttentionRequest, EventKind, ExitStatus, Origin, ProcessSignal};
use tether_protocol::CommandId;

/// How a notification names the command, known at launch: its identity (from its journal
/// directory, `SESSION/03-build`) and its text as the operator reads it
/// (`config::naming::command_text`), both worked out by the I/O layer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommandNames {
    pub id: Option<CommandId>,
    pub text: String,
}

/// The bytes of the command's text a notification carries at most (its argv may be
/// megabytes).
const TEXT_CAP: usize = 1024;
/// The bytes of the command's name (its first word, unless named) a notification carries at
/// most: a first word can be as long as the argv.
const NAME_CAP: usize = 256;
/// The bytes of the detector's detail a notification carries at most.
const DETAIL_CAP: usize = 512;

pub(super) struct Attention {
    /// Its thresholds, and whether it is on at all.
    request: AttentionRequest,
    detector: Option<Detector>,
    /// What the command was given to read (its stdin, its terminals).
    inputs: Vec<InputFile>,
    /// When the notify command runs, if there is one.
    notify: Option<NotifyPolicy>,
    /// The end waits for the notify command's runs ([`Output::WindDownNotify`]).
    winding_down: bool,
    /// The signals that end a process the operator (or the caller, through the shim) sent:
    /// an end they caused is their doing, never a failure to tell them about.
    signals_by_hand: SignalsByHand,
}

impl Attention {
    pub(super) fn new(request: &AttentionRequest) -> Attention {
        Attention {
            request: request.clone(),
            detector: None,
            inputs: Vec::new(),
            notify: request
                .notify
                .as_deref()
                .filter(|argv| request.enabled && runnable(argv))
                .map(|_| NotifyPolicy::default()),
            winding_down: false,
            signals_by_hand: SignalsByHand::default(),
        }
    }

    /// The notify command's runs, which the tree walk leaves out.
    pub(super) fn notifier_pids(&self) -> Vec<i32> {
        self.notify
            .as_ref()
            .map_or_else(Vec::new, NotifyPolicy::pids)
    }
}

impl Broker {
    /// [call site: spawned] The command runs (after [`Broker::attention_inputs`]).
    pub(super) fn attention_spawned(&mut self, now: Instant) {
        if self.attention.request.enabled {
            let ticks = self.host.ticks_per_second;
            let mut thresholds = self.attention.request.clone();
            // Nothing to wait on (stdin is /dev/null, no terminal): no look, and no wake-up,
            // for input.
            if self.attention.inputs.is_empty() {
                thresholds.input_after = None;
            }
            self.attention.detector = Some(Detector::new(thresholds, ticks, now));
        }
    }

    /// [call site: the `spawned` input, before `spawned`] What the command reads its input
    /// from.
    pub(super) fn attention_inputs(&mut self, inputs: Vec<InputFile>) {
        self.attention.inputs = inputs;
    }

    /// [call site: output] The command wrote `bytes`. Terminal controls alone (a title
    /// rewritten every second) are no sign of work; the bytes are looked at only where a
    /// detector listens (this runs for every chunk read).
    pub(super) fn attention_output(&mut self, now: Instant, bytes: &[u8]) {
        if let Some(detector) = self.attention.detector.as_mut()
            && crate::attention::shown::shows_text(bytes)
        {
            detector.output(now);
            self.attention_emit();
        }
    }

    /// [call site: input] The operator typed into the command's terminal.
    pub(super) fn attention_typed(&mut self, now: Instant) {
        if let Some(detector) = self.attention.detector.as_mut() {
            detector.typed(now);
            self.attention_emit();
        }
    }

    /// [call site: control, `agent_waiting`] The agent's own hook says it waits for its human,
    /// `what` being its words: taken from a process of the tree only (the agent runs its
    /// hooks), and by an agent's broker only.
    pub(super) fn attention_told_waiting(
        &mut self,
        what: &str,
        in_tree: bool,
    ) -> Result<(), super::Refusal> {
        if !in_tree {
            return Err(super::Refusal {
                code: "not_the_agent",
                message: "only a process of the agent's own tree (its hook) may say it waits"
                    .into(),
            });
        }
        let agent = self.attention.request.agent && self.attention.request.enabled;
        let Some(detector) = self.attention.detector.as_mut().filter(|_| agent) else {
            return Err(super::Refusal {
                code: "not_an_agent",
                message: "this broker's command is not an agent under `tether agent`".into(),
            });
        };
        detector.told_waiting(&capped(one_line(what).as_str(), DETAIL_CAP / 2));
        self.attention_emit();
        Ok(())
    }

    /// [call site: sample_tree] What the interpreter is to probe of the processes the walk
    /// finds: what the detector wants, over the command's inputs; nothing without a detector.
    pub(super) fn attention_probe(&self) -> Option<Probe> {
        let detector = self.attention.detector.as_ref()?;
        Some(Probe {
            inputs: self.attention.inputs.clone(),
            looks: detector.wants(),
        })
    }

    /// [call site: tree_sampled] The tree was looked at: `probed` is what the probe found of
    /// each process the walk found ([`Broker::attention_probe`]), or `None` when nothing in
    /// the tree ran since the last one; `missed`, the walk did not finish in its budget and
    /// nothing is known.
    pub(super) fn attention_sampled(
        &mut self,
        now: Instant,
        probed: Option<Vec<ProcessSample>>,
        missed: bool,
    ) {
        let Some(detector) = self.attention.detector.as_mut() else {
            return;
        };
        let sample = match probed {
            None if missed => Sample::Missed,
            None => Sample::Unchanged,
            Some(samples) => Sample::Fresh(samples),
        };
        detector.sampled(now, sample);
        self.attention_emit();
    }

    /// [call site: operator_signalled] `origin` (the operator or the caller) sent `signal` to
    /// the command (`to_command`: its group or its main process) or to another process of its
    /// tree: see [`SignalsByHand`] for when that makes the command's end theirs.
    pub(super) fn attention_signalled(
        &mut self,
        origin: Origin,
        signal: ProcessSignal,
        to_command: bool,
    ) {
        (self.attention.signals_by_hand).sent(origin, signal, to_command);
    }

    /// [call site: reap] The command's main process ended.
    pub(super) fn attention_exited(&mut self, status: ExitStatus) {
        let now = self.now;
        let by_hand = self.attention.signals_by_hand.ended_it(status)
            || matches!(
                self.result.stopped_by,
                Some(Origin::Operator | Origin::Caller | Origin::FileChanged)
            );
        let with_what_ran_it = matches!(
            self.result.stopped_by,
            Some(Origin::ParentLost | Origin::Shutdown | Origin::Reclaim)
        );
        // In the order the model words an end (`model::ending`): a drained run finished
        // whatever stopped it, a person's end is theirs, and a budget's stop is that before
        // anything else that happened during it.
        let ending = if self.result.drained {
            Ending::Drained
        } else if by_hand {
            Ending::ByHand
        } else if with_what_ran_it {
            Ending::WithWhatRanIt
        } else if let Some(budget) = self.result.budget {
            Ending::OverBudget(budget)
        } else if self.result.response_timeout {
            Ending::TimedOut {
                silent: now.saturating_duration_since(self.last_output),
                status,
            }
        } else {
            Ending::Exited(status)
        };
        if let Some(detector) = self.attention.detector.as_mut() {
            detector.exited(now, ending);
            self.attention_emit();
        }
    }

    /// [call site: spawn_failed] The command never ran.
    pub(super) fn attention_spawn_failed(&mut self) {
        if self.attention.request.enabled {
            let now = self.now;
            let mut detector = Detector::new(self.attention.request.clone(), 100, now);
            detector.exited(now, Ending::SpawnFailed);
            self.attention.detector = Some(detector);
            self.attention_emit();
        }
    }

    /// [call site: next_deadline] When a threshold may be crossed (the tree is sampled
    /// then), or a notify run is due to be killed.
    pub(super) fn attention_deadline(&self) -> Option<Instant> {
        let sample = self
            .attention
            .detector
            .as_ref()
            .filter(|_| self.can_sample())
            .and_then(Detector::next_deadline);
        let notify = self
            .attention
            .notify
            .as_ref()
            .and_then(NotifyPolicy::deadline);
        sample.into_iter().chain(notify).min()
    }

    /// [call site: tick] Samples the tree if a threshold may be crossed now, and asks for
    /// the notify command's runs to be looked at (their ends are seen whenever the broker
    /// wakes), the overdue killed.
    pub(super) fn attention_tick(&mut self, now: Instant) {
        if let Some(policy) = self.attention.notify.as_ref().filter(|p| p.is_running()) {
            let overdue = policy.overdue(now);
            self.outputs.push_back(Output::CheckNotify { overdue });
        }
        let due = self
            .attention
            .detector
            .as_ref()
            .and_then(Detector::next_deadline)
            .is_some_and(|at| now >= at);
        if due && self.can_sample() {
            self.sample_tree();
        }
    }

    /// [call site: finish] Runs of the notify command still going are let go
    /// ([`Output::WindDownNotify`]: those that ended are told, the rest end on their own
    /// deadline, never waited for); whether the end goes on at
    /// [`super::Input::NotifyWoundDown`], which comes at once.
    pub(super) fn attention_finish(&mut self) -> bool {
        let running = self
            .attention
            .notify
            .as_ref()
            .is_some_and(NotifyPolicy::is_running);
        if running {
            self.attention.winding_down = true;
            self.outputs.push_back(Output::WindDownNotify);
        }
        running
    }

    /// [call site: the `NotifyWoundDown` input] The notify command's runs are over: whether
    /// the end was waiting for them.
    pub(super) fn notify_wound_down(&mut self) -> bool {
        std::mem::take(&mut self.attention.winding_down)
    }

    /// [call site: the `NotifyStarted` input] A run started, as keeper `pid`.
    pub(super) fn notify_started(&mut self, pid: i32) {
        let now = self.now;
        if let Some(policy) = self.attention.notify.as_mut() {
            policy.started(pid, now);
        }
    }

    /// [call site: the `NotifyUnstarted` input] A run could not start: journaled, and the
    /// notify command is not run again.
    pub(super) fn notify_unstarted(&mut self, message: String) {
        if let Some(policy) = self.attention.notify.as_mut() {
            let message = policy.start_failed(message);
            self.emit(EventKind::NotifyFailed { message });
        }
    }

    /// [call site: the `NotifyEnded` input] Run `pid` ended; its failure, the first one, is
    /// journaled.
    pub(super) fn notify_ended(&mut self, pid: i32, failure: Option<String>) {
        if let Some(message) = self
            .attention
            .notify
            .as_mut()
            .and_then(|policy| policy.ended(pid, failure))
        {
            self.emit(EventKind::NotifyFailed { message });
        }
    }

    /// Whether the tree may be sampled now, as `tick` samples it.
    fn can_sample(&self) -> bool {
        self.child.is_some() && self.phase == Phase::Running && !self.tree_paused()
    }

    /// Journals what the detector decided, and tells the notify command of each moment.
    fn attention_emit(&mut self) {
        let Some(events) = self.attention.detector.as_mut().map(Detector::take) else {
            return;
        };
        for event in events {
            if let EventKind::Attention { attention, detail } = &event {
                let kind = *attention;
                let (at_ms, payload) = self.notification(kind.name(), detail);
                // In the journal before the notify command runs: it may read the journal.
                self.emit(event);
                self.flush_journal();
                let now = self.now;
                if let Some(policy) = self.attention.notify.as_mut()
                    && policy.admit(now)
                {
                    self.outputs.push_back(Output::Notify {
                        kind,
                        at_ms,
                        payload,
                    });
                }
            } else {
                self.emit(event);
            }
        }
    }

    /// When the event is, and the JSON object the notify command reads (the interpreter adds
    /// what the user's rate held back before it, see the tether crate's `attention::rate`).
    fn notification(&self, kind: &str, detail: &str) -> (u64, serde_json::Value) {
        let request = &self.request;
        // The machine's wall clock, as the event it tells of is stamped.
        let ts_ms = self.wall_ms;
        let session = request.session.as_ref();
        let id = self.names.id.as_ref();
        let value = serde_json::json!({
            "kind": kind,
            "detail": capped(detail, DETAIL_CAP),
            "session": session.map(|s| &s.command.session),
            "command": id.map(|id| id.number),
            "target": id.map(CommandId::target),
            "name": capped(&request.name, NAME_CAP),
            "text": capped(&self.names.text, TEXT_CAP),
            "ts_ms": ts_ms,
            "time": crate::units::iso_utc(ts_ms),
            "journal_dir": request.journal_dir,
        });
        (ts_ms, value)
    }
}

/// `text` on one line: a hook's message is the agent's text, shown in a row.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `text` cut to at most `cap` bytes (on a character boundary), `…` marking the cut: every
/// field of a notification is bounded, so the whole line fits a pipe's buffer and its write
/// never waits on the notify program.
fn capped(text: &str, cap: usize) -> String {
    if text.len() <= cap {
        return text.to_string();
    }
    format!("{}…", crate::units::head(text, cap))
}
