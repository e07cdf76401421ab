//! clap's "a similar subcommand exists" tip, without the hidden subcommands: clap matches a
//! typo against every subcommand's name, so `tether sesion-owner` suggested the internal
//! `session-owner` (clap has no setting for it).

use clap::Parser;
use clap::error::ErrorKind;

/// The parsed command line, or clap's error (help, version, a usage error) printed and the
/// process ended, as `T::parse()` does, with hidden subcommands left out of suggestions.
pub fn parse<T: Parser>() -> T {
    match T::try_parse() {
        Ok(parsed) => parsed,
        // The typo is matched again against the visible subcommands alone, for clap's own
        // message: their closest names, or none.
        Err(err) if err.kind() == ErrorKind::InvalidSubcommand => {
            match super::visible(T::command()).try_get_matches_from(std::env::args_os()) {
                Err(visible) => visible.exit(),
                Ok(_) => err.exit(),
            }
        }
        Err(err) => err.exit(),
    }
}
