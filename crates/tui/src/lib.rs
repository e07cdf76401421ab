//! tether-tui: the full-screen terminal UI. `app` is its state machine and event loop (keys,
//! the fleet's events, the launcher's runner, `tether watch` following other sessions), `ui`
//! draws a frame of it with ratatui, and `notify` tells the operator's desktop or command
//! when a command needs them.
//!
//! Above tether-frontend (whose conversations carry its commands), tether-model (what it
//! shows), tether-config, tether-os, tether-core and tether-protocol; below the binary, which
//! alone may name it.

pub mod app;
pub mod notify;
pub mod ui;
