//! `tether watch`: every live brokered command of this user, whoever started it (`tether
//! exec`, an agent, another tether), read from their journals as they grow and signalled
//! through their brokers' control sockets. `tether open` of a session whose brokers are alive
//! uses the same, for that session alone.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use tokio::sync::mpsc::UnboundedSender;

use super::App;
use crate::control::{self, ControlClient, ControlError, LiveCommand};
use crate::journal::CommandRecord;
use crate::model::CommandState;
use crate::model::replay::{command_from_record, reload_from_record};
use crate::protocol::{Scope, ToBroker};

pub struct Watch {
    state_dir: PathBuf,
    /// Only this session's commands; all sessions when `None`.
    session: Option<String>,
    /// Journal directories listed already (or dismissed): discovery adds only new ones.
    known: HashSet<PathBuf>,
    /// The live commands found by the last look, by journal directory: whom to connect to.
    live: HashMap<PathBuf, LiveCommand>,
    /// Why the journals cannot be read, once said.
    unreadable: Option<String>,
    /// What became of a request, for the status line.
    replies: UnboundedSender<String>,
}

impl Watch {
    pub fn new(
        state_dir: PathBuf,
        session: Option<String>,
        listed: &[CommandState],
        replies: UnboundedSender<String>,
    ) -> Watch {
        Watch {
            state_dir,
            session,
            known: listed
                .iter()
                .filter_map(|c| c.journal_dir.clone())
                .collect(),
            live: HashMap::new(),
            unreadable: None,
            replies,
        }
    }

    /// Lists the live commands that are not on the list yet, each after the others of its
    /// session (commands are grouped by session). Returns whether any was added.
    pub fn discover(&mut self, app: &mut App) -> bool {
        let mut added = false;
        let found = match control::live_commands(&self.state_dir, self.session.as_deref()) {
            Ok(found) => found,
            Err(err) => {
                let text = err.to_string();
                if self.unreadable.as_ref() != Some(&text) {
                    let _ = self.replies.send(text.clone());
                    self.unreadable = Some(text);
                }
                return false;
            }
        };
        self.unreadable = None;
        self.live = found
            .iter()
            .map(|live| (live.dir.clone(), live.clone()))
            .collect();
        for live in found {
            if !self.known.insert(live.dir.clone()) {
                // Listed before its broker said a word (and so taken for dead): it lives.
                let listed = app
                    .model
                    .commands
                    .iter_mut()
                    .find(|c| c.journal_dir.as_ref() == Some(&live.dir));
                if let Some(command) = listed.filter(|c| !c.status.is_active()) {
                    reload_from_record(command, &CommandRecord::load(&live.dir));
                    added = true;
                }
                continue;
            }
            let mut command = command_from_record(&CommandRecord::load(&live.dir));
            if self.session.is_none() {
                command.config.name = format!("{}/{}", live.session, command.config.name);
            }
            let session_dir = live.dir.parent().map(Path::to_path_buf);
            // Its offsets count from its session's start, not from the watch's.
            command.session_started_ms = session_dir
                .as_deref()
                .and_then(crate::journal::session_started_ms);
            let index = app
                .model
                .commands
                .iter()
                .rposition(|c| {
                    c.journal_dir.as_deref().and_then(Path::parent) == session_dir.as_deref()
                })
                .map_or(app.model.commands.len(), |i| i + 1);
            app.insert_command(index, command);
            added = true;
        }
        added
    }

    /// Sends a request to the broker of `command` through its control socket, off the event
    /// loop; what became of it comes back on the reply channel.
    pub fn send(&self, command: &CommandState, message: ToBroker) {
        let name = command.config.name.clone();
        let Some(dir) = command.journal_dir.as_ref() else {
            return;
        };
        // A command listed a moment ago may not have been seen live yet: look again.
        let live = self.live.get(dir).cloned().or_else(|| {
            control::live_commands(&self.state_dir, self.session.as_deref())
                .ok()?
                .into_iter()
                .find(|live| &live.dir == dir)
        });
        let Some(live) = live else {
            let _ = self
                .replies
                .send(format!("{name}: its broker is no longer running"));
            return;
        };
        let replies = self.replies.clone();
        tokio::spawn(async move {
            let text = match request(&live, message).await {
                Ok(done) => format!("{name}: {done}"),
                Err(err) => format!("{name}: {err}"),
            };
            let _ = replies.send(text);
        });
    }
}

/// Asks the broker of `live`, through its socket, to do what the TUI asked of it.
async fn request(live: &LiveCommand, message: ToBroker) -> Result<String, ControlError> {
    let mut client = ControlClient::connect_to(live).await?;
    Ok(match message {
        ToBroker::Stop { .. } => client
            .stop()
            .await?
            .unwrap_or_else(|| "stop sequence started: TERM, grace, KILL".into()),
        ToBroker::Signal {
            signal,
            scope: Scope::Pid,
            pid: Some(pid),
        } => {
            client.signal_pid(signal, pid).await?;
            format!("SIG{signal} sent to pid {pid}")
        }
        ToBroker::Signal { signal, .. } => {
            let reached = client.signal(signal).await?;
            format!("SIG{signal} sent to {} processes", reached.len())
        }
        // A control socket takes no input: only the tether that started a command types
        // into it.
        ToBroker::Input { .. } => {
            "typing goes only to commands this tether started; this one was started elsewhere"
                .into()
        }
        ToBroker::Launch(_) | ToBroker::Ping | ToBroker::Resize { .. } => String::new(),
    })
}
