//! The front end's copy of the output (`tether exec`'s and the shim's, see `broker::mirror`)
//! once the command has ended. While the command runs, a copy that is behind holds its
//! stream unread, and the command waits on its pipe as it would without tether. Once the
//! command has ended, what is left is finite and the broker's end must not hang on it: the
//! copy is waited for as long as the caller keeps taking bytes, and given up when it took
//! nothing for [`COPY_PATIENCE`], or at once after a stop was asked (without tether, a
//! killed writer's pending write is lost and nothing waits; a stop must never wait on a full
//! pipe). What was given up is journaled at the end (`output_undelivered`): what the copy
//! still held then, and every byte of the stream read after it. Every byte is in the
//! journal anyway, and the caller's loss is said, never silent.

use std::time::Duration;

use std::time::Instant;

use super::machine::Output;
use super::{Broker, Phase};
use crate::protocol::{EventKind, Origin, Stream};

/// How long a caller may take nothing of the copy, once the command has ended, before the
/// copy is given up: as long as `tether exec` itself waits for its copy once its broker is
/// gone.
pub(super) const COPY_PATIENCE: Duration = Duration::from_secs(5);

/// How the front end's copy stands, as the interpreter saw it at a tick.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CopyProgress {
    /// Bytes wait for the front end: a stream is not read meanwhile, so its quiet is not
    /// idleness.
    pub behind: bool,
    /// Bytes the copy pipes have taken so far, both streams together.
    pub taken: u64,
}

/// What the broker knows of the copy.
pub(super) struct CopyWatch {
    last: CopyProgress,
    /// When the copy last took bytes (or the broker started).
    moved: Instant,
    /// A stop was asked: once the command has ended, a copy behind is not waited for.
    hurry: bool,
    /// Asked to be given up ([`Output::GiveUpCopy`]), not answered yet.
    giving_up: bool,
    /// The streams (stdout, stderr) whose copy was given up: what they bring from then on
    /// never reaches the caller.
    given_up: [bool; 2],
}

impl CopyWatch {
    pub(super) fn new(now: Instant) -> CopyWatch {
        CopyWatch {
            last: CopyProgress::default(),
            moved: now,
            hurry: false,
            giving_up: false,
            given_up: [false; 2],
        }
    }

    pub(super) fn behind(&self) -> bool {
        self.last.behind
    }

    /// When a copy that is behind is given up, if it still is then.
    fn give_up_at(&self) -> Instant {
        if self.hurry {
            self.moved
        } else {
            self.moved + COPY_PATIENCE
        }
    }
}

/// Stops by origin that do not wait for the copy once the command has ended: the watchdog's,
/// a budget's, the front end's loss. (Every stop request, and a signal to the broker, hurries the copy
/// where it is taken.) The broker's own stop of stragglers after a command that ended on
/// its own (`leftovers`), and a final drain (the command finished), do wait.
pub(super) fn asked(origin: Origin) -> bool {
    matches!(
        origin,
        Origin::Operator
            | Origin::FileChanged
            | Origin::Caller
            | Origin::Watchdog
            | Origin::Budget
            | Origin::ParentLost
            | Origin::Reclaim
    )
}

impl Broker {
    /// The copy as the interpreter saw it now.
    pub(super) fn copy_seen(&mut self, progress: CopyProgress) {
        if progress.taken != self.copy.last.taken {
            self.copy.moved = self.now;
        }
        self.copy.last = progress;
    }

    /// A stop was asked: once the command has ended, the copy is not waited for.
    pub(super) fn hurry_copy(&mut self) {
        self.copy.hurry = true;
    }

    /// Whether the command has ended and its end may be held up by the copy.
    fn copy_holds_the_end(&self) -> bool {
        self.copy.last.behind
            && !self.copy.giving_up
            && matches!(
                self.phase,
                Phase::Draining { .. } | Phase::TearingDown | Phase::Closing { .. }
            )
    }

    /// When the copy is next to be looked at ([`Broker::check_copy`]).
    pub(super) fn copy_deadline(&self) -> Option<Instant> {
        self.copy_holds_the_end().then(|| self.copy.give_up_at())
    }

    /// Gives up the copy when the command has ended and the caller took nothing for too
    /// long, or a stop was asked ([`Input::CopyGivenUp`](super::Input::CopyGivenUp) answers).
    pub(super) fn check_copy(&mut self, now: Instant) {
        if self.copy_holds_the_end() && now >= self.copy.give_up_at() {
            self.copy.giving_up = true;
            self.outputs.push_back(Output::GiveUpCopy);
        }
    }

    /// The copy of each stream that was behind is given up: `undelivered`, the bytes it
    /// held that never reached the caller (none for a stream whose copy goes on).
    pub(super) fn copy_given_up(&mut self, undelivered: [u64; 2]) {
        self.copy.giving_up = false;
        self.copy.last.behind = false;
        for (stream, bytes) in Stream::BOTH.into_iter().zip(undelivered) {
            if bytes > 0 {
                self.copy.given_up[stream as usize] = true;
                self.streams[stream as usize].undelivered += bytes;
            }
        }
    }

    /// A chunk of `stream` was read: past its copy's end, the caller never gets it.
    pub(super) fn copy_read(&mut self, stream: Stream, len: usize) {
        if self.copy.given_up[stream as usize] {
            self.streams[stream as usize].undelivered += len as u64;
        }
    }

    /// At the end, what of each stream never reached the caller, its copy given up.
    pub(super) fn journal_undelivered(&mut self) {
        for stream in Stream::BOTH {
            let bytes = self.streams[stream as usize].undelivered;
            if bytes > 0 {
                self.emit(EventKind::OutputUndelivered { stream, bytes });
            }
        }
    }
}
