//! The command's terminals once it runs: input for the one that is its stdin, and the size
//! of all of them. The masters themselves are the stream "pipes" the event loop reads; this
//! keeps what goes the other way.
//!
//! Input is queued and written as the terminal takes it, never waiting: a command that does
//! not read its input must hold up neither the broker nor its front end. Past
//! [`MAX_PENDING_INPUT`] waiting bytes, more input is dropped and counted.

use std::io;

use crate::broker::pty;
use tether_os::fdio::{AsyncPipe, Outbox};
use tether_protocol::protocol::{Stream, TerminalRequest, WindowSize};

/// The most input that may wait for a command that does not read it: a 10 MiB paste fits.
pub const MAX_PENDING_INPUT: usize = 16 << 20;

pub use tether_core::reports::InputTaken;

#[derive(Default)]
pub struct Terminals {
    /// Which streams are terminals (their masters are the loop's stream pipes).
    streams: [bool; 2],
    /// The stream whose terminal is the command's stdin: where input goes.
    input: Option<Stream>,
    size: Option<WindowSize>,
    pending: Outbox,
}

impl Terminals {
    /// `given`: the terminals the command got; `stdin_is_terminal`: whether its stdin is
    /// the controlling one (stdout's, else stderr's).
    pub fn new(given: Option<TerminalRequest>, stdin_is_terminal: bool) -> Terminals {
        let Some(given) = given else {
            return Terminals::default();
        };
        let streams = [given.stdout, given.stderr];
        let controlling = Stream::BOTH.into_iter().find(|&s| streams[s as usize]);
        Terminals {
            streams,
            input: controlling.filter(|_| stdin_is_terminal),
            size: Some(given.size),
            pending: Outbox::default(),
        }
    }

    /// The stream whose master takes input, while input waits for it.
    pub fn input_waiting(&self) -> Option<Stream> {
        self.input.filter(|_| !self.pending.is_empty())
    }

    /// Queues input for the command's terminal and writes what it takes now. Input with
    /// nowhere to go (no terminal for stdin, the command's terminal closed) or beyond
    /// [`MAX_PENDING_INPUT`] is dropped.
    pub fn input(&mut self, data: &[u8], pipes: &[Option<AsyncPipe>; 2]) -> InputTaken {
        let bytes = data.len() as u64;
        let Some(pipe) = self.input.and_then(|s| pipes[s as usize].as_ref()) else {
            return InputTaken {
                bytes,
                dropped: bytes,
            };
        };
        let room = MAX_PENDING_INPUT.saturating_sub(self.pending.len());
        let kept = &data[..data.len().min(room)];
        self.pending.push(kept);
        let mut taken = InputTaken {
            bytes,
            dropped: bytes - kept.len() as u64,
        };
        if self.pending.write_now(pipe).is_err() {
            taken.dropped += self.forget_pending();
        }
        taken
    }

    /// Waits until the terminal takes some of the waiting input, and writes it. An error
    /// means the terminal is gone: the caller forgets what waits.
    pub async fn write_some(&mut self, pipe: &AsyncPipe) -> io::Result<()> {
        self.pending.write_some(pipe).await
    }

    /// Drops the waiting input (its terminal is gone); returns how many bytes.
    pub fn forget_pending(&mut self) -> u64 {
        let n = self.pending.len() as u64;
        self.pending.clear();
        n
    }

    /// Input waits but its terminal was closed: returns the bytes dropped.
    pub fn settle(&mut self, pipes: &[Option<AsyncPipe>; 2]) -> u64 {
        match self.input_waiting() {
            Some(stream) if pipes[stream as usize].is_none() => self.forget_pending(),
            _ => 0,
        }
    }

    /// Gives every terminal the new size. Returns the size when it changed (a terminal
    /// sends SIGWINCH to the command then), `None` when it did not or there is no terminal.
    pub fn resize(
        &mut self,
        size: WindowSize,
        pipes: &[Option<AsyncPipe>; 2],
    ) -> Option<WindowSize> {
        let size = size.or_default();
        if self.size.is_none_or(|now| now == size) {
            return None;
        }
        self.size = Some(size);
        for stream in Stream::BOTH {
            let i = stream as usize;
            if let (true, Some(master)) = (self.streams[i], pipes[i].as_ref()) {
                // A terminal whose command is gone has no one to tell.
                let _ = pty::set_size(master, size);
            }
        }
        Some(size)
    }
}
