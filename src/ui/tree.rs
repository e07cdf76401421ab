//! The process tree of the selected command: the broker, the command, its descendants and
//! any escapees, with what the sampler measured.

use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::style::{Color, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Paragraph, Row, Table};

use super::{format, pane_block, style};
use crate::app::view::{FrameContent, Pane, ViewState};
use crate::model::output::one_line;
use crate::model::{CommandState, Model};

pub fn draw(
    frame: &mut Frame,
    area: Rect,
    model: &Model,
    view: &ViewState,
    content: &FrameContent,
) {
    let focused = view.focus == Pane::Tree;
    let command = model.commands.get(view.selected);
    let block = pane_block(&title(command, !content.tree.is_empty()), focused);
    let run_start = command.and_then(|c| c.started_ms).unwrap_or(0);
    if content.tree.is_empty() {
        let text = match model.commands.get(view.selected) {
            Some(c) if c.status.is_active() => "sampling…",
            Some(_) => "no processes: the command is not running",
            None => "",
        };
        frame.render_widget(
            Paragraph::new(Span::styled(text, style::DIM)).block(block),
            area,
        );
        return;
    }
    let visible = area.height.saturating_sub(3) as usize;
    let selected = view.tree_selected.min(content.tree.len() - 1);
    let skip = selected.saturating_sub(visible.saturating_sub(1));
    let rows = content.tree.iter().enumerate().skip(skip).map(|(i, row)| {
        let p = &row.process;
        let elapsed = content.now_ms.saturating_sub(p.start_ms);
        let mut branch = "  ".repeat(row.depth);
        if row.depth > 0 {
            branch.push_str("└ ");
        }
        // The mark goes before the command line: the column cuts what is too long for it at
        // the right, and a long command line must not cut the one fact that matters here.
        let mut spans = vec![Span::raw(branch)];
        if row.escaped {
            spans.push(Span::styled("(escaped) ", Style::new().fg(Color::Magenta)));
        }
        spans.push(Span::raw(one_line(&p.argv.join(" "))));
        let command_cell = Cell::from(Line::from(spans));
        // A recorded process has no CPU or memory figures; its age is when it started.
        let (cpu, rss, age) = if p.state == '-' {
            (
                "-".to_string(),
                "-".to_string(),
                format!(
                    "+{}",
                    format::duration_ms(p.start_ms.saturating_sub(run_start))
                ),
            )
        } else {
            (
                format!("{:.1}", p.cpu_percent),
                format::compact_bytes(p.rss_bytes),
                format::duration_ms(elapsed),
            )
        };
        let cells = vec![
            Cell::from(p.pid.to_string()),
            Cell::from(p.state.to_string()),
            Cell::from(cpu),
            Cell::from(rss),
            Cell::from(age),
            command_cell,
        ];
        let row_widget = Row::new(cells);
        if focused && i == selected {
            row_widget.style(style::SELECTED)
        } else {
            row_widget
        }
    });
    let table = Table::new(
        rows,
        [
            Constraint::Length(7),
            Constraint::Length(2),
            Constraint::Length(6),
            Constraint::Length(7),
            Constraint::Length(7),
            Constraint::Min(10),
        ],
    )
    .header(Row::new(vec!["PID", "S", "CPU%", "RSS", "AGE", "COMMAND"]).style(style::DIM))
    .block(block);
    frame.render_widget(table, area);
}

/// `Process tree: NAME · COMMAND LINE`, so that the whole command the name stands for can be
/// read (zoom the pane for the widest view); once a run is over and the pane lists what the
/// broker saw, it says so.
fn title(command: Option<&CommandState>, listed: bool) -> String {
    let Some(command) = command else {
        return "Process tree".into();
    };
    let name = &command.config.name;
    let line = command.command_line();
    let mut title = format!("Process tree: {name}");
    // Before the command line, which the border may cut.
    if listed && !command.status.is_active() {
        title.push_str(" · every process seen during the run");
    }
    if !line.is_empty() && line != *name {
        title.push_str(&format!(" · {line}"));
    }
    title
}
