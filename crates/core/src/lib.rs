//! tether-core: the decisions of tether's broker without any I/O. Inputs in (what happened,
//! and `now`), outputs out (what to do); it never reads a file or /proc, never sends a
//! signal, never spawns a process and never reads a clock. The broker's I/O layer (the
//! tether crate's `broker::run`) drives it; its tests drive it with a fake world.
//!
//! - [`attention`]: the attention detector (when a command waits for input, has gone quiet,
//!   runs away) and what it asks a sample of the tree to read.
//! - [`stop`]: the stop sequence's plan (TERM and CONT, sweeps during grace, KILL), decided
//!   from `now` and what each delivery reached; a `TreeSignaller` delivers it.
//!
//! It depends on tether-protocol only (the messages and events it decides, the units), and
//! on std without `std::fs`, `std::process` or `std::net`: never tokio (time is
//! `std::time::Instant`, handed in), nix, rustix, libc or any crate above it.

pub mod attention;
pub mod stop;

use tether_protocol::{protocol, units};
