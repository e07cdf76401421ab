//! The broker's control socket: any front end of the same user may connect, subscribe to the
//! broker's events (the journal's lines), ping, signal and stop, never launch.
//!
//! Nothing a client does can hold the broker up. Every read and write is non-blocking and
//! bounded per wake-up; what a client does not take waits in its outbox, and a client whose
//! outbox passes [`OUTBOX_CAP`] is dropped (it may resubscribe and read the rest from the
//! journal). A line longer than [`CONTROL_MAX_LINE`] is skipped as it arrives, never stored.
//! A peer of another uid is refused before anything is read from it, and the command's own
//! processes cannot take the slots an operator needs ([`admission`]).

mod admission;
mod client;

use std::collections::VecDeque;
use std::future::poll_fn;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::net::{UnixListener, UnixStream};
use tokio::time::{Instant, Sleep};

use self::admission::Quota;
use self::client::Client;
use super::state::{Input, Sender};
use tether_os::clock::now_ms;
use tether_os::socket_dir::{self, SocketDirError};
use tether_protocol::protocol::{
    BrokerIdentity, CONTROL_MAX_LINE, Event, EventKind, LineSplitter, Peer, Request, Transport,
};

/// Bytes a client may leave unread before it is dropped.
pub const OUTBOX_CAP: usize = 1 << 20;
const READ_CHUNK: usize = 16 * 1024;
/// Reads from one client per wake-up: a client writing without end must not keep the broker
/// in its loop.
const READS_PER_WAKE: usize = 4;
/// Refused connections journaled per broker; later ones are refused all the same, silently.
const REFUSALS_JOURNALED: u32 = 32;
/// After `accept` fails (out of descriptors), how long before trying again.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

pub struct ControlServer {
    listener: UnixListener,
    path: PathBuf,
    /// Device and inode of the socket file bound, so that only that file is ever removed.
    file_id: (u64, u64),
    removed: bool,
    me: u32,
    /// This broker's pid: peers below it are the command's.
    pid: i32,
    start: Instant,
    clients: Vec<Client>,
    next_id: u64,
    /// Where the next round of reads starts, so that one busy client cannot starve others.
    rotate: usize,
    refusals: u32,
    /// Refused connections waiting for their journaled refusal to be answered (at most
    /// [`REFUSALS_JOURNALED`] over the broker's life).
    refused: Vec<(u64, UnixStream)>,
    accept_backoff: Option<Pin<Box<Sleep>>>,
    buf: Vec<u8>,
}

impl ControlServer {
    /// Creates the socket directory if need be, checks it, and listens on a fresh socket
    /// named after this broker. The socket is created under umask 177: it is never, even
    /// for an instant, more than 0600.
    pub fn listen(
        broker: &BrokerIdentity,
        start: Instant,
    ) -> Result<ControlServer, SocketDirError> {
        let dir = socket_dir::socket_dir();
        socket_dir::prepare(&dir)?;
        let mut attempt = 1;
        let mut stale_removed = false;
        let (std_listener, path) = loop {
            let path = socket_dir::socket_path(&dir, broker, attempt);
            socket_dir::check_path(&path)?;
            let old = nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o177));
            let bound = std::os::unix::net::UnixListener::bind(&path);
            nix::sys::stat::umask(old);
            match bound {
                Ok(listener) => break (listener, path),
                // A socket left by a broker that had this pid and start time (before a
                // reboot, in another PID namespace): taken over if nobody listens on it.
                Err(err) if err.kind() == io::ErrorKind::AddrInUse && attempt < 8 => {
                    if !stale_removed && socket_dir::remove_if_stale(&path) {
                        stale_removed = true;
                    } else {
                        attempt += 1;
                    }
                }
                Err(err) => return Err(SocketDirError::Io { path, source: err }),
            }
        };
        let io_err = |err: io::Error| SocketDirError::Io {
            path: path.clone(),
            source: err,
        };
        let meta = std::fs::symlink_metadata(&path).map_err(io_err)?;
        std_listener.set_nonblocking(true).map_err(io_err)?;
        let listener = UnixListener::from_std(std_listener).map_err(io_err)?;
        Ok(ControlServer {
            listener,
            file_id: (meta.dev(), meta.ino()),
            path,
            removed: false,
            me: nix::unistd::geteuid().as_raw(),
            pid: broker.pid,
            start,
            clients: Vec::new(),
            next_id: 0,
            rotate: 0,
            refusals: 0,
            refused: Vec::new(),
            accept_backoff: None,
            buf: vec![0; READ_CHUNK],
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn has_subscribers(&self) -> bool {
        self.clients.iter().any(|c| c.subscribed && !c.dead)
    }

    /// The next request (read by [`Request::parse`]) or refused connection. Accepting,
    /// reading and writing happen inside; cancel-safe (everything read is kept in the
    /// clients' state).
    pub async fn next(&mut self) -> Input<'static> {
        poll_fn(|cx| self.poll_next(cx)).await
    }

    fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Input<'static>> {
        self.clients.retain(|c| !c.is_finished());
        if let Some(refusal) = self.poll_accept(cx) {
            return Poll::Ready(refusal);
        }
        let n = self.clients.len();
        for k in 0..n {
            let i = (self.rotate + k) % n;
            let client = &mut self.clients[i];
            client.poll_flush(cx);
            if let Some(frame) = client.poll_frame(cx, &mut self.buf) {
                self.rotate = i + 1;
                let from = Sender::Client {
                    client: client.id,
                    peer: client.peer.clone(),
                    in_tree: client.quota == Quota::Command && client.peer.pid > 0,
                };
                let request = Request::parse(frame, Transport::Socket);
                return Poll::Ready(Input::Request { from, request });
            }
        }
        Poll::Pending
    }

    fn poll_accept(&mut self, cx: &mut Context<'_>) -> Option<Input<'static>> {
        if let Some(sleep) = self.accept_backoff.as_mut() {
            if sleep.as_mut().poll(cx).is_pending() {
                return None;
            }
            self.accept_backoff = None;
        }
        loop {
            match self.listener.poll_accept(cx) {
                Poll::Pending => return None,
                Poll::Ready(Err(_)) => {
                    // EMFILE and the like leave the listener readable: wait before retrying
                    // rather than spin.
                    self.accept_backoff = Some(Box::pin(tokio::time::sleep(ACCEPT_BACKOFF)));
                    let _ = self.accept_backoff.as_mut().map(|s| s.as_mut().poll(cx));
                    return None;
                }
                Poll::Ready(Ok((stream, _))) => {
                    if let Some(refusal) = self.admit(stream) {
                        return Some(refusal);
                    }
                }
            }
        }
    }

    /// Checks a new connection's credentials and takes it on, or refuses it. Returns the
    /// refusal when it is to be journaled.
    fn admit(&mut self, stream: UnixStream) -> Option<Input<'static>> {
        let peer = match stream.peer_cred() {
            Ok(cred) => Peer {
                pid: cred.pid().unwrap_or(0),
                uid: cred.uid(),
                // Read now, while it is connected: its pid cannot be another's yet.
                program: tether_os::procfs::program_label(cred.pid().unwrap_or(0)),
            },
            Err(err) => {
                let message = format!("cannot read the peer's credentials: {err}");
                let peer = Peer {
                    pid: 0,
                    uid: u32::MAX,
                    program: None,
                };
                return self.journal_refusal(stream, peer, message);
            }
        };
        if peer.uid != self.me {
            let reason = format!(
                "uid {} is not the broker's (uid {}); only the same user may control a command",
                peer.uid, self.me
            );
            return self.journal_refusal(stream, peer, reason);
        }
        let quota = Quota::of(peer.pid, self.pid);
        let held = self.clients.iter().filter(|c| !c.dead).map(|c| c.quota);
        if let Err(full) = admission::admit(held, quota) {
            self.refuse(stream, "too_many_clients", full.0);
            return None;
        }
        self.next_id += 1;
        self.clients.push(Client {
            id: self.next_id,
            peer,
            quota,
            stream,
            lines: LineSplitter::new(CONTROL_MAX_LINE),
            frames: VecDeque::new(),
            outbox: Default::default(),
            subscribed: false,
            read_closed: false,
            dead: false,
        });
        None
    }

    /// A refusal to journal: the connection waits for the broker's answer, which follows
    /// the journaled event. Past [`REFUSALS_JOURNALED`] it is answered and closed at once.
    fn journal_refusal(
        &mut self,
        stream: UnixStream,
        peer: Peer,
        reason: String,
    ) -> Option<Input<'static>> {
        self.refusals += 1;
        if self.refusals > REFUSALS_JOURNALED {
            self.refuse(stream, "refused", reason);
            return None;
        }
        self.next_id += 1;
        let client = self.next_id;
        self.refused.push((client, stream));
        Some(Input::ControlRefused {
            client,
            peer,
            reason,
        })
    }

    /// Refuses a connection at once, with a `control_error` it is sent and not journaled.
    fn refuse(&self, stream: UnixStream, code: &str, message: String) {
        let event = Event {
            ts_ms: now_ms(),
            mono_us: self.start.elapsed().as_micros() as u64,
            kind: EventKind::ControlError {
                code: code.into(),
                message,
            },
        };
        // Best effort: the socket buffer of a fresh connection takes one line.
        let _ = stream.try_write(&event.to_line());
    }

    /// Queues `lines` (whole event lines) for every subscriber and writes what each takes
    /// now. A subscriber that left more than [`OUTBOX_CAP`] unread is dropped.
    pub fn broadcast(&mut self, lines: &[u8]) {
        if lines.is_empty() {
            return;
        }
        for client in self.clients.iter_mut().filter(|c| c.subscribed && !c.dead) {
            client.send(lines);
        }
    }

    /// Sends one event line to one client only (it is dropped if it left too much unread,
    /// as one that sends requests and never reads the answers would).
    pub fn reply(&mut self, client: u64, line: &[u8]) {
        if let Some(at) = self.refused.iter().position(|(id, _)| *id == client) {
            // Best effort: the socket buffer of a fresh connection takes one line; the
            // connection ends with it.
            let (_, stream) = self.refused.swap_remove(at);
            let _ = stream.try_write(line);
            return;
        }
        if let Some(c) = self.clients.iter_mut().find(|c| c.id == client) {
            c.send(line);
        }
    }

    pub fn subscribe(&mut self, client: u64) {
        if let Some(c) = self.clients.iter_mut().find(|c| c.id == client) {
            c.subscribed = true;
        }
    }

    /// Removes the socket file (new clients are refused from here on), then gives the
    /// clients at most `limit` to take what is queued for them.
    pub async fn close(&mut self, limit: Duration) {
        self.remove_socket();
        let flushed = poll_fn(|cx| {
            let mut pending = false;
            for client in &mut self.clients {
                client.poll_flush(cx);
                pending |= !client.dead && !client.outbox.is_empty();
            }
            if pending {
                Poll::Pending
            } else {
                Poll::Ready(())
            }
        });
        let _ = tokio::time::timeout(limit, flushed).await;
        self.clients.clear();
        self.refused.clear();
    }

    /// Removes the socket file: nobody new connects. Clients connected stay served.
    pub fn remove_socket(&mut self) {
        if std::mem::replace(&mut self.removed, true) {
            return;
        }
        // Only the file this broker bound: the directory is ours alone, but check anyway.
        if std::fs::symlink_metadata(&self.path).is_ok_and(|m| (m.dev(), m.ino()) == self.file_id) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

impl Drop for ControlServer {
    fn drop(&mut self) {
        self.remove_socket();
    }
}
