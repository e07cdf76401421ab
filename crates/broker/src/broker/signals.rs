//! The signals the broker acts on, heard through a pipe of its own
//! ([`tether_os::signal_pipe`]: tokio's wake-up, a `send` on a socket pair, is denied in an
//! agent's sandbox), and the sender of the last stop signal.

use std::io;

pub use tether_os::signal_pipe::SignalPipe as Signals;

/// The signal `PR_SET_PDEATHSIG` delivers: a hint to be confirmed, never acted on alone.
pub const PDEATH_SIGNAL: libc::c_int = libc::SIGUSR1;

/// The signals that stop the command (the broker's shutdown), in the order they are told.
pub const STOP_SIGNALS: [libc::c_int; 3] = [libc::SIGTERM, libc::SIGINT, libc::SIGHUP];

/// Every signal the broker hears: its children's ends, the parent-death signal, and the stop
/// signals, whose sender is kept (the stop's origin depends on who sent it: see
/// `Broker::shutdown_origin`).
pub fn install() -> io::Result<Signals> {
    let mut heard = vec![libc::SIGCHLD, PDEATH_SIGNAL];
    heard.extend(STOP_SIGNALS);
    Signals::install(&heard, &STOP_SIGNALS)
}
