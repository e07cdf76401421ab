//! Where lines start in an output stream that only grows, so that any line can be read from
//! the log file without holding the file in memory.

use std::ops::Range;

/// Byte offsets where lines start in a stream that only grows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LineIndex {
    /// The offset just past each '\n' seen so far, which is where the next line starts.
    line_ends: Vec<u64>,
    len: u64,
}

impl LineIndex {
    pub fn new() -> Self {
        Self::default()
    }

    /// Indexes `bytes`, which sit at stream offset `self.indexed_len()`.
    pub fn extend(&mut self, bytes: &[u8]) {
        let base = self.len;
        self.line_ends
            .extend(memchr::memchr_iter(b'\n', bytes).map(|at| base + at as u64 + 1));
        self.len += bytes.len() as u64;
    }

    pub fn indexed_len(&self) -> u64 {
        self.len
    }

    /// Lines so far; a non-empty unterminated last line counts as a line.
    pub fn line_count(&self) -> usize {
        let terminated = self.line_ends.len();
        if self.len > self.last_start() {
            terminated + 1
        } else {
            terminated
        }
    }

    /// Byte range of line `i` without its '\n'. A `\r` before the '\n' stays in the range:
    /// the renderer shows it as nothing, as a terminal would.
    ///
    /// # Panics
    /// If `i >= self.line_count()`.
    pub fn line_range(&self, i: usize) -> Range<u64> {
        let count = self.line_count();
        assert!(i < count, "line {i} out of range: {count} lines indexed");
        let start = self.line_start(i);
        let end = match self.line_ends.get(i) {
            Some(&next_start) => next_start - 1,
            None => self.len,
        };
        start..end
    }

    /// The line that holds stream offset `offset` (a '\n' belongs to the line it ends), or
    /// `None` past the indexed bytes.
    pub fn line_at(&self, offset: u64) -> Option<usize> {
        if offset >= self.len {
            return None;
        }
        Some(self.line_ends.partition_point(|&end| end <= offset))
    }

    fn line_start(&self, i: usize) -> u64 {
        match i {
            0 => 0,
            _ => self.line_ends[i - 1],
        }
    }

    fn last_start(&self) -> u64 {
        self.line_ends.last().copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ranges(index: &LineIndex) -> Vec<Range<u64>> {
        (0..index.line_count())
            .map(|i| index.line_range(i))
            .collect()
    }

    fn indexed(bytes: &[u8]) -> LineIndex {
        let mut index = LineIndex::new();
        index.extend(bytes);
        index
    }

    #[test]
    fn empty_stream_has_no_lines() {
        let mut index = LineIndex::new();
        assert_eq!(index.line_count(), 0);
        assert_eq!(index.indexed_len(), 0);
        index.extend(b"");
        assert_eq!(index.line_count(), 0);
        assert_eq!(index.line_at(0), None);
    }

    #[test]
    fn terminated_lines() {
        let index = indexed(b"ab\n\ncde\n");
        assert_eq!(index.line_count(), 3);
        assert_eq!(ranges(&index), vec![0..2, 3..3, 4..7]);
        assert_eq!(index.indexed_len(), 8);
    }

    #[test]
    fn unterminated_last_line_counts() {
        let index = indexed(b"ab\ncd");
        assert_eq!(index.line_count(), 2);
        assert_eq!(ranges(&index), vec![0..2, 3..5]);
        assert_eq!(ranges(&indexed(b"no newline")), vec![0..10]);
        assert_eq!(ranges(&indexed(b"\n")), vec![0..0]);
    }

    #[test]
    fn growing_in_pieces_matches_growing_at_once() {
        let stream = b"first\nsecond line\n\nthird\r\nunfinished";
        let whole = indexed(stream);
        for piece in 1..=stream.len() {
            let mut index = LineIndex::new();
            for chunk in stream.chunks(piece) {
                index.extend(chunk);
            }
            assert_eq!(index, whole, "pieces of {piece}");
        }
        assert_eq!(whole.line_count(), 5);
    }

    #[test]
    fn unterminated_line_grows_then_ends() {
        let mut index = LineIndex::new();
        index.extend(b"abc");
        assert_eq!(ranges(&index), vec![0..3]);
        index.extend(b"de");
        assert_eq!(ranges(&index), vec![0..5]);
        index.extend(b"\n");
        assert_eq!(ranges(&index), vec![0..5]);
        index.extend(b"x");
        assert_eq!(ranges(&index), vec![0..5, 6..7]);
    }

    #[test]
    fn crlf_lines_keep_their_cr() {
        let index = indexed(b"one\r\ntwo\r\n");
        assert_eq!(index.line_count(), 2);
        assert_eq!(ranges(&index), vec![0..4, 5..9]);
    }

    #[test]
    fn line_at_offset() {
        let index = indexed(b"ab\n\ncd");
        let lines: Vec<_> = (0..7).map(|at| index.line_at(at)).collect();
        assert_eq!(
            lines,
            vec![Some(0), Some(0), Some(0), Some(1), Some(2), Some(2), None]
        );
    }

    #[test]
    #[should_panic(expected = "out of range")]
    fn line_past_the_end_panics() {
        indexed(b"a\n").line_range(1);
    }
}
