//! JSON for a terminal: serde_json escapes only U+0000–U+001F, `"` and `\`, so a command's
//! output or argv in a JSON line could still carry C1 controls (U+009B is CSI), DEL and bidi
//! overrides straight to the screen of whoever reads `tether grep --json` or an export. This
//! writes every character [`is_unsafe_on_screen`] as `\uXXXX`: the JSON stays
//! valid and parses back to the very same text.

use std::fmt::Write as _;

use serde::Serialize;

use super::style::is_unsafe_on_screen;

/// `value` as JSON on one line (`pretty`: indented), safe to print on a terminal.
pub fn to_vec<T: Serialize + ?Sized>(value: &T, pretty: bool) -> serde_json::Result<Vec<u8>> {
    let json = if pretty {
        serde_json::to_string_pretty(value)?
    } else {
        serde_json::to_string(value)?
    };
    // Outside its strings serde_json writes only ASCII (and, pretty, line breaks); inside
    // them it has escaped every C0 control: what is left to escape is in strings.
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        if c >= ' ' && is_unsafe_on_screen(c) {
            // As JSON escapes any character: its UTF-16 units, a surrogate pair beyond the BMP.
            for unit in c.encode_utf16(&mut [0; 2]) {
                let _ = write!(out, "\\u{unit:04x}");
            }
        } else {
            out.push(c);
        }
    }
    Ok(out.into_bytes())
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
