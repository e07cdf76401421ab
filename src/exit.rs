//! A subcommand's failure as its exit code and the line that says why, printed once where
//! the subcommand ends ([`exit_code`]), so that each step says only what failed and the code.

use std::fmt::Display;

/// Something failed: a session that cannot be found or read, a file that cannot be written.
pub const EXIT_FAILED: i32 = 1;
/// What was asked cannot be understood (no such session, no state directory).
pub const EXIT_USAGE: i32 = 2;

/// An exit code, and what follows `tether: ` on stderr.
pub type Failure = (i32, String);

/// A step's error as a [`Failure`] with `code`, for `?`.
pub trait OrExit<T> {
    fn or_exit(self, code: i32) -> Result<T, Failure>;
}

impl<T, E: Display> OrExit<T> for Result<T, E> {
    fn or_exit(self, code: i32) -> Result<T, Failure> {
        self.map_err(|err| (code, err.to_string()))
    }
}

/// The exit code of a subcommand's steps, their failure said on stderr.
pub fn exit_code(steps: impl FnOnce() -> Result<i32, Failure>) -> i32 {
    steps().unwrap_or_else(|(code, message)| {
        eprintln!("tether: {message}");
        code
    })
}
