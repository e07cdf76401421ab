//! Finding and summing up journaled sessions, for `tether sessions` and `tether open`.

use std::path::{Path, PathBuf};

use std::io::Write as _;

use crate::exit::{EXIT_USAGE, OrExit, exit_code};
use crate::journal::secure::check_for_reading;
use crate::journal::{SessionRecord, list_sessions, sessions_dir, state_dir};
use crate::model::output::one_line;
use crate::model::output::truncate;
use crate::model::replay::{dir_name, model_from_session};

pub mod listing;
pub mod tally;

use listing::SessionLine;

/// The session directory `wanted` names: an id from `tether sessions`, a path, or (`None`)
/// the latest session.
pub fn resolve(state: Option<&Path>, wanted: Option<&str>) -> Result<PathBuf, String> {
    if let Some(path) = wanted
        .map(Path::new)
        .filter(|p| p.join("session.json").exists())
    {
        return Ok(path.to_path_buf());
    }
    // Something written as a path is a directory to check, never an id to look up.
    if let Some(path) = wanted.filter(|w| w.contains('/') || *w == "." || *w == "..") {
        return session_at(Path::new(path));
    }
    let (sessions, all) = session_dirs(state).map_err(|(_, err)| err)?;
    match wanted {
        None => all.last().cloned().ok_or_else(|| {
            format!(
                "no sessions in {}: run `tether exec` or the TUI first, or pass --state-dir",
                sessions.display()
            )
        }),
        Some(id) => {
            let name = |d: &PathBuf| dir_name(d);
            // A named session may be a prefix of another (`agent` and `agent-2`): its whole
            // name picks it.
            if let Some(exact) = all.iter().find(|d| name(d) == id) {
                return Ok(exact.clone());
            }
            let matching: Vec<&PathBuf> = all.iter().filter(|d| name(d).starts_with(id)).collect();
            match matching.as_slice() {
                [one] => Ok((*one).clone()),
                [] => Err(format!(
                    "no session `{id}` in {}; `tether sessions` lists them",
                    sessions.display()
                )),
                _ => Err(format!(
                    "`{id}` names {} sessions ({}); give more of the id",
                    matching.len(),
                    listed(matching.iter().map(|d| name(d)))
                )),
            }
        }
    }
}

/// The session directory at `path`: one with a `session.json`, or with command directories
/// (`01-build`) whose creator never wrote it; anything else is named for what it is.
fn session_at(path: &Path) -> Result<PathBuf, String> {
    let shown = path.display();
    let entries = match std::fs::read_dir(path) {
        Ok(entries) => entries,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            return Err(format!(
                "no session at {shown}: there is no such directory; `tether sessions` lists them"
            ));
        }
        Err(err) if err.kind() == std::io::ErrorKind::NotADirectory => {
            return Err(format!(
                "{shown} is a file, not a session directory; give a directory under sessions/ or an id from `tether sessions`"
            ));
        }
        Err(err) => return Err(format!("cannot read {shown}: {err}")),
    };
    let has_commands = entries.filter_map(Result::ok).any(|entry| {
        entry.file_type().is_ok_and(|t| t.is_dir())
            && crate::journal::CommandId::number_of(&entry.file_name().to_string_lossy()).is_some()
    });
    if has_commands {
        Ok(path.to_path_buf())
    } else {
        Err(format!(
            "{shown} is not a tether session: it has no session.json and no command directories (01-name); give a directory under sessions/ or an id from `tether sessions`"
        ))
    }
}

/// Session names for a message: the first ten, then how many more.
fn listed(names: impl Iterator<Item = String>) -> String {
    let names: Vec<String> = names.map(|n| one_line(&n)).collect();
    let shown = names[..names.len().min(10)].join(", ");
    match names.len() {
        n if n > 10 => format!("{shown} and {} more", n - 10),
        _ => shown,
    }
}

/// `tether sessions`: one line per session, oldest first, fitted to the output's width
/// (whole to a file or a pipe, unless `COLUMNS` gives one); with `long`, or for the one
/// session `wanted` names, each command's line below its session's. Returns the exit code.
pub fn list(state: Option<&Path>, wanted: Option<&str>, long: bool) -> i32 {
    exit_code(|| {
        let dirs = match wanted {
            Some(_) => vec![
                resolve(state, wanted)
                    .map_err(|err| one_line(&err))
                    .or_exit(EXIT_USAGE)?,
            ],
            None => {
                let (sessions, dirs) = session_dirs(state)?;
                if dirs.is_empty() {
                    eprintln!("tether: no sessions in {}", sessions.display());
                }
                dirs
            }
        };
        let width = crate::sys::output_width();
        let long = long || wanted.is_some();
        // Every session is read before the first line is printed: the columns are as wide as
        // the widest cell of any session, so they line up from one to the next. `sessions`
        // keeps the order, and why a session could not be read.
        let (mut lines, mut cells) = (Vec::new(), Vec::new());
        let sessions: Vec<Result<(), String>> = dirs
            .iter()
            .map(|dir| {
                let record = SessionRecord::load(dir)
                    .map_err(|err| format!("{}  unreadable: {err}", dir.display()))?;
                let model = model_from_session(&record);
                let now_ms = crate::clock::now_ms();
                if long {
                    let ids: Vec<String> =
                        record.commands.iter().map(|c| c.id.dir_name()).collect();
                    cells.push(listing::command_cells_of(&model, &ids, now_ms));
                }
                lines.push(SessionLine::of(&record, &model, now_ms));
                Ok(())
            })
            .collect();
        let mut session_rows = listing::session_rows(&lines, width).into_iter();
        // None without `--long`: no command's cells were read.
        let mut tables =
            listing::command_tables(&cells, width.map(|w| w.saturating_sub(2))).into_iter();
        let mut out = std::io::stdout().lock();
        let mut print = |line: &str| writeln!(out, "{line}");
        let printed = sessions.iter().try_for_each(|session| {
            match session {
                Err(unreadable) => print(&truncate(
                    &one_line(unreadable),
                    width.unwrap_or(usize::MAX),
                ))?,
                Ok(_) => {
                    print(&session_rows.next().unwrap_or_default())?;
                    for row in tables.next().unwrap_or_default() {
                        print(&format!("  {row}"))?;
                    }
                }
            }
            Ok(())
        });
        Ok(exit_of_writing(printed, "the sessions"))
    })
}

/// The exit code of writing `what` to stdout: 1 if it failed, but a reader that stopped
/// early (`| head`) is no failure of ours.
pub fn exit_of_writing(written: std::io::Result<()>, what: &str) -> i32 {
    match written {
        Ok(()) => 0,
        Err(err) if err.kind() == std::io::ErrorKind::BrokenPipe => 0,
        Err(err) => {
            eprintln!("tether: cannot write {what}: {err}");
            1
        }
    }
}

/// The sessions directory and every session in it, oldest first; an error's exit code (2:
/// no state directory to read, 1: one whose sessions cannot be listed) and message.
pub fn session_dirs(state: Option<&Path>) -> Result<(PathBuf, Vec<PathBuf>), (i32, String)> {
    let state = state_dir(state).map_err(|e| (2, e.to_string()))?;
    check_for_reading(&state).map_err(|e| (2, e.to_string()))?;
    let sessions = sessions_dir(&state);
    let all = list_sessions(&sessions)
        .map_err(|err| (1, format!("cannot list {}: {err}", sessions.display())))?;
    Ok((sessions, all))
}
