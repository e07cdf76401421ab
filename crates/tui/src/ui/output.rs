//! An output pane: the lines prepared for this frame, styled as the command coloured them,
//! with search matches highlighted. Never anything raw: lines hold printable text only.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::screen::ScreenWidget;
use super::{Scene, format, pane_block, style};
use crate::app::view::{LineSelection, PaneLines, STAMP_WIDTH, ScreenContent};
use tether_model::Status;
use tether_model::output::StyledLine;
use tether_model::screen::{FullScreenSigns, ReplayStart, ScreenGrid, TAIL_REPLAY};
use tether_protocol::protocol::Stream;
use tether_protocol::units::format_size;

pub fn draw(frame: &mut Frame, area: Rect, Scene(model, view, content): Scene, stream: Stream) {
    let i = stream as usize;
    let (lines, screen, state) = (&content.outputs[i], &content.screens[i], &view.outputs[i]);
    // Stamps count from the selected command's session's start, as its timeline does.
    let started_ms =
        (model.commands.get(view.selected)).map_or(model.started_ms, |c| model.session_start_of(c));
    let focused = view.focus.stream() == Some(stream);
    let name = stream.name();
    if state.screen {
        draw_screen(frame, area, name, focused, lines, screen);
        return;
    }
    let name = if lines.merged { "stdout+stderr" } else { name };
    let mut title = format!(
        "{name} · {}{} · {}",
        if lines.estimated { "≈" } else { "" },
        format::count(lines.total, "line", "lines"),
        format_size(lines.bytes)
    );
    if lines.merged {
        title.push_str(" · merged");
    }
    let (written_as_one, merged) = (lines.written_as_one, lines.merged);
    title.push_str(written_as_one_title(written_as_one, stream, merged));
    // Past the command's bound the journal has the head only: said before anything else.
    title.push_str(&journal_cut_title(lines.journal_cut));
    if let Some(percent) = lines.indexing {
        title.push_str(&format!(" · indexing {percent}%"));
    }
    // Following is for output still to come: of a run that ended, the pane is at its end or
    // scrolled back.
    let ended = (model.commands.get(view.selected)).is_some_and(|c| {
        let over = c.ended_ms.is_some() || c.status == Status::FailedToStart;
        !c.status.is_active() && (over || c.plan.as_ref().is_some_and(|p| p.is_failure()))
    });
    title.push_str(match (state.follow, ended) {
        (true, false) => " · follow",
        (false, false) => " · paused",
        (true, true) => " · end",
        (false, true) => " · scrolled",
    });
    if view.wrap {
        title.push_str(" · wrap");
    } else if state.left > 0 {
        // Scrolled sideways: from which column the lines are shown.
        title.push_str(&format!(" · from column {}", state.left + 1));
    }
    if let Some(needle) = &state.search {
        match state.matched {
            Some(line) => title.push_str(&format!(" · /{needle} (line {})", line + 1)),
            None => title.push_str(&format!(" · /{needle} (no match)")),
        }
    }
    title.push_str(&selection_title(state.selection));
    title.push_str(hint(screen.signs));
    let needle = state.search.as_deref().map(str::to_ascii_lowercase);
    let text: Vec<Line> = lines
        .lines
        .iter()
        .enumerate()
        .map(|(i, line)| {
            let number = lines.line_of_row(i);
            let current = state.matched == Some(number);
            let mut line = render(line, needle.as_deref(), current);
            let prefix = prefix(lines, i, view.stamps, started_ms);
            if !prefix.is_empty() {
                line.spans.splice(0..0, prefix);
            }
            match state.selection {
                Some(selection) if selection.lines().contains(&number) => {
                    selected(line, area.width.saturating_sub(2) as usize)
                }
                _ => line,
            }
        })
        .collect();
    // Rows come wrapped already (by display width), so what was measured is what is drawn;
    // unwrapped, they are shown from the column scrolled to.
    let left = if view.wrap { 0 } else { state.left };
    frame.render_widget(
        Paragraph::new(text)
            .scroll((0, u16::try_from(left).unwrap_or(u16::MAX)))
            .block(pane_block(&title, focused, area.width)),
        area,
    );
}

/// The screen view: the output as its terminal shows it, cell for cell.
fn draw_screen(
    frame: &mut Frame,
    area: Rect,
    name: &str,
    focused: bool,
    lines: &PaneLines,
    screen: &ScreenContent,
) {
    let mut title = format!("{name} · screen");
    let inner = pane_block("", focused, area.width).inner(area);
    if let Some(grid) = &screen.grid {
        let (rows, cols) = grid.size();
        title.push_str(&format!(" {cols}×{rows}"));
        title.push_str(&part_shown(grid, inner, screen.top, screen.left));
        if grid.alternate {
            title.push_str(" · alternate screen");
        }
    }
    match screen.start {
        Some(ReplayStart::FreshScreen { .. }) => title.push_str(" · since the last clear"),
        Some(ReplayStart::Tail { .. }) => {
            title.push_str(&format!(" · last {} replayed", format_size(TAIL_REPLAY)))
        }
        Some(ReplayStart::Whole) | None => {}
    }
    title.push_str(&format!(" · {}", format_size(lines.bytes)));
    title.push_str(&journal_cut_title(lines.journal_cut));
    title.push_str(" · v: lines");
    frame.render_widget(pane_block(&title, focused, area.width), area);
    match &screen.grid {
        Some(grid) => {
            let (top, left) = (screen.top, screen.left);
            frame.render_widget(ScreenWidget { grid, top, left }, inner)
        }
        None => frame.render_widget(Paragraph::new(" no output yet").style(style::DIM), inner),
    }
}

/// Which part of a screen larger than the pane is drawn (its terminal is larger than the
/// pane), from row `top` and column `left`: ` (rows 27–40, cols 1–77)`, each only when cut;
/// nothing when all of it fits.
fn part_shown(grid: &ScreenGrid, inner: Rect, top: usize, left: usize) -> String {
    let (rows, cols) = grid.size();
    let mut cut = Vec::new();
    if inner.is_empty() {
        return String::new();
    }
    if rows > inner.height {
        let bottom = top + usize::from(inner.height);
        cut.push(format!("rows {}–{bottom}", top + 1));
    }
    if cols > inner.width {
        let right = left + usize::from(inner.width);
        cut.push(format!("cols {}–{right}", left + 1));
    }
    match cut.is_empty() {
        true => String::new(),
        false => format!(" ({})", cut.join(", ")),
    }
}

/// The mark of a pane of a command that wrote both streams to one (its caller gave one file
/// for both), in the order written: its stderr is in stdout's pane, and stderr's is empty.
fn written_as_one_title(written_as_one: bool, stream: Stream, merged: bool) -> &'static str {
    match (written_as_one, stream, merged) {
        (false, _, _) => "",
        (true, _, true) | (true, Stream::Stdout, false) => " · stderr written into stdout",
        (true, Stream::Stderr, false) => " · written into stdout (one file for both)",
    }
}

/// The mark of a pane whose stream the journal did not keep whole: what it kept (the
/// head, which is what the pane shows) and what it dropped.
fn journal_cut_title(cut: Option<(u64, u64)>) -> String {
    cut.map_or_else(String::new, |(kept, dropped)| {
        format!(
            " · journal kept the first {}, not the last {}",
            format_size(kept),
            format_size(dropped)
        )
    })
}

/// What precedes row `row`: its line's time (on the line's first row only) and, merged, its
/// stream: `1│` for stdout, a red `2│` for stderr.
fn prefix(lines: &PaneLines, row: usize, stamps: bool, started_ms: u64) -> Vec<Span<'static>> {
    let mut spans = Vec::new();
    let first_row = row == 0 || lines.numbers.get(row - 1) != lines.numbers.get(row);
    if stamps {
        let stamp = match lines.stamps.get(row).copied().flatten() {
            Some(ms) if first_row => format::offset_ms(ms.saturating_sub(started_ms)),
            _ => String::new(),
        };
        let width = STAMP_WIDTH - 1;
        spans.push(Span::styled(
            format!("{:>width$} ", format::fit(&stamp, width).trim_end()),
            style::DIM,
        ));
    }
    if let Some(stream) = lines.marks.get(row).copied().flatten() {
        let (text, look) = match stream {
            Stream::Stdout => ("1│", style::DIM),
            Stream::Stderr => ("2│", style::STDERR_MARK),
        };
        spans.push(Span::styled(text, look));
    }
    spans
}

/// A selected line, highlighted across the pane's whole width.
fn selected(line: Line<'static>, width: usize) -> Line<'static> {
    let pad = width.saturating_sub(line.width());
    let mut line = line.patch_style(style::SELECTION);
    line.spans
        .push(Span::styled(" ".repeat(pad), style::SELECTION));
    line
}

/// The line log's title when lines are selected.
fn selection_title(selection: Option<LineSelection>) -> String {
    match selection.map(|s| s.lines().len()) {
        Some(1) => " · V 1 line: y copies, Esc drops".into(),
        Some(n) => format!(" · V {n} lines: y copies, Esc drops"),
        None => String::new(),
    }
}

/// Points the line log of a full-screen program's output to the screen view.
fn hint(signs: FullScreenSigns) -> &'static str {
    if signs.alternate {
        " · full-screen program: v shows its screen"
    } else if signs.redraws {
        " · cursor moves: v shows the screen"
    } else {
        ""
    }
}

/// One output line with its colours, and matches of `needle` (lower-case) highlighted.
fn render(line: &StyledLine, needle: Option<&str>, current: bool) -> Line<'static> {
    let mut spans = Vec::new();
    for span in line {
        let base = style::output_style(span.style);
        match needle.filter(|n| !n.is_empty()) {
            Some(needle) => highlight(&span.text, needle, base, &mut spans),
            None => spans.push(Span::styled(span.text.clone(), base)),
        }
    }
    let line = Line::from(spans);
    match current {
        true => line.patch_style(Style::new().add_modifier(Modifier::BOLD)),
        false => line,
    }
}

fn highlight(text: &str, needle: &str, base: Style, out: &mut Vec<Span<'static>>) {
    // ASCII folding keeps byte offsets identical between `text` and `lower`, so matches found
    // in one are character boundaries in the other; it is also how search matches.
    let lower = text.to_ascii_lowercase();
    let mut start = 0;
    for (at, _) in lower.match_indices(needle) {
        if at > start {
            out.push(Span::styled(text[start..at].to_string(), base));
        }
        out.push(Span::styled(
            text[at..at + needle.len()].to_string(),
            style::MATCH,
        ));
        start = at + needle.len();
    }
    if start < text.len() {
        out.push(Span::styled(text[start..].to_string(), base));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_that_wrote_one_stream_says_so_in_both_panes() {
        assert_eq!(written_as_one_title(false, Stream::Stdout, false), "");
        assert!(written_as_one_title(true, Stream::Stdout, false).contains("stderr written into"));
        assert!(written_as_one_title(true, Stream::Stderr, false).contains("into stdout"));
    }

    #[test]
    fn a_pane_whose_stream_the_journal_cut_says_what_it_kept() {
        assert_eq!(journal_cut_title(None), "");
        assert_eq!(
            journal_cut_title(Some((1 << 30, 700 << 20))),
            " · journal kept the first 1.0 GiB, not the last 700.0 MiB"
        );
    }
}
