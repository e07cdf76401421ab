//! The runner's side of the launcher (`tether_core::launcher`): what the fleet and the
//! operator did, handed to it with the time; what it decides, carried out (a launch, a stop,
//! a failure told); and its word on each command copied into the model for the list.

use std::time::Instant;

use tether_core::launcher::{Action as LaunchAction, Ending, Input, State};

use super::runner::Runner;
use tether_frontend::supervisor::Session;
use tether_model::command::AttentionMark;
use tether_model::ending::Count;
use tether_model::plan;
use tether_model::{self as model, CommandIndex, CommandState, Plan, Status};
use tether_os::clock::now_ms;
use tether_os::journal::LauncherLine;
use tether_os::journal::writer::LAUNCHER_FILE;
use tether_protocol::protocol::{AttentionKind, Event, EventKind, Origin, Request};

impl Runner {
    /// Hands the launcher what happened and carries out what it decides.
    pub(super) fn drive(&mut self, input: Input) {
        let now = Instant::now();
        let mut inputs = vec![input];
        while let Some(input) = inputs.pop() {
            self.launcher.handle(input, now);
            self.carry_out(&mut inputs);
        }
        self.copy_plans(now);
    }

    /// Carries out the launcher's actions; a launch that could not even begin (no journal
    /// directory) is an input for it in turn.
    fn carry_out(&mut self, inputs: &mut Vec<Input>) {
        while let Some(action) = self.launcher.poll_action() {
            match action {
                LaunchAction::Launch { command, run } => {
                    if !self.launch(command, run) {
                        let how = Ending::FailedToStart;
                        inputs.push(Input::Ended { command, how });
                    }
                }
                LaunchAction::Stop { command } | LaunchAction::Restart { command } => {
                    let origin = Some(match action {
                        LaunchAction::Restart { .. } => Origin::FileChanged,
                        _ if self.app.view.quitting => Origin::Shutdown,
                        _ => Origin::Operator,
                    });
                    self.fleet.send(command, Request::Stop { origin });
                }
                LaunchAction::Fail { command, reason } => self.told_failed(command, reason),
                LaunchAction::Report { text, .. } => self.app.view.say(text),
            }
        }
    }

    /// What an event of the current run means to the launcher, after the model applied it:
    /// `before` was the command's status then.
    pub(super) fn run_event(&mut self, command: CommandIndex, before: Status, event: &Event) {
        let input = match &event.kind {
            EventKind::Spawned { .. } => Some(Input::Spawned(command)),
            EventKind::Ready { .. } => Some(Input::Ready(command)),
            EventKind::NotReady { after_ms, .. } => Some(Input::NotReady {
                command,
                after: std::time::Duration::from_millis(*after_ms),
            }),
            _ => None,
        };
        if let Some(input) = input {
            self.drive(input);
        }
        self.maybe_ended(command, before);
    }

    /// A run that was under way and no longer is (its exit once custody of its leftovers
    /// ended, a start that failed, a broker lost) has ended, for the launcher.
    pub(super) fn maybe_ended(&mut self, command: CommandIndex, before: Status) {
        let Some(c) = self.app.model.commands.get(command) else {
            return;
        };
        if !before.is_active() || c.status.is_active() {
            return;
        }
        let how = launcher_ending(c);
        self.drive(Input::Ended { command, how });
    }

    /// A command that will not run (again) on its own: the operator is told, as of a
    /// failure (the attention `failed` that the status bar and notifications raise).
    fn told_failed(&mut self, command: CommandIndex, reason: String) {
        let Some(c) = self.app.model.commands.get_mut(command) else {
            return;
        };
        let text = format!("{}: {reason}", c.config.name);
        c.mark_attention(AttentionMark {
            kind: AttentionKind::Failed,
            detail: reason,
            at_ms: now_ms(),
            active: true,
        });
        self.app.view.say(text);
    }

    /// The launcher's word on each command, for the list and the timeline, and journaled
    /// where it changed.
    fn copy_plans(&mut self, now: Instant) {
        let now_ms = now_ms();
        for (i, c) in self.app.model.commands.iter_mut().enumerate() {
            let plan = match self.launcher.state(i) {
                State::Waiting { on, not_started } => Some(Plan::Waiting {
                    on: on.to_string(),
                    not_started,
                }),
                State::Restarting { at, run } => Some(Plan::Restarting {
                    at_ms: now_ms + at.saturating_duration_since(now).as_millis() as u64,
                    run,
                }),
                State::GaveUp { restarts } => Some(Plan::GaveUp { restarts }),
                State::Blocked(why) => Some(Plan::Blocked(why.to_string())),
                State::Idle | State::Running | State::Ended => None,
            };
            if let Some(session) = &self.session
                && let Err(err) = self.plans.note(session, now_ms, c, plan.as_ref())
            {
                self.app.view.say(err);
            }
            c.plan = plan;
        }
    }
}

/// Whether two plans say the same: a restart's time, counted again at each step from the
/// launcher's clock, may move by a millisecond.
fn same_plan(a: Option<&Plan>, b: Option<&Plan>) -> bool {
    match (a, b) {
        (Some(Plan::Restarting { run: a, .. }), Some(Plan::Restarting { run: b, .. })) => a == b,
        _ => a == b,
    }
}

/// The session's `launcher.jsonl`, opened at its first line.
#[derive(Default)]
pub(super) struct PlanJournal {
    file: Option<std::fs::File>,
    /// What it last said of each command, by name: a run that begins is a new row whose plan
    /// was never set, so the rows cannot say what changed.
    said: std::collections::HashMap<String, Option<Plan>>,
    /// Writing failed once (said then): nothing more is tried.
    failed: bool,
}

impl PlanJournal {
    /// Journals `plan` for `command` at `now_ms` if it is not what was said of it last.
    fn note(
        &mut self,
        session: &Session,
        now_ms: u64,
        command: &CommandState,
        plan: Option<&Plan>,
    ) -> Result<(), String> {
        let name = &command.config.name;
        // Nothing said yet reads as no plan: a command that starts at once says nothing.
        let first = !self.said.contains_key(name);
        let said = self.said.get(name).and_then(Option::as_ref);
        if same_plan(said, plan) {
            return Ok(());
        }
        self.said.insert(name.clone(), plan.cloned());
        self.write(session, &plan::line(now_ms, command, plan, first))
    }

    /// Appends `line`; the first failure is returned, to be said, and later lines are dropped.
    fn write(&mut self, session: &Session, line: &LauncherLine) -> Result<(), String> {
        use std::io::Write;
        if self.failed {
            return Ok(());
        }
        let written = (|| {
            if self.file.is_none() {
                let file = match session.dir.create_file(LAUNCHER_FILE, true) {
                    // Another tether's, of a named session this one joined: appended to only
                    // if it is a file of ours with one name (`open_append`).
                    Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => {
                        session.dir.open_append(LAUNCHER_FILE)
                    }
                    file => file,
                }?;
                self.file = Some(file);
            }
            let mut bytes = serde_json::to_vec(line).map_err(std::io::Error::other)?;
            bytes.push(b'\n');
            // One write, O_APPEND: a line is never split by another's.
            self.file.as_mut().map_or(Ok(()), |f| f.write_all(&bytes))
        })();
        written.map_err(|err| {
            self.failed = true;
            format!(
                "cannot journal the launcher's plans in {}: {err}; `tether open`, `tether watch` and the exports will miss what it says from now on",
                session.path().display()
            )
        })
    }
}

/// How a run that ended ended, for the launcher: in the words every view uses, and a
/// success only as `tether sessions` counts one (an exit 0, or `finished`: stopped by
/// `drain_on` after its final line). A run the operator stopped is no success, whatever its
/// code.
fn launcher_ending(c: &CommandState) -> Ending {
    let ending = model::Ending::of(c);
    match ending {
        Some(model::Ending::FailedToStart) => Ending::FailedToStart,
        _ => Ending::Exited {
            done: ending.is_some_and(|e| e.count() == Count::Ok),
            by_operator: c.ended_by_hand(),
            words: ending.map_or_else(|| "ended".into(), model::Ending::words),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tether_config::CommandConfig;
    use tether_protocol::protocol::{CommandSpec, ExitStatus};

    fn ended(code: Option<i32>, signal: Option<i32>) -> CommandState {
        let mut c = CommandState::new(CommandConfig::new("x", CommandSpec::Argv(vec!["x".into()])));
        c.status = Status::Exited(ExitStatus {
            code,
            signal,
            core_dumped: false,
        });
        c
    }

    fn exited(done: bool, by_operator: bool, words: &str) -> Ending {
        Ending::Exited {
            done,
            by_operator,
            words: words.into(),
        }
    }

    #[test]
    fn the_launcher_hears_of_an_ending_as_every_view_names_it() {
        let mut drained = ended(None, Some(15));
        drained.drained = true;
        let mut stopped_0 = ended(Some(0), None);
        stopped_0.stopped_by_hand = true;
        let mut missing = ended(None, None);
        missing.status = Status::FailedToStart;
        let cases = [
            (ended(Some(0), None), exited(true, false, "exit 0")),
            (ended(Some(1), None), exited(false, false, "exit 1")),
            (
                ended(None, Some(9)),
                exited(false, false, "killed (SIGKILL)"),
            ),
            (drained, exited(true, false, "finished")),
            (stopped_0, exited(false, true, "stopped (exit 0)")),
            (missing, Ending::FailedToStart),
        ];
        for (command, want) in cases {
            assert_eq!(launcher_ending(&command), want);
        }
    }

    /// A signal the run survived (the operator's `HUP` to reload) does not make the launcher's
    /// own stop for a changed file the operator's: it still restarts. A stop that took the
    /// change's over is the operator's.
    #[test]
    fn the_stop_that_ended_the_run_says_whose_end_it_was() {
        use tether_protocol::protocol::Origin;
        let mut reloaded = ended(None, Some(15));
        reloaded.stopped_by_hand = true;
        reloaded.last_stop = Some(Origin::FileChanged);
        assert!(!launcher_ending(&reloaded).by_operator());
        let mut taken_over = reloaded.clone();
        taken_over.last_stop = Some(Origin::Operator);
        assert!(launcher_ending(&taken_over).by_operator());
        let mut signalled = ended(None, Some(15));
        signalled.stopped_by_hand = true;
        assert!(launcher_ending(&signalled).by_operator(), "`t`: no stop");
    }
}
