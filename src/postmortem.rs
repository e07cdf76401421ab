//! Finding and summing up journaled sessions, for `tether sessions` and `tether open`.

use std::path::{Path, PathBuf};

use crate::journal::paths::format_utc;
use crate::journal::secure::check_for_reading;
use crate::journal::{SessionRecord, list_sessions, sessions_dir, state_dir};
use crate::model::replay::model_from_session;

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
    let state = state_dir(state).map_err(|e| e.to_string())?;
    check_for_reading(&state).map_err(|e| e.to_string())?;
    let sessions = sessions_dir(&state);
    let all =
        list_sessions(&sessions).map_err(|e| format!("cannot list {}: {e}", sessions.display()))?;
    match wanted {
        None => all.last().cloned().ok_or_else(|| {
            format!(
                "no sessions in {}: run `tether exec` or the TUI first, or pass --state-dir",
                sessions.display()
            )
        }),
        Some(id) => {
            let name = |d: &PathBuf| {
                d.file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default()
            };
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
            && crate::journal::paths::command_dir_number(&entry.file_name().to_string_lossy())
                .is_some()
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
    let names: Vec<String> = names.map(|n| crate::model::output::one_line(&n)).collect();
    let shown = names
        .iter()
        .take(10)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    match names.len() {
        n if n > 10 => format!("{shown} and {} more", n - 10),
        _ => shown,
    }
}

/// One line per session: id, start, and how each command ended.
pub fn summary(record: &SessionRecord) -> String {
    let model = model_from_session(record);
    let ends: Vec<String> = model
        .commands
        .iter()
        .map(|c| format!("{} {}", c.config.name, c.status.label()))
        .collect();
    let damaged = record.commands.iter().any(|c| {
        c.damage
            .iter()
            .any(|d| !matches!(d, crate::journal::Damage::MissingResult))
    });
    format!(
        "{}  {}  {} command{}: {}{}",
        model.session_id,
        match &record.info {
            Some(info) => format_utc(info.started_ms),
            None => "start unknown (no session.json)".into(),
        },
        model.commands.len(),
        if model.commands.len() == 1 { "" } else { "s" },
        ends.join(", "),
        if damaged { "  (journal cut short)" } else { "" }
    )
}

/// `tether sessions`: prints every session, oldest first. Returns the exit code.
pub fn list(state: Option<&Path>) -> i32 {
    let state = match state_dir(state) {
        Ok(dir) => dir,
        Err(err) => {
            eprintln!("tether: {err}");
            return 2;
        }
    };
    if let Err(err) = check_for_reading(&state) {
        eprintln!("tether: {err}");
        return 2;
    }
    let sessions = sessions_dir(&state);
    match list_sessions(&sessions) {
        Ok(all) if all.is_empty() => {
            eprintln!("tether: no sessions in {}", sessions.display());
            0
        }
        Ok(all) => {
            for dir in all {
                match SessionRecord::load(&dir) {
                    Ok(record) => println!("{}", crate::model::output::one_line(&summary(&record))),
                    Err(err) => println!("{}  unreadable: {err}", dir.display()),
                }
            }
            0
        }
        Err(err) => {
            eprintln!("tether: cannot list {}: {err}", sessions.display());
            1
        }
    }
}
