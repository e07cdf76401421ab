//! tether: run commands through brokers that never orphan a process and never lose a byte,
//! journal everything, and show it live or after the fact.

pub mod agent;
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
