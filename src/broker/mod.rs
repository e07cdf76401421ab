//! The broker: one process per command, between a front end and the command.
//!
//! It runs in its own session as a child subreaper, spawns the command in its own process
//! group, journals everything, and stops the whole tree when asked, when a watchdog fires,
//! or when its parent dies (even by SIGKILL).

pub mod containment;
mod control;
pub mod final_drain;
pub mod mirror;
mod outlets;
mod parent;
pub mod pty;
mod reap;
mod run;
pub mod signaller;
pub mod spawn;
mod state;
pub mod stop;
mod terminal;
mod tree;

use std::io::Write;

/// Environment variable that marks a process as a broker started by tether.
pub const BROKER_ENV: &str = "TETHER_BROKER";

/// Environment variable that carries a broker's token: 128 random bits in hex, made by the
/// front end that starts it and written by the broker into `command.json`. A front end
/// signals a broker by pid only if that process's environment holds the journal's token
/// (see `control::verify`); the command does not inherit it.
pub const BROKER_TOKEN_ENV: &str = "TETHER_BROKER_TOKEN";

/// The descriptor on which a broker receives its command's journal directory, opened by the
/// front end.
pub const JOURNAL_FD: std::os::fd::RawFd = 3;

/// The descriptor on which a broker receives its front end's stdin, when the launch request
/// asks for it to be the command's (`tether exec`). After [`mirror::MIRROR_FDS`].
pub const STDIN_FD: std::os::fd::RawFd = JOURNAL_FD + 3;

/// Entry point of `tether broker`. Returns the process exit code: 0 when the command ran its
/// course, 1 when the parent was lost or the broker could not work.
pub fn main() -> i32 {
    if std::env::var_os(BROKER_ENV).is_none_or(|v| v != "1") {
        eprintln!(
            "tether: `tether broker` is started by tether itself (it reads a launch request on stdin); \
             to run a command use `tether exec -- CMD` or `tether run -- CMD`"
        );
        return 2;
    }
    // A broker is its own session so that terminal signals meant for the front end do not
    // reach it; it fails harmlessly if the spawner already made it a session leader.
    let _ = nix::unistd::setsid();
    if let Err(err) = nix::sys::prctl::set_child_subreaper(true) {
        // Without it escapees would be re-parented away from us; refuse to run half-blind.
        let err = std::io::Error::from(err);
        eprintln!("tether broker: cannot become a child subreaper: {err}");
        return 1;
    }
    // Before the event loop opens descriptors of its own at the numbers handed over.
    let inherited = run::Inherited::take();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(err) => {
            eprintln!("tether broker: cannot start its event loop: {err}");
            return 1;
        }
    };
    let code = runtime.block_on(run::run(inherited));
    let _ = std::io::stderr().flush();
    code
}
