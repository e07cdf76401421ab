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

/// For the crate's tests: a scratch directory in memory (`/dev/shm`) where there is one with
/// room to spare, for fixtures of thousands of files, whose inodes a disk's file system is
/// slow to hand out (ext4 looks for recently deleted ones at each); the usual temporary
/// directory otherwise, or where `TMPDIR` names one. 0700, as every scratch directory.
#[cfg(test)]
pub(crate) fn memory_tempdir() -> tempfile::TempDir {
    const ROOM: u64 = 256 << 20;
    let shm = std::path::Path::new("/dev/shm");
    let roomy = nix::sys::statvfs::statvfs(shm)
        .is_ok_and(|fs| fs.blocks_available() * fs.fragment_size() >= ROOM);
    if std::env::var_os("TMPDIR").is_none() && roomy {
        tether_os::testing::private_tempdir_in(shm)
    } else {
        tether_os::testing::private_tempdir()
    }
}
