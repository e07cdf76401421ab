//! Where each pane goes. Pure: the app uses it to size scrolling, the UI to draw.

use ratatui::layout::{Constraint, Direction, Layout, Rect};

use crate::app::view::Pane;

/// The smallest terminal the full layout fits in.
pub const MIN_WIDTH: u16 = 80;
pub const MIN_HEIGHT: u16 = 24;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Areas {
    pub commands: Rect,
    pub tree: Rect,
    pub stdout: Rect,
    pub stderr: Rect,
    pub timeline: Rect,
    pub status: Rect,
}

impl Areas {
    pub fn of(&self, pane: Pane) -> Rect {
        match pane {
            Pane::Commands => self.commands,
            Pane::Tree => self.tree,
            Pane::Stdout => self.stdout,
            Pane::Stderr => self.stderr,
            Pane::Timeline => self.timeline,
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

/// Lays out the screen; `None` when the terminal is too small. With `zoom`, the focused
/// pane takes the whole screen above the status bar.
pub fn areas(size: Rect, zoom: Option<Pane>) -> Option<Areas> {
    if size.width < MIN_WIDTH || size.height < MIN_HEIGHT {
        return None;
    }
    let [body, status] = Layout::vertical([Constraint::Min(1), Constraint::Length(1)]).areas(size);
    let mut areas = Areas {
        status,
        ..Areas::default()
    };
    if let Some(pane) = zoom {
        match pane {
            Pane::Commands => areas.commands = body,
            Pane::Tree => areas.tree = body,
            Pane::Stdout => areas.stdout = body,
            Pane::Stderr => areas.stderr = body,
            Pane::Timeline => areas.timeline = body,
        }
        return Some(areas);
    }
    let [left, right] = Layout::default()
        .direction(Direction::Horizontal)
        .constraints([Constraint::Percentage(34), Constraint::Percentage(66)])
        .areas(body);
    [areas.commands, areas.timeline] =
        Layout::vertical([Constraint::Percentage(45), Constraint::Percentage(55)]).areas(left);
    [areas.tree, areas.stdout, areas.stderr] = Layout::vertical([
        Constraint::Percentage(30),
        Constraint::Percentage(42),
        Constraint::Percentage(28),
    ])
    .areas(right);
    Some(areas)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn too_small_has_no_layout() {
        assert_eq!(areas(Rect::new(0, 0, 79, 40), None), None);
        assert_eq!(areas(Rect::new(0, 0, 120, 23), None), None);
    }

    #[test]
    fn panes_tile_the_screen() {
        let a = areas(Rect::new(0, 0, 120, 40), None).unwrap();
        assert_eq!(a.status, Rect::new(0, 39, 120, 1));
        assert_eq!(a.commands.x, 0);
        assert_eq!(a.tree.x, a.commands.right());
        assert_eq!(a.stderr.bottom(), 39);
        assert_eq!(
            a.pane_at(a.stdout.x + 1, a.stdout.y + 1),
            Some(Pane::Stdout)
        );
        let z = areas(Rect::new(0, 0, 120, 40), Some(Pane::Stderr)).unwrap();
        assert_eq!(z.stderr, Rect::new(0, 0, 120, 39));
        assert_eq!(z.stdout.width, 0);
    }
}
