//! The screen view of an output pane: the emulator's cells, cell for cell, in the pane. The
//! cells hold printable text only (the model checked each one); styles are the log's own.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::widgets::Widget;

use super::style;
use tether_model::screen::ScreenGrid;

/// A [`ScreenGrid`] drawn from row `top` and column `left` (what a grid larger than its area
/// shows of itself), with the program's cursor marked (when it shows one).
pub struct ScreenWidget<'a> {
    pub grid: &'a ScreenGrid,
    pub top: usize,
    pub left: usize,
}

impl Widget for ScreenWidget<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let rows = self
            .grid
            .rows
            .iter()
            .skip(self.top)
            .take(area.height as usize);
        for (y, row) in (area.y..).zip(rows) {
            let row = row.get(self.left..).unwrap_or_default();
            let cells = row.iter().take(area.width as usize).enumerate();
            for (x, cell) in cells {
                let style = style::output_style(cell.style);
                let target = &mut buf[(area.x + x as u16, y)];
                let wide_lead = row.get(x + 1).is_some_and(|next| next.is_wide_tail());
                if cell.is_wide_tail() || (wide_lead && x + 1 >= area.width as usize) {
                    // Covered by the wide character to its left, or half of one cut by the
                    // pane's edge: a blank, never a character spilling over the border.
                    target.reset();
                    target.set_style(style);
                } else {
                    target.set_symbol(&cell.text).set_style(style);
                }
            }
        }
        if let Some((row, col)) = self.grid.cursor
            && let Some(row) = (row as usize).checked_sub(self.top)
            && let Some(col) = (col as usize).checked_sub(self.left)
            && row < area.height as usize
            && col < area.width as usize
        {
            let cell = &mut buf[(area.x + col as u16, area.y + row as u16)];
            cell.set_style(
                cell.style()
                    .patch(Style::new().add_modifier(Modifier::REVERSED)),
            );
        }
    }
}

/// The first of the grid's rows shown in `height` rows: all from the top when they fit; else
/// those that end with the lower of the cursor and the last row written (where a program that
/// draws on a larger terminal keeps its prompt, its status and its newest output), the cursor
/// kept in sight.
pub fn first_row(grid: &ScreenGrid, height: u16) -> usize {
    let height = height as usize;
    if grid.rows.len() <= height {
        return 0;
    }
    let written = grid
        .rows
        .iter()
        .rposition(|row| row.iter().any(|cell| !cell.text.trim().is_empty()));
    let cursor = grid.cursor.map(|(row, _)| row as usize);
    let bottom = written.max(cursor).unwrap_or(0);
    let top = (bottom + 1).saturating_sub(height);
    cursor.map_or(top, |cursor| top.min(cursor))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::style::Color;
    use tether_model::screen::ScreenEmulator;

    fn render(bytes: &[u8], grid_size: (u16, u16), area: Rect) -> Buffer {
        let mut emulator = ScreenEmulator::new(grid_size.0, grid_size.1);
        emulator.feed(bytes);
        let grid = emulator.grid();
        let mut buf = Buffer::empty(Rect::new(0, 0, area.right() + 1, area.bottom() + 1));
        let top = first_row(&grid, area.height);
        ScreenWidget {
            grid: &grid,
            top,
            left: 0,
        }
        .render(area, &mut buf);
        buf
    }

    fn row(buf: &Buffer, y: u16) -> String {
        (0..buf.area.width).map(|x| buf[(x, y)].symbol()).collect()
    }

    #[test]
    fn cells_land_in_place_with_their_styles() {
        let buf = render(
            b"\x1b[2;3H\x1b[1;32mok\x1b[0m",
            (3, 6),
            Rect::new(1, 1, 6, 3),
        );
        assert_eq!(row(&buf, 2), "   ok   ");
        let cell = &buf[(4, 2)];
        assert_eq!(cell.fg, Color::Green);
        assert!(cell.modifier.contains(Modifier::BOLD));
        // The cursor, after "ok", is shown reversed.
        assert!(buf[(5, 2)].modifier.contains(Modifier::REVERSED));
    }

    #[test]
    fn a_wide_character_cut_by_the_edge_is_a_blank() {
        let buf = render("ab中".as_bytes(), (1, 6), Rect::new(0, 0, 3, 1));
        assert_eq!(&row(&buf, 0)[..3], "ab ");
        let buf = render("ab中".as_bytes(), (1, 6), Rect::new(0, 0, 4, 1));
        assert_eq!(buf[(2, 0)].symbol(), "中");
        assert_eq!(buf[(3, 0)].symbol(), " ");
    }

    #[test]
    fn a_grid_wider_than_its_area_is_cut_on_the_right() {
        let buf = render(b"123456\r\nabcdef", (2, 6), Rect::new(0, 0, 3, 2));
        assert_eq!(row(&buf, 0), "123 ");
        assert_eq!(row(&buf, 1), "abc ");
    }

    /// An agent's screen, drawn for its own 8 rows, in a pane of 3: the rows that end at its
    /// prompt, the cursor on it.
    #[test]
    fn a_grid_taller_than_its_area_shows_the_rows_down_to_the_cursor() {
        let screen = b"header\r\n\r\nold output\r\nnew output\r\n> prompt";
        let buf = render(screen, (8, 12), Rect::new(0, 0, 12, 3));
        assert_eq!(row(&buf, 0), "old output   ");
        assert_eq!(row(&buf, 2), "> prompt     ");
        assert!(
            buf[(8, 2)].modifier.contains(Modifier::REVERSED),
            "the cursor"
        );
    }

    #[test]
    fn the_rows_end_with_the_last_one_written_and_keep_the_cursor_in_sight() {
        // A status line at the bottom, the cursor back at the prompt above it.
        let grid = |bytes: &[u8]| {
            let mut emulator = ScreenEmulator::new(8, 10);
            emulator.feed(bytes);
            emulator.grid()
        };
        let status = grid(b"\x1b[4;1H> prompt\x1b[6;1Hstatus\x1b[4;3H");
        assert_eq!(first_row(&status, 3), 3, "rows 4 to 6: prompt to status");
        assert_eq!(first_row(&status, 2), 3, "the cursor's row first");
        assert_eq!(first_row(&status, 8), 0, "all of it fits");
        assert_eq!(first_row(&grid(b""), 3), 0, "nothing written: the top");
        assert_eq!(first_row(&grid(b"\x1b[?25l\x1b[8;1Hlast"), 3), 5);
    }

    /// Moved by hand: the rows and columns asked for, the cursor where it falls among them,
    /// a wide character cut by the left edge a blank.
    #[test]
    fn a_grid_scrolled_by_hand_shows_from_its_top_and_left() {
        let mut emulator = ScreenEmulator::new(4, 8);
        emulator.feed("top row\r\nab中cdef\r\nthird\r\n> x".as_bytes());
        let grid = emulator.grid();
        let mut buf = Buffer::empty(Rect::new(0, 0, 4, 2));
        let (top, left) = (1, 3);
        ScreenWidget {
            grid: &grid,
            top,
            left,
        }
        .render(buf.area, &mut buf);
        assert_eq!(row(&buf, 0), " cde");
        assert_eq!(row(&buf, 1), "rd  ");
        let mut buf = Buffer::empty(Rect::new(0, 0, 4, 3));
        ScreenWidget {
            grid: &grid,
            top: 1,
            left: 1,
        }
        .render(buf.area, &mut buf);
        assert_eq!(row(&buf, 2), " x  ");
        assert!(
            buf[(2, 2)].modifier.contains(Modifier::REVERSED),
            "the cursor"
        );
    }
}
