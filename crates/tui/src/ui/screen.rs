//! The screen view of an output pane: the emulator's cells, cell for cell, in the pane. The
//! cells hold printable text only (the model checked each one); styles are the log's own.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::widgets::Widget;

use super::style;
use tether_model::screen::ScreenGrid;

/// A [`ScreenGrid`] drawn from the top-left corner of its area, with the program's cursor
/// marked (when it shows one); what does not fit is left out.
pub struct ScreenWidget<'a>(pub &'a ScreenGrid);

impl Widget for ScreenWidget<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let rows = self.0.rows.iter().take(area.height as usize);
        for (y, row) in (area.y..).zip(rows) {
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
        if let Some((row, col)) = self.0.cursor
            && row < area.height
            && col < area.width
        {
            let cell = &mut buf[(area.x + col, area.y + row)];
            cell.set_style(
                cell.style()
                    .patch(Style::new().add_modifier(Modifier::REVERSED)),
            );
        }
    }
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
        ScreenWidget(&grid).render(area, &mut buf);
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
    fn a_grid_larger_than_its_area_is_cut() {
        let buf = render(b"123456\r\nabcdef", (2, 6), Rect::new(0, 0, 3, 1));
        assert_eq!(row(&buf, 0), "123 ");
        assert_eq!(row(&buf, 1), "    ");
    }
}
