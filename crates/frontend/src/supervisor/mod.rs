//! The front end's side of brokers: sessions on disk, starting a broker, talking to it.
//! Every front end (exec, the TUI, the watch, the control commands, the MCP server) talks to
//! a broker through one [`BrokerConversation`], begun by launching the broker or by attaching
//! to its control socket; the TUI and the MCP server keep many of them in a [`fleet::Fleet`].

pub mod abandoned;
mod ack;
mod attach;
mod conversation;
mod ending;
pub mod fleet;
pub mod intervals;
mod launch;
pub mod leftovers;
mod liveness;
pub mod machine;
mod process;
mod reclaim_proof;
mod session;

pub use attach::Answer;
pub use conversation::{BrokerConversation, Due};
pub use ending::End;
pub use launch::launch_request;
pub use process::{BROKER_FORK_ENV, BrokerLine, Fork, Handover, Wire, fork as fork_broker};
pub use session::Session;

use std::io;

/// Makes this process a child subreaper, so that what a broker leaves when it dies is
/// re-parented here and can be stopped (see [`leftovers`]).
pub fn become_subreaper() -> io::Result<()> {
    nix::sys::prctl::set_child_subreaper(true).map_err(io::Error::from)
}
