//! JSON for a terminal: serde_json escapes only U+0000–U+001F, `"` and `\`, so a command's
//! output or argv in a JSON line could still carry C1 controls (U+009B is CSI), DEL and bidi
//! overrides straight to the screen of whoever reads `tether grep --json` or an export. This
//! formatter writes every character [`is_unsafe_on_screen`] as `\uXXXX`: the JSON stays
//! valid and parses back to the very same text.

use std::io::{self, Write};

use serde::Serialize;
use serde_json::ser::{CompactFormatter, Formatter, PrettyFormatter};

use super::style::is_unsafe_on_screen;

/// Wraps a formatter, escaping what must not reach a terminal inside strings.
struct ScreenSafe<F>(F);

impl<F: Formatter> Formatter for ScreenSafe<F> {
    fn write_string_fragment<W: ?Sized + Write>(
        &mut self,
        writer: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        let mut plain = 0;
        for (at, c) in fragment.char_indices() {
            if !is_unsafe_on_screen(c) {
                continue;
            }
            writer.write_all(&fragment.as_bytes()[plain..at])?;
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                write!(writer, "\\u{unit:04x}")?;
            }
            plain = at + c.len_utf8();
        }
        writer.write_all(&fragment.as_bytes()[plain..])
    }

    // Everything else as the wrapped formatter does it.
    fn begin_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.begin_array(w)
    }
    fn end_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_array(w)
    }
    fn begin_array_value<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        self.0.begin_array_value(w, first)
    }
    fn end_array_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_array_value(w)
    }
    fn begin_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.begin_object(w)
    }
    fn end_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_object(w)
    }
    fn begin_object_key<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        self.0.begin_object_key(w, first)
    }
    fn begin_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.begin_object_value(w)
    }
    fn end_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_object_value(w)
    }
}

/// `value` as JSON on one line (`pretty`: indented), safe to print on a terminal.
pub fn to_vec<T: Serialize + ?Sized>(value: &T, pretty: bool) -> serde_json::Result<Vec<u8>> {
    let mut out = Vec::new();
    if pretty {
        let mut ser =
            serde_json::Serializer::with_formatter(&mut out, ScreenSafe(PrettyFormatter::new()));
        value.serialize(&mut ser)?;
    } else {
        let mut ser =
            serde_json::Serializer::with_formatter(&mut out, ScreenSafe(CompactFormatter));
        value.serialize(&mut ser)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c1_controls_del_and_bidi_overrides_are_escaped_and_read_back() {
        let text = "a\u{9b}31mred\u{7f}\u{202e}txt.exe\u{1b}[2J é 🦀";
        let json = String::from_utf8(to_vec(&serde_json::json!({ "t": text }), false).unwrap())
            .expect("utf-8");
        assert!(!json.chars().any(is_unsafe_on_screen), "{json}");
        assert!(json.contains("\\u009b") && json.contains("\\u202e") && json.contains("\\u007f"));
        assert!(
            json.contains("é 🦀"),
            "printable text stays as it is: {json}"
        );
        let back: serde_json::Value = serde_json::from_str(&json).expect("valid JSON");
        assert_eq!(back["t"], text);
        let pretty = to_vec(&serde_json::json!({ "t": text }), true).unwrap();
        let back: serde_json::Value = serde_json::from_slice(&pretty).expect("valid JSON");
        assert_eq!(back["t"], text);
    }
}
