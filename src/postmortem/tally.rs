//! How a session's commands ended, counted: what `tether sessions` says of each session
//! instead of one word per command.

use crate::model::{CommandState, Status};

/// Which count a command goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Starting, running, stopped or stopping: its broker is still at it.
    Running,
    /// Exit 0, or stopped after its final line (`drain_on`).
    Ok,
    /// A non-zero exit, a command that could not start, or one whose broker vanished.
    Failed,
    /// Ended by a signal, killed by the watchdog (no output for too long) or hard-killed.
    Killed,
    /// Stopped or signalled by the operator (or the agent, through the shim), however it
    /// then ended: their doing, not a failure.
    Stopped,
    /// Never started (configured, not launched).
    Idle,
    /// Never started: the launcher would not start it (a dependency failed).
    Blocked,
}

impl Outcome {
    pub fn of(command: &CommandState) -> Outcome {
        use crate::model::ending::{Count, Ending};
        match Ending::of(command) {
            // The same rule as the words every view shows for the ending.
            Some(ending) => match ending.count() {
                Count::Ok => Outcome::Ok,
                Count::Failed => Outcome::Failed,
                Count::Killed => Outcome::Killed,
                Count::Stopped => Outcome::Stopped,
            },
            None if command.status == Status::Idle
                && command.plan.as_ref().is_some_and(|p| p.is_failure()) =>
            {
                Outcome::Blocked
            }
            None if command.status == Status::Idle => Outcome::Idle,
            None => Outcome::Running,
        }
    }

    /// Whether the command is one of the session's failures (`tether sessions` names them).
    pub fn is_failure(self) -> bool {
        matches!(self, Outcome::Failed | Outcome::Killed)
    }
}

/// The counts of one session.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    pub total: usize,
    pub running: usize,
    pub ok: usize,
    pub failed: usize,
    pub killed: usize,
    pub stopped: usize,
    pub blocked: usize,
}

impl Tally {
    pub fn of<'a>(commands: impl IntoIterator<Item = &'a CommandState>) -> Tally {
        let mut tally = Tally::default();
        for command in commands {
            tally.total += 1;
            match Outcome::of(command) {
                Outcome::Running => tally.running += 1,
                Outcome::Ok => tally.ok += 1,
                Outcome::Failed => tally.failed += 1,
                Outcome::Killed => tally.killed += 1,
                Outcome::Stopped => tally.stopped += 1,
                Outcome::Blocked => tally.blocked += 1,
                Outcome::Idle => {}
            }
        }
        tally
    }

    /// `31 cmds: 27 ok, 3 failed, 1 killed, 2 running`: ok and failed always (a session
    /// without failures says so), killed, stopped, running and blocked (never started, a
    /// dependency having failed) when there are any.
    pub fn words(&self) -> String {
        let mut words = format!(
            "{} cmd{}: {} ok, {} failed",
            self.total,
            if self.total == 1 { "" } else { "s" },
            self.ok,
            self.failed
        );
        let counts = [self.killed, self.stopped, self.running, self.blocked];
        for (n, word) in counts
            .into_iter()
            .zip(["killed", "stopped", "running", "blocked"])
        {
            if n > 0 {
                words.push_str(&format!(", {n} {word}"));
            }
        }
        words
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Scope::Group;
    use crate::protocol::fixtures::{event, signal_sent};
    use crate::protocol::{EventKind, ExitStatus, Origin, ProcessSignal};

    fn ended(code: Option<i32>, signal: Option<i32>) -> CommandState {
        CommandState::ended_for_test(code, signal)
    }

    #[test]
    fn the_list_and_the_tally_count_the_same_failures() {
        let mut timed_out = ended(Some(0), None);
        timed_out.response_timeout = true;
        let mut hard_killed = ended(Some(143), None);
        hard_killed.hard_killed = true;
        let mut drained = ended(None, Some(15));
        drained.drained = true;
        let mut running = ended(None, None);
        running.status = Status::Running;
        let mut idle = ended(None, None);
        idle.status = Status::Idle;
        let mut lost = ended(None, None);
        lost.status = Status::Lost;
        for command in [
            ended(Some(0), None),
            ended(Some(3), None),
            ended(None, Some(9)),
            timed_out,
            hard_killed,
            drained,
            running,
            idle,
            lost,
        ] {
            assert_eq!(
                command.is_failure(),
                Outcome::of(&command).is_failure(),
                "{:?} (timeout {}, hard kill {}, drained {})",
                command.status,
                command.response_timeout,
                command.hard_killed,
                command.drained
            );
        }
    }

    #[test]
    fn each_ending_has_its_count() {
        let mut timed_out = ended(Some(0), None);
        timed_out.response_timeout = true;
        let mut running = ended(None, None);
        running.status = Status::Running;
        let mut lost = ended(None, None);
        lost.status = Status::Lost;
        let commands = [
            ended(Some(0), None),
            ended(Some(0), None),
            ended(Some(3), None),
            ended(None, Some(9)),
            timed_out,
            running,
            lost,
        ];
        let tally = Tally::of(&commands);
        assert_eq!(
            tally,
            Tally {
                total: 7,
                running: 1,
                ok: 2,
                failed: 2,
                killed: 2,
                stopped: 0,
                blocked: 0,
            }
        );
        assert_eq!(tally.words(), "7 cmds: 2 ok, 2 failed, 2 killed, 1 running");
        assert_eq!(Tally::of(&commands[..1]).words(), "1 cmd: 1 ok, 0 failed");
    }

    #[test]
    fn a_command_the_operator_stopped_is_no_failure() {
        // The signal, then the exit it ended in, as a journal has them.
        let signalled = |origin, signal: &str| {
            let mut command = ended(None, None);
            command.status = Status::Running;
            command.apply(&event(
                1,
                signal_sent(signal.parse().expect("a signal"), Group, origin, 1),
            ));
            command.apply(&event(
                2,
                EventKind::Exit {
                    pid: 1,
                    status: ExitStatus {
                        code: None,
                        signal: Some(15),
                        core_dumped: false,
                    },
                },
            ));
            command
        };
        let by_hand = signalled(Origin::Operator, "TERM");
        assert_eq!(Outcome::of(&by_hand), Outcome::Stopped);
        assert!(!by_hand.is_failure());
        let by_agent = signalled(Origin::Caller, "INT");
        assert!(!by_agent.is_failure());
        // A signal that ends nothing by default is no stop: what follows is the command's.
        assert!(signalled(Origin::Operator, "USR1").is_failure());
        assert!(signalled(Origin::Watchdog, "TERM").is_failure());
        // After the command's end, a signal to what it left changes nothing.
        let mut late = ended(None, Some(15));
        late.ended_ms = Some(1);
        late.apply(&event(
            2,
            signal_sent(ProcessSignal::TERM, Group, Origin::Caller, 1),
        ));
        assert!(late.is_failure());
        let tally = Tally::of([&by_hand, &by_agent]);
        assert_eq!(tally.words(), "2 cmds: 0 ok, 0 failed, 2 stopped");
    }

    #[test]
    fn a_drained_command_counts_as_ok() {
        let mut drained = ended(None, Some(15));
        drained.apply(&event(
            1,
            signal_sent(ProcessSignal::TERM, Group, Origin::FinalDrain, 1),
        ));
        assert_eq!(Outcome::of(&drained), Outcome::Ok);
        let badges = crate::model::Badges::of(&drained);
        assert!(badges.drained && !badges.stragglers, "{badges:?}");
        assert_eq!(
            badges.list().iter().map(|b| b.label()).collect::<Vec<_>>(),
            ["drained"]
        );
    }

    /// A command the launcher never started, its dependency having failed, is counted as
    /// blocked; one merely configured and never started is not counted at all.
    #[test]
    fn a_command_blocked_by_a_failed_dependency_is_counted_as_blocked() {
        let mut blocked = ended(None, None);
        blocked.status = Status::Idle;
        blocked.plan = Some(crate::model::Plan::Blocked("migrate: exit 1".into()));
        let mut idle = ended(None, None);
        idle.status = Status::Idle;
        assert_eq!(Outcome::of(&blocked), Outcome::Blocked);
        assert!(!Outcome::of(&blocked).is_failure());
        let tally = Tally::of([&ended(Some(1), None), &blocked, &idle]);
        assert_eq!(tally.words(), "3 cmds: 0 ok, 1 failed, 1 blocked");
    }
}
