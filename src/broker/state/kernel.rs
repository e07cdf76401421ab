//! What the broker's decisions still ask of the kernel while they are made: the wall clock,
//! its own pid and uid, a front end's program name, the live processes of a walk (to answer
//! whom a request may signal, or what is left to keep), the children's CPU and memory at the
//! end, and the operator's signals. One trait, so the state machine runs on the kernel in
//! the broker ([`LiveKernel`]) and on a fake table of processes in its tests.
//!
//! Everything else the kernel does for the broker is an output, its answer an input: the
//! interpreter reaps (`Input::Reaped`, with whether a child is left), the stop sequence's
//! signals are plans it delivers (`Output::Signal`, `Input::Signalled`), the notify command
//! runs there (`Output::Notify`…), the tree's record is walked there (`Output::SampleTree`).
//!
//! The operator's signals (a control client's or the parent's `signal`, through
//! [`TreeSignaller`] for the group, `signal_process` for one pid) are still calls, on
//! purpose: the request's answer carries the pids they reached, and is queued in the same
//! turn, so the delivery is needed in the middle of the decision. Made an output, the answer
//! would have to wait for its input; that change is left for when replies can.

use crate::broker::signaller::{self, Walk};
use crate::broker::stop::TreeSignaller;
use crate::procfs::{self, ProcStat};
use crate::protocol::ProcessSignal;

pub trait Kernel: TreeSignaller {
    /// This process's pid: the root of the tree on the /proc walk.
    fn own_pid(&self) -> i32;
    /// The wall clock, in milliseconds since the epoch, for the journal's `ts_ms`.
    fn wall_ms(&self) -> u64;
    /// The live processes of `walk`.
    fn live(&mut self, walk: &Walk) -> Vec<ProcStat>;
    /// `signal` to one process found by a walk (pidfd-checked); whether it was delivered.
    fn signal_process(&mut self, process: &ProcStat, signal: ProcessSignal) -> bool;
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

    fn signal_process(&mut self, process: &ProcStat, signal: ProcessSignal) -> bool {
        signaller::signal_process(process, signal)
    }

    fn program_label(&mut self, pid: i32) -> Option<String> {
        procfs::program_label(pid)
    }

    fn uid(&self) -> u32 {
        nix::unistd::getuid().as_raw()
    }

    fn children_usage(&mut self) -> (u64, u64) {
        crate::broker::tree::cost::children_usage()
    }
}
