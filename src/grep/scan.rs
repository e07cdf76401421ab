//! grep's selection over one stream: the matching lines (or, with `-v`, the others), and
//! with `-A`/`-B`/`-C` the lines around them and a break between groups that do not touch.
//!
//! Plain searches take [`search`](super::search)'s fast path (the regex over whole chunks);
//! `-v` and context need every line, so they walk every line (a pattern that selects each
//! one, through the same chunked reader) and test it with the regex.

use std::collections::VecDeque;
use std::io::{self, Read};
use std::sync::LazyLock;

use regex::bytes::Regex;

use super::search::{LineMatch, search_with_chunk};

/// What to select and what to show around it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Scan {
    /// `-v`: select the lines that do not match.
    pub invert: bool,
    /// `-B N`: lines shown before each selected line.
    pub before: usize,
    /// `-A N`: lines shown after each selected line.
    pub after: usize,
}

/// One thing to print, in order.
#[derive(Debug)]
pub enum Found<'a> {
    /// A line: selected (`:` in grep's output), or context (`-`).
    Line { line: LineMatch<'a>, selected: bool },
    /// `--`: the next line does not follow the last one shown.
    Break,
}

/// Every line is a "match" of this: how the walk over every line reuses the chunked reader.
static EVERY_LINE: LazyLock<Regex> =
    LazyLock::new(|| super::search::build("^", false).expect("`^` is a valid pattern"));

/// Calls `emit` for what `scan` selects in `input`, in order. `unselect` is asked about each
/// line that would be selected and may take it back (an echo folded into another hit): it
/// is then neither counted nor shown as selected (it can still be context). Returns how
/// many lines were selected.
pub fn scan(
    input: impl Read,
    regex: &Regex,
    scan: Scan,
    chunk: usize,
    mut unselect: impl FnMut(&LineMatch<'_>) -> bool,
    mut emit: impl FnMut(Found<'_>) -> io::Result<()>,
) -> io::Result<u64> {
    let mut selected_lines = 0;
    if scan == Scan::default() {
        search_with_chunk(input, regex, chunk, |line| {
            if unselect(&line) {
                return Ok(());
            }
            selected_lines += 1;
            emit(Found::Line {
                line,
                selected: true,
            })
        })?;
        return Ok(selected_lines);
    }
    let mut context = Context::new(scan);
    search_with_chunk(input, &EVERY_LINE, chunk, |mut line| {
        let matches: Vec<_> = regex.find_iter(line.text).map(|m| m.range()).collect();
        let mut selected = matches.is_empty() == scan.invert;
        line.matches = if scan.invert {
            Vec::new()
        } else {
            matches.into_iter().filter(|r| !r.is_empty()).collect()
        };
        if selected && unselect(&line) {
            selected = false;
        }
        if selected {
            selected_lines += 1;
        } else {
            // A context line highlights nothing: grep's default.
            line.matches.clear();
        }
        context.next(line, selected, &mut emit)
    })?;
    Ok(selected_lines)
}

/// The lines kept back in case a selected line follows, and how many more to show after one.
struct Context {
    scan: Scan,
    held: VecDeque<Held>,
    after_left: usize,
    /// The number of the last line shown.
    last_shown: Option<u64>,
}

/// A line kept for `-B`, owned: the reader's buffer moves on.
struct Held {
    number: u64,
    offset: u64,
    text: Vec<u8>,
    piece: bool,
}

impl Context {
    fn new(scan: Scan) -> Context {
        Context {
            scan,
            held: VecDeque::with_capacity(scan.before),
            after_left: 0,
            last_shown: None,
        }
    }

    fn next(
        &mut self,
        line: LineMatch<'_>,
        selected: bool,
        emit: &mut impl FnMut(Found<'_>) -> io::Result<()>,
    ) -> io::Result<()> {
        if selected {
            let first = self.held.front().map_or(line.number, |h| h.number);
            let context = self.scan.before + self.scan.after > 0;
            if context && self.last_shown.is_some_and(|last| first > last + 1) {
                emit(Found::Break)?;
            }
            for held in std::mem::take(&mut self.held) {
                emit(Found::Line {
                    line: LineMatch {
                        number: held.number,
                        offset: held.offset,
                        text: &held.text,
                        matches: Vec::new(),
                        piece: held.piece,
                    },
                    selected: false,
                })?;
            }
            self.last_shown = Some(line.number);
            self.after_left = self.scan.after;
            return emit(Found::Line { line, selected });
        }
        if self.after_left > 0 {
            self.after_left -= 1;
            self.last_shown = Some(line.number);
            return emit(Found::Line { line, selected });
        }
        if self.scan.before > 0 {
            if self.held.len() == self.scan.before {
                self.held.pop_front();
            }
            self.held.push_back(Held {
                number: line.number,
                offset: line.offset,
                text: line.text.to_vec(),
                piece: line.piece,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grep::search::build;

    /// What grep would print for `input`: `N:text` selected, `N-text` context, `--` breaks.
    fn shown(input: &str, pattern: &str, scan_: Scan) -> Vec<String> {
        let regex = build(pattern, false).unwrap();
        let mut out = Vec::new();
        for chunk in [8, 64] {
            let mut lines = Vec::new();
            scan(
                input.as_bytes(),
                &regex,
                scan_,
                chunk,
                |_| false,
                |found| {
                    lines.push(match found {
                        Found::Break => "--".to_string(),
                        Found::Line { line, selected } => format!(
                            "{}{}{}",
                            line.number,
                            if selected { ':' } else { '-' },
                            String::from_utf8_lossy(line.text)
                        ),
                    });
                    Ok(())
                },
            )
            .unwrap();
            if chunk == 8 {
                out = lines;
            } else {
                assert_eq!(out, lines, "the same whatever the chunk");
            }
        }
        out
    }

    const TEXT: &str = "a\nb\nerr 1\nc\nd\ne\nf\nerr 2\nerr 3\ng\n";

    #[test]
    fn invert_selects_the_other_lines() {
        let none = Scan {
            invert: true,
            ..Scan::default()
        };
        assert_eq!(
            shown(TEXT, "err", none),
            ["1:a", "2:b", "4:c", "5:d", "6:e", "7:f", "10:g"]
        );
    }

    #[test]
    fn context_as_grep_prints_it() {
        let around = Scan {
            before: 1,
            after: 1,
            ..Scan::default()
        };
        assert_eq!(
            shown(TEXT, "err", around),
            [
                "2-b", "3:err 1", "4-c", "--", "7-f", "8:err 2", "9:err 3", "10-g"
            ]
        );
        let after = |after| Scan {
            after,
            ..Scan::default()
        };
        assert_eq!(
            shown(TEXT, "err", after(4)),
            [
                "3:err 1", "4-c", "5-d", "6-e", "7-f", "8:err 2", "9:err 3", "10-g"
            ],
            "groups that touch have no break"
        );
        assert_eq!(
            shown(TEXT, "err", after(3)),
            [
                "3:err 1", "4-c", "5-d", "6-e", "--", "8:err 2", "9:err 3", "10-g"
            ],
        );
        let before = Scan {
            before: 5,
            ..Scan::default()
        };
        assert_eq!(shown(TEXT, "^a", before), ["1:a"], "nothing before line 1");
    }

    #[test]
    fn an_unselected_line_can_still_be_context_and_is_not_counted() {
        let regex = build("err", false).unwrap();
        let around = Scan {
            before: 1,
            ..Scan::default()
        };
        let mut shown = Vec::new();
        let selected = scan(
            TEXT.as_bytes(),
            &regex,
            around,
            64,
            |line| line.text == b"err 2",
            |found| {
                if let Found::Line { line, selected } = found {
                    shown.push((line.number, selected));
                }
                Ok(())
            },
        )
        .unwrap();
        assert_eq!(selected, 2);
        assert_eq!(shown, [(2, false), (3, true), (8, false), (9, true)]);
    }
}
