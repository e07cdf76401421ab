//! Where each pane goes, and which rows inside a pane show what. Pure geometry, shared by the
//! app (to size scrolling and hit-test the mouse) and the UI (to draw): one answer for both.

use ratatui::layout::{Constraint, Layout, Rect};

use super::view::Pane;

/// The smallest terminal the full layout fits in.
pub const MIN_WIDTH: u16 = 80;
pub const MIN_HEIGHT: u16 = 24;
/// Below this many columns or rows the screen is small (80×24): five panes side by side
/// would each be too narrow to read, so the list takes the screen, and the selected
/// command's panes take it in turn ([`areas`]).
pub const COMPACT_WIDTH: u16 = 100;
pub const COMPACT_HEIGHT: u16 = 28;
/// From this many columns the list takes a larger share of the width.
const WIDE: u16 = 160;

/// Whether a screen of `size` is small: the list and the command's panes take it in turn.
pub fn is_compact(size: Rect) -> bool {
    size.width < COMPACT_WIDTH || size.height < COMPACT_HEIGHT
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Areas {
    /// One row: the machine's CPU, memory, swap, load and processes.
    pub header: Rect,
    pub commands: Rect,
    pub tree: Rect,
    pub stdout: Rect,
    pub stderr: Rect,
    pub timeline: Rect,
    pub status: Rect,
}

impl Areas {
    pub fn of(mut self, pane: Pane) -> Rect {
        *self.of_mut(pane)
    }

    fn of_mut(&mut self, pane: Pane) -> &mut Rect {
        match pane {
            Pane::Commands => &mut self.commands,
            Pane::Tree => &mut self.tree,
            Pane::Stdout => &mut self.stdout,
            Pane::Stderr => &mut self.stderr,
            Pane::Timeline => &mut self.timeline,
        }
    }

    /// The pane under a screen cell, if any.
    pub fn pane_at(&self, column: u16, row: u16) -> Option<Pane> {
        Pane::ORDER.into_iter().find(|p| {
            let r = self.of(*p);
            r.width > 0 && column >= r.x && column < r.right() && row >= r.y && row < r.bottom()
        })
    }
}

/// Lays out the screen; `None` when the terminal is too small. With `zoom`, the `focus`ed
/// pane takes the whole screen between the header and the status bar. On a small screen
/// ([`is_compact`]) the list takes it while it has the focus, and the selected command's
/// panes (tree, timeline, stdout, stderr) while one of those has it.
pub fn areas(size: Rect, focus: Pane, zoom: bool) -> Option<Areas> {
    if size.width < MIN_WIDTH || size.height < MIN_HEIGHT {
        return None;
    }
    let [header, body, status] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(1),
        Constraint::Length(1),
    ])
    .areas(size);
    let mut areas = Areas {
        header,
        status,
        ..Areas::default()
    };
    let compact = is_compact(size);
    let zoom = (zoom || (compact && focus == Pane::Commands)).then_some(focus);
    if let Some(pane) = zoom {
        *areas.of_mut(pane) = body;
        return Some(areas);
    }
    if compact {
        // The command opened: the tree across the screen (its columns need the width), the
        // output below it, stderr and the timeline beside the output.
        let [top, bottom] = Layout::vertical(Constraint::from_percentages([35, 65])).areas(body);
        areas.tree = top;
        let [left, right] =
            Layout::horizontal(Constraint::from_percentages([55, 45])).areas(bottom);
        areas.stdout = left;
        [areas.stderr, areas.timeline] =
            Layout::vertical(Constraint::from_percentages([40, 60])).areas(right);
        return Some(areas);
    }
    // A wide screen gives the list more: its command text is what tells an agent's commands
    // apart, and at a third of 200 columns the other columns leave it a dozen.
    let list = if size.width >= WIDE { 42 } else { 34 };
    let [left, right] =
        Layout::horizontal(Constraint::from_percentages([list, 100 - list])).areas(body);
    [areas.commands, areas.timeline] =
        Layout::vertical(Constraint::from_percentages([45, 55])).areas(left);
    [areas.tree, areas.stdout, areas.stderr] =
        Layout::vertical(Constraint::from_percentages([30, 42, 28])).areas(right);
    Some(areas)
}

/// The first command the list shows so that the selected one is on screen (the border and
/// the header take three rows).
pub fn first_visible_command(selected: usize, list: Rect) -> usize {
    let visible = (list.height.saturating_sub(3) as usize).max(1);
    selected.saturating_sub(visible - 1)
}

/// The command on the list's row `row` of the screen, if a row of the list holds one.
pub fn command_at(selected: usize, list: Rect, row: u16, commands: usize) -> Option<usize> {
    // Rows start below the border and the header.
    let first_row = list.y + 2;
    if row < first_row || row >= list.bottom().saturating_sub(1) {
        return None;
    }
    let index = first_visible_command(selected, list) + (row - first_row) as usize;
    (index < commands).then_some(index)
}

/// Rows of the strip of all commands inside a timeline pane of `inner_height` rows.
pub fn strip_rows(inner_height: u16, commands: usize) -> u16 {
    (commands as u16 + 1).min(inner_height / 2)
}

/// Rows left for the selected command's events in a timeline pane at `area`.
pub fn timeline_event_rows(area: Rect, commands: usize) -> usize {
    let inner = area.height.saturating_sub(2);
    inner.saturating_sub(strip_rows(inner, commands)) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn too_small_has_no_layout() {
        assert_eq!(areas(Rect::new(0, 0, 79, 40), Pane::Commands, false), None);
        assert_eq!(areas(Rect::new(0, 0, 120, 23), Pane::Commands, false), None);
    }

    #[test]
    fn panes_tile_the_screen() {
        let a = areas(Rect::new(0, 0, 120, 40), Pane::Commands, false).unwrap();
        assert_eq!(a.header, Rect::new(0, 0, 120, 1));
        assert_eq!(a.commands.y, 1);
        assert_eq!(a.status, Rect::new(0, 39, 120, 1));
        assert_eq!(a.commands.x, 0);
        assert_eq!(a.tree.x, a.commands.right());
        assert_eq!(a.stderr.bottom(), 39);
        assert_eq!(
            a.pane_at(a.stdout.x + 1, a.stdout.y + 1),
            Some(Pane::Stdout)
        );
        let z = areas(Rect::new(0, 0, 120, 40), Pane::Stderr, true).unwrap();
        assert_eq!(z.stderr, Rect::new(0, 1, 120, 38));
        assert_eq!(z.stdout.width, 0);
    }

    #[test]
    fn a_small_screen_shows_the_list_or_the_command_opened() {
        let size = Rect::new(0, 0, 80, 24);
        let list = areas(size, Pane::Commands, false).unwrap();
        assert_eq!(
            list.commands,
            Rect::new(0, 1, 80, 22),
            "the list takes the body"
        );
        assert_eq!(list.stdout.width, 0);
        let opened = areas(size, Pane::Stdout, false).unwrap();
        assert_eq!(opened.commands.width, 0, "no list beside the command");
        assert_eq!(opened.tree.width, 80, "the tree's columns need the width");
        for pane in [Pane::Tree, Pane::Stdout, Pane::Stderr, Pane::Timeline] {
            let area = opened.of(pane);
            assert!(area.width >= 36 && area.height >= 5, "{pane:?}: {area:?}");
        }
        let zoomed = areas(size, Pane::Timeline, true).unwrap();
        assert_eq!(zoomed.timeline, Rect::new(0, 1, 80, 22));
        // Wide and tall enough, the list stays beside the command's panes.
        assert!(
            areas(Rect::new(0, 0, 100, 28), Pane::Stdout, false)
                .unwrap()
                .commands
                .width
                > 0
        );
    }

    #[test]
    fn a_click_on_the_list_names_the_command_under_it() {
        let list = Rect::new(0, 0, 40, 10);
        // Border (row 0), header (row 1), then commands.
        assert_eq!(command_at(0, list, 1, 3), None);
        assert_eq!(command_at(0, list, 2, 3), Some(0));
        assert_eq!(command_at(0, list, 4, 3), Some(2));
        assert_eq!(command_at(0, list, 5, 3), None);
        assert_eq!(command_at(0, list, 9, 30), None, "the bottom border");
        // Scrolled so that the selected command (20) is the last row shown.
        assert_eq!(command_at(20, list, 8, 30), Some(20));
    }
}
