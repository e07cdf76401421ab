//! Whether a stream looks like a full-screen program's (it switched to the alternate screen,
//! or it moves the cursor about), so that the line log can point to the screen view. A cheap
//! look at the newest bytes only, without an emulator: a hint, not a rendering.

use std::fs::File;
use std::io;
use std::path::PathBuf;

use memchr::memmem;

use crate::output::stream::{open_if_exists, read_range};

/// The newest bytes looked at each time: a flood is never read whole for a hint.
const LOOK_BACK: u64 = 64 * 1024;

/// Bytes kept from the end of one look for the next, so that a sequence cut in two by a read
/// is still seen (`CSI ? 1049 h` is 8 bytes; parameters may make a cursor move longer).
const CARRY: usize = 16;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FullScreenSigns {
    /// The last alternate-screen switch seen turned it on.
    pub alternate: bool,
    /// The output moves the cursor up or to a position, or clears the screen: it draws a
    /// screen rather than lines.
    pub redraws: bool,
}

impl FullScreenSigns {
    pub fn any(self) -> bool {
        self.alternate || self.redraws
    }

    /// Takes note of the CSI sequences in `bytes`.
    pub fn scan(&mut self, bytes: &[u8]) {
        for at in memmem::find_iter(bytes, b"\x1b[") {
            let rest = &bytes[at + 2..];
            let params = rest
                .iter()
                .take_while(|b| b.is_ascii_digit() || matches!(b, b';' | b'?'))
                .count();
            let Some(&last) = rest.get(params) else {
                continue;
            };
            match (&rest[..params], last) {
                (b"?1049" | b"?1047" | b"?47", b'h') => self.alternate = true,
                (b"?1049" | b"?1047" | b"?47", b'l') => self.alternate = false,
                (p, b'H' | b'f' | b'A' | b'J' | b'd') if !p.starts_with(b"?") => {
                    self.redraws = true
                }
                _ => {}
            }
        }
    }
}

/// [`FullScreenSigns`] of a growing log file, read from where the last look ended.
#[derive(Debug)]
pub struct SignsReader {
    path: PathBuf,
    file: Option<File>,
    /// Where the next look starts.
    at: u64,
    carry: Vec<u8>,
    signs: FullScreenSigns,
}

impl SignsReader {
    pub fn new(path: PathBuf) -> Self {
        SignsReader {
            path,
            file: None,
            at: 0,
            carry: Vec::new(),
            signs: FullScreenSigns::default(),
        }
    }

    pub fn signs(&self) -> FullScreenSigns {
        self.signs
    }

    /// Looks at what the file gained up to `len` (its newest [`LOOK_BACK`] bytes at most).
    pub fn update(&mut self, len: u64) -> io::Result<FullScreenSigns> {
        if len <= self.at {
            return Ok(self.signs);
        }
        let Some(file) = open_if_exists(&self.path, &mut self.file)? else {
            return Ok(self.signs);
        };
        let from = self.at.max(len.saturating_sub(LOOK_BACK));
        if from > self.at {
            self.carry.clear();
        }
        let mut bytes = std::mem::take(&mut self.carry);
        self.at = read_range(file, &self.path, from..len, LOOK_BACK, |read| {
            bytes.extend_from_slice(read)
        })?;
        self.signs.scan(&bytes);
        self.carry = bytes[bytes.len().saturating_sub(CARRY)..].to_vec();
        Ok(self.signs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn signs(bytes: &[u8]) -> FullScreenSigns {
        let mut signs = FullScreenSigns::default();
        signs.scan(bytes);
        signs
    }

    #[test]
    fn lines_and_colours_are_no_sign() {
        assert!(!signs(b"\x1b[1;32mok\x1b[0m\r\x1b[K50%\n").any());
        assert!(!signs(b"\x1b[?25l\x1b[?2004h").any());
    }

    #[test]
    fn alternate_screen_and_cursor_moves_are() {
        assert!(signs(b"\x1b[?1049h").alternate);
        assert!(!signs(b"\x1b[?1049h...\x1b[?1049l").alternate);
        assert!(!signs(b"\x1b[?1049h...\x1b[?1049l").redraws);
        assert!(signs(b"\x1b[H\x1b[2J").redraws);
        assert!(signs(b"\x1b[12;40Hx").redraws);
        assert!(signs(b"\x1b[3A").redraws);
    }

    #[test]
    fn the_reader_sees_sequences_split_between_looks() {
        let mut tmp = tempfile::NamedTempFile::new().expect("temp file");
        let mut reader = SignsReader::new(tmp.path().to_path_buf());
        let mut append = |bytes: &[u8]| {
            tmp.write_all(bytes).unwrap();
            tmp.as_file().metadata().unwrap().len()
        };
        let len = append(b"plain\n\x1b[?10");
        assert!(!reader.update(len).unwrap().any());
        let len = append(b"49h");
        assert!(reader.update(len).unwrap().alternate);
        // A flood is looked at by its newest bytes only.
        append(&vec![b'x'; 1 << 20]);
        let len = append(b"\x1b[?1049l");
        assert!(!reader.update(len).unwrap().alternate);
        assert_eq!(reader.at, len);
    }

    #[test]
    fn a_missing_file_has_no_signs_yet() {
        let dir = tether_os::testing::private_tempdir();
        let mut reader = SignsReader::new(dir.path().join("stdout.log"));
        assert_eq!(reader.update(10).unwrap(), FullScreenSigns::default());
    }
}
