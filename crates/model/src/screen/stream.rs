//! The screen of one output stream: an emulator fed from the stream's log file, from where it
//! left off. Memory is the screen and one read buffer; work per update is at most
//! [`REPLAY_CAP`] bytes: further behind than that, the screen is rebuilt from a later start.

use std::fs::File;
use std::io;
use std::path::PathBuf;
use std::time::Instant;

use super::emulator::ScreenEmulator;
use super::grid::ScreenGrid;
use super::start::{REPLAY_CAP, ReplayStart, replay_start};
use crate::output::stream::{open_if_exists, read_error, read_range};

/// How much is read from the log at once.
const READ_CHUNK: u64 = 64 * 1024;

pub struct StreamScreen {
    path: PathBuf,
    /// Opened on the first update that finds the file.
    file: Option<File>,
    emulator: ScreenEmulator,
    /// Bytes of the log fed to the emulator.
    fed: u64,
    start: ReplayStart,
    cap: u64,
}

impl StreamScreen {
    /// The screen of the log at `path` (which may not exist yet), `rows` × `cols`.
    pub fn new(path: PathBuf, rows: u16, cols: u16) -> Self {
        Self::with_cap(path, rows, cols, REPLAY_CAP)
    }

    /// Replaying at most `cap` bytes.
    pub fn with_cap(path: PathBuf, rows: u16, cols: u16, cap: u64) -> Self {
        StreamScreen {
            path,
            file: None,
            emulator: ScreenEmulator::new(rows, cols),
            fed: 0,
            start: ReplayStart::Whole,
            cap: cap.max(1),
        }
    }

    pub fn size(&self) -> (u16, u16) {
        self.emulator.size()
    }

    /// Feeds what the log holds up to `len` (the bytes indexed for the line view, so both
    /// views show the same output), each part at the size it was drawn for: `sizes` are
    /// `(offset, (rows, cols))`, offsets ascending, each size the screen's from that offset
    /// of the log on (the first before it too). Returns whether a synchronized update is
    /// still waiting to be shown, so the caller draws again soon.
    pub fn update(
        &mut self,
        len: u64,
        sizes: &[(u64, (u16, u16))],
        now: Instant,
    ) -> io::Result<bool> {
        if len > self.fed {
            self.feed_to(len, sizes)?;
        }
        let (rows, cols) = size_at(sizes, self.fed, self.emulator.size());
        self.emulator.resize(rows, cols);
        Ok(self.emulator.end_overdue_sync(now))
    }

    fn feed_to(&mut self, len: u64, sizes: &[(u64, (u16, u16))]) -> io::Result<()> {
        let Some(file) = open_if_exists(&self.path, &mut self.file)? else {
            return Ok(());
        };
        if len - self.fed > self.cap {
            let start = replay_start(file, len, self.cap).map_err(|e| read_error(&self.path, e))?;
            let (rows, cols) = size_at(sizes, start.offset(), self.emulator.size());
            self.emulator = ScreenEmulator::new(rows, cols);
            self.fed = start.offset();
            self.start = start;
        }
        while self.fed < len {
            let (rows, cols) = size_at(sizes, self.fed, self.emulator.size());
            self.emulator.resize(rows, cols);
            let next = sizes.get(sizes.partition_point(|(from, _)| *from <= self.fed));
            let until = next.map_or(len, |(from, _)| (*from).min(len));
            let (emulator, fed) = (&mut self.emulator, &mut self.fed);
            read_range(file, &self.path, *fed..until, READ_CHUNK, |bytes| {
                emulator.feed(bytes);
                *fed += bytes.len() as u64;
            })?;
            if self.fed < until {
                // The file holds less than it was said to: the rest on a later update.
                break;
            }
        }
        Ok(())
    }

    pub fn grid(&self) -> ScreenGrid {
        self.emulator.grid()
    }

    /// The screen as plain text.
    pub fn text(&self) -> String {
        self.emulator.text()
    }

    /// Where the bytes on screen were replayed from.
    pub fn start(&self) -> ReplayStart {
        self.start
    }

    /// Bytes of the log fed so far.
    pub fn fed(&self) -> u64 {
        self.fed
    }
}

/// The size in `sizes` (see [`StreamScreen::update`]) from `offset` of the log on; `none`
/// without any.
fn size_at(sizes: &[(u64, (u16, u16))], offset: u64, none: (u16, u16)) -> (u16, u16) {
    let after = sizes.partition_point(|(from, _)| *from <= offset);
    let from = after.checked_sub(1).map_or(sizes.first(), |i| sizes.get(i));
    from.map_or(none, |(_, size)| *size)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn append(file: &mut std::fs::File, bytes: &[u8]) -> u64 {
        file.write_all(bytes).expect("append");
        file.metadata().expect("metadata").len()
    }

    #[test]
    fn follows_a_growing_log_from_where_it_left_off() {
        let dir = tether_os::testing::private_tempdir();
        let path = dir.path().join("stdout.log");
        let mut screen = StreamScreen::new(path.clone(), 3, 20);
        // Not there yet: an empty screen.
        assert!(!screen.update(5, &[], Instant::now()).expect("update"));
        assert_eq!(screen.text(), "");
        let mut log = tether_os::testing::create_private(&path);
        let len = append(&mut log, b"\x1b[?1049h\x1b[Hframe 1");
        screen.update(len, &[], Instant::now()).expect("update");
        assert_eq!(screen.text(), "frame 1");
        assert!(screen.grid().alternate);
        let len = append(&mut log, b"\x1b[H\x1b[2Jframe 2\x1b[3;1Hstatus");
        screen.update(len, &[], Instant::now()).expect("update");
        assert_eq!(screen.text(), "frame 2\n\nstatus");
        assert_eq!(screen.fed(), len);
        assert_eq!(screen.start(), ReplayStart::Whole);
        // Told of more than the file holds: what is there is fed, the rest later.
        screen
            .update(len + 100, &[], Instant::now())
            .expect("update");
        assert_eq!(screen.fed(), len);
    }

    #[test]
    fn far_behind_it_replays_from_the_last_fresh_screen() {
        let dir = tether_os::testing::private_tempdir();
        let path = dir.path().join("stdout.log");
        let mut log = tether_os::testing::create_private(&path);
        let mut len = append(&mut log, b"\x1b[?1049h");
        for n in 0..2000 {
            len = append(
                &mut log,
                format!("\x1b[H\x1b[2Jframe {n}\x1b[2;1H{}", "x".repeat(20)).as_bytes(),
            );
        }
        let mut screen = StreamScreen::with_cap(path, 4, 30, 10_000);
        screen.update(len, &[], Instant::now()).expect("update");
        assert!(matches!(screen.start(), ReplayStart::FreshScreen { .. }));
        assert!(
            screen.text().starts_with("frame 1999\n"),
            "{:?}",
            screen.text()
        );
        assert_eq!(screen.fed(), len);
    }

    #[test]
    fn a_flood_without_clears_keeps_a_bounded_tail() {
        let dir = tether_os::testing::private_tempdir();
        let path = dir.path().join("stdout.log");
        let mut log = tether_os::testing::create_private(&path);
        let mut bytes = Vec::new();
        for n in 0..100_000 {
            bytes.extend_from_slice(format!("line {n}\n").as_bytes());
        }
        let len = append(&mut log, &bytes);
        let mut screen = StreamScreen::with_cap(path, 3, 20, 4096);
        screen.update(len, &[], Instant::now()).expect("update");
        assert!(matches!(screen.start(), ReplayStart::Tail { .. }));
        assert_eq!(screen.text(), "line 99998\nline 99999");
    }

    /// Each part of the log is drawn at the size its terminal had then: a move to column 15
    /// stops at the 10th before the resize to 20 columns, and gets there after it, fed in
    /// one update or byte by byte alike.
    #[test]
    fn each_part_is_fed_at_the_size_it_was_drawn_for() {
        let dir = tether_os::testing::private_tempdir();
        let path = dir.path().join("stdout.log");
        let mut log = tether_os::testing::create_private(&path);
        let narrow = append(&mut log, b"\x1b[1;15HA");
        let len = append(&mut log, b"\x1b[2;15HB");
        let sizes = [(0, (6, 10)), (narrow, (6, 20))];
        let drawn = format!("{}A\n{}B", " ".repeat(9), " ".repeat(14));
        let mut whole = StreamScreen::new(path.clone(), 1, 2);
        whole.update(len, &sizes, Instant::now()).expect("update");
        assert_eq!(whole.size(), (6, 20));
        assert_eq!(whole.text(), drawn);
        let mut by_byte = StreamScreen::new(path.clone(), 1, 2);
        for upto in 1..=len {
            by_byte
                .update(upto, &sizes, Instant::now())
                .expect("update");
        }
        assert_eq!(by_byte.text(), drawn);
        // Up to the resize: the size then.
        let mut early = StreamScreen::new(path, 1, 2);
        early
            .update(narrow, &sizes, Instant::now())
            .expect("update");
        assert_eq!(early.size(), (6, 20), "the resize at its offset");
        assert_eq!(early.text(), format!("{}A", " ".repeat(9)));
    }

    /// Far behind, the replay begins later in the log, at the size the terminal had there.
    #[test]
    fn a_replay_from_a_later_start_begins_at_that_starts_size() {
        let dir = tether_os::testing::private_tempdir();
        let path = dir.path().join("stdout.log");
        let mut log = tether_os::testing::create_private(&path);
        let first = append(&mut log, &[b'x'; 5000]);
        append(&mut log, b"\x1b[2J");
        let len = append(&mut log, b"\x1b[1;15HA");
        let sizes = [(0, (6, 20)), (first, (6, 10))];
        let mut screen = StreamScreen::with_cap(path, 1, 2, 100);
        screen.update(len, &sizes, Instant::now()).expect("update");
        assert!(
            !matches!(screen.start(), ReplayStart::Whole),
            "{:?}",
            screen.start()
        );
        assert_eq!(
            screen.text(),
            format!("{}A", " ".repeat(9)),
            "at 10 columns"
        );
    }
}
