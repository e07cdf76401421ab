//! Cutting a rendered line into screen rows by display width, so that what is measured to
//! fit is exactly what is drawn.

use super::style::{Span, StyledLine};
use super::width::clusters;

/// The rows `line` takes at `width` columns; an empty line is one empty row. A wide
/// character that does not fit at the end of a row starts the next one, and a cluster
/// (an emoji with its skin tone, a flag) is never cut.
pub fn wrap(line: &StyledLine, width: usize) -> Vec<StyledLine> {
    let width = width.max(2);
    let mut rows: Vec<StyledLine> = vec![Vec::new()];
    let mut used = 0;
    for span in line {
        let mut text = String::new();
        for (cluster, w) in clusters(&span.text) {
            if used + w > width && used > 0 {
                if !text.is_empty() {
                    push(&mut rows, std::mem::take(&mut text), span);
                }
                rows.push(Vec::new());
                used = 0;
            }
            text.push_str(cluster);
            used += w;
        }
        if !text.is_empty() {
            push(&mut rows, text, span);
        }
    }
    rows
}

fn push(rows: &mut [StyledLine], text: String, like: &Span) {
    if let Some(row) = rows.last_mut() {
        row.push(Span {
            text,
            style: like.style,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::style::{Style, plain_text};

    fn texts(rows: &[StyledLine]) -> Vec<String> {
        rows.iter().map(plain_text).collect()
    }

    #[test]
    fn wraps_by_columns_across_spans() {
        let bold = Style {
            bold: true,
            ..Style::default()
        };
        let line = vec![Span::plain("abcd"), Span::new("efg", bold)];
        let rows = wrap(&line, 3);
        assert_eq!(texts(&rows), ["abc", "def", "g"]);
        assert_eq!(rows[1][1].style, bold);
        assert_eq!(wrap(&Vec::new(), 3).len(), 1);
    }

    #[test]
    fn wide_characters_do_not_straddle_rows() {
        let line = vec![Span::plain("a漢字b")];
        assert_eq!(texts(&wrap(&line, 4)), ["a漢", "字b"]);
        assert_eq!(texts(&wrap(&line, 2)), ["a", "漢", "字", "b"]);
    }

    #[test]
    fn clusters_are_not_cut() {
        let line = vec![Span::plain("ab👍🏽c🇺🇸")];
        assert_eq!(texts(&wrap(&line, 3)), ["ab", "👍🏽c", "🇺🇸"]);
    }
}
