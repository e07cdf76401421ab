//! The session state the UI shows. No terminal code here: the same model is filled live from
//! brokers or after the fact from a journal.

pub mod badges;
pub mod command;
pub mod describe;
pub mod output;
pub mod recording;
pub mod replay;
pub mod screen;

use std::path::PathBuf;

pub use badges::{Badge, Badges};
pub use command::{CommandId, CommandState, Marker, Status, TimelineEntry};

pub struct Model {
    pub session_id: String,
    pub session_dir: PathBuf,
    pub started_ms: u64,
    pub commands: Vec<CommandState>,
    /// Read from journals (after the fact, or as other processes write them): nothing can
    /// be launched from here.
    pub recorded: bool,
    /// Journals whose live commands can still be signalled, through their brokers' control
    /// sockets (`tether watch`, `tether open` of a live session).
    pub controllable: bool,
    /// A finished recorded session's journal, for the time cursor (`tether open`).
    pub recording: Option<recording::Recording>,
}

impl Model {
    /// When the session `command` belongs to began: what its offsets count from (a watch
    /// over every session holds commands of many).
    pub fn session_start_of(&self, command: &CommandState) -> u64 {
        command.session_started_ms.unwrap_or(self.started_ms)
    }

    pub fn running(&self) -> usize {
        self.commands
            .iter()
            .filter(|c| c.status.is_active())
            .count()
    }
}
