//! Rendering only: every function here borrows the model and the view state and draws.
//! Nothing here changes state or does I/O.

pub mod command_list;
pub mod dialog;
pub mod format;
pub mod header;
pub mod help;
pub mod list_columns;
pub mod output;
pub mod screen;
pub mod status_bar;
pub mod strip;
pub mod style;
pub mod timeline;
pub mod too_small;
pub mod tree;

use ratatui::Frame;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::Span;
use ratatui::widgets::{Block, BorderType, Borders};

use crate::app::keymap::Binding;
use crate::app::layout;
use crate::app::update::OnScreen;
use crate::app::view::{Dialog, FrameContent, Pane, ViewState};
use tether_model::Model;
use tether_model::output::one_line;
use tether_model::output::style::is_unsafe_on_screen;
use tether_protocol::protocol::Stream;

/// What a pane is drawn from: the model, the view state and the frame's content.
#[derive(Clone, Copy)]
pub struct Scene<'a>(pub &'a Model, pub &'a ViewState, pub &'a FrameContent);

pub fn draw(
    frame: &mut Frame,
    model: &Model,
    view: &ViewState,
    content: &FrameContent,
    bindings: &[Binding],
) {
    draw_screen(frame, Scene(model, view, content), bindings);
    scrub(frame.buffer_mut());
}

fn draw_screen(frame: &mut Frame, scene: Scene, bindings: &[Binding]) {
    let Scene(model, view, content) = scene;
    let size = frame.area();
    let Some(areas) = layout::areas(size, view.focus, view.zoom) else {
        too_small::draw(frame, size, model.running());
        draw_dialog(frame, size, scene, bindings);
        return;
    };
    let machine = content.machine.as_ref();
    header::draw(
        frame,
        areas.header,
        machine,
        view.cores,
        model.mode.is_finished(),
    );
    if areas.commands.width > 0 {
        command_list::draw(frame, areas.commands, scene);
    }
    if areas.tree.width > 0 {
        tree::draw(frame, areas.tree, scene);
    }
    for stream in Stream::BOTH {
        let area = areas.of(Pane::of_stream(stream));
        if area.width > 0 {
            output::draw(frame, area, scene, stream);
        }
    }
    if areas.timeline.width > 0 {
        timeline::draw(frame, areas.timeline, scene);
    }
    status_bar::draw(frame, areas.status, scene, layout::is_compact(size));
    draw_dialog(frame, size, scene, bindings);
}

fn draw_dialog(
    frame: &mut Frame,
    size: Rect,
    Scene(model, view, content): Scene,
    bindings: &[Binding],
) {
    match &view.dialog {
        Some(Dialog::Help) => {
            let on = OnScreen {
                list: &content.list,
                compact: layout::is_compact(size),
            };
            help::draw(frame, size, model, on, bindings)
        }
        Some(dialog) => dialog::draw(frame, size, model, dialog),
        None => {}
    }
}

/// The last line of defence, for text that a widget was handed without going through
/// `one_line` (which is how text from outside is meant to arrive, shown with a placeholder):
/// no cell reaches the terminal holding a control or bidi character. ratatui gives those no
/// column and appends them to the cell before, so taking them out moves nothing; a cell left
/// empty took a column and keeps it with the placeholder.
fn scrub(buffer: &mut Buffer) {
    for cell in &mut buffer.content {
        if cell.symbol().chars().any(is_unsafe_on_screen) {
            let kept: String = cell
                .symbol()
                .chars()
                .filter(|&c| !is_unsafe_on_screen(c))
                .collect();
            cell.set_symbol(if kept.is_empty() { "\u{fffd}" } else { &kept });
        }
    }
}

/// A drawn buffer as text, a line per row: what a snapshot of a screen compares.
pub fn buffer_text(buffer: &Buffer) -> String {
    let mut out = String::new();
    for y in 0..buffer.area.height {
        for x in 0..buffer.area.width {
            out.push_str(buffer[(x, y)].symbol());
        }
        out.push('\n');
    }
    out
}

/// A pane's frame, brighter when it has the focus, `width` columns wide: a title longer
/// than the frame holds ends in `…`.
pub fn pane_block(title: &str, focused: bool, width: u16) -> Block<'static> {
    let (border, look) = match focused {
        true => (BorderType::Thick, style::FOCUSED_BORDER),
        false => (BorderType::Rounded, style::BORDER),
    };
    Block::new()
        .borders(Borders::ALL)
        .border_type(border)
        .border_style(look)
        .title(Span::raw(format!(
            " {} ",
            // Two columns of border and a space either side.
            format::truncate(&one_line(title), usize::from(width.saturating_sub(4)))
        )))
}

/// A rectangle of at most `width`×`height` in the middle of `area`.
pub fn centered(area: Rect, width: u16, height: u16) -> Rect {
    let width = width.min(area.width);
    let height = height.min(area.height);
    Rect::new(
        area.x + (area.width - width) / 2,
        area.y + (area.height - height) / 2,
        width,
        height,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::text::Line;
    use ratatui::widgets::Widget;

    #[test]
    fn scrub_takes_controls_and_bidi_out_of_every_cell() {
        let mut buffer = Buffer::empty(Rect::new(0, 0, 12, 1));
        // Handed to a widget raw, as a path that forgot `one_line` would.
        Line::raw("ab\u{202e}c\u{2066}d\u{9b}e").render(buffer.area, &mut buffer);
        buffer[(8, 0)].set_symbol("\u{1b}");
        scrub(&mut buffer);
        let symbols: String = buffer.content.iter().map(|c| c.symbol()).collect();
        assert!(
            !symbols.chars().any(is_unsafe_on_screen),
            "left on screen: {symbols:?}"
        );
        // ratatui gives bidi and C1 controls no column (it drops them itself since 0.30); the
        // escape planted in a cell is scrubbed.
        assert_eq!(symbols, "abcde   \u{fffd}   ");
    }
}
