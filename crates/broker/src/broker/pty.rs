//! Pseudo-terminals for a command's streams: one per stream, so both pass `isatty()` and
//! stay apart. The broker keeps the master side and reads it as it reads a pipe; the
//! command gets the slave side, which the broker closes as soon as the command has it (a
//! master then reads EIO, not end of file, once every holder of the slave closed it).
//!
//! Output processing is off on the slave (no `OPOST`): the bytes the command writes are the
//! bytes journaled, with no `\n` turned into `\r\n`. The input side keeps a fresh terminal's
//! cooked defaults (line editing, echo, Ctrl-C as SIGINT), which is what a program that
//! reads a line expects; one that wants raw mode sets it itself, as it would in a terminal.
//!
//! rustix for the pair: nix has no `TIOCGPTPEER` (the slave opened without a path) nor
//! `TIOCSCTTY`, and the child's part, between fork and exec, makes raw calls only.

use std::io;
use std::os::fd::{AsFd, OwnedFd};

use rustix::pty::{OpenptFlags, grantpt, ioctl_tiocgptpeer, openpt, unlockpt};
use rustix::termios::{
    InputModes, OptionalActions, OutputModes, Winsize, tcgetattr, tcsetattr, tcsetwinsize,
};

use tether_protocol::protocol::WindowSize;

/// Set (to anything but empty) by tests only: every terminal fails to open, as it would with
/// no `/dev/ptmx` or with the system's limit of terminals reached, so that the fallback to
/// pipes can be seen.
pub const FAIL_FOR_TESTS_ENV: &str = "TETHER_TEST_PTY_FAIL";

/// One pseudo-terminal: the master for the broker, the slave for the command.
pub struct Pty {
    pub master: OwnedFd,
    pub slave: OwnedFd,
}

/// Why a terminal could not be had; the command then runs with pipes.
#[derive(Debug)]
pub struct PtyError {
    /// `open` (no `/dev/ptmx`, the limit of terminals reached), `setup` (it opened but could
    /// not be set up).
    pub code: &'static str,
    pub message: String,
}

impl Pty {
    /// Opens a pseudo-terminal of `size`, its slave with output processing off. Both ends are
    /// close-on-exec, and neither becomes the broker's controlling terminal.
    pub fn open(size: WindowSize) -> Result<Pty, PtyError> {
        if std::env::var_os(FAIL_FOR_TESTS_ENV).is_some_and(|v| !v.is_empty()) {
            return Err(PtyError {
                code: "open",
                message: format!("cannot open a pseudo-terminal: {FAIL_FOR_TESTS_ENV} is set"),
            });
        }
        let flags = OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC;
        let master = openpt(flags).map_err(|err| PtyError {
            code: "open",
            message: format!(
                "cannot open a pseudo-terminal (/dev/ptmx): {}; is /dev/pts mounted, or the limit of terminals (kernel.pty.max) reached?",
                io::Error::from(err)
            ),
        })?;
        let setup = |what: &str, err: rustix::io::Errno| PtyError {
            code: "setup",
            message: format!(
                "cannot set up a pseudo-terminal: {what}: {}",
                io::Error::from(err)
            ),
        };
        grantpt(&master).map_err(|e| setup("grantpt", e))?;
        unlockpt(&master).map_err(|e| setup("unlockpt", e))?;
        let slave = open_slave(&master, flags).map_err(|e| setup("opening its slave side", e))?;
        let mut termios = tcgetattr(&slave).map_err(|e| setup("tcgetattr", e))?;
        termios.output_modes.remove(OutputModes::OPOST);
        // Backspace in line editing takes a whole UTF-8 character back.
        termios.input_modes.insert(InputModes::IUTF8);
        tcsetattr(&slave, OptionalActions::Now, &termios).map_err(|e| setup("tcsetattr", e))?;
        set_size(&master, size).map_err(|e| setup("setting its size", io_errno(&e)))?;
        Ok(Pty { master, slave })
    }
}

fn io_errno(err: &io::Error) -> rustix::io::Errno {
    rustix::io::Errno::from_io_error(err).unwrap_or(rustix::io::Errno::IO)
}

/// The slave side, without a path where the kernel allows it (no race with another
/// process's terminal at the same name), else by its name.
fn open_slave(master: &OwnedFd, flags: OpenptFlags) -> rustix::io::Result<OwnedFd> {
    ioctl_tiocgptpeer(master, flags).or_else(|_| {
        let name = rustix::pty::ptsname(master, Vec::new())?;
        rustix::fs::open(
            name.as_c_str(),
            rustix::fs::OFlags::RDWR | rustix::fs::OFlags::NOCTTY | rustix::fs::OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        )
    })
}

/// Gives a terminal (through its master) a new size; the kernel sends SIGWINCH to the
/// foreground process group of the session it controls, if the size changed.
pub fn set_size(master: impl AsFd, size: WindowSize) -> io::Result<()> {
    let size = size.or_default();
    tcsetwinsize(
        master,
        Winsize {
            ws_row: size.rows,
            ws_col: size.cols,
            ws_xpixel: 0,
            ws_ypixel: 0,
        },
    )
    .map_err(io::Error::from)
}

/// Makes `pty` the broker's controlling terminal, so that the broker, not the command, is the
/// controlling process of its session: the command runs as the terminal's foreground group
/// (`spawn::signals::join_foreground`), and its main process exiting hangs nothing up. Were the command
/// the session's leader, its exit would send SIGHUP to the foreground group, and a `sleep &`
/// it leaves (which stays in that group) would die with it, where under a shell in a
/// terminal it runs on.
///
/// The broker leads a session of its own with no terminal (see `broker::main`), so it may
/// take one; `false` when it cannot (not a session leader, or it already has one): the
/// command then leads a session of its own ([`take_controlling_terminal`]), as before.
///
/// The master is then kept open until the broker exits: the last close of a master hangs its
/// terminal up, which sends SIGHUP to the controlling process, and the broker takes SIGHUP
/// as an order to stop. At exit that no longer matters (the command's tree is gone by then,
/// or dies with the broker anyway).
pub fn become_controlling_process(pty: &Pty) -> bool {
    static HELD: std::sync::Mutex<Vec<OwnedFd>> = std::sync::Mutex::new(Vec::new());
    let Ok(held) = pty.master.try_clone() else {
        return false;
    };
    if rustix::process::ioctl_tiocsctty(&pty.slave).is_err() {
        return false;
    }
    match HELD.lock() {
        Ok(mut all) => all.push(held),
        // A poisoned lock (a panic elsewhere): the descriptor is leaked, which is what is
        // wanted of it anyway.
        Err(_) => std::mem::forget(held),
    }
    true
}

/// In the forked child, before exec: a new session whose controlling terminal is the one on
/// descriptor `fd` (1 or 2, already in place), where the broker could not take it
/// ([`become_controlling_process`]). Raw system calls only.
pub fn take_controlling_terminal(fd: i32) -> io::Result<()> {
    nix::unistd::setsid()?;
    // SAFETY: `fd` is one of the child's standard descriptors, set up before this runs and
    // open until exec; it is only borrowed for the call.
    let tty = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
    rustix::process::ioctl_tiocsctty(tty)?;
    Ok(())
}

/// Whether a read error from a master means the stream is over: every holder of the slave
/// closed it (Linux says EIO, not end of file).
pub fn is_hangup(err: &io::Error) -> bool {
    err.raw_os_error() == Some(libc::EIO)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_terminal_passes_bytes_as_written_and_reads_eio_once_the_slave_is_closed() {
        let pty = match Pty::open(WindowSize {
            cols: 100,
            rows: 30,
        }) {
            Ok(pty) => pty,
            // A sandbox without /dev/pts: nothing to test here (the fallback is tested
            // end to end).
            Err(err) => return tether_os::testing::skip(&err.message),
        };
        assert!(rustix::termios::isatty(&pty.slave));
        let size = rustix::termios::tcgetwinsize(&pty.slave).unwrap();
        assert_eq!((size.ws_col, size.ws_row), (100, 30));
        rustix::io::write(&pty.slave, b"a\nb\n").unwrap();
        drop(pty.slave);
        let mut buf = [0u8; 64];
        let mut got = Vec::new();
        loop {
            match rustix::io::read(&pty.master, &mut buf) {
                Ok(0) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(err) => {
                    assert!(is_hangup(&io::Error::from(err)), "{err}");
                    break;
                }
            }
        }
        assert_eq!(got, b"a\nb\n", "no \\r added: output processing is off");
    }
}
