//! The all-commands strip under the timeline: a bar per command over the whole session,
//! `─` while it ran, `┄` while what it left ran on in custody, `▪` where it printed, markers
//! for signals, timeouts, exits and failures (a failed exit among them); with the time
//! cursor set, each bar drawn up to it and its column crossed.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};

use super::timeline::CURSOR;
use super::{Scene, format, style};
use tether_model::{CommandState, Marker, Mode, Model};

pub fn draw(frame: &mut Frame, area: Rect, Scene(model, view, content): Scene) {
    let now_ms = content.now_ms;
    let cursor = content.cursor.as_ref();
    let [rule, rows] = Layout::vertical([Constraint::Length(1), Constraint::Min(0)]).areas(area);
    let title = match cursor {
        Some(c) => Span::styled(
            format!(" all commands {} ", cursor_time(model, c.at_ms)),
            CURSOR,
        ),
        None => Span::styled(" all commands ", style::DIM),
    };
    frame.render_widget(
        Block::new()
            .borders(Borders::TOP)
            .border_style(style::BORDER)
            .title(title),
        rule,
    );
    let label_width = 10usize;
    let bar_width = (rows.width as usize).saturating_sub(label_width + 1).max(1);
    // At the time cursor the strip still spans the whole recording, drawn up to the cursor.
    let end_ms = cursor.map_or(now_ms, |c| c.end_ms);
    // A watch's model begins when the watch did, after runs it found ended or going: its
    // strip begins at the first run it lists. A session's begins with the session.
    let first = (model.commands.iter())
        .filter_map(|c| {
            c.earlier_runs
                .first()
                .map(|r| r.started_ms)
                .or(c.started_ms)
        })
        .min()
        .filter(|_| matches!(model.mode, Mode::Watched));
    let origin = first.map_or(model.started_ms, |first| first.min(model.started_ms));
    let span_ms = end_ms.saturating_sub(origin).max(1);
    let column = |ts: u64| -> usize {
        (((ts.saturating_sub(origin)) as f64 / span_ms as f64) * (bar_width - 1) as f64).round()
            as usize
    };
    let height = rows.height as usize;
    let shown = shown_commands(model, view.selected, height);
    let mut lines: Vec<Line> = shown
        .iter()
        .map(|&i| {
            let c = &model.commands[i];
            // Padded by columns, not characters, so every bar starts in the same column
            // whatever the name holds.
            let label = format::fit(&format::title(c, label_width), label_width);
            let label_style = if i == view.selected {
                style::SELECTED
            } else {
                Style::new()
            };
            let mut spans = vec![Span::styled(label, label_style), Span::raw(" ")];
            let at = cursor.map(|c| column(c.at_ms).min(bar_width - 1));
            spans.extend(bar(c, bar_width, now_ms, &column, at));
            Line::from(spans)
        })
        .collect();
    let others = model.commands.len() - shown.len();
    if others > 0 {
        let label = format::fit(&format!("+{others} more"), label_width);
        let density = density(model, &shown, bar_width, now_ms, &column);
        lines.push(Line::from(vec![
            Span::styled(label, style::DIM),
            Span::raw(" "),
            Span::styled(density, Style::new().fg(Color::DarkGray)),
        ]));
    }
    frame.render_widget(Paragraph::new(lines), rows);
    // The cursor's column, marked on the rule above the bars too (where the title leaves it).
    if let Some(c) = cursor {
        let x = rows.x + (label_width + 1 + column(c.at_ms).min(bar_width - 1)) as u16;
        if let Some(cell) = frame.buffer_mut().cell_mut((x, rule.y))
            && cell.symbol() == "─"
        {
            cell.set_symbol("▼").set_style(CURSOR);
        }
    }
}

/// The commands that get a row of their own in a strip of `height` rows: all of them if they
/// fit; else, with one row left for the density of the rest, the selected one, those that
/// run, the latest that failed, and the selected one's neighbours in the rows still free.
/// In the list's order.
pub fn shown_commands(model: &Model, selected: usize, height: usize) -> Vec<usize> {
    let count = model.commands.len();
    if count <= height {
        return (0..count).collect();
    }
    let room = height.saturating_sub(1);
    let mut shown: Vec<usize> = Vec::with_capacity(room);
    if selected < count && room > 0 {
        shown.push(selected);
    }
    let commands = &model.commands;
    let running = (0..count).filter(|&i| commands[i].status.is_active());
    let failed = (0..count).rev().filter(|&i| commands[i].is_failure());
    let neighbours = (1..count).flat_map(|d| [selected.checked_sub(d), selected.checked_add(d)]);
    let neighbours = neighbours.flatten().filter(|&i| i < count);
    for i in running.chain(failed).chain(neighbours) {
        if shown.len() >= room {
            break;
        }
        if !shown.contains(&i) {
            shown.push(i);
        }
    }
    shown.sort_unstable();
    shown
}

/// How many of the commands without a row of their own ran in each column, as shades from
/// `░` (one) to `█` (the most): where the short ones crowded.
fn density(
    model: &Model,
    shown: &[usize],
    width: usize,
    now_ms: u64,
    column: &dyn Fn(u64) -> usize,
) -> String {
    // +1 where a run starts and -1 after it ends: one pass over the commands whatever they
    // span, then a running sum.
    let mut steps = vec![0i64; width + 1];
    for (i, c) in model.commands.iter().enumerate() {
        let Some(start) = c.started_ms else {
            continue;
        };
        if shown.binary_search(&i).is_ok() {
            continue;
        }
        // A run, and what it left running in custody after it.
        let end = c.custody(now_ms).map(|(_, until)| until).or(c.ended_ms);
        let end = column(end.unwrap_or(now_ms)).min(width - 1);
        let start = column(start).min(end);
        steps[start] += 1;
        steps[end + 1] -= 1;
    }
    let mut running = 0;
    let counts: Vec<i64> = steps[..width]
        .iter()
        .map(|step| {
            running += step;
            running
        })
        .collect();
    let most = counts.iter().copied().max().unwrap_or(0).max(1);
    counts
        .iter()
        .map(|&n| match n {
            0 => ' ',
            n if n * 4 <= most => '░',
            n if n * 2 <= most => '▒',
            n if n * 4 <= most * 3 => '▓',
            _ => '█',
        })
        .collect()
}

/// `⏱ 03:04:07.250 (+0:02.300)`: the cursor's moment in UTC and since the session started.
pub fn cursor_time(model: &Model, at_ms: u64) -> String {
    let utc = tether_os::journal::paths::format_utc(at_ms);
    let clock = utc.split_once(' ').map_or(utc.as_str(), |(_, time)| time);
    let since = format::offset_ms(at_ms.saturating_sub(model.started_ms));
    format!("⏱ {clock} ({since})")
}

/// One command's bar: `─` while it ran, `▪` where it printed, and markers.
fn bar(
    c: &CommandState,
    width: usize,
    now_ms: u64,
    column: &dyn Fn(u64) -> usize,
    cursor: Option<usize>,
) -> Vec<Span<'static>> {
    let mut cells: Vec<(char, Color)> = vec![(' ', Color::Reset); width];
    // `line` from column `from` to the column of `to_ms` (within the bar).
    let mut draw = |from: usize, to_ms: u64, line: char| {
        let end = column(to_ms).min(width - 1);
        for cell in cells.iter_mut().take(end + 1).skip(from) {
            *cell = (line, Color::DarkGray);
        }
    };
    // A restarted command's earlier runs, each to its end: `─`, then `x` or `|` once every
    // run's line is drawn, so that a restart in the column of the crash before it (a backoff
    // shorter than a column) does not hide the crash.
    for run in &c.earlier_runs {
        draw(column(run.started_ms), run.ended_ms, '─');
    }
    if let Some(start) = c.started_ms {
        draw(column(start), c.ended_ms.unwrap_or(now_ms), '─');
    }
    // What the run left running and its custody kept (a server started with `&`): `┄` from
    // the exit until the custody ended, so that it shows for as long as it served.
    if let Some((exit, until)) = c.custody(now_ms) {
        draw(column(exit) + 1, until, '┄');
    }
    for ts in &c.activity {
        if let Some(cell) = cells.get_mut(column(*ts)) {
            *cell = ('▪', Color::Green);
        }
    }
    for run in &c.earlier_runs {
        cells[column(run.ended_ms).min(width - 1)] = if run.failed {
            ('x', Color::Red)
        } else {
            ('|', Color::Blue)
        };
    }
    place_markers(c, &mut cells, column, now_ms);
    // The time cursor's column crosses the bar where nothing else is marked.
    if let Some(cell) = cursor.and_then(|at| cells.get_mut(at)) {
        match cell.0 {
            ' ' => *cell = ('│', Color::Cyan),
            '─' | '┄' => *cell = ('┼', Color::Cyan),
            _ => {}
        }
    }
    let mut spans: Vec<(String, Color)> = Vec::new();
    for (ch, color) in cells {
        match spans.last_mut() {
            Some((text, c)) if *c == color => text.push(ch),
            _ => spans.push((ch.to_string(), color)),
        }
    }
    spans
        .into_iter()
        .map(|(text, color)| Span::styled(text, Style::new().fg(color)))
        .collect()
}

/// The markers of a bar. Markers that fall in one column would hide each other: the end of
/// the run keeps its column and is the last mark (nothing is drawn after the run ended),
/// and each other marker takes the nearest free column before it, so that a watchdog's `T`
/// and its signal stay in sight next to the exit they caused. A marker whose kind already
/// shows where it would go (a burst of signals in one column) adds nothing; one with no
/// room left before it is not drawn. An exit that was a failure is drawn as one (`x`).
fn place_markers(
    c: &CommandState,
    cells: &mut [(char, Color)],
    column: &dyn Fn(u64) -> usize,
    now_ms: u64,
) {
    let width = cells.len();
    let last = column(c.ended_ms.unwrap_or(now_ms)).min(width - 1);
    let failed = c.is_failure();
    // What came after the exit (signals to leftovers it kept) did not lead to it: not drawn.
    let exit_at = (c.markers.iter()).find_map(|(ts, m)| (*m == Marker::Exit).then_some(*ts));
    let mut marked = vec![false; width];
    for rank in [
        Marker::Exit,
        Marker::Failure,
        Marker::Timeout,
        Marker::Signal,
    ] {
        for (ts, marker) in c.markers.iter().filter(|(_, m)| *m == rank) {
            if rank != Marker::Exit && exit_at.is_some_and(|exit| *ts > exit) {
                continue;
            }
            let mark = match marker {
                Marker::Signal => ('!', Color::Magenta),
                Marker::Timeout => ('T', Color::Yellow),
                Marker::Exit if failed => ('x', Color::Red),
                Marker::Exit => ('|', Color::Blue),
                Marker::Failure => ('x', Color::Red),
            };
            let at = column(*ts).min(last);
            let Some(i) = (0..=at).rev().find(|&i| !marked[i] || cells[i] == mark) else {
                continue;
            };
            if !marked[i] {
                marked[i] = true;
                cells[i] = mark;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::view::{FrameContent, ViewState};
    use tether_model::Mode;
    use tether_model::Status;
    use tether_protocol::protocol::ExitStatus;

    /// 1,000 commands of 5 ms, 20 ms apart; three still running, every 50th failed.
    fn thousand() -> Model {
        let commands = (0..1000u64)
            .map(|i| {
                let mut c = CommandState::new(tether_config::CommandConfig::new(
                    format!("echo-{i}"),
                    tether_protocol::protocol::CommandSpec::Shell("echo".into()),
                ));
                c.begin_run(format!("/s/{i:04}-echo").into(), i * 20);
                let code = if i % 50 == 49 { 1 } else { 0 };
                c.status = if [10, 500, 990].contains(&i) {
                    Status::Running
                } else {
                    c.ended_ms = Some(i * 20 + 5);
                    Status::Exited(ExitStatus {
                        code: Some(code),
                        signal: None,
                        core_dumped: false,
                    })
                };
                c
            })
            .collect();
        Model {
            session_id: "s".into(),
            session_dir: "/s".into(),
            started_ms: 0,
            commands,
            mode: Mode::Recorded(None),
        }
    }

    #[test]
    fn a_thousand_commands_give_rows_to_the_selected_the_running_and_the_failed() {
        let model = thousand();
        let shown = shown_commands(&model, 123, 10);
        assert_eq!(shown.len(), 9, "a row left for the rest");
        for must in [123, 10, 500, 990] {
            assert!(shown.contains(&must), "{must} in {shown:?}");
        }
        // The latest failures take the rows left.
        assert!(shown.contains(&999) && shown.contains(&949), "{shown:?}");
        assert!(shown.windows(2).all(|w| w[0] < w[1]), "in the list's order");
        // Few enough commands all get a row.
        assert_eq!(shown_commands(&model, 0, 1000).len(), 1000);
    }

    #[test]
    fn the_rest_is_one_row_of_how_many_ran_when() {
        let model = thousand();
        let shown = shown_commands(&model, 0, 10);
        let width = 40;
        let span = 20_000u64;
        let column = |ts: u64| ((ts as f64 / span as f64) * (width - 1) as f64).round() as usize;
        let row = density(&model, &shown, width, span, &column);
        assert_eq!(row.chars().count(), width);
        // The commands ran evenly over the whole session: every column has some.
        assert!(row.chars().all(|c| c != ' '), "{row:?}");
    }

    /// A server kept after its exit, in the rest: counted for as long as it was kept.
    #[test]
    fn the_rest_counts_what_custody_kept() {
        let server = kept_server(Some(6_000));
        let model = Model {
            session_id: "s".into(),
            session_dir: "/nonexistent".into(),
            started_ms: 0,
            commands: vec![server],
            mode: Mode::Recorded(None),
        };
        let column = |ts: u64| (ts / 1000) as usize;
        assert_eq!(density(&model, &[], 10, 9_000, &column), "███████   ");
    }

    #[test]
    fn a_strip_of_a_thousand_draws_its_rows_and_a_count_of_the_rest() {
        let model = thousand();
        let backend = ratatui::backend::TestBackend::new(60, 12);
        let mut terminal = ratatui::Terminal::new(backend).unwrap();
        let content = FrameContent {
            now_ms: 20_000,
            ..FrameContent::default()
        };
        terminal
            .draw(|f| draw(f, f.area(), Scene(&model, &ViewState::default(), &content)))
            .unwrap();
        let buffer = terminal.backend().buffer();
        let rows: Vec<String> = (0..12)
            .map(|y| (0..60).map(|x| buffer[(x, y)].symbol()).collect())
            .collect();
        assert!(rows[1].starts_with("echo-0 "), "{rows:#?}");
        let last = &rows[11];
        assert!(last.starts_with("+990 more"), "{rows:#?}");
    }

    #[test]
    fn markers_in_one_column_all_stay_in_sight() {
        let mut c = CommandState::new(tether_config::CommandConfig::new(
            "silent",
            tether_protocol::protocol::CommandSpec::Shell("sleep 9".into()),
        ));
        c.begin_run("/nonexistent".into(), 0);
        c.ended_ms = Some(5_010);
        c.markers = vec![
            (5_000, Marker::Timeout),
            (5_001, Marker::Signal),
            (5_010, Marker::Exit),
        ];
        let column = |ts: u64| (ts / 1000) as usize;
        let text: String = bar(&c, 8, 6_000, &column, None)
            .iter()
            .map(|s| s.content.as_ref())
            .collect();
        assert_eq!(text, "───!T|  ");
    }

    fn ended(name: &str, code: Option<i32>, signal: Option<i32>, end_ms: u64) -> CommandState {
        let mut c = CommandState::new(tether_config::CommandConfig::new(
            name,
            tether_protocol::protocol::CommandSpec::Shell("true".into()),
        ));
        c.begin_run("/nonexistent".into(), 0);
        c.ended_ms = Some(end_ms);
        c.status = Status::Exited(ExitStatus {
            code,
            signal,
            core_dumped: false,
        });
        c.markers.push((end_ms, Marker::Exit));
        c
    }

    /// A server whose shell exited at 1 s, kept by the leftovers rule until `until_ms`.
    fn kept_server(until_ms: Option<u64>) -> CommandState {
        let mut c = ended("server", Some(0), None, 1_000);
        c.leftovers = Some(tether_model::KeptLeftovers {
            kept: 1,
            end: None,
            until_ms,
        });
        c
    }

    fn text_of(c: &CommandState, width: usize) -> String {
        let column = |ts: u64| (ts / 1000) as usize;
        bar(c, width, 12_000, &column, None)
            .iter()
            .map(|s| s.content.as_ref())
            .collect()
    }

    /// A restarted command's bar holds its earlier runs, each to its end, beside the one
    /// running now: a crash loop reads as one.
    #[test]
    fn a_restarted_command_shows_its_earlier_runs() {
        let mut c = ended("worker", Some(1), None, 2_000);
        c.begin_run("/nonexistent/2".into(), 4_000);
        c.ended_ms = Some(5_000);
        c.status = Status::Exited(ExitStatus {
            code: Some(0),
            signal: None,
            core_dumped: false,
        });
        c.begin_run("/nonexistent/3".into(), 7_000);
        c.status = Status::Running;
        assert_eq!(c.run, 3);
        assert_eq!(text_of(&c, 12), "──x ─| ─────");
        // A crash loop: each restart in the column of the crash before it.
        let mut c = ended("worker", Some(1), None, 3_000);
        c.begin_run("/nonexistent/2".into(), 3_400);
        c.ended_ms = Some(6_000);
        c.status = Status::Exited(ExitStatus {
            code: Some(1),
            signal: None,
            core_dumped: false,
        });
        c.begin_run("/nonexistent/3".into(), 6_200);
        c.status = Status::Running;
        assert_eq!(text_of(&c, 12), "───x──x─────");
    }

    /// The strip of `commands` at `now_ms`, 22 columns by 4 rows, as a model of `mode`
    /// begun at 10 s draws it: its rows as text.
    fn strip_of(commands: Vec<CommandState>, mode: Mode, now_ms: u64) -> Vec<String> {
        let model = Model {
            session_id: "s".into(),
            session_dir: "/nonexistent".into(),
            started_ms: 10_000,
            commands,
            mode,
        };
        let mut terminal =
            ratatui::Terminal::new(ratatui::backend::TestBackend::new(22, 4)).unwrap();
        let content = FrameContent {
            now_ms,
            ..FrameContent::default()
        };
        terminal
            .draw(|f| draw(f, f.area(), Scene(&model, &ViewState::default(), &content)))
            .unwrap();
        let buffer = terminal.backend().buffer();
        (0..4)
            .map(|y| (0..22).map(|x| buffer[(x, y)].symbol()).collect())
            .collect()
    }

    /// A watch begins after runs it finds ended or going: the strip spans from the first of
    /// them, not from the watch's start, where they would all pile up in the first column.
    #[test]
    fn the_strip_begins_at_the_first_run_listed() {
        let mut late = ended("late", Some(0), None, 9_000);
        late.started_ms = Some(6_000);
        let early = ended("early", Some(0), None, 3_000);
        let rows = strip_of(vec![early, late], Mode::Watched, 10_000);
        assert_eq!(rows[1], "early      ───|       ", "{rows:?}");
        assert_eq!(rows[2], "late             ───| ");
    }

    /// A session's strip begins with the session, whatever start a row claims (a run with
    /// no journaled event replays as started at 0).
    #[test]
    fn a_sessions_strip_begins_with_the_session() {
        let mut bogus = ended("bogus", Some(0), None, 0);
        bogus.started_ms = Some(0);
        let mut late = ended("late", Some(0), None, 19_000);
        late.started_ms = Some(15_000);
        let rows = strip_of(vec![bogus, late], Mode::Recorded(None), 20_000);
        assert_eq!(rows[2], "late            ────| ", "{rows:?}");
    }

    /// The demo's `runaway` stopped on quit: its stop signalled every process of its tree
    /// (nine signals in the exit's column, two more to what was left after it). The exit
    /// is the last mark and the burst one `!`: its running time stays in sight.
    #[test]
    fn a_burst_of_signals_is_one_mark_and_the_exit_is_the_last() {
        let mut c = ended("runaway", None, Some(9), 6_500);
        c.stopped_by_hand = true;
        c.markers
            .extend((0..9).map(|i| (6_000 + i * 10, Marker::Signal)));
        c.markers
            .extend([(7_200, Marker::Signal), (8_100, Marker::Signal)]);
        assert_eq!(text_of(&c, 12), "─────!|     ");
        // A signal seconds before, in its own column, is its own mark.
        c.markers.push((3_000, Marker::Signal));
        assert_eq!(text_of(&c, 12), "───!─!|     ");
    }

    /// A command that exited by itself, whose kept leftovers were stopped later: the
    /// signals to them did not lead to its exit, and are not drawn before it.
    #[test]
    fn signals_after_the_exit_are_not_drawn_before_it() {
        let mut c = ended("server", Some(0), None, 4_000);
        c.markers
            .extend([(6_000, Marker::Signal), (6_300, Marker::Signal)]);
        assert_eq!(text_of(&c, 8), "────|   ");
    }

    /// A server started with `&`: its shell exited at once and custody kept the server.
    /// `┄` runs on from the exit for as long as it was kept, up to now while it still is.
    #[test]
    fn what_custody_kept_runs_on_after_the_exit() {
        use tether_model::KeptLeftovers;
        let mut c = kept_server(None);
        c.status = Status::LeftRunning {
            exit: ExitStatus {
                code: Some(0),
                signal: None,
                core_dumped: false,
            },
            processes: 1,
            paused: false,
        };
        assert_eq!(text_of(&c, 14), "─|┄┄┄┄┄┄┄┄┄┄┄ ", "kept until now (12 s)");
        let column = |ts: u64| (ts / 1000) as usize;
        let crossed: String = (bar(&c, 14, 12_000, &column, Some(5)).iter())
            .map(|s| s.content.as_ref())
            .collect();
        assert_eq!(crossed, "─|┄┄┄┼┄┄┄┄┄┄┄ ", "the time cursor crosses it");
        c.leftovers = Some(KeptLeftovers {
            kept: 1,
            end: Some(tether_protocol::protocol::LeftoversEnd::SessionOwnerExited),
            until_ms: Some(6_000),
        });
        c.status = Status::Exited(ExitStatus {
            code: Some(0),
            signal: None,
            core_dumped: false,
        });
        c.markers.push((6_000, Marker::Signal));
        assert_eq!(
            text_of(&c, 14),
            "─|┄┄┄┄┄       ",
            "kept until its session ended"
        );
    }

    /// `x` marks a failure, as the legend says: an exit that failed is drawn as one.
    #[test]
    fn a_failed_exit_is_an_x() {
        let failing = ended("failing", Some(3), None, 4_000);
        assert_eq!(text_of(&failing, 8), "────x   ");
        let spans = bar(&failing, 8, 12_000, &|ts| (ts / 1000) as usize, None);
        let x = spans.iter().find(|s| s.content == "x").expect("an x");
        assert_eq!(x.style.fg, Some(Color::Red));
        assert_eq!(text_of(&ended("ok", Some(0), None, 4_000), 8), "────|   ");
        // A watchdog's stop is a failure: its `T`, its signal, then the `x`.
        let mut silent = ended("silent", None, Some(15), 5_010);
        silent.response_timeout = true;
        silent
            .markers
            .extend([(5_000, Marker::Timeout), (5_001, Marker::Signal)]);
        assert_eq!(text_of(&silent, 8), "───!Tx  ");
    }
}
