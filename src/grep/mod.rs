//! `tether grep PATTERN [SESSION...]`: searching what commands printed, across sessions.
//!
//! The pattern is matched against the bytes each command wrote (`stdout.log`, `stderr.log`),
//! as grep matches a file: escape sequences included, invalid UTF-8 searched rather than
//! refused (regex's bytes API). What is printed is the line as a terminal would show it,
//! through the same sanitizer as the TUI's panes.

pub mod print;
pub mod search;

use std::io::{self, IsTerminal, Write};
use std::path::{Path, PathBuf};

use crate::journal::secure::open_regular;
use crate::journal::{CommandId, command_dirs};
use crate::model::replay::dir_name;
use crate::protocol::Stream;
use print::Origin;

/// Exit codes, as grep's.
pub const EXIT_MATCHED: i32 = 0;
pub const EXIT_NO_MATCH: i32 = 1;
pub const EXIT_ERROR: i32 = 2;

/// When to highlight.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Color {
    /// When stdout is a terminal and `NO_COLOR` is not set.
    #[default]
    Auto,
    Always,
    Never,
}

#[derive(Debug, Clone, Default)]
pub struct GrepOptions {
    pub pattern: String,
    /// Session ids, prefixes or directories; empty: every session.
    pub sessions: Vec<String>,
    /// Only this stream; `None`: both.
    pub stream: Option<Stream>,
    pub json: bool,
    pub ignore_case: bool,
    pub color: Color,
}

/// `tether grep`. Returns 0 when a line matched, 1 when none did, 2 on an error (as grep,
/// an error wins over a match: something was not searched).
pub fn main(state: Option<&Path>, options: &GrepOptions) -> i32 {
    let regex = match search::build(&options.pattern, options.ignore_case) {
        Ok(regex) => regex,
        Err(err) => {
            eprintln!(
                "tether: invalid pattern `{}`: {err}",
                crate::model::output::one_line(&options.pattern),
            );
            return EXIT_ERROR;
        }
    };
    let sessions = match sessions_to_search(state, &options.sessions) {
        Ok(sessions) => sessions,
        Err(err) => {
            eprintln!("tether: {err}");
            return EXIT_ERROR;
        }
    };
    let color = match options.color {
        Color::Always => true,
        Color::Never => false,
        Color::Auto => {
            io::stdout().is_terminal()
                && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
                && std::env::var_os("TERM").is_none_or(|t| t != "dumb")
        }
    };
    let streams = options.stream.as_slice();
    let streams = if streams.is_empty() {
        &Stream::BOTH[..]
    } else {
        streams
    };
    let stdout = io::stdout();
    let mut out = io::BufWriter::with_capacity(64 * 1024, stdout.lock());
    let mut matched = false;
    let mut failed = false;
    'sessions: for session_dir in &sessions {
        let session = dir_name(session_dir);
        for dir in command_dirs(session_dir).unwrap_or_default() {
            let Some(command) = CommandId::parse(&session, &dir_name(&dir)) else {
                continue;
            };
            for &stream in streams {
                let path = dir.join(stream.file_name());
                let file = match open_regular(&path) {
                    Ok(file) => file,
                    // A command that never started has no logs: nothing to search.
                    Err(err) if err.kind() == io::ErrorKind::NotFound => continue,
                    Err(err) => {
                        eprintln!("tether: cannot read {}: {err}", path.display());
                        failed = true;
                        continue;
                    }
                };
                let origin = Origin {
                    command: &command,
                    stream: stream.name(),
                };
                let searched = search::search_lines(file, &regex, |hit| {
                    let line = if options.json {
                        print::json_line(origin, &hit)
                    } else {
                        print::text_line(origin, &hit, color)
                    };
                    out.write_all(line.as_bytes())
                        .map_err(|err| io::Error::other(Written(err)))
                });
                // Only what the journal kept was searched: said, so no miss is taken for
                // an absence.
                if let Some((kept, dropped)) = crate::journal::cut::stream_cut(&dir, stream) {
                    eprintln!(
                        "tether: {} {}: searched the first {} only; the {} after them were not journaled (the command's bound)",
                        crate::model::output::one_line(&command.to_string()),
                        stream.name(),
                        crate::units::format_size(kept),
                        crate::units::format_size(dropped)
                    );
                }
                match searched {
                    Ok(hits) => matched |= hits > 0,
                    Err(err) if err.get_ref().is_some_and(|e| e.is::<Written>()) => {
                        matched = true;
                        // Whoever reads us has gone (`| head`): stop quietly.
                        if !is_broken_pipe(&err) {
                            eprintln!("tether: {err}");
                            failed = true;
                        }
                        break 'sessions;
                    }
                    Err(err) => {
                        eprintln!("tether: cannot read {}: {err}", path.display());
                        failed = true;
                    }
                }
            }
        }
    }
    let flushed = out.flush();
    if let Err(err) = flushed
        && err.kind() != io::ErrorKind::BrokenPipe
    {
        eprintln!("tether: cannot write the results: {err}");
        failed = true;
    }
    if failed {
        EXIT_ERROR
    } else if matched {
        EXIT_MATCHED
    } else {
        EXIT_NO_MATCH
    }
}

/// A failed write to our stdout, told apart from a failed read of a log.
#[derive(Debug, thiserror::Error)]
#[error("cannot write the results: {0}")]
struct Written(io::Error);

fn is_broken_pipe(err: &io::Error) -> bool {
    err.get_ref()
        .and_then(|e| e.downcast_ref::<Written>())
        .is_some_and(|w| w.0.kind() == io::ErrorKind::BrokenPipe)
}

/// Every session (oldest first), or those named.
fn sessions_to_search(state: Option<&Path>, wanted: &[String]) -> Result<Vec<PathBuf>, String> {
    if !wanted.is_empty() {
        return wanted
            .iter()
            .map(|id| crate::postmortem::resolve(state, Some(id)))
            .collect();
    }
    crate::postmortem::session_dirs(state)
        .map(|(_, all)| all)
        .map_err(|(_, err)| err)
}
