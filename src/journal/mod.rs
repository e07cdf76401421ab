//! The on-disk journal: the source of truth for live and post-mortem views alike.

pub mod paths;
pub mod reader;
pub mod secure;
pub mod writer;

pub use paths::{command_dir_name, new_session_id, sessions_dir, state_dir};
pub use reader::{CommandRecord, Damage, EventTail, SessionInfo, SessionRecord, list_sessions};
pub use secure::JournalDir;
pub use writer::{EventLog, StreamLog};
