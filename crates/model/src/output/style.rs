//! What a rendered line is made of: text runs with terminal-independent styles. The UI maps
//! these onto its own colour and modifier types; nothing here knows of any terminal library.

/// A colour as a command asked for it with SGR.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Color {
    /// The terminal's own foreground or background.
    #[default]
    Default,
    /// 0..=15 is the ANSI palette (8..=15 the bright half), 16..=255 the xterm cube and greys.
    Indexed(u8),
    Rgb(u8, u8, u8),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Style {
    pub fg: Color,
    pub bg: Color,
    pub bold: bool,
    pub dim: bool,
    pub italic: bool,
    pub underline: bool,
    pub reverse: bool,
    /// Drawn from bytes tether marked (a `tether grep` match), never from the command's own
    /// escape sequences: see [`super::LineRenderer::set_highlight`].
    pub highlight: bool,
}

/// A run of text drawn in one style.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Span {
    pub text: String,
    pub style: Style,
}

impl Span {
    pub fn new(text: impl Into<String>, style: Style) -> Self {
        Span {
            text: text.into(),
            style,
        }
    }

    pub fn plain(text: impl Into<String>) -> Self {
        Span::new(text, Style::default())
    }
}

/// One rendered line: spans whose texts hold only printable characters (no control chars, no ESC).
pub type StyledLine = Vec<Span>;

/// The line's text without its styles, as a search or a copy sees it.
pub fn plain_text(line: &StyledLine) -> String {
    let mut text = String::with_capacity(line.iter().map(|span| span.text.len()).sum());
    for span in line {
        text.push_str(&span.text);
    }
    text
}

/// True for characters that must never reach a terminal: C0 controls (ESC among them), DEL
/// and the C1 controls that some terminals still obey when they arrive as U+0080..=U+009F.
pub fn is_control(c: char) -> bool {
    matches!(c, '\0'..='\x1f' | '\x7f'..='\u{9f}')
}

/// Characters that reorder the text around them in terminals that do bidirectional layout,
/// which would let a line show something other than what it holds, or push what follows it
/// on the same row out of place.
pub fn is_bidi_control(c: char) -> bool {
    matches!(
        c,
        '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
    )
}

/// True for every character that must not reach the terminal as it is, in any text.
pub fn is_unsafe_on_screen(c: char) -> bool {
    is_control(c) || is_bidi_control(c)
}

/// Text from outside (a command line, a name, an error message) made safe for one screen
/// line: line breaks and tabs become spaces, every other control character and every bidi
/// control U+FFFD. The placeholder takes one column, so what is measured is what is drawn,
/// and it shows that something was there.
pub fn one_line(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '\n' | '\r' | '\t' => ' ',
            c if is_unsafe_on_screen(c) => '\u{fffd}',
            c => c,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_neutralises_controls() {
        assert_eq!(
            one_line("a\nb\tc\x1b[2J\u{9b}d"),
            "a b c\u{fffd}[2J\u{fffd}d"
        );
    }

    #[test]
    fn one_line_neutralises_bidi_controls() {
        let bidi = [
            '\u{061c}', '\u{200e}', '\u{200f}', '\u{202a}', '\u{202b}', '\u{202c}', '\u{202d}',
            '\u{202e}', '\u{2066}', '\u{2067}', '\u{2068}', '\u{2069}',
        ];
        for c in bidi {
            assert!(is_bidi_control(c), "{c:?}");
            assert_eq!(one_line(&format!("a{c}b")), "a\u{fffd}b", "{c:?}");
        }
        // A name that would read `evilexe.txt` in a bidi terminal keeps its order, and its
        // override shows as one column.
        assert_eq!(one_line("evil\u{202e}txt.exe"), "evil\u{fffd}txt.exe");
        // Letters of right-to-left scripts and joiners are text, not controls.
        for c in [
            '\u{5d0}', '\u{627}', '\u{200d}', '\u{2065}', '\u{206a}', '\u{202f}',
        ] {
            assert!(!is_bidi_control(c), "{c:?}");
        }
    }

    #[test]
    fn plain_text_joins_spans() {
        let bold = Style {
            bold: true,
            ..Style::default()
        };
        let line = vec![Span::plain("ab"), Span::new("cd", bold), Span::plain("é")];
        assert_eq!(plain_text(&line), "abcdé");
        assert_eq!(plain_text(&Vec::new()), "");
    }

    #[test]
    fn defaults_are_the_terminals_own() {
        let style = Style::default();
        assert_eq!(style.fg, Color::Default);
        assert_eq!(style.bg, Color::Default);
        assert!(!style.bold && !style.dim && !style.italic && !style.underline && !style.reverse);
    }

    #[test]
    fn controls_are_c0_del_and_c1() {
        for c in [
            '\0', '\x07', '\x1b', '\x1f', '\x7f', '\u{80}', '\u{9b}', '\u{9f}',
        ] {
            assert!(is_control(c), "{c:?}");
        }
        for c in [' ', '~', '\u{a0}', 'é', '\u{fffd}', '中'] {
            assert!(!is_control(c), "{c:?}");
        }
    }
}
