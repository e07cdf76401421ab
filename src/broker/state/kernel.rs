//! What the broker's decisions ask of the kernel while they are made: reaping its children,
//! whether any is left, the processes of its tree, signals to them and the wall clock. (The
//! tree's record is not among them: a walk for it is an output, its result an input.) One
//! trait, so the state machine runs on the kernel in the broker ([`LiveKernel`]) and on a
//! fake table of processes in its tests, as the stop sequence does with [`TreeSignaller`].
//!
//! These answers are needed in the middle of a decision (a stop is done when no child is
//! left, a signal's targets are journaled with it), so they are calls rather than outputs;
//! everything the broker only has done (journal, replies, files) goes out as an
//! [`super::Output`].

use nix::sys::signal::Signal;

use crate::broker::signaller::{self, Walk};
use crate::broker::stop::TreeSignaller;
use crate::procfs::{self, ProcStat};

pub trait Kernel: TreeSignaller {
    /// This process's pid: the root of the tree on the /proc walk.
    fn own_pid(&self) -> i32;
    /// The wall clock, in milliseconds since the epoch, for the journal's `ts_ms`.
    fn wall_ms(&self) -> u64;
    /// The live processes of `walk`.
    fn live(&mut self, walk: &Walk) -> Vec<ProcStat>;
    /// `signal` to one process found by a walk (pidfd-checked); whether it was delivered.
    fn signal_process(&mut self, process: &ProcStat, signal: Signal) -> bool;
    /// The program of `pid`, for the journal's `client`.
    fn program_label(&mut self, pid: i32) -> Option<String>;
    /// This process's uid.
    fn uid(&self) -> u32;
    /// CPU time and largest RSS of the reaped children, as the kernel accounts them.
    fn children_usage(&mut self) -> (u64, u64);
}

/// The kernel the broker runs on: the stop sequence's own signaller, and the rest.
pub use crate::broker::stop::Kernel as LiveKernel;

impl Kernel for LiveKernel {
    fn own_pid(&self) -> i32 {
        std::process::id() as i32
    }

    fn wall_ms(&self) -> u64 {
        crate::clock::now_ms()
    }

    fn live(&mut self, walk: &Walk) -> Vec<ProcStat> {
        walk.live()
    }

    fn signal_process(&mut self, process: &ProcStat, signal: Signal) -> bool {
        signaller::signal_process(process, signal)
    }

    fn program_label(&mut self, pid: i32) -> Option<String> {
        procfs::program_label(pid)
    }

    fn uid(&self) -> u32 {
        rustix::process::getuid().as_raw()
    }

    fn children_usage(&mut self) -> (u64, u64) {
        crate::broker::tree::cost::children_usage()
    }
}
