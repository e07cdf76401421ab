//! The broker: one process per command, between a front end and the command.
//!
//! It runs in its own session as a child subreaper, spawns the command in its own process
//! group, journals everything, and stops the whole tree when asked, when a watchdog fires,
//! or when its parent dies (even by SIGKILL).

pub mod containment;
mod control;
pub use tether_core::final_drain;
pub mod mirror;
mod outlets;
mod parent;
pub mod probes;
pub mod pty;
mod reap;
mod run;
pub mod signaller;
mod signals;
pub mod spawn;
pub use tether_core::state;
pub mod stop;
mod terminal;
mod tree;

/// Environment variable that marks a process as a broker started by tether.
pub const BROKER_ENV: &str = "TETHER_BROKER";

/// Environment variable that carries a broker's token: 128 random bits in hex, made by the
/// front end that starts it and written by the broker into `command.json`. A front end
/// signals a broker by pid only if that process holds the journal's token (as a memfd's
/// name, see [`TOKEN_MEMFD_PREFIX`]); the command does not inherit it.
pub const BROKER_TOKEN_ENV: &str = "TETHER_BROKER_TOKEN";

/// A broker holds, for its whole life, a memfd named this prefix and its token: what proves
/// a pid to be the broker that wrote a journal (see `control::verify`). Its environment
/// cannot: a broker forked from its front end (the shell shim's, `tether exec`'s) shows in
/// `/proc/PID/environ` the one its front end was started with. Close-on-exec, so no command
/// or notify run holds it.
pub const TOKEN_MEMFD_PREFIX: &str = "tether-broker-";

pub use tether_protocol::names::BROKER_COMM;

/// The descriptor on which a broker receives its command's journal directory, opened by the
/// front end.
pub const JOURNAL_FD: std::os::fd::RawFd = 3;

/// The descriptor on which a broker receives its front end's stdin, when the launch request
/// asks for it to be the command's (`tether exec`). After [`mirror::MIRROR_FDS`].
pub const STDIN_FD: std::os::fd::RawFd = JOURNAL_FD + 3;

/// The memfd that proves this process the broker holding its token (see
/// [`TOKEN_MEMFD_PREFIX`]); none without a token.
fn hold_token_proof() -> Option<std::os::fd::OwnedFd> {
    let token = std::env::var(BROKER_TOKEN_ENV).ok()?;
    let name = std::ffi::CString::new(format!("{TOKEN_MEMFD_PREFIX}{token}")).ok()?;
    nix::sys::memfd::memfd_create(name.as_c_str(), nix::sys::memfd::MFdFlags::MFD_CLOEXEC).ok()
}

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
    // Not dumpable: its command runs as the same user, and could otherwise ptrace it (read
    // its memory, take its descriptors, make it journal or signal what it wants). The command
    // is dumpable again once it execs. This also makes /proc/PID/fd and environ of the broker
    // readable by root alone: a front end proves the broker by the lock it holds on its
    // journal instead (`control::verify`).
    if let Err(err) = nix::sys::prctl::set_dumpable(false) {
        eprintln!(
            "tether broker: cannot keep its command from tracing it: {}",
            std::io::Error::from(err)
        );
        return 1;
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
    let _ = nix::sys::prctl::set_name(BROKER_COMM);
    let _proof = hold_token_proof();
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
    // All the broker owes is done (the journal flushed, `close` sent, the socket and its
    // link removed): the runtime's teardown and the exit handlers would only keep it
    // longer, and the kernel releases what it holds.
    tether_os::sys::exit_now(code)
}
