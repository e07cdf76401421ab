//! What one reply may weigh: texts that may quote what a client sent are cut with a mark.

/// A JSON-RPC error's message, which may quote arguments (serde quotes a string it refuses).
pub const RPC_ERROR_CAP: usize = 2048;

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
    fn a_long_text_is_cut_with_a_mark() {
        assert_eq!(capped("short", 10), "short");
        assert_eq!(capped("abcdefghij", 4), "abcd…[6 more bytes]");
        // Never inside a character.
        assert_eq!(capped("ééé", 3), "é…[4 more bytes]");
    }
}
