//! tether-core: the decisions of tether's broker without any I/O. Inputs in (what happened,
//! and `now`), outputs out (what to do); it never reads a file or /proc, never sends a
//! signal, never spawns a process and never reads a clock. The broker's I/O layer (the
//! tether crate's `broker::run`) drives it; its tests drive it with a fake world.
//!
//! - [`attention`]: the attention detector (when a command waits for input, has gone quiet,
//!   runs away) and what it asks a sample of the tree to read.
//! - [`by_hand`]: whose doing a command's end was, a person's or its own: the one rule for
//!   the broker's `failed` and for the words and counts of every view (the model's).
//! - [`cost`]: what the command's tree cost, weighed from the sources the OS layer read.
//! - [`final_drain`]: the final-drain pattern and the line matcher over split and very long
//!   lines.
//! - [`launcher`]: `tether run`'s launcher: dependencies, restarts, restarts on a file
//!   change and the order of stops, decided from what the runs did and `now`.
//! - [`process`]: a process's `stat` fields as the OS layer reads them, and its key; a
//!   command's cgroup named as data ([`process::CgroupId`]) and the walks the state asks
//!   for ([`process::TreeWalk`]), which the I/O layer carries out with the cgroup's handle.
//! - [`readiness`]: how long one try of a readiness probe may take, an HTTP status line, a
//!   `ready_log` pattern compiled and a probe's target read (an address, never looked up).
//! - [`reports`]: what the I/O layer reports back as data (a child reaped, the input a
//!   terminal took, a look at the tree).
//! - [`state`]: the broker's state machine (in the shape of quinn-proto's `Connection`):
//!   happenings in as `Input`s with `now`, what to do out as `Output`s; cgroup reads and
//!   removal, tree walks, signals and the notify runs are outputs, their answers inputs.
//! - [`stop`]: the stop sequence's plan (TERM and CONT, sweeps during grace, KILL), decided
//!   from `now` and what each delivery reached; a `TreeSignaller` delivers it.
//!
//! It depends on tether-protocol only (the messages and events it decides, the units), on
//! pure crates (regex, memchr, serde_json, strum, thiserror), and on std without `std::fs`,
//! `std::process` or `std::net`'s sockets (its address types are data): never tokio (time is `std::time::Instant`, handed in), nix,
//! rustix, libc or any crate above it.

pub mod attention;
pub mod by_hand;
pub mod cost;
pub mod final_drain;
pub mod launcher;
pub mod process;
pub mod readiness;
pub mod reports;
pub mod state;
pub mod stop;

use tether_protocol::{protocol, units};
