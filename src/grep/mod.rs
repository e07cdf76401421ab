//! `tether grep PATTERN [SESSION...]`: searching what commands printed, across sessions.
//!
//! The pattern is matched against the bytes each command wrote (`stdout.log`, `stderr.log`),
//! as grep matches a file: escape sequences included, invalid UTF-8 searched rather than
//! refused (regex's bytes API). What is printed is the line as a terminal would show it,
//! through the same sanitizer as the TUI's panes.

pub mod echo;
pub mod names;
pub mod print;
pub mod scan;
pub mod search;

use std::io::{self, IsTerminal, Write};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use crate::exit::{OrExit, exit_code};
use crate::journal::secure::open_regular;
use crate::journal::{CommandId, CommandRecord, WriteTimes, command_dirs};
use crate::model::replay::dir_name;
use crate::protocol::Stream;
use print::Origin;
use scan::Found;
pub use scan::Scan;
use search::LineMatch;

/// Exit codes, as grep's.
pub const EXIT_MATCHED: i32 = 0;
pub const EXIT_NO_MATCH: i32 = 1;
pub const EXIT_ERROR: i32 = 2;

/// When to highlight (`--color`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Color {
    // When stdout is a terminal and `NO_COLOR` is not set.
    #[default]
    Auto,
    Always,
    Never,
}

/// What is printed for what is selected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Report {
    /// The lines (and their context).
    #[default]
    Lines,
    /// `-c`: how many lines each command has selected.
    Count,
    /// `-l`: the commands with a selected line.
    Names,
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
    /// `-v`, `-A`, `-B`, `-C`.
    pub scan: Scan,
    pub report: Report,
    /// `--name`: only the commands whose name (`cargo`) or directory (`01-cargo`) this glob
    /// matches.
    pub name: Option<String>,
    /// `--echoes`: show the lines of an agent's terminal that echo its commands' output, or
    /// redraw its own, too (by default they are folded into the hits shown).
    pub echoes: bool,
}

/// `tether grep`. Returns 0 when a line was selected, 1 when none was, 2 on an error (as
/// grep, an error wins over a match: something was not searched).
pub fn main(state: Option<&Path>, options: &GrepOptions) -> i32 {
    exit_code(|| {
        let regex = search::build(&options.pattern, options.ignore_case)
            .map_err(|err| {
                let pattern = crate::model::output::one_line(&options.pattern);
                format!("invalid pattern `{pattern}`: {err}")
            })
            .or_exit(EXIT_ERROR)?;
        let sessions = sessions_to_search(state, &options.sessions).or_exit(EXIT_ERROR)?;
        let color = match options.color {
            Color::Always => true,
            Color::Never => false,
            Color::Auto => {
                io::stdout().is_terminal()
                    && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
                    && std::env::var_os("TERM").is_none_or(|t| t != "dumb")
            }
        };
        let stdout = io::stdout();
        let mut out = io::BufWriter::with_capacity(64 * 1024, stdout.lock());
        let mut search = Search {
            options,
            regex: &regex,
            color,
            out: &mut out,
            matched: false,
            failed: false,
            counts: Vec::new(),
            shown_groups: false,
            aligned: (io::stdout().is_terminal()
                && !options.json
                && options.report == Report::Lines)
                .then(print::Aligned::default),
        };
        for session_dir in &sessions {
            if search.session(session_dir).is_break() {
                break;
            }
        }
        let Search {
            matched,
            mut failed,
            counts,
            aligned,
            ..
        } = search;
        if let Some(mut aligned) = aligned {
            failed |= !written(out.write_all(aligned.flush().as_bytes()));
        }
        if options.report == Report::Count {
            failed |= !written(out.write_all(print::count_rows(&counts).as_bytes()));
        }
        failed |= !written(out.flush());
        Ok(if failed {
            EXIT_ERROR
        } else if matched {
            EXIT_MATCHED
        } else {
            EXIT_NO_MATCH
        })
    })
}

/// One run of `tether grep` under way.
struct Search<'a, W: Write> {
    options: &'a GrepOptions,
    regex: &'a regex::bytes::Regex,
    color: bool,
    out: &'a mut W,
    matched: bool,
    failed: bool,
    /// `-c`: each command searched, with how many lines it selected.
    counts: Vec<(CommandId, u64)>,
    /// A group of context lines was printed: the next one starts with `--`.
    shown_groups: bool,
    /// On a terminal, the lines held to be printed lined up.
    aligned: Option<print::Aligned>,
}

impl<W: Write> Search<'_, W> {
    /// Searches one session's commands, the agent's last (its echoes of the others are then
    /// known); `Break` when the output is gone.
    fn session(&mut self, session_dir: &Path) -> ControlFlow<()> {
        let session = dir_name(session_dir);
        let mut commands: Vec<(CommandId, PathBuf, bool)> = command_dirs(session_dir)
            .unwrap_or_default()
            .into_iter()
            .filter_map(|dir| {
                let command = CommandId::parse(&session, &dir_name(&dir))?;
                let wanted = self
                    .options
                    .name
                    .as_deref()
                    .is_none_or(|glob| names::matches(glob, &command));
                wanted.then(|| {
                    let agent = !self.options.echoes && crate::export::follow::scan::is_agent(&dir);
                    (command, dir, agent)
                })
            })
            .collect();
        // Under -v an agent's line is selected for what it does not hold: an echo in it
        // says nothing of why, so nothing is folded.
        let folding = !self.options.scan.invert && commands.iter().any(|c| c.2);
        // Stable: the commands in order, then the agent.
        commands.sort_by_key(|c| c.2);
        let mut echoes = echo::Echoes::default();
        let counted = self.counts.len();
        for (command, dir, agent) in &commands {
            let role = match (folding, agent) {
                (false, _) => Role::Plain,
                (true, false) => {
                    let window = echo::lifetime(dir);
                    if let Some(words) = echo::call_words(dir) {
                        echoes.remember_call(words, window);
                    }
                    Role::Echoed(window)
                }
                (true, true) => Role::Agent,
            };
            let flow = self.command(command, dir, role, &mut echoes);
            if flow.is_break() {
                return flow;
            }
        }
        // Counts read in the session's order, the agent first.
        self.counts[counted..].sort_by_key(|(command, _)| command.number);
        let folds = [
            (
                echoes.folded,
                "echoed what its commands printed: shown once, as the command's",
            ),
            (
                echoes.redrawn,
                "drew again what it showed above: shown once",
            ),
        ];
        for (n, what) in folds.into_iter().filter(|(n, _)| *n > 0) {
            eprintln!(
                "tether: {}: {n} line{} of the agent's terminal {what} (--echoes shows them)",
                crate::model::output::one_line(&session),
                if n == 1 { "" } else { "s" },
            );
        }
        ControlFlow::Continue(())
    }

    fn command(
        &mut self,
        command: &CommandId,
        dir: &Path,
        role: Role,
        echoes: &mut echo::Echoes,
    ) -> ControlFlow<()> {
        let streams = self
            .options
            .stream
            .as_ref()
            .map_or(&Stream::BOTH[..], std::slice::from_ref);
        let mut selected = 0;
        for &stream in streams {
            let path = dir.join(stream.file_name());
            let file = match open_regular(&path) {
                Ok(file) => file,
                // A command that never started has no logs: nothing to search.
                Err(err) if err.kind() == io::ErrorKind::NotFound => continue,
                Err(err) => {
                    eprintln!("tether: cannot read {}: {err}", path.display());
                    self.failed = true;
                    continue;
                }
            };
            let origin = Origin {
                command,
                stream: stream.name(),
            };
            let times = matches!(role, Role::Agent)
                .then(|| WriteTimes::of(&CommandRecord::load(dir).events, stream));
            let options = self.options;
            let color = self.color;
            let regex = self.regex;
            let mut unselect = |line: &LineMatch<'_>| match (&role, &times) {
                (Role::Agent, Some(times)) => {
                    let printed = echo::printed(line.text);
                    let span = times.span(line.offset, line.text.len() as u64);
                    echoes.folds(&printed, span, regex) || echoes.redraws(&printed, span, regex)
                }
                _ => false,
            };
            let mut remembered = Vec::new();
            let mut first_in_stream = true;
            let searched = scan::scan(
                file,
                self.regex,
                options.scan,
                search::CHUNK,
                &mut unselect,
                |found| {
                    if let (
                        Role::Echoed(_),
                        Found::Line {
                            line,
                            selected: true,
                        },
                    ) = (&role, &found)
                    {
                        remembered.push(echo::printed(line.text));
                    }
                    if options.report != Report::Lines {
                        return Ok(());
                    }
                    let context = options.scan.before + options.scan.after > 0;
                    let mut text = String::new();
                    let mut group_break = |text: &mut String| match self.aligned.as_mut() {
                        Some(aligned) => aligned.group_break(),
                        None => text.push_str("--\n"),
                    };
                    match found {
                        // JSON says which lines are context; it needs no separator.
                        Found::Break if options.json => {}
                        Found::Break => group_break(&mut text),
                        Found::Line { line, selected } => {
                            // As grep, `--` between the groups of two files too.
                            if context && first_in_stream && self.shown_groups && !options.json {
                                group_break(&mut text);
                            }
                            first_in_stream = false;
                            self.shown_groups |= context;
                            if options.json {
                                text.push_str(&print::json_line(origin, &line, selected));
                            } else if let Some(aligned) = self.aligned.as_mut() {
                                let parts = print::text_parts(origin, &line, color, selected);
                                if let Some(batch) = aligned.line(parts) {
                                    text.push_str(&batch);
                                }
                            } else {
                                text.push_str(&print::text_line(origin, &line, color, selected));
                            }
                        }
                    }
                    self.out
                        .write_all(text.as_bytes())
                        .map_err(|err| io::Error::other(Written(err)))
                },
            );
            if let Role::Echoed(window) = role {
                for text in remembered {
                    echoes.remember(&text, window);
                }
            }
            // Only what the journal kept was searched: said, so no miss is taken for
            // an absence.
            if let Some((kept, dropped)) = crate::journal::cut::stream_cut(dir, stream) {
                eprintln!(
                    "tether: {} {}: searched the first {} only; the {} after them were not journaled (the command's bound)",
                    crate::model::output::one_line(&command.to_string()),
                    stream.name(),
                    crate::units::format_size(kept),
                    crate::units::format_size(dropped)
                );
            }
            match searched {
                Ok(hits) => selected += hits,
                Err(err) if err.get_ref().is_some_and(|e| e.is::<Written>()) => {
                    self.matched = true;
                    // Whoever reads us has gone (`| head`): stop quietly.
                    if !is_broken_pipe(&err) {
                        eprintln!("tether: {err}");
                        self.failed = true;
                    }
                    return ControlFlow::Break(());
                }
                Err(err) => {
                    eprintln!("tether: cannot read {}: {err}", path.display());
                    self.failed = true;
                }
            }
        }
        self.matched |= selected > 0;
        match self.options.report {
            Report::Lines => {}
            Report::Count => self.counts.push((command.clone(), selected)),
            Report::Names if selected > 0 => {
                let name = format!("{}\n", print::source(command));
                if let result @ Err(_) = self.out.write_all(name.as_bytes()) {
                    self.failed |= !written(result);
                    return ControlFlow::Break(());
                }
            }
            Report::Names => {}
        }
        ControlFlow::Continue(())
    }
}

/// How a command's hits meet an agent's echoes.
enum Role {
    /// No agent in the session (or `--echoes`).
    Plain,
    /// A command of an agent's session: its selected lines are remembered, with when it
    /// ran (first and last event).
    Echoed(Option<(u64, u64)>),
    /// The agent: a selected line that echoes a remembered one is folded.
    Agent,
}

/// A failed write to our stdout, told apart from a failed read of a log.
#[derive(Debug, thiserror::Error)]
#[error("cannot write the results: {0}")]
struct Written(io::Error);

/// Whether a write to our stdout went through, or failed only because whoever reads it has
/// gone (`| head`); any other failure is said.
fn written(result: io::Result<()>) -> bool {
    match result {
        Err(err) if err.kind() != io::ErrorKind::BrokenPipe => {
            eprintln!("tether: cannot write the results: {err}");
            false
        }
        _ => true,
    }
}

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
