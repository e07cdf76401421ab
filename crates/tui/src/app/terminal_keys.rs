//! Keys and pastes as the bytes a terminal sends for them (xterm's encoding, normal cursor
//! mode), for a command being typed into (`i`).

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

const ESC: u8 = 0x1b;

/// The bytes a terminal sends for `key`; empty for a key it sends nothing for.
pub fn key_bytes(key: KeyEvent) -> Vec<u8> {
    let mods = key.modifiers;
    let alt = mods.contains(KeyModifiers::ALT);
    let ctrl = mods.contains(KeyModifiers::CONTROL);
    let shift = mods.contains(KeyModifiers::SHIFT);
    // xterm's modifier parameter: 1 + shift 1, alt 2, ctrl 4.
    let param = 1 + u8::from(shift) + 2 * u8::from(alt) + 4 * u8::from(ctrl);
    let mut bytes = match key.code {
        KeyCode::Char(c) if ctrl => match control_byte(c) {
            Some(byte) => vec![byte],
            None => char_bytes(c),
        },
        KeyCode::Char(c) => char_bytes(c),
        KeyCode::Enter => vec![b'\r'],
        KeyCode::Tab => vec![b'\t'],
        KeyCode::BackTab => return b"\x1b[Z".to_vec(),
        KeyCode::Backspace if ctrl => vec![0x08],
        KeyCode::Backspace => vec![0x7f],
        KeyCode::Esc => vec![ESC],
        KeyCode::Null => vec![0],
        KeyCode::Up => return cursor(b'A', param),
        KeyCode::Down => return cursor(b'B', param),
        KeyCode::Right => return cursor(b'C', param),
        KeyCode::Left => return cursor(b'D', param),
        KeyCode::Home => return cursor(b'H', param),
        KeyCode::End => return cursor(b'F', param),
        KeyCode::Insert => return tilde(2, param),
        KeyCode::Delete => return tilde(3, param),
        KeyCode::PageUp => return tilde(5, param),
        KeyCode::PageDown => return tilde(6, param),
        KeyCode::F(n @ 1..=4) => return function_ss3(b"PQRS"[usize::from(n - 1)], param),
        KeyCode::F(n @ 5..=12) => {
            const CODES: [u8; 8] = [15, 17, 18, 19, 20, 21, 23, 24];
            return tilde(CODES[usize::from(n - 5)], param);
        }
        _ => return Vec::new(),
    };
    // Alt is an ESC before what the key sends alone (xterm's metaSendsEscape).
    if alt {
        bytes.insert(0, ESC);
    }
    bytes
}

fn char_bytes(c: char) -> Vec<u8> {
    let mut buf = [0u8; 4];
    c.encode_utf8(&mut buf).as_bytes().to_vec()
}

/// What Ctrl with this character sends: letters and `@[\]^_` their control code, `?` DEL,
/// space NUL, and the digits as xterm maps them (Ctrl-2 NUL, 3 to 7 ESC to US, 8 DEL).
fn control_byte(c: char) -> Option<u8> {
    match c {
        'a'..='z' | 'A'..='Z' => Some(c.to_ascii_uppercase() as u8 & 0x1f),
        '@' | ' ' | '2' => Some(0),
        '[' | '3' => Some(ESC),
        '\\' | '4' => Some(0x1c),
        ']' | '5' => Some(0x1d),
        '^' | '6' => Some(0x1e),
        '_' | '7' | '/' => Some(0x1f),
        '?' | '8' => Some(0x7f),
        _ => None,
    }
}

/// `ESC [ A`, or with modifiers `ESC [ 1 ; m A`.
fn cursor(end: u8, param: u8) -> Vec<u8> {
    if param == 1 {
        vec![ESC, b'[', end]
    } else {
        format!("\x1b[1;{param}{}", end as char).into_bytes()
    }
}

/// `ESC [ n ~`, or with modifiers `ESC [ n ; m ~`.
fn tilde(n: u8, param: u8) -> Vec<u8> {
    if param == 1 {
        format!("\x1b[{n}~").into_bytes()
    } else {
        format!("\x1b[{n};{param}~").into_bytes()
    }
}

/// F1 to F4: `ESC O P`, or with modifiers `ESC [ 1 ; m P`.
fn function_ss3(end: u8, param: u8) -> Vec<u8> {
    if param == 1 {
        vec![ESC, b'O', end]
    } else {
        cursor(end, param)
    }
}

/// Pasted text as a terminal sends it: line ends as Enter (`\r`), the rest as it is.
pub fn paste_bytes(text: &str) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(text.len());
    let mut chars = text.bytes().peekable();
    while let Some(b) = chars.next() {
        match b {
            b'\r' if chars.peek() == Some(&b'\n') => {}
            b'\n' => bytes.push(b'\r'),
            b => bytes.push(b),
        }
    }
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(code: KeyCode, modifiers: KeyModifiers) -> Vec<u8> {
        key_bytes(KeyEvent::new(code, modifiers))
    }

    fn plain(code: KeyCode) -> Vec<u8> {
        with(code, KeyModifiers::NONE)
    }

    #[test]
    fn printable_keys_are_their_utf8() {
        assert_eq!(plain(KeyCode::Char('a')), b"a");
        assert_eq!(with(KeyCode::Char('A'), KeyModifiers::SHIFT), b"A");
        assert_eq!(plain(KeyCode::Char('é')), "é".as_bytes());
        assert_eq!(plain(KeyCode::Char('🦀')), "🦀".as_bytes());
    }

    #[test]
    fn editing_keys_are_what_a_terminal_sends() {
        assert_eq!(plain(KeyCode::Enter), b"\r");
        assert_eq!(plain(KeyCode::Tab), b"\t");
        assert_eq!(with(KeyCode::BackTab, KeyModifiers::SHIFT), b"\x1b[Z");
        assert_eq!(plain(KeyCode::Backspace), b"\x7f");
        assert_eq!(with(KeyCode::Backspace, KeyModifiers::CONTROL), b"\x08");
        assert_eq!(plain(KeyCode::Esc), b"\x1b");
        assert_eq!(plain(KeyCode::Delete), b"\x1b[3~");
        assert_eq!(plain(KeyCode::Insert), b"\x1b[2~");
        assert_eq!(plain(KeyCode::PageUp), b"\x1b[5~");
        assert_eq!(plain(KeyCode::PageDown), b"\x1b[6~");
    }

    #[test]
    fn cursor_and_function_keys_carry_their_modifiers() {
        assert_eq!(plain(KeyCode::Up), b"\x1b[A");
        assert_eq!(plain(KeyCode::Down), b"\x1b[B");
        assert_eq!(plain(KeyCode::Right), b"\x1b[C");
        assert_eq!(plain(KeyCode::Left), b"\x1b[D");
        assert_eq!(plain(KeyCode::Home), b"\x1b[H");
        assert_eq!(plain(KeyCode::End), b"\x1b[F");
        assert_eq!(with(KeyCode::Right, KeyModifiers::CONTROL), b"\x1b[1;5C");
        assert_eq!(with(KeyCode::Up, KeyModifiers::SHIFT), b"\x1b[1;2A");
        assert_eq!(
            with(KeyCode::Left, KeyModifiers::ALT | KeyModifiers::SHIFT),
            b"\x1b[1;4D"
        );
        assert_eq!(with(KeyCode::Delete, KeyModifiers::CONTROL), b"\x1b[3;5~");
        assert_eq!(plain(KeyCode::F(1)), b"\x1bOP");
        assert_eq!(plain(KeyCode::F(4)), b"\x1bOS");
        assert_eq!(with(KeyCode::F(2), KeyModifiers::SHIFT), b"\x1b[1;2Q");
        assert_eq!(plain(KeyCode::F(5)), b"\x1b[15~");
        assert_eq!(plain(KeyCode::F(12)), b"\x1b[24~");
        assert_eq!(plain(KeyCode::F(13)), b"");
        assert_eq!(plain(KeyCode::CapsLock), b"");
    }

    #[test]
    fn ctrl_makes_control_bytes_and_alt_an_escape_prefix() {
        let ctrl = |c| with(KeyCode::Char(c), KeyModifiers::CONTROL);
        assert_eq!(ctrl('c'), [0x03]);
        assert_eq!(ctrl('d'), [0x04]);
        assert_eq!(ctrl('z'), [0x1a]);
        assert_eq!(ctrl('A'), [0x01]);
        assert_eq!(ctrl(' '), [0x00]);
        assert_eq!(ctrl('['), [0x1b]);
        assert_eq!(ctrl('4'), [0x1c], "crossterm reports Ctrl-\\ as Ctrl-4");
        assert_eq!(ctrl('?'), [0x7f]);
        assert_eq!(ctrl('é'), "é".as_bytes(), "no control code: the character");
        assert_eq!(with(KeyCode::Char('b'), KeyModifiers::ALT), b"\x1bb");
        assert_eq!(
            with(
                KeyCode::Char('x'),
                KeyModifiers::ALT | KeyModifiers::CONTROL
            ),
            b"\x1b\x18"
        );
        assert_eq!(with(KeyCode::Enter, KeyModifiers::ALT), b"\x1b\r");
    }

    #[test]
    fn a_paste_sends_line_ends_as_enter_and_everything_else_as_is() {
        assert_eq!(paste_bytes("a\nb\r\nc\rd"), b"a\rb\rc\rd");
        assert_eq!(paste_bytes("\x1b[6n\u{0}é"), "\x1b[6n\u{0}é".as_bytes());
        assert_eq!(paste_bytes(""), b"");
    }
}
