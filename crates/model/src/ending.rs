//! How a run ended, named once: the words every view uses for it (the command list, the
//! timeline's `exit` row, the status bar, `tether sessions`, `tether ps`, the exports), and
//! which of `tether sessions`' counts it goes to. A view that names an ending some other
//! way is a view that can say `failed` where another says `killed`.
//!
//! The words, by what decided the end (first that applies):
//!
//! | ending | words | list | counted as |
//! |---|---|---|---|
//! | stopped after its final line (`drain_on`) | `finished` | `finished` | ok |
//! | stopped by the operator (a key, `tether stop`, quitting the TUI) or the agent, or ended by a signal of theirs (`tether_core::by_hand`) | `stopped (SIGTERM)`, `stopped (exit 143)` | `stopped` | stopped |
//! | stopped by the TUI's launcher to start it again (`restart_on_change`) | `restarted (file changed)` | `restarted` | stopped |
//! | a budget's stop | `over budget (max_cpu)` | `over budget` | killed |
//! | the no-output watchdog | `timed out (SIGKILL)` | `timed out` | killed |
//! | its front end died (`parent_lost`) | `parent lost (SIGTERM)` | `parent lost` | killed |
//! | SIGKILL after a stop's grace | `killed (SIGKILL)`, `killed (exit 143)` | `killed` | killed |
//! | its own exit | `exit 0`, `exit 3` | same | ok, failed |
//! | a signal nobody here sent | `killed (SIGSEGV)`, `killed (SIGSEGV, core dumped)` | `killed` | killed |
//! | could not be started | `failed to start` | same | failed |
//! | its broker vanished | `lost` | `lost` | failed |

use tether_protocol::protocol::{Budget, Event, ExitStatus, Origin};

use super::command::{CommandState, Status, exit_label, signal_label};

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// Stopped by tether after it printed its final line (`drain_on`): its work was done.
    Finished,
    /// Stopped (or ended by a signal sent) by the operator (quitting the TUI included) or,
    /// through the shim, the agent: `tether_core::by_hand::SignalsByHand` says when a signal
    /// ended it, for the broker's attention too.
    Stopped(ExitStatus),
    /// Stopped by the TUI's launcher to start it again, because a file that its
    /// `restart_on_change` watches changed: not a failure, nor the operator's stop.
    Restarted,
    /// A budget's stop (`max_time`, `max_cpu`, `max_output`).
    OverBudget(Budget),
    /// The no-output watchdog stopped it.
    TimedOut(ExitStatus),
    /// Its front end died and the broker stopped it.
    ParentLost(ExitStatus),
    /// A stop ended in SIGKILL after its grace, for none of the reasons above.
    HardKilled(ExitStatus),
    /// It exited with this code.
    Exited(i32),
    /// A signal nobody here sent ended it (a crash, the OOM killer, someone's `kill`).
    Killed {
        signal: i32,
        core_dumped: bool,
    },
    /// Neither a code nor a signal: nothing says how.
    Ended,
    FailedToStart,
    /// Its broker vanished without saying how it ended.
    Lost,
}

/// Which of `tether sessions`' counts an ending goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Count {
    Ok,
    Failed,
    Killed,
    Stopped,
}

impl Ending {
    /// How `command`'s run ended; `None` while it has not (idle, starting, running, paused,
    /// stopping, or its leftovers still kept).
    pub fn of(command: &CommandState) -> Option<Ending> {
        let exit = match command.status {
            Status::Exited(exit) => exit,
            Status::FailedToStart => return Some(Ending::FailedToStart),
            Status::Lost => return Some(Ending::Lost),
            _ => return None,
        };
        Some(if command.drained {
            Ending::Finished
        } else if command.last_stop == Some(Origin::FileChanged) {
            // The launcher's stop for a changed file ended it, and it starts again, whatever
            // signal someone sent before (a stop of theirs would have taken this one over).
            Ending::Restarted
        } else if command.stopped_by_hand {
            Ending::Stopped(exit)
        } else if command.restarted_for_change {
            Ending::Restarted
        } else if let Some(budget) = command.over_budget {
            Ending::OverBudget(budget)
        } else if command.response_timeout {
            Ending::TimedOut(exit)
        } else if command.parent_lost.is_some() {
            Ending::ParentLost(exit)
        } else if command.hard_killed {
            Ending::HardKilled(exit)
        } else {
            match (exit.code, exit.signal) {
                (Some(code), _) => Ending::Exited(code),
                (None, Some(signal)) => Ending::Killed {
                    signal,
                    core_dumped: exit.core_dumped,
                },
                (None, None) => Ending::Ended,
            }
        })
    }

    /// How the run that `events` tell of ended, read as [`Ending::of`] reads a command: for a
    /// front end that has only a run's events (`tether stop` following a broker, a journal).
    pub fn of_events(events: &[Event]) -> Option<Ending> {
        let mut run = CommandState::default();
        for event in events {
            run.apply(event);
        }
        Ending::of(&run)
    }

    /// The words for it, whole: `killed (SIGSEGV)`, `over budget (max_cpu)`, `exit 3`.
    pub fn words(self) -> String {
        match self {
            Ending::Finished => "finished".into(),
            Ending::Stopped(exit) => format!("stopped ({})", exit_label(exit)),
            Ending::Restarted => "restarted (file changed)".into(),
            Ending::OverBudget(budget) => budget.ended_words(),
            Ending::TimedOut(exit) => format!("timed out ({})", exit_label(exit)),
            Ending::ParentLost(exit) => format!("parent lost ({})", exit_label(exit)),
            Ending::HardKilled(exit) => format!("killed ({})", exit_label(exit)),
            Ending::Exited(code) => format!("exit {code}"),
            Ending::Killed {
                signal,
                core_dumped: false,
            } => format!("killed ({})", signal_label(signal)),
            Ending::Killed {
                signal,
                core_dumped: true,
            } => format!("killed ({}, core dumped)", signal_label(signal)),
            Ending::Ended => "ended".into(),
            Ending::FailedToStart => "failed to start".into(),
            Ending::Lost => "lost".into(),
        }
    }

    /// The words without what is in brackets: what the command list's narrow state column
    /// shows (`killed`, `timed out`, `exit 3`).
    pub fn short_words(self) -> String {
        let words = self.words();
        match words.split_once(" (") {
            Some((lead, _)) => lead.to_string(),
            None => words,
        }
    }

    pub fn count(self) -> Count {
        match self {
            Ending::Finished | Ending::Exited(0) => Count::Ok,
            Ending::Exited(_) | Ending::Ended | Ending::FailedToStart | Ending::Lost => {
                Count::Failed
            }
            Ending::Stopped(_) | Ending::Restarted => Count::Stopped,
            Ending::OverBudget(_)
            | Ending::TimedOut(_)
            | Ending::ParentLost(_)
            | Ending::HardKilled(_)
            | Ending::Killed { .. } => Count::Killed,
        }
    }
}

impl CommandState {
    /// What the run is doing (`ready` or `not ready` while it runs, once its readiness probe
    /// decided), or how it ended ([`Ending::words`]): the state every view but the command
    /// list shows.
    pub fn state_words(&self) -> String {
        Ending::of(self).map_or_else(
            || {
                self.ready_word()
                    .map_or_else(|| self.status.label(), str::to_string)
            },
            Ending::words,
        )
    }

    /// [`CommandState::state_words`] for the command list's state column.
    pub fn short_state_words(&self) -> String {
        Ending::of(self).map_or_else(
            || {
                self.ready_word()
                    .map_or_else(|| self.status.short_label(), str::to_string)
            },
            Ending::short_words,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ended(code: Option<i32>, signal: Option<i32>) -> CommandState {
        CommandState::ended_for_test(code, signal)
    }

    #[test]
    fn each_ending_has_its_words_and_its_count() {
        let mut by_hand = ended(None, Some(2));
        by_hand.stopped_by_hand = true;
        let mut timed_out = ended(Some(143), None);
        timed_out.response_timeout = true;
        let mut budget = ended(None, Some(15));
        budget.over_budget = Some(Budget::Cpu);
        budget.response_timeout = true;
        let mut drained = ended(None, Some(15));
        drained.drained = true;
        let mut hard = ended(None, Some(9));
        hard.hard_killed = true;
        let mut missing = ended(None, None);
        missing.status = Status::FailedToStart;
        let cases = [
            (ended(Some(0), None), "exit 0", "exit 0", Count::Ok),
            (ended(Some(3), None), "exit 3", "exit 3", Count::Failed),
            (
                ended(None, Some(11)),
                "killed (SIGSEGV)",
                "killed",
                Count::Killed,
            ),
            (by_hand, "stopped (SIGINT)", "stopped", Count::Stopped),
            (
                timed_out,
                "timed out (exit 143)",
                "timed out",
                Count::Killed,
            ),
            (
                budget,
                "over budget (max_cpu)",
                "over budget",
                Count::Killed,
            ),
            (drained, "finished", "finished", Count::Ok),
            (hard, "killed (SIGKILL)", "killed", Count::Killed),
            (missing, "failed to start", "failed to start", Count::Failed),
        ];
        for (command, words, short, count) in cases {
            let ending = Ending::of(&command).expect("ended");
            assert_eq!(
                (ending.words(), ending.short_words(), ending.count()),
                (words.to_string(), short.to_string(), count)
            );
            assert_eq!(command.state_words(), words);
        }
        let mut running = ended(None, None);
        running.status = Status::Running;
        assert_eq!(Ending::of(&running), None);
        assert_eq!(running.state_words(), "running");
    }

    #[test]
    fn the_events_of_a_run_tell_how_it_ended() {
        use tether_protocol::protocol::fixtures::{event, signal_sent, spawned};
        use tether_protocol::protocol::{EventKind, Origin, ProcessSignal, Scope};
        let term = || {
            event(
                10,
                signal_sent(ProcessSignal::TERM, Scope::Group, Origin::Operator, 7),
            )
        };
        let exit = |code, signal| {
            event(
                30,
                EventKind::Exit {
                    pid: 7,
                    status: ExitStatus {
                        code,
                        signal,
                        core_dumped: false,
                    },
                },
            )
        };
        let stop = [event(0, spawned(7)), term(), exit(None, Some(15))];
        let words = |events: &[Event]| Ending::of_events(events).map(Ending::words);
        assert_eq!(words(&stop), Some("stopped (SIGTERM)".into()));
        // What a subscriber sees of a stop, without the start before it.
        assert_eq!(words(&stop[1..]), Some("stopped (SIGTERM)".into()));
        let trapped = [event(0, spawned(7)), term(), exit(Some(143), None)];
        assert_eq!(words(&trapped), Some("stopped (exit 143)".into()));
        assert_eq!(
            words(&[event(0, spawned(7)), exit(Some(1), None)]),
            Some("exit 1".into())
        );
        assert_eq!(words(&stop[..2]), None, "not ended yet");
    }

    /// A signal of the operator's to one worker of the command (`x` in the tree) made its end
    /// theirs when the end carries it, as the broker's attention decides (`SignalsByHand`):
    /// `sh` exiting 143 after its python was sent TERM was stopped; a command that went on
    /// after a HUP to a worker and failed later failed.
    #[test]
    fn a_signal_to_a_worker_is_the_end_s_cause_only_when_the_end_carries_it() {
        use tether_protocol::protocol::fixtures::{event, signal_sent, spawned};
        use tether_protocol::protocol::{EventKind, ProcessSignal, Scope};
        let run = |signal, to: i32, code| {
            let exit = EventKind::Exit {
                pid: 7,
                status: ExitStatus {
                    code: Some(code),
                    signal: None,
                    core_dumped: false,
                },
            };
            let events = [
                event(0, spawned(7)),
                event(10, signal_sent(signal, Scope::Pid, Origin::Operator, to)),
                event(30, exit),
            ];
            let ending = Ending::of_events(&events).expect("ended");
            (ending.words(), ending.count())
        };
        assert_eq!(
            run(ProcessSignal::TERM, 8, 143),
            ("stopped (exit 143)".into(), Count::Stopped)
        );
        assert_eq!(
            run(ProcessSignal::HUP, 8, 1),
            ("exit 1".into(), Count::Failed)
        );
        // To the main process itself: whatever it then does is the operator's doing.
        assert_eq!(
            run(ProcessSignal::TERM, 7, 1),
            ("stopped (exit 1)".into(), Count::Stopped)
        );
    }

    /// The launcher's restart on a changed file reads as that, not as the operator's stop;
    /// a journal from before `file_changed` (origin `operator`) reads as it always did.
    #[test]
    fn a_restart_for_a_changed_file_reads_as_one() {
        use std::time::Duration;
        use tether_protocol::protocol::fixtures::{event, signal_sent, spawned};
        use tether_protocol::protocol::{EventKind, Origin, ProcessSignal, Scope};
        let run = |origin| {
            [
                event(0, spawned(7)),
                event(
                    10,
                    EventKind::StopStarted {
                        origin,
                        grace: Duration::from_secs(2),
                    },
                ),
                event(
                    10,
                    signal_sent(ProcessSignal::TERM, Scope::Group, origin, 7),
                ),
                event(
                    20,
                    EventKind::Exit {
                        pid: 7,
                        status: ExitStatus {
                            code: None,
                            signal: Some(15),
                            core_dumped: false,
                        },
                    },
                ),
            ]
        };
        let restarted = Ending::of_events(&run(Origin::FileChanged)).expect("ended");
        assert_eq!(restarted, Ending::Restarted);
        assert_eq!(
            (
                restarted.words(),
                restarted.short_words(),
                restarted.count()
            ),
            (
                "restarted (file changed)".into(),
                "restarted".into(),
                Count::Stopped
            )
        );
        let old = Ending::of_events(&run(Origin::Operator)).expect("ended");
        assert_eq!(old.words(), "stopped (SIGTERM)");
        // A signal of the operator's during the change's stop (`K`) does not call the restart
        // off: the run reads restarted, as the launcher then restarts it.
        let mut both = run(Origin::FileChanged).to_vec();
        both.insert(
            2,
            event(
                10,
                signal_sent(ProcessSignal::KILL, Scope::Group, Origin::Operator, 7),
            ),
        );
        assert_eq!(
            Ending::of_events(&both).map(Ending::words),
            Some("restarted (file changed)".into())
        );
        // As the broker journals the operator's stop taking over the change's.
        let mut taken_over = run(Origin::FileChanged).to_vec();
        taken_over.insert(
            3,
            event(
                15,
                EventKind::StopStarted {
                    origin: Origin::Operator,
                    grace: Duration::from_secs(2),
                },
            ),
        );
        assert_eq!(
            Ending::of_events(&taken_over).map(Ending::words),
            Some("stopped (SIGTERM)".into())
        );
    }
}
