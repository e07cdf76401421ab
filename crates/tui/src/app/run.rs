//! Starting the TUI: the model for what it opens (a new session, a journal read back, a
//! watch over every live command), the terminal taken over, and the event loop run until
//! it quits (see [`super::event_loop`]).

use std::io::{self, IsTerminal};
use std::path::{Path, PathBuf};

use anyhow::Context;
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;

use super::event_loop::event_loop;
use super::keymap::Binding;
use super::terminal_guard::{TerminalGuard, install_panic_hook};
use super::view::{FrameContent, ViewState};
use tether_config::CommandConfig;
use tether_frontend::supervisor::Session;
use tether_model::recording::Recording;
use tether_model::replay::model_from_session;
use tether_model::{CommandState, Mode, Model};
use tether_os::clock::now_ms;
use tether_os::journal::{SessionName, SessionRecord};

/// What the TUI starts with.
pub enum Launch {
    /// A new session: these commands (those with autostart run at once).
    Live {
        commands: Vec<CommandConfig>,
        state_dir: PathBuf,
        /// A named session to join (`--session`, `TETHER_SESSION`); `None`: a fresh one.
        session: Option<SessionName>,
        /// `ordered_shutdown`: dependents stop before what they depend on.
        ordered_shutdown: bool,
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

/// Draws one frame from the state: the UI's entry point, handed in by whoever starts the TUI
/// (the binary gives `tether::ui::draw`), so that the state machine knows nothing of how it
/// is drawn.
pub type Draw = fn(&mut ratatui::Frame, &Model, &ViewState, &FrameContent, &[Binding]);

pub fn run_tui(launch: Launch, draw: Draw) -> anyhow::Result<i32> {
    // Whatever killed brokers left running, stopped while the TUI runs.
    let _ = tether_frontend::supervisor::abandoned::reclaim_in_background();
    if !io::stdout().is_terminal() || !io::stdin().is_terminal() {
        anyhow::bail!(
            "the TUI needs a terminal; for scripts and pipelines use `tether exec -- CMD` (add --json for events)"
        );
    }
    let mut watch_over: Option<(PathBuf, Option<String>)> = None;
    // A live session's state directory and id: retention runs when it ends.
    let mut ends_session: Option<(PathBuf, String)> = None;
    let mut search = None;
    let mut ordered_shutdown = false;
    let (model, session) = match launch {
        Launch::Live {
            commands,
            state_dir,
            session,
            ordered_shutdown: ordered,
        } => {
            ordered_shutdown = ordered;
            let session = Session::create(&state_dir, session.as_ref())?;
            ends_session = Some((state_dir.clone(), session.id.clone()));
            let model = Model {
                session_id: session.id.clone(),
                session_dir: session.path().to_path_buf(),
                started_ms: now_ms(),
                commands: commands.into_iter().map(CommandState::new).collect(),
                mode: Mode::Live,
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
                // The watch follows the launcher's word (`launcher.jsonl`) as it grows: what
                // it said at this moment is left to it.
                model.commands.retain(|c| c.journal_dir.is_some());
                for command in &mut model.commands {
                    command.plan = None;
                }
                model.mode = Mode::Watched;
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
                model.mode = Mode::Recorded(Some(Box::new(Recording::from_session(record))));
            }
            (model, None)
        }
        Launch::Watch { state_dir, session } => {
            let model = Model {
                session_id: session.clone().unwrap_or_else(|| "every session".into()),
                session_dir: state_dir.join("sessions"),
                started_ms: now_ms(),
                commands: Vec::new(),
                mode: Mode::Watched,
            };
            watch_over = Some((state_dir, session));
            (model, None)
        }
    };
    let watching = watch_over.is_some() && model.commands.is_empty();
    let session_dir = model.session_dir.clone();
    if !model.mode.from_journals() {
        // Whatever a broker leaves when it dies is re-parented to the TUI, to be stopped here.
        tether_frontend::supervisor::become_subreaper()
            .context("cannot become a child subreaper")?;
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the event loop")?;
    install_panic_hook();
    let guard = TerminalGuard::enter().context("cannot switch the terminal to full screen")?;
    let terminal = Terminal::new(CrosstermBackend::new(io::stdout()))?;
    let result = runtime.block_on(event_loop(
        terminal,
        model,
        session,
        watch_over,
        search,
        draw,
        ordered_shutdown,
    ));
    drop(guard);
    if !watching {
        eprintln!("tether: session journal in {}", session_dir.display());
    }
    if let Some((state_dir, id)) = ends_session {
        tether_frontend::prune::at_session_end(&state_dir, &id, false);
    }
    result
}
