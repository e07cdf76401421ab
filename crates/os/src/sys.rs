//! Calls to the kernel that several parts share and none owns: random bytes, span ids,
//! sending a signal, and leaving at once.

use std::io;
use std::os::fd::AsFd;

use nix::sys::signal::Signal;
use nix::unistd::Pid;

use tether_protocol::protocol::ProcessSignal;

/// Fills `bytes` from the kernel's random source (getrandom(2): it blocks only until the
/// pool is first seeded, at boot).
pub fn random_bytes(bytes: &mut [u8]) -> io::Result<()> {
    // rustix: nix has no getrandom(2).
    let mut filled = 0;
    while filled < bytes.len() {
        match rustix::rand::getrandom(&mut bytes[filled..], rustix::rand::GetRandomFlags::empty()) {
            Ok(n) => filled += n,
            Err(rustix::io::Errno::INTR) => {}
            Err(err) => return Err(err.into()),
        }
    }
    Ok(())
}

/// Exits with `code` at once, as the shell does once its command is done: our output
/// flushed, and nothing else run on the way out. exit(3) would run the C library's exit
/// handlers and the destructors first, touching pages that were never touched before
/// (faults, on the path back to the caller), for nothing of ours.
pub fn exit_now(code: i32) -> ! {
    use std::io::Write;
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    // libc: neither nix nor rustix (outside its unstable `runtime`) has _exit(2).
    // SAFETY: _exit ends the process; what it skips (exit handlers, destructors) holds
    // nothing of ours: our streams are flushed above, and our files are written through.
    unsafe { libc::_exit(code) }
}

/// A fresh span id: 8 random bytes as 16 hex digits, never all zero.
pub fn new_span_id() -> String {
    let mut bytes = [0u8; 8];
    let random = random_bytes(&mut bytes);
    let mut id = u64::from_ne_bytes(bytes);
    if random.is_err() || id == 0 {
        // No randomness to be had: distinct enough for one machine's commands.
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        id = (now ^ (u64::from(std::process::id()) << 40)) | 1;
    }
    format!("{id:016x}")
}

/// Sends a [`ProcessSignal`]: nix for a standard signal, rustix for a real-time one (nix's
/// `Signal` has none) and for every pidfd (nix has no pidfd calls). The protocol holds the
/// number; sending it is the OS layer's.
pub trait SendSignal: Copy {
    /// nix's `Signal`, for a standard signal; `None` for a real-time one, which it cannot
    /// hold.
    fn to_nix(self) -> Option<Signal>;

    /// `kill(pid, self)`.
    fn send_to_pid(self, pid: i32) -> io::Result<()>;

    /// `killpg(pgid, self)`.
    fn send_to_group(self, pgid: i32) -> io::Result<()>;

    /// `pidfd_send_signal(pidfd, self)`, which reaches that process and never one that took
    /// its pid.
    fn send_to_pidfd(self, pidfd: impl AsFd) -> io::Result<()>;
}

impl SendSignal for ProcessSignal {
    fn to_nix(self) -> Option<Signal> {
        Signal::try_from(self.number()).ok()
    }

    fn send_to_pid(self, pid: i32) -> io::Result<()> {
        match self.to_nix() {
            Some(signal) => Ok(nix::sys::signal::kill(Pid::from_raw(pid), signal)?),
            None => Ok(rustix::process::kill_process(
                rustix_pid(pid)?,
                to_rustix(self),
            )?),
        }
    }

    fn send_to_group(self, pgid: i32) -> io::Result<()> {
        match self.to_nix() {
            Some(signal) => Ok(nix::sys::signal::killpg(Pid::from_raw(pgid), signal)?),
            None => Ok(rustix::process::kill_process_group(
                rustix_pid(pgid)?,
                to_rustix(self),
            )?),
        }
    }

    fn send_to_pidfd(self, pidfd: impl AsFd) -> io::Result<()> {
        Ok(rustix::process::pidfd_send_signal(pidfd, to_rustix(self))?)
    }
}

fn rustix_pid(pid: i32) -> io::Result<rustix::process::Pid> {
    rustix::process::Pid::from_raw(pid).ok_or_else(|| io::Error::from(nix::errno::Errno::EINVAL))
}

/// rustix's `Signal`, which pidfds take.
fn to_rustix(signal: ProcessSignal) -> rustix::process::Signal {
    // SAFETY: the number is a standard signal or within SIGRTMIN..=SIGRTMAX (checked where
    // it was made, and the protocol's numbers are held to libc's by the tests below), never
    // one the C library keeps for itself, which is what `from_raw_unchecked` asks.
    unsafe { rustix::process::Signal::from_raw_unchecked(signal.number()) }
}

/// Columns to fit a listing to (`tether ps`, `tether sessions`): the terminal's width when
/// stdout is one (80 if it does not say), else `COLUMNS` when it is set; `None`, whole lines
/// with nothing cut, when stdout is a file or a pipe and `COLUMNS` is unset: a script
/// reading the output wants every field, not what fits a terminal it does not have.
pub fn output_width() -> Option<usize> {
    use std::io::IsTerminal;
    let stdout = std::io::stdout();
    let terminal = stdout.is_terminal();
    // rustix: nix has no call for the window size.
    if terminal
        && let Ok(size) = rustix::termios::tcgetwinsize(&stdout)
        && size.ws_col > 0
    {
        return Some(usize::from(size.ws_col));
    }
    columns_or(std::env::var("COLUMNS").ok().as_deref(), terminal)
}

/// The width `COLUMNS` (`columns`) gives, else 80 on a `terminal` that did not say, else
/// none.
fn columns_or(columns: Option<&str>, terminal: bool) -> Option<usize> {
    columns
        .and_then(|c| c.trim().parse::<usize>().ok())
        .filter(|&c| c > 0)
        .or(terminal.then_some(80))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_set_are_the_width_and_without_them_only_a_terminal_has_one() {
        assert_eq!(columns_or(Some("132"), false), Some(132));
        assert_eq!(columns_or(Some(" 60 "), true), Some(60));
        assert_eq!(columns_or(None, true), Some(80));
        assert_eq!(columns_or(Some("wide"), true), Some(80));
        // A file or a pipe: whole lines.
        assert_eq!(columns_or(None, false), None);
        assert_eq!(columns_or(Some("0"), false), None);
    }

    #[test]
    fn random_bytes_fill_the_whole_buffer_and_differ() {
        let mut a = [0u8; 64];
        let mut b = [0u8; 64];
        random_bytes(&mut a).unwrap();
        random_bytes(&mut b).unwrap();
        assert_ne!(a, b);
        // 64 zero bytes in a row from a working source: 2^-512.
        assert_ne!(a, [0u8; 64]);
        random_bytes(&mut []).unwrap();
    }

    #[test]
    fn span_ids_are_16_hex_digits_never_zero_and_differ() {
        let span = new_span_id();
        assert_eq!(span.len(), 16);
        assert_ne!(span, "0".repeat(16));
        assert_ne!(span, new_span_id());
    }

    #[test]
    fn the_protocols_signal_numbers_are_the_c_librarys() {
        assert_eq!(ProcessSignal::rtmin(), libc::SIGRTMIN());
        assert_eq!(ProcessSignal::rtmax(), libc::SIGRTMAX());
        for n in 1..=ProcessSignal::rtmax() {
            let ours = ProcessSignal::from_number(n);
            let nix = Signal::try_from(n).ok();
            let realtime = (libc::SIGRTMIN()..=libc::SIGRTMAX()).contains(&n);
            assert_eq!(ours.is_some(), nix.is_some() || realtime, "{n}");
            if let (Some(ours), Some(nix)) = (ours, nix) {
                assert_eq!(ours.name(), nix.as_str().trim_start_matches("SIG"), "{n}");
                assert_eq!(ours.to_nix(), Some(nix));
                assert!(!ours.is_realtime());
            }
        }
        let named = [
            (ProcessSignal::HUP, libc::SIGHUP),
            (ProcessSignal::INT, libc::SIGINT),
            (ProcessSignal::QUIT, libc::SIGQUIT),
            (ProcessSignal::KILL, libc::SIGKILL),
            (ProcessSignal::TERM, libc::SIGTERM),
            (ProcessSignal::CONT, libc::SIGCONT),
            (ProcessSignal::STOP, libc::SIGSTOP),
            (ProcessSignal::TSTP, libc::SIGTSTP),
        ];
        for (ours, theirs) in named {
            assert_eq!(ours.number(), theirs, "{ours}");
        }
    }
}
