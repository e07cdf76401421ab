//! What the broker's decisions still ask of the kernel while they are made: the wall clock,
//! its own pid and uid, a front end's program name, the live processes of a walk (to say
//! what is left to keep when the command's pipes are done), and the children's CPU and
//! memory at the end. One trait, so the state machine runs on the kernel in the broker
//! ([`LiveKernel`]) and on a fake table of processes in its tests. None of it changes a
//! process.
//!
//! Everything else the kernel does for the broker is an output, its answer an input: the
//! interpreter reaps (`Input::Reaped`, with whether a child is left), the stop sequence's
//! signals are plans it delivers (`Output::Signal`, `Input::Signalled`), and so are the
//! operator's (a control client's or the parent's `signal`: `Output::OperatorSignal`,
//! `Input::OperatorSignalled`, after which the request is journaled and answered), the
//! notify command runs there (`Output::Notify`…), the tree's record is walked there
//! (`Output::SampleTree`).

use crate::broker::signaller::Walk;
use crate::procfs::{self, ProcStat};

pub trait Kernel {
    /// This process's pid: the root of the tree on the /proc walk.
    fn own_pid(&self) -> i32;
    /// The wall clock, in milliseconds since the epoch, for the journal's `ts_ms`.
    fn wall_ms(&self) -> u64;
    /// The live processes of `walk`.
    fn live(&mut self, walk: &Walk) -> Vec<ProcStat>;
    /// The program of `pid`, for the journal's `client`.
    fn program_label(&mut self, pid: i32) -> Option<String>;
    /// This process's uid.
    fn uid(&self) -> u32;
    /// CPU time and largest RSS of the reaped children, as the kernel accounts them.
    fn children_usage(&mut self) -> (u64, u64);
}

/// The kernel the broker runs on: the stop sequence's own signaller (which the interpreter
/// delivers the broker's signals through), and the rest.
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
