//! tether-model: the session state every view shows. No terminal code here: the same model
//! is filled live from brokers or after the fact from a journal, and the TUI, `tether open`,
//! the exports, grep and the control CLI all read it.
//!
//! Above tether-protocol, tether-core, tether-os (the journal's reader) and tether-config;
//! below the broker, the front ends and the TUI, which it never names. It reads journal files
//! and `/proc` (whether a journal's broker still runs) when asked to load; it holds no process,
//! socket or terminal.

pub mod badges;
pub mod command;
pub mod describe;
pub mod ending;
pub mod output;
pub mod plan;
pub mod recording;
pub mod replay;
pub mod screen;

use std::path::PathBuf;

pub use badges::{Badge, Badges};
pub use command::{
    CommandIndex, CommandState, EarlierRun, KeptLeftovers, Marker, Status, TimelineEntry,
};
pub use ending::Ending;
pub use plan::Plan;

pub struct Model {
    pub session_id: String,
    pub session_dir: PathBuf,
    pub started_ms: u64,
    pub commands: Vec<CommandState>,
    pub mode: Mode,
}

/// Where a model's commands come from, and so what may be done to them.
#[derive(Debug, Default)]
pub enum Mode {
    /// This front end's own session: it launches the commands and talks to their brokers.
    #[default]
    Live,
    /// Journals that other processes write (`tether watch`, `tether open` of a live
    /// session): followed as they grow, their live commands signalled through their brokers'
    /// control sockets; nothing is launched from here.
    Watched,
    /// A finished session read back (`tether open`): nothing changes any more. With its
    /// journal, the time cursor can move over it.
    Recorded(Option<Box<recording::Recording>>),
}

impl Mode {
    /// Read from journals (after the fact, or as other processes write them): nothing can
    /// be launched from here.
    pub fn from_journals(&self) -> bool {
        !matches!(self, Mode::Live)
    }

    /// A finished session: nothing can be signalled or typed into either.
    pub fn is_finished(&self) -> bool {
        matches!(self, Mode::Recorded(_))
    }

    /// The finished session's journal, for the time cursor.
    pub fn recording(&self) -> Option<&recording::Recording> {
        match self {
            Mode::Recorded(recording) => recording.as_deref(),
            _ => None,
        }
    }

    /// The same mode without the journal: the model drawn at the time cursor.
    pub fn without_recording(&self) -> Mode {
        match self {
            Mode::Live => Mode::Live,
            Mode::Watched => Mode::Watched,
            Mode::Recorded(_) => Mode::Recorded(None),
        }
    }
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
