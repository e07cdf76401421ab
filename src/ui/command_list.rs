//! The command list: name, state, runtime, how it ended, and badges.

use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::style::{Color, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Cell, Row, Table};

use super::{format, pane_block, style};
use crate::app::layout;
use crate::app::view::{FrameContent, Pane, ViewState};
use crate::model::output::one_line;
use crate::model::{Badge, Badges, CommandState, Model};

pub fn draw(
    frame: &mut Frame,
    area: Rect,
    model: &Model,
    view: &ViewState,
    content: &FrameContent,
) {
    let now_ms = content.now_ms;
    // At the time cursor the list is the recording as it was then: its title says when.
    let title = match &content.cursor {
        Some(c) => format!(
            "Commands at {}",
            format::offset_ms(c.at_ms.saturating_sub(model.started_ms))
        ),
        None => "Commands".into(),
    };
    let block: Block = pane_block(&title, view.focus == Pane::Commands);
    if model.commands.is_empty() {
        let hint = match (model.recorded, model.controllable) {
            (false, _) => Line::from(vec![
                Span::raw("No commands. Press "),
                Span::styled(" a ", style::KEY),
                Span::raw(" to launch one."),
            ]),
            (true, true) => Line::styled(
                "No live commands yet: they show up as they start.",
                style::DIM,
            ),
            (true, false) => Line::styled("No commands in this session.", style::DIM),
        };
        frame.render_widget(ratatui::widgets::Paragraph::new(hint).block(block), area);
        return;
    }
    let skip = layout::first_visible_command(view.selected, area);
    let rows = model.commands.iter().enumerate().skip(skip).map(|(i, c)| {
        let marker = if i == view.selected { "▶" } else { " " };
        let runtime = c
            .runtime_ms(now_ms)
            .map(format::duration_ms)
            .unwrap_or_default();
        let row = Row::new(vec![
            Cell::from(marker),
            Cell::from(one_line(&c.config.name)),
            Cell::from(Span::styled(c.status.label(), style::status(c.status))),
            Cell::from(runtime),
            Cell::from(Line::from(badges(c))),
        ]);
        if i == view.selected {
            row.style(style::SELECTED)
        } else {
            row
        }
    });
    let table = Table::new(rows, widths(model, area.width.saturating_sub(2)))
        .header(Row::new(vec!["", "NAME", "STATE", "TIME", ""]).style(style::DIM))
        .block(block);
    frame.render_widget(table, area);
}

/// Columns for a list `inner` cells wide. The state and the runtime are never cut (`running`
/// must not read `runnin` at 80×24); the name takes what it needs of the rest, up to all of
/// it, and the badges what is left.
fn widths(model: &Model, inner: u16) -> [Constraint; 5] {
    // "stopping", "exit 127", "SIGKILL"; "10.0s", "1m23s", "2h05m".
    const STATE: u16 = 8;
    const TIME: u16 = 5;
    // The marker, and one column between each two.
    let rest = inner.saturating_sub(1 + STATE + TIME + 4);
    let longest = model
        .commands
        .iter()
        .map(|c| format::text_width(&one_line(&c.config.name)))
        .max()
        .unwrap_or(0)
        .max(4) as u16;
    let name = longest.min(rest);
    [
        Constraint::Length(1),
        Constraint::Length(name),
        Constraint::Length(STATE),
        Constraint::Length(TIME),
        Constraint::Length(rest - name),
    ]
}

/// Short tags for what happened to a run beyond its exit status.
pub fn badges(c: &CommandState) -> Vec<Span<'static>> {
    let mut out = Vec::new();
    for badge in Badges::of(c).list() {
        let color = match badge {
            Badge::Timeout | Badge::Capped => Color::Yellow,
            Badge::Killed | Badge::ParentLost => Color::Red,
            Badge::Orphans(_) => Color::Magenta,
            Badge::Drained => Color::DarkGray,
        };
        out.push(Span::styled(badge.label(), Style::new().fg(color)));
        out.push(Span::raw(" "));
    }
    out
}
