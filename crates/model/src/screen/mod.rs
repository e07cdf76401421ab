//! A command's output as its terminal would show it: the screen view of an output pane, for
//! programs that draw with cursor moves or on the alternate screen (top, htop, a TUI test
//! runner, a progress display), where the line log shows the drawing, not the picture.
//!
//! A terminal emulator (alacritty's, `alacritty_terminal`) is fed the bytes of the stream's
//! log file from where it left off, at the size its caller gives (the command's terminal's).
//! What leaves this module is cells of printable text and styles: the emulator's answers to
//! queries, titles, clipboard writes and bells go nowhere, and every cell's text passes the
//! same character checks as a line of the log (no control characters, no bidi controls).

mod emulator;
mod grid;
mod signs;
mod start;
mod stream;

pub use emulator::ScreenEmulator;
pub use grid::{ScreenCell, ScreenGrid};
pub use signs::{FullScreenSigns, SignsReader};
pub use start::{ReplayStart, TAIL_REPLAY};
pub use stream::StreamScreen;
