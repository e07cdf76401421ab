//! The emulator's cells as the UI draws them: the same `Style` as a line of the log, and text
//! that has passed the same character checks (no control character, no bidi control).

use alacritty_terminal::Term;
use alacritty_terminal::grid::Dimensions;
use alacritty_terminal::index::{Column, Line};
use alacritty_terminal::term::TermMode;
use alacritty_terminal::term::cell::{Cell, Flags};
use alacritty_terminal::vte::ansi::Color as TermColor;

use crate::output::style::{Color, Style, is_unsafe_on_screen};

/// The most zero-width characters (combining marks, joiners, variation selectors) one cell
/// keeps, as in the line log.
const MAX_MARKS: usize = 16;

/// One screen cell: a character with its zero-width marks, or `""` for the right half of the
/// wide character to its left (which covers it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScreenCell {
    pub text: String,
    pub style: Style,
}

impl ScreenCell {
    pub fn is_wide_tail(&self) -> bool {
        self.text.is_empty()
    }
}

/// What the emulated terminal shows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScreenGrid {
    /// Every row has the same number of cells: the screen's width.
    pub rows: Vec<Vec<ScreenCell>>,
    /// Row and column of the cursor, when the program shows it.
    pub cursor: Option<(u16, u16)>,
    /// The program switched to the alternate screen.
    pub alternate: bool,
}

impl ScreenGrid {
    /// Rows and columns.
    pub fn size(&self) -> (u16, u16) {
        let cols = self.rows.first().map_or(0, Vec::len);
        (self.rows.len() as u16, cols as u16)
    }

    /// Plain text: each row without its trailing blanks, the blank rows at the bottom left out.
    pub fn text(&self) -> String {
        let mut rows: Vec<String> = self
            .rows
            .iter()
            .map(|row| {
                let text: String = row.iter().map(|c| c.text.as_str()).collect();
                text.trim_end_matches(' ').to_string()
            })
            .collect();
        while rows.last().is_some_and(String::is_empty) {
            rows.pop();
        }
        rows.join("\n")
    }
}

/// Reads the emulator's screen.
pub(super) fn grid_of<T>(term: &Term<T>, alternate: bool) -> ScreenGrid {
    let grid = term.grid();
    let rows = (0..grid.screen_lines())
        .map(|line| {
            let row = &grid[Line(line as i32)];
            (0..grid.columns())
                .map(|col| screen_cell(&row[Column(col)]))
                .collect()
        })
        .collect();
    let point = grid.cursor.point;
    let cursor = (term.mode().contains(TermMode::SHOW_CURSOR) && point.line.0 >= 0)
        .then_some((point.line.0 as u16, point.column.0 as u16));
    ScreenGrid {
        rows,
        cursor,
        alternate,
    }
}

/// One emulator cell as text and style. Whatever the emulator let into a cell, only
/// characters that are safe on screen leave it: a control or bidi character as the cell's
/// own character shows as U+FFFD (as in the log), as a mark it is dropped.
pub(super) fn screen_cell(cell: &Cell) -> ScreenCell {
    let hidden = Flags::HIDDEN | Flags::LEADING_WIDE_CHAR_SPACER;
    let text = if cell.flags.contains(Flags::WIDE_CHAR_SPACER) {
        String::new()
    } else if cell.flags.intersects(hidden) {
        " ".into()
    } else {
        let mut text = String::with_capacity(4);
        text.push(match cell.c {
            '\0' => ' ',
            c if is_unsafe_on_screen(c) => '\u{fffd}',
            c => c,
        });
        let marks = cell.zerowidth().unwrap_or_default();
        let marks = marks.iter().copied().filter(|&c| !is_unsafe_on_screen(c));
        text.extend(marks.take(MAX_MARKS));
        text
    };
    ScreenCell {
        text,
        style: style_of(cell),
    }
}

fn style_of(cell: &Cell) -> Style {
    let flags = cell.flags;
    Style {
        fg: color(cell.fg),
        bg: color(cell.bg),
        bold: flags.contains(Flags::BOLD),
        dim: flags.contains(Flags::DIM),
        italic: flags.contains(Flags::ITALIC),
        underline: flags.intersects(Flags::ALL_UNDERLINES),
        reverse: flags.contains(Flags::INVERSE),
        highlight: false,
    }
}

fn color(color: TermColor) -> Color {
    match color {
        TermColor::Spec(rgb) => Color::Rgb(rgb.r, rgb.g, rgb.b),
        TermColor::Indexed(i) => Color::Indexed(i),
        TermColor::Named(named) => match named as usize {
            i @ 0..=15 => Color::Indexed(i as u8),
            // The dim palette stands for the normal one (the dim attribute says the rest).
            _ => match named.to_bright() {
                n if (n as usize) < 8 => Color::Indexed(n as u8),
                // The terminal's own foreground, background and cursor colours.
                _ => Color::Default,
            },
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::screen::ScreenEmulator;

    fn cells(bytes: &[u8], rows: u16, cols: u16) -> ScreenGrid {
        let mut screen = ScreenEmulator::new(rows, cols);
        screen.feed(bytes);
        screen.grid()
    }

    #[test]
    fn colours_and_attributes_become_styles() {
        let grid = cells(
            b"\x1b[1;31mR\x1b[0;2;4;3;7m\x1b[38;5;208;48;2;1;2;3mX\x1b[0;92mG\x1b[0m.",
            1,
            6,
        );
        let row = &grid.rows[0];
        assert_eq!(row[0].text, "R");
        assert_eq!(row[0].style.fg, Color::Indexed(1));
        assert!(row[0].style.bold && !row[0].style.dim);
        let x = row[1].style;
        assert_eq!(x.fg, Color::Indexed(208));
        assert_eq!(x.bg, Color::Rgb(1, 2, 3));
        assert!(x.dim && x.underline && x.italic && x.reverse && !x.bold);
        assert_eq!(row[2].style.fg, Color::Indexed(10));
        assert_eq!(row[3].style, Style::default());
        assert_eq!(row[4].text, " ");
    }

    #[test]
    fn wide_characters_take_two_cells_and_marks_stay_with_their_base() {
        let grid = cells("中e\u{301}\u{202e}x".as_bytes(), 1, 6);
        let row = &grid.rows[0];
        assert_eq!(row[0].text, "中");
        assert!(row[1].is_wide_tail());
        // The combining acute stays; the bidi override (zero-width) is dropped.
        assert_eq!(row[2].text, "e\u{301}");
        assert_eq!(row[3].text, "x");
        assert_eq!(grid.size(), (1, 6));
    }

    #[test]
    fn nothing_unsafe_leaves_a_cell() {
        let mut bytes = Vec::new();
        for b in 0u8..=255 {
            bytes.extend_from_slice(&[b'a', b, 0xc2, b]);
        }
        bytes.extend_from_slice("\u{2066}\u{85}\u{9b}2J\u{7f}".as_bytes());
        let grid = cells(&bytes, 10, 40);
        for row in &grid.rows {
            for cell in row {
                assert!(
                    !cell.text.chars().any(is_unsafe_on_screen),
                    "unsafe cell {:?}",
                    cell.text
                );
            }
        }
    }

    #[test]
    fn hidden_text_and_the_cursor() {
        let grid = cells(b"\x1b[8msecret\x1b[0m ok", 2, 12);
        assert_eq!(grid.text(), "       ok");
        assert_eq!(grid.cursor, Some((0, 9)));
        let grid = cells(b"\x1b[?25lhidden cursor", 2, 20);
        assert_eq!(grid.cursor, None);
    }

    #[test]
    fn text_trims_blank_ends() {
        let grid = cells(b"a  \r\n\r\nb \r\n\r\n", 6, 5);
        assert_eq!(grid.text(), "a\n\nb");
        assert_eq!(cells(b"", 3, 3).text(), "");
    }
}
