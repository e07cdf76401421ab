//! tether-frontend: what every front end (the TUI, `tether exec`, the shell shim, the watch,
//! the MCP server, the control CLI) does with its brokers. It starts them and holds the
//! conversation with each (`supervisor`: the conversation's machine on simulated time and its
//! tokio driver), finds and controls live ones from their journals and sockets (`control`),
//! runs one command the way a shell would (`exec`), removes old sessions (`prune`) and
//! copies to the clipboard (`clipboard`).
//!
//! Above tether-broker (whose spawn and identity it uses to start one), tether-model,
//! tether-config, tether-os, tether-core and tether-protocol; below the TUI and the binary,
//! which it cannot name.

pub mod clipboard;
pub mod control;
pub mod exec;
pub mod prune;
pub mod supervisor;
