//! Which of the command's streams get a pseudo-terminal under `tether exec`: those where
//! tether's own stream is a terminal, so the command sees what it would see without tether
//! (`ls` in columns and colours on a terminal, one name a line into a pipe). The size is
//! that of tether's terminal, and follows it (SIGWINCH).

use std::os::fd::{AsFd, BorrowedFd};

use tether_protocol::protocol::{TerminalRequest, WindowSize};

/// The terminals to ask for, given whether tether's stdout and stderr are terminals and the
/// size of the first that is. `None`: pipes for both.
pub fn terminal_for(stdout: bool, stderr: bool, size: WindowSize) -> Option<TerminalRequest> {
    (stdout || stderr).then(|| TerminalRequest {
        stdout,
        stderr,
        size: size.or_default(),
    })
}

/// Whether tether's own stdout and stderr are one file (`2>&1`, a terminal for both, one
/// file opened twice): the same device and inode. The command then gets one pipe or
/// terminal for both, as bash would give it one file, so that the order of what it writes
/// reaches the caller as written.
pub fn stdout_is_stderr() -> bool {
    same_file(std::io::stdout().as_fd(), std::io::stderr().as_fd())
}

fn same_file(a: BorrowedFd<'_>, b: BorrowedFd<'_>) -> bool {
    match (nix::sys::stat::fstat(a), nix::sys::stat::fstat(b)) {
        (Ok(a), Ok(b)) => (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino),
        _ => false,
    }
}

/// What tether's own stdout and stderr are: the terminals to ask for.
pub fn own_terminal() -> Option<TerminalRequest> {
    let (out, err) = (std::io::stdout(), std::io::stderr());
    let (out_tty, err_tty) = (
        nix::unistd::isatty(out.as_fd()).unwrap_or(false),
        nix::unistd::isatty(err.as_fd()).unwrap_or(false),
    );
    terminal_for(out_tty, err_tty, own_size())
}

/// The size of tether's terminal: stdout's, else stderr's; zero when neither says.
pub fn own_size() -> WindowSize {
    let (out, err) = (std::io::stdout(), std::io::stderr());
    size_of(out.as_fd())
        .or_else(|| size_of(err.as_fd()))
        .unwrap_or(WindowSize { cols: 0, rows: 0 })
}

fn size_of(fd: BorrowedFd<'_>) -> Option<WindowSize> {
    // rustix: nix has no call for the window size (only the raw ioctl macro).
    let size = rustix::termios::tcgetwinsize(fd).ok()?;
    (size.ws_col > 0 && size.ws_row > 0).then_some(WindowSize {
        cols: size.ws_col,
        rows: size.ws_row,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_gets_a_terminal_only_where_tethers_own_is_one() {
        let size = WindowSize {
            cols: 132,
            rows: 43,
        };
        assert_eq!(terminal_for(false, false, size), None);
        let both = terminal_for(true, true, size).unwrap();
        assert!(both.stdout && both.stderr);
        assert_eq!(both.size, size);
        let err_only = terminal_for(false, true, WindowSize { cols: 0, rows: 0 }).unwrap();
        assert!(!err_only.stdout && err_only.stderr);
        assert_eq!(err_only.size, WindowSize::DEFAULT);
    }

    #[test]
    fn one_file_twice_is_the_same_file_and_two_pipes_are_not() {
        let (read, write) = nix::unistd::pipe().unwrap();
        let dup = write.try_clone().unwrap();
        assert!(same_file(write.as_fd(), dup.as_fd()));
        // Both ends of a pipe are one inode: a reader and a writer are still "one file".
        assert!(same_file(read.as_fd(), write.as_fd()));
        let (_other_read, other_write) = nix::unistd::pipe().unwrap();
        assert!(!same_file(write.as_fd(), other_write.as_fd()));
        let file = tempfile::tempfile().unwrap();
        let path = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&file));
        let again = std::fs::OpenOptions::new().write(true).open(path).unwrap();
        assert!(same_file(file.as_fd(), again.as_fd()));
    }
}
