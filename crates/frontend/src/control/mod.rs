//! Controlling live brokered commands from any front end of the same user: finding them from
//! their journals ([`live_commands`]), the socket each broker listens on ([`ControlClient`],
//! its framing and its peer checks), and what is done by the broker's pid when the socket
//! cannot carry a request ([`fallback`]). A front end talks to such a broker through a
//! [`BrokerConversation`](crate::supervisor::BrokerConversation) attached to its socket, as
//! `tether ps`, `stop`, `kill` and `signal` do ([`cli`]).
//!
//! ```no_run
//! # async fn demo(state: &std::path::Path) -> Result<(), Box<dyn std::error::Error>> {
//! use tether_frontend::control::live_commands;
//! use tether_protocol::protocol::Request;
//! use tether_frontend::supervisor::{Answer, BrokerConversation};
//! for command in live_commands(state, Some("agent-1"))? {
//!     let mut broker = BrokerConversation::attach(&command).await?;
//!     broker.subscribe(); // events.jsonl up to its answer's offset, then live
//!     if let Answer::Done(_) = broker.answer(&Request::Stop { origin: None }).await {
//!         while let Some(line) = broker.next_line().await {
//!             println!("{:?}", line.event.map(|e| e.kind.name()));
//!         }
//!     }
//! }
//! # Ok(()) }
//! ```

pub mod agent_shims;
pub mod cli;
pub mod client;
pub mod discover;
pub mod fallback;
pub mod ps_table;
pub mod report;
pub mod target;
pub mod verify;

pub use client::{Ack, ControlClient, ControlError};
pub use discover::{LiveCommand, live_commands};
pub use target::Target;
pub use tether_os::procfs::broker_alive;
pub use tether_os::{journal_link, socket_dir};
