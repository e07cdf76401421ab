//! tether-protocol: what crosses a boundary between tether's processes, as types. The
//! messages between a front end and its brokers (`protocol`: `Request`, the one type of both
//! ways to a broker, the journal's events, signals), how they are framed on the
//! wire, the units they carry (`units`: durations, sizes) and the identity of a command
//! (`CommandId`: session, number, name).
//!
//! The bottom layer: every other crate may depend on it, and it depends on no other tether
//! crate. It may use serde, serde_json, base64, strum, thiserror and memchr; never tokio, nix,
//! rustix, libc or the filesystem. It holds data and pure functions on data: what a message means is
//! decided above it, and nothing here sends, reads or writes anything.

pub mod command_id;
pub mod names;
pub mod protocol;
pub mod units;

pub use command_id::{BadCommandId, CommandId};
