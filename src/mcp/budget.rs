//! What one reply may weigh. A client hands a tool result to its model whole, warns past
//! about 10,000 tokens and refuses past about 25,000: every tool call's `result` is kept
//! within [`REPLY_BUDGET`] bytes of JSON, counted as it is sent (the structured content and
//! its text mirror, with every escape), and whatever could be longer is paged or cut with a
//! mark.

use rmcp::model::CallToolResult;
use serde::Serialize;

/// The most bytes a tool call's `result` serializes to: about 10,000 tokens.
pub const REPLY_BUDGET: usize = 40_000;

/// Caps on the texts a reply echoes, in bytes: far above what a name, a command line, an
/// error or a journal path is in use, and low enough that all of them at once, in the
/// costliest characters JSON has (a control byte escaped as `\u0001`, then escaped again
/// in the mirror: 13 bytes each), leave room in [`REPLY_BUDGET`] for the rest.
pub const NAME_CAP: usize = 128;
pub const COMMAND_CAP: usize = 1024;
pub const ERROR_CAP: usize = 512;
pub const PATH_CAP: usize = 512;
/// The most pids of processes left running a reply lists; the rest are counted.
pub const PIDS_SHOWN: usize = 64;
/// A tool error's message, which may quote what the client sent (a regex, an id, a path).
pub const TOOL_ERROR_CAP: usize = 4096;
/// A JSON-RPC error's message, which may quote arguments (serde quotes a string it refuses).
pub const RPC_ERROR_CAP: usize = 2048;

/// The bytes of the `result` a tool that answers `value` sends: `value` as structured
/// content and again as the text block that mirrors it, as rmcp's `Json` builds it.
pub fn reply_size<T: Serialize>(value: &T) -> usize {
    serde_json::to_value(value)
        .and_then(|value| serde_json::to_vec(&CallToolResult::structured(value)))
        .map_or(usize::MAX, |bytes| bytes.len())
}

/// What `text` adds to a reply as a string value: its escaped form in the structured
/// content, and that escaped form escaped again in the text mirror. Additive: the cost of
/// two texts joined is the sum of theirs.
pub fn text_cost(text: &str) -> usize {
    text.chars().map(char_cost).sum()
}

pub fn char_cost(c: char) -> usize {
    match c {
        // `\"` in the content, `\\\"` in the mirror.
        '"' | '\\' => 2 + 4,
        // `\n` in the content, `\\n` in the mirror.
        '\n' | '\r' | '\t' | '\u{8}' | '\u{c}' => 2 + 3,
        // `\u0001`, then `\\u0001`.
        c if (c as u32) < 0x20 => 6 + 7,
        c => 2 * c.len_utf8(),
    }
}

/// What a value adds to a reply as one element of an array: its JSON, that JSON escaped in
/// the mirror, and a comma in each.
pub fn element_cost<T: Serialize>(value: &T) -> usize {
    let Ok(json) = serde_json::to_string(value) else {
        return usize::MAX;
    };
    let mirrored: usize = json
        .chars()
        .map(|c| match c {
            '"' | '\\' => 2,
            c => c.len_utf8(),
        })
        .sum();
    json.len() + mirrored + 2
}

/// `text`, or its first `max` bytes (to a character boundary) and a mark saying how many
/// more there were: `…[1234 more bytes]`.
pub fn capped(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut head = max;
    while !text.is_char_boundary(head) {
        head -= 1;
    }
    format!("{}…[{} more bytes]", &text[..head], text.len() - head)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_text_costs_what_it_adds_to_the_reply() {
        #[derive(Serialize)]
        struct Page {
            text: String,
        }
        let empty = reply_size(&Page {
            text: String::new(),
        });
        for text in [
            "plain",
            "tab\there\r\n",
            "\"quoted\" and \\ back",
            "\u{1}\u{1f}\u{7f}",
            "\u{fffd}é😀",
        ] {
            let size = reply_size(&Page { text: text.into() });
            assert_eq!(size, empty + text_cost(text), "{text:?}");
        }
    }

    #[test]
    fn an_element_costs_what_it_adds_to_an_array() {
        #[derive(Serialize)]
        struct List {
            items: Vec<String>,
        }
        let items = ["a\"b", "\u{1}", "é\\"];
        let one = reply_size(&List {
            items: vec![items[0].into()],
        });
        let all = reply_size(&List {
            items: items.iter().map(|s| s.to_string()).collect(),
        });
        let added: usize = items[1..].iter().map(element_cost).sum();
        assert_eq!(all, one + added);
    }

    #[test]
    fn a_long_text_is_cut_with_a_mark() {
        assert_eq!(capped("short", 10), "short");
        assert_eq!(capped("abcdefghij", 4), "abcd…[6 more bytes]");
        // Never inside a character.
        assert_eq!(capped("ééé", 3), "é…[4 more bytes]");
    }
}
