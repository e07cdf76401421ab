//! The on-disk journal: the source of truth for live and post-mortem views alike.

pub mod bounded;
pub mod cut;
pub mod paths;
pub mod reader;
pub mod secure;
pub mod tail;
pub mod tomb;
pub mod watcher;
pub mod writer;

pub use paths::{
    BROKER_ID_ENV, CommandId, SESSION_ENV, STATE_DIR_ENV, SessionName, command_dirs,
    new_session_id, sessions_dir, state_dir,
};
pub use reader::{
    CommandRecord, Damage, LauncherLine, SessionInfo, SessionRecord, WriteTimes, list_sessions,
    read_result, session_dirs, session_started_ms,
};
pub use secure::JournalDir;
pub use tail::{EventTail, MAX_EVENT_LINE};
