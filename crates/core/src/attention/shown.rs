//! Whether a write shows anything: what counts as a command writing for the attention
//! detector. A write of terminal controls alone (a window title, colours reset, a
//! synchronized update with nothing in it, the cursor hidden or moved) draws no text: an
//! agent waiting for its approval rewrites its title every second (Codex's `[ ! ] Action
//! Required`), and took no wait for one while it did.

const ESC: u8 = 0x1b;
const BEL: u8 = 0x07;

/// Whether `bytes` hold any text: a byte that is not a control character outside an escape
/// sequence. An escape sequence the write cuts short counts as text (what it would have
/// been is not known).
pub fn shows_text(bytes: &[u8]) -> bool {
    let mut at = 0;
    while at < bytes.len() {
        let byte = bytes[at];
        if byte != ESC {
            if byte >= 0x20 && byte != 0x7f {
                return true;
            }
            at += 1;
            continue;
        }
        match escape_length(&bytes[at..]) {
            Some(length) => at += length,
            None => return true,
        }
    }
    false
}

/// The length of the escape sequence `bytes` begins with (`bytes[0]` is ESC), or `None` if
/// it is cut short. Also what `tether grep` skips of an agent's terminal stream.
pub fn escape_length(bytes: &[u8]) -> Option<usize> {
    match *bytes.get(1)? {
        // CSI: parameters and intermediates, then a final byte.
        b'[' => (2..bytes.len())
            .find(|&i| (0x40..=0x7e).contains(&bytes[i]))
            .map(|i| i + 1),
        // OSC, DCS, SOS, PM, APC: a string up to BEL (OSC) or ST (ESC \); another ESC ends
        // it where it stands and begins a sequence of its own, as a terminal takes it.
        b']' | b'P' | b'X' | b'^' | b'_' => (2..bytes.len()).find_map(|i| match bytes[i] {
            BEL => Some(i + 1),
            ESC if bytes.get(i + 1) == Some(&b'\\') => Some(i + 2),
            ESC if i + 1 < bytes.len() => Some(i),
            _ => None,
        }),
        // A character set or another sequence of intermediates, then a final byte.
        0x20..=0x2f => (2..bytes.len())
            .find(|&i| (0x30..=0x7e).contains(&bytes[i]))
            .map(|i| i + 1),
        _ => Some(2),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_controls_alone_show_no_text() {
        // Codex's approval: an empty synchronized update, then its title.
        let title =
            b"\x1b[?2026h\x1b[39m\x1b[49m\x1b[0m\x1b[?2026l\x1b]0;[ ! ] Action Required | w\x07";
        assert!(!shows_text(title));
        assert!(!shows_text(b"\x1b]2;title\x1b\\\x1b[?25l\x1b[37;3H\r\n"));
        assert!(!shows_text(b"\x1b(B\x1b=\x1b7\x1b8"));
        assert!(!shows_text(b""));
    }

    #[test]
    fn text_anywhere_or_a_sequence_cut_short_shows() {
        assert!(shows_text(b"\x1b[1mhi\x1b[0m"));
        assert!(shows_text("\x1b[2K⠋".as_bytes()));
        assert!(shows_text(b"\x1b]0;cut short"));
        assert!(shows_text(b"\x1b[38;5"));
        assert!(shows_text(b"x"));
        // An OSC broken off by another sequence: what follows it is text.
        assert!(shows_text(b"\x1b]0;t\x1b[31mRed\x07"));
    }
}
