//! The process tree of the selected command: the broker, the command, its descendants and
//! any escapees, with what the sampler measured.

use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::style::{Color, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Paragraph, Row, Table};

use super::{Scene, format, pane_block, style};
use crate::app::view::Pane;
use tether_model::CommandState;
use tether_model::output::one_line;
use tether_os::cgroup::CgroupStats;
use tether_os::sampler::TreeRow;

pub fn draw(frame: &mut Frame, area: Rect, Scene(model, view, content): Scene) {
    let focused = view.focus == Pane::Tree;
    let command = model.commands.get(view.selected);
    let block = pane_block(
        &title(command, !content.tree.is_empty(), content.cgroup.as_ref()),
        focused,
        area.width,
    );
    let run_start = command.and_then(|c| c.started_ms).unwrap_or(0);
    if content.tree.is_empty() {
        let text = match model.commands.get(view.selected) {
            // Recorded: what the journal holds is all there is (at the time cursor, a run
            // that has not journaled its tree yet).
            Some(c) if c.status.is_active() && model.mode.is_finished() => {
                "no process tree recorded yet"
            }
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
    // Rows below the border and the header.
    let visible = area.height.saturating_sub(3) as usize;
    let selected = view.tree_selected.min(content.tree.len() - 1);
    // What the command column gets: the pane less its borders, the fixed columns and one
    // column between each two.
    let fixed: u16 = WIDTHS.iter().sum::<u16>() + WIDTHS.len() as u16;
    let command_width = area.width.saturating_sub(2 + fixed) as usize;
    // A command line is shown whole (wrapped) with wrap on, and always for the process
    // selected in the focused tree; in half the pane at most, so that its neighbours stay in
    // sight, unless the pane is zoomed.
    let max_rows = if view.zoom { visible } else { visible / 2 }.max(1);
    let calls = command.map_or_else(Vec::new, |c| calls_in(model, c, &content.tree));
    let links = links(&content.tree, &calls);
    let commands: Vec<Vec<Line>> = (content.tree.iter().zip(links))
        .enumerate()
        .map(|(i, (row, link))| {
            let whole = view.wrap || (focused && i == selected);
            command_lines(row, link, command_width, whole, max_rows)
        })
        .collect();
    let heights: Vec<usize> = commands.iter().map(Vec::len).collect();
    let skip = first_shown(&heights, selected, visible);
    let rows = content
        .tree
        .iter()
        .zip(commands)
        .enumerate()
        .skip(skip)
        .map(|(i, (row, command))| {
            let p = &row.process;
            let elapsed = content.now_ms.saturating_sub(p.start_ms);
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
            let height = command.len() as u16;
            let cells = vec![
                Cell::from(p.pid.to_string()),
                Cell::from(p.state.to_string()),
                Cell::from(cpu),
                Cell::from(rss),
                Cell::from(age),
                Cell::from(command),
            ];
            let row_widget = Row::new(cells).height(height.max(1));
            if focused && i == selected {
                row_widget.style(style::SELECTED)
            } else {
                row_widget
            }
        });
    let mut widths: Vec<Constraint> = WIDTHS.iter().map(|w| Constraint::Length(*w)).collect();
    widths.push(Constraint::Min(10));
    let table = Table::new(rows, widths)
        .header(Row::new(vec!["PID", "S", "CPU%", "RSS", "AGE", "COMMAND"]).style(style::DIM))
        .block(block);
    frame.render_widget(table, area);
}

/// Widths of the columns before the command line: pid, state, CPU, RSS, age.
const WIDTHS: [u16; 5] = [7, 2, 6, 7, 7];

/// How much later than a command's start its caller may seem to start: a process's start
/// is read in clock ticks since boot.
const START_LEEWAY_MS: u64 = 1_000;

/// A command of the session that a process of this tree asked for: an agent's shell call
/// (the shim, in a session of its own, so no escapee) is the command `#number`.
struct Call {
    pid: i32,
    started_ms: u64,
    number: u64,
    text: String,
}

impl Call {
    /// Whether `process` is the caller: its pid, and alive when the command started (not
    /// another process given the pid later), within the leeway of a process's start read
    /// back as wall-clock time (clock ticks).
    fn is(&self, process: &tether_os::sampler::ProcessInfo) -> bool {
        process.pid == self.pid && process.start_ms <= self.started_ms + START_LEEWAY_MS
    }
}

/// The commands of `command`'s session whose caller is a process of its `tree` (not
/// `command`'s own caller), in the order they started: of two given the same pid, the
/// earlier is found first, and [`Call::is`] tells them apart by the process's start.
fn calls_in(model: &tether_model::Model, command: &CommandState, tree: &[TreeRow]) -> Vec<Call> {
    let Some(session) = command.id().map(|id| id.session) else {
        return Vec::new();
    };
    let pids: std::collections::HashSet<i32> = tree.iter().map(|row| row.process.pid).collect();
    (model.commands.iter())
        .filter(|c| c.caller_pid.is_some_and(|pid| pids.contains(&pid)))
        .filter(|c| c.caller_pid != command.caller_pid)
        .filter_map(|c| {
            let id = c.id().filter(|id| id.session == session)?;
            Some(Call {
                pid: c.caller_pid?,
                started_ms: c.started_ms?,
                number: id.number,
                text: c.command_line(),
            })
        })
        .collect()
}

/// What a process of the tree is to its session's commands.
#[derive(Clone, Copy)]
enum Link<'a> {
    /// A shell call of the session's: the command `#number`.
    Call(&'a Call),
    /// Below one: the call's broker, seen as it forked, before it left for a session of its
    /// own (the command's processes are its own row's). No escapee of this tree's.
    Below(u64),
    None,
}

/// Each row's [`Link`], in one pass over the depth-first rows: below the innermost call
/// that a row is under.
fn links<'a>(tree: &[TreeRow], calls: &'a [Call]) -> Vec<Link<'a>> {
    let mut under: Vec<(usize, u64)> = Vec::new();
    (tree.iter())
        .map(|row| {
            while under.last().is_some_and(|&(depth, _)| row.depth <= depth) {
                under.pop();
            }
            match calls.iter().find(|call| call.is(&row.process)) {
                Some(call) => {
                    under.push((row.depth, call.number));
                    Link::Call(call)
                }
                None => under.last().map_or(Link::None, |&(_, n)| Link::Below(n)),
            }
        })
        .collect()
}

/// The command column of one process: its place in the tree, the escapee mark and its
/// command line (for a shell call of the session's, the command's number and text; below
/// one, the command's number), on one line (cut by the column), or `whole`, wrapped to the
/// column's `width` in at most `max_rows` rows, continuation rows indented under the
/// command line.
fn command_lines(
    row: &TreeRow,
    link: Link,
    width: usize,
    whole: bool,
    max_rows: usize,
) -> Vec<Line<'static>> {
    let mut branch = "  ".repeat(row.depth);
    if row.depth > 0 {
        branch.push_str("└ ");
    }
    // The mark goes before the command line: the column cuts what is too long for it at
    // the right, and a long command line must not cut the one fact that matters here.
    let mut text = Vec::new();
    match link {
        Link::Call(call) => {
            let mark = format!("(command #{}) ", call.number);
            text.push(Span::styled(mark, Style::new().fg(Color::Cyan)));
            text.push(Span::raw(one_line(&call.text)));
        }
        Link::Below(number) => {
            let mark = format!("(of command #{number}) ");
            text.push(Span::styled(mark, Style::new().fg(Color::Cyan)));
            text.push(Span::raw(one_line(&row.process.argv.join(" "))));
        }
        Link::None if row.escaped => {
            text.push(Span::styled("(escaped) ", Style::new().fg(Color::Magenta)));
            text.push(Span::raw(one_line(&row.process.argv.join(" "))));
        }
        Link::None => text.push(Span::raw(one_line(&row.process.argv.join(" ")))),
    }
    if !whole {
        let mut spans = vec![Span::raw(branch)];
        spans.extend(text);
        return vec![Line::from(spans)];
    }
    let indent = format::text_width(&branch);
    let mut pieces = format::wrap_spans(&text, width.saturating_sub(indent));
    let cut = pieces.len() > max_rows;
    pieces.truncate(max_rows);
    if cut {
        // Room for the mark that says the command line goes on.
        if let Some(last) = pieces.last_mut() {
            ellipsize(last, width.saturating_sub(indent));
        }
    }
    pieces
        .into_iter()
        .enumerate()
        .map(|(i, piece)| {
            let lead = if i == 0 {
                branch.clone()
            } else {
                " ".repeat(indent)
            };
            let mut spans = vec![Span::raw(lead)];
            spans.extend(piece);
            Line::from(spans)
        })
        .collect()
}

/// Ends a row of at most `width` columns in `…`, cutting what it must to make room: by
/// grapheme cluster, as the rest of the screen cuts (an emoji with its skin tone stays whole
/// or goes).
fn ellipsize(row: &mut Vec<Span<'static>>, width: usize) {
    let mut room = width.saturating_sub(1);
    let mut kept = Vec::with_capacity(row.len() + 1);
    for span in row.drain(..) {
        let span_width = format::text_width(&span.content);
        if span_width <= room {
            room -= span_width;
            kept.push(span);
            continue;
        }
        let mut cut = String::new();
        for (cluster, w) in tether_model::output::width_clusters(&span.content) {
            if w > room {
                break;
            }
            room -= w;
            cut.push_str(cluster);
        }
        if !cut.is_empty() {
            kept.push(Span::styled(cut, span.style));
        }
        break;
    }
    kept.push(Span::raw("…"));
    *row = kept;
}

/// The first row to show so that the `selected` row is in sight, rows taking `heights`
/// lines, `visible` lines in all: as many rows above it as fit.
fn first_shown(heights: &[usize], selected: usize, visible: usize) -> usize {
    let mut first = selected;
    let mut used = heights.get(selected).copied().unwrap_or(1);
    while first > 0 && used + heights[first - 1] <= visible {
        first -= 1;
        used += heights[first];
    }
    first
}

/// `Process tree: NAME · CONTAINMENT · COMMAND LINE`, so that the whole command the name
/// stands for can be read (zoom the pane for the widest view); once a run is over and the
/// pane lists what the broker saw, it says so. The containment is `procfs`, or `cgroup` with
/// what the cgroup accounted for the whole command.
fn title(command: Option<&CommandState>, listed: bool, cgroup: Option<&CgroupStats>) -> String {
    let Some(command) = command else {
        return "Process tree".into();
    };
    let name = &command.config.name;
    let line = command.command_line();
    let mut title = format!("Process tree: {name}");
    if let Some(mode) = command.containment {
        title.push_str(&format!(" · {}", mode.label()));
        if let Some(stats) = cgroup {
            if let Some(usec) = stats.cpu_usec {
                title.push_str(&format!(" cpu {}", format::duration_ms(usec / 1000)));
            }
            if let Some(bytes) = stats.memory_bytes {
                title.push_str(&format!(" mem {}", format::compact_bytes(bytes)));
            }
        }
    }
    // Before the command line, which the border may cut.
    if listed && !command.status.is_active() {
        title.push_str(" · every process seen during the run");
    }
    if !line.is_empty() && line != *name {
        title.push_str(&format!(" · {line}"));
    }
    title
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ellipsize_cuts_by_cluster_and_keeps_styles() {
        let text =
            |row: &[Span<'static>]| row.iter().map(|s| s.content.as_ref()).collect::<String>();
        let bold = Style::new().add_modifier(ratatui::style::Modifier::BOLD);
        // A thumbs-up with its skin tone is one cluster two columns wide: whole or gone.
        let mut row = vec![Span::raw("ab"), Span::styled("\u{1f44d}\u{1f3fd}cd", bold)];
        ellipsize(&mut row, 4);
        assert_eq!(text(&row), "ab…");
        let mut row = vec![Span::raw("ab"), Span::styled("\u{1f44d}\u{1f3fd}cd", bold)];
        ellipsize(&mut row, 5);
        assert_eq!(text(&row), "ab\u{1f44d}\u{1f3fd}…");
        assert_eq!(row[1].style, bold);
        let mut short = vec![Span::raw("ab")];
        ellipsize(&mut short, 10);
        assert_eq!(text(&short), "ab…");
    }

    #[test]
    fn the_title_says_the_containment_and_what_the_cgroup_accounted() {
        use tether_config::CommandConfig;
        use tether_protocol::protocol::{CommandSpec, ContainmentMode};
        let mut command = CommandState::new(CommandConfig::new(
            "web",
            CommandSpec::Argv(vec!["web".into()]),
        ));
        assert_eq!(title(Some(&command), false, None), "Process tree: web");
        command.containment = Some(ContainmentMode::Procfs);
        assert_eq!(
            title(Some(&command), false, None),
            "Process tree: web · procfs"
        );
        command.containment = Some(ContainmentMode::Cgroup);
        let stats = CgroupStats {
            cpu_usec: Some(4_200_000),
            memory_bytes: Some(3 << 20),
        };
        assert_eq!(
            title(Some(&command), false, Some(&stats)),
            "Process tree: web · cgroup cpu 4.2s mem 3.0M"
        );
    }

    /// In an agent's tree, the shell call of a command of its session (the shim, which Claude
    /// Code starts in a session of its own) reads as that command, not as an escapee with
    /// the shim's argv, and so does the broker below it, seen as it forked; a process given
    /// the pid after the command started, or the same pid in another session's command,
    /// does not, nor what is below them.
    #[test]
    fn an_agents_shell_call_reads_as_the_command_it_asked_for() {
        use tether_config::CommandConfig;
        use tether_protocol::protocol::CommandSpec;
        let command = |dir: &str, caller: i32, started_ms: u64, script: &str| {
            let spec = CommandSpec::Argv(vec!["bash".into(), "-c".into(), script.into()]);
            let mut c = CommandState::new(CommandConfig::new("c", spec));
            c.begin_run(format!("/state/sessions/{dir}").into(), started_ms);
            c.started_ms = Some(started_ms);
            c.caller_pid = Some(caller);
            c
        };
        let agent = command("s1/01-claude", 100, 1_000, "claude");
        let model = tether_model::Model {
            commands: vec![
                agent.clone(),
                command("s1/05-python3", 9274, 20_000, "python3 -m http.server"),
                command("s2/07-ls", 9300, 20_000, "ls"),
            ],
            session_id: "s1".into(),
            session_dir: "/state/sessions/s1".into(),
            started_ms: 1_000,
            mode: tether_model::Mode::Watched,
        };
        let process = |depth: usize, pid: i32, start_ms: u64, argv: &[&str]| TreeRow {
            depth,
            process: tether_os::sampler::ProcessInfo {
                pid,
                ppid: 101,
                pgid: pid,
                sid: pid,
                state: 'S',
                cpu_percent: 0.0,
                rss_bytes: 0,
                start_ms,
                argv: argv.iter().map(|a| a.to_string()).collect(),
            },
            escaped: true,
        };
        let shim = ["/tmp/tether-0/agent-shims-1-2/bash", "-c"];
        let row = |pid: i32, start_ms: u64| process(2, pid, start_ms, &shim);
        let broker = |pid: i32| process(3, pid, 19_995, &["tether", "broker"]);
        let texts = |tree: &[TreeRow]| -> Vec<String> {
            let calls = calls_in(&model, &agent, tree);
            (tree.iter().zip(links(tree, &calls)))
                .map(|(row, link)| {
                    let lines = command_lines(row, link, 80, false, 1);
                    lines[0].spans.iter().map(|s| s.content.as_ref()).collect()
                })
                .collect()
        };
        assert_eq!(
            texts(&[
                row(9274, 19_990),
                broker(9275),
                row(9300, 19_990),
                broker(9301)
            ]),
            [
                "    └ (command #5) python3 -m http.server",
                "      └ (of command #5) tether broker",
                "    └ (escaped) /tmp/tether-0/agent-shims-1-2/bash -c",
                "      └ (escaped) tether broker",
            ]
        );
        assert_eq!(
            texts(&[row(9274, 25_000)]),
            ["    └ (escaped) /tmp/tether-0/agent-shims-1-2/bash -c"]
        );
        // A call below the rows of another (the /proc walk sees a call's whole tree): what
        // follows the inner one's subtree is the outer one's again.
        let deeper = |depth: usize, row: TreeRow| TreeRow { depth, ..row };
        let shown = texts(&[
            deeper(1, row(9274, 19_990)),
            deeper(2, broker(9275)),
            deeper(3, row(9300, 19_990)),
            deeper(2, broker(9276)),
        ]);
        assert_eq!(shown[3], "    └ (of command #5) tether broker", "{shown:?}");
    }

    #[test]
    fn the_selected_row_is_in_sight_with_as_many_above_as_fit() {
        assert_eq!(first_shown(&[1, 1, 1, 1], 3, 10), 0);
        assert_eq!(first_shown(&[1, 1, 1, 1], 3, 2), 2);
        assert_eq!(first_shown(&[1, 5, 1, 3], 3, 4), 2);
        assert_eq!(first_shown(&[1, 5, 1, 3], 3, 3), 3);
        assert_eq!(first_shown(&[1, 5, 1, 3], 1, 6), 0);
    }
}
