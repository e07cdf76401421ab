//! Where to start feeding the emulator, so that a screen costs a bounded amount of work and
//! memory whatever the log's size: all of a small log; of a large one, its last stretch, from
//! the last point where the program started a fresh screen if there is one there.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

/// The most bytes replayed to build a screen (and fed in one frame): a few hundred redraws of
/// a full-screen program.
pub const REPLAY_CAP: u64 = 4 << 20;

/// The most bytes replayed when no fresh screen is in reach: far more than a screenful of
/// lines, and a small part of a flood, which is caught up with every frame.
pub const TAIL_REPLAY: u64 = 256 << 10;

/// How much is read at once while looking back for a fresh screen.
const SCAN_CHUNK: usize = 64 * 1024;

/// Sequences after which nothing drawn before shows: a switch to the alternate screen, a
/// clear of the whole screen, a full reset.
const FRESH_SCREEN: [&[u8]; 5] = [
    b"\x1b[?1049h",
    b"\x1b[?1047h",
    b"\x1b[?47h",
    b"\x1b[2J",
    b"\x1bc",
];

/// The longest of [`FRESH_SCREEN`]: chunks overlap by one less, so none is missed at a seam.
const LONGEST_MARK: usize = 8;

/// Where a screen's replay started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplayStart {
    /// The whole log was replayed: the screen is exact.
    Whole,
    /// From the last fresh screen (alternate screen, clear, reset) in the last
    /// [`REPLAY_CAP`] bytes: exact but for modes set before it.
    FreshScreen { at: u64 },
    /// From [`TAIL_REPLAY`] bytes before the end (at a line start when there is one near):
    /// what was drawn before is missing.
    Tail { at: u64 },
}

impl ReplayStart {
    pub fn offset(self) -> u64 {
        match self {
            ReplayStart::Whole => 0,
            ReplayStart::FreshScreen { at } | ReplayStart::Tail { at } => at,
        }
    }
}

/// Where to replay a log of `len` bytes from: all of it up to `cap` bytes; else from the last
/// fresh screen in its last `cap` bytes; else its last `cap` or [`TAIL_REPLAY`] bytes,
/// whichever is fewer.
pub fn replay_start(file: &File, len: u64, cap: u64) -> io::Result<ReplayStart> {
    if len <= cap {
        return Ok(ReplayStart::Whole);
    }
    let window = len - cap;
    let mut end = len;
    let mut buf = vec![0; SCAN_CHUNK + LONGEST_MARK - 1];
    while end > window {
        let start = end.saturating_sub(SCAN_CHUNK as u64).max(window);
        // Reaches past `end` by a mark's length, so a mark across the seam is found.
        let read_end = (end + LONGEST_MARK as u64 - 1).min(len);
        let bytes = &mut buf[..(read_end - start) as usize];
        file.read_exact_at(bytes, start)?;
        let bytes = &*bytes;
        let found = memchr::memrchr_iter(0x1b, bytes).find(|&at| {
            FRESH_SCREEN
                .iter()
                .any(|mark| bytes[at..].starts_with(mark))
        });
        if let Some(at) = found {
            return Ok(ReplayStart::FreshScreen {
                at: start + at as u64,
            });
        }
        end = start;
    }
    // No fresh screen: start at a line, not in the middle of an escape sequence or a
    // character, if a line starts near.
    let tail = len - cap.min(TAIL_REPLAY);
    let mut head = vec![0; SCAN_CHUNK.min((len - tail) as usize)];
    file.read_exact_at(&mut head, tail)?;
    let skip = match memchr::memchr(b'\n', &head) {
        Some(newline) => newline + 1,
        None => head
            .iter()
            .take_while(|&&b| (0x80..0xc0).contains(&b))
            .count(),
    };
    Ok(ReplayStart::Tail {
        at: tail + skip as u64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn file_of(bytes: &[u8]) -> (tempfile::NamedTempFile, File) {
        let mut tmp = tempfile::NamedTempFile::new().expect("temp file");
        tmp.write_all(bytes).expect("write");
        let file = tmp.reopen().expect("reopen");
        (tmp, file)
    }

    #[test]
    fn a_small_log_is_replayed_whole() {
        let (_tmp, file) = file_of(b"\x1b[2Jsmall");
        assert_eq!(replay_start(&file, 10, 100).unwrap(), ReplayStart::Whole);
    }

    #[test]
    fn a_large_log_starts_at_its_last_fresh_screen_within_the_cap() {
        let mut bytes = b"\x1b[?1049h".to_vec();
        bytes.resize(300_000, b'x');
        let clear = bytes.len() as u64;
        bytes.extend_from_slice(b"\x1b[2J\x1b[Hframe");
        bytes.resize(400_000, b'y');
        let (_tmp, file) = file_of(&bytes);
        let len = bytes.len() as u64;
        assert_eq!(
            replay_start(&file, len, 200_000).unwrap(),
            ReplayStart::FreshScreen { at: clear }
        );
        // The alternate-screen switch at the start is out of reach of a smaller cap.
        assert!(matches!(
            replay_start(&file, len, 50_000).unwrap(),
            ReplayStart::Tail { .. }
        ));
    }

    #[test]
    fn a_mark_across_a_chunk_seam_is_found() {
        for shift in 0..LONGEST_MARK as u64 {
            let mut bytes = vec![b'x'; 200_000];
            let at = 200_000 - SCAN_CHUNK as u64 - 3 + shift;
            bytes[at as usize..at as usize + 8].copy_from_slice(b"\x1b[?1049h");
            let (_tmp, file) = file_of(&bytes);
            assert_eq!(
                replay_start(&file, 200_000, 150_000).unwrap(),
                ReplayStart::FreshScreen { at },
                "shift {shift}"
            );
        }
    }

    #[test]
    fn a_tail_without_fresh_screens_is_short() {
        let bytes = b"y\n".repeat(3 << 20);
        let (_tmp, file) = file_of(&bytes);
        let len = bytes.len() as u64;
        assert_eq!(
            replay_start(&file, len, REPLAY_CAP).unwrap(),
            // After the first line break: "y\n" is two bytes.
            ReplayStart::Tail {
                at: len - TAIL_REPLAY + 2
            }
        );
    }

    #[test]
    fn a_tail_starts_after_a_line_break() {
        let mut bytes = Vec::new();
        for n in 0..20_000 {
            bytes.extend_from_slice(format!("\x1b[32mline {n}\x1b[0m\n").as_bytes());
        }
        let (_tmp, file) = file_of(&bytes);
        let len = bytes.len() as u64;
        let start = replay_start(&file, len, 1000).unwrap();
        let ReplayStart::Tail { at } = start else {
            panic!("expected a tail, got {start:?}");
        };
        assert!(at > len - 1000 && at < len - 900, "{at}");
        assert_eq!(bytes[at as usize - 1], b'\n');
        assert_eq!(start.offset(), at);
    }
}
