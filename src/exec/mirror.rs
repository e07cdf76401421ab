//! Copies a command's output from its journal files to our own stdout and stderr, so what
//! `tether exec` prints is exactly what was stored, whatever order events arrive in.

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::protocol::Stream;

pub struct Mirror {
    dir: PathBuf,
    streams: [StreamMirror; 2],
}

#[derive(Default)]
struct StreamMirror {
    file: Option<File>,
    /// Bytes copied so far.
    copied: u64,
    /// Bytes stored in the log, once storing stopped.
    stored_limit: Option<u64>,
    /// Our own output went away (EPIPE); nothing more is copied.
    broken: bool,
    /// `sendfile` is refused for this output; plain reads and writes are used.
    no_sendfile: bool,
}

impl Mirror {
    pub fn new(dir: &Path) -> Mirror {
        Mirror {
            dir: dir.to_path_buf(),
            streams: Default::default(),
        }
    }

    pub fn cap(&mut self, stream: Stream, stored: u64) {
        self.streams[stream as usize].stored_limit = Some(stored);
    }

    /// Copies the stream up to byte `end` (or up to what was stored). An error means our own
    /// output is gone and the command should be stopped.
    pub fn copy_to(&mut self, stream: Stream, end: u64) -> io::Result<()> {
        let state = &mut self.streams[stream as usize];
        if state.broken {
            return Ok(());
        }
        let end = state.stored_limit.map_or(end, |limit| end.min(limit));
        if state.copied >= end {
            return Ok(());
        }
        if state.file.is_none() {
            state.file = Some(crate::journal::secure::open_regular(
                &self.dir.join(stream.file_name()),
            )?);
        }
        let out = match stream {
            // SAFETY: fds 1 and 2 stay open for the life of the process.
            Stream::Stdout => unsafe { BorrowedFd::borrow_raw(1) },
            Stream::Stderr => unsafe { BorrowedFd::borrow_raw(2) },
        };
        let result = state.copy(out, end);
        if let Err(err) = &result {
            if err.raw_os_error() == Some(libc::EPIPE) {
                state.broken = true;
            }
        }
        result
    }
}

impl StreamMirror {
    fn copy(&mut self, out: BorrowedFd<'_>, end: u64) -> io::Result<()> {
        let Some(file) = self.file.as_ref() else {
            return Ok(());
        };
        while self.copied < end {
            let want = (end - self.copied).min(1 << 20) as usize;
            if !self.no_sendfile {
                let mut offset = self.copied;
                match rustix::fs::sendfile(out, file.as_fd(), Some(&mut offset), want) {
                    Ok(0) => return Ok(()),
                    Ok(n) => {
                        self.copied += n as u64;
                        continue;
                    }
                    Err(rustix::io::Errno::INTR) => continue,
                    Err(rustix::io::Errno::AGAIN) => wait_writable(out),
                    Err(rustix::io::Errno::INVAL) | Err(rustix::io::Errno::NOSYS) => {
                        self.no_sendfile = true;
                    }
                    Err(err) => return Err(err.into()),
                }
            }
            let mut buf = vec![0u8; want.min(256 * 1024)];
            let n = file.read_at(&mut buf, self.copied)?;
            if n == 0 {
                return Ok(());
            }
            write_all(out, &buf[..n])?;
            self.copied += n as u64;
        }
        Ok(())
    }
}

fn write_all(out: BorrowedFd<'_>, mut bytes: &[u8]) -> io::Result<()> {
    while !bytes.is_empty() {
        match rustix::io::write(out, bytes) {
            Ok(n) => bytes = &bytes[n..],
            Err(rustix::io::Errno::INTR) => {}
            Err(rustix::io::Errno::AGAIN) => wait_writable(out),
            Err(err) => return Err(err.into()),
        }
    }
    Ok(())
}

/// Our stdout may have been left non-blocking by whoever shares it: wait for room rather
/// than spin.
fn wait_writable(out: BorrowedFd<'_>) {
    let mut fds = [rustix::event::PollFd::new(
        &out,
        rustix::event::PollFlags::OUT,
    )];
    let _ = rustix::event::poll(&mut fds, None);
}
