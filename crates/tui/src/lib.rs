//! tether-tui: the full-screen terminal UI. `app` is its state machine and event loop (keys,
//! the fleet's events, the launcher's runner, `tether watch` following other sessions), `ui`
//! draws a frame of it with ratatui, and `notify` tells the operator's desktop or command
//! when a command needs them.
//!
//! Above tether-frontend (whose conversations carry its commands), tether-model (what it
//! shows), tether-config, tether-os, tether-core and tether-protocol; below the binary, which
//! alone may name it.

pub mod app;
pub mod notify;
pub mod ui;

/// For the crate's tests: a scratch directory in memory (`/dev/shm`) where there is one, for
/// fixtures of thousands of files, whose inodes a disk's file system is slow to hand out
/// (ext4 looks for recently deleted ones at each); the usual temporary directory otherwise.
#[cfg(test)]
pub(crate) fn memory_tempdir() -> tempfile::TempDir {
    (tempfile::Builder::new().tempdir_in("/dev/shm"))
        .or_else(|_| tempfile::tempdir())
        .expect("a scratch directory")
}
