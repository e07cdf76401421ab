//! Journaling what the operator typed into the command's terminal: how many bytes, never
//! which, gathered into one `input` event a second.

use std::time::Instant;

use super::Broker;
use crate::protocol::{Event, EventKind};
use crate::reports::InputTaken;

pub(super) struct PendingInput {
    taken: InputTaken,
    ts_ms: u64,
    mono_us: u64,
    pub(super) since: Instant,
}

impl Broker {
    /// Input the front end sent, and how much of it reached the terminal's queue.
    pub(super) fn input(&mut self, taken: InputTaken) {
        if taken == InputTaken::default() {
            return;
        }
        // Typing into a shell is how most of its children start.
        self.tree_may_have_changed();
        if taken.bytes > 0 {
            self.attention_typed(self.now);
        }
        let (ts_ms, mono_us) = (self.wall_ms, self.mono_us());
        let pending = self.pending_input.get_or_insert(PendingInput {
            taken: InputTaken::default(),
            ts_ms,
            mono_us,
            since: self.now,
        });
        pending.taken.bytes += taken.bytes;
        pending.taken.dropped += taken.dropped;
    }

    pub(super) fn flush_input(&mut self) {
        if let Some(p) = self.pending_input.take() {
            let event = Event {
                ts_ms: p.ts_ms,
                mono_us: p.mono_us,
                kind: EventKind::Input {
                    bytes: p.taken.bytes,
                    dropped: p.taken.dropped,
                },
            };
            self.record(&event);
        }
    }
}
