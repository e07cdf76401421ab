//! Attention: telling when a command needs the operator (it waits for input, has gone quiet,
//! runs away, failed or finished), decided in the broker from what it already watches, and
//! the `[notify] command` it runs for each such moment.
//!
//! - [`detector`]: the decisions, pure (samples, output and time in; events out); an agent's
//!   wait for its human in `agent_wait`;
//! - [`probe`]: what a sample says of each process, read from /proc; for an agent, whether it
//!   waits on its terminal in a poll or epoll set too ([`waits`]);
//! - [`notify`]: running the notify command, bounded, out of the command's way, through a
//!   keeper process (`keeper`, which ends all a run left: `sweep`), at the user's rate
//!   across all brokers ([`rate`], kept in [`rate_file`]).

pub(crate) mod keeper;
pub mod notify;
pub mod probe;
pub mod rate;
pub mod rate_file;
mod sweep;
pub mod waits;

pub use tether_core::attention::detector;

#[cfg(test)]
mod tests;
