//! The logs of the command on screen, as the output panes read them: indexed forward run by
//! run (so that the merged view knows which lines each `output` event began), and shown
//! from their end at once when the index has far to go (a post-mortem of a 1 GiB log), the
//! end's lines numbered by estimate until the index reaches them.

use std::path::Path;

use crate::app::view::{LineSelection, OutputView, PaneLines};
use tether_model::output::runs::{MergedIndex, Run};
use tether_model::output::{StreamFile, StyledLine};
use tether_protocol::protocol::Stream;

/// Lines read backwards from the end at first, at least: a tall pane, and some to scroll.
const TAIL_LINES: usize = 256;

/// The open logs of one command's run.
pub(super) struct OpenStreams {
    pub files: [StreamFile; 2],
    /// Where each counted run's lines are among both streams' lines.
    pub merged: MergedIndex,
    /// The line number given to each stream's tail's first line (an estimate).
    tail_base: [Option<usize>; 2],
    /// Its true number, learnt when the index reached the tail's end.
    resolved: [Option<usize>; 2],
    /// Frames still to prepare with little indexing, after an end was read: the end is
    /// drawn at once (the TUI prepares once for its size before its first frame).
    quick_frames: u8,
}

/// A row's source before it is cut to the pane's width.
pub(super) struct SourceLine {
    pub number: usize,
    pub line: StyledLine,
    pub ts_ms: Option<u64>,
    pub mark: Option<Stream>,
}

impl OpenStreams {
    pub fn new(dir: &Path) -> Self {
        OpenStreams {
            files: Stream::BOTH.map(|s| StreamFile::new(dir.join(s.file_name()))),
            merged: MergedIndex::default(),
            tail_base: [None; 2],
            resolved: [None; 2],
            quick_frames: 0,
        }
    }

    /// Before indexing: a stream with more than `budget` bytes left to index is read from
    /// its end, so that its last lines show now (again at the new end while following a
    /// stream that grows faster than it is indexed). Returns whether this frame should index
    /// little, to show an end just read at once.
    pub fn read_tails(&mut self, lens: [u64; 2], budget: u64, follow: [bool; 2]) -> bool {
        for s in Stream::BOTH.map(|s| s as usize) {
            let file = &mut self.files[s];
            let far = lens[s].saturating_sub(file.len()) > budget;
            let stale = file.tail_end().is_some_and(|end| end < lens[s]) && follow[s];
            let first = file.tail_end().is_none();
            if far && (first || stale) {
                // Unreadable: the stream shows what the index reaches, as before.
                if file.read_tail(lens[s], TAIL_LINES).is_err() {
                    file.drop_tail();
                }
                self.tail_base[s] = None;
                // Only the first time: a flood followed at its end still gets indexed at
                // full speed.
                if first {
                    self.quick_frames = 2;
                }
            }
        }
        let quick = self.quick_frames > 0;
        self.quick_frames = self.quick_frames.saturating_sub(1);
        quick
    }

    /// Indexes forward each run to its end, counting its lines for the merged view, then
    /// each stream to `lens`; at most `budget` bytes. Returns whether the budget ran out.
    pub fn catch_up(&mut self, runs: &[Run], lens: [u64; 2], budget: u64) -> bool {
        let mut left = budget;
        while let Some(run) = runs.get(self.merged.counted()) {
            let s = run.stream as usize;
            if !self.index_to(s, run.end.min(lens[s]), &mut left) {
                return true;
            }
            self.merged
                .push(run.stream, self.files[s].line_count() as u64);
        }
        !(0..2).all(|s| self.index_to(s, lens[s], &mut left))
    }

    /// Indexes stream `s` to `target`, stopping at its tail's end on the way: there the
    /// tail's true line numbers are learnt and the tail is dropped. False if the budget ran
    /// out first.
    fn index_to(&mut self, s: usize, target: u64, left: &mut u64) -> bool {
        loop {
            let file = &mut self.files[s];
            let at = file.len();
            if at >= target {
                return true;
            }
            let stop = match file.tail_end() {
                Some(end) if end > at && end < target => end,
                _ => target,
            };
            // A log that cannot be read is shown as far as it was read, as before.
            let _ = file.refresh_within(stop, *left);
            *left = left.saturating_sub(file.len() - at);
            if let (Some(end), Some(lines)) = (file.tail_end(), file.tail_len())
                && file.len() >= end
            {
                self.resolved[s] = Some(file.line_count().saturating_sub(lines));
                file.drop_tail();
            }
            if file.len() < stop {
                // Budget spent, or the file holds less than promised (more comes later).
                return *left > 0;
            }
        }
    }

    /// Settles stream `s`'s numbering for this frame: the lines the index has, then (with a
    /// tail) a gap, then the tail's lines. A view scrolled into the tail keeps showing the
    /// same lines when their numbers change. Returns the line count to scroll over.
    pub fn settle(&mut self, s: usize, view: &mut OutputView) -> usize {
        let file = &self.files[s];
        let count = file.line_count();
        let Some(tail_len) = file.tail_len() else {
            if let Some(prev) = self.tail_base[s].take() {
                let real = self.resolved[s].take().unwrap_or(prev);
                shift(view, prev, real as i64 - prev as i64);
            }
            return count;
        };
        let base = match self.tail_base[s] {
            Some(prev) => prev.max(count),
            None => estimate(file, tail_len).max(count),
        };
        if let Some(prev) = self.tail_base[s] {
            shift(view, prev, base as i64 - prev as i64);
        }
        self.tail_base[s] = Some(base);
        base + tail_len
    }

    /// Rows of stream `s` from line `first`: indexed lines, the tail's, and for a gap
    /// between them one placeholder. A view in the gap reads the tail further back first.
    pub fn lines_from(
        &mut self,
        s: usize,
        first: usize,
        rows: usize,
        stamp: Option<&dyn Fn(Stream, u64) -> Option<u64>>,
    ) -> Vec<SourceLine> {
        let stream = Stream::BOTH[s];
        let stamps = stamp.is_some();
        let stamp = |at: u64| stamp.and_then(|f| f(stream, at));
        let count = self.files[s].line_count();
        let mut out = Vec::with_capacity(rows);
        let mut push = |number, line, ts_ms| {
            let mark = None;
            out.push(SourceLine {
                number,
                line,
                ts_ms,
                mark,
            });
        };
        let end = first + rows;
        if first < count {
            let file = &mut self.files[s];
            let lines = file.lines(first..end.min(count)).unwrap_or_default();
            for (k, line) in lines.into_iter().enumerate() {
                let number = first + k;
                // Only a stamp needs the line's offset.
                let at = stamps.then(|| file.line_start(number).ok()).flatten();
                push(number, line, at.and_then(stamp));
            }
        }
        let Some(mut base) = self.tail_base[s] else {
            return out;
        };
        let file = &mut self.files[s];
        if first < base && end > count && !file.tail_at_start() {
            // In sight of the gap: read further back, as many lines as the gap in sight.
            let want = base.saturating_sub(first.max(count));
            if let Ok(gained) = file.extend_tail(want) {
                base = base.saturating_sub(gained).max(count);
                self.tail_base[s] = Some(base);
            }
        }
        if first.max(count) < base && end > count {
            push(
                count,
                tether_model::output::render_line("⋯".as_bytes()),
                None,
            );
        }
        if end > base {
            let from = first.max(base) - base;
            let lines = file.tail_lines(from..end - base).unwrap_or_default();
            for (k, (at, line)) in lines.into_iter().enumerate() {
                push(base + from + k, line, stamp(at));
            }
        }
        out.truncate(rows);
        out
    }

    /// Rows of the merged view from merged line `first`, each read from its own stream.
    pub fn merged_from(&mut self, runs: &[Run], first: usize, rows: usize) -> Vec<SourceLine> {
        let mut out = Vec::with_capacity(rows);
        let mut m = first as u64;
        let end = (first + rows) as u64;
        while m < end {
            let Some(at) = self.merged.locate(runs, m) else {
                break;
            };
            // Consecutive lines of one stream, read at once.
            let mut upto = m + 1;
            while upto < end
                && self
                    .merged
                    .locate(runs, upto)
                    .is_some_and(|n| n.stream == at.stream && n.line == at.line + (upto - m))
            {
                upto += 1;
            }
            let lines = at.line as usize..(at.line + (upto - m)) as usize;
            let read = self.files[at.stream as usize]
                .lines(lines)
                .unwrap_or_default();
            for (k, line) in read.into_iter().enumerate() {
                let n = m + k as u64;
                let ts_ms = self.merged.locate(runs, n).map(|l| l.ts_ms);
                out.push(SourceLine {
                    number: n as usize,
                    line,
                    ts_ms,
                    mark: Some(at.stream),
                });
            }
            m = upto;
        }
        out
    }

    /// Whether stream `s` shows lines whose numbers are estimates.
    pub fn estimated(&self, s: usize) -> bool {
        self.files[s].tail_len().is_some()
    }
}

/// The line number of a tail's first line, guessed from the density of lines (lines a byte)
/// of the indexed start and of the tail itself, averaged: a log's lines often grow or shrink
/// along it (`seq`'s do), and the bytes between lie between the two.
fn estimate(file: &StreamFile, tail_len: usize) -> usize {
    let start = file.tail_start().unwrap_or(0);
    let end = file.tail_end().unwrap_or(start);
    let tail = tail_len as f64 / (end - start).max(1) as f64;
    let density = if file.line_count() > 0 {
        (tail + file.line_count() as f64 / file.len().max(1) as f64) / 2.0
    } else {
        tail
    };
    (start as f64 * density) as usize
}

/// Moves what a view points at, at or past line `from`, by `delta` lines.
fn shift(view: &mut OutputView, from: usize, delta: i64) {
    if delta == 0 {
        return;
    }
    let moved = |n: usize| {
        if n >= from {
            (n as i64 + delta).max(0) as usize
        } else {
            n
        }
    };
    if !view.follow {
        view.top = moved(view.top);
    }
    view.matched = view.matched.map(moved);
    view.selection = view.selection.map(|s| LineSelection {
        anchor: moved(s.anchor),
        cursor: moved(s.cursor),
    });
}

/// Percent of `lens` indexed, while less than all of it is.
pub(super) fn indexing(done: u64, lens: u64) -> Option<u8> {
    (done < lens).then(|| (done.saturating_mul(100) / lens.max(1)).min(99) as u8)
}

/// Cuts source lines into the pane's rows (wrapped, or one a line), keeping the last `rows`
/// when following and the first otherwise.
pub(super) fn into_rows(
    sources: Vec<SourceLine>,
    rows: usize,
    width: usize,
    wrap: bool,
    follow: bool,
) -> PaneLines {
    let mut pieces = Vec::new();
    for s in sources {
        let lines = if wrap {
            tether_model::output::wrap(&s.line, width)
        } else {
            vec![s.line]
        };
        pieces.extend(
            lines
                .into_iter()
                .map(|line| (s.number, line, s.ts_ms, s.mark)),
        );
    }
    // Following, the last rows; else the first.
    let excess = pieces.len().saturating_sub(rows);
    let skip = if follow { excess } else { 0 };
    let mut pane = PaneLines::default();
    for (number, line, ts_ms, mark) in pieces.into_iter().skip(skip).take(rows) {
        pane.numbers.push(number);
        pane.lines.push(line);
        pane.stamps.push(ts_ms);
        pane.marks.push(mark);
    }
    pane.first = pane.numbers.first().copied().unwrap_or(0);
    pane
}

#[cfg(test)]
mod tests {
    use super::*;
    use tether_model::output::plain_text;
    use tether_model::output::runs::OutputRuns;

    /// Journal directory with the two logs written as (time, stream, bytes) say, and the
    /// runs their `output` events give.
    fn logs(writes: &[(u64, Stream, &[u8])]) -> (tempfile::TempDir, OutputRuns, [u64; 2]) {
        let dir = tether_os::testing::private_tempdir();
        let mut bytes: [Vec<u8>; 2] = Default::default();
        let mut runs = OutputRuns::default();
        for &(ts, stream, data) in writes {
            let log = &mut bytes[stream as usize];
            runs.push(ts, stream, log.len() as u64, data.len() as u64);
            log.extend_from_slice(data);
        }
        for stream in Stream::BOTH {
            tether_os::testing::write_private(
                dir.path().join(stream.file_name()),
                &bytes[stream as usize],
            );
        }
        let lens = [bytes[0].len() as u64, bytes[1].len() as u64];
        (dir, runs, lens)
    }

    fn texts(lines: &[SourceLine]) -> Vec<String> {
        lines.iter().map(|l| plain_text(&l.line)).collect()
    }

    #[test]
    fn merged_rows_come_from_both_logs_in_the_order_written() {
        let (dir, runs, lens) = logs(&[
            (10, Stream::Stdout, b"compiling\n\x1b[32mok\x1b[0m a\n"),
            (11, Stream::Stderr, b"warning: x\n"),
            (12, Stream::Stdout, b"ok b\n"),
            (13, Stream::Stderr, b"error: \x1b]0;title\x07y\n"),
        ]);
        let mut open = OpenStreams::new(dir.path());
        assert!(!open.catch_up(runs.as_slice(), lens, u64::MAX));
        assert_eq!(open.merged.total(), 5);
        let rows = open.merged_from(runs.as_slice(), 0, 10);
        assert_eq!(
            texts(&rows),
            ["compiling", "ok a", "warning: x", "ok b", "error: y"]
        );
        let marks: Vec<_> = rows.iter().map(|r| r.mark).collect();
        use Stream::{Stderr as E, Stdout as O};
        assert_eq!(marks, [Some(O), Some(O), Some(E), Some(O), Some(E)]);
        let times: Vec<_> = rows.iter().map(|r| r.ts_ms).collect();
        assert_eq!(times, [Some(10), Some(10), Some(11), Some(12), Some(13)]);
        // From the middle, as a scrolled pane reads.
        assert_eq!(texts(&open.merged_from(runs.as_slice(), 3, 1)), ["ok b"]);
    }

    #[test]
    fn merged_counting_goes_on_over_frames_within_its_budget() {
        let writes: Vec<(u64, Stream, Vec<u8>)> = (0..200)
            .map(|n| {
                let stream = Stream::BOTH[n % 2];
                (n as u64, stream, format!("line {n}\n").into_bytes())
            })
            .collect();
        let borrowed: Vec<(u64, Stream, &[u8])> = writes
            .iter()
            .map(|(t, s, b)| (*t, *s, b.as_slice()))
            .collect();
        let (dir, runs, lens) = logs(&borrowed);
        let mut open = OpenStreams::new(dir.path());
        let mut frames = 0;
        while open.catch_up(runs.as_slice(), lens, 64) {
            frames += 1;
        }
        assert!(frames > 10);
        let rows = open.merged_from(runs.as_slice(), 0, 200);
        let expected: Vec<String> = (0..200).map(|n| format!("line {n}")).collect();
        assert_eq!(texts(&rows), expected);
    }

    /// A log of `n` numbered lines, as one run.
    fn numbered(n: usize) -> (tempfile::TempDir, OutputRuns, [u64; 2]) {
        let text: Vec<u8> = (0..n)
            .flat_map(|i| format!("line {i}\n").into_bytes())
            .collect();
        logs(&[(1, Stream::Stdout, &text)])
    }

    #[test]
    fn the_end_shows_at_once_and_its_numbers_are_fixed_when_indexed() {
        let (dir, runs, lens) = numbered(100_000);
        let mut open = OpenStreams::new(dir.path());
        let mut view = OutputView::default();
        let budget = 64 * 1024;
        // First frame: the tail is read, a little is indexed.
        open.read_tails(lens, budget, [true, true]);
        assert!(open.catch_up(runs.as_slice(), lens, budget));
        let total = open.settle(0, &mut view);
        assert!(open.estimated(0));
        let rows = open.lines_from(0, total - 3, 3, None);
        assert_eq!(texts(&rows), ["line 99997", "line 99998", "line 99999"]);
        // Scrolled up a bit, within the tail: the same lines stay in sight once numbered.
        view.follow = false;
        view.top = total - 10;
        view.selection = Some(LineSelection {
            anchor: total - 5,
            cursor: total - 4,
        });
        let shown = texts(&open.lines_from(0, view.top, 1, None));
        while open.catch_up(runs.as_slice(), lens, budget) {
            open.settle(0, &mut view);
        }
        let total = open.settle(0, &mut view);
        assert!(!open.estimated(0));
        assert_eq!(total, 100_000);
        assert_eq!(view.top, 99_990);
        // A selection made on estimated numbers holds the same lines once they are exact.
        let selected = view.selection.expect("still selected");
        assert_eq!((selected.anchor, selected.cursor), (99_995, 99_996));
        assert_eq!(texts(&open.lines_from(0, view.top, 1, None)), shown);
    }

    #[test]
    fn scrolling_above_the_tail_reads_further_back() {
        let (dir, runs, lens) = numbered(100_000);
        let mut open = OpenStreams::new(dir.path());
        let mut view = OutputView::default();
        let budget = 1024;
        open.read_tails(lens, budget, [true, true]);
        open.catch_up(runs.as_slice(), lens, budget);
        let total = open.settle(0, &mut view);
        let tail = open.files[0].tail_len().expect("a tail");
        // A page above the tail's first line: in the gap, so the tail grows to cover it.
        let first = total - tail - 20;
        let rows = open.lines_from(0, first, 5, None);
        assert_eq!(rows.len(), 5);
        assert!(open.files[0].tail_len().expect("a tail") >= tail + 20);
        // What is shown runs on, line after line, into the lines seen before.
        let numbers: Vec<usize> = texts(&rows)
            .iter()
            .map(|t| t["line ".len()..].parse().expect("a numbered line"))
            .collect();
        assert!(numbers.windows(2).all(|w| w[1] == w[0] + 1), "{numbers:?}");
        let at_end = texts(&open.lines_from(0, total - 1, 1, None));
        assert_eq!(at_end, ["line 99999"]);
    }

    #[test]
    fn a_small_log_is_indexed_without_a_tail() {
        let (dir, runs, lens) = numbered(10);
        let mut open = OpenStreams::new(dir.path());
        open.read_tails(lens, 1 << 20, [true, true]);
        assert_eq!(open.files[0].tail_len(), None);
        assert!(!open.catch_up(runs.as_slice(), lens, 1 << 20));
        let mut view = OutputView::default();
        assert_eq!(open.settle(0, &mut view), 10);
    }

    #[test]
    fn a_missing_log_promised_big_shows_nothing_and_asks_for_no_more_frames() {
        let dir = tether_os::testing::private_tempdir();
        let mut runs = OutputRuns::default();
        runs.push(1, Stream::Stdout, 0, 1 << 30);
        let lens = [1 << 30, 0];
        let mut open = OpenStreams::new(dir.path());
        open.read_tails(lens, 1 << 20, [true, true]);
        assert_eq!(open.files[0].tail_len(), None);
        assert!(!open.catch_up(runs.as_slice(), lens, 1 << 20));
        let mut view = OutputView::default();
        assert_eq!(open.settle(0, &mut view), 0);
    }
}
