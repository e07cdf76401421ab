//! tether: run commands through brokers that never orphan a process and never lose a byte,
//! journal everything, and show it live or after the fact.

pub mod broker;
pub mod clock;
pub mod exec;
pub mod fdio;
pub mod journal;
pub mod procfs;
pub mod protocol;
pub mod supervisor;
pub mod units;
