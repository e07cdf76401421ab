//! Whether the journal kept a command's stream whole: past the command's bound (or once a
//! disk refused more) only the head is stored and the rest counted. The views that read a
//! stream from its log (`tether grep`, the MCP tool) say so with what they found; the TUI
//! reads it from its model.

use std::path::Path;

use super::reader::read_result;
use super::tail::EventTail;
use super::writer::EVENTS_FILE;
use tether_protocol::protocol::{EventKind, Stream};

/// What the journal kept of `stream` (its log's bytes, the head) and how many bytes after
/// them it dropped; `None` when it kept every byte. A finished command's `result.json` says;
/// a running one's events do (where storing stopped, and the bytes counted since).
pub fn stream_cut(dir: &Path, stream: Stream) -> Option<(u64, u64)> {
    if let Some(result) = read_result(dir) {
        let totals = match stream {
            Stream::Stdout => result.stdout,
            Stream::Stderr => result.stderr,
        };
        let dropped = totals.bytes.saturating_sub(totals.stored);
        return (dropped > 0).then_some((totals.stored, dropped));
    }
    let mut kept = None;
    let mut total = 0;
    let mut events = EventTail::new(dir.join(EVENTS_FILE));
    let _ = events.poll_each(|event| match event.kind {
        EventKind::OutputCapped {
            stream: s, stored, ..
        } if s == stream => kept = Some(stored),
        EventKind::Output {
            stream: s,
            offset,
            len,
        } if s == stream => total = total.max(offset + len),
        _ => {}
    });
    let kept = kept?;
    (total > kept).then(|| (kept, total - kept))
}
