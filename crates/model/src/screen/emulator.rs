//! The terminal emulator: bytes in, a grid of safe cells out. Nothing it would send back to a
//! program (answers to `\e[6n`, `\e[c`), and nothing it would do to a window (titles, OSC 52,
//! bells), goes anywhere: its event listener is a sink.

use std::time::Instant;

use alacritty_terminal::Term;
use alacritty_terminal::event::VoidListener;
use alacritty_terminal::grid::Dimensions;
use alacritty_terminal::term::{Config, Osc52, TermMode};
use alacritty_terminal::vte::ansi::Processor;

use super::grid::{ScreenGrid, grid_of};
use crate::output::sanitize::incomplete_utf8_suffix;

/// The smallest screen the emulator takes (alacritty's own minimum is 2 columns, 1 line).
const MIN_ROWS: u16 = 1;
const MIN_COLS: u16 = 2;
/// The largest: above any real terminal, so that a size read from a journal (a command's
/// terminal) never makes a screen of billions of cells.
const MAX_ROWS: u16 = 500;
const MAX_COLS: u16 = 1000;

/// A screen size for the emulator: no scrollback, only what is on screen.
#[derive(Debug, Clone, Copy)]
struct Size {
    rows: usize,
    cols: usize,
}

impl Dimensions for Size {
    fn total_lines(&self) -> usize {
        self.rows
    }

    fn screen_lines(&self) -> usize {
        self.rows
    }

    fn columns(&self) -> usize {
        self.cols
    }
}

fn size(rows: u16, cols: u16) -> Size {
    Size {
        rows: rows.clamp(MIN_ROWS, MAX_ROWS) as usize,
        cols: cols.clamp(MIN_COLS, MAX_COLS) as usize,
    }
}

/// A terminal screen of a fixed size, fed a command's output bytes.
pub struct ScreenEmulator {
    term: Term<VoidListener>,
    processor: Processor,
    rows: u16,
    cols: u16,
    /// What the last feed ended with that the next may complete (a UTF-8 character, the
    /// start of a CSI sequence), held back for it.
    held: Vec<u8>,
    /// Reused for the output with `\r` put before each `\n`.
    scratch: Vec<u8>,
}

impl ScreenEmulator {
    pub fn new(rows: u16, cols: u16) -> Self {
        let config = Config {
            // The screen only: the line log is the history.
            scrolling_history: 0,
            osc52: Osc52::Disabled,
            kitty_keyboard: false,
            ..Config::default()
        };
        ScreenEmulator {
            term: Term::new(config, &size(rows, cols), VoidListener),
            processor: Processor::new(),
            rows: rows.clamp(MIN_ROWS, MAX_ROWS),
            cols: cols.clamp(MIN_COLS, MAX_COLS),
            held: Vec::new(),
            scratch: Vec::new(),
        }
    }

    /// Rows and columns.
    pub fn size(&self) -> (u16, u16) {
        (self.rows, self.cols)
    }

    /// Resizes the screen as a terminal window would be (lines reflow; a program that
    /// follows its terminal's size redraws when told, later in its output).
    pub fn resize(&mut self, rows: u16, cols: u16) {
        let (rows, cols) = (
            rows.clamp(MIN_ROWS, MAX_ROWS),
            cols.clamp(MIN_COLS, MAX_COLS),
        );
        if (rows, cols) != (self.rows, self.cols) {
            self.term.resize(size(rows, cols));
            (self.rows, self.cols) = (rows, cols);
        }
    }

    /// Feeds output bytes, in any chunking: the result is the same as one feed of them all.
    pub fn feed(&mut self, bytes: &[u8]) {
        if self.held.is_empty() {
            self.advance_holding_back(bytes);
        } else {
            let mut joined = std::mem::take(&mut self.held);
            joined.extend_from_slice(bytes);
            self.advance_holding_back(&joined);
        }
    }

    /// Advances over `bytes` but for what a later feed may complete: a UTF-8 character
    /// (vte's handling of a character split between two feeds can skip the bytes after it,
    /// vte 0.15 `advance_partial_utf8`, alacritty/vte#159, which the line renderer works around
    /// too), or the start of a CSI sequence (an alternate-screen switch must be seen whole
    /// before the newlines after it).
    fn advance_holding_back(&mut self, bytes: &[u8]) {
        let held = incomplete_utf8_suffix(bytes).max(incomplete_csi_suffix(bytes));
        let (now, later) = bytes.split_at(bytes.len() - held);
        let mut rest = now;
        while !rest.is_empty() {
            let (segment, after) = split_after_private_mode(rest);
            self.advance(segment);
            rest = after;
        }
        self.held = later.to_vec();
    }

    /// The journal holds what the command wrote, before any terminal driver's `\n` → `\r\n`
    /// (ONLCR): a line-oriented program (`top -b`, a build) expects a newline to return to
    /// the first column, as its terminal's driver would make it. A program on the alternate
    /// screen has, as a rule, put its terminal in raw mode, where a newline only moves down:
    /// there it is left alone. `bytes` holds no switch of screens but maybe at its end.
    fn advance(&mut self, bytes: &[u8]) {
        if self.alternate() || memchr::memchr(b'\n', bytes).is_none() {
            self.processor.advance(&mut self.term, bytes);
            return;
        }
        let mut translated = std::mem::take(&mut self.scratch);
        translated.clear();
        let mut from = 0;
        for at in memchr::memchr_iter(b'\n', bytes) {
            translated.extend_from_slice(&bytes[from..at]);
            translated.extend_from_slice(b"\r\n");
            from = at + 1;
        }
        translated.extend_from_slice(&bytes[from..]);
        self.processor.advance(&mut self.term, &translated);
        self.scratch = translated;
    }

    /// A synchronized update (`\e[?2026h` … `\e[?2026l`) is shown when it ends; one left open
    /// is shown after the same 150 ms a terminal waits. Returns whether one is still pending
    /// (so that the caller draws again soon).
    pub fn end_overdue_sync(&mut self, now: Instant) -> bool {
        match self.processor.sync_timeout().sync_timeout() {
            Some(deadline) if now >= deadline => {
                self.processor.stop_sync(&mut self.term);
                false
            }
            Some(_) => true,
            None => false,
        }
    }

    /// The program is on the alternate screen (a full-screen program).
    pub fn alternate(&self) -> bool {
        self.term.mode().contains(TermMode::ALT_SCREEN)
    }

    /// The screen's cells, made safe to draw.
    pub fn grid(&self) -> ScreenGrid {
        grid_of(&self.term, self.alternate())
    }

    /// The screen as plain text (what a copy of it holds): each row without its trailing
    /// blanks, without the blank rows at the bottom.
    pub fn text(&self) -> String {
        self.grid().text()
    }
}

/// The most bytes held back for a CSI sequence a later feed may complete: a private-mode
/// switch is a few bytes; anything longer is not one.
const MAX_HELD_CSI: usize = 32;

/// How many bytes at the end of `bytes` are the start of a CSI sequence (`ESC`, `ESC [` and
/// parameters) that more bytes could still complete.
fn incomplete_csi_suffix(bytes: &[u8]) -> usize {
    let window = &bytes[bytes.len().saturating_sub(MAX_HELD_CSI)..];
    let Some(esc) = memchr::memrchr(0x1b, window) else {
        return 0;
    };
    let incomplete = match &window[esc + 1..] {
        [] => true,
        [b'[', params @ ..] => params
            .iter()
            .all(|b| b.is_ascii_digit() || b";:?<=>".contains(b)),
        _ => false,
    };
    if incomplete { window.len() - esc } else { 0 }
}

/// `bytes` cut after its first private-mode sequence (`ESC [ ?` … final byte), where the
/// screen may have switched; all of it if there is none.
fn split_after_private_mode(bytes: &[u8]) -> (&[u8], &[u8]) {
    let Some(at) = memchr::memmem::find(bytes, b"\x1b[?") else {
        return (bytes, &[]);
    };
    let end = bytes[at + 3..]
        .iter()
        .position(|b| (0x40..=0x7e).contains(b))
        .map_or(bytes.len(), |p| at + 3 + p + 1);
    bytes.split_at(end)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(emulator: &ScreenEmulator) -> Vec<String> {
        emulator.grid().rows.iter().map(|r| row_text(r)).collect()
    }

    fn row_text(row: &[super::super::ScreenCell]) -> String {
        row.iter().map(|c| c.text.as_str()).collect()
    }

    #[test]
    fn cursor_moves_draw_a_screen() {
        let mut screen = ScreenEmulator::new(4, 12);
        screen.feed(b"\x1b[2J\x1b[1;1Htop - 10:00\x1b[3;5Hrow three\x1b[2;1Hsecond");
        assert_eq!(
            rows(&screen),
            vec![
                "top - 10:00 ",
                "second      ",
                "    row thre",
                "e           "
            ]
        );
    }

    #[test]
    fn a_newline_returns_to_the_first_column_outside_the_alternate_screen() {
        let mut screen = ScreenEmulator::new(3, 6);
        screen.feed(b"ab\ncd\n");
        assert_eq!(rows(&screen), vec!["ab    ", "cd    ", "      "]);
        // On the alternate screen a program in raw mode means only "down".
        screen.feed(b"\x1b[?1049h\x1b[Hab\ncd");
        assert!(screen.alternate());
        assert_eq!(rows(&screen), vec!["ab    ", "  cd  ", "      "]);
        screen.feed(b"\x1b[?1049l");
        assert!(!screen.alternate());
        assert_eq!(rows(&screen)[1], "cd    ");
    }

    #[test]
    fn any_chunking_gives_the_same_screen() {
        let bytes =
            "\x1b[31mé€😀\x1b[0m x\r\n\x1b[2;3Hdone ✓\n\x1b[?1049h\x1b[Ha\nb\x1b[?1049lc\nd"
                .as_bytes();
        let mut whole = ScreenEmulator::new(3, 10);
        whole.feed(bytes);
        for size in 1..5 {
            let mut chunked = ScreenEmulator::new(3, 10);
            for chunk in bytes.chunks(size) {
                chunked.feed(chunk);
            }
            assert_eq!(chunked.grid(), whole.grid(), "chunks of {size}");
        }
    }

    #[test]
    fn the_start_of_a_csi_sequence_is_held_back() {
        assert_eq!(incomplete_csi_suffix(b"abc"), 0);
        assert_eq!(incomplete_csi_suffix(b"abc\x1b"), 1);
        assert_eq!(incomplete_csi_suffix(b"abc\x1b[?104"), 6);
        assert_eq!(incomplete_csi_suffix(b"abc\x1b[?1049h"), 0);
        assert_eq!(incomplete_csi_suffix(b"abc\x1b]0;title"), 0);
        let long = [b"\x1b[".as_slice(), &[b'1'; 40]].concat();
        assert_eq!(incomplete_csi_suffix(&long), 0);
    }

    #[test]
    fn bytes_are_cut_after_each_private_mode() {
        let (a, b) = split_after_private_mode(b"x\n\x1b[?1049hy\n\x1b[?25l");
        assert_eq!(a, b"x\n\x1b[?1049h");
        assert_eq!(b, b"y\n\x1b[?25l");
        assert_eq!(split_after_private_mode(b"plain\n").0, b"plain\n");
    }

    #[test]
    fn queries_titles_and_clipboard_writes_go_nowhere() {
        let mut screen = ScreenEmulator::new(2, 20);
        screen.feed(b"\x1b]52;c;aGVsbG8=\x07\x1b]0;PWNED\x07\x1b[6n\x1b[c\x07ok");
        assert_eq!(rows(&screen)[0].trim_end(), "ok");
        assert_eq!(screen.text(), "ok");
    }

    #[test]
    fn resize_keeps_what_fits() {
        let mut screen = ScreenEmulator::new(3, 10);
        screen.feed(b"hello\nworld");
        screen.resize(3, 4);
        assert_eq!(screen.size(), (3, 4));
        assert_eq!(screen.grid().rows.len(), 3);
        assert!(screen.grid().rows.iter().all(|r| r.len() == 4));
        // A zero size is taken as the smallest screen, never a panic.
        screen.resize(0, 0);
        assert_eq!(screen.size(), (1, 2));
        // Nor a screen of billions of cells.
        screen.resize(u16::MAX, u16::MAX);
        assert_eq!(screen.size(), (MAX_ROWS, MAX_COLS));
        assert_eq!(ScreenEmulator::new(u16::MAX, 80).size(), (MAX_ROWS, 80));
        screen.feed("wide 中文 and more\n".as_bytes());
    }

    #[test]
    fn an_open_synchronized_update_is_shown_after_the_timeout() {
        let mut screen = ScreenEmulator::new(2, 10);
        screen.feed(b"before\x1b[?2026h\x1b[2J\x1b[Hafter");
        assert_eq!(screen.text(), "before");
        assert!(screen.end_overdue_sync(Instant::now()));
        let later = Instant::now() + std::time::Duration::from_secs(1);
        assert!(!screen.end_overdue_sync(later));
        assert_eq!(screen.text(), "after");
    }
}
