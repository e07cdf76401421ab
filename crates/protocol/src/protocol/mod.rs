//! Messages between a front end and its brokers, and how they are framed on the wire.

pub mod attention;
pub mod control;
#[cfg(any(test, feature = "fixtures"))]
pub mod fixtures;
pub mod framing;
pub mod leftovers;
pub mod messages;
pub mod millis;
pub mod request;
pub mod signal;
pub mod trace;

pub use attention::AttentionRequest;
pub use control::*;
pub use framing::{Frame, LineSplitter, MAX_LINE, encode_line, write_frame};
pub use leftovers::*;
pub use messages::*;
pub use millis::MAX_INTERVAL;
pub use request::*;
pub use signal::{ProcessSignal, signal_label};
pub use trace::TraceContext;

/// The files of a command's journal directory, as its broker writes them and every front end
/// reads them.
pub const COMMAND_FILE: &str = "command.json";
pub const EVENTS_FILE: &str = "events.jsonl";
pub const RESULT_FILE: &str = "result.json";
pub const SESSION_FILE: &str = "session.json";
/// Beside `session.json`: what the launcher of a TUI session said of each command between
/// its runs (waiting, restarting, gave up, blocked), one JSON object a line, as it changed.
pub const LAUNCHER_FILE: &str = "launcher.jsonl";
