//! tether-broker: the broker, one process per command between a front end and the command,
//! as the I/O layer around tether-core's state machine (`broker::state`): it spawns the
//! command into its own process group and cgroup, reads its output, journals everything,
//! carries out the stop plan and the attention probes, and watches its parent. Also the
//! parts of the attention detector that need the kernel (`attention`: reading a waiting
//! process, the notify runs and their keepers).
//!
//! Above tether-protocol, tether-core, tether-os and tether-config; below the front ends
//! (which start brokers and talk to them), the TUI and the binary, none of which it can name.

pub mod attention;
pub mod broker;
