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
use crate::model::output::sanitize::incomplete_utf8_suffix;

/// The smallest screen the emulator takes (alacritty's own minimum is 2 columns, 1 line).
const MIN_ROWS: u16 = 1;
const MIN_COLS: u16 = 2;

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
        rows: rows.max(MIN_ROWS) as usize,
        cols: cols.max(MIN_COLS) as usize,
    }
}

/// A terminal screen of a fixed size, fed a command's output bytes.
pub struct ScreenEmulator {
    term: Term<VoidListener>,
    processor: Processor,
    rows: u16,
    cols: u16,
    /// The start of a UTF-8 character cut short by the last feed, held back for the next.
    held: Vec<u8>,
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
            rows: rows.max(MIN_ROWS),
            cols: cols.max(MIN_COLS),
            held: Vec::new(),
        }
    }

    /// Rows and columns.
    pub fn size(&self) -> (u16, u16) {
        (self.rows, self.cols)
    }

    /// Resizes the screen as a terminal window would be (lines reflow; a program that
    /// follows its terminal's size redraws when told, later in its output).
    pub fn resize(&mut self, rows: u16, cols: u16) {
        let (rows, cols) = (rows.max(MIN_ROWS), cols.max(MIN_COLS));
        if (rows, cols) != (self.rows, self.cols) {
            self.term.resize(size(rows, cols));
            (self.rows, self.cols) = (rows, cols);
        }
    }

    /// Feeds output bytes, in any chunking: the result is the same as one feed of them all.
    pub fn feed(&mut self, mut bytes: &[u8]) {
        // vte's handling of a character split between two feeds can skip the bytes after it
        // (vte 0.15 `advance_partial_utf8`, alacritty/vte#159; the line renderer does the same),
        // so the parser is only handed feeds that end on a character boundary.
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

    fn advance_holding_back(&mut self, bytes: &[u8]) {
        let (now, later) = bytes.split_at(bytes.len() - incomplete_utf8_suffix(bytes));
        self.advance(now);
        self.held = later.to_vec();
    }

    /// The journal holds what the command wrote, before any terminal driver's `\n` → `\r\n`
    /// (ONLCR): a line-oriented program (`top -b`, a build) expects a newline to return to
    /// the first column, as its terminal's driver would make it. A program on the alternate
    /// screen has, as a rule, put its terminal in raw mode, where a newline only moves down:
    /// there it is left alone.
    fn advance(&mut self, bytes: &[u8]) {
        for piece in bytes.split_inclusive(|&b| b == b'\n') {
            match piece.split_last() {
                Some((b'\n', before)) => {
                    self.processor.advance(&mut self.term, before);
                    if !self.alternate() {
                        self.processor.advance(&mut self.term, b"\r");
                    }
                    self.processor.advance(&mut self.term, b"\n");
                }
                _ => self.processor.advance(&mut self.term, piece),
            }
        }
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

    /// Shows a synchronized update that is still open, at once.
    pub fn end_sync(&mut self) {
        if self.processor.sync_timeout().sync_timeout().is_some() {
            self.processor.stop_sync(&mut self.term);
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
        let bytes = "\x1b[31mé€😀\x1b[0m x\r\n\x1b[2;3Hdone ✓".as_bytes();
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
