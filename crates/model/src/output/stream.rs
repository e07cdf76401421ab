//! One command's output stream as the UI reads it: the broker appends raw bytes to the log
//! file, and this reads back only the lines that are looked at. Memory is the line index and
//! the line being read, never the file.

use std::fs::File;
use std::io;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::index::{Block, LineIndex};
use super::sanitize::{render_line, render_line_with_pen};
use super::search::Needle;
use super::style::{Style, StyledLine};

/// A line longer than this is rendered from its last this-many bytes.
pub const MAX_LINE_BYTES: u64 = 64 * 1024;

/// How much is read from the file at once while indexing.
const INDEX_CHUNK: u64 = 64 * 1024;

/// How much `find` reads at once: many short lines in one read rather than one read a line.
const SEARCH_BATCH: u64 = 1024 * 1024;

/// Lines rendered before the first one asked for, to learn the style in effect where it
/// starts (a colour set on one line and reset lines later).
pub(super) const PEN_LOOKBACK: usize = 64;

/// Blocks whose line starts are kept resolved: what a screen shows spans one or two.
const CACHED_BLOCKS: usize = 8;

/// A growing log file (stdout.log or stderr.log) read through a LineIndex.
#[derive(Debug)]
pub struct StreamFile {
    path: PathBuf,
    /// Opened on the first refresh that finds the file.
    file: Option<File>,
    index: LineIndex,
    /// Recently resolved blocks and their line starts, most recent last.
    blocks: Vec<(Block, Vec<u64>)>,
    /// The last lines, found backwards, while the index has not reached them.
    pub(super) tail: Option<super::tail::Tail>,
}

impl StreamFile {
    /// The file may not exist yet (treated as empty until it does).
    pub fn new(path: PathBuf) -> Self {
        StreamFile {
            path,
            file: None,
            index: LineIndex::new(),
            blocks: Vec::new(),
            tail: None,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Indexes bytes up to `len` (as told by the broker's output events; pass the file size
    /// when unknown). Reads only the new bytes.
    ///
    /// A `len` at or below what is already indexed does nothing; bytes that `len` promises
    /// but the file does not hold yet are left for a later refresh.
    pub fn refresh(&mut self, len: u64) -> io::Result<()> {
        self.refresh_within(len, u64::MAX).map(|_| ())
    }

    /// Like [`StreamFile::refresh`], but indexes at most `budget` bytes, so that a flood
    /// is caught up with over several frames instead of freezing one. Returns whether the
    /// index reached `len`.
    pub fn refresh_within(&mut self, len: u64, budget: u64) -> io::Result<bool> {
        let mut pos = self.index.indexed_len();
        if len <= pos {
            return Ok(true);
        }
        let target = len;
        let len = len.min(pos.saturating_add(budget));
        let Some(file) = open_if_exists(&self.path, &mut self.file)? else {
            return Ok(true);
        };
        let index = &mut self.index;
        pos = read_range(file, &self.path, pos..len, INDEX_CHUNK, |bytes| {
            index.extend(bytes)
        })?;
        // Short of `len`: the file holds no more yet, caught up with what there is.
        Ok(pos < len || pos >= target)
    }

    pub fn len(&self) -> u64 {
        self.index.indexed_len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn line_count(&self) -> usize {
        self.index.line_count()
    }

    /// Rendered line `i`; a line longer than 64 KiB is rendered from its last 64 KiB (a `\r`
    /// progress line keeps its final state).
    ///
    /// Fails with `InvalidInput` if there is no line `i`.
    pub fn line(&mut self, i: usize) -> io::Result<StyledLine> {
        self.check_line(i)?;
        Ok(self.lines(i..i + 1)?.pop().unwrap_or_default())
    }

    /// Rendered lines `range` (cut to the lines there are), each starting in the style the
    /// line before it left in effect, as a terminal shows them; that style is learned from up
    /// to [`PEN_LOOKBACK`] lines before the first.
    pub fn lines(&mut self, range: Range<usize>) -> io::Result<Vec<StyledLine>> {
        let range = range.start..range.end.min(self.line_count());
        let mut pen = Style::default();
        for i in range.start.saturating_sub(PEN_LOOKBACK)..range.start {
            pen = self.render(i, pen)?.1;
        }
        let mut lines = Vec::with_capacity(range.len());
        for i in range {
            let (line, next) = self.render(i, pen)?;
            pen = next;
            lines.push(line);
        }
        Ok(lines)
    }

    fn render(&mut self, i: usize, pen: Style) -> io::Result<(StyledLine, Style)> {
        let full = self.line_range(i)?;
        self.render_range(full, true, pen)
    }

    /// Renders the line at `full` (without its '\n'); `whole`: whether `full` starts where
    /// the line starts (a line found backwards may be known only by its end).
    pub(super) fn render_range(
        &self,
        full: Range<u64>,
        whole: bool,
        pen: Style,
    ) -> io::Result<(StyledLine, Style)> {
        let shown = shown_of(&full);
        let window = self.read(shown.clone())?;
        if full == shown && whole {
            return Ok(render_line_with_pen(pen, &window));
        }
        // Where rendering starts unknown: the cut is treated as a long line's is.
        let full = if whole {
            full
        } else {
            full.start.saturating_sub(1)..full.end
        };
        // Only a tail is read: what came before it, colours included, is unknown.
        let line = render_shown(&full, &shown, &window);
        let pen = render_line_with_pen(Style::default(), &window).1;
        Ok((line, pen))
    }

    /// The first line at or after `from` (forward) or at or before `from` (backward) whose
    /// rendered text contains `needle` (case-insensitive for ASCII); None if none.
    ///
    /// Backward from past the last line starts at the last line. An empty needle matches
    /// every line. A line longer than 64 KiB is searched as [`StreamFile::line`] shows it.
    pub fn find(&mut self, needle: &str, from: usize, forward: bool) -> io::Result<Option<usize>> {
        let count = self.line_count();
        if count == 0 || (forward && from >= count) {
            return Ok(None);
        }
        let needle = Needle::new(needle);
        if forward {
            let mut first = from;
            while first < count {
                let start = self.shown_range(first)?.start;
                let mut end = first + 1;
                while end < count && self.shown_range(end)?.end - start <= SEARCH_BATCH {
                    end += 1;
                }
                if let Some(found) = self.find_in(&needle, first..end, false)? {
                    return Ok(Some(found));
                }
                first = end;
            }
        } else {
            let mut end = from.min(count - 1) + 1;
            while end > 0 {
                let stop = self.shown_range(end - 1)?.end;
                let mut first = end - 1;
                while first > 0 && stop - self.shown_range(first - 1)?.start <= SEARCH_BATCH {
                    first -= 1;
                }
                if let Some(found) = self.find_in(&needle, first..end, true)? {
                    return Ok(Some(found));
                }
                end = first;
            }
        }
        Ok(None)
    }

    /// Searches consecutive `lines` with one read.
    fn find_in(
        &mut self,
        needle: &Needle,
        lines: Range<usize>,
        backward: bool,
    ) -> io::Result<Option<usize>> {
        let mut ranges = Vec::with_capacity(lines.len());
        for i in lines.clone() {
            let full = self.line_range(i)?;
            let shown = shown_of(&full);
            ranges.push((i, full, shown));
        }
        let span = ranges[0].2.start..ranges[ranges.len() - 1].2.end;
        let bytes = self.read(span.clone())?;
        let matches = |(_, full, shown): &&(usize, Range<u64>, Range<u64>)| {
            let raw =
                &bytes[(shown.start - span.start) as usize..(shown.end - span.start) as usize];
            needle.might_match(raw) && needle.matches_line(&render_shown(full, shown, raw))
        };
        let found = if backward {
            ranges.iter().rev().find(matches)
        } else {
            ranges.iter().find(matches)
        };
        Ok(found.map(|(i, _, _)| *i))
    }

    /// Byte range of line `i` (which must exist) without its '\n'.
    fn line_range(&mut self, i: usize) -> io::Result<Range<u64>> {
        let block = self.index.block_of(i);
        let at = i - block.first_line as usize;
        let starts = self.block_starts(block)?;
        let (start, next) = (starts[at], starts.get(at + 1).copied());
        let next = match next {
            Some(next) => Some(next),
            None if i + 1 < self.line_count() => Some(self.index.block_of(i + 1).start),
            None => None,
        };
        Ok(self.index.line_range(i, start, next))
    }

    fn shown_range(&mut self, i: usize) -> io::Result<Range<u64>> {
        Ok(shown_of(&self.line_range(i)?))
    }

    /// The line starts of `block`, read from the file unless recently resolved.
    fn block_starts(&mut self, block: Block) -> io::Result<&[u64]> {
        if let Some(at) = self.blocks.iter().position(|(b, _)| *b == block) {
            let entry = self.blocks.remove(at);
            self.blocks.push(entry);
        } else {
            let bytes = self.read(block.start..block.scan_end)?;
            let starts = block.line_starts(&bytes);
            if starts.len() as u64 != block.lines {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "{} changed under its index (was it truncated?)",
                        self.path.display()
                    ),
                ));
            }
            if self.blocks.len() == CACHED_BLOCKS {
                self.blocks.remove(0);
            }
            self.blocks.push((block, starts));
        }
        Ok(&self.blocks[self.blocks.len() - 1].1)
    }

    fn check_line(&self, i: usize) -> io::Result<()> {
        let count = self.line_count();
        if i < count {
            return Ok(());
        }
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{} has no line {i}: {count} lines indexed",
                self.path.display()
            ),
        ))
    }

    /// The file, opened if it exists now.
    pub(super) fn opened(&mut self) -> io::Result<Option<&File>> {
        open_if_exists(&self.path, &mut self.file)
    }

    /// Start offset of line `i`, which must exist.
    pub fn line_start(&mut self, i: usize) -> io::Result<u64> {
        self.check_line(i)?;
        Ok(self.line_range(i)?.start)
    }

    pub(super) fn read(&self, range: Range<u64>) -> io::Result<Vec<u8>> {
        let mut bytes = vec![0; (range.end - range.start) as usize];
        if bytes.is_empty() {
            return Ok(bytes);
        }
        let file = self.file.as_ref().ok_or_else(|| {
            read_error(
                &self.path,
                io::Error::new(io::ErrorKind::NotFound, "not opened"),
            )
        })?;
        file.read_exact_at(&mut bytes, range.start)
            .map_err(|e| read_error(&self.path, e))?;
        Ok(bytes)
    }
}

/// The bytes of a line that are rendered: all of it, or its last [`MAX_LINE_BYTES`].
fn shown_of(line: &Range<u64>) -> Range<u64> {
    line.start.max(line.end.saturating_sub(MAX_LINE_BYTES))..line.end
}

/// Renders a line from `window`, the bytes at `shown` of the line at `full`. When that is
/// only the line's tail, what precedes the window's first `\r` sat at columns unknown here, so
/// rendering starts at that `\r`: a progress line shows its final state, not that state with
/// a fragment of an older one left over. If nothing visible follows that `\r` (a long CRLF
/// line), or there is none, rendering starts at the cut, past the tail of any UTF-8
/// character cut in two.
fn render_shown(full: &Range<u64>, shown: &Range<u64>, window: &[u8]) -> StyledLine {
    if full == shown {
        return render_line(window);
    }
    if let Some(cr) = memchr::memchr(b'\r', window) {
        let line = render_line(&window[cr..]);
        if !line.is_empty() {
            return line;
        }
    }
    let partial = window
        .iter()
        .take(3)
        .take_while(|&&b| (0x80..0xc0).contains(&b))
        .count();
    render_line(&window[partial..])
}

/// Reads `range` of `file` (at `path`) in reads of at most `chunk` bytes, handing each to
/// `sink`, until the range or the file ends; returns where it stopped.
pub(crate) fn read_range(
    file: &File,
    path: &Path,
    range: Range<u64>,
    chunk: u64,
    mut sink: impl FnMut(&[u8]),
) -> io::Result<u64> {
    let mut pos = range.start;
    let mut buf = vec![0; range.end.saturating_sub(pos).min(chunk) as usize];
    while pos < range.end {
        let want = (range.end - pos).min(chunk) as usize;
        match file.read_at(&mut buf[..want], pos) {
            // The file holds no more yet.
            Ok(0) => break,
            Ok(n) => {
                sink(&buf[..n]);
                pos += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(read_error(path, e)),
        }
    }
    Ok(pos)
}

/// The file at `path` in `slot`, opened now if it was not and it exists.
pub(crate) fn open_if_exists<'a>(
    path: &Path,
    slot: &'a mut Option<File>,
) -> io::Result<Option<&'a File>> {
    if slot.is_none() {
        match tether_os::journal::secure::open_regular(path) {
            Ok(file) => *slot = Some(file),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(read_error(path, e)),
        }
    }
    Ok(slot.as_ref())
}

pub(crate) fn read_error(path: &Path, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("cannot read {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::style::plain_text;
    use std::fs::OpenOptions;
    use std::io::Write;

    fn append(path: &Path, bytes: &[u8]) -> u64 {
        use std::os::unix::fs::OpenOptionsExt;
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(path)
            .expect("open log for appending");
        file.write_all(bytes).expect("append to log");
        file.metadata().expect("log metadata").len()
    }

    fn texts(stream: &mut StreamFile) -> Vec<String> {
        (0..stream.line_count())
            .map(|i| plain_text(&stream.line(i).expect("read line")))
            .collect()
    }

    fn stream_of(bytes: &[u8]) -> (tempfile::TempDir, StreamFile) {
        let dir = tether_os::testing::private_tempdir();
        let path = dir.path().join("stdout.log");
        let len = append(&path, bytes);
        let mut stream = StreamFile::new(path);
        stream.refresh(len).expect("refresh");
        (dir, stream)
    }

    #[test]
    fn missing_file_reads_as_empty_until_it_appears() {
        let dir = tether_os::testing::private_tempdir();
        let path = dir.path().join("stdout.log");
        let mut stream = StreamFile::new(path.clone());
        stream.refresh(10).expect("refresh of a missing file");
        assert!(stream.is_empty());
        assert_eq!(stream.line_count(), 0);
        assert_eq!(stream.find("x", 0, true).expect("find"), None);

        let len = append(&path, b"hello\n");
        stream.refresh(len).expect("refresh");
        assert_eq!(texts(&mut stream), vec!["hello"]);
    }

    #[test]
    fn file_growing_between_refreshes() {
        let dir = tether_os::testing::private_tempdir();
        let path = dir.path().join("stderr.log");
        let mut stream = StreamFile::new(path.clone());

        let len = append(&path, b"one\ntw");
        stream.refresh(len).expect("refresh");
        assert_eq!(texts(&mut stream), vec!["one", "tw"]);

        let len = append(&path, b"o\n\x1b[1mthree\x1b[0m\r\n");
        stream.refresh(len).expect("refresh");
        assert_eq!(texts(&mut stream), vec!["one", "two", "three"]);
        assert_eq!(stream.len(), len);

        // Told of more than the file holds yet: indexes what is there, the rest comes later.
        let len = append(&path, b"four");
        stream.refresh(len + 100).expect("refresh past the end");
        assert_eq!(stream.len(), len);
        let len = append(&path, b"!\n");
        stream.refresh(len).expect("refresh");
        assert_eq!(stream.len(), len);
        assert_eq!(texts(&mut stream), vec!["one", "two", "three", "four!"]);

        // A stale length changes nothing.
        stream.refresh(3).expect("stale refresh");
        assert_eq!(stream.line_count(), 4);
    }

    #[test]
    fn refresh_reads_only_new_bytes() {
        let dir = tether_os::testing::private_tempdir();
        let path = dir.path().join("stdout.log");
        let mut stream = StreamFile::new(path.clone());
        append(&path, b"aaaa");
        stream.refresh(4).expect("refresh");

        // Rewriting indexed bytes (which the broker never does) goes unnoticed.
        let file = OpenOptions::new().write(true).open(&path).expect("open");
        file.write_all_at(b"\n", 1).expect("rewrite");
        let len = append(&path, b"b\n");
        stream.refresh(len).expect("refresh");
        assert_eq!(stream.line_count(), 1);
        assert_eq!(texts(&mut stream), vec!["aaab"]);
    }

    #[test]
    fn crlf_and_empty_lines() {
        let (_dir, mut stream) = stream_of(b"a\r\n\r\n\nb");
        assert_eq!(texts(&mut stream), vec!["a", "", "", "b"]);
        assert!(stream.line(1).expect("empty line").is_empty());
    }

    #[test]
    fn line_out_of_range_is_an_error() {
        let (_dir, mut stream) = stream_of(b"a\n");
        let err = stream.line(1).expect_err("no line 1");
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    }

    #[test]
    fn long_line_renders_its_tail() {
        let mut bytes = vec![b'x'; 100_000];
        bytes.extend_from_slice(b"END\nnext\n");
        let (_dir, mut stream) = stream_of(&bytes);
        let text = plain_text(&stream.line(0).expect("long line"));
        assert_eq!(text.len() as u64, MAX_LINE_BYTES);
        assert!(text.ends_with("xEND"));
        assert_eq!(texts(&mut stream)[1], "next");
    }

    #[test]
    fn long_progress_line_keeps_its_final_state() {
        let mut bytes = Vec::new();
        for n in 0..10_000 {
            bytes.extend_from_slice(format!("\r\x1b[32mprogress {n:>6}\x1b[0m").as_bytes());
        }
        bytes.extend_from_slice(b"\r\x1b[Kdone\n");
        assert!(bytes.len() as u64 > 2 * MAX_LINE_BYTES);
        let (_dir, mut stream) = stream_of(&bytes[..bytes.len() - 9]);
        assert_eq!(texts(&mut stream), vec!["progress   9999"]);
        let (_dir, mut stream) = stream_of(&bytes);
        assert_eq!(texts(&mut stream), vec!["done"]);
    }

    #[test]
    fn long_crlf_line_renders_its_tail() {
        let mut bytes = vec![b'y'; 100_000];
        bytes.extend_from_slice(b"END\x1b[0m\r\n");
        let (_dir, mut stream) = stream_of(&bytes);
        let text = plain_text(&stream.line(0).expect("long line"));
        assert!(text.ends_with("yEND"));
        assert_eq!(stream.find("yend", 0, true).expect("find"), Some(0));
    }

    #[test]
    fn long_line_cut_inside_a_character_shows_no_replacement() {
        let mut line = "é".repeat(40_000);
        line.push('!');
        assert_eq!(
            (line.len() as u64 - MAX_LINE_BYTES) % 2,
            1,
            "cut must land mid-char"
        );
        let (_dir, mut stream) = stream_of(line.as_bytes());
        let text = plain_text(&stream.line(0).expect("long line"));
        assert!(!text.contains(char::REPLACEMENT_CHARACTER));
        assert!(text.ends_with("éé!"));
        assert_eq!(text.len() as u64, MAX_LINE_BYTES - 1);
    }

    #[test]
    fn colours_carry_over_line_breaks_as_in_a_terminal() {
        let (_dir, mut stream) = stream_of(b"plain\n\x1b[31mred\nstill red\n\x1b[0mplain again\n");
        let lines = stream.lines(0..4).unwrap();
        let fg = |line: &StyledLine| line[0].style.fg;
        use crate::output::style::Color;
        assert_eq!(fg(&lines[0]), Color::Default);
        assert_eq!(fg(&lines[1]), Color::Indexed(1));
        assert_eq!(fg(&lines[2]), Color::Indexed(1));
        assert_eq!(fg(&lines[3]), Color::Default);
        // Asked for alone, a line still learns the colour from the lines before it.
        assert_eq!(fg(&stream.line(2).unwrap()), Color::Indexed(1));
    }

    #[test]
    fn find_forward_and_backward() {
        let (_dir, mut stream) = stream_of(
            b"alpha\n\x1b[31mErr\x1b[0mor one\nbeta\nerror two\ngamma\n\x1b]0;error\x07hidden",
        );
        let mut find = |needle: &str, from: usize, forward: bool| {
            stream.find(needle, from, forward).expect("find")
        };
        assert_eq!(find("error", 0, true), Some(1));
        assert_eq!(find("error", 1, true), Some(1));
        assert_eq!(find("error", 2, true), Some(3));
        assert_eq!(find("error", 4, true), None);
        assert_eq!(find("ERROR", 4, false), Some(3));
        assert_eq!(find("error", 3, false), Some(3));
        assert_eq!(find("error", 2, false), Some(1));
        assert_eq!(find("error", 0, false), None);
        assert_eq!(find("error", 100, false), Some(3));
        assert_eq!(find("error", 100, true), None);
        assert_eq!(find("r one", 0, true), Some(1));
        assert_eq!(find("", 2, true), Some(2));
        assert_eq!(find("hidden", 0, true), Some(5));
        assert_eq!(find("nowhere", 0, true), None);
    }

    #[test]
    fn find_across_many_reads() {
        let mut bytes = Vec::new();
        for n in 0..150_000 {
            match n {
                10 | 120_000 => bytes.extend_from_slice(b"the Needle is here\n"),
                70_000 => {
                    // A line longer than a search read: only its tail is searched.
                    bytes.extend_from_slice(b"needle at the start ");
                    bytes.resize(bytes.len() + 2 * SEARCH_BATCH as usize, b'.');
                    bytes.extend_from_slice(b" needle at the end\n");
                }
                _ => bytes.extend_from_slice(format!("line {n}\n").as_bytes()),
            }
        }
        assert!(bytes.len() as u64 > 3 * SEARCH_BATCH);
        let (_dir, mut stream) = stream_of(&bytes);
        let mut find =
            |from: usize, forward: bool| stream.find("needle", from, forward).expect("find");
        assert_eq!(find(0, true), Some(10));
        assert_eq!(find(11, true), Some(70_000));
        assert_eq!(find(70_001, true), Some(120_000));
        assert_eq!(find(120_001, true), None);
        assert_eq!(find(149_999, false), Some(120_000));
        assert_eq!(find(119_999, false), Some(70_000));
        assert_eq!(find(69_999, false), Some(10));
        assert_eq!(find(9, false), None);
    }
}
