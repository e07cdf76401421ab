//! How many terminal columns text takes, measured the way ratatui measures it when it draws:
//! by grapheme cluster (`unicode-segmentation`), each as wide as `unicode-width` says. A thumb
//! with a skin tone (`👍🏽`), a family joined by ZWJs (`👨‍👩‍👧`) or a flag (`🇺🇸`) is one
//! cluster two columns wide, drawn in one cell; measured character by character it would be
//! four, and a cut between its characters would drop the modifier. Measuring with the very
//! crates ratatui draws with keeps what is measured to fit exactly what is drawn.

use unicode_segmentation::UnicodeSegmentation;
use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

/// Columns taken by `c` when printed on its own: 0 for combining marks and other zero-width
/// characters (they attach to the character before them), 2 for East Asian wide and
/// full-width characters and emoji, 1 for the rest. Control characters are the caller's
/// business; they come out as 1.
pub fn char_width(c: char) -> usize {
    c.width().unwrap_or(1)
}

/// Columns taken by one grapheme cluster, as ratatui gives it a cell.
pub fn cluster_width(cluster: &str) -> usize {
    cluster.width()
}

/// The width of each of the first `columns` columns of a table: the widest of its cells in
/// `rows` and its `header`, as shown (a table's columns sized to what it shows now).
pub fn column_widths<R: AsRef<[String]>>(
    rows: &[R],
    header: &[&str],
    columns: usize,
) -> Vec<usize> {
    (0..columns)
        .map(|i| {
            rows.iter()
                .map(|r| text_width(&r.as_ref()[i]))
                .chain([text_width(header[i])])
                .max()
                .unwrap_or(0)
        })
        .collect()
}

/// Columns taken by `text` printed on one line: the sum of its clusters' widths. Printable
/// ASCII, most names and labels, is a column a byte with no cluster to find: a watch of
/// thousands of commands measures every name at each change of its list.
pub fn text_width(text: &str) -> usize {
    if text.bytes().all(|b| (0x20..0x7f).contains(&b)) {
        return text.len();
    }
    clusters(text).map(|(_, width)| width).sum()
}

/// The grapheme clusters of `text` with their widths, in order.
pub fn clusters(text: &str) -> impl Iterator<Item = (&str, usize)> {
    text.graphemes(true).map(|g| (g, cluster_width(g)))
}

/// Whether `next` continues the cluster `cluster` ends with (a skin tone after its emoji, a
/// ZWJ and what it joins, the second half of a flag, a combining mark), rather than starting
/// a cluster of its own.
pub fn extends_cluster(cluster: &str, next: char) -> bool {
    if cluster.is_empty() {
        return false;
    }
    let mut joined = String::with_capacity(cluster.len() + 4);
    joined.push_str(cluster);
    joined.push(next);
    let last = joined
        .grapheme_indices(true)
        .next_back()
        .map_or(0, |(at, _)| at);
    // `next` belongs to the cluster that started before it.
    last < cluster.len()
}

/// Cuts `text` to at most `width` columns, ending in `…` when cut. Columns, not characters:
/// a wide character takes two and a combining mark none, as on screen; a cluster (an emoji
/// with its skin tone, a flag) stays whole or goes.
pub fn truncate(text: &str, width: usize) -> String {
    if text_width(text) <= width {
        return text.to_string();
    }
    let mut out = String::new();
    let mut used = 0;
    for (cluster, w) in clusters(text) {
        used += w;
        if used > width.saturating_sub(1) {
            break;
        }
        out.push_str(cluster);
    }
    if width > 0 {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ascii_and_latin_are_narrow() {
        for c in ['a', 'Z', ' ', '~', 'é', 'ß', '\u{fffd}', '─', '█'] {
            assert_eq!(char_width(c), 1, "{c:?}");
        }
    }

    #[test]
    fn cjk_and_emoji_are_wide() {
        for c in ['中', '日', '한', 'ア', '！', '😀', '🚀', '\u{20000}'] {
            assert_eq!(char_width(c), 2, "{c:?}");
        }
    }

    #[test]
    fn combining_marks_and_joiners_take_no_column() {
        for c in [
            '\u{301}', '\u{200b}', '\u{200d}', '\u{fe0f}', '\u{feff}', '\u{ad}',
        ] {
            assert_eq!(char_width(c), 0, "{c:?}");
        }
    }

    #[test]
    fn text_width_sums_columns() {
        assert_eq!(text_width(""), 0);
        assert_eq!(text_width("ab中e\u{301}"), 5);
        // Printable ASCII, measured a byte a column, as its clusters measure it; a line end
        // is one cluster of two bytes, measured as such.
        let printable: String = (0x20u8..0x7f).map(char::from).collect();
        let clustered: usize = clusters(&printable).map(|(_, width)| width).sum();
        assert_eq!(text_width(&printable), clustered);
        assert_eq!(text_width("a\r\nb"), 3);
    }

    #[test]
    fn emoji_sequences_are_one_cluster_two_columns_wide() {
        for sequence in [
            "👍🏽",                     // a skin-tone modifier
            "👨\u{200d}👩\u{200d}👧", // a ZWJ family
            "🇺🇸",                     // a flag: two regional indicators
            "🏳\u{fe0f}\u{200d}🌈",    // a ZWJ sequence with a variation selector
        ] {
            assert_eq!(clusters(sequence).count(), 1, "{sequence:?}");
            assert_eq!(text_width(sequence), 2, "{sequence:?}");
        }
        assert_eq!(text_width("a👍🏽b🇺🇸c"), 7);
    }

    #[test]
    fn what_continues_a_cluster() {
        assert!(extends_cluster("👍", '\u{1f3fd}'));
        assert!(extends_cluster("👨", '\u{200d}'));
        assert!(extends_cluster("👨\u{200d}", '👩'));
        assert!(extends_cluster("🇺", '🇸'));
        assert!(
            !extends_cluster("🇺🇸", '🇫'),
            "a third indicator starts a new flag"
        );
        assert!(extends_cluster("e", '\u{301}'));
        assert!(!extends_cluster("a", 'b'));
        assert!(!extends_cluster("👍", '👍'));
        assert!(!extends_cluster("", '\u{301}'));
    }
}
