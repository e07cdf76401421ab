//! tether: run commands through brokers that never orphan a process and never lose a byte,
//! journal everything, and show it live or after the fact.
//!
//! The top layer (ARCHITECTURE.md: Layers): the subcommands that are not a layer of their own
//! (`agent`, the shell `shim`, `mcp`, `export`, `grep`, `postmortem`: `tether open`'s text),
//! over every crate below, whose modules it re-exports at the paths the binary, the tests and
//! the benches use. Nothing below names this crate.

pub mod agent;
pub mod exit;
pub mod export;
pub mod grep;
#[cfg(feature = "mcp")]
pub mod mcp;
pub mod postmortem;
pub mod shim;

pub use tether_broker::{attention, broker};
pub use tether_config as config;
pub use tether_frontend::{clipboard, control, exec, prune, supervisor};
pub use tether_model as model;
pub use tether_os::{cgroup, clock, fdio, journal, procfs, sampler, sys, testing};
pub use tether_protocol::{protocol, units};
pub use tether_tui::{app, notify, ui};
