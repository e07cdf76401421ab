//! The command list: name, state, runtime, how it ended, and badges.

use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::style::{Color, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Cell, Row, Table};

use super::{format, pane_block, style};
use crate::app::view::{Pane, ViewState};
use crate::model::output::one_line;
use crate::model::{CommandState, Model};

pub fn draw(frame: &mut Frame, area: Rect, model: &Model, view: &ViewState, now_ms: u64) {
    let block: Block = pane_block("Commands", view.focus == Pane::Commands);
    if model.commands.is_empty() {
        let hint = if model.recorded {
            Line::from(
                "No live commands yet: each appears here as it starts (tether exec, the shell shim, agents, other tethers).",
            )
        } else {
            Line::from(vec![
                Span::raw("No commands. Press "),
                Span::styled(" a ", style::KEY),
                Span::raw(" to launch one."),
            ])
        };
        frame.render_widget(ratatui::widgets::Paragraph::new(hint).block(block), area);
        return;
    }
    let skip = first_visible(view.selected, area);
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
    // Names take what they need (`session/name` in a watch), leaving room for the rest.
    let longest = model
        .commands
        .iter()
        .map(|c| crate::model::output::text_width(&one_line(&c.config.name)))
        .max()
        .unwrap_or(0) as u16;
    let name_width = longest.clamp(8, area.width.saturating_sub(1 + 9 + 7 + 14).max(8));
    let table = Table::new(
        rows,
        [
            Constraint::Length(1),
            Constraint::Length(name_width),
            Constraint::Length(9),
            Constraint::Length(7),
            Constraint::Min(0),
        ],
    )
    .header(Row::new(vec!["", "NAME", "STATE", "TIME", ""]).style(style::DIM))
    .block(block);
    frame.render_widget(table, area);
}

/// The first command shown so that the selected one is on screen (border and header take
/// three rows).
pub fn first_visible(selected: usize, area: Rect) -> usize {
    let visible = (area.height.saturating_sub(3) as usize).max(1);
    selected.saturating_sub(visible - 1)
}

/// Short tags for what happened to a run beyond its exit status.
pub fn badges(c: &CommandState) -> Vec<Span<'static>> {
    let mut out = Vec::new();
    let mut push = |text: String, color: Color| {
        out.push(Span::styled(text, Style::new().fg(color)));
        out.push(Span::raw(" "));
    };
    if c.response_timeout {
        push("timeout".into(), Color::Yellow);
    }
    if c.hard_killed {
        push("killed".into(), Color::Red);
    }
    if c.parent_lost.is_some() {
        push("parent-lost".into(), Color::Red);
    }
    if c.orphans_reaped > 0 {
        push(format!("orphans:{}", c.orphans_reaped), Color::Magenta);
    }
    if c.capped.iter().any(Option::is_some) {
        push("capped".into(), Color::Yellow);
    }
    out
}
