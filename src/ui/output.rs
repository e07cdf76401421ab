//! An output pane: the lines prepared for this frame, styled as the command coloured them,
//! with search matches highlighted. Never anything raw: lines hold printable text only.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::{pane_block, style};
use crate::app::view::{PaneLines, ViewState};
use crate::model::output::StyledLine;
use crate::protocol::Stream;
use crate::units::format_size;

pub fn draw(frame: &mut Frame, area: Rect, view: &ViewState, stream: Stream, lines: &PaneLines) {
    let state = &view.outputs[stream as usize];
    let focused = view.focus.stream() == Some(stream);
    let name = match stream {
        Stream::Stdout => "stdout",
        Stream::Stderr => "stderr",
    };
    let mut title = format!(
        "{name} · {} · {}",
        super::format::count(lines.total, "line", "lines"),
        format_size(lines.bytes)
    );
    title.push_str(if state.follow {
        " · follow"
    } else {
        " · paused"
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
    let needle = state.search.as_deref().map(str::to_ascii_lowercase);
    let text: Vec<Line> = lines
        .lines
        .iter()
        .enumerate()
        .map(|(i, line)| {
            let current = state.matched == Some(lines.line_of_row(i));
            render(line, needle.as_deref(), current)
        })
        .collect();
    // Rows come wrapped already (by display width), so what was measured is what is drawn;
    // unwrapped, they are shown from the column scrolled to.
    let left = if view.wrap { 0 } else { state.left };
    frame.render_widget(
        Paragraph::new(text)
            .scroll((0, u16::try_from(left).unwrap_or(u16::MAX)))
            .block(pane_block(&title, focused)),
        area,
    );
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
    let mut out = Line::from(spans);
    if current {
        out = out
            .patch_style(ratatui::style::Style::new().add_modifier(ratatui::style::Modifier::BOLD));
    }
    out
}

fn highlight(text: &str, needle: &str, base: ratatui::style::Style, out: &mut Vec<Span<'static>>) {
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
