//! The names tether's own processes go by, so that one tether process can tell another
//! (a broker, a shell call in flight, a keeper, a retention run) from a command's, and the
//! hidden subcommand an agent's session is owned through. A name alone anyone can take:
//! each reader also checks what only tether's processes have (the program they run, a token).

use std::ffi::CStr;

/// The name a broker gives itself (`/proc/PID/comm`): a forked broker would otherwise be
/// named as its front end (`bash`, for the shim).
pub const BROKER_COMM: &CStr = c"tether-broker";

/// The process name (comm) of `tether exec` and the shell shim once they have started a
/// broker and wait for their command: a shell call of an agent's in flight.
pub const CALL_COMM: &CStr = c"tether-call";

/// The name (comm) of a broker's keeper: the child that runs a notify command or a
/// readiness probe's shell. Neither is the command's, so neither is in its tree: a child of
/// the broker with this name that runs the broker's own program (a keeper never execs; a
/// name alone anyone can take).
pub const KEEPER_COMM: &CStr = c"tether-notify";

/// A retention run's process name (comm). Started by a shell call inside an agent's cgroup
/// and re-parented to the agent's broker, it leaves that cgroup first, as a broker does, and
/// by this name and where it ended the agent's broker tells it from the agent's own orphans.
pub const PRUNE_COMM: &CStr = c"tether-prune";

/// The hidden subcommand `tether agent` starts the agent through.
pub const OWNER_SUBCOMMAND: &str = "session-owner";
