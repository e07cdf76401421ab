//! The TUI's runner: the app and what it drives outside it (the brokers of its session, the
//! watch over commands started elsewhere, the journals it follows), and the effects of
//! `update` carried out.

use std::collections::HashMap;
use std::io::Stdout;
use std::path::PathBuf;
use std::time::Duration;

use crossterm::event::{Event as TermEvent, KeyEventKind, MouseEventKind};
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use tokio::time::Instant;

use super::App;
use super::action::Action;
use super::changes::ChangeWatcher;
use super::input_batch::InputBatch;
use super::keymap::action_for;
use super::tell::Teller;
use super::update::{Effect, refusal};
use super::watch::Watch;
use tether_core::launcher::{Input, Launcher};
use tether_frontend::supervisor::Session;
use tether_frontend::supervisor::fleet::{Fleet, FleetEvent, RunId};
use tether_frontend::supervisor::intervals::{Pace, grace};
use tether_frontend::supervisor::launch_request;
use tether_model::replay::{broker_alive, reload_from_record};
use tether_model::{CommandState, Status};
use tether_os::clock::now_ms;
use tether_os::journal::{CommandRecord, EventTail};
use tether_protocol::protocol::{
    EventKind, LaunchRequest, Origin, Request, StdinSource, TerminalRequest, WindowSize,
    input_requests,
};

/// After asking every broker to stop, how long to wait beyond the longest grace (a broker
/// that does not acknowledge the stop is killed after a second and its leftovers stopped).
const QUIT_SLACK: Duration = Duration::from_secs(3);
pub(super) struct Runner {
    pub(super) app: App,
    /// Where new runs are journaled; `None` for a recorded session.
    pub(super) session: Option<Session>,
    pub(super) fleet: Fleet,
    /// Commands started elsewhere, followed and signalled through their sockets.
    pub(super) watch: Option<Watch>,
    /// What needs the operator, told while the window may not be looked at.
    pub(super) teller: Teller,
    /// Where reading each followed journal left off.
    pub(super) tails: HashMap<PathBuf, EventTail>,
    pub(super) quit_deadline: Option<Instant>,
    /// The terminal size last asked of each run's broker.
    pub(super) sizes_sent: HashMap<RunId, WindowSize>,
    /// Quitting could not wait any longer for the brokers: they are being killed.
    pub(super) aborted: bool,
    pub(super) quit_now: bool,
    /// When each command starts, waits, restarts; in which order they stop.
    pub(super) launcher: Launcher,
    /// Files that restart commands when they change (`restart_on_change`).
    pub(super) changes: Option<ChangeWatcher>,
    /// Where the launcher's word on each command is journaled as it changes.
    pub(super) plans: super::launcher::PlanJournal,
}

impl Runner {
    /// Starts run `run` of command `id`, as the launcher decided; false if it could not
    /// begin (the operator is told why).
    pub(super) fn launch(&mut self, id: usize, run: u32) -> bool {
        let (Some(command), Some(session)) =
            (self.app.model.commands.get_mut(id), self.session.as_mut())
        else {
            return false;
        };
        let (command_id, journal) = match session.next_command_dir(&command.config.name) {
            Ok(made) => made,
            Err(err) => {
                let text = format!(
                    "cannot create a journal directory in {}: {err}; the command was not started",
                    session.path().display()
                );
                command.start_failed(now_ms(), text.clone());
                command.run = run;
                self.app.view.say(text);
                return false;
            }
        };
        let dir = journal.path().to_path_buf();
        command.begin_run(dir.clone(), now_ms());
        // The launcher counts the runs; the model's count follows it.
        command.run = run;
        let config = &command.config;
        let (user, config_error) = tether_config::user::for_launch();
        let attention = tether_config::attention::with_user(&user, &config.attention);
        let (max_output, ignored) = tether_config::journal::max_output(None, &user.journal);
        let (budgets, budgets_ignored) =
            tether_config::budgets::for_launch(config.budgets, &user.budgets, true);
        if let Some(err) = config_error {
            self.app
                .view
                .say(format!("{err}; attention and budgets use their defaults"));
        } else if let Some(message) = ignored.into_iter().chain(budgets_ignored).next() {
            self.app.view.say(message);
        }
        let request = LaunchRequest {
            // None: the broker inherits the TUI's working directory.
            cwd: config.cwd.clone(),
            env: config.env.clone(),
            grace: grace(config.grace),
            no_output_timeout: config.no_output_timeout,
            drain_on: config.drain_on.clone(),
            drain: config.drain,
            ready: config.ready.as_deref().cloned(),
            // With terminals, stdin is stdout's: the operator types into it with `i`.
            stdin: if config.pty {
                StdinSource::Terminal
            } else {
                StdinSource::Null
            },
            terminal: config.pty.then_some(TerminalRequest {
                stdout: true,
                stderr: true,
                size: self.app.terminal_size,
            }),
            limits: config.limits,
            attention,
            max_output,
            budgets,
            run,
            // The TUI's commands end with their processes, as configured (the default
            // leftovers rule), and are the operator's: only `tether exec` and the shim
            // stand in for a caller's shell and join its trace.
            ..launch_request(
                config.name.clone(),
                config.command.clone(),
                &dir,
                session.reference(&command_id),
                Pace::FLEET,
            )
        };
        self.fleet.launch(
            RunId {
                command: id,
                run: command.run,
            },
            request,
            journal,
        );
        true
    }

    /// Gives the terminals of running commands the size of the output pane, once per change.
    pub(super) fn sync_terminal_sizes(&mut self) {
        if self.session.is_none() {
            return;
        }
        let size = self.app.terminal_size;
        for (id, command) in self.app.model.commands.iter().enumerate() {
            let Some(terminal) = command.terminal.filter(|_| command.status.is_active()) else {
                continue;
            };
            let run = RunId {
                command: id,
                run: command.run,
            };
            let asked = self.sizes_sent.get(&run).copied().unwrap_or(terminal.size);
            if asked != size && self.fleet.send(id, Request::Resize { size }) {
                self.sizes_sent.insert(run, size);
            }
        }
    }

    /// Quits: the launcher stops every command (dependents first with `ordered_shutdown`,
    /// one grace after another) and starts nothing more.
    pub(super) fn stop_all(&mut self) {
        let graces = self
            .app
            .model
            .commands
            .iter()
            .filter(|c| c.status.is_active());
        let graces: Vec<Duration> = graces.map(|c| grace(c.config.grace)).collect();
        let wait = if self.launcher.ordered() {
            graces.iter().sum()
        } else {
            graces.iter().copied().max().unwrap_or_default()
        };
        self.app.view.quitting = true;
        self.drive(Input::Quit);
        // A run the launcher does not know of as running (its broker lost track) is
        // stopped all the same, in either mode: no order waits for it.
        for (id, command) in self.app.model.commands.iter().enumerate() {
            if command.status.is_active() && !self.launcher.is_running(id) {
                let origin = Some(Origin::Shutdown);
                self.fleet.send(id, Request::Stop { origin });
            }
        }
        self.quit_deadline = Some(Instant::now() + wait + QUIT_SLACK);
    }

    pub(super) fn effect(&mut self, effect: Effect) {
        // Refused as the actions that ask for it are, by the same rule.
        let asked_by = match effect {
            Effect::Launch(_) | Effect::Add(_) => Some(Action::Restart),
            Effect::Send(..) => Some(Action::Term),
            Effect::Dismiss(_) => Some(Action::Dismiss),
            _ => None,
        };
        if let Some(refused) = asked_by.and_then(|action| refusal(&self.app.model, &action)) {
            self.app.view.say(refused);
            return;
        }
        match effect {
            Effect::Launch(id) => self.drive(Input::Start(id)),
            Effect::Add(config) => {
                self.app.model.commands.push(CommandState::new(*config));
                let configs: Vec<_> = (self.app.model.commands.iter())
                    .map(|c| c.config.clone())
                    .collect();
                let plan = tether_config::launch::plan(&configs[configs.len() - 1], &configs);
                let id = self.launcher.add(plan);
                self.app.view.select_command(id);
                self.drive(Input::Start(id));
            }
            // The operator's stop goes through the launcher: it stops dependents first
            // (`ordered_shutdown`), and no restart follows it.
            Effect::Send(
                id,
                Request::Stop {
                    origin: Some(Origin::Operator),
                },
            ) if self.watch.is_none() => self.drive(Input::Stop(id)),
            Effect::Input(id, bytes) => {
                // A paste of any size goes in bounded pieces, queued without waiting.
                let delivered = input_requests(&bytes).all(|piece| self.fleet.send(id, piece));
                if !delivered {
                    (self.app.view)
                        .say("that command has no broker any more: the input went nowhere");
                }
            }
            Effect::Send(id, message) if self.watch.is_some() => {
                if let (Some(watch), Some(command)) =
                    (self.watch.as_ref(), self.app.model.commands.get(id))
                {
                    watch.send(command, message);
                }
            }
            Effect::Dismiss(id) => {
                self.app.remove_commands(|i, _| i == id);
            }
            Effect::Send(id, message) => {
                if !self.fleet.send(id, message) {
                    self.app.view.say("that command has no broker any more");
                }
            }
            Effect::Search { stream, forward } => self.app.search(stream, forward),
            Effect::CopyLines { stream, lines } => self.app.copy_lines(stream, lines),
            Effect::CopyScreen(stream) => self.app.copy_screen(stream),
            Effect::StopAllAndQuit => self.stop_all(),
            Effect::Quit => self.quit_now = true,
        }
    }

    /// Handles a key, click, paste or resize; its input waits in `input`. False if it
    /// means nothing here.
    pub(super) fn terminal_event(
        &mut self,
        event: TermEvent,
        input: &mut InputBatch,
        terminal: &mut Terminal<CrosstermBackend<Stdout>>,
    ) -> bool {
        match event {
            TermEvent::FocusGained => self.teller.news.set_focus(true),
            TermEvent::FocusLost => self.teller.news.set_focus(false),
            _ => {}
        }
        let Some(action) = action_of(&self.app, event) else {
            return false;
        };
        for effect in input.add(self.app.handle(action)) {
            self.effect(effect);
        }
        if let Some(bytes) = self.app.take_terminal_output() {
            write_between_frames(terminal, &bytes);
        }
        true
    }

    /// Commands that other processes run: apply what their journals gained since the last
    /// look (read from where the last look ended), and notice a broker that died.
    pub(super) fn follow_journal(&mut self) {
        for command in &mut self.app.model.commands {
            let (true, Some(dir)) = (command.status.is_active(), command.journal_dir.clone())
            else {
                continue;
            };
            match self.tails.get_mut(&dir) {
                Some(tail) => {
                    if let Ok((events, _)) = tail.poll() {
                        for event in &events {
                            command.apply(event);
                        }
                    }
                }
                None => {
                    // Read once more from the start, by the tail that goes on from there:
                    // nothing written since the command was listed is missed.
                    let (record, tail) = CommandRecord::load_following(&dir);
                    reload_from_record(command, &record);
                    self.tails.insert(dir.clone(), tail);
                }
            }
            if command.status.is_active() && !broker_alive(command) {
                // Dead without a `close`: the journal says what is missing.
                reload_from_record(command, &CommandRecord::load(&dir));
            }
        }
    }

    pub(super) fn fleet_event(&mut self, event: FleetEvent) {
        let failed = matches!(event, FleetEvent::SpawnFailed(..));
        let id = match &event {
            FleetEvent::Event(id, _)
            | FleetEvent::Fallback(id, _)
            | FleetEvent::SpawnFailed(id, _)
            | FleetEvent::Ended(id) => *id,
        };
        if let FleetEvent::Ended(id) = &event {
            self.fleet.ended(*id);
            self.sizes_sent.remove(id);
        }
        let Some(before) = current_run(&mut self.app.model.commands, id).map(|c| c.status) else {
            return;
        };
        match event {
            FleetEvent::Event(id, event) => {
                self.app.apply_event(id.command, id.run, &event);
                if !matches!(event.kind, EventKind::Output { .. }) {
                    self.run_event(id.command, before, &event);
                }
            }
            FleetEvent::Fallback(id, text) | FleetEvent::SpawnFailed(id, text) => {
                if let Some(c) = current_run(&mut self.app.model.commands, id) {
                    if failed {
                        c.status = Status::FailedToStart;
                        c.ended_ms.get_or_insert_with(now_ms);
                    }
                    c.notice = Some(text.clone());
                }
                self.app.view.say(text);
                self.maybe_ended(id.command, before);
            }
            FleetEvent::Ended(id) => {
                if let Some(c) = current_run(&mut self.app.model.commands, id) {
                    c.broker_gone(now_ms());
                }
                self.maybe_ended(id.command, before);
            }
        }
    }
}

/// The command of run `id` while that run is its current one: what is about an older run
/// changes nothing of it.
fn current_run(commands: &mut [CommandState], id: RunId) -> Option<&mut CommandState> {
    commands.get_mut(id.command).filter(|c| c.run == id.run)
}

fn action_of(app: &App, event: TermEvent) -> Option<Action> {
    match event {
        TermEvent::Key(key) if key.kind != KeyEventKind::Release => {
            let applies = |action: &Action| refusal(&app.model, action).is_none();
            action_for(&app.bindings, app.key_context(), key, &applies)
        }
        TermEvent::Mouse(mouse) => match mouse.kind {
            MouseEventKind::ScrollUp | MouseEventKind::ScrollDown => Some(Action::ScrollAt {
                up: mouse.kind == MouseEventKind::ScrollUp,
                column: mouse.column,
                row: mouse.row,
            }),
            MouseEventKind::Down(_) => Some(Action::ClickAt {
                column: mouse.column,
                row: mouse.row,
            }),
            _ => None,
        },
        TermEvent::Resize(..) => Some(Action::Resize),
        TermEvent::Paste(text) => Some(Action::Paste(text)),
        _ => None,
    }
}

/// Bytes tether itself sends its terminal (an OSC 52 copy): through the writer that ratatui
/// draws with, between two frames, so they never land inside a frame's own sequences. They
/// change no cell, so the next frame's diff still matches the screen. A failed write loses
/// only the copy to the clipboard; the file copy is already made.
pub(super) fn write_between_frames(terminal: &mut Terminal<CrosstermBackend<Stdout>>, bytes: &str) {
    use std::io::Write;
    let backend = terminal.backend_mut();
    let _ = backend
        .write_all(bytes.as_bytes())
        .and_then(|()| backend.flush());
}
