//! The TUI's event loop: one `select!` over keys, broker events, process samples, signals and
//! the next frame. It draws only when something changed, at most 60 times a second.

use std::collections::HashMap;
use std::io::{self, IsTerminal, Stdout};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use crossterm::event::{
    DisableBracketedPaste, EnableBracketedPaste, Event as TermEvent, KeyEventKind, MouseEventKind,
};
use crossterm::terminal::{
    EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode,
};
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};
use tokio::time::{Instant, sleep_until};

use super::App;
use super::action::Action;
use super::input_batch::InputBatch;
use super::keymap::{Binding, action_for};
use super::update::Effect;
use super::view::{FrameContent, ViewState};
use crate::clock::now_ms;
use crate::config::CommandConfig;
use crate::journal::EventTail;
use crate::journal::secure::lossy;
use crate::journal::{CommandRecord, SessionName, SessionRecord};
use crate::model::recording::Recording;
use crate::model::replay::{broker_alive, frozen_at, model_from_session, reload_from_record};
use crate::model::{CommandState, Model, Status};
use crate::protocol::{
    DEFAULT_GRACE_MS, DEFAULT_MAX_OUTPUT, EventKind, LaunchRequest, Origin, PROTOCOL_VERSION,
    StdinSource, TerminalRequest, ToBroker, WindowSize, input_requests,
};
use crate::sampler::spawn_sampler;
use crate::supervisor::Session;
use crate::supervisor::fleet::{Fleet, FleetEvent, HEARTBEAT, RunId};

use super::watch::Watch;

const FRAME: Duration = Duration::from_micros(16_667);
/// The most terminal events handled at one wake-up (a paste that is not bracketed is one per
/// character): enough to join a paste into few pieces, few enough that frames and brokers
/// are not kept waiting.
const KEYS_PER_WAKE: usize = 1024;
/// The shortest time between two reads of the journals a watch follows: a command that
/// writes without pause costs a read every 8 ms, not one per write. The first change after
/// a quiet spell is read at once.
const JOURNAL_READS: Duration = Duration::from_millis(8);
/// After asking every broker to stop, how long to wait beyond the longest grace (a broker
/// that does not acknowledge the stop is killed after a second and its leftovers stopped).
const QUIT_SLACK: Duration = Duration::from_secs(3);
/// After that, how long brokers that did not finish get to be killed with their leftovers.
const ABORT_SLACK: Duration = Duration::from_secs(2);

/// What the TUI starts with.
pub enum Launch {
    /// A new session: these commands (those with autostart run at once).
    Live {
        commands: Vec<CommandConfig>,
        state_dir: PathBuf,
        /// A named session to join (`--session`, `TETHER_SESSION`); `None`: a fresh one.
        session: Option<SessionName>,
    },
    /// A session read back from its journal; its commands that still run (started by
    /// another tether) can be signalled through their control sockets.
    Recorded {
        session_dir: PathBuf,
        /// Open at the first match of this (`tether open --search`).
        search: Option<String>,
    },
    /// Every live brokered command of this user (or of one session), whoever started it.
    Watch {
        state_dir: PathBuf,
        session: Option<String>,
    },
}

/// Puts the terminal back however the TUI ends: normally, on error, or in a panic.
struct TerminalGuard;

impl TerminalGuard {
    fn enter() -> io::Result<TerminalGuard> {
        enable_raw_mode()?;
        let guard = TerminalGuard;
        crossterm::execute!(io::stdout(), EnterAlternateScreen, EnableBracketedPaste)?;
        // Clicks and the wheel only (not every mouse move), in SGR encoding.
        io::Write::write_all(&mut io::stdout(), b"\x1b[?1000h\x1b[?1006h")?;
        io::Write::flush(&mut io::stdout())?;
        Ok(guard)
    }
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        restore_terminal();
    }
}

fn restore_terminal() {
    let _ = io::Write::write_all(&mut io::stdout(), b"\x1b[?1006l\x1b[?1000l");
    let _ = crossterm::execute!(
        io::stdout(),
        DisableBracketedPaste,
        LeaveAlternateScreen,
        crossterm::cursor::Show
    );
    let _ = disable_raw_mode();
}

/// Restores the terminal before the panic message prints, so it is readable.
fn install_panic_hook() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        restore_terminal();
        previous(info);
    }));
}

/// Draws one frame from the state: the UI's entry point, handed in by whoever starts the TUI
/// (the binary gives `tether::ui::draw`), so that the state machine knows nothing of how it
/// is drawn.
pub type Draw = fn(&mut ratatui::Frame, &Model, &ViewState, &FrameContent, &[Binding]);

pub fn run_tui(launch: Launch, draw: Draw) -> anyhow::Result<i32> {
    // Whatever killed brokers left running, stopped while the TUI runs.
    let _ = crate::supervisor::abandoned::reclaim_in_background();
    if !io::stdout().is_terminal() || !io::stdin().is_terminal() {
        anyhow::bail!(
            "the TUI needs a terminal; for scripts and pipelines use `tether exec -- CMD` (add --json for events)"
        );
    }
    let mut watch_over: Option<(PathBuf, Option<String>)> = None;
    // A live session's state directory and id: retention runs when it ends.
    let mut ends_session: Option<(PathBuf, String)> = None;
    let mut search = None;
    let (model, session) = match launch {
        Launch::Live {
            commands,
            state_dir,
            session,
        } => {
            let session = Session::create(&state_dir, session.as_ref())?;
            ends_session = Some((state_dir.clone(), session.id.clone()));
            let model = Model {
                session_id: session.id.clone(),
                session_dir: session.dir_path(),
                started_ms: now_ms(),
                commands: commands.into_iter().map(CommandState::new).collect(),
                recorded: false,
                controllable: false,
                recording: None,
            };
            (model, Some(session))
        }
        Launch::Recorded {
            session_dir,
            search: wanted,
        } => {
            search = wanted;
            let record = SessionRecord::load(&session_dir).with_context(|| {
                format!(
                    "cannot read the session journal in {}",
                    session_dir.display()
                )
            })?;
            let mut model = model_from_session(&record);
            // A command with nothing journaled yet may be starting right now.
            let starting = record
                .commands
                .iter()
                .any(|c| c.events.is_empty() && c.result.is_none());
            if model.running() > 0 || starting {
                // Live in another tether: watch it, with control, and list what joins it.
                model.controllable = true;
                let state_dir = session_dir.parent().and_then(Path::parent);
                let name = session_dir.file_name();
                if let (Some(state_dir), Some(name)) = (state_dir, name) {
                    watch_over = Some((
                        state_dir.to_path_buf(),
                        Some(name.to_string_lossy().into_owned()),
                    ));
                }
            } else {
                // Finished: nothing changes any more, so the time cursor can move over it.
                model.recording = Some(Recording::from_session(record));
            }
            (model, None)
        }
        Launch::Watch { state_dir, session } => {
            let model = Model {
                session_id: session.clone().unwrap_or_else(|| "every session".into()),
                session_dir: state_dir.join("sessions"),
                started_ms: now_ms(),
                commands: Vec::new(),
                recorded: true,
                controllable: true,
                recording: None,
            };
            watch_over = Some((state_dir, session));
            (model, None)
        }
    };
    let watching = watch_over.is_some() && model.commands.is_empty();
    let session_dir = model.session_dir.clone();
    if !model.recorded {
        // Whatever a broker leaves when it dies is re-parented to the TUI, to be stopped here.
        crate::supervisor::become_subreaper().context("cannot become a child subreaper")?;
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the event loop")?;
    install_panic_hook();
    let guard = TerminalGuard::enter().context("cannot switch the terminal to full screen")?;
    let terminal = Terminal::new(CrosstermBackend::new(io::stdout()))?;
    let result = runtime.block_on(event_loop(
        terminal, model, session, watch_over, search, draw,
    ));
    drop(guard);
    if !watching {
        eprintln!("tether: session journal in {}", session_dir.display());
    }
    if let Some((state_dir, id)) = ends_session {
        crate::prune::at_session_end(&state_dir, &id);
    }
    result
}

/// Reads terminal events on a thread of their own (crossterm's read blocks).
fn terminal_events() -> UnboundedReceiver<TermEvent> {
    let (tx, rx) = unbounded_channel();
    std::thread::spawn(move || {
        while let Ok(event) = crossterm::event::read() {
            if tx.send(event).is_err() {
                break;
            }
        }
    });
    rx
}

fn action_of(app: &App, event: TermEvent) -> Option<Action> {
    match event {
        TermEvent::Key(key) if key.kind != KeyEventKind::Release => {
            let applies = |action: &Action| super::update::refusal(&app.model, action).is_none();
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
fn write_between_frames(terminal: &mut Terminal<CrosstermBackend<Stdout>>, bytes: &str) {
    use std::io::Write;
    let backend = terminal.backend_mut();
    let _ = backend
        .write_all(bytes.as_bytes())
        .and_then(|()| backend.flush());
}

struct Runner {
    app: App,
    /// Where new runs are journaled; `None` for a recorded session.
    session: Option<Session>,
    fleet: Fleet,
    /// Commands started elsewhere, followed and signalled through their sockets.
    watch: Option<Watch>,
    /// Where reading each followed journal left off.
    tails: HashMap<PathBuf, EventTail>,
    quit_deadline: Option<Instant>,
    /// The terminal size last asked of each run's broker.
    sizes_sent: HashMap<RunId, WindowSize>,
    /// Quitting could not wait any longer for the brokers: they are being killed.
    aborted: bool,
    quit_now: bool,
}

impl Runner {
    fn launch(&mut self, id: usize) {
        let (Some(command), Some(session)) =
            (self.app.model.commands.get_mut(id), self.session.as_mut())
        else {
            return;
        };
        let journal = match session.next_command_dir(&command.config.name) {
            Ok(journal) => journal,
            Err(err) => {
                let text = format!(
                    "cannot create a journal directory in {}: {err}; the command was not started",
                    session.path().display()
                );
                command.status = Status::FailedToStart;
                command.notice = Some(text.clone());
                self.app.view.message = Some(text);
                return;
            }
        };
        let dir = journal.path().to_path_buf();
        command.begin_run(dir.clone(), now_ms());
        let config = &command.config;
        let (attention, config_error) = crate::config::attention::for_launch(&config.attention);
        if let Some(err) = config_error {
            self.app.view.message = Some(format!("{err}; attention uses its defaults"));
        }
        let request = LaunchRequest {
            v: PROTOCOL_VERSION,
            name: config.name.clone(),
            command: config.command.clone(),
            // None: the broker inherits the TUI's working directory.
            cwd: config.cwd.clone(),
            env: config.env.clone(),
            journal_dir: lossy(&dir),
            parent_pid: std::process::id() as i32,
            grace_ms: config
                .grace
                .map_or(DEFAULT_GRACE_MS, |d| d.as_millis() as u64),
            no_output_timeout_ms: config.no_output_timeout.map(|d| d.as_millis() as u64),
            drain_on: config.drain_on.clone(),
            drain_ms: config.drain.map(|d| d.as_millis() as u64),
            max_output: DEFAULT_MAX_OUTPUT,
            heartbeat_ms: Some(HEARTBEAT.as_millis() as u64),
            mirror: false,
            // With terminals, stdin is stdout's: the operator types into it with `i`.
            stdin: if config.pty {
                StdinSource::Terminal
            } else {
                StdinSource::Null
            },
            session: Some(session.reference(&journal)),
            arg0: None,
            // The TUI's commands end with their processes, as configured.
            leftovers: Default::default(),
            // Only `tether exec` and the shim stand in for a caller's shell and join its
            // trace; the TUI's commands are the operator's.
            trace: None,
            trace_ignored: None,
            terminal: config.pty.then_some(TerminalRequest {
                stdout: true,
                stderr: true,
                size: self.app.terminal_size,
            }),
            limits: config.limits,
            attention,
        };
        self.fleet.launch(
            RunId {
                command: id,
                run: command.run,
            },
            request,
            journal,
        );
    }

    /// Gives the terminals of running commands the size of the output pane, once per change.
    fn sync_terminal_sizes(&mut self) {
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
            if asked != size && self.fleet.send(id, ToBroker::Resize { size }) {
                self.sizes_sent.insert(run, size);
            }
        }
    }

    fn stop_all(&mut self) {
        let mut longest = Duration::ZERO;
        for (id, command) in self.app.model.commands.iter().enumerate() {
            if command.status.is_active() {
                longest = longest.max(
                    command
                        .config
                        .grace
                        .unwrap_or(Duration::from_millis(DEFAULT_GRACE_MS)),
                );
                self.fleet.send(
                    id,
                    ToBroker::Stop {
                        origin: Some(Origin::Shutdown),
                    },
                );
            }
        }
        self.app.view.quitting = true;
        self.quit_deadline = Some(Instant::now() + longest + QUIT_SLACK);
    }

    fn effect(&mut self, effect: Effect) {
        let model = &self.app.model;
        let launches = matches!(effect, Effect::Launch(_) | Effect::Add(_));
        let sends = matches!(effect, Effect::Send(..));
        if model.recorded && (launches || (sends && !model.controllable)) {
            self.app.view.message = Some(
                if model.controllable {
                    super::update::NO_LAUNCH
                } else {
                    super::update::READ_ONLY
                }
                .into(),
            );
            return;
        }
        match effect {
            Effect::Launch(id) => self.launch(id),
            Effect::Add(config) => {
                self.app.model.commands.push(CommandState::new(config));
                let id = self.app.model.commands.len() - 1;
                self.app.view.select_command(id);
                self.launch(id);
            }
            Effect::Input(id, bytes) => {
                // A paste of any size goes in bounded pieces, queued without waiting.
                let delivered = input_requests(&bytes).all(|piece| self.fleet.send(id, piece));
                if !delivered {
                    self.app.view.message =
                        Some("that command has no broker any more: the input went nowhere".into());
                }
            }
            Effect::Send(id, message) if self.watch.is_some() => {
                if let (Some(watch), Some(command)) =
                    (self.watch.as_ref(), self.app.model.commands.get(id))
                {
                    watch.send(command, message);
                }
            }
            Effect::Dismiss(id) if self.app.model.recorded => self.app.remove_command(id),
            Effect::Dismiss(_) => {
                self.app.view.message = Some(super::update::NO_DISMISS.into());
            }
            Effect::Send(id, message) => {
                if !self.fleet.send(id, message) {
                    self.app.view.message = Some("that command has no broker any more".into());
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
    fn terminal_event(
        &mut self,
        event: TermEvent,
        input: &mut InputBatch,
        terminal: &mut Terminal<CrosstermBackend<Stdout>>,
    ) -> bool {
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
    fn follow_journal(&mut self) {
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

    fn fleet_event(&mut self, event: FleetEvent) {
        match event {
            FleetEvent::Event(id, event) => self.app.apply_event(id.command, id.run, &event),
            FleetEvent::Fallback(id, text) => {
                if let Some(c) = self.app.model.commands.get_mut(id.command) {
                    if c.run == id.run {
                        c.notice = Some(text.clone());
                    }
                }
                self.app.view.message = Some(text);
            }
            FleetEvent::SpawnFailed(id, text) => {
                if let Some(c) = self.app.model.commands.get_mut(id.command) {
                    if c.run == id.run {
                        c.status = Status::FailedToStart;
                        c.notice = Some(text.clone());
                    }
                }
                self.app.view.message = Some(text);
            }
            FleetEvent::Ended(id) => {
                self.fleet.ended(id);
                self.sizes_sent.remove(&id);
                if let Some(c) = self.app.model.commands.get_mut(id.command) {
                    if c.run == id.run {
                        c.broker_gone(now_ms());
                    }
                }
            }
        }
    }
}

/// Resolves when the followed journals changed (never without a watcher).
async fn journals_changed(readiness: Option<&super::watch::Readiness>) {
    match readiness {
        Some(readiness) => readiness.wait().await,
        None => std::future::pending().await,
    }
}

async fn event_loop(
    mut terminal: Terminal<CrosstermBackend<Stdout>>,
    model: Model,
    session: Option<Session>,
    watch_over: Option<(PathBuf, Option<String>)>,
    search: Option<String>,
    draw: Draw,
) -> anyhow::Result<i32> {
    let recorded = model.recorded;
    let (fleet, mut fleet_events) = Fleet::new();
    let (replies, mut watch_replies) = unbounded_channel();
    let watch = watch_over
        .map(|(state_dir, session)| Watch::new(state_dir, session, &model.commands, replies));
    let watching = watch.is_some();
    let mut runner = Runner {
        app: App::new(model),
        session,
        fleet,
        watch,
        tails: HashMap::new(),
        quit_deadline: None,
        sizes_sent: HashMap::new(),
        aborted: false,
        quit_now: false,
    };
    let mut keys = terminal_events();
    let (sampler, mut samples) = spawn_sampler(Duration::from_secs(1));
    // A first reading of the machine for the header, before any command runs.
    sampler.sample_now();
    let mut sigint = signal(SignalKind::interrupt())?;
    let mut sigterm = signal(SignalKind::terminate())?;
    let mut sighup = signal(SignalKind::hangup())?;

    // The output pane's size, for the terminals of the commands started next.
    let size = terminal.size()?;
    runner.app.prepare(
        ratatui::layout::Rect::new(0, 0, size.width, size.height),
        now_ms(),
    );
    if let Some(needle) = search.as_deref() {
        runner.app.open_at_first_match(needle);
    }
    let autostart: Vec<usize> = runner
        .app
        .model
        .commands
        .iter()
        .enumerate()
        .filter(|(_, c)| c.config.autostart)
        .map(|(i, _)| i)
        .collect();
    for id in autostart {
        runner.launch(id);
    }
    if let Some(watch) = runner.watch.as_mut() {
        watch.start(&mut runner.app);
    }
    if runner.app.model.commands.is_empty() && !recorded {
        runner.app.view.dialog = Some(super::view::Dialog::NewCommand {
            input: String::new(),
        });
    }

    // The signal that ended the TUI, if one did: its exit status is then 128 + N, as a shell
    // reports a program that a signal ended.
    let mut ended_by: Option<i32> = None;
    let mut dirty = true;
    let mut last_draw: Option<Instant> = None;
    let mut watched: Vec<i32> = Vec::new();
    let mut next_tick = Instant::now() + Duration::from_secs(1);
    let mut journals_read_at: Option<Instant> = None;
    loop {
        let now = Instant::now();
        if dirty && last_draw.is_none_or(|t| now >= t + FRAME) {
            let size = terminal.size()?;
            let at = if recorded {
                frozen_at(&runner.app.model, now_ms())
            } else {
                now_ms()
            };
            runner.app.prepare(
                ratatui::layout::Rect::new(0, 0, size.width, size.height),
                at,
            );
            let app = &runner.app;
            terminal
                .draw(|frame| draw(frame, app.shown(), &app.view, &app.content, &app.bindings))?;
            // Output not yet indexed is caught up with over the next frames.
            dirty = runner.app.behind;
            runner.sync_terminal_sizes();
            last_draw = Some(now);
        }
        let quit_overdue = runner.quit_deadline.is_some_and(|d| Instant::now() >= d);
        if runner.app.view.quitting && quit_overdue && !runner.aborted {
            // Brokers that did not finish in time are killed and their leftovers KILLed.
            runner.fleet.abort_all();
            runner.aborted = true;
            runner.quit_deadline = Some(Instant::now() + ABORT_SLACK);
            continue;
        }
        if runner.quit_now
            || (runner.app.view.quitting && (runner.fleet.active() == 0 || quit_overdue))
        {
            break;
        }
        let brokers = runner.app.brokers();
        if brokers != watched {
            sampler.set_brokers(brokers.clone());
            if brokers.len() > watched.len() {
                sampler.sample_now();
            }
            watched = brokers;
        }
        let frame_at = last_draw.map_or(now, |t| t + FRAME);
        // Runtimes on screen change every second while anything runs; a watch also checks
        // its brokers then (and looks at the journals twice a second without inotify).
        let polling = runner.watch.as_ref().is_some_and(Watch::polling);
        let tick = if polling {
            super::watch::POLL
        } else {
            Duration::from_secs(1)
        };
        // Owned, so that the branch can change the watch it belongs to.
        let journals = runner.watch.as_ref().and_then(Watch::readiness);
        let journals_rest =
            journals.is_some() && journals_read_at.is_some_and(|t| now < t + JOURNAL_READS);
        let ticking = watching || runner.app.model.running() > 0;
        if !ticking || next_tick < now {
            next_tick = now + tick;
        }
        tokio::select! {
            event = keys.recv() => {
                let Some(event) = event else { break };
                // Every key already read is handled before anything is sent: the input of
                // a run of keys (a paste that is not bracketed) goes as one piece.
                let mut input = InputBatch::default();
                let mut handled = runner.terminal_event(event, &mut input, &mut terminal);
                for _ in 1..KEYS_PER_WAKE {
                    let Ok(event) = keys.try_recv() else { break };
                    handled |= runner.terminal_event(event, &mut input, &mut terminal);
                }
                if let Some(effect) = input.take() {
                    runner.effect(effect);
                }
                // Events that mean nothing here (a key with no binding) draw nothing.
                if handled {
                    sampler.attend();
                    dirty = true;
                }
            }
            Some(event) = fleet_events.recv() => {
                let offscreen_output = matches!(&event, FleetEvent::Event(id, e)
                    if id.command != runner.app.view.selected && matches!(e.kind, EventKind::Output { .. }));
                runner.fleet_event(event);
                // Output of a command not on screen changes only the strip: a tick redraws it.
                dirty |= !offscreen_output;
            }
            Some(snapshot) = samples.recv() => {
                runner.app.set_snapshot(snapshot);
                dirty = true;
            }
            _ = sigint.recv() => { ended_by.get_or_insert(libc::SIGINT); runner.stop_all(); dirty = true; }
            _ = sigterm.recv() => { ended_by.get_or_insert(libc::SIGTERM); runner.stop_all(); dirty = true; }
            _ = sighup.recv() => { ended_by.get_or_insert(libc::SIGHUP); runner.stop_all(); dirty = true; }
            _ = sleep_until(frame_at), if dirty => {}
            _ = sleep_until(runner.quit_deadline.unwrap_or(now)), if runner.quit_deadline.is_some() => {}
            Some(text) = watch_replies.recv() => {
                runner.app.view.message = Some(text);
                dirty = true;
            }
            _ = journals_changed(journals.as_ref()), if journals.is_some() && !journals_rest => {
                journals_read_at = Some(Instant::now());
                if let Some(watch) = runner.watch.as_mut() {
                    dirty |= watch.on_events(&mut runner.app);
                }
            }
            _ = sleep_until(journals_read_at.map_or(now, |t| t + JOURNAL_READS)), if journals_rest => {}
            _ = sleep_until(next_tick), if ticking => {
                next_tick += tick;
                match runner.watch.as_mut() {
                    Some(watch) => watch.tick(&mut runner.app),
                    None if recorded => runner.follow_journal(),
                    None => {}
                }
                dirty = true;
            }
        }
    }
    // Nothing the TUI adopted from a dead broker outlives it.
    runner.fleet.kill_leftovers().await;
    Ok(ended_by.map_or(0, |signal| 128 + signal))
}
