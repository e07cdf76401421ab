//! Controlling live brokered commands from any front end of the same user: finding them from
//! their journals ([`live_commands`]), and talking to each broker over its control socket
//! ([`ControlClient`]). `tether ps`, `stop`, `kill` and `signal` are built on it ([`cli`]).
//!
//! ```no_run
//! # async fn demo(state: &std::path::Path) -> Result<(), Box<dyn std::error::Error>> {
//! use tether::control::{ControlClient, live_commands};
//! for command in live_commands(state, Some("agent-1"))? {
//!     let mut client = ControlClient::connect_to(&command).await?;
//!     let offset = client.subscribe().await?; // events.jsonl up to `offset`, then live
//!     client.stop().await?;
//!     while let Some(event) = client.next_event().await? {
//!         println!("{}", event.kind.name());
//!     }
//! }
//! # Ok(()) }
//! ```

pub mod cli;
pub mod client;
pub mod discover;
mod fallback;
pub mod journal_link;
pub mod report;
pub mod socket_dir;
pub mod target;
pub mod verify;

pub use client::{Ack, ControlClient, ControlError};
pub use discover::{DiscoverError, LiveCommand, broker_alive, live_commands};
pub use target::Target;
pub use verify::{BrokerCheck, signal_broker};
