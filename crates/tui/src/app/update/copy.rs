//! The output panes' own keys: the screen view (`v`), a selection of lines (`V`, moved with the
//! usual keys, `Esc` drops it) and copying (`y`). Pure, as [`super::update`] is: what must be
//! read and written comes back as an [`Effect`].

use super::{Effect, Geometry, focused_stream};
use crate::app::action::Action;
use crate::app::view::{LineSelection, OutputView, ViewState};
use tether_protocol::protocol::Stream;

/// Handles `action` if it is one of these keys, or a move while the focused pane has a
/// selection; `None` leaves it to the rest of `update`.
pub(super) fn update_output_keys(
    view: &mut ViewState,
    geometry: &Geometry,
    action: &Action,
) -> Option<Vec<Effect>> {
    let stream = focused_stream(view);
    let i = stream as usize;
    let name = stream.name();
    let total = geometry.total_lines[i];
    let current = current_line(geometry, stream);
    let out = &mut view.outputs[i];
    let message = match action {
        Action::ToggleScreen => {
            out.screen = !out.screen;
            out.selection = None;
            if out.screen {
                format!("{name}: the screen, as a terminal shows it (v: the line log)")
            } else {
                format!("{name}: the line log")
            }
        }
        Action::SelectLines if out.screen => {
            format!("{name}: lines are selected in the line log (v goes back to it)")
        }
        Action::SelectLines if out.selection.is_some() => {
            out.selection = None;
            "selection dropped".into()
        }
        Action::SelectLines => match current {
            None => format!("{name}: nothing to select yet"),
            Some(line) => {
                out.selection = Some(LineSelection {
                    anchor: line,
                    cursor: line,
                });
                hold_still(out, geometry, stream);
                "selecting lines: ↑ ↓ PgUp PgDn g G extend, y copies, Esc drops".into()
            }
        },
        Action::Copy if out.screen => return Some(vec![Effect::CopyScreen(stream)]),
        Action::Copy => {
            let lines = match (out.selection.take(), out.matched, current) {
                (Some(selection), _, _) => Some(selection.lines()),
                (None, Some(line), _) if line < total => Some(line..line + 1),
                (None, _, Some(line)) => Some(line..line + 1),
                (None, _, None) => None,
            };
            match lines {
                Some(lines) => return Some(vec![Effect::CopyLines { stream, lines }]),
                None => format!("{name}: nothing to copy"),
            }
        }
        // A search finds lines: it shows them in the line log.
        Action::Search | Action::SearchNext | Action::SearchPrev if out.screen => {
            out.screen = false;
            return None;
        }
        Action::Cancel if out.selection.is_some() => {
            out.selection = None;
            "selection dropped".into()
        }
        Action::Down
        | Action::Up
        | Action::PageDown
        | Action::PageUp
        | Action::Top
        | Action::Bottom
            if view.focus.stream().is_some() && out.selection.is_some() =>
        {
            let delta = super::step_of(action, super::page_size(view.focus, geometry));
            move_selection(out, geometry, stream, delta);
            return Some(Vec::new());
        }
        _ => return None,
    };
    view.say(message);
    Some(Vec::new())
}

/// The line `y` copies when nothing is selected and no search matched: the last line on
/// screen (the newest while following). `None` when the stream has no lines.
fn current_line(geometry: &Geometry, stream: Stream) -> Option<usize> {
    let i = stream as usize;
    let last = geometry.total_lines[i].checked_sub(1)?;
    Some(geometry.last_shown[i].unwrap_or(last).min(last))
}

/// Stops following, keeping the lines on screen where they are.
fn hold_still(out: &mut OutputView, geometry: &Geometry, stream: Stream) {
    let i = stream as usize;
    if out.follow {
        out.top = geometry.total_lines[i].saturating_sub(geometry.output_rows[i]);
        out.follow = false;
    }
}

/// Moves the selection's moving end by `delta` lines and scrolls it into view.
fn move_selection(out: &mut OutputView, geometry: &Geometry, stream: Stream, delta: i64) {
    let i = stream as usize;
    let Some(selection) = out.selection.as_mut() else {
        return;
    };
    let last = geometry.total_lines[i].saturating_sub(1);
    let cursor = (selection.cursor as i64)
        .saturating_add(delta)
        .clamp(0, last as i64) as usize;
    selection.cursor = cursor;
    hold_still(out, geometry, stream);
    let rows = geometry.output_rows[i].max(1);
    if cursor < out.top {
        out.top = cursor;
    } else if cursor >= out.top + rows {
        out.top = cursor + 1 - rows;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::update::update;
    use crate::app::view::Pane;
    use tether_model::Mode;
    use tether_model::Model;

    fn model() -> Model {
        Model {
            session_id: "s".into(),
            session_dir: "/nonexistent".into(),
            started_ms: 0,
            commands: Vec::new(),
            mode: Mode::Live,
        }
    }

    fn geometry(total: usize, rows: usize, last_shown: Option<usize>) -> Geometry {
        Geometry {
            output_rows: [rows, rows],
            total_lines: [total, 0],
            last_shown: [last_shown, None],
            ..Geometry::default()
        }
    }

    fn stdout_focused() -> ViewState {
        ViewState {
            focus: Pane::Stdout,
            ..ViewState::default()
        }
    }

    #[test]
    fn v_toggles_the_screen_view_of_the_focused_pane() {
        let mut view = stdout_focused();
        let g = geometry(10, 5, Some(9));
        assert!(update(&model(), &mut view, &g, Action::ToggleScreen).is_empty());
        assert!(view.outputs[0].screen && !view.outputs[1].screen);
        assert!(view.message.as_deref().unwrap().contains("screen"));
        // y in the screen view copies the screen.
        assert_eq!(
            update(&model(), &mut view, &g, Action::Copy),
            vec![Effect::CopyScreen(Stream::Stdout)]
        );
        update(&model(), &mut view, &g, Action::ToggleScreen);
        assert!(!view.outputs[0].screen);
    }

    #[test]
    fn y_copies_the_match_else_the_last_line_on_screen() {
        let mut view = stdout_focused();
        let g = geometry(100, 10, Some(41));
        assert_eq!(
            update(&model(), &mut view, &g, Action::Copy),
            vec![Effect::CopyLines {
                stream: Stream::Stdout,
                lines: 41..42
            }]
        );
        view.outputs[0].matched = Some(7);
        assert_eq!(
            update(&model(), &mut view, &g, Action::Copy),
            vec![Effect::CopyLines {
                stream: Stream::Stdout,
                lines: 7..8
            }]
        );
        // Nothing to copy in an empty stream (stderr, unfocused, is the fallback).
        let mut view = ViewState {
            focus: Pane::Stderr,
            ..ViewState::default()
        };
        assert!(update(&model(), &mut view, &g, Action::Copy).is_empty());
        assert!(view.message.unwrap().contains("nothing to copy"));
    }

    #[test]
    fn a_selection_grows_with_moves_scrolls_along_and_is_copied() {
        let mut view = stdout_focused();
        let g = geometry(100, 10, Some(99));
        update(&model(), &mut view, &g, Action::SelectLines);
        let out = &view.outputs[0];
        assert_eq!(
            out.selection,
            Some(LineSelection {
                anchor: 99,
                cursor: 99
            })
        );
        assert!(!out.follow);
        assert_eq!(out.top, 90);
        for _ in 0..3 {
            update(&model(), &mut view, &g, Action::Up);
        }
        update(&model(), &mut view, &g, Action::PageUp);
        let out = &view.outputs[0];
        assert_eq!(out.selection.unwrap().lines(), 86..100);
        // The moving end stays on screen.
        assert_eq!(out.top, 86);
        update(&model(), &mut view, &g, Action::Bottom);
        assert_eq!(view.outputs[0].selection.unwrap().lines(), 99..100);
        update(&model(), &mut view, &g, Action::Top);
        assert_eq!(view.outputs[0].top, 0);
        assert_eq!(
            update(&model(), &mut view, &g, Action::Copy),
            vec![Effect::CopyLines {
                stream: Stream::Stdout,
                lines: 0..100
            }]
        );
        assert_eq!(view.outputs[0].selection, None);
    }

    #[test]
    fn esc_or_v_again_drops_a_selection() {
        let mut view = stdout_focused();
        let g = geometry(5, 10, Some(4));
        update(&model(), &mut view, &g, Action::SelectLines);
        assert!(view.outputs[0].selection.is_some());
        update(&model(), &mut view, &g, Action::Cancel);
        assert_eq!(view.outputs[0].selection, None);
        update(&model(), &mut view, &g, Action::SelectLines);
        update(&model(), &mut view, &g, Action::SelectLines);
        assert_eq!(view.outputs[0].selection, None);
        // Without a selection, moves scroll as before.
        update(&model(), &mut view, &g, Action::Up);
        assert_eq!(view.outputs[0].selection, None);
    }

    #[test]
    fn a_search_goes_back_to_the_line_log() {
        let mut view = stdout_focused();
        view.outputs[0].screen = true;
        view.outputs[0].search = Some("x".into());
        let g = geometry(5, 10, Some(4));
        let effects = update(&model(), &mut view, &g, Action::SearchNext);
        assert!(!view.outputs[0].screen);
        assert_eq!(
            effects,
            vec![Effect::Search {
                stream: Stream::Stdout,
                forward: true
            }]
        );
    }

    #[test]
    fn moves_in_other_panes_leave_a_selection_alone() {
        let mut view = stdout_focused();
        let g = geometry(50, 10, Some(49));
        update(&model(), &mut view, &g, Action::SelectLines);
        view.focus = Pane::Tree;
        update(&model(), &mut view, &g, Action::Up);
        assert_eq!(view.outputs[0].selection.unwrap().cursor, 49);
    }
}
