//! The terminal given back however the TUI ends: a guard that restores it on drop (a normal
//! end or an error), and a panic hook that restores it before the panic message prints.

use std::io;

use crossterm::event::{
    DisableBracketedPaste, DisableFocusChange, EnableBracketedPaste, EnableFocusChange,
};
use crossterm::terminal::{
    EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode,
};

/// Puts the terminal back however the TUI ends: normally, on error, or in a panic.
pub(super) struct TerminalGuard;

impl TerminalGuard {
    pub(super) fn enter() -> io::Result<TerminalGuard> {
        enable_raw_mode()?;
        let guard = TerminalGuard;
        // Focus reports say when the window may not be looked at: then attention is told.
        crossterm::execute!(
            io::stdout(),
            EnterAlternateScreen,
            EnableBracketedPaste,
            EnableFocusChange
        )?;
        // Clicks and the wheel only (not every mouse move), in SGR encoding.
        io::Write::write_all(&mut io::stdout(), b"\x1b[?1000h\x1b[?1006h")?;
        io::Write::flush(&mut io::stdout())?;
        Ok(guard)
    }
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        restore_terminal();
    }
}

fn restore_terminal() {
    let _ = io::Write::write_all(&mut io::stdout(), b"\x1b[?1006l\x1b[?1000l");
    let _ = crossterm::execute!(
        io::stdout(),
        DisableFocusChange,
        DisableBracketedPaste,
        LeaveAlternateScreen,
        crossterm::cursor::Show
    );
    let _ = disable_raw_mode();
}

/// Restores the terminal before the panic message prints, so it is readable.
pub(super) fn install_panic_hook() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        restore_terminal();
        previous(info);
    }));
}
