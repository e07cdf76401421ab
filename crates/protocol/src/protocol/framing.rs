//! Newline framing with a maximum line length, independent of the message types: lines
//! encoded here ([`encode_line`], [`write_frame`]) and decoded here ([`LineSplitter`]).

use std::io::{self, Write};

use serde::Serialize;

/// Longest line either side accepts: a launch request with arguments and an environment as
/// large as the kernel allows for exec (a few MiB) fits.
pub const MAX_LINE: usize = 8 << 20;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    Line(Vec<u8>),
    /// A line longer than the limit was skipped; `len` is how long it was.
    TooLong {
        len: usize,
    },
}

/// Splits a byte stream into lines. Feed it whatever a read returned; take complete frames out.
#[derive(Debug)]
pub struct LineSplitter {
    max: usize,
    partial: Vec<u8>,
    /// Bytes of an over-long line discarded so far; `Some` until its newline arrives.
    skipping: Option<usize>,
}

impl LineSplitter {
    pub fn new(max: usize) -> Self {
        LineSplitter {
            max,
            partial: Vec::new(),
            skipping: None,
        }
    }

    /// Appends `bytes` and returns every frame they complete.
    pub fn push(&mut self, mut bytes: &[u8]) -> Vec<Frame> {
        let mut frames = Vec::new();
        while !bytes.is_empty() {
            let newline = memchr::memchr(b'\n', bytes);
            let (head, rest) = match newline {
                Some(i) => (&bytes[..i], Some(&bytes[i + 1..])),
                None => (bytes, None),
            };
            if let Some(skipped) = self.skipping.as_mut() {
                *skipped += head.len();
            } else if self.partial.len() + head.len() > self.max {
                self.skipping = Some(self.partial.len() + head.len());
                self.partial.clear();
            } else {
                self.partial.extend_from_slice(head);
            }
            match rest {
                Some(rest) => {
                    match self.skipping.take() {
                        Some(len) => frames.push(Frame::TooLong { len }),
                        None => frames.push(Frame::Line(std::mem::take(&mut self.partial))),
                    }
                    bytes = rest;
                }
                None => break,
            }
        }
        frames
    }

    /// Bytes of the unfinished line so far: held, or counted while an over-long one is
    /// skipped.
    pub fn pending(&self) -> usize {
        self.skipping.unwrap_or(self.partial.len())
    }

    /// What is left when the stream ends: an unterminated last line, if any.
    pub fn finish(&mut self) -> Option<Frame> {
        if let Some(len) = self.skipping.take() {
            return Some(Frame::TooLong { len });
        }
        if self.partial.is_empty() {
            None
        } else {
            Some(Frame::Line(std::mem::take(&mut self.partial)))
        }
    }
}

/// `message` as one line, its JSON then a newline: how every message crosses a pipe or a
/// socket, and how every event is journaled. JSON escapes a newline inside a string, so the
/// line is exactly one frame.
pub fn encode_line<T: Serialize + ?Sized>(message: &T) -> serde_json::Result<Vec<u8>> {
    let mut line = serde_json::to_vec(message)?;
    line.push(b'\n');
    Ok(line)
}

/// Writes `frame`, a line as [`LineSplitter`] gave it (without its newline), as a line again.
pub fn write_frame(out: &mut impl Write, frame: &[u8]) -> io::Result<()> {
    out.write_all(frame)?;
    out.write_all(b"\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_encoded_line_is_one_frame_whatever_its_strings_hold() {
        let message = serde_json::json!({ "text": "two\nlines\r\n", "n": 1 });
        let line = encode_line(&message).unwrap();
        assert_eq!(line.last(), Some(&b'\n'));
        let mut splitter = LineSplitter::new(MAX_LINE);
        let frames = splitter.push(&line);
        assert_eq!(frames.len(), 1);
        let Frame::Line(raw) = &frames[0] else {
            panic!("a line: {frames:?}")
        };
        let back: serde_json::Value = serde_json::from_slice(raw).unwrap();
        assert_eq!(back, message);
        let mut again = Vec::new();
        write_frame(&mut again, raw).unwrap();
        assert_eq!(again, line);
    }

    fn lines(frames: Vec<Frame>) -> Vec<String> {
        frames
            .into_iter()
            .map(|f| match f {
                Frame::Line(l) => String::from_utf8(l).unwrap(),
                Frame::TooLong { len } => format!("<too long: {len}>"),
            })
            .collect()
    }

    #[test]
    fn splits_lines_across_pushes() {
        let mut s = LineSplitter::new(100);
        assert!(s.push(b"ab").is_empty());
        assert_eq!(lines(s.push(b"c\nde\nf")), ["abc", "de"]);
        assert_eq!(lines(s.push(b"\n")), ["f"]);
        assert_eq!(s.finish(), None);
    }

    #[test]
    fn skips_over_long_line_and_recovers() {
        let mut s = LineSplitter::new(4);
        assert_eq!(lines(s.push(b"ok\n12345")), ["ok"]);
        assert!(s.push(b"6789").is_empty());
        assert_eq!(s.pending(), 9);
        assert_eq!(lines(s.push(b"0\nnext\n")), ["<too long: 10>", "next"]);
    }

    #[test]
    fn line_of_exactly_max_is_kept() {
        let mut s = LineSplitter::new(4);
        assert_eq!(lines(s.push(b"1234\n")), ["1234"]);
    }

    #[test]
    fn unterminated_tail_is_returned_at_finish() {
        let mut s = LineSplitter::new(4);
        s.push(b"tail");
        assert_eq!(s.finish(), Some(Frame::Line(b"tail".to_vec())));
        s.push(b"toolongtail");
        assert_eq!(s.finish(), Some(Frame::TooLong { len: 11 }));
    }
}
