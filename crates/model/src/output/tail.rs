//! The last lines of a stream, found backwards from its end as `less +G` does: a post-mortem
//! of a 1 GiB log shows its end on the first frame, while the forward [`LineIndex`] fills in
//! behind.
//!
//! [`LineIndex`]: super::LineIndex

use std::io;
use std::ops::Range;

use super::stream::{MAX_LINE_BYTES, PEN_LOOKBACK, StreamFile};
use super::style::{Style, StyledLine};

/// Bytes read backwards at once.
pub const TAIL_CHUNK: u64 = 64 * 1024;

/// Bytes read backwards at most for one call once some line is found: long lines cost a
/// bounded read, not one of their whole length.
const TAIL_READ: u64 = 4 << 20;

/// The last lines of a stream's first `end` bytes, found backwards, and read on demand.
#[derive(Debug)]
pub struct Tail {
    finder: BackwardLines,
    lines: Vec<TailLine>,
}

impl StreamFile {
    /// Finds at least `want` of the last lines of the stream's first `end` bytes (fewer if it
    /// has fewer, or if they are so long that reading stops first): what is shown until the
    /// index reaches them. Replaces any tail read before.
    pub fn read_tail(&mut self, end: u64, want: usize) -> io::Result<()> {
        if self.opened()?.is_none() {
            // No log (yet): nothing to show from its end.
            self.tail = None;
            return Ok(());
        }
        let mut finder = BackwardLines::new(end);
        self.read_back(&mut finder, want)?;
        let lines = finder.lines();
        self.tail = Some(Tail { finder, lines });
        Ok(())
    }

    /// Reads `more` lines further back into the tail; returns how many lines it gained (they
    /// come before the ones it had).
    pub fn extend_tail(&mut self, more: usize) -> io::Result<usize> {
        let Some(mut tail) = self.tail.take() else {
            return Ok(0);
        };
        let before = tail.lines.len();
        let read = self.read_back(&mut tail.finder, more);
        tail.lines = tail.finder.lines();
        let gained = tail.lines.len() - before;
        self.tail = Some(tail);
        read.map(|()| gained)
    }

    fn read_back(&mut self, finder: &mut BackwardLines, want: usize) -> io::Result<()> {
        let target = finder.found() + want;
        let stop_after = finder.read() + TAIL_READ;
        while let Some(chunk) = finder.next_chunk() {
            let enough = finder.found() >= target;
            let long =
                finder.read() >= stop_after && (finder.found() > 0 || finder.cut_line_shown());
            if enough || long {
                break;
            }
            if self.opened()?.is_none() {
                break;
            }
            let bytes = self.read(chunk.clone())?;
            finder.feed(chunk.start, &bytes);
        }
        Ok(())
    }

    /// Lines in the tail; `None` without one.
    pub fn tail_len(&self) -> Option<usize> {
        self.tail.as_ref().map(|t| t.lines.len())
    }

    /// Where the tail ends: the stream's length when it was read.
    pub fn tail_end(&self) -> Option<u64> {
        self.tail.as_ref().map(|t| t.finder.end())
    }

    /// Where the tail's first line starts (or, cut, where what was read of it starts).
    pub fn tail_start(&self) -> Option<u64> {
        let tail = self.tail.as_ref()?;
        Some(
            tail.lines
                .first()
                .map_or(tail.finder.end(), |l| l.range.start),
        )
    }

    /// Whether reading further back could find more lines.
    pub fn tail_at_start(&self) -> bool {
        self.tail.as_ref().is_none_or(|t| t.finder.at_start())
    }

    pub fn drop_tail(&mut self) {
        self.tail = None;
    }

    /// Tail lines `range` (cut to those there are), rendered as [`StreamFile::lines`]
    /// renders, each with its start offset.
    pub fn tail_lines(&mut self, range: Range<usize>) -> io::Result<Vec<(u64, StyledLine)>> {
        let Some(tail) = self.tail.as_ref() else {
            return Ok(Vec::new());
        };
        let end = range.end.min(tail.lines.len());
        let from = range.start.min(end);
        let wanted = tail.lines[from.saturating_sub(PEN_LOOKBACK)..end].to_vec();
        let skip = from - from.saturating_sub(PEN_LOOKBACK);
        let mut pen = Style::default();
        let mut out = Vec::with_capacity(end - from);
        for (k, line) in wanted.into_iter().enumerate() {
            let (styled, next) = self.render_range(line.range.clone(), line.whole, pen)?;
            pen = next;
            if k >= skip {
                out.push((line.range.start, styled));
            }
        }
        Ok(out)
    }
}

/// The last lines of the first `end` bytes of a stream, found by reading backwards: fed the
/// chunks before what it has seen, newest first, it collects line starts until it has as
/// many lines as wanted or reaches the stream's start. Pure: the caller reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackwardLines {
    end: u64,
    /// Whether byte `end - 1` is a '\n' (the last line is terminated).
    terminated: bool,
    /// Bytes before this have not been seen.
    seen_from: u64,
    /// Line starts found, ascending; every one is a real line start.
    starts: Vec<u64>,
}

impl BackwardLines {
    /// Nothing seen yet of the stream's first `end` bytes.
    pub fn new(end: u64) -> Self {
        BackwardLines {
            end,
            terminated: false,
            seen_from: end,
            starts: Vec::new(),
        }
    }

    pub fn end(&self) -> u64 {
        self.end
    }

    /// Where the next chunk to feed ends (it starts at most [`TAIL_CHUNK`] before); `None`
    /// once the stream's start is reached.
    pub fn next_chunk(&self) -> Option<Range<u64>> {
        (self.seen_from > 0).then(|| self.seen_from.saturating_sub(TAIL_CHUNK)..self.seen_from)
    }

    /// Takes the bytes at `self.next_chunk()` (or any shorter range ending where it ends).
    pub fn feed(&mut self, start: u64, bytes: &[u8]) {
        debug_assert_eq!(start + bytes.len() as u64, self.seen_from);
        if self.seen_from == self.end && !bytes.is_empty() {
            self.terminated = bytes[bytes.len() - 1] == b'\n';
        }
        let mut found: Vec<u64> = memchr::memrchr_iter(b'\n', bytes)
            .map(|at| start + at as u64 + 1)
            // A '\n' that ends the stream starts no line.
            .filter(|&next| next < self.end)
            .collect();
        if start == 0 && self.end > 0 {
            found.push(0);
        }
        found.reverse();
        found.extend_from_slice(&self.starts);
        self.starts = found;
        self.seen_from = start;
    }

    /// Whole lines found (their starts are known).
    pub fn found(&self) -> usize {
        self.starts.len()
    }

    /// Whether the stream's start has been read: nothing more can be found.
    pub fn at_start(&self) -> bool {
        self.seen_from == 0
    }

    /// Bytes read so far.
    pub fn read(&self) -> u64 {
        self.end - self.seen_from
    }

    /// The lines found, oldest first, each as its full byte range without its '\n'; before
    /// them, the line (or its part) that started before what was read, if it is long enough
    /// to be shown at all: a line longer than what was read shows as its tail.
    pub fn lines(&self) -> Vec<TailLine> {
        let mut lines = Vec::with_capacity(self.starts.len() + 1);
        let first = self.starts.first().copied().unwrap_or(self.end);
        // The line cut by where reading stopped: its start is not known.
        if !self.at_start() && self.cut_line_shown() {
            lines.push(TailLine {
                range: self.seen_from..self.line_end(first),
                whole: false,
            });
        }
        for (i, &start) in self.starts.iter().enumerate() {
            let next = self.starts.get(i + 1).copied().unwrap_or(self.end);
            lines.push(TailLine {
                range: start..self.line_end(next),
                whole: true,
            });
        }
        lines
    }

    /// Where the line that runs up to `next` (the next line's start, or the end) stops,
    /// without its '\n'.
    fn line_end(&self, next: u64) -> u64 {
        if next < self.end || self.terminated {
            next - 1
        } else {
            next
        }
    }

    /// Whether a cut line has been read far enough to show: as far as a long line is ever
    /// shown ([`MAX_LINE_BYTES`]).
    pub fn cut_line_shown(&self) -> bool {
        let first = self.starts.first().copied().unwrap_or(self.end);
        first - self.seen_from > MAX_LINE_BYTES
    }
}

/// A line found backwards.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TailLine {
    /// Its bytes without the '\n'; for a cut line, only those that were read.
    pub range: Range<u64>,
    /// Whether `range` starts where the line starts.
    pub whole: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads `stream` backwards in chunks of `chunk` bytes until `want` lines are found.
    fn tail(stream: &[u8], want: usize, chunk: usize) -> BackwardLines {
        let mut finder = BackwardLines::new(stream.len() as u64);
        while finder.found() < want {
            let Some(next) = finder.next_chunk() else {
                break;
            };
            let start = next.start.max(next.end.saturating_sub(chunk as u64));
            finder.feed(start, &stream[start as usize..next.end as usize]);
        }
        finder
    }

    fn texts(stream: &[u8], finder: &BackwardLines) -> Vec<(String, bool)> {
        finder
            .lines()
            .into_iter()
            .map(|l| {
                let bytes = &stream[l.range.start as usize..l.range.end as usize];
                (String::from_utf8_lossy(bytes).into_owned(), l.whole)
            })
            .collect()
    }

    fn whole(lines: &[&str]) -> Vec<(String, bool)> {
        lines.iter().map(|l| (l.to_string(), true)).collect()
    }

    #[test]
    fn empty_stream_has_no_lines() {
        let finder = tail(b"", 10, 4);
        assert!(finder.at_start());
        assert_eq!(finder.lines(), vec![]);
        assert_eq!(finder.next_chunk(), None);
    }

    #[test]
    fn finds_the_last_lines_whatever_the_chunk() {
        let stream = b"one\ntwo\n\nfour\nfive\n";
        for chunk in 1..=stream.len() {
            let finder = tail(stream, 2, chunk);
            let lines = texts(stream, &finder);
            // At least the two wanted, the last ones, in order.
            let n = lines.len();
            assert!(n >= 2, "chunk {chunk}: {lines:?}");
            assert_eq!(lines[n - 2..], whole(&["four", "five"]), "chunk {chunk}");
            // Everything before them is whole or a cut tail of the line before.
            let all = tail(stream, 100, chunk);
            assert_eq!(
                texts(stream, &all),
                whole(&["one", "two", "", "four", "five"])
            );
        }
    }

    #[test]
    fn no_trailing_newline() {
        let stream = b"a\nb\nlast";
        let finder = tail(stream, 100, 3);
        assert_eq!(texts(stream, &finder), whole(&["a", "b", "last"]));
        let finder = tail(stream, 1, 3);
        assert_eq!(texts(stream, &finder).last(), Some(&("last".into(), true)));
    }

    #[test]
    fn crlf_keeps_its_cr_for_rendering() {
        let stream = b"one\r\ntwo\r\n";
        let finder = tail(stream, 100, 2);
        assert_eq!(texts(stream, &finder), whole(&["one\r", "two\r"]));
    }

    #[test]
    fn lines_longer_than_a_chunk() {
        let mut stream = b"short\n".to_vec();
        stream.extend(std::iter::repeat_n(b'x', 3 * TAIL_CHUNK as usize));
        stream.extend_from_slice(b"END\nlast\n");
        let finder = tail(&stream, 2, TAIL_CHUNK as usize);
        let lines = finder.lines();
        let n = lines.len();
        assert!(lines[n - 2].whole);
        assert_eq!(lines[n - 2].range, 6..(stream.len() as u64 - 6));
        assert_eq!(texts(&stream, &finder)[n - 1], ("last".into(), true));
        // With a chunk smaller than the line, reading stops at its start.
        let mut finder = BackwardLines::new(stream.len() as u64);
        while finder.found() < 2 {
            let next = finder.next_chunk().expect("more to read");
            let start = next.start.max(next.end.saturating_sub(3));
            finder.feed(start, &stream[start as usize..next.end as usize]);
        }
        assert!(!finder.at_start());
        assert_eq!(finder.lines().len(), 2);
        assert_eq!(finder.lines()[0].range, 6..(stream.len() as u64 - 6));
    }

    #[test]
    fn a_stream_that_is_one_huge_line_shows_its_cut_tail() {
        let mut stream = vec![b'y'; 5 * TAIL_CHUNK as usize];
        stream.extend_from_slice(b"END");
        let mut finder = BackwardLines::new(stream.len() as u64);
        let mut chunks = 0;
        while !finder.cut_line_shown() {
            let next = finder.next_chunk().expect("more to read");
            finder.feed(next.start, &stream[next.start as usize..next.end as usize]);
            chunks += 1;
        }
        // Reading stops once the tail that is ever shown is read, not at the stream's start.
        assert_eq!(chunks, (MAX_LINE_BYTES / TAIL_CHUNK + 1) as usize);
        let lines = finder.lines();
        assert_eq!(lines.len(), 1);
        assert!(!lines[0].whole);
        assert_eq!(lines[0].range.end, stream.len() as u64);
        // Read to the start, the one line is whole.
        let all = tail(&stream, 1, TAIL_CHUNK as usize);
        assert_eq!(
            all.lines(),
            vec![TailLine {
                range: 0..stream.len() as u64,
                whole: true
            }]
        );
    }

    #[test]
    fn only_newlines() {
        let stream = b"\n\n\n";
        let finder = tail(stream, 100, 1);
        assert_eq!(texts(stream, &finder), whole(&["", "", ""]));
        assert_eq!(finder.found(), 3);
    }

    #[test]
    fn reading_on_continues_where_it_stopped() {
        let stream: Vec<u8> = (0..1000)
            .flat_map(|n| format!("line {n}\n").into_bytes())
            .collect();
        let mut finder = tail(&stream, 10, 64);
        let few = finder.found();
        assert!((10..20).contains(&few));
        while let Some(next) = finder.next_chunk() {
            finder.feed(next.start, &stream[next.start as usize..next.end as usize]);
        }
        let lines = texts(&stream, &finder);
        assert_eq!(lines.len(), 1000);
        assert_eq!(lines[0], ("line 0".into(), true));
        assert_eq!(lines[999], ("line 999".into(), true));
    }
}
