//! Reading an event log, from its start or from where the last read stopped, in bounded
//! memory: a read buffer and at most one line of [`MAX_EVENT_LINE`] bytes, whatever the log's
//! size. A longer line is no event tether wrote; it is skipped unread, up to its newline.

use std::io::{self, Read, Seek, SeekFrom};
use std::path::PathBuf;

use super::reader::Damage;
use super::secure::open_regular;
use tether_protocol::protocol::{Event, Frame, LineSplitter, MAX_LINE};

/// The longest event line tether writes: a broker journals the very lines it sends its front
/// end, and those are framed by [`MAX_LINE`] (a longer one would never reach it).
pub const MAX_EVENT_LINE: usize = MAX_LINE;

/// Bytes read from the log at a time.
const READ_CHUNK: usize = 64 * 1024;

/// Follows an event log as it grows: each call returns the events completed since the last.
#[derive(Debug)]
pub struct EventTail {
    path: PathBuf,
    offset: u64,
    lines: LineSplitter,
    lines_read: usize,
}

impl EventTail {
    pub fn new(path: PathBuf) -> Self {
        EventTail {
            path,
            offset: 0,
            lines: LineSplitter::new(MAX_EVENT_LINE),
            lines_read: 0,
        }
    }

    /// Reads what was appended since the last call.
    pub fn poll(&mut self) -> io::Result<(Vec<Event>, Vec<Damage>)> {
        let mut events = Vec::new();
        let damage = self.poll_each(|event| events.push(event))?;
        Ok((events, damage))
    }

    /// Reads what was appended since the last call, handing each event to `on_event` as it
    /// is read rather than keeping them. Lines that are not events come back as damage, a
    /// run of them as one.
    pub fn poll_each(&mut self, mut on_event: impl FnMut(Event)) -> io::Result<Vec<Damage>> {
        let mut file = open_regular(&self.path)?;
        file.seek(SeekFrom::Start(self.offset))?;
        let mut chunk = vec![0; READ_CHUNK];
        let mut damage = Vec::new();
        loop {
            let n = match file.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => n,
                Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
                Err(err) => return Err(err),
            };
            self.offset += n as u64;
            for frame in self.lines.push(&chunk[..n]) {
                let line = match &frame {
                    Frame::Line(line) if line.is_empty() => continue,
                    Frame::Line(line) => Some(line),
                    Frame::TooLong { .. } => None,
                };
                self.lines_read += 1;
                let at = self.lines_read;
                match line.map(|line| serde_json::from_slice::<Event>(line)) {
                    Some(Ok(event)) => on_event(event),
                    Some(Err(err)) => bad_line(&mut damage, at, || err.to_string()),
                    None => bad_line(&mut damage, at, || too_long(&frame)),
                }
            }
        }
        Ok(damage)
    }

    /// Bytes of an unfinished last line, if the log currently ends mid-line.
    pub fn pending(&self) -> usize {
        self.lines.pending()
    }
}

/// Adds line `line` to the damage: a new entry, or one more line for the run just before.
fn bad_line(damage: &mut Vec<Damage>, line: usize, error: impl FnOnce() -> String) {
    if let Some(Damage::BadLine { more, .. }) = damage.last_mut() {
        *more += 1;
        return;
    }
    damage.push(Damage::BadLine {
        line,
        error: error(),
        more: 0,
    });
}

fn too_long(frame: &Frame) -> String {
    let len = match frame {
        Frame::TooLong { len } => *len,
        Frame::Line(line) => line.len(),
    };
    format!(
        "longer than any event tether writes ({len} bytes, over {} MiB), skipped unread",
        MAX_EVENT_LINE >> 20
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::writer::EVENTS_FILE;

    use std::io::Write;

    const LINE: &str =
        r#"{"ts_ms":1,"mono_us":2,"kind":"output","stream":"stdout","offset":0,"len":3}"#;

    #[test]
    fn tail_returns_only_complete_lines() {
        let dir = crate::testing::private_tempdir();
        let path = dir.path().join(EVENTS_FILE);
        let mut file = crate::testing::create_private(&path);
        write!(file, "{LINE}\n{}", &LINE[..20]).unwrap();
        let mut tail = EventTail::new(path);
        let (events, damage) = tail.poll().unwrap();
        assert_eq!((events.len(), damage.len(), tail.pending()), (1, 0, 20));
        writeln!(file, "{}", &LINE[20..]).unwrap();
        let (events, _) = tail.poll().unwrap();
        assert_eq!((events.len(), tail.pending()), (1, 0));
    }

    #[test]
    fn an_over_long_line_and_the_garbage_after_it_are_one_damage() {
        let dir = crate::testing::private_tempdir();
        let path = dir.path().join(EVENTS_FILE);
        let mut file = crate::testing::create_private(&path);
        writeln!(file, "{LINE}").unwrap();
        file.write_all(&vec![b'x'; MAX_EVENT_LINE + 1]).unwrap();
        write!(file, "\nnot json\nnor this\n{LINE}\n").unwrap();
        let (events, damage) = EventTail::new(path).poll().unwrap();
        assert_eq!(events.len(), 2);
        let [Damage::BadLine { line, error, more }] = &damage[..] else {
            panic!("{damage:?}");
        };
        assert_eq!((*line, *more), (2, 2));
        assert!(error.contains("longer than any event"), "{error}");
        assert!(damage[0].to_string().ends_with("; nor are 2 later lines"));
    }
}
