//! How a matching line is shown: `session/command:stream:line: text` for people, with the
//! matches highlighted on a terminal, or one JSON object for programs.
//!
//! The text is a command's output, so it goes through the sanitizer as the TUI's panes do:
//! nothing a command wrote reaches the terminal as anything but text. A very long line is
//! shown as a window around its first match.

use std::ops::Range;

use serde::Serialize;

use super::search::LineMatch;
use crate::journal::CommandId;
use crate::model::output::LineRenderer;

/// Lines longer than this (in bytes) are shown as a window of about this size.
pub const SHOWN_BYTES: usize = 512;
/// How much of the window comes before the first match.
const CONTEXT_BEFORE: usize = 96;

const COLOR_SOURCE: &str = "\x1b[35m";
const COLOR_PLACE: &str = "\x1b[32m";
const COLOR_MATCH: &str = "\x1b[1;31m";
const RESET: &str = "\x1b[0m";

/// Where a line comes from.
#[derive(Debug, Clone, Copy)]
pub struct Origin<'a> {
    pub command: &'a CommandId,
    pub stream: &'a str,
}

/// `session/01-build`: a command as grep's output names it, made one safe line.
pub fn source(command: &CommandId) -> String {
    format!(
        "{}/{}",
        sanitized(command.session.as_bytes()),
        sanitized(command.dir_name().as_bytes())
    )
}

/// `-c`'s rows: `session/command:N` for each command searched, or `N` alone when only one
/// was (as grep prints a count per file, and no name for a single file).
pub fn count_rows(counts: &[(CommandId, u64)]) -> String {
    match counts {
        [(_, n)] => format!("{n}\n"),
        counts => counts
            .iter()
            .map(|(command, n)| format!("{}:{n}\n", source(command)))
            .collect(),
    }
}

/// The line for people, with a newline: `source:stream:N: text` when `selected`, else
/// (context) `source-stream-N- text`, as grep marks a context line.
pub fn text_line(origin: Origin<'_>, hit: &LineMatch<'_>, color: bool, selected: bool) -> String {
    let parts = text_parts(origin, hit, color, selected);
    format!("{} {}\n", parts.prefix, parts.text)
}

/// A line for people in two parts, so that a column of them can be lined up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextParts {
    /// `source:stream:N:` (coloured when asked).
    pub prefix: String,
    /// Its width in terminal columns, colours left out.
    pub width: usize,
    /// The line as shown, without its newline.
    pub text: String,
}

pub fn text_parts(
    origin: Origin<'_>,
    hit: &LineMatch<'_>,
    color: bool,
    selected: bool,
) -> TextParts {
    // A line that moves the cursor back over itself (a full-screen program's redraw, a
    // progress bar's `\r`) would show only what was drawn last, maybe without the match:
    // the part drawn where the first match is is shown instead, `…` around it.
    let row = drawn_row(hit.text, hit.matches.first());
    let text = &hit.text[row.clone()];
    let matches: Vec<Range<usize>> = hit
        .matches
        .iter()
        .filter(|r| r.start >= row.start && r.end <= row.end)
        .map(|r| r.start - row.start..r.end - row.start)
        .collect();
    let (window, before, after) = window(text, matches.first());
    let mut shown = String::new();
    if before || row.start > 0 {
        shown.push('…');
    }
    shown.push_str(&highlighted(
        &text[window.clone()],
        matches.iter().map(|r| {
            r.start.clamp(window.start, window.end) - window.start
                ..r.end.clamp(window.start, window.end) - window.start
        }),
        color,
    ));
    if after {
        shown.push_str(&format!(
            "… [{} more bytes]",
            hit.text.len() - row.start - window.end
        ));
    } else if row.end < hit.text.len() {
        shown.push('…');
    }
    let source = source(origin.command);
    let sep = if selected { ':' } else { '-' };
    let place = format!("{}{sep}{}", origin.stream, hit.number);
    let plain = format!("{source}{sep}{place}{sep}");
    TextParts {
        width: crate::model::output::text_width(&plain),
        prefix: if color {
            format!("{COLOR_SOURCE}{source}{RESET}{sep}{COLOR_PLACE}{place}{RESET}{sep}")
        } else {
            plain
        },
        text: shown,
    }
}

/// Lines held back until a batch of them is known, then printed with their text starting
/// at one column: that of the widest prefix so far (on a terminal, where people read the
/// lines; a pipe gets grep's format, unpadded). A batch is at most [`Aligned::BATCH`] lines,
/// so memory stays bounded; a later batch with a wider prefix starts its text further right.
#[derive(Debug, Default)]
pub struct Aligned {
    held: Vec<Held>,
    width: usize,
}

#[derive(Debug)]
enum Held {
    Line(TextParts),
    /// `--`, printed as it is.
    Break,
}

impl Aligned {
    pub const BATCH: usize = 1000;

    /// Holds `parts`; returns what is to be printed when the batch is full.
    pub fn line(&mut self, parts: TextParts) -> Option<String> {
        self.width = self.width.max(parts.width);
        self.held.push(Held::Line(parts));
        (self.held.len() >= Self::BATCH).then(|| self.flush())
    }

    pub fn group_break(&mut self) {
        self.held.push(Held::Break);
    }

    /// What is held, lined up, and nothing held any more.
    pub fn flush(&mut self) -> String {
        let mut out = String::new();
        for held in self.held.drain(..) {
            match held {
                Held::Break => out.push_str("--\n"),
                Held::Line(parts) => {
                    out.push_str(&parts.prefix);
                    out.push_str(&" ".repeat(self.width - parts.width + 1));
                    out.push_str(&parts.text);
                    out.push('\n');
                }
            }
        }
        out
    }
}

/// What a terminal would show for `bytes`, as plain text: escape sequences applied or
/// dropped, controls and invalid UTF-8 made visible and harmless.
pub fn sanitized(bytes: &[u8]) -> String {
    highlighted(bytes, std::iter::empty(), false)
}

/// `bytes` sanitized as one line, as [`sanitized`] shows it, with what the bytes in `matches`
/// print wrapped in colour when `color`. The line is rendered whole, not piece by piece, so
/// a match that splits an escape sequence never shows the sequence's body: what a match
/// entirely inside one prints is nothing, and nothing is highlighted.
fn highlighted(bytes: &[u8], matches: impl Iterator<Item = Range<usize>>, color: bool) -> String {
    // Printable ASCII is shown as itself: the common case skips the terminal emulation.
    if bytes.iter().all(|b| (0x20..0x7f).contains(b)) {
        let mut shown = String::with_capacity(bytes.len());
        let mut at = 0;
        for range in matches.filter(|r| color && !r.is_empty()) {
            if range.start < at {
                continue;
            }
            shown.extend(bytes[at..range.start].iter().map(|&b| char::from(b)));
            shown.push_str(COLOR_MATCH);
            shown.extend(bytes[range.clone()].iter().map(|&b| char::from(b)));
            shown.push_str(RESET);
            at = range.end;
        }
        shown.extend(bytes[at..].iter().map(|&b| char::from(b)));
        return shown;
    }
    let mut renderer = LineRenderer::new();
    let mut at = 0;
    for range in matches.filter(|r| color && !r.is_empty()) {
        if range.start < at {
            continue;
        }
        renderer.feed(&bytes[at..range.start]);
        renderer.set_highlight(true);
        renderer.feed(&bytes[range.clone()]);
        renderer.set_highlight(false);
        at = range.end;
    }
    renderer.feed(&bytes[at..]);
    let mut shown = String::new();
    for span in renderer.finish() {
        if span.style.highlight {
            shown.push_str(COLOR_MATCH);
            shown.push_str(&span.text);
            shown.push_str(RESET);
        } else {
            shown.push_str(&span.text);
        }
    }
    shown
}

/// Where in `text` the part that holds `first` was drawn: between the moves that take the
/// cursor elsewhere (a carriage return or a move to the first column, CSI `G`; a move up,
/// down or to a place: CSI `A` `B` `E` `F` `H` `f` `d`) around it; all of `text` when there
/// is no match or no such move.
fn drawn_row(text: &[u8], first: Option<&Range<usize>>) -> Range<usize> {
    let Some(first) = first else {
        return 0..text.len();
    };
    let (mut start, mut end) = (0, text.len());
    let mut at = 0;
    while at < text.len() {
        let (len, moves) = match text[at] {
            b'\r' => (1, true),
            0x1b if text.get(at + 1) == Some(&b'[') => {
                let len = text[at + 2..]
                    .iter()
                    .position(|b| (0x40..=0x7e).contains(b))
                    .map_or(text.len() - at, |p| p + 3);
                let moves = match text.get(at + len - 1) {
                    Some(b'A' | b'B' | b'E' | b'F' | b'H' | b'f' | b'd') => true,
                    // To the first column, as a carriage return (`readline.cursorTo(0)`, a
                    // progress bar's redraw); a move further along spaces words (Claude
                    // Code's) and stays in the row.
                    // The column is the first parameter, as the renderer reads it (none: 1);
                    // a private marker or an intermediate makes it some other sequence.
                    Some(b'G') => {
                        let params = &text[at + 2..at + len - 1];
                        let first = params.split(|&b| b == b';' || b == b':').next();
                        let column = match first.unwrap_or_default() {
                            b"" => Some(1),
                            digits => std::str::from_utf8(digits)
                                .ok()
                                .and_then(|c| c.parse::<u32>().ok()),
                        };
                        params
                            .iter()
                            .all(|&b| b.is_ascii_digit() || b == b';' || b == b':')
                            && column.is_some_and(|c| c <= 1)
                    }
                    _ => false,
                };
                (len, moves)
            }
            _ => (1, false),
        };
        if moves {
            if at + len <= first.start {
                start = at + len;
            } else if at >= first.end.max(first.start + 1) {
                end = at;
                break;
            }
        }
        at += len;
    }
    start..end.max(start)
}

/// The part of `text` to show: all of it when short, else a window of about
/// [`SHOWN_BYTES`] starting a little before `first`, on character boundaries; and whether
/// something was left out before and after it.
fn window(text: &[u8], first: Option<&Range<usize>>) -> (Range<usize>, bool, bool) {
    if text.len() <= SHOWN_BYTES {
        return (0..text.len(), false, false);
    }
    let anchor = first.map_or(0, |r| r.start);
    let mut start = anchor.saturating_sub(CONTEXT_BEFORE);
    let mut end = (start + SHOWN_BYTES).min(text.len());
    // Never start or end inside a UTF-8 character (at most 3 continuation bytes).
    for _ in 0..3 {
        if start > 0 && is_continuation(text[start]) {
            start -= 1;
        }
        if end < text.len() && is_continuation(text[end]) {
            end += 1;
        }
    }
    (start..end, start > 0, end < text.len())
}

fn is_continuation(byte: u8) -> bool {
    byte & 0xC0 == 0x80
}

/// One match for programs: `tether grep --json`.
#[derive(Debug, Serialize)]
pub struct JsonMatch<'a> {
    pub session: &'a str,
    /// The command's directory in the session (`01-build`).
    pub command: String,
    pub stream: &'a str,
    /// 1-based line number in the stream.
    pub line: u64,
    /// Where the line starts in the stream file, in bytes.
    pub offset: u64,
    /// The raw line, invalid UTF-8 replaced by U+FFFD (written through
    /// `model::output::json`, which escapes every control and bidi character).
    pub text: String,
    /// Byte ranges of the matches within the raw line (not within `text`, whose
    /// replacements may differ in length), each `{"start": S, "end": E}` as serde writes a
    /// `Range`.
    pub matches: Vec<Range<usize>>,
    /// The line was longer than the search chunk: this is a piece of it.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub piece: bool,
    /// A line around a selected one (`-A`, `-B`, `-C`), not selected itself.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub context: bool,
}

pub fn json_line(origin: Origin<'_>, hit: &LineMatch<'_>, selected: bool) -> String {
    let record = JsonMatch {
        session: &origin.command.session,
        command: origin.command.dir_name(),
        stream: origin.stream,
        line: hit.number,
        offset: hit.offset,
        text: String::from_utf8_lossy(hit.text).into_owned(),
        matches: hit.matches.clone(),
        piece: hit.piece,
        context: !selected,
    };
    // Serializing plain strings and numbers cannot fail.
    let json = crate::model::output::json::to_vec(&record, false).unwrap_or_default();
    let mut line = String::from_utf8(json).unwrap_or_default();
    line.push('\n');
    line
}

#[cfg(test)]
mod tests {
    use std::sync::LazyLock;

    use super::*;

    fn hit<'a>(text: &'a [u8], matches: &[(usize, usize)]) -> LineMatch<'a> {
        LineMatch {
            number: 7,
            offset: 100,
            text,
            matches: matches.iter().map(|&(start, end)| start..end).collect(),
            piece: false,
        }
    }

    static COMMAND: LazyLock<CommandId> = LazyLock::new(|| CommandId::new("s1", 1, "make"));
    static ORIGIN: LazyLock<Origin<'static>> = LazyLock::new(|| Origin {
        command: &COMMAND,
        stream: "stdout",
    });

    #[test]
    fn plain_lines_carry_their_origin_and_no_escape() {
        let text = b"\x1b]0;pwned\x07\x1b[31mred error\x1b[0m \xff";
        let line = text_line(*ORIGIN, &hit(text, &[(19, 24)]), false, true);
        assert_eq!(line, "s1/01-make:stdout:7: red error \u{fffd}\n");
        assert!(!line.contains('\x1b'));
    }

    #[test]
    fn matches_are_highlighted_on_a_terminal_and_only_there() {
        let line = text_line(*ORIGIN, &hit(b"an error here", &[(3, 8)]), true, true);
        assert!(line.contains("\x1b[1;31merror\x1b[0m here"), "{line:?}");
        assert!(line.starts_with("\x1b[35ms1/01-make\x1b[0m:\x1b[32mstdout:7\x1b[0m: an "));
    }

    #[test]
    fn a_match_inside_an_escape_sequence_never_shows_its_body() {
        let text = b"copy \x1b]52;c;cHduZWQ=\x07\x1b[2Jdone";
        let escapes = [(5, 6), (21, 22)];
        let colored = text_line(*ORIGIN, &hit(text, &escapes), true, true);
        let plain = text_line(*ORIGIN, &hit(text, &escapes), false, true);
        assert_eq!(plain, "s1/01-make:stdout:7: copy done\n");
        assert!(colored.ends_with(": copy done\n"), "{colored:?}");
        // A match across an escape highlights what it prints, and only that.
        let across = text_line(*ORIGIN, &hit(text, &[(2, 27)]), true, true);
        assert!(
            across.ends_with(": co\x1b[1;31mpy do\x1b[0mne\n"),
            "{across:?}"
        );
    }

    proptest::proptest! {
        /// Highlighting adds colour codes and nothing else: the line without them is the
        /// line shown without colour, whatever the bytes and wherever the matches fall.
        #[test]
        fn highlighting_only_adds_colour(
            bytes in proptest::collection::vec(
                proptest::prop_oneof![
                    proptest::sample::select(b"\x1b[]P\\;0123mJKc\x07\x9c\r\x08\xff\xc3\xa9 a".to_vec()),
                    proptest::num::u8::ANY,
                ],
                0..80,
            ),
            cuts in proptest::collection::vec(0usize..80, 0..8),
        ) {
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(bytes.len())).collect();
            cuts.sort_unstable();
            let ranges: Vec<Range<usize>> = cuts.chunks_exact(2).map(|c| c[0]..c[1]).collect();
            let colored = highlighted(&bytes, ranges.iter().cloned(), true);
            let plain = highlighted(&bytes, ranges.iter().cloned(), false);
            proptest::prop_assert_eq!(colored.replace(COLOR_MATCH, "").replace(RESET, ""), plain);
        }
    }

    #[test]
    fn long_lines_show_a_window_around_the_first_match() {
        let mut text = "é".repeat(1000).into_bytes();
        text.extend(b"needle");
        text.extend("ü".repeat(1000).into_bytes());
        let line = text_line(*ORIGIN, &hit(&text, &[(2000, 2006)]), false, true);
        assert!(line.contains("…éé"), "{line}");
        assert!(line.contains("needleüü"), "{line}");
        assert!(line.trim_end().ends_with("more bytes]"), "{line}");
        assert!(
            !line.contains('\u{fffd}'),
            "cut on character boundaries: {line}"
        );
        assert!(line.len() < 2 * SHOWN_BYTES, "{}", line.len());
    }

    #[test]
    fn aligned_lines_start_their_text_at_one_column() {
        let short = CommandId::new("s1", 1, "ok");
        let long = CommandId::new("s1", 12, "a-longer-name");
        let origin = |command| Origin {
            command,
            stream: "stdout",
        };
        let mut aligned = Aligned::default();
        let mut hit7 = hit("构建 error".as_bytes(), &[]);
        hit7.number = 7;
        let mut hit1234 = hit(b"error two", &[]);
        hit1234.number = 1234;
        assert_eq!(
            aligned.line(text_parts(origin(&short), &hit7, false, true)),
            None
        );
        aligned.group_break();
        aligned.line(text_parts(origin(&long), &hit1234, false, false));
        let out = aligned.flush();
        let lines: Vec<&str> = out.lines().collect();
        let long_prefix = "s1/12-a-longer-name-stdout-1234-";
        let pad = " ".repeat(long_prefix.len() - "s1/01-ok:stdout:7:".len() + 1);
        assert_eq!(lines[0], format!("s1/01-ok:stdout:7:{pad}构建 error"));
        assert_eq!(lines[1], "--");
        assert_eq!(lines[2], format!("{long_prefix} error two"));
        assert_eq!(aligned.flush(), "", "nothing held twice");
    }

    /// A line of Claude Code's terminal (as recorded): rows of a redraw joined by cursor
    /// moves. What a terminal shows of it last is its bottom row; the row with the match is
    /// what grep shows.
    #[test]
    fn a_move_to_the_first_column_is_a_redraw_and_a_move_along_is_not() {
        // `npm ERR fetch` drawn over from the first column: the hit shows what was drawn
        // where the match is, as after a carriage return.
        for redraw in ["\x1b[1G", "\x1b[G", "\x1b[0G", "\x1b[1;5G", "\x1b[;G"] {
            let text = format!("npm ERR fetch{redraw}\x1b[0Kdone");
            let hit = hit(text.as_bytes(), &[(4, 7)]);
            assert_eq!(
                drawn_row(hit.text, hit.matches.first()),
                0..13,
                "{redraw:?}"
            );
        }
        // Not a move to the first column: a sign, a private marker, a column further on.
        for other in ["\x1b[+1G", "\x1b[?1G", "\x1b[10G", "\x1b[99999999999G"] {
            let text = format!("npm ERR fetch{other}done");
            let hit = hit(text.as_bytes(), &[(4, 7)]);
            assert_eq!(
                drawn_row(hit.text, hit.matches.first()),
                0..text.len(),
                "{other:?}"
            );
        }
        // Claude Code spaces its words by moving along the row: one row, whole.
        let text = b"Bash(echo UNIQUE-LINE-42;\x1b[29Gecho\x1b[34Gsecond-line-77)";
        let hit = hit(text, &[(10, 24)]);
        assert_eq!(drawn_row(hit.text, hit.matches.first()), 0..text.len());
    }

    #[test]
    fn a_redraw_shows_the_row_drawn_where_the_match_is() {
        let text = b"\x1b[2A\r\xe2\x97\x8f All done.\x1b[1B\r\xe2\x94\x80\xe2\x94\x80\x1b[1B\r> ";
        let at = text.windows(8).position(|w| w == b"All done").unwrap();
        let line = text_line(*ORIGIN, &hit(text, &[(at, at + 8)]), false, true);
        assert_eq!(line, "s1/01-make:stdout:7: …● All done.…\n");
        // A progress bar: the step that matched.
        let bar = b"10% copying\r55% copying\r100% done";
        let line = text_line(*ORIGIN, &hit(bar, &[(12, 15)]), false, true);
        assert_eq!(line, "s1/01-make:stdout:7: …55% copying…\n");
        // No move: the line as a terminal shows it.
        let plain = text_line(*ORIGIN, &hit(b"a \x1b[31merror", &[(7, 12)]), false, true);
        assert_eq!(plain, "s1/01-make:stdout:7: a error\n");
    }

    #[test]
    fn json_keeps_the_raw_ranges() {
        let line = json_line(*ORIGIN, &hit(b"a \xff error", &[(5, 10)]), true);
        let value: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(value["text"], "a \u{fffd} error");
        assert_eq!(value["matches"][0]["start"], 5);
        assert_eq!(value["line"], 7);
        assert_eq!(value["offset"], 100);
        assert!(value.get("piece").is_none());
    }
}
