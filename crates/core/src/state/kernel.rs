//! What the broker's state machine is handed rather than reads: the time of each input,
//! monotonic and wall clock ([`Now`]), and the facts of the machine and of itself that do
//! not change while it runs ([`Host`], read once by the interpreter).
//!
//! Everything else the kernel does or knows is an output, its answer an input, as
//! `quinn-proto`'s `Connection` never touches a socket: the interpreter reaps
//! (`Input::Reaped`, with whether a child is left and how the cgroup stands), reads whether
//! the command entered its cgroup (`Input::Spawned`), delivers the stop sequence's and the
//! operator's signals (`Output::Signal`, `Output::OperatorSignal`), walks the tree and
//! probes what its processes wait on (`Output::SampleTree`), lists what is left when the
//! command's pipes are done (`Output::ListLeftovers`), gives up or releases the cgroup
//! (`Output::AbandonCgroup`, `Output::ReleaseCgroup`), reads the children's CPU and memory
//! when the tree's record closes (`Output::CloseTree`) and runs the notify command
//! (`Output::Notify`…). Nothing in `broker::state` opens a file or makes a system call.

use std::time::Instant;

/// When an input happened: the monotonic clock the broker's deadlines run on, and the wall
/// clock the journal's `ts_ms` is stamped with, both read by the interpreter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Now {
    pub at: Instant,
    /// Milliseconds since the epoch.
    pub wall_ms: u64,
}

/// What the broker knows of the machine and of itself from the start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Host {
    /// The broker's pid: the root of the tree on the /proc walk.
    pub pid: i32,
    /// The broker's uid, for the journal's name of its front end.
    pub uid: u32,
    /// The program of the front end that launched it, for the journal's `client`.
    pub parent_program: Option<String>,
    /// The kernel's clock ticks per second (`/proc` times are in ticks).
    pub ticks_per_second: u64,
    /// The page size (`/proc` sizes are in pages).
    pub page_size: u64,
}
