//! The final-drain trigger's pattern: a regex matched against each complete line of a
//! command's stdout. A line that matches is the command's final result; the broker then gives
//! it a drain period to exit on its own before stopping it.
//!
//! The front end compiles the pattern too, before anything starts, so that a bad one is a
//! usage error; the broker compiles it again, as it trusts no request.

use std::time::Duration;

use regex::bytes::{Regex, RegexBuilder};
use thiserror::Error;

/// The drain period when a pattern is given without one.
pub const DEFAULT_DRAIN: Duration = Duration::from_secs(5);
/// The most of one line that is matched: its last bytes. A line longer than this (a
/// progress bar redrawn with `\r`, a minified blob) costs no more memory than this.
pub const LINE_TAIL: usize = 64 << 10;
/// The most of the matched line that is journaled.
pub const JOURNALED_LINE: usize = 1 << 10;
/// The compiled program's size limit: a pattern such as `\w{1000}{1000}` is refused rather
/// than given megabytes of automaton.
const PATTERN_SIZE_LIMIT: usize = 1 << 20;
/// The longest pattern accepted, in bytes.
const PATTERN_MAX_LEN: usize = 4 << 10;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum PatternError {
    #[error(
        "the --drain-on pattern is empty; give a regex that matches the final line, like 'DONE'"
    )]
    Empty,
    #[error("the --drain-on pattern is {0} bytes long; at most {PATTERN_MAX_LEN} are accepted")]
    TooLong(usize),
    #[error("the --drain-on pattern `{pattern}` is not a valid regex: {reason}")]
    Invalid { pattern: String, reason: String },
}

/// Compiles a final-drain pattern, bounded in size.
pub fn compile(pattern: &str) -> Result<Regex, PatternError> {
    if pattern.is_empty() {
        return Err(PatternError::Empty);
    }
    if pattern.len() > PATTERN_MAX_LEN {
        return Err(PatternError::TooLong(pattern.len()));
    }
    RegexBuilder::new(pattern)
        .size_limit(PATTERN_SIZE_LIMIT)
        .dfa_size_limit(PATTERN_SIZE_LIMIT)
        .build()
        .map_err(|err| PatternError::Invalid {
            pattern: pattern.to_string(),
            // The regex crate's message spans several lines (the pattern, a caret, the
            // reason); its last line is the reason.
            reason: err
                .to_string()
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("unknown error")
                .trim()
                .trim_start_matches("error: ")
                .to_string(),
        })
}

/// Finds the first complete line of a stream that matches, across reads that split lines
/// anywhere. Holds at most [`LINE_TAIL`] bytes of the line in progress.
pub struct LineMatcher {
    regex: Regex,
    /// The tail of the line read so far (no newline yet).
    partial: Vec<u8>,
}

impl LineMatcher {
    pub fn new(regex: Regex) -> LineMatcher {
        LineMatcher {
            regex,
            partial: Vec::new(),
        }
    }

    pub fn pattern(&self) -> &str {
        self.regex.as_str()
    }

    /// Feeds the next bytes of the stream; returns the first line completed by them that
    /// matches (its matched tail, without the line ending), if any.
    pub fn feed(&mut self, bytes: &[u8]) -> Option<Vec<u8>> {
        let mut found = None;
        let mut start = 0;
        // Per stdout chunk until the first match: a line wholly inside this chunk is matched
        // where it lies; only a line begun in an earlier chunk goes through `partial`, whose
        // buffer is kept from line to line.
        for end in memchr::memchr_iter(b'\n', bytes) {
            let piece = &bytes[start..end];
            start = end + 1;
            if found.is_some() {
                continue;
            }
            let line = if self.partial.is_empty() {
                &piece[piece.len().saturating_sub(LINE_TAIL)..]
            } else {
                self.push_partial(piece);
                &self.partial[..]
            };
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            if self.regex.is_match(line) {
                found = Some(line.to_vec());
            }
            self.partial.clear();
        }
        self.push_partial(&bytes[start..]);
        found
    }

    /// Appends to the line in progress, keeping only its last [`LINE_TAIL`] bytes.
    fn push_partial(&mut self, bytes: &[u8]) {
        (self.partial).extend_from_slice(&bytes[bytes.len().saturating_sub(LINE_TAIL)..]);
        let excess = self.partial.len().saturating_sub(LINE_TAIL);
        self.partial.drain(..excess);
    }
}

/// The matched line as it is journaled: lossy UTF-8, at most [`JOURNALED_LINE`] bytes, cut
/// on a character boundary.
pub fn journaled_line(line: &[u8]) -> String {
    crate::units::head(&String::from_utf8_lossy(line), JOURNALED_LINE).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matcher(pattern: &str) -> LineMatcher {
        LineMatcher::new(compile(pattern).expect("valid pattern"))
    }

    #[test]
    fn a_line_split_across_reads_matches_once_complete() {
        let mut m = matcher("^DONE$");
        assert_eq!(m.feed(b"working\nDO"), None);
        assert_eq!(m.feed(b"N"), None);
        assert_eq!(
            m.feed(b"E"),
            None,
            "no newline yet: the line is not complete"
        );
        assert_eq!(m.feed(b"\r\nmore"), Some(b"DONE".to_vec()));
    }

    #[test]
    fn only_complete_lines_match_and_the_first_is_returned() {
        let mut m = matcher("result: \\d+");
        assert_eq!(
            m.feed(b"result: 1\nresult: 2\n"),
            Some(b"result: 1".to_vec())
        );
        assert_eq!(m.feed(b"result: "), None);
        assert_eq!(m.feed(b"pending\n"), None, "the line is `result: pending`");
        assert_eq!(m.feed(b"result: 3"), None, "not complete yet");
        assert_eq!(m.feed(b"\n"), Some(b"result: 3".to_vec()));
    }

    #[test]
    fn a_very_long_line_is_matched_on_its_bounded_tail() {
        let mut m = matcher("END$");
        let long = vec![b'x'; 3 * LINE_TAIL];
        assert_eq!(m.feed(&long), None);
        assert_eq!(m.partial.len(), LINE_TAIL);
        for _ in 0..100 {
            assert_eq!(m.feed(&long[..1000]), None);
            assert!(m.partial.len() <= LINE_TAIL);
        }
        let line = m.feed(b"END\n").expect("the tail matches");
        assert_eq!(line.len(), LINE_TAIL);
        assert!(line.ends_with(b"END"));
        // A pattern anchored at the start of a line that was cut does not see its start.
        let mut start = matcher("^START");
        let mut cut = b"START".to_vec();
        cut.extend(vec![b'y'; 2 * LINE_TAIL]);
        cut.push(b'\n');
        assert_eq!(start.feed(&cut), None);
    }

    #[test]
    fn invalid_empty_and_oversized_patterns_are_refused() {
        assert!(matches!(
            compile("(unclosed"),
            Err(PatternError::Invalid { .. })
        ));
        let message = compile("(unclosed").err().map(|e| e.to_string());
        assert!(
            message
                .as_deref()
                .is_some_and(|m| m.contains("`(unclosed` is not a valid regex")),
            "{message:?}"
        );
        assert_eq!(compile("").err(), Some(PatternError::Empty));
        assert!(matches!(
            compile(&"a".repeat(5000)),
            Err(PatternError::TooLong(5000))
        ));
        assert!(matches!(
            compile("\\w{1000}{1000}"),
            Err(PatternError::Invalid { .. })
        ));
    }

    #[test]
    fn the_journaled_line_is_lossy_and_cut_on_a_character() {
        assert_eq!(journaled_line(b"ok \xff"), "ok \u{fffd}");
        let long = "é".repeat(JOURNALED_LINE);
        let cut = journaled_line(long.as_bytes());
        assert!(cut.len() <= JOURNALED_LINE && cut.len() >= JOURNALED_LINE - 1);
        assert!(cut.chars().all(|c| c == 'é'));
    }
}
