//! Numbers, times and text cut to size as the screen shows them.

use ratatui::style::Style;
use ratatui::text::Span;

use tether_model::CommandState;
use tether_model::output::{one_line, width_clusters};
pub use tether_model::output::{text_width, truncate};

/// `1 line`, `2 lines`: a count with its noun in the number it needs.
pub fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

pub use tether_protocol::units::{compact_bytes, duration_ms, offset_ms};

/// Spans cut into rows of at most `width` columns, each piece keeping its style: after the
/// last space that fits (words stay whole where they can), else between grapheme clusters.
/// Nothing is dropped, and an empty line is one empty row.
pub fn wrap_spans(spans: &[Span<'static>], width: usize) -> Vec<Vec<Span<'static>>> {
    let width = width.max(2);
    // Each row as clusters with their style and width, merged into spans at the end.
    let mut rows: Vec<Vec<(&str, Style, usize)>> = vec![Vec::new()];
    let mut used = 0;
    for span in spans {
        for (cluster, w) in width_clusters(&span.content) {
            if used + w > width && used > 0 {
                let row = rows.last_mut().expect("a row");
                // Carry the word cut short over to the next row, if a space ends one before.
                let carried = match row.iter().rposition(|(c, _, _)| *c == " ") {
                    Some(space) if space + 1 < row.len() => row.split_off(space + 1),
                    _ => Vec::new(),
                };
                used = carried.iter().map(|(_, _, w)| w).sum();
                rows.push(carried);
            }
            rows.last_mut()
                .expect("a row")
                .push((cluster, span.style, w));
            used += w;
        }
    }
    rows.into_iter()
        .map(|row| {
            let mut spans: Vec<Span<'static>> = Vec::new();
            for (cluster, style, _) in row {
                match spans.last_mut() {
                    Some(last) if last.style == style => last.content.to_mut().push_str(cluster),
                    _ => spans.push(Span::styled(cluster.to_string(), style)),
                }
            }
            spans
        })
        .collect()
}

/// Spans cut to at most `width` columns together, as [`truncate`] cuts one text: where
/// they do not fit, what fits of them in `width - 1` columns, then `…` in the style of the
/// span the cut falls in.
pub fn cut_spans(spans: Vec<Span<'static>>, width: usize) -> Vec<Span<'static>> {
    let total: usize = spans.iter().map(|s| text_width(&s.content)).sum();
    if total <= width {
        return spans;
    }
    let mut out = Vec::with_capacity(spans.len());
    if width == 0 {
        return out;
    }
    let mut left = width - 1;
    for span in spans {
        let w = text_width(&span.content);
        if w <= left {
            left -= w;
            out.push(span);
            continue;
        }
        let mut text = String::new();
        for (cluster, w) in width_clusters(&span.content) {
            if w > left {
                break;
            }
            left -= w;
            text.push_str(cluster);
        }
        text.push('…');
        out.push(Span::styled(text, span.style));
        break;
    }
    out
}

/// A command's title in at most `width` columns, one safe line: `worker (run 3)` where it
/// fits, else `worker ↻2` (the restarts so far), the name cut before the mark if need be
/// while six columns of it still show; narrower, the title as it is, for the caller to cut.
pub fn title(command: &CommandState, width: usize) -> String {
    let whole = one_line(&command.title());
    if command.run <= 1 || text_width(&whole) <= width {
        return whole;
    }
    let restarts = format!(" ↻{}", command.run - 1);
    let name = one_line(&command.config.name);
    let room = width.saturating_sub(text_width(&restarts));
    if room < text_width(&name).min(6) {
        return whole;
    }
    format!("{}{restarts}", truncate(&name, room))
}

/// `text` cut or padded with spaces to exactly `width` columns, for text that other text
/// on the same row must line up after.
pub fn fit(text: &str, width: usize) -> String {
    let mut out = truncate(text, width);
    let used = text_width(&out);
    out.extend(std::iter::repeat_n(' ', width.saturating_sub(used)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_narrow_title_keeps_the_restarts_in_sight() {
        let mut c = CommandState::new(tether_config::CommandConfig::new(
            "worker",
            tether_protocol::protocol::CommandSpec::Shell("true".into()),
        ));
        c.run = 3;
        assert_eq!(title(&c, 20), "worker (run 3)");
        assert_eq!(title(&c, 11), "worker ↻2");
        // Too narrow for the name and the mark: the caller cuts the title.
        assert_eq!(title(&c, 8), "worker (run 3)");
        c.config.name = "frontend-dev-server".into();
        assert_eq!(title(&c, 11), "fronten… ↻2");
        c.run = 1;
        assert_eq!(title(&c, 4), "frontend-dev-server");
        c.config.name = "a\x1b]0;x\x07b".into();
        c.run = 2;
        assert!(!title(&c, 6).contains('\x1b'));
    }

    #[test]
    fn spans_are_cut_together() {
        let spans = || {
            vec![
                Span::raw("needs input"),
                Span::raw(" "),
                Span::raw("sleep 300"),
            ]
        };
        let texts = |spans: Vec<Span<'static>>| -> Vec<String> {
            spans.into_iter().map(|s| s.content.into_owned()).collect()
        };
        assert_eq!(texts(cut_spans(spans(), 10)), ["needs inp…"]);
        // A span that would end at the edge with more to come leaves room for the mark.
        assert_eq!(texts(cut_spans(spans(), 11)), ["needs inpu…"]);
        assert_eq!(texts(cut_spans(spans(), 12)), ["needs input", "…"]);
        assert_eq!(texts(cut_spans(spans(), 13)), ["needs input", " ", "…"]);
        assert_eq!(texts(cut_spans(spans(), 16)), ["needs input", " ", "sle…"]);
        assert_eq!(
            texts(cut_spans(spans(), 21)),
            ["needs input", " ", "sleep 300"]
        );
        assert!(cut_spans(spans(), 0).is_empty());
    }

    #[test]
    fn formats() {
        assert_eq!(duration_ms(850), "850ms");
        assert_eq!(duration_ms(4_200), "4.2s");
        assert_eq!(duration_ms(83_000), "1m23s");
        assert_eq!(duration_ms(7_500_000), "2h05m");
        assert_eq!(offset_ms(62_345), "+1:02.345");
        assert_eq!(truncate("abcdef", 4), "abc…");
        assert_eq!(truncate("abc", 4), "abc");
        assert_eq!(count(1, "line", "lines"), "1 line");
        assert_eq!(count(0, "line", "lines"), "0 lines");
        assert_eq!(count(2, "process", "processes"), "2 processes");
    }

    #[test]
    fn spans_wrap_by_columns_and_keep_their_styles() {
        use ratatui::style::Color;
        let red = Style::new().fg(Color::Red);
        let spans = vec![Span::raw("ab"), Span::styled("cd中e", red)];
        let rows = wrap_spans(&spans, 3);
        let texts: Vec<Vec<(&str, Style)>> = rows
            .iter()
            .map(|row| row.iter().map(|s| (s.content.as_ref(), s.style)).collect())
            .collect();
        assert_eq!(
            texts,
            [
                vec![("ab", Style::new()), ("c", red)],
                vec![("d中", red)],
                vec![("e", red)],
            ]
        );
        assert_eq!(wrap_spans(&[], 3).len(), 1);
        let words = |text: &'static str, width| -> Vec<String> {
            wrap_spans(&[Span::raw(text)], width)
                .iter()
                .map(|row| row.iter().map(|s| s.content.as_ref()).collect())
                .collect()
        };
        // Words stay whole where a space lets them; a word wider than a row is cut.
        assert_eq!(
            words("cannot run `no-such`: no such file", 14),
            ["cannot run ", "`no-such`: no ", "such file"]
        );
        assert_eq!(words("abcdefgh ij", 4), ["abcd", "efgh", " ij"]);
    }

    #[test]
    fn cuts_and_pads_by_columns() {
        assert_eq!(truncate("中文字", 4), "中…");
        assert_eq!(truncate("中文字", 6), "中文字");
        assert_eq!(truncate("ab", 0), "");
        assert_eq!(fit("ab", 4), "ab  ");
        assert_eq!(fit("中文字幕", 5), "中文…");
        assert_eq!(fit("中文字幕", 4), "中… ");
        // A mark on the last character kept stays with it; it takes no column.
        assert_eq!(fit("e\u{301}", 3), "e\u{301}  ");
        // A skin tone is not cut from its thumb.
        assert_eq!(truncate("ab👍🏽cd", 4), "ab…");
        assert_eq!(truncate("ab👍🏽cd", 5), "ab👍🏽…");
    }
}
