//! The broker's clock: what is due when, and the phases a command's end goes through.

use std::time::Instant;

use super::machine::Output;
use super::{Broker, DRAIN_CAP, DRAIN_IDLE, EOF_WAIT, INPUT_COALESCE, OUTPUT_COALESCE, Phase};
use crate::protocol::{EventKind, Origin};
use crate::reports::TreeSample;

impl Broker {
    // ---- time -------------------------------------------------------------------------

    /// The next moment at which [`Broker::tick`] has something to do: hand the broker
    /// [`Input::Tick`](super::Input::Tick) then.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let phase = match self.phase {
            Phase::Draining { since } => Some(
                self.drain_until
                    .unwrap_or(since + DRAIN_IDLE)
                    .min(since + DRAIN_CAP),
            ),
            Phase::Closing { until } => Some(until),
            _ => None,
        };
        [
            self.pending.as_ref().map(|p| p.since + OUTPUT_COALESCE),
            self.pending_input
                .as_ref()
                .map(|p| p.since + INPUT_COALESCE),
            self.custody.as_ref().and_then(|c| c.until),
            self.heartbeat_deadline(),
            self.watchdog_deadline(),
            self.drain_deadline(),
            self.budget_deadline(),
            self.copy_deadline(),
            (self.stop.as_ref())
                .filter(|_| !self.stop_done)
                .map(|stop| stop.next_wake()),
            self.walks_tree().then(|| self.tree_walks.next()),
            self.attention_deadline(),
            self.ready_deadline(),
            phase,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// When the parent's silence is `parent_unresponsive`: three heartbeats without a ping,
    /// once (a front end let go sends no more pings).
    fn heartbeat_deadline(&self) -> Option<Instant> {
        let hb = self.request.heartbeat?;
        (!self.unresponsive && !self.parent_detached).then(|| self.last_ping + hb * 3)
    }

    /// When the command's silence starts the watchdog's stop, while it runs and no stop does.
    fn watchdog_deadline(&self) -> Option<Instant> {
        let timeout = self.request.no_output_timeout?;
        (self.phase == Phase::Running && self.stop.is_none()).then(|| self.last_output + timeout)
    }

    /// Whether the tree is walked on its own schedule now.
    fn walks_tree(&self) -> bool {
        self.child.is_some() && self.phase != Phase::Done && !self.tree_paused()
    }

    /// Does whatever is due at `now`. `pipes_open` says whether either output pipe is open.
    pub(super) fn tick(&mut self, pipes_open: bool) {
        let now = self.now;
        let due = |at: Option<Instant>| at.is_some_and(|at| now >= at);
        if due(self.pending.as_ref().map(|p| p.since + OUTPUT_COALESCE)) {
            self.flush_output();
        }
        if due(self
            .pending_input
            .as_ref()
            .map(|p| p.since + INPUT_COALESCE))
        {
            self.flush_input();
        }
        if due(self.heartbeat_deadline()) {
            self.unresponsive = true;
            let silent = now.saturating_duration_since(self.last_ping);
            self.emit(EventKind::ParentUnresponsive {
                silent_ms: silent.as_millis() as u64,
            });
        }
        if due(self.watchdog_deadline()) {
            let silent = now.saturating_duration_since(self.last_output);
            self.result.response_timeout = true;
            self.emit(EventKind::ResponseTimeout {
                silent_ms: silent.as_millis() as u64,
            });
            self.start_stop(Origin::Watchdog);
        }
        self.check_drain_deadline(now);
        self.check_budgets(now);
        self.check_custody_deadline(now);
        self.advance_stop(now);
        self.attention_tick(now);
        self.ready_tick(now);
        if self.walks_tree() && self.tree_walks.is_due(now) {
            self.sample_tree();
        }
        self.advance_phase(now, pipes_open);
    }

    /// One step of the stop sequence, when it is due: KILL once grace is over, else a sweep
    /// for newcomers.
    pub(super) fn advance_stop(&mut self, now: Instant) {
        if self.stop_done {
            return;
        }
        let (walk, group) = (self.walk(), self.live_group());
        let Some(stop) = self.stop.as_ref() else {
            return;
        };
        if now >= stop.next_wake() {
            if !stop.kill_due(now) {
                // Nothing to sweep if every process it signalled ended and nothing is left: a
                // child reaped just before this tick saves a walk (the stop is done when the
                // broker has no child).
                self.check_stop_done();
                if self.stop_done {
                    return;
                }
            }
            let Some(stop) = self.stop.as_mut() else {
                return;
            };
            // Journaled as delivered ([`Input::Signalled`]), in this place in the journal.
            let plan = stop.step(now);
            self.outputs.push_back(Output::Signal { plan, walk, group });
        }
        self.check_stop_done();
    }

    /// Asks for the tree to be walked for its record ([`Input::TreeSampled`] answers).
    pub(super) fn sample_tree(&mut self) {
        let Some(group) = self.child.as_ref().map(|c| c.pid) else {
            return;
        };
        if self.tree_sampling {
            return;
        }
        self.check_cgroup();
        let walk = self.walk();
        // On the /proc walk, a tree whose processes did nothing since the last walk need not
        // be walked again (a walk reads every process on the machine); a full walk still
        // comes every `SAFETY_WALK`. A cgroup's members are read at the cost of the tree
        // alone.
        let may_skip = !walk.in_cgroup && self.tree_walks.quiet();
        self.tree_sampling = true;
        let probe = self.attention_probe();
        self.outputs.push_back(Output::SampleTree {
            walk,
            group,
            may_skip,
            probe,
        });
    }

    /// What a look at the tree found: its record if it changed; the schedule backs off while
    /// it does not. This is where an observer of the tree's processes hangs on.
    pub(super) fn tree_sampled(&mut self, sample: TreeSample) {
        self.tree_sampling = false;
        let TreeSample {
            processes,
            record,
            missed,
            probed,
        } = sample;
        self.tree_walks.walked(self.now, record.is_some());
        // Attention looks at what the probe found of the processes the walk found (or knows
        // nothing ran since).
        self.attention_sampled(self.now, probed, missed);
        // What the /proc path's stop sends its first signal to without walking again.
        if let Some(processes) = processes.filter(|_| self.cgroup.is_none()) {
            self.last_walk = Some(processes);
        }
        if let Some(record) = record {
            self.record_tree(record);
        }
        // The walk is answered after the tick's flush: what it brought (a record, an
        // attention event) reaches the disk now, not at the next wake-up, which for a quiet
        // command may be seconds away. Nothing is written when nothing waits.
        self.flush_journal();
    }

    /// Emits what the tree recorder produced: a tree, or the one `events_capped` that ends
    /// the tree's record, which `result.json` lists too.
    pub(super) fn record_tree(&mut self, event: EventKind) {
        if let EventKind::EventsCapped { kind_capped, .. } = &event {
            self.result.events_capped.push(*kind_capped);
        }
        self.emit(event);
    }

    /// `pipes_open`: whether either output pipe is open. While output waits for the front
    /// end's copy, a stream is not read, so its quiet is not idleness.
    pub(super) fn advance_phase(&mut self, now: Instant, pipes_open: bool) {
        self.check_custody_emptied();
        self.check_copy(now);
        let mirror_behind = self.copy.behind();
        if let Phase::Draining { since } = self.phase {
            let idle_over = !mirror_behind && now >= self.drain_until.unwrap_or(since + DRAIN_IDLE);
            if !pipes_open || idle_over || now >= since + DRAIN_CAP {
                self.phase = Phase::TearingDown;
                if self.tree_left() && self.stop.is_none() {
                    if self.request.leftovers.keep {
                        // Kept or stopped once listed ([`Broker::leftovers_listed`]).
                        self.phase = Phase::Counting;
                        let walk = self.walk();
                        self.outputs.push_back(Output::ListLeftovers { walk });
                    } else {
                        self.start_stop(Origin::Leftovers);
                    }
                }
            }
        }
        if self.phase == Phase::TearingDown {
            if self.tree_left() {
                // Whatever is left is stopped, even if a stop had already finished.
                if self.stop.is_none() {
                    self.start_stop(Origin::Leftovers);
                } else if self.stop_done {
                    self.stop_done = false;
                }
            } else if self.stop.is_none() || self.stop_done {
                self.phase = Phase::Closing {
                    until: now + EOF_WAIT,
                };
            }
        }
        if let Phase::Closing { until } = self.phase {
            if !pipes_open && !mirror_behind {
                self.phase = Phase::Done;
            } else if mirror_behind {
                // What is left in the pipes is finite: read it to the end at the front end's
                // pace while it takes some (`check_copy` gives the copy up once it does not).
                self.phase = Phase::Closing {
                    until: now + EOF_WAIT,
                };
            } else if now >= until {
                // Someone still holds a pipe: if it is ours, stop it; otherwise give up.
                self.phase = if self.tree_left() {
                    Phase::TearingDown
                } else {
                    Phase::Done
                };
            }
        }
    }

    /// What is left once the command's pipes were done ([`Output::ListLeftovers`]): kept if
    /// the leftovers rule says so, stopped otherwise.
    pub(super) fn leftovers_listed(&mut self, pids: Vec<i32>) {
        if self.phase != Phase::Counting {
            return;
        }
        self.phase = Phase::TearingDown;
        if !self.keep_leftovers(pids) {
            self.start_stop(Origin::Leftovers);
        }
    }

    pub fn is_done(&self) -> bool {
        self.phase == Phase::Done
    }
}
