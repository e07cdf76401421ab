//! Where lines start in an output stream that only grows, so that any line can be read from
//! the log file without holding the file in memory.
//!
//! The index is sparse: it keeps the start of every [`LINES_PER_BLOCK`]th line, and of any
//! line that begins more than [`BLOCK_SPAN`] bytes after the last one kept. A line inside a
//! block is found by reading at most `BLOCK_SPAN` bytes from the block's start. So a stream
//! of a billion two-byte lines (`yes`) costs about 16 MB of index, not 8 GB.

use std::ops::Range;

/// Lines between two kept line starts, at most.
pub const LINES_PER_BLOCK: u64 = 1024;
/// Bytes between a kept line start and any other line start of its block, at most.
pub const BLOCK_SPAN: u64 = 1 << 20;

/// A run of consecutive lines whose starts are found by reading from `start`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Block {
    pub first_line: u64,
    /// How many lines the block holds (the last block grows).
    pub lines: u64,
    /// Where the block's first line starts.
    pub start: u64,
    /// Reading `start..scan_end` finds every line start of the block.
    pub scan_end: u64,
}

impl Block {
    /// Start offsets of the block's lines, from the bytes at `self.start..self.scan_end`.
    pub fn line_starts(&self, bytes: &[u8]) -> Vec<u64> {
        let mut starts = Vec::with_capacity(self.lines as usize);
        starts.push(self.start);
        starts.extend(
            memchr::memchr_iter(b'\n', bytes)
                .take(self.lines.saturating_sub(1) as usize)
                .map(|at| self.start + at as u64 + 1),
        );
        starts
    }
}

/// Line starts of a stream that only grows, kept sparsely.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineIndex {
    /// (line number, start offset) of kept lines; the first is always (0, 0).
    kept: Vec<(u64, u64)>,
    /// '\n' seen so far.
    terminated: u64,
    /// Where the line after the last '\n' starts.
    last_start: u64,
    len: u64,
}

impl Default for LineIndex {
    fn default() -> Self {
        LineIndex {
            kept: vec![(0, 0)],
            terminated: 0,
            last_start: 0,
            len: 0,
        }
    }
}

impl LineIndex {
    pub fn new() -> Self {
        Self::default()
    }

    /// Indexes `bytes`, which sit at stream offset `self.indexed_len()`.
    pub fn extend(&mut self, bytes: &[u8]) {
        let base = self.len;
        for at in memchr::memchr_iter(b'\n', bytes) {
            self.terminated += 1;
            self.last_start = base + at as u64 + 1;
            let (line, start) = self.kept[self.kept.len() - 1];
            if self.terminated - line >= LINES_PER_BLOCK || self.last_start - start > BLOCK_SPAN {
                self.kept.push((self.terminated, self.last_start));
            }
        }
        self.len += bytes.len() as u64;
    }

    pub fn indexed_len(&self) -> u64 {
        self.len
    }

    /// Lines so far; a non-empty unterminated last line counts as a line.
    pub fn line_count(&self) -> usize {
        let open = u64::from(self.len > self.last_start);
        (self.terminated + open) as usize
    }

    /// The block holding line `i`, which must exist.
    pub fn block_of(&self, i: usize) -> Block {
        let i = i as u64;
        let k = self.kept.partition_point(|&(line, _)| line <= i) - 1;
        let (first_line, start) = self.kept[k];
        let (next_line, next_start) = self
            .kept
            .get(k + 1)
            .copied()
            .unwrap_or((self.line_count() as u64, self.len));
        Block {
            first_line,
            lines: next_line - first_line,
            start,
            scan_end: next_start.min(start + BLOCK_SPAN + 1),
        }
    }

    /// Byte range of line `i` without its '\n', given the start of line `i` and, if there is
    /// one, of line `i + 1`. A `\r` before the '\n' stays in the range.
    pub fn line_range(&self, i: usize, start: u64, next_start: Option<u64>) -> Range<u64> {
        let end = match next_start {
            Some(next) => next - 1,
            None if (i as u64) < self.terminated => self.last_start - 1,
            None => self.len,
        };
        start..end
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Resolves every line's range against the bytes of the stream, as a reader would.
    fn ranges(index: &LineIndex, stream: &[u8]) -> Vec<Range<u64>> {
        let mut resolved: Option<(Block, Vec<u64>)> = None;
        (0..index.line_count())
            .map(|i| {
                let block = index.block_of(i);
                if resolved.as_ref().is_none_or(|(b, _)| *b != block) {
                    let bytes = &stream[block.start as usize..block.scan_end as usize];
                    resolved = Some((block, block.line_starts(bytes)));
                }
                let starts = &resolved.as_ref().expect("resolved above").1;
                let at = (i as u64 - block.first_line) as usize;
                let next = starts
                    .get(at + 1)
                    .copied()
                    .or_else(|| (i + 1 < index.line_count()).then(|| index.block_of(i + 1).start));
                index.line_range(i, starts[at], next)
            })
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
    }

    #[test]
    fn terminated_lines() {
        let stream = b"ab\n\ncde\n";
        let index = indexed(stream);
        assert_eq!(index.line_count(), 3);
        assert_eq!(ranges(&index, stream), vec![0..2, 3..3, 4..7]);
        assert_eq!(index.indexed_len(), 8);
    }

    #[test]
    fn unterminated_last_line_counts() {
        let stream = b"ab\ncd";
        assert_eq!(ranges(&indexed(stream), stream), vec![0..2, 3..5]);
        assert_eq!(ranges(&indexed(b"no newline"), b"no newline"), vec![0..10]);
        assert_eq!(ranges(&indexed(b"\n"), b"\n"), vec![0..0]);
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
        assert_eq!(ranges(&index, b"abc"), vec![0..3]);
        index.extend(b"de\n");
        assert_eq!(ranges(&index, b"abcde\n"), vec![0..5]);
        index.extend(b"x");
        assert_eq!(ranges(&index, b"abcde\nx"), vec![0..5, 6..7]);
    }

    #[test]
    fn crlf_lines_keep_their_cr() {
        let stream = b"one\r\ntwo\r\n";
        assert_eq!(ranges(&indexed(stream), stream), vec![0..4, 5..9]);
    }

    #[test]
    fn many_short_lines_cost_a_fraction_of_their_count() {
        let stream = b"y\n".repeat(1_000_000);
        let index = indexed(&stream);
        assert_eq!(index.line_count(), 1_000_000);
        // Bytes the index itself holds.
        let heap_bytes = index.kept.capacity() * std::mem::size_of::<(u64, u64)>();
        assert!(heap_bytes < 64 * 1024, "{heap_bytes}");
        let all = ranges(&index, &stream);
        assert_eq!(all[0], 0..1);
        assert_eq!(all[1023], 2046..2047);
        assert_eq!(all[1024], 2048..2049);
        assert_eq!(all[999_999], 1_999_998..1_999_999);
    }

    #[test]
    fn long_lines_keep_blocks_short() {
        // Lines of 700 KiB: every second line start is kept, so no block needs more than
        // BLOCK_SPAN bytes read to find its lines.
        let line = [b'x'; 700 * 1024];
        let mut stream = Vec::new();
        for _ in 0..6 {
            stream.extend_from_slice(&line);
            stream.push(b'\n');
        }
        stream.extend_from_slice(b"tail");
        let index = indexed(&stream);
        for i in 0..index.line_count() {
            let block = index.block_of(i);
            assert!(block.scan_end - block.start <= BLOCK_SPAN + 1);
        }
        let all = ranges(&index, &stream);
        assert_eq!(all.len(), 7);
        assert_eq!(all[6], (6 * (700 * 1024 + 1)) as u64..stream.len() as u64);
        assert!(all.iter().take(6).all(|r| r.end - r.start == 700 * 1024));
    }
}
