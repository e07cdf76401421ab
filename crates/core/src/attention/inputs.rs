//! What the detector knows of the command's inputs, and what it asks a sample to read: data
//! that the broker's probe fills in from `fstat` and /proc.

use super::detector::InputKind;

/// A file the command reads input from, as `fstat` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InputFile {
    pub dev: u64,
    pub ino: u64,
    /// For a character device (a terminal), its device number: every open of it matches.
    pub rdev: Option<u64>,
    pub input: InputKind,
}

impl InputFile {
    /// The same file: the same device number for a character device (every open of a
    /// terminal), else the same inode.
    pub fn matches(&self, other: &InputFile) -> bool {
        match (self.rdev, other.rdev) {
            (Some(a), Some(b)) => a == b,
            (None, None) => self.dev == other.dev && self.ino == other.ino,
            _ => false,
        }
    }
}

/// What a sample reads beyond the walk's `stat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Looks {
    /// What sleeping processes wait for (the detector wants it, and the command has an
    /// input to wait on).
    pub blocked: bool,
    /// How much CPU each runnable process wanted (`schedstat`), for runaways.
    pub demand: bool,
    /// The process last seen blocked on the input, looked at first.
    pub waiting: Option<i32>,
    /// The command is an agent: whether it waits on its terminal is read from every thread's
    /// wait, a poll or epoll set too (`super::waits`), and whether a command of its runs.
    pub agent: bool,
}
