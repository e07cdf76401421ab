//! `tether watch`: every live brokered command of this user, whoever started it (`tether
//! exec`, an agent, another tether), read from their journals as they grow and signalled
//! through their brokers' control sockets. `tether open` of a session whose brokers are alive
//! uses the same, for that session alone.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use tokio::sync::mpsc::UnboundedSender;

use super::App;
use crate::control;
use crate::journal::CommandRecord;
use crate::model::CommandState;
use crate::model::replay::command_from_record;
use crate::protocol::ToBroker;

pub struct Watch {
    state_dir: PathBuf,
    /// Only this session's commands; all sessions when `None`.
    session: Option<String>,
    /// Journal directories listed already (or dismissed): discovery adds only new ones.
    known: HashSet<PathBuf>,
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
            replies,
        }
    }

    /// Lists the live commands that are not on the list yet, each after the others of its
    /// session (commands are grouped by session). Returns whether any was added.
    pub fn discover(&mut self, app: &mut App) -> bool {
        let mut added = false;
        for live in control::live_commands(&self.state_dir, self.session.as_deref()) {
            if !self.known.insert(live.dir.clone()) {
                continue;
            }
            let mut command = command_from_record(&CommandRecord::load(&live.dir));
            if self.session.is_none() {
                command.config.name = format!("{}/{}", live.session, command.config.name);
            }
            let session_dir = live.dir.parent().map(Path::to_path_buf);
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
        let Some(dir) = command.journal_dir.clone() else {
            return;
        };
        let name = command.config.name.clone();
        let replies = self.replies.clone();
        tokio::spawn(async move {
            let text = match control::send_request(&dir, message).await {
                Ok(done) => format!("{name}: {done}"),
                Err(err) => format!("{name}: {err}"),
            };
            let _ = replies.send(text);
        });
    }
}
