//! Newline framing with a maximum line length, independent of the message types.

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
            let newline = bytes.iter().position(|&b| b == b'\n');
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

#[cfg(test)]
mod tests {
    use super::*;

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
