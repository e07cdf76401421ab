//! The command list: under session headers (when it lists more than one session), each
//! command's number, name, state, runtime, CPU, memory, start and command text, with badges.
//! Only the rows on screen are formatted: the rows' order comes ready in the frame content.

use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Cell, Row, Table};
use tether_model::Mode;

use super::list_columns::{self, Column};
use super::{Scene, format, pane_block, style};
use crate::app::layout;
use crate::app::list::{Counts, ListFilter, ListRow, ListSort, SessionGroup};
use crate::app::view::{FrameContent, Pane, ViewState};
use tether_model::output::one_line;
use tether_model::{Badge, Badges, CommandIndex, CommandState, Model, Status};
use tether_protocol::protocol::AttentionKind;

const HEADER: Style = Style::new().fg(Color::Cyan).add_modifier(Modifier::BOLD);
/// What needs the operator: the colour of its badge and counts.
const NEEDS_YOU: Style = Style::new().fg(Color::Yellow);

pub fn draw(frame: &mut Frame, area: Rect, Scene(model, view, content): Scene) {
    let list = &*content.list;
    let room = area.width.saturating_sub(4) as usize;
    let block: Block = pane_block(
        &title(model, view, content, room),
        view.focus == Pane::Commands,
        area.width,
    );
    let inner = area.width.saturating_sub(2) as usize;
    if model.commands.is_empty() {
        let hint = match model.mode {
            Mode::Live => vec![
                Span::raw("No commands. Press "),
                Span::styled(" a ", style::KEY),
                Span::raw(" to launch one."),
            ],
            Mode::Watched => vec![Span::styled(
                "No live commands yet: they show up as they start.",
                style::DIM,
            )],
            Mode::Recorded(_) => vec![Span::styled("No commands in this session.", style::DIM)],
        };
        // Wrapped, not cut: the list is a third of a wide screen.
        let hint: Vec<Line> = (format::wrap_spans(&hint, inner).into_iter())
            .map(Line::from)
            .collect();
        frame.render_widget(ratatui::widgets::Paragraph::new(hint).block(block), area);
        return;
    }
    let columns = list_columns::layout(inner, list.name_width, list.number_width, list.state_width);
    let cursor = list.cursor_row(view.selected);
    let skip = layout::first_visible_command(cursor.unwrap_or(0), area);
    let visible = area.height.saturating_sub(3) as usize;
    // A watch the operator took from following (a key, `g`, a stop) says what came in below
    // it, and how to follow again.
    let below = list.rows.len().saturating_sub(skip + visible);
    let block = if below > 0 && view.list_moved && matches!(model.mode, Mode::Watched) {
        // By CPU the followed command is listed first, where Home goes.
        let key = match view.list.sort {
            ListSort::Cpu => "Home",
            ListSort::Start => "End",
        };
        let more = format!(" ↓ {below} more · {key}: follow ");
        block.title_bottom(Line::from(more).right_aligned())
    } else {
        block
    };
    let rows = list.rows.iter().enumerate().skip(skip).take(visible);
    let rows = rows.map(|(row, entry)| {
        let selected = Some(row) == cursor;
        let drawn = match *entry {
            // Drawn over the row below: a header spans the columns.
            ListRow::Session(_) | ListRow::Setup(_) => Row::new(Vec::<Cell>::new()),
            ListRow::Command(id) => {
                let started = list
                    .session_of(id)
                    .map_or(model.started_ms, |s| s.started_ms);
                let command = &model.commands[id];
                Row::new(columns.iter().map(|&(column, width)| {
                    cell(column, width, id, command, started, selected, content)
                }))
            }
        };
        if selected {
            drawn.style(style::SELECTED)
        } else {
            drawn
        }
    });
    let widths = columns
        .iter()
        .map(|(_, width)| Constraint::Length(*width as u16));
    let titles = columns.iter().map(|(column, _)| column.title());
    let table = Table::new(rows, widths)
        .header(Row::new(titles).style(style::DIM))
        .block(block);
    frame.render_widget(table, area);
    let first_row = area.y + 2;
    for (row, entry) in list.rows.iter().enumerate().skip(skip).take(visible) {
        let y = first_row + (row - skip) as u16;
        let line = match *entry {
            ListRow::Session(at) => session_line(&list.sessions[at], Some(row) == cursor, inner),
            ListRow::Setup(at) => setup_line(list.sessions[at].setup_folded, inner),
            ListRow::Command(_) => continue,
        };
        frame.render_widget(line, Rect::new(area.x + 1, y, inner as u16, 1));
    }
    if list.rows.is_empty() {
        let empty = match view.list.filter {
            ListFilter::NeedsYou => "Nothing needs you now (F: all)".to_string(),
            filter => format!("No {} commands (F: all)", filter.label()),
        };
        let at = Rect::new(area.x + 2, area.y + 2, area.width.saturating_sub(4), 1);
        let empty = Line::styled(format::truncate(&empty, at.width.into()), style::DIM);
        frame.render_widget(empty, at);
    }
}

/// `Commands 1000 · 2 running · 4 failed`; with a filter, what it shows of how many; at the
/// time cursor, the moment the list is of. Shorter where `room` columns do not hold it.
fn title(model: &Model, view: &ViewState, content: &FrameContent, room: usize) -> String {
    let title = match &content.cursor {
        Some(c) => format!(
            "Commands at {}",
            format::offset_ms(c.at_ms.saturating_sub(model.started_ms))
        ),
        None => "Commands".into(),
    };
    if model.commands.is_empty() {
        return title;
    }
    let Counts {
        running,
        failed,
        needs_you,
        total,
    } = content.list.counts;
    // Said only when something needs the operator (most of the time nothing does), and
    // not again under the needs-you filter, whose title says it.
    let needing = if needs_you > 0 && view.list.filter != ListFilter::NeedsYou {
        format!(" · {}", needs_you_count(needs_you))
    } else {
        String::new()
    };
    // At the cursor, the moment and the total are two numbers: apart.
    let lead = if content.cursor.is_some() {
        " · "
    } else {
        " "
    };
    let counts = match view.list.filter {
        ListFilter::All => format!("{lead}{total} · {running} running · {failed} failed"),
        ListFilter::Running => format!(": running {running} of {total} · {failed} failed"),
        ListFilter::Failed => format!(": failed {failed} of {total} · {running} running"),
        ListFilter::NeedsYou => format!(": needs you {needs_you} of {total} · {running} running"),
    };
    // The filtered count alone, in the same words as the long title.
    let short = match view.list.filter {
        ListFilter::All => format!("{lead}{total} · {running} run · {failed} fail"),
        ListFilter::Running => format!(": running {running} of {total}"),
        ListFilter::Failed => format!(": failed {failed} of {total}"),
        ListFilter::NeedsYou => format!(": needs you {needs_you} of {total}"),
    };
    let by_cpu = view.list.sort == ListSort::Cpu;
    let sort = if by_cpu { " · by CPU" } else { "" };
    let mut candidates = vec![format!("{title}{counts}{needing}{sort}")];
    // Live, what needs the operator goes last of all: the counts shorten first, then go
    // (the failed before the total). A recorded session keeps its counts instead.
    let live = matches!(model.mode, Mode::Live | Mode::Watched);
    if live && !needing.is_empty() {
        let (fewer, fewest) = match view.list.filter {
            ListFilter::All => (
                format!("{lead}{total} · {failed} fail"),
                format!("{lead}{total}"),
            ),
            // The filter's own count alone, without the total.
            ListFilter::Running => (short.clone(), format!(": running {running}")),
            ListFilter::Failed => (short.clone(), format!(": failed {failed}")),
            ListFilter::NeedsYou => (short.clone(), short.clone()),
        };
        candidates.extend([
            format!("{title}{counts}{needing}"),
            format!("{title}{short}{needing}"),
            format!("{title}{fewer}{needing}"),
            format!("{title}{fewest}{needing}"),
        ]);
    }
    candidates.extend([format!("{title}{counts}{sort}"), format!("{title}{short}")]);
    let fits = |text: &String| format::text_width(text) <= room;
    if let Some(fitting) = candidates.into_iter().find(fits) {
        fitting
    } else if content.cursor.is_some() {
        // The moment matters more than the counts.
        title
    } else if view.list.filter == ListFilter::All {
        format!("{title} {total}")
    } else {
        format!("{title}{short}")
    }
}

/// `1 needs you`, `3 need you`.
fn needs_you_count(n: usize) -> String {
    format::count(n, "needs you", "need you")
}

/// `  2 set-up shells (S: show)`: an agent's own shells that ended well, in one dim row
/// `width` columns wide.
fn setup_line(count: usize, width: usize) -> Line<'static> {
    let text = format!(
        "  {} (S: show)",
        format::count(count, "set-up shell", "set-up shells")
    );
    Line::styled(format::truncate(&text, width), style::DIM)
}

/// `▾ 20260101-abcd  40 commands · 2 running · 1 failed`, `▸` when folded, cut to `width`
/// columns with a `…`.
fn session_line(session: &SessionGroup, selected: bool, width: usize) -> Line<'static> {
    let marker = if selected { "▶" } else { " " };
    let mark = if session.folded { "▸" } else { "▾" };
    let Counts {
        running,
        failed,
        needs_you,
        total,
    } = session.counts;
    let mut spans = vec![
        Span::raw(format!("{marker} ")),
        Span::styled(format!("{mark} {} ", one_line(&session.name)), HEADER),
        Span::styled(
            format!(
                " {} · {running} running",
                format::count(total, "command", "commands")
            ),
            style::DIM,
        ),
    ];
    let failed_style = if failed > 0 && !selected {
        Style::new().fg(Color::Red)
    } else {
        style::DIM
    };
    spans.push(Span::styled(format!(" · {failed} failed"), failed_style));
    if needs_you > 0 {
        let style = if selected { style::DIM } else { NEEDS_YOU };
        spans.push(Span::styled(
            format!(" · {}", needs_you_count(needs_you)),
            style,
        ));
    }
    let line = Line::from(format::cut_spans(spans, width));
    if selected {
        line.style(style::SELECTED)
    } else {
        line
    }
}

fn cell(
    column: Column,
    width: usize,
    id: CommandIndex,
    c: &CommandState,
    session_start: u64,
    selected: bool,
    content: &FrameContent,
) -> Cell<'static> {
    let dash = || Cell::from(Span::styled("-", style::DIM));
    let live = c.status.is_active();
    match column {
        Column::Marker => Cell::from(if selected { "▶" } else { " " }),
        // A command's number is its journal directory's, given when it starts: one that has
        // not started has none yet (its place in the list would be another's number).
        Column::Number => match c.id() {
            Some(command) => Cell::from(format!("#{}", command.number)),
            None if c.status == Status::Idle => dash(),
            None => Cell::from(format!("#{}", id + 1)),
        },
        Column::Name => Cell::from(format::fit(&format::title(c, width), width)),
        // Cut only where the list is narrow and the state is a long one (`list_columns`).
        Column::State => Cell::from(Span::styled(
            format::truncate(&c.short_label(), width),
            style::state(c),
        )),
        Column::Time => Cell::from(
            c.runtime_ms(content.now_ms)
                .map(format::duration_ms)
                .unwrap_or_default(),
        ),
        Column::Cpu => match (live, c.cpu_percent, c.cpu_ms) {
            (true, Some(percent), _) => Cell::from(cpu_percent(percent)),
            (false, _, Some(ms)) => Cell::from(format::duration_ms(ms)),
            _ => dash(),
        },
        Column::Rss => match (live, c.rss_bytes, c.peak_rss_bytes) {
            (true, Some(bytes), _) | (false, _, Some(bytes)) => {
                Cell::from(format::compact_bytes(bytes))
            }
            _ => dash(),
        },
        Column::Start => match c.started_ms {
            Some(at) => Cell::from(format::offset_ms(at.saturating_sub(session_start))),
            None => dash(),
        },
        Column::Command => {
            let mut spans = badges(c);
            let text = c.command_line();
            // A script can be long: only what the column shows is sanitized and measured.
            let text: String = text.chars().take(width * 4 + 1).collect();
            spans.push(Span::styled(one_line(&text), style::DIM));
            Cell::from(Line::from(format::cut_spans(spans, width)))
        }
    }
}

/// `99.9%` under a hundred, `398%` above (a command's processes on several cores).
fn cpu_percent(percent: f32) -> String {
    if percent >= 99.95 {
        format!("{percent:.0}%")
    } else {
        format!("{percent:.1}%")
    }
}

/// What needs the operator about a run, first of its tags: `needs input`, `quiet`,
/// `runaway` while the episode lasts, `finished` for a long run that ended well. A `failed`
/// mark has no tag: the state column says it, in red.
pub fn attention_badge(c: &CommandState) -> Option<Span<'static>> {
    let mark = c.needs_you()?;
    let style = match mark.kind {
        AttentionKind::NeedsInput | AttentionKind::Runaway => {
            NEEDS_YOU.add_modifier(Modifier::BOLD)
        }
        AttentionKind::Quiet => NEEDS_YOU,
        AttentionKind::Finished => Style::new().fg(Color::Green),
        AttentionKind::Failed => return None,
    };
    Some(Span::styled(mark.words(), style))
}

/// Short tags for what happened to a run beyond its exit status.
pub fn badges(c: &CommandState) -> Vec<Span<'static>> {
    let mut out = Vec::new();
    if let Some(badge) = attention_badge(c) {
        out.push(badge);
        out.push(Span::raw(" "));
    }
    for badge in Badges::of(c).list() {
        let color = match badge {
            Badge::Timeout | Badge::Capped => Color::Yellow,
            Badge::Killed | Badge::ParentLost => Color::Red,
            Badge::Orphans(_) => Color::Magenta,
            Badge::Stragglers | Badge::Kept(_) | Badge::Setup => Color::DarkGray,
            // Finished, by its own final line: not a failure.
            Badge::Drained => Color::Cyan,
        };
        out.push(Span::styled(badge.label(), Style::new().fg(color)));
        out.push(Span::raw(" "));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::list::ListRows;
    use tether_config::CommandConfig;
    use tether_protocol::protocol::CommandSpec;

    /// A watch with nothing yet says so whole where the list is a third of the screen.
    #[test]
    fn an_empty_watchs_hint_is_wrapped_not_cut() {
        let model = Model {
            session_id: "s".into(),
            session_dir: "/nonexistent".into(),
            started_ms: 0,
            commands: Vec::new(),
            mode: Mode::Watched,
        };
        let (view, content) = (ViewState::default(), FrameContent::default());
        let mut terminal =
            ratatui::Terminal::new(ratatui::backend::TestBackend::new(40, 6)).unwrap();
        terminal
            .draw(|frame| draw(frame, frame.area(), Scene(&model, &view, &content)))
            .unwrap();
        let text = crate::ui::buffer_text(terminal.backend().buffer());
        let words: Vec<&str> = text
            .split(|c: char| c.is_whitespace() || "┃━┏┓┗┛".contains(c))
            .filter(|w| !w.is_empty())
            .collect();
        let hint = "No live commands yet: they show up as they start.";
        assert!(words.join(" ").contains(hint), "{text}");
    }

    #[test]
    fn a_filtered_title_keeps_its_words_where_the_counts_do_not_fit() {
        let config = CommandConfig::new("sleep", CommandSpec::Shell("sleep 1".into()));
        let model = Model {
            session_id: "s".into(),
            session_dir: "/nonexistent".into(),
            started_ms: 0,
            commands: vec![CommandState::new(config.clone())],
            mode: Mode::Watched,
        };
        let mut view = ViewState::default();
        view.list.filter = ListFilter::NeedsYou;
        let mut list = ListRows::default();
        list.counts = Counts {
            running: 0,
            failed: 2,
            needs_you: 3,
            total: 7,
        };
        let content = FrameContent {
            list: std::sync::Arc::new(list),
            ..FrameContent::default()
        };
        let title = |view: &ViewState, room| title(&model, view, &content, room);
        assert_eq!(title(&view, 60), "Commands: needs you 3 of 7 · 0 running");
        // A third of 120 columns: the count the filter is about, in the same words.
        assert_eq!(title(&view, 36), "Commands: needs you 3 of 7");
        view.list.filter = ListFilter::Failed;
        assert_eq!(
            title(&view, 50),
            "Commands: failed 2 of 7 · 0 running · 3 need you"
        );
        assert_eq!(title(&view, 30), "Commands: failed 2 of 7");
        // What needs you outlasts the total beside the filter's own count.
        assert_eq!(title(&view, 32), "Commands: failed 2 · 3 need you");
        view.list.filter = ListFilter::Running;
        assert_eq!(title(&view, 36), "Commands: running 0 · 3 need you");
        // Live, what needs the operator outlasts the other counts (36: a third of 120
        // columns); a recorded session keeps its counts.
        view.list.filter = ListFilter::All;
        let recorded = Model {
            session_id: "s".into(),
            session_dir: "/nonexistent".into(),
            started_ms: 0,
            commands: vec![CommandState::new(config)],
            mode: Mode::Recorded(None),
        };
        let recorded = super::title(&recorded, &view, &content, 36);
        assert_eq!(
            title(&view, 60),
            "Commands 7 · 0 running · 2 failed · 3 need you"
        );
        assert_eq!(title(&view, 40), "Commands 7 · 0 run · 2 fail · 3 need you");
        assert_eq!(title(&view, 36), "Commands 7 · 2 fail · 3 need you");
        assert_eq!(title(&view, 30), "Commands 7 · 3 need you");
        assert_eq!(title(&view, 20), "Commands 7");
        assert_eq!(recorded, "Commands 7 · 0 running · 2 failed");
    }
}
