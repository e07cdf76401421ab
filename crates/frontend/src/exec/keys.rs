//! The keys of tether's terminal, passed to the command's own: how a command of the shell
//! shim that reads `/dev/tty` (a password prompt, `git` asking for a user name) gets what is
//! typed, as it would under the shell.
//!
//! The command runs in its broker's session, whose controlling terminal is the
//! pseudo-terminal the broker gave it (the command's group its foreground), so `/dev/tty` is
//! that terminal, not ours (a terminal controls one session only, and ours is our caller's). So when our stdin is our controlling terminal
//! and we are its foreground, the command's stdin is its terminal too, and what is typed
//! into ours is written into it ([`tether_protocol::protocol::Request::Input`], journaled by count
//! only). Our terminal stops echoing and editing lines meanwhile: the command's terminal
//! does both, as the command sets it (a prompt turns echo off there); signals stay ours
//! (Ctrl-C reaches the command as the shim passes signals on). It is given back as it was.

use std::os::fd::{AsFd, OwnedFd};

use nix::sys::termios::{
    InputFlags, LocalFlags, SetArg, SpecialCharacterIndices, Termios, tcgetattr, tcsetattr,
};
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};

/// Whether the keys should be relayed: stdin is our controlling terminal and our process
/// group is its foreground one (a background job reading it would be stopped by SIGTTIN).
pub fn stdin_is_our_foreground_terminal() -> bool {
    let stdin = std::io::stdin();
    let fd = stdin.as_fd();
    nix::unistd::isatty(fd).unwrap_or(false)
        && nix::unistd::tcgetpgrp(fd).is_ok_and(|group| group == nix::unistd::getpgrp())
}

/// Our terminal in relay mode, given back as it was when dropped.
pub struct KeyRelay {
    terminal: OwnedFd,
    saved: Termios,
    relaying: Termios,
    /// What was typed, read by a thread of its own (a blocking read: the terminal's file
    /// description is shared with our caller and must stay blocking).
    keys: UnboundedReceiver<Vec<u8>>,
    /// The reading thread ended (our terminal is gone).
    closed: bool,
}

impl KeyRelay {
    /// Puts our stdin's terminal in relay mode and starts reading it; `None` when it cannot
    /// (then the command keeps our stdin, as before).
    pub fn start() -> Option<KeyRelay> {
        let terminal = std::io::stdin().as_fd().try_clone_to_owned().ok()?;
        let saved = tcgetattr(&terminal).ok()?;
        let mut relay = saved.clone();
        relay.local_flags.remove(
            LocalFlags::ICANON | LocalFlags::ECHO | LocalFlags::ECHONL | LocalFlags::IEXTEN,
        );
        // Enter arrives as typed (CR): the command's terminal maps it, as the command set it.
        relay
            .input_flags
            .remove(InputFlags::ICRNL | InputFlags::INLCR | InputFlags::IGNCR);
        relay.control_chars[SpecialCharacterIndices::VMIN as usize] = 1;
        relay.control_chars[SpecialCharacterIndices::VTIME as usize] = 0;
        tcsetattr(&terminal, SetArg::TCSANOW, &relay).ok()?;
        let reader = terminal.try_clone().ok();
        let (sender, keys) = unbounded_channel();
        let started = reader.and_then(|reader| {
            std::thread::Builder::new()
                .name("keys".into())
                .spawn(move || {
                    let mut buf = [0u8; 4096];
                    while let Ok(n @ 1..) = nix::unistd::read(&reader, &mut buf) {
                        if sender.send(buf[..n].to_vec()).is_err() {
                            break;
                        }
                    }
                })
                .ok()
        });
        if started.is_none() {
            let _ = tcsetattr(&terminal, SetArg::TCSANOW, &saved);
            return None;
        }
        Some(KeyRelay {
            terminal,
            saved,
            relaying: relay,
            keys,
            closed: false,
        })
    }

    /// Ctrl-Z: our terminal as it was, for the shell that gets it back.
    pub fn pause(&self) {
        let _ = tcsetattr(&self.terminal, SetArg::TCSANOW, &self.saved);
    }

    /// Continued: relaying again.
    pub fn resume(&self) {
        let _ = tcsetattr(&self.terminal, SetArg::TCSANOW, &self.relaying);
    }
}

impl Drop for KeyRelay {
    fn drop(&mut self) {
        self.pause();
    }
}

/// The next keys typed, if we relay them; never resolves otherwise.
pub async fn typed(relay: &mut Option<KeyRelay>) -> Vec<u8> {
    if let Some(relay) = relay.as_mut().filter(|r| !r.closed) {
        if let Some(keys) = relay.keys.recv().await {
            return keys;
        }
        relay.closed = true;
    }
    std::future::pending().await
}
