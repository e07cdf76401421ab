//! Turns the raw bytes of one output line into what a terminal would show for it, keeping only
//! printable text and styles. This is a security boundary: whatever a command writes, nothing
//! in a rendered line can move the operator's cursor, retitle the window, write the clipboard,
//! or otherwise reach the terminal as anything but text.
//!
//! Each line is rendered on its own, from a fresh parser, so an unterminated escape sequence
//! can swallow at most the rest of its own line.

use vte::{Params, Parser, Perform};

use super::cells::LineCells;
use super::sgr::apply_sgr;
use super::style::{Style, StyledLine, is_bidi_control, is_control};
use super::width::char_width;

/// Renders the bytes of one output line (without its trailing '\n') as a terminal would show it.
pub fn render_line(bytes: &[u8]) -> StyledLine {
    render_line_with_pen(Style::default(), bytes).0
}

/// Renders one line starting with `pen`, the style the line before left in effect (a
/// terminal carries colours over line breaks); returns the line and the style it leaves.
pub fn render_line_with_pen(pen: Style, bytes: &[u8]) -> (StyledLine, Style) {
    let mut renderer = LineRenderer::with_pen(pen);
    renderer.feed(bytes);
    renderer.finish_with_pen()
}

/// Streaming form: feeding the same bytes in any chunking gives the same result as render_line.
#[derive(Default)]
pub struct LineRenderer {
    parser: Parser,
    screen: Screen,
    /// The start of a UTF-8 character that the last feed cut short (up to three bytes), held
    /// back for the next.
    held: Vec<u8>,
}

impl LineRenderer {
    pub fn new() -> Self {
        Self::default()
    }

    /// A renderer whose current style starts as `pen`.
    pub fn with_pen(pen: Style) -> Self {
        let mut renderer = Self::default();
        renderer.screen.style = pen;
        renderer
    }

    pub fn feed(&mut self, mut bytes: &[u8]) {
        // vte's own handling of a character split between two feeds can skip the bytes after
        // it (vte 0.15 `advance_partial_utf8`, alacritty/vte#159), so the parser is only ever
        // handed feeds that end on a character boundary. Holding bytes back changes no result:
        // the parser sees the same bytes in the same order.
        while !self.held.is_empty() {
            if bytes.is_empty() {
                return;
            }
            let (head, rest) = bytes.split_at(bytes.len().min(3));
            let mut joined = std::mem::take(&mut self.held);
            joined.extend_from_slice(head);
            self.advance_holding_back(&joined);
            bytes = rest;
        }
        self.advance_holding_back(bytes);
    }

    /// Whether what the bytes fed from now on print is highlighted (a match `tether grep`
    /// found in them). Bytes that print nothing, such as an escape sequence's, highlight
    /// nothing; the command's own SGR codes cannot turn it on or off.
    pub fn set_highlight(&mut self, on: bool) {
        self.screen.highlight = on;
    }

    pub fn finish(self) -> StyledLine {
        self.finish_with_pen().0
    }

    /// The line, and the style in effect at its end.
    pub fn finish_with_pen(mut self) -> (StyledLine, Style) {
        // CAN aborts any sequence in progress and shows a UTF-8 character cut short by the end
        // of the line as U+FFFD, without printing anything itself.
        let mut last = std::mem::take(&mut self.held);
        last.push(CAN);
        self.parser.advance(&mut self.screen, &last);
        (self.screen.cells.into_line(), self.screen.style)
    }

    fn advance_holding_back(&mut self, bytes: &[u8]) {
        let (now, later) = bytes.split_at(bytes.len() - incomplete_utf8_suffix(bytes));
        self.advance_replacing_invalid(now);
        self.held = later.to_vec();
    }

    /// Advances the parser over `bytes`, which end on a character boundary, with each
    /// stretch that is not UTF-8 (a byte 0x80..=0xFF out of place, a character cut short)
    /// handed over as one U+FFFD, so that vte is only ever given valid UTF-8.
    ///
    /// It shows the same as vte would: vte too prints one U+FFFD for each such stretch
    /// (the same maximal invalid prefixes `utf8_chunks` yields), but it looks for the next
    /// ESC from each one to the end of what it was given, so a line of 64 KiB of 0xFF took
    /// it seconds. Except a lone byte 0x80..=0x9F: vte takes that for an 8-bit C1 control
    /// and hands it to `execute`, where it cannot be told from a C1 control correctly
    /// encoded as U+0080..=U+009F (which must vanish); on its own it is invalid UTF-8 and
    /// must show like any other, as it does here.
    ///
    /// Only what vte prints changes: a stretch's place is a character boundary for vte too
    /// (escape sequences begin and end with ASCII), and inside a sequence vte ignores the
    /// replacement's bytes as it ignored the stretch's, except that a DCS string ends at an
    /// 8-bit ST (0x9C), which it is still given.
    fn advance_replacing_invalid(&mut self, bytes: &[u8]) {
        let mut from = 0;
        let mut at = 0;
        for chunk in bytes.utf8_chunks() {
            at += chunk.valid().len();
            let invalid = chunk.invalid();
            if !invalid.is_empty() {
                self.parser.advance(&mut self.screen, &bytes[from..at]);
                // In a DCS string vte passes bytes on one by one (no UTF-8 there, nothing
                // slow), and an 8-bit ST (0x9C) in them, alone or within a character cut
                // short (`\xe2\x9c`), ends the string: it gets them as they are.
                let shown: &[u8] = if self.screen.in_dcs_string {
                    invalid
                } else {
                    REPLACEMENT
                };
                self.parser.advance(&mut self.screen, shown);
                from = at + invalid.len();
            }
            at += invalid.len();
        }
        self.parser.advance(&mut self.screen, &bytes[from..]);
    }
}

/// A CSI sequence's first parameter; 0 when it has none.
fn first_param(params: &Params) -> usize {
    params
        .iter()
        .next()
        .and_then(|p| p.first().copied())
        .map_or(0, usize::from)
}

/// The UTF-8 encoding of U+FFFD, what a terminal shows for bytes that are not UTF-8.
const REPLACEMENT: &[u8] = "\u{fffd}".as_bytes();

/// How many bytes at the end of `bytes` are the start of a UTF-8 character that more bytes
/// could still complete (0 to 3).
pub(crate) fn incomplete_utf8_suffix(bytes: &[u8]) -> usize {
    for len in 1..=bytes.len().min(3) {
        let suffix = &bytes[bytes.len() - len..];
        match suffix[0] {
            0x80..=0xbf => continue,
            0xc2..=0xf4 => {
                let incomplete =
                    matches!(std::str::from_utf8(suffix), Err(e) if e.error_len().is_none());
                return if incomplete { len } else { 0 };
            }
            _ => return 0,
        }
    }
    0
}

const CAN: u8 = 0x18;

/// What the parser's actions do to the line: everything not handled here is dropped.
#[derive(Default)]
struct Screen {
    cells: LineCells,
    style: Style,
    /// Inside a DCS string, whose contents are dropped.
    in_dcs_string: bool,
    highlight: bool,
}

impl Perform for Screen {
    fn print(&mut self, c: char) {
        // The parser sends most controls to `execute`, but DEL comes here: every character
        // is checked, since this is the only way text gets into a line.
        if is_control(c) {
            if c < ' ' {
                self.execute(c as u8);
            }
            return;
        }
        if is_bidi_control(c) || self.cells.extend_cluster(c) {
            return;
        }
        match char_width(c) {
            0 => self.cells.attach(c),
            width => {
                let style = Style {
                    highlight: self.highlight,
                    ..self.style
                };
                self.cells.put(c, width, style)
            }
        }
    }

    fn execute(&mut self, byte: u8) {
        match byte {
            b'\r' => self.cells.carriage_return(),
            b'\t' => self.cells.tab(),
            0x08 => self.cells.backspace(),
            _ => {}
        }
    }

    fn hook(&mut self, _params: &Params, _intermediates: &[u8], _ignore: bool, _action: char) {
        self.in_dcs_string = true;
    }

    fn unhook(&mut self) {
        self.in_dcs_string = false;
    }

    fn csi_dispatch(&mut self, params: &Params, intermediates: &[u8], ignore: bool, action: char) {
        // Private and intermediate forms (`CSI ? ... K`, `CSI > ... m`) mean something else.
        if ignore || !intermediates.is_empty() {
            return;
        }
        match action {
            'm' => apply_sgr(&mut self.style, params),
            'K' => {
                let mode = params.iter().next().and_then(|p| p.first().copied());
                self.cells.erase(mode.unwrap_or(0));
            }
            // Moves along the row: a terminal UI (Claude Code's) draws the spaces between
            // words by them, and without them `echo hi` would read `echohi`. Moves to other
            // rows are dropped: the line has one.
            'C' => self.cells.forward(first_param(params).max(1)),
            'G' => self.cells.move_to_column(first_param(params).max(1) - 1),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::style::{Color, Span, plain_text};
    use proptest::prelude::*;

    fn text(bytes: &[u8]) -> String {
        plain_text(&render_line(bytes))
    }

    fn styled(fg: Color, bold: bool) -> Style {
        Style {
            fg,
            bold,
            ..Style::default()
        }
    }

    #[test]
    fn plain_text_passes_through() {
        assert_eq!(
            render_line(b"hello world"),
            vec![Span::plain("hello world")]
        );
        assert_eq!(text("héllo 中文 😀".as_bytes()), "héllo 中文 😀");
    }

    #[test]
    fn empty_and_invisible_lines_have_no_spans() {
        assert!(render_line(b"").is_empty());
        assert!(render_line(b"\x1b[31m\x1b]0;title\x07\x07").is_empty());
    }

    #[test]
    fn sgr_styles_spans() {
        let line = render_line(b"a\x1b[1;31mred\x1b[0m b\x1b[38;5;208mc\x1b[38;2;1;2;3md");
        assert_eq!(
            line,
            vec![
                Span::plain("a"),
                Span::new("red", styled(Color::Indexed(1), true)),
                Span::plain(" b"),
                Span::new("c", styled(Color::Indexed(208), false)),
                Span::new("d", styled(Color::Rgb(1, 2, 3), false)),
            ]
        );
    }

    #[test]
    fn sgr_with_private_marker_is_not_sgr() {
        assert_eq!(render_line(b"\x1b[>4;2mx"), vec![Span::plain("x")]);
    }

    #[test]
    fn carriage_return_overwrites() {
        assert_eq!(text(b"50%\r100%"), "100%");
        assert_eq!(text(b"abcdef\rXY"), "XYcdef");
        assert_eq!(text(b"done\r"), "done");
        // A progress bar that clears the rest of the line as it redraws.
        assert_eq!(text(b"[#####   ] long text\r\x1b[K[###]"), "[###]");
        assert_eq!(text(b"abcdef\r\x1b[2KXY"), "XY");
    }

    #[test]
    fn carriage_return_overwrites_keeping_new_style() {
        let line = render_line(b"\x1b[31mabc\x1b[0m\rX");
        assert_eq!(
            line,
            vec![
                Span::plain("X"),
                Span::new("bc", styled(Color::Indexed(1), false))
            ]
        );
    }

    #[test]
    fn tabs_and_backspace() {
        assert_eq!(text(b"a\tb"), "a       b");
        assert_eq!(text(b"12345678\tb"), "12345678        b");
        assert_eq!(text(b"ab\x08X"), "aX");
        assert_eq!(text(b"\x08\x08a"), "a");
    }

    #[test]
    fn wide_characters_take_two_columns() {
        assert_eq!(text("中文\rab".as_bytes()), "ab文");
        assert_eq!(text("中文\rx".as_bytes()), "x 文");
        assert_eq!(text("ab\r中".as_bytes()), "中");
        assert_eq!(text("😀\t|".as_bytes()), "😀      |");
    }

    #[test]
    fn clear_screen_and_cursor_moves_are_dropped() {
        assert_eq!(text(b"\x1b[2Ja\x1b[Hb\x1b[3;4Hc"), "abc");
        // Moves along the row (`C`, `G`) are kept: `tests::moves_along_the_row_...`.
        assert_eq!(text(b"a\x1b[2Ab\x1b[1Dd\x1b[3Be"), "abde");
        assert_eq!(text(b"\x1b[?1049h\x1b[?25lx\x1b[1;24r\x1b[?1049l"), "x");
        assert_eq!(text(b"a\x1b[6nb\x1b[cc\x1b[0;0;0tz"), "abcz");
    }

    /// Claude Code draws a tool call's words apart by moves to a column (recorded:
    /// tests/fixtures/claude-code-tui), and sometimes by cursor-forward.
    #[test]
    fn moves_along_the_row_are_the_spaces_they_skip() {
        let row = b"\xe2\x97\x8f\x1b[3G\x1b[39m\x1b[1mBash\x1b[22m(echo UNIQUE-LINE-42;\x1b[29Gecho\x1b[34Gsecond-line-77)";
        assert_eq!(
            text(row),
            "\u{25cf} Bash(echo UNIQUE-LINE-42; echo second-line-77)"
        );
        assert_eq!(text(b"Bash(echo\x1b[1Chi)"), "Bash(echo hi)");
        assert_eq!(
            text(b"a\x1b[Cb\x1b[0Cc"),
            "a b c",
            "no count, or 0: one column"
        );
        assert_eq!(text(b"abc\x1b[Gx"), "xbc", "no column: the first");
        // A move forward with nothing after it adds nothing.
        assert_eq!(text(b"done\x1b[5C"), "done");
    }

    #[test]
    fn osc_is_dropped() {
        // Clipboard write, BEL- and ST-terminated.
        assert_eq!(text(b"a\x1b]52;c;ZXZpbA==\x07b"), "ab");
        assert_eq!(text(b"a\x1b]52;c;ZXZpbA==\x1b\\b"), "ab");
        // Window title.
        assert_eq!(text(b"\x1b]0;pwned\x07x\x1b]2;t\x1b\\y"), "xy");
        // Hyperlink: the text stays, the link goes.
        assert_eq!(
            text(b"see \x1b]8;;https://evil.example/\x1b\\the docs\x1b]8;;\x1b\\."),
            "see the docs."
        );
        // An OSC left open swallows the rest of its line only.
        assert_eq!(text(b"a\x1b]0;never ends"), "a");
    }

    #[test]
    fn dcs_apc_pm_sos_are_dropped() {
        assert_eq!(text(b"a\x1bP1$tx\x1b\\b"), "ab");
        assert_eq!(text(b"a\x1bPq#0;2;0;0;0#0~~@@\x1b\\b"), "ab");
        assert_eq!(text(b"a\x1b_Gf=100;AAAA\x1b\\b"), "ab");
        assert_eq!(text(b"a\x1b^pm\x1b\\b\x1bXsos\x1b\\c"), "abc");
    }

    #[test]
    fn other_escapes_and_bells_are_dropped() {
        assert_eq!(text(b"a\x07b\x1bcc\x1b7d\x1b8e\x1b(0f\x1b=g"), "abcdefg");
        assert_eq!(text(b"\x00\x01\x0b\x0c\x0e\x1a\x1c\x7fx"), "x");
        assert_eq!(
            text(b"bare escape at the end\x1b"),
            "bare escape at the end"
        );
    }

    #[test]
    fn c1_controls_are_dropped() {
        // Correctly encoded as U+0080..U+009F, they are controls: none does anything.
        assert_eq!(text("a\u{9b}2Jb\u{85}\u{9c}".as_bytes()), "a2Jb");
        assert_eq!(text(b"a\xc2\x9b2J\xc2\x9d0;t\xc2\x9cb"), "a2J0;tb");
    }

    #[test]
    fn an_st_within_a_character_cut_short_ends_a_dcs_string_as_in_vte() {
        // Found by what_is_not_utf8_shows_as_vte_would_show_it: ESC P @ opens a DCS string,
        // and 0x9C, though the second byte of a cut-short character, ends it.
        let bytes = b"\x1bP@\xe2\x9c x";
        assert_eq!(render_line(bytes), rendered_by_vte(bytes));
        assert_eq!(plain_text(&render_line(bytes)), " x");
    }

    #[test]
    fn lone_c1_bytes_show_as_invalid_utf8() {
        // 0x9b (CSI) and friends as raw bytes: on their own they are not UTF-8 at all.
        assert_eq!(text(b"\x9b"), "\u{fffd}");
        assert_eq!(text(b"\x9d"), "\u{fffd}");
        assert_eq!(text(b"a\x9b2Jb"), "a\u{fffd}2Jb");
        assert_eq!(
            text(b"a\x9d0;t\x9cb\x90q\x9c\x85c"),
            "a\u{fffd}0;t\u{fffd}b\u{fffd}q\u{fffd}\u{fffd}c"
        );
        assert_eq!(text(b"\x80\x9f"), "\u{fffd}\u{fffd}");
        // After a character, an escape sequence, or a character cut short.
        assert_eq!(text(b"\xc3\xa9\x9b"), "é\u{fffd}");
        assert_eq!(text(b"\x1b[1m\x9bx"), "\u{fffd}x");
        assert_eq!(text(b"\xe2\x41\x9b"), "\u{fffd}A\u{fffd}");
        // Inside an escape sequence it is still part of the sequence, as before.
        assert_eq!(text(b"a\x1b]0;\x9btitle\x07b"), "ab");
        assert_eq!(text(b"a\x1bPq\x9bdata\x9cb"), "ab");
        // Split between feeds, before or after it.
        let mut renderer = LineRenderer::new();
        for part in [&b"a\xc4"[..], b"\x9b\x9b", b"b"] {
            renderer.feed(part);
        }
        assert_eq!(plain_text(&renderer.finish()), "a\u{11b}\u{fffd}b");
    }

    #[test]
    fn characters_with_continuation_bytes_below_0xa0_are_text() {
        // é is C3 A9, ě is C4 9B, Û is C3 9B, ‚ (U+201A) is E2 80 9A, 😀 is F0 9F 98 80.
        for word in ["é", "ě", "Û", "\u{201a}", "😀", "přes ĕ ɝ ᵛ"] {
            assert_eq!(text(word.as_bytes()), word);
        }
    }

    #[test]
    fn bidi_controls_are_dropped() {
        assert_eq!(
            text("abc\u{202e}def\u{2066}g\u{200f}".as_bytes()),
            "abcdefg"
        );
    }

    #[test]
    fn invalid_utf8_shows_replacement_characters() {
        assert_eq!(text(b"a\xffb"), "a\u{fffd}b");
        assert_eq!(text(b"a\xe2\x82b"), "a\u{fffd}b");
        assert_eq!(text(b"cut short \xe2\x82"), "cut short \u{fffd}");
        assert_eq!(text(b"a\xe2\x1b[1mb"), "a\u{fffd}b");
        // A surrogate: three bytes, none of them part of a character (as Rust's lossy
        // conversion and terminals count them).
        assert_eq!(text(b"\xed\xa0\x80"), "\u{fffd}\u{fffd}\u{fffd}");
        assert_eq!(
            text(b"\xed\xa0\x80"),
            String::from_utf8_lossy(b"\xed\xa0\x80")
        );
    }

    #[test]
    fn multibyte_character_split_across_feeds() {
        let bytes = "€ 中 😀".as_bytes();
        for cut in 0..bytes.len() {
            let mut renderer = LineRenderer::new();
            renderer.feed(&bytes[..cut]);
            renderer.feed(&bytes[cut..]);
            assert_eq!(plain_text(&renderer.finish()), "€ 中 😀", "cut at {cut}");
        }
        let mut renderer = LineRenderer::new();
        for &byte in "😀".as_bytes() {
            renderer.feed(&[byte]);
        }
        assert_eq!(plain_text(&renderer.finish()), "😀");
    }

    #[test]
    fn split_character_followed_by_invalid_bytes_loses_nothing() {
        // Found by the property below: vte alone drops the space here.
        let bytes = b"\xc2\x9b \x9b";
        let mut renderer = LineRenderer::new();
        renderer.feed(&bytes[..1]);
        renderer.feed(&bytes[1..]);
        assert_eq!(renderer.finish(), render_line(bytes));
        assert_eq!(text(bytes), " \u{fffd}");

        let bytes = "\u{a9}A\u{ff}".as_bytes();
        let mut renderer = LineRenderer::new();
        renderer.feed(&bytes[..1]);
        renderer.feed(&bytes[1..]);
        assert_eq!(plain_text(&renderer.finish()), "\u{a9}A\u{ff}");

        // Valid text is enough (alacritty/vte#159): split inside U+0301 used to lose the C.
        let text = "B\u{301}C\u{2500}";
        for cut in 1..text.len() {
            let mut renderer = LineRenderer::new();
            renderer.feed(&text.as_bytes()[..cut]);
            renderer.feed(&text.as_bytes()[cut..]);
            assert_eq!(plain_text(&renderer.finish()), text, "cut at {cut}");
        }
    }

    #[test]
    fn incomplete_suffixes() {
        assert_eq!(incomplete_utf8_suffix(b""), 0);
        assert_eq!(incomplete_utf8_suffix(b"abc"), 0);
        assert_eq!(incomplete_utf8_suffix(b"a\xe2"), 1);
        assert_eq!(incomplete_utf8_suffix(b"a\xe2\x82"), 2);
        assert_eq!(incomplete_utf8_suffix("a\u{20ac}".as_bytes()), 0);
        assert_eq!(incomplete_utf8_suffix(b"\xf0\x9f\x98"), 3);
        assert_eq!(incomplete_utf8_suffix(b"\xe2\x41"), 0);
        assert_eq!(incomplete_utf8_suffix(b"\xe0\x80"), 0);
        assert_eq!(incomplete_utf8_suffix(b"\x82\x82"), 0);
        assert_eq!(incomplete_utf8_suffix(b"\xc0"), 0);
    }

    #[test]
    fn escape_split_across_feeds() {
        let mut renderer = LineRenderer::new();
        renderer.feed(b"a\x1b");
        renderer.feed(b"[3");
        renderer.feed(b"1mb\x1b]0;ti");
        renderer.feed(b"tle\x07c");
        assert_eq!(
            renderer.finish(),
            vec![
                Span::plain("a"),
                Span::new("bc", styled(Color::Indexed(1), false))
            ]
        );
    }

    #[test]
    fn combining_marks_stay_with_their_character() {
        assert_eq!(text("e\u{301}x".as_bytes()), "e\u{301}x");
        // Overwriting the cell replaces its marks too.
        assert_eq!(text("e\u{301}x\re".as_bytes()), "ex");
        assert_eq!(text("\u{301}a".as_bytes()), "a");
    }

    fn interesting_byte() -> impl Strategy<Value = u8> {
        prop_oneof![
            any::<u8>(),
            prop::sample::select(vec![
                0x1b, b'[', b']', b';', b':', b'?', b'm', b'K', b'P', b'X', b'^', b'_', b'\\',
                b'0', b'1', b'2', b'3', b'5', b'8', b'\r', b'\t', b'\n', 0x08, 0x07, 0x18, 0x7f,
                0x9b, 0x9c, 0x9d, 0x90, 0xc2, 0xc4, 0xe2, 0x82, 0xac, 0xf0, 0x9f, 0x98, 0x80, 0xed,
                0xa0, 0xff,
            ]),
        ]
    }

    /// Text bytes without C0 controls or DEL: nothing in them moves the cursor or starts a
    /// sequence, so every byte that is not part of a character must show.
    fn text_byte() -> impl Strategy<Value = u8> {
        prop_oneof![
            0x20u8..0x7f,
            0x80u8..=0xff,
            prop::sample::select(vec![0x80, 0x9b, 0x9d, 0x9f, 0xc2, 0xc4, 0xe2, 0xf0, 0x9f]),
        ]
    }

    /// The line as vte alone shows it, given every byte but a lone C1 one (as rendering was
    /// before stretches that are not UTF-8 were replaced ahead of it): what the renderer
    /// must still show.
    fn rendered_by_vte(bytes: &[u8]) -> StyledLine {
        let mut parser = Parser::new();
        let mut screen = Screen::default();
        let (now, later) = bytes.split_at(bytes.len() - incomplete_utf8_suffix(bytes));
        let (mut from, mut at) = (0, 0);
        for chunk in now.utf8_chunks() {
            at += chunk.valid().len();
            if let [byte @ 0x80..=0x9f] = *chunk.invalid() {
                parser.advance(&mut screen, &now[from..at]);
                let shown: &[u8] = if screen.in_dcs_string {
                    &[byte]
                } else {
                    REPLACEMENT
                };
                parser.advance(&mut screen, shown);
                from = at + 1;
            }
            at += chunk.invalid().len();
        }
        parser.advance(&mut screen, &now[from..]);
        parser.advance(&mut screen, &[later, &[CAN]].concat());
        screen.cells.into_line()
    }

    fn assert_clean(line: &StyledLine) -> Result<(), TestCaseError> {
        for span in line {
            prop_assert!(!span.text.is_empty(), "empty span in {line:?}");
            for c in span.text.chars() {
                prop_assert!(!is_control(c), "control {c:?} in {line:?}");
            }
        }
        for pair in line.windows(2) {
            prop_assert_ne!(pair[0].style, pair[1].style, "unmerged spans in {:?}", line);
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: 2000,
            // Failures are kept as unit tests above, not in files beside the crate.
            failure_persistence: None,
            ..ProptestConfig::default()
        })]

        #[test]
        fn any_chunking_renders_the_same_clean_line(
            bytes in prop::collection::vec(interesting_byte(), 0..160),
            cuts in prop::collection::vec(0usize..160, 0..12),
        ) {
            let whole = render_line(&bytes);
            assert_clean(&whole)?;

            let mut one_by_one = LineRenderer::new();
            for &byte in &bytes {
                one_by_one.feed(&[byte]);
            }
            prop_assert_eq!(&one_by_one.finish(), &whole);

            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(bytes.len())).collect();
            cuts.sort_unstable();
            let mut chunked = LineRenderer::new();
            let mut start = 0;
            for cut in cuts.into_iter().chain([bytes.len()]) {
                chunked.feed(&bytes[start..cut]);
                start = cut;
            }
            prop_assert_eq!(&chunked.finish(), &whole);
        }

        #[test]
        fn what_is_not_utf8_shows_as_vte_would_show_it(
            bytes in prop::collection::vec(interesting_byte(), 0..160),
        ) {
            prop_assert_eq!(render_line(&bytes), rendered_by_vte(&bytes));
        }

        #[test]
        fn every_byte_outside_a_character_shows(
            bytes in prop::collection::vec(text_byte(), 0..64),
        ) {
            let replacements = |text: &str| text.chars().filter(|&c| c == '\u{fffd}').count();
            prop_assert_eq!(
                replacements(&plain_text(&render_line(&bytes))),
                replacements(&String::from_utf8_lossy(&bytes)),
                "{:x?}", bytes
            );
        }
    }
}
