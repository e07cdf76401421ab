//! Finding the lines of a stream file that a regex matches, reading it in large chunks: the
//! regex runs over a whole chunk of lines at once (as ripgrep does), and only the lines it
//! hits are cut out and searched again for every match; lines are counted with memchr only
//! up to each hit. Memory stays one chunk, whatever the file's size.

use std::io::{self, Read};
use std::ops::Range;

use memchr::{memchr, memchr_iter, memrchr};
use regex::bytes::{Regex, RegexBuilder};
use regex_syntax::hir::{
    Class, ClassBytes, ClassBytesRange, ClassUnicode, ClassUnicodeRange, Hir, HirKind, Literal,
};

/// How much of a file is searched at once; also the longest line searched whole (a longer
/// one is searched in pieces of this size, and a match across two pieces is missed).
pub const CHUNK: usize = 2 << 20;

/// Why a pattern cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum PatternError {
    /// The parser's message, on one line (regex's own spans several: pattern, caret, reason).
    #[error("{0}")]
    Syntax(String),
    #[error(
        "it matches a line break, and lines are searched one at a time; match the line's end with `$` instead"
    )]
    Newline,
    #[error("{0}")]
    Build(String),
}

/// Builds the regex grep uses: `^` and `$` at every line's start and end (`\r\n` too, as a
/// pseudo-terminal ends lines), ASCII and Unicode case folded with `ignore_case`.
///
/// Every class is stripped of `\n` (as ripgrep does): `\s`, `[^a]` or `(?s:.)` then never
/// match across lines, which is what a line search means, and is what lets one regex pass
/// cover a whole chunk of lines without a match ever running from line to line (a pattern
/// like `[^x]*y` would otherwise rescan the chunk from every line).
pub fn build(pattern: &str, ignore_case: bool) -> Result<Regex, PatternError> {
    let hir = regex_syntax::ParserBuilder::new()
        .multi_line(true)
        .crlf(true)
        .case_insensitive(ignore_case)
        // As regex's bytes API: `(?-u:\xff)` may match a byte that is not UTF-8.
        .utf8(false)
        .build()
        .parse(pattern)
        .map_err(|err| PatternError::Syntax(one_line(&err.to_string())))?;
    let hir = without_newline(hir)?;
    RegexBuilder::new(&hir.to_string())
        .build()
        .map_err(|err| PatternError::Build(one_line(&err.to_string())))
}

/// `hir` with `\n` taken out of every class; an error for a literal line break.
fn without_newline(hir: Hir) -> Result<Hir, PatternError> {
    let all = |subs: Vec<Hir>| {
        subs.into_iter()
            .map(without_newline)
            .collect::<Result<Vec<_>, _>>()
    };
    Ok(match hir.into_kind() {
        HirKind::Literal(Literal(bytes)) if bytes.contains(&b'\n') => {
            return Err(PatternError::Newline);
        }
        HirKind::Literal(Literal(bytes)) => Hir::literal(bytes),
        HirKind::Class(Class::Unicode(mut class)) => {
            class.difference(&ClassUnicode::new([ClassUnicodeRange::new('\n', '\n')]));
            Hir::class(Class::Unicode(class))
        }
        HirKind::Class(Class::Bytes(mut class)) => {
            class.difference(&ClassBytes::new([ClassBytesRange::new(b'\n', b'\n')]));
            Hir::class(Class::Bytes(class))
        }
        HirKind::Empty => Hir::empty(),
        HirKind::Look(look) => Hir::look(look),
        HirKind::Repetition(mut repetition) => {
            repetition.sub = Box::new(without_newline(*repetition.sub)?);
            Hir::repetition(repetition)
        }
        HirKind::Capture(mut capture) => {
            capture.sub = Box::new(without_newline(*capture.sub)?);
            Hir::capture(capture)
        }
        HirKind::Concat(subs) => Hir::concat(all(subs)?),
        HirKind::Alternation(subs) => Hir::alternation(all(subs)?),
    })
}

/// A parser's message (the pattern, a caret under the fault, the reason) as its reason alone.
fn one_line(message: &str) -> String {
    message
        .lines()
        .rev()
        .find_map(|l| l.trim_start().strip_prefix("error:").map(str::trim))
        .map_or_else(
            || message.lines().map(str::trim).collect::<Vec<_>>().join(" "),
            str::to_string,
        )
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineMatch<'a> {
    /// 1-based.
    pub number: u64,
    /// Where the line (or its piece) starts in the file.
    pub offset: u64,
    /// The line without its `\n` (nor a `\r` before it).
    pub text: &'a [u8],
    /// The matches in `text`, as byte ranges; empty ones (a pattern like `^`) left out.
    pub matches: Vec<Range<usize>>,
    /// The line is longer than [`CHUNK`] and this is one piece of it.
    pub piece: bool,
}

/// Calls `found` for every line of `input` that `regex` matches, in order, reading `chunk`
/// bytes at a time ([`CHUNK`], or small ones for tests); stops at the first error `found`
/// returns. Returns how many lines matched.
pub fn search_with_chunk(
    mut input: impl Read,
    regex: &Regex,
    chunk: usize,
    mut found: impl FnMut(LineMatch<'_>) -> io::Result<()>,
) -> io::Result<u64> {
    let mut buf = vec![0u8; chunk.max(1)];
    let mut filled = 0;
    // The file offset of buf[0], and the number of the line that starts there.
    let mut base = 0u64;
    let mut line = 1u64;
    // buf[0] continues a line cut into pieces.
    let mut continued = false;
    let mut hits = 0u64;
    loop {
        let mut eof = false;
        while filled < buf.len() {
            match input.read(&mut buf[filled..]) {
                Ok(0) => {
                    eof = true;
                    break;
                }
                Ok(n) => filled += n,
                Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
                Err(err) => return Err(err),
            }
        }
        if filled == 0 {
            return Ok(hits);
        }
        // Whole lines only, unless there are none: then a piece of one long line.
        let (end, piece) = match memrchr(b'\n', &buf[..filled]) {
            Some(i) if !eof => (i + 1, false),
            Some(_) => (filled, false),
            None => (filled, !eof || continued),
        };
        let region = &buf[..end];
        let mut counted = 0;
        let mut pos = 0;
        while pos < end {
            let Some(hit) = regex.find_at(region, pos) else {
                break;
            };
            let start = hit.start();
            if start == end && region[end - 1] == b'\n' {
                // An empty match after the last newline: the start of the next chunk's line.
                break;
            }
            let line_start = memrchr(b'\n', &region[pos..start]).map_or(pos, |i| pos + i + 1);
            let line_end = memchr(b'\n', &region[start..]).map_or(end, |i| start + i);
            let mut text = &region[line_start..line_end];
            if line_end < end || eof {
                text = text.strip_suffix(b"\r").unwrap_or(text);
            }
            // The chunk's match may run across lines (`a\sb`); the line's own matches decide.
            let mut any = false;
            let matches: Vec<Range<usize>> = regex
                .find_iter(text)
                .inspect(|_| any = true)
                .map(|m| m.range())
                .filter(|r| !r.is_empty())
                .collect();
            if any {
                line += memchr_iter(b'\n', &region[counted..line_start]).count() as u64;
                counted = line_start;
                hits += 1;
                found(LineMatch {
                    number: line,
                    offset: base + line_start as u64,
                    text,
                    matches,
                    piece: piece || (continued && line_start == 0),
                })?;
            }
            pos = line_end + 1;
        }
        line += memchr_iter(b'\n', &region[counted..end]).count() as u64;
        continued = piece;
        base += end as u64;
        buf.copy_within(end..filled, 0);
        filled -= end;
        if eof && filled == 0 {
            return Ok(hits);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn search_lines(
        input: impl Read,
        regex: &Regex,
        found: impl FnMut(LineMatch<'_>) -> io::Result<()>,
    ) -> io::Result<u64> {
        search_with_chunk(input, regex, CHUNK, found)
    }

    /// Line number, offset, text and matches of a hit.
    type Hit = (u64, u64, Vec<u8>, Vec<Range<usize>>);

    /// Every hit, for one chunk size.
    fn hits(input: &[u8], pattern: &str, chunk: usize) -> Vec<Hit> {
        let regex = build(pattern, false).unwrap();
        let mut all = Vec::new();
        search_with_chunk(input, &regex, chunk, |m| {
            all.push((m.number, m.offset, m.text.to_vec(), m.matches));
            Ok(())
        })
        .unwrap();
        all
    }

    #[test]
    fn finds_lines_with_numbers_offsets_and_ranges_whatever_the_chunk() {
        let input = b"alpha\nbeta error\r\ngamma\nerror error\nlast error";
        let expected = vec![
            (
                2,
                6,
                b"beta error".to_vec(),
                std::iter::once(5..10).collect(),
            ),
            (4, 24, b"error error".to_vec(), vec![0..5, 6..11]),
            (
                5,
                36,
                b"last error".to_vec(),
                std::iter::once(5..10).collect(),
            ),
        ];
        for chunk in [12, 13, 20, 64, CHUNK] {
            assert_eq!(hits(input, "error", chunk), expected, "chunk {chunk}");
        }
    }

    #[test]
    fn anchors_hold_at_every_line_and_matches_never_cross_lines() {
        let input = b"ok\nerror: x\nx error\nfine a\nb\n";
        let numbers =
            |pattern| -> Vec<u64> { hits(input, pattern, 64).iter().map(|h| h.0).collect() };
        assert_eq!(numbers("^error"), [2]);
        assert_eq!(numbers("error$"), [3]);
        assert_eq!(numbers(r"a\sb"), Vec::<u64>::new(), "a\\nb is two lines");
        assert_eq!(
            numbers("^"),
            [1, 2, 3, 4, 5],
            "an empty match selects the line"
        );
        assert!(
            hits(input, "^", 64)[0].3.is_empty(),
            "and highlights nothing"
        );
    }

    #[test]
    fn invalid_utf8_and_escapes_are_searched_as_bytes() {
        let input = b"\xff\xfe bad \xc3 error\n\x1b[31mred\x1b[0m\n";
        assert_eq!(hits(input, "error", 64)[0].0, 1);
        assert_eq!(hits(input, r"(?-u:\xff)", 64)[0].3, vec![0..1]);
        assert_eq!(hits(input, r"31mred", 64)[0].0, 2);
    }

    #[test]
    fn a_line_longer_than_a_chunk_is_searched_in_pieces() {
        let mut input = b"short\n".to_vec();
        input.extend(std::iter::repeat_n(b'x', 50));
        input.extend(b"needle");
        input.extend(std::iter::repeat_n(b'x', 50));
        input.extend(b"\nafter needle\n");
        let regex = build("needle", false).unwrap();
        let mut seen = Vec::new();
        search_with_chunk(&input[..], &regex, 32, |m| {
            seen.push((m.number, m.offset, m.piece));
            Ok(())
        })
        .unwrap();
        assert_eq!(seen, [(2, 6 + 32, true), (3, 6 + 107, false)]);
    }

    #[test]
    fn classes_never_take_a_line_break() {
        let input = b"key:\n  value\nkey:  value\nab\n";
        let numbers =
            |pattern| -> Vec<u64> { hits(input, pattern, 64).iter().map(|h| h.0).collect() };
        assert_eq!(numbers(r"key:\s+value"), [3]);
        assert_eq!(numbers(r"(?s)key:.*value"), [3]);
        assert_eq!(numbers(r"[^x]*b"), [4]);
        assert!(matches!(build("a\nb", false), Err(PatternError::Newline)));
        assert!(matches!(build(r"a\nb", false), Err(PatternError::Newline)));
        let err = build("a(b", false).unwrap_err().to_string();
        assert_eq!(err, "unclosed group");
        // A byte that is not UTF-8 can still be asked for.
        assert!(build(r"(?-u:\xff)", false).is_ok());
    }

    /// A pattern that could run from line to line over a whole chunk (`[^@]` matches a line
    /// break unless rewritten): it matches within lines only, once per line holding an `@`.
    /// (Its cost, each line searched once, is what `scripts/bench-grep.sh` shows.)
    #[test]
    fn a_pattern_with_negated_classes_matches_within_lines() {
        let block = "no match on this line at all\n".repeat(9_999) + "an @ here\n";
        let input = block.repeat(20);
        let regex = build("[^@]*@", false).unwrap();
        assert_eq!(
            search_lines(input.as_bytes(), &regex, |_| Ok(())).unwrap(),
            20
        );
    }

    #[test]
    fn nothing_matched_is_zero_hits_and_case_can_be_ignored() {
        let regex = build("ERROR", false).unwrap();
        assert_eq!(
            search_lines(&b"error\n"[..], &regex, |_| Ok(())).unwrap(),
            0
        );
        let regex = build("ERROR", true).unwrap();
        assert_eq!(
            search_lines(&b"error\nx\n"[..], &regex, |_| Ok(())).unwrap(),
            1
        );
        assert_eq!(search_lines(&b""[..], &regex, |_| Ok(())).unwrap(), 0);
    }
}
