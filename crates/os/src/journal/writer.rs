//! Appending to a command's journal: events, raw output and the final result.

use std::fs::File;
use std::io::{self, BufWriter, Write};

use nix::errno::Errno;

use super::secure::JournalDir;
use tether_protocol::protocol::{CapReason, Stream};

pub use tether_protocol::protocol::{
    COMMAND_FILE, EVENTS_FILE, LAUNCHER_FILE, RESULT_FILE, SESSION_FILE,
};

/// The event log of one command: one JSON object a line, appended, flushed per batch.
pub struct EventLog {
    out: BufWriter<File>,
}

impl EventLog {
    /// Creates the event log and holds a shared `flock` on it for as long as it is open: the
    /// broker's entry in `/proc/locks` (its pid, this file) is what proves it the journal's
    /// broker to a front end, which cannot read the descriptors of a broker that is not
    /// dumpable (`control::verify`). Nothing takes an exclusive lock on it.
    pub fn create(dir: &JournalDir) -> io::Result<Self> {
        let file = dir.create_file(EVENTS_FILE, true)?;
        // rustix's flock: nix's is deprecated for a `Flock` that takes the descriptor over.
        // Failing only costs the proof: a stop by pid is then refused, never misdirected.
        let _ = rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockShared);
        Ok(EventLog {
            out: BufWriter::with_capacity(64 * 1024, file),
        })
    }

    /// Buffers one event line, as [`tether_protocol::protocol::Event::to_line`] makes it.
    pub fn append(&mut self, line: &[u8]) -> io::Result<()> {
        self.out.write_all(line)
    }

    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

/// What happened to one chunk written to a [`StreamLog`].
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Stored {
    /// Position of the chunk in the command's stream.
    pub offset: u64,
    /// Set when this chunk is the one at which storing stopped.
    pub capped: Option<(CapReason, String)>,
}

/// The raw bytes of one stream. Everything is counted; bytes are stored until the disk
/// refuses them (the journal's cap, `--max-output`, is the broker's state's: it stops
/// passing them on), and never block the command.
pub struct StreamLog {
    stream: Stream,
    file: File,
    total: u64,
    stored: u64,
    capped: bool,
}

impl StreamLog {
    pub fn create(dir: &JournalDir, stream: Stream) -> io::Result<Self> {
        let file = dir.create_file(stream.file_name(), false)?;
        Ok(StreamLog {
            stream,
            file,
            total: 0,
            stored: 0,
            capped: false,
        })
    }

    pub fn total(&self) -> u64 {
        self.total
    }

    pub fn stored(&self) -> u64 {
        self.stored
    }

    pub fn write(&mut self, chunk: &[u8]) -> Stored {
        let offset = self.total;
        self.total += chunk.len() as u64;
        if self.capped {
            return Stored {
                offset,
                capped: None,
            };
        }
        let capped = match self.write_fully(chunk) {
            Err(err) => {
                let (reason, why) = match err.raw_os_error().map(Errno::from_raw) {
                    Some(Errno::ENOSPC | Errno::EDQUOT | Errno::EFBIG) => {
                        (CapReason::DiskFull, "the disk is full")
                    }
                    _ => (CapReason::WriteError, "writing failed"),
                };
                let message = format!(
                    "{} is no longer stored: {why} ({err}); the command keeps running and its bytes are counted",
                    self.stream.file_name()
                );
                Some((reason, message))
            }
            Ok(()) => None,
        };
        self.capped = capped.is_some();
        Stored { offset, capped }
    }

    fn write_fully(&mut self, mut bytes: &[u8]) -> io::Result<()> {
        while !bytes.is_empty() {
            match self.file.write(bytes) {
                Ok(0) => return Err(io::Error::from(io::ErrorKind::WriteZero)),
                Ok(n) => {
                    self.stored += n as u64;
                    bytes = &bytes[n..];
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::{self, OpenOptions};

    fn journal_dir(tmp: &tempfile::TempDir) -> JournalDir {
        JournalDir::open_state(&tmp.path().join("j")).unwrap()
    }

    #[test]
    fn stream_log_stores_each_chunk_at_its_offset() {
        let dir = crate::testing::private_tempdir();
        let mut log = StreamLog::create(&journal_dir(&dir), Stream::Stdout).unwrap();
        assert_eq!(log.write(b"abc"), Stored::default());
        let second = log.write(b"defg");
        assert_eq!((second.offset, second.capped), (3, None));
        assert_eq!((log.total(), log.stored()), (7, 7));
        assert_eq!(
            fs::read(dir.path().join("j/stdout.log")).unwrap(),
            b"abcdefg"
        );
    }

    #[test]
    fn full_disk_stops_storing_without_failing() {
        let dir = crate::testing::private_tempdir();
        let mut log = StreamLog::create(&journal_dir(&dir), Stream::Stderr).unwrap();
        log.file = OpenOptions::new().write(true).open("/dev/full").unwrap();
        let stored = log.write(b"bytes");
        assert_eq!(stored.capped.map(|c| c.0), Some(CapReason::DiskFull));
        assert_eq!(log.write(b"more").capped, None);
        assert_eq!((log.total(), log.stored()), (9, 0));
    }
}
