//! One control connection: what it sent that is not handled yet, and what waits for it to
//! read. Nothing here waits: reads and writes are attempted and given up on `WouldBlock`.

use std::collections::VecDeque;
use std::io;
use std::task::{Context, Poll};

use tokio::net::UnixStream;

use super::{OUTBOX_CAP, READS_PER_WAKE};
use tether_os::fdio::Outbox;
use tether_protocol::protocol::{Frame, LineSplitter, Peer};

pub(super) struct Client {
    pub(super) id: u64,
    pub(super) peer: Peer,
    pub(super) quota: super::Quota,
    pub(super) stream: UnixStream,
    pub(super) lines: LineSplitter,
    pub(super) frames: VecDeque<Frame>,
    pub(super) outbox: Outbox,
    pub(super) subscribed: bool,
    pub(super) read_closed: bool,
    pub(super) dead: bool,
}

impl Client {
    /// Done with: broken, or it has closed its end and has been sent what it was owed (a
    /// subscription ends with it: a peer gone quiet must not hold a client slot until the
    /// next event, which for an idle command may never come).
    pub(super) fn is_finished(&self) -> bool {
        self.dead || (self.read_closed && self.frames.is_empty() && self.outbox.is_empty())
    }

    /// Queues `bytes` and writes what the socket takes now. A client that has left more
    /// than [`OUTBOX_CAP`] unread is dropped instead: it may reconnect and catch up from
    /// the journal.
    pub(super) fn send(&mut self, bytes: &[u8]) {
        if self.dead {
            return;
        }
        if self.outbox.len() > OUTBOX_CAP {
            self.dead = true;
            self.outbox = Outbox::default();
            return;
        }
        self.outbox.push(bytes);
        self.write_now();
    }

    /// Writes what the socket takes now, without waiting; a broken one is dead.
    fn write_now(&mut self) {
        let stream = &self.stream;
        self.dead |= (self.outbox)
            .write_now_with(|b| stream.try_write(b))
            .is_err();
    }

    pub(super) fn poll_flush(&mut self, cx: &mut Context<'_>) {
        while !self.dead && !self.outbox.is_empty() {
            match self.stream.poll_write_ready(cx) {
                Poll::Pending => return,
                Poll::Ready(Err(_)) => self.dead = true,
                Poll::Ready(Ok(())) => {
                    let before = self.outbox.len();
                    self.write_now();
                    if self.outbox.len() == before {
                        // Readiness was stale; the next poll registers for the real one.
                        continue;
                    }
                }
            }
        }
    }

    /// The next complete line from this client, reading a few chunks at most.
    pub(super) fn poll_frame(&mut self, cx: &mut Context<'_>, buf: &mut [u8]) -> Option<Frame> {
        if let Some(frame) = self.frames.pop_front() {
            return Some(frame);
        }
        if self.read_closed || self.dead {
            return None;
        }
        let mut reads = 0;
        loop {
            match self.stream.poll_read_ready(cx) {
                Poll::Pending => return None,
                Poll::Ready(Err(_)) => {
                    self.dead = true;
                    return None;
                }
                Poll::Ready(Ok(())) => {}
            }
            match self.stream.try_read(buf) {
                Ok(0) => {
                    self.read_closed = true;
                    self.frames.extend(self.lines.finish());
                    return self.frames.pop_front();
                }
                Ok(n) => {
                    self.frames.extend(self.lines.push(&buf[..n]));
                    if let Some(frame) = self.frames.pop_front() {
                        return Some(frame);
                    }
                }
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => continue,
                Err(_) => {
                    self.dead = true;
                    return None;
                }
            }
            reads += 1;
            if reads == READS_PER_WAKE {
                // More may be there (a long line arriving): come back after the loop has
                // looked at everything else.
                cx.waker().wake_by_ref();
                return None;
            }
        }
    }
}
