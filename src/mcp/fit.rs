//! Output fitted to the room a reply has left: a page of a stream that ends where its text
//! would overflow, and the ends of two streams shared out between them. Room and cost are
//! counted as [`text_cost`] counts, so that what is fitted is what the reply weighs.

use regex::Regex;

use super::budget::{char_cost, text_cost};
use super::text::sanitize_line;

/// A page of a stream fitted to its room.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct FittedPage {
    /// The bytes of the input the page covers, from its start.
    pub taken: usize,
    pub text: String,
    /// With a grep, the lines that matched.
    pub matched: usize,
}

/// The page of `bytes` (a stream from a page's offset, at most a page of it) whose text
/// costs at most `room`: whole lines while they fit; of a first line that does not fit on
/// its own, as much as fits (at least one byte, so that paging always moves on; one byte's
/// text costs at most 16, a tab's eight spaces). With `grep`, only the lines that match are
/// shown, and while more of the stream follows `bytes`, a line that `bytes` cuts short is
/// left whole for the next page.
pub fn fit_page(bytes: &[u8], more_after: bool, grep: Option<&Regex>, room: usize) -> FittedPage {
    let mut page = FittedPage::default();
    let mut cost = 0;
    for line in bytes.split_inclusive(|&b| b == b'\n') {
        let cut_short = !line.ends_with(b"\n");
        if grep.is_some() && cut_short && more_after && page.taken > 0 {
            break;
        }
        let shown = shown(line, grep);
        let line_cost = shown.as_deref().map_or(0, text_cost);
        let (taken, shown) = if cost + line_cost <= room {
            (line.len(), shown)
        } else if page.taken == 0 {
            fitting_start(line, grep, room)
        } else {
            break;
        };
        cost += shown.as_deref().map_or(0, text_cost);
        page.taken += taken;
        if let Some(shown) = shown {
            page.text.push_str(&shown);
            page.matched += 1;
        }
        if taken < line.len() {
            break;
        }
    }
    page
}

/// What a line shows on a page: its sanitized text, or with `grep` its text and a newline
/// if it matches and nothing if not.
fn shown(line: &[u8], grep: Option<&Regex>) -> Option<String> {
    let text = sanitize_line(line);
    let Some(grep) = grep else {
        return Some(text);
    };
    let body = text.strip_suffix('\n').unwrap_or(&text);
    grep.is_match(body).then(|| format!("{body}\n"))
}

/// The longest start of `line` whose text fits `room` (at least one byte), ending on a
/// character boundary unless none fits.
fn fitting_start(line: &[u8], grep: Option<&Regex>, room: usize) -> (usize, Option<String>) {
    let cost = |len: usize| shown(&line[..len], grep).as_deref().map_or(0, text_cost);
    let boundaries: Vec<usize> = (1..=line.len())
        .filter(|&at| line.get(at).is_none_or(|&b| !(0x80..0xc0).contains(&b)))
        .collect();
    let len = last_fitting(&boundaries, cost, room)
        .or_else(|| last_fitting(&(1..=line.len()).collect::<Vec<_>>(), cost, room))
        .unwrap_or(1);
    (len, shown(&line[..len], grep))
}

/// The last of `lengths` (increasing) whose `cost` is at most `room`. A text's cost grows
/// with its input, nearly in proportion, but for a few erasing controls: what is found
/// fits, and the next length does not. Doubling from the shortest while they fit, then
/// between the last that did and the first that did not, at the length their costs point
/// to (in proportion), halving instead after a step that did not halve what was left: what
/// is rendered to find it is a few times what fits, not the whole line at every step.
fn last_fitting(lengths: &[usize], cost: impl Fn(usize) -> usize, room: usize) -> Option<usize> {
    // The last index known to fit, with its cost; the first known not to, with its cost.
    let mut fit: Option<(usize, usize)> = None;
    let mut over: Option<usize> = None;
    let (mut low, mut high) = (0, lengths.len());
    let mut step = 64;
    while low + step < high {
        let at = low + step;
        let spent = cost(lengths[at]);
        if spent > room {
            (high, over) = (at, Some(spent));
            break;
        }
        fit = Some((at, spent));
        low = at + 1;
        step *= 2;
    }
    let mut halve = false;
    while low < high {
        let span = high - low;
        let at = match (fit, over) {
            // In bytes, as the cost grows, not in characters: a line mixes widths.
            (Some((at, spent)), Some(over)) if !halve && over > spent => {
                let (from, to) = (lengths[at], lengths[high]);
                let len = from + (room - spent) * (to - from) / (over - spent);
                lengths.partition_point(|&l| l <= len).clamp(low + 1, high) - 1
            }
            _ => low + span / 2,
        };
        let spent = cost(lengths[at]);
        if spent <= room {
            fit = Some((at, spent));
            low = at + 1;
        } else {
            (high, over) = (at, Some(spent));
        }
        halve = high - low > span / 2;
    }
    fit.map(|(at, _)| lengths[at])
}

/// The room each of two texts gets when both together cost more than `room`: the cheaper
/// keeps all it needs when that is under half, the other has the rest.
pub fn share(room: usize, costs: [usize; 2]) -> [usize; 2] {
    let [a, b] = costs;
    let half = room / 2;
    if a + b <= room {
        costs
    } else if a <= half {
        [a, room - a]
    } else if b <= half {
        [room - b, b]
    } else {
        [half, room - half]
    }
}

/// The end of `text` that costs at most `room`, from the start of a line where one starts
/// in it; and whether anything was left out.
pub fn end_within(text: &str, room: usize) -> (&str, bool) {
    let mut cost = 0;
    let mut start = text.len();
    for (at, c) in text.char_indices().rev() {
        cost += char_cost(c);
        if cost > room {
            break;
        }
        start = at;
    }
    if start == 0 {
        return (text, false);
    }
    let kept = &text[start..];
    let body = kept.strip_suffix('\n').unwrap_or(kept);
    let from_line = match body.find('\n') {
        Some(newline) if !text[..start].ends_with('\n') => &kept[newline + 1..],
        _ => kept,
    };
    (from_line, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_ends_at_the_last_whole_line_that_fits() {
        let bytes = b"one\ntwo\nthree\n";
        // "one\n" and "two\n" cost 3*2+5 = 11 each.
        let page = fit_page(bytes, false, None, 25);
        assert_eq!((page.taken, page.text.as_str()), (8, "one\ntwo\n"));
        let page = fit_page(bytes, false, None, 1000);
        assert_eq!(page.taken, bytes.len());
    }

    #[test]
    fn a_line_longer_than_the_room_is_cut_and_paging_moves_on() {
        let line = "x".repeat(100);
        let page = fit_page(line.as_bytes(), false, None, 50);
        assert_eq!((page.taken, page.text.len()), (25, 25));
        let page = fit_page(line.as_bytes(), false, None, 0);
        assert_eq!(page.taken, 1, "at least a byte");
        // Not inside a character.
        let page = fit_page("ééééé".as_bytes(), false, None, 9);
        assert_eq!((page.taken, page.text.as_str()), (4, "éé"));
    }

    /// The last length that fits, whatever the costs (in proportion, by steps, with a jump),
    /// over byte lengths or character boundaries of mixed widths; in fewer renders than
    /// halving's 23-25 where the cost grows in proportion, at most twice those with a jump.
    #[test]
    fn the_last_length_that_fits_is_found_in_a_few_renders() {
        let bytes: Vec<usize> = (1..=65_536).collect();
        // Boundaries of characters 1, 3, 1 and 4 bytes long, over and over.
        let mixed: Vec<usize> = ([1, 3, 1, 4].iter().cycle().take(20_000))
            .scan(0, |end, width| {
                *end += width;
                Some(*end)
            })
            .collect();
        type Cost = fn(usize) -> usize;
        let cases: [(&[usize], Cost, usize); 4] = [
            (&bytes, |l| 2 * l, 16),
            (&bytes, |l| l + l / 7 * 9, 20),
            (&bytes, |l| if l > 30_000 { 3 * l } else { l }, 40),
            (&mixed, |l| 2 * l, 16),
        ];
        for (lengths, cost, most) in cases {
            for room in (0..200_000).step_by(997).chain([1_000_000]) {
                let renders = std::cell::Cell::new(0);
                let counted = |len| {
                    renders.set(renders.get() + 1);
                    cost(len)
                };
                let found = last_fitting(lengths, counted, room);
                let wanted = lengths.iter().copied().rfind(|&l| cost(l) <= room);
                assert_eq!(found, wanted, "room {room}");
                // fitting_start is asked only for a line that does not fit whole.
                let renders = renders.get();
                let whole = lengths.last().is_some_and(|&l| cost(l) <= room);
                assert!(whole || renders <= most, "room {room}: {renders} renders");
            }
        }
    }

    #[test]
    fn a_tab_is_counted_as_the_spaces_it_shows() {
        let page = fit_page(&[b'\t'; 100], false, None, 160);
        assert_eq!((page.taken, page.text.len()), (10, 80));
    }

    #[test]
    fn grep_keeps_matching_lines_and_leaves_a_cut_line_for_the_next_page() {
        let grep = Regex::new("^a").unwrap();
        let page = fit_page(b"ab\nbb\nac\nad", true, Some(&grep), 1000);
        assert_eq!(
            (page.taken, page.text.as_str(), page.matched),
            (9, "ab\nac\n", 2)
        );
        let page = fit_page(b"ab\nbb\nac\nad", false, Some(&grep), 1000);
        assert_eq!((page.taken, page.matched), (11, 3));
    }

    #[test]
    fn the_cheaper_text_keeps_what_it_needs() {
        assert_eq!(share(100, [30, 40]), [30, 40]);
        assert_eq!(share(100, [30, 400]), [30, 70]);
        assert_eq!(share(100, [300, 40]), [60, 40]);
        assert_eq!(share(100, [300, 400]), [50, 50]);
    }

    #[test]
    fn an_end_is_kept_from_a_line_start() {
        assert_eq!(end_within("ab\ncd\n", 100), ("ab\ncd\n", false));
        // "b\ncd\n" costs 2+5+4+5 = 16: cut back to "cd\n".
        assert_eq!(end_within("ab\ncd\n", 16), ("cd\n", true));
        assert_eq!(end_within("abcdef", 4), ("ef", true));
    }
}
