//! How stdout and stderr interleaved: the journal's `output` events, each a run of bytes of
//! one stream at one moment, in the order they came. From them the merged view orders the
//! lines of both streams and stamps each with the time its first byte was written, without
//! ever holding the text: a line is read back from its own stream's log when shown.

use tether_protocol::protocol::Stream;

/// Bytes of one stream written at one moment (one `output` event).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Run {
    pub ts_ms: u64,
    pub stream: Stream,
    /// Where the bytes are in the stream's log.
    pub start: u64,
    pub end: u64,
}

/// The runs of a command's run, in the order they were read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OutputRuns {
    runs: Vec<Run>,
    /// Where each stream's runs are in `runs`, for finding a byte's run by offset.
    of_stream: [Vec<u32>; 2],
}

impl OutputRuns {
    /// Records an `output` event. Consecutive bytes of one stream in the same millisecond
    /// are one run: no line's time or order changes.
    pub fn push(&mut self, ts_ms: u64, stream: Stream, offset: u64, len: u64) {
        if len == 0 {
            return;
        }
        if let Some(last) = self.runs.last_mut()
            && last.stream == stream
            && last.end == offset
            && last.ts_ms == ts_ms
        {
            last.end = last.end.saturating_add(len);
            return;
        }
        self.of_stream[stream as usize].push(self.runs.len() as u32);
        self.runs.push(Run {
            ts_ms,
            stream,
            start: offset,
            end: offset.saturating_add(len),
        });
    }

    pub fn as_slice(&self) -> &[Run] {
        &self.runs
    }

    /// When the byte at `offset` of `stream` was written, if an event says.
    pub fn time_of(&self, stream: Stream, offset: u64) -> Option<u64> {
        // Runs of one stream ascend by offset.
        let of_stream = &self.of_stream[stream as usize];
        let k = of_stream.partition_point(|&k| self.runs[k as usize].start <= offset);
        let run = &self.runs[*of_stream.get(k.checked_sub(1)?)? as usize];
        (offset < run.end).then_some(run.ts_ms)
    }
}

/// Where the lines of both streams fall in their interleaving: for each run counted so far,
/// how many merged lines come before it and which line of its stream is the first to start
/// in it. A line belongs to the run holding its first byte.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MergedIndex {
    /// (merged lines before the run, its stream's first line starting in it), per run.
    counted: Vec<(u64, u64)>,
    /// Lines of each stream starting before the end of its last counted run.
    lines_at: [u64; 2],
    total: u64,
}

/// A merged line: which stream, which of its lines, and when it was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MergedLine {
    pub stream: Stream,
    pub line: u64,
    pub ts_ms: u64,
}

impl MergedIndex {
    /// Runs counted so far.
    pub fn counted(&self) -> usize {
        self.counted.len()
    }

    /// Counts the next run, of `stream`: at its end, `lines_then` lines of the stream have
    /// started (the line count of a stream indexed exactly to there).
    pub fn push(&mut self, stream: Stream, lines_then: u64) {
        let s = stream as usize;
        let before = self.lines_at[s];
        self.counted.push((self.total, before));
        self.total += lines_then.saturating_sub(before);
        self.lines_at[s] = lines_then.max(before);
    }

    /// Merged lines so far.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Merged line `m`, given the runs counted.
    pub fn locate(&self, runs: &[Run], m: u64) -> Option<MergedLine> {
        if m >= self.total {
            return None;
        }
        // The last run with lines before it at most `m` holds `m` (runs without lines of
        // their own share their follower's count and come before it).
        let k = self.counted.partition_point(|&(before, _)| before <= m) - 1;
        let (before, first) = self.counted[k];
        let run = runs.get(k)?;
        Some(MergedLine {
            stream: run.stream,
            line: first + (m - before),
            ts_ms: run.ts_ms,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Stream::{Stderr as E, Stdout as O};

    /// Runs and their merged index for writes of (time, stream, bytes), counting lines as a
    /// stream's line index would at each run's end.
    fn merged(writes: &[(u64, Stream, &str)]) -> (OutputRuns, MergedIndex, [Vec<u8>; 2]) {
        let mut runs = OutputRuns::default();
        let mut logs: [Vec<u8>; 2] = Default::default();
        for &(ts, stream, bytes) in writes {
            let log = &mut logs[stream as usize];
            runs.push(ts, stream, log.len() as u64, bytes.len() as u64);
            log.extend_from_slice(bytes.as_bytes());
        }
        let mut index = MergedIndex::default();
        for run in runs.as_slice() {
            let upto = &logs[run.stream as usize][..run.end as usize];
            let mut lines = crate::output::LineIndex::new();
            lines.extend(upto);
            index.push(run.stream, lines.line_count() as u64);
        }
        (runs, index, logs)
    }

    /// Each merged line as `stream time text`.
    fn shown(writes: &[(u64, Stream, &str)]) -> Vec<String> {
        let (runs, index, logs) = merged(writes);
        (0..index.total())
            .map(|m| {
                let line = index.locate(runs.as_slice(), m).expect("a line");
                let log = String::from_utf8_lossy(&logs[line.stream as usize]).into_owned();
                let text = log
                    .split('\n')
                    .nth(line.line as usize)
                    .unwrap_or("?")
                    .to_string();
                format!("{} {} {text}", line.stream as usize + 1, line.ts_ms)
            })
            .collect()
    }

    #[test]
    fn lines_interleave_as_written() {
        let writes = [
            (1, O, "out one\nout two\n"),
            (2, E, "err one\n"),
            (3, O, "out three\n"),
            (4, E, "err two\nerr three\n"),
        ];
        assert_eq!(
            shown(&writes),
            [
                "1 1 out one",
                "1 1 out two",
                "2 2 err one",
                "1 3 out three",
                "2 4 err two",
                "2 4 err three"
            ]
        );
    }

    #[test]
    fn a_line_written_in_pieces_is_where_and_when_it_began() {
        let writes = [
            (1, O, "progress"),
            (2, E, "warning\n"),
            (3, O, " done\nnext"),
            (4, O, " line\n"),
        ];
        assert_eq!(
            shown(&writes),
            ["1 1 progress done", "2 2 warning", "1 3 next line"]
        );
    }

    #[test]
    fn a_newline_ending_a_run_starts_the_next_line_in_the_next_run() {
        let writes = [(1, O, "a\n"), (2, E, "e\n"), (3, O, "b\n")];
        assert_eq!(shown(&writes), ["1 1 a", "2 2 e", "1 3 b"]);
    }

    #[test]
    fn runs_without_a_line_start_take_no_place() {
        let writes = [(1, O, "x"), (2, O, "y"), (3, E, "e\n"), (4, O, "z\n")];
        // `y` and `z` continue the line `x` began.
        assert_eq!(shown(&writes), ["1 1 xyz", "2 3 e"]);
    }

    #[test]
    fn consecutive_bytes_in_one_millisecond_are_one_run() {
        let mut runs = OutputRuns::default();
        runs.push(5, O, 0, 3);
        runs.push(5, O, 3, 4);
        runs.push(5, E, 0, 1);
        runs.push(6, O, 7, 1);
        runs.push(6, O, 8, 0);
        assert_eq!(runs.as_slice().len(), 3);
        assert_eq!(runs.as_slice()[0].end, 7);
        assert_eq!(runs.time_of(O, 6), Some(5));
        assert_eq!(runs.time_of(O, 7), Some(6));
        assert_eq!(runs.time_of(E, 0), Some(5));
        assert_eq!(runs.time_of(O, 8), None);
    }

    #[test]
    fn empty_streams_merge_to_nothing() {
        assert!(shown(&[]).is_empty());
        let (runs, index, _) = merged(&[]);
        assert_eq!(index.locate(runs.as_slice(), 0), None);
    }
}
