//! Matching a search string against the rendered text of a line, cheaply ruling out the lines
//! whose raw bytes cannot hold it before rendering them.

use memchr::memmem;

use super::style::{StyledLine, plain_text};

/// A search string, compared with rendered text ignoring ASCII case.
#[derive(Debug, Clone)]
pub(crate) struct Needle {
    folded: String,
    /// Every character of the needle that rendering can only copy from the raw bytes: a line
    /// whose bytes lack one of them cannot match.
    required: Vec<Required>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Required {
    Byte(u8),
    /// An ASCII letter in either case.
    Letter(u8, u8),
    /// A non-ASCII character's UTF-8 encoding.
    Encoded(Vec<u8>),
}

impl Needle {
    pub(crate) fn new(needle: &str) -> Self {
        let folded = needle.to_ascii_lowercase();
        let mut required = Vec::new();
        for c in folded.chars() {
            // Rendering makes spaces (tabs, erased cells) and U+FFFD (invalid UTF-8) itself.
            if c == ' ' || c == char::REPLACEMENT_CHARACTER {
                continue;
            }
            let req = if c.is_ascii_lowercase() {
                Required::Letter(c as u8, c.to_ascii_uppercase() as u8)
            } else if c.is_ascii() {
                Required::Byte(c as u8)
            } else {
                Required::Encoded(c.to_string().into_bytes())
            };
            if !required.contains(&req) {
                required.push(req);
            }
        }
        Needle { folded, required }
    }

    /// Whether a line rendered from `raw`, or from any part of it, could show the needle:
    /// a quick test on raw bytes that spares rendering most lines that do not match.
    pub(crate) fn might_match(&self, raw: &[u8]) -> bool {
        self.required.iter().all(|req| match req {
            Required::Byte(b) => memchr::memchr(*b, raw).is_some(),
            Required::Letter(lower, upper) => memchr::memchr2(*lower, *upper, raw).is_some(),
            Required::Encoded(bytes) => memmem::find(raw, bytes).is_some(),
        })
    }

    /// Whether the rendered `line` shows the needle.
    pub(crate) fn matches_line(&self, line: &StyledLine) -> bool {
        plain_text(line).to_ascii_lowercase().contains(&self.folded)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::sanitize::render_line;

    impl Needle {
        /// Whether the line whose raw bytes are `raw` shows the needle once rendered.
        fn matches(&self, raw: &[u8]) -> bool {
            self.might_match(raw) && self.matches_line(&render_line(raw))
        }
    }

    #[test]
    fn ignores_ascii_case() {
        assert!(Needle::new("error").matches(b"an ERROR here"));
        assert!(Needle::new("ERROR").matches(b"an error here"));
        assert!(!Needle::new("error").matches(b"an err0r here"));
    }

    #[test]
    fn non_ascii_matches_exactly() {
        assert!(Needle::new("café").matches("le CAFé".as_bytes()));
        assert!(!Needle::new("CAFÉ").matches("le café".as_bytes()));
    }

    #[test]
    fn matches_rendered_text_not_raw_bytes() {
        // Styles split the word in the raw bytes.
        assert!(Needle::new("failed").matches(b"\x1b[31mfai\x1b[1mled\x1b[0m"));
        // A progress line only shows its last state.
        assert!(Needle::new("100%").matches(b"10%\r100%"));
        assert!(!Needle::new("10%").matches(b"10%\r100%\r\x1b[Kdone"));
        // Nothing hidden in an escape sequence is found.
        assert!(!Needle::new("secret").matches(b"\x1b]0;secret\x07title"));
    }

    #[test]
    fn spaces_and_replacement_characters_come_from_rendering() {
        assert!(Needle::new("a   ").matches(b"a\tb"));
        assert!(Needle::new("x\u{fffd}y").matches(b"x\xffy"));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig {
            cases: 500,
            failure_persistence: None,
            ..proptest::prelude::ProptestConfig::default()
        })]

        /// The quick test on raw bytes never rules out a line that shows the needle.
        #[test]
        fn whatever_a_line_shows_is_found(
            raw in proptest::collection::vec(
                proptest::sample::select(b"aB \t\r\x08\x1b[K31m;\xc3\xa9\xe4\xb8\xad\xff".to_vec()),
                0..60,
            ),
            from in 0usize..60,
            len in 0usize..10,
        ) {
            let text = plain_text(&render_line(&raw));
            let chars: Vec<char> = text.chars().collect();
            let from = from.min(chars.len());
            let needle: String = chars[from..(from + len).min(chars.len())].iter().collect();
            let needle = Needle::new(&needle.to_ascii_uppercase());
            proptest::prop_assert!(needle.might_match(&raw));
            proptest::prop_assert!(needle.matches(&raw));
        }
    }

    #[test]
    fn empty_needle_matches_every_line() {
        assert!(Needle::new("").matches(b""));
        assert!(Needle::new("").matches(b"anything"));
    }
}
