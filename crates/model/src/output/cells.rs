//! One terminal row of unbounded width: the cells a line's characters land in, and the cursor
//! that `\r`, `\t`, backspace, the moves along the row and erase-in-line move about in it.

use super::style::{Span, Style, StyledLine};
use super::width::{cluster_width, extends_cluster};

/// The most combining marks one cell keeps; more would only let a line of "zalgo" text grow
/// a cell without limit.
const MAX_MARKS: usize = 16;

/// The right margin of the moves along a row (`CSI n C`, `CSI n G`): no terminal is wider,
/// and so a line of such moves, a few bytes each, cannot grow a row without limit.
pub(crate) const MOVE_MARGIN: usize = 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// A character one column wide (or a blank).
    Narrow,
    /// The left column of a two-column character.
    WideLead,
    /// The right column of the two-column character to its left; shows nothing of its own.
    WideTail,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Cell {
    ch: char,
    /// Zero-width characters (combining marks, joiners, variation selectors) drawn with `ch`.
    marks: String,
    style: Style,
    shape: Shape,
}

impl Cell {
    fn blank(style: Style) -> Self {
        Cell {
            ch: ' ',
            marks: String::new(),
            style,
            shape: Shape::Narrow,
        }
    }

    /// The right half of a wide character in `style`.
    fn wide_tail(style: Style) -> Self {
        Cell {
            shape: Shape::WideTail,
            ..Cell::blank(style)
        }
    }
}

/// Invariant: every `WideTail` directly follows a `WideLead` and every `WideLead` is directly
/// followed by a `WideTail`.
#[derive(Debug, Default)]
pub(crate) struct LineCells {
    cells: Vec<Cell>,
    cursor: usize,
}

impl LineCells {
    /// Writes `ch`, `width` (1 or 2) columns wide, at the cursor and moves past it. Whatever
    /// it overwrites goes; a wide character cut in half leaves a blank in its other half.
    pub(crate) fn put(&mut self, ch: char, width: usize, style: Style) {
        let start = self.cursor;
        let end = start + width.clamp(1, 2);
        self.pad_to(end);
        self.split_wide_at(start);
        self.split_wide_at(end);
        let wide = end - start == 2;
        self.cells[start] = Cell {
            ch,
            marks: String::new(),
            style,
            shape: if wide { Shape::WideLead } else { Shape::Narrow },
        };
        if wide {
            self.cells[start + 1] = Cell::wide_tail(style);
        }
        self.cursor = end;
    }

    /// Where the character left of the cursor is, if there is one.
    fn left_of_cursor(&self) -> Option<usize> {
        let at = self
            .cursor
            .checked_sub(1)
            .filter(|&at| at < self.cells.len())?;
        Some(at - usize::from(self.cells[at].shape == Shape::WideTail))
    }

    /// Adds a zero-width character to the character left of the cursor, if there is one.
    pub(crate) fn attach(&mut self, mark: char) {
        let Some(at) = self.left_of_cursor() else {
            return;
        };
        let cell = &mut self.cells[at];
        if cell.marks.chars().count() < MAX_MARKS {
            cell.marks.push(mark);
        }
    }

    /// Adds `c` to the character left of the cursor when it continues that character's
    /// grapheme cluster (a skin tone after its emoji, a ZWJ and what it joins, the second
    /// half of a flag), as a terminal draws them: one cluster, in one cell as wide as the
    /// whole cluster. Returns whether `c` was taken.
    pub(crate) fn extend_cluster(&mut self, c: char) -> bool {
        // Nothing ASCII continues a cluster (combining marks, joiners, modifiers and
        // regional indicators are all beyond it): the common case costs nothing.
        let Some(at) = self.left_of_cursor().filter(|_| !c.is_ascii()) else {
            return false;
        };
        let cell = &self.cells[at];
        let mut cluster = String::with_capacity(cell.marks.len() + 8);
        cluster.push(cell.ch);
        cluster.push_str(&cell.marks);
        if !extends_cluster(&cluster, c) {
            return false;
        }
        if cell.marks.chars().count() >= MAX_MARKS {
            // Taken, and dropped: a cluster does not grow without limit.
            return true;
        }
        cluster.push(c);
        let style = cell.style;
        let was_wide = cell.shape == Shape::WideLead;
        self.cells[at].marks.push(c);
        match (was_wide, cluster_width(&cluster) >= 2) {
            // A flag's second half, an emoji presentation selector: now two columns.
            (false, true) => {
                self.pad_to(at + 2);
                self.split_wide_at(at + 2);
                self.cells[at].shape = Shape::WideLead;
                self.cells[at + 1] = Cell::wide_tail(style);
                self.cursor = at + 2;
            }
            // A text presentation selector on a wide emoji: its right half is a blank.
            (true, false) => {
                self.cells[at].shape = Shape::Narrow;
                self.cells[at + 1] = Cell::blank(style);
            }
            _ => {}
        }
        true
    }

    pub(crate) fn carriage_return(&mut self) {
        self.cursor = 0;
    }

    pub(crate) fn backspace(&mut self) {
        self.cursor = self.cursor.saturating_sub(1);
    }

    /// Cursor forward (`CSI n C`): `n` columns right, up to [`MOVE_MARGIN`]. What it moves
    /// over stays; where the row has no cells yet, what is written after it pads with
    /// blanks: the spaces a program that draws words apart by moves meant.
    pub(crate) fn forward(&mut self, n: usize) {
        self.cursor = self
            .cursor
            .saturating_add(n)
            .min(MOVE_MARGIN.max(self.cursor));
    }

    /// Cursor to column `column` (0-based) of the row (`CSI n G`), at most [`MOVE_MARGIN`].
    pub(crate) fn move_to_column(&mut self, column: usize) {
        self.cursor = column.min(MOVE_MARGIN);
    }

    /// Moves to the next multiple of 8, filling with blanks where the line has no cells yet.
    pub(crate) fn tab(&mut self) {
        self.cursor = (self.cursor / 8 + 1) * 8;
        self.pad_to(self.cursor);
    }

    /// Erase in line (`CSI n K`): 0 from the cursor to the end, 1 from the start through the
    /// cursor, 2 the whole line. The cursor stays where it is.
    pub(crate) fn erase(&mut self, mode: u16) {
        match mode {
            0 => {
                self.split_wide_at(self.cursor);
                self.cells.truncate(self.cursor);
            }
            1 => {
                let end = (self.cursor + 1).min(self.cells.len());
                self.split_wide_at(end);
                for cell in &mut self.cells[..end] {
                    *cell = Cell::blank(Style::default());
                }
            }
            2 => self.cells.clear(),
            _ => {}
        }
    }

    /// The line as spans, adjacent cells of one style merged into one span.
    pub(crate) fn into_line(self) -> StyledLine {
        let mut line: StyledLine = Vec::new();
        for cell in self
            .cells
            .into_iter()
            .filter(|c| c.shape != Shape::WideTail)
        {
            if line.last().is_none_or(|span| span.style != cell.style) {
                line.push(Span::new(String::new(), cell.style));
            }
            if let Some(span) = line.last_mut() {
                span.text.push(cell.ch);
                span.text.push_str(&cell.marks);
            }
        }
        line
    }

    fn pad_to(&mut self, len: usize) {
        if self.cells.len() < len {
            self.cells.resize(len, Cell::blank(Style::default()));
        }
    }

    /// Makes `column` the start of a character: if a wide character straddles the boundary
    /// between `column - 1` and `column`, both its halves become blanks in its style.
    fn split_wide_at(&mut self, column: usize) {
        if column == 0 || column >= self.cells.len() {
            return;
        }
        if self.cells[column].shape == Shape::WideTail {
            let style = self.cells[column].style;
            self.cells[column - 1] = Cell::blank(style);
            self.cells[column] = Cell::blank(style);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::style::plain_text;

    fn text(cells: LineCells) -> String {
        plain_text(&cells.into_line())
    }

    fn put_str(cells: &mut LineCells, s: &str) {
        for ch in s.chars() {
            let width = if ch == '中' || ch == '文' { 2 } else { 1 };
            cells.put(ch, width, Style::default());
        }
    }

    #[test]
    fn empty_line_has_no_spans() {
        assert!(LineCells::default().into_line().is_empty());
    }

    #[test]
    fn carriage_return_overwrites() {
        let mut cells = LineCells::default();
        put_str(&mut cells, "abcdef");
        cells.carriage_return();
        put_str(&mut cells, "XY");
        assert_eq!(text(cells), "XYcdef");
    }

    #[test]
    fn tab_pads_to_next_stop_but_keeps_what_is_there() {
        let mut cells = LineCells::default();
        put_str(&mut cells, "ab");
        cells.tab();
        put_str(&mut cells, "c");
        assert_eq!(text(cells), "ab      c");

        let mut cells = LineCells::default();
        put_str(&mut cells, "abcdefghij");
        cells.carriage_return();
        cells.tab();
        put_str(&mut cells, "X");
        assert_eq!(text(cells), "abcdefghXj");
    }

    #[test]
    fn moves_along_the_row_leave_blanks_and_keep_what_they_pass() {
        let mut cells = LineCells::default();
        put_str(&mut cells, "echo");
        cells.forward(1);
        put_str(&mut cells, "hi");
        cells.move_to_column(10);
        put_str(&mut cells, "|");
        assert_eq!(text(cells), "echo hi   |");

        let mut cells = LineCells::default();
        put_str(&mut cells, "abcdef");
        cells.carriage_return();
        cells.forward(2);
        put_str(&mut cells, "X");
        cells.move_to_column(0);
        put_str(&mut cells, "Y");
        assert_eq!(text(cells), "YbXdef");

        // Nothing after the move: no blanks at the end.
        let mut cells = LineCells::default();
        put_str(&mut cells, "a");
        cells.forward(5);
        assert_eq!(text(cells), "a");
    }

    #[test]
    fn moves_stop_at_the_margin() {
        let mut cells = LineCells::default();
        for _ in 0..100 {
            cells.forward(usize::from(u16::MAX));
            put_str(&mut cells, "x");
        }
        cells.move_to_column(usize::MAX);
        put_str(&mut cells, "y");
        assert!(text(cells).chars().count() <= MOVE_MARGIN + 101);
    }

    #[test]
    fn backspace_moves_left_and_stops_at_zero() {
        let mut cells = LineCells::default();
        put_str(&mut cells, "ab");
        cells.backspace();
        cells.backspace();
        cells.backspace();
        put_str(&mut cells, "X");
        assert_eq!(text(cells), "Xb");
    }

    #[test]
    fn overwriting_half_a_wide_char_blanks_the_other_half() {
        let mut cells = LineCells::default();
        put_str(&mut cells, "中文");
        cells.carriage_return();
        cells.backspace();
        put_str(&mut cells, "a");
        assert_eq!(text(cells), "a 文");

        let mut cells = LineCells::default();
        put_str(&mut cells, "中文");
        cells.carriage_return();
        put_str(&mut cells, "ab");
        assert_eq!(text(cells), "ab文");

        // Starting on the right half of 中 and spilling onto 文's left half.
        let mut cells = LineCells::default();
        put_str(&mut cells, "中文x");
        cells.carriage_return();
        put_str(&mut cells, "a");
        put_str(&mut cells, "中");
        assert_eq!(text(cells), "a中 x");
    }

    #[test]
    fn marks_attach_to_the_previous_character() {
        let mut cells = LineCells::default();
        cells.attach('\u{301}'); // nothing to attach to
        put_str(&mut cells, "e");
        cells.attach('\u{301}');
        put_str(&mut cells, "中");
        cells.attach('\u{fe0f}');
        assert_eq!(text(cells), "e\u{301}中\u{fe0f}");
    }

    /// What a terminal shows for a cluster of several characters: one cell, as wide as the
    /// cluster, which a `\r` and new text overwrite whole.
    #[test]
    fn a_cluster_is_one_cell_as_wide_as_the_cluster() {
        let print = |cells: &mut LineCells, s: &str| {
            for c in s.chars() {
                if !cells.extend_cluster(c) {
                    let width = crate::output::char_width(c);
                    cells.put(c, width, Style::default());
                }
            }
        };
        let mut cells = LineCells::default();
        print(&mut cells, "a👍🏽b");
        assert_eq!(cells.cursor, 4);
        assert_eq!(text(cells), "a👍🏽b");

        // Two regional indicators: each one column alone, one flag two columns wide.
        let mut cells = LineCells::default();
        print(&mut cells, "🇺🇸x");
        assert_eq!(cells.cursor, 3);
        let mut cells = LineCells::default();
        print(&mut cells, "🇺🇸🇫🇷");
        assert_eq!(cells.cursor, 4);
        cells.carriage_return();
        print(&mut cells, "ab");
        assert_eq!(text(cells), "ab🇫🇷");

        let mut cells = LineCells::default();
        print(&mut cells, "👨\u{200d}👩\u{200d}👧!");
        assert_eq!(cells.cursor, 3);
        assert_eq!(text(cells), "👨\u{200d}👩\u{200d}👧!");
    }

    #[test]
    fn marks_per_cell_are_capped() {
        let mut cells = LineCells::default();
        put_str(&mut cells, "a");
        for _ in 0..1000 {
            cells.attach('\u{301}');
        }
        assert_eq!(text(cells).chars().count(), 1 + MAX_MARKS);
    }

    #[test]
    fn erase_modes() {
        let line = |mode: u16, back: usize| {
            let mut cells = LineCells::default();
            put_str(&mut cells, "abcdef");
            for _ in 0..back {
                cells.backspace();
            }
            cells.erase(mode);
            put_str(&mut cells, "X");
            text(cells)
        };
        assert_eq!(line(0, 3), "abcX");
        assert_eq!(line(1, 3), "   Xef");
        assert_eq!(line(2, 3), "   X");
        assert_eq!(line(0, 0), "abcdefX");
    }

    #[test]
    fn erase_through_half_a_wide_char_blanks_it() {
        let mut cells = LineCells::default();
        put_str(&mut cells, "a中");
        cells.backspace();
        cells.erase(0);
        assert_eq!(text(cells), "a ");

        let mut cells = LineCells::default();
        put_str(&mut cells, "a中b");
        cells.carriage_return();
        cells.put('x', 1, Style::default());
        cells.erase(1);
        assert_eq!(text(cells), "   b");
    }

    #[test]
    fn equal_styles_merge_into_one_span() {
        let bold = Style {
            bold: true,
            ..Style::default()
        };
        let mut cells = LineCells::default();
        cells.put('a', 1, Style::default());
        cells.put('b', 1, bold);
        cells.put('中', 2, bold);
        cells.put('c', 1, Style::default());
        let line = cells.into_line();
        assert_eq!(
            line,
            vec![Span::plain("a"), Span::new("b中", bold), Span::plain("c")]
        );
    }
}
