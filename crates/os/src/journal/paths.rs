//! Where journals live and how sessions and commands are named on disk.

use std::path::{Path, PathBuf};

use thiserror::Error;

pub use tether_protocol::CommandId;
pub use tether_protocol::units::format_utc;
use tether_protocol::units::utc_fields;

#[derive(Debug, Error)]
#[error(
    "cannot find a state directory: none of --state-dir, TETHER_STATE_DIR, XDG_STATE_HOME or HOME is set"
)]
pub struct NoStateDir;

/// `--state-dir`, then `$TETHER_STATE_DIR`, then `$XDG_STATE_HOME/tether`, then
/// `~/.local/state/tether`.
pub fn state_dir(explicit: Option<&Path>) -> Result<PathBuf, NoStateDir> {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    (explicit.map(Path::to_path_buf))
        .or_else(|| var(STATE_DIR_ENV).map(PathBuf::from))
        .or_else(|| var("XDG_STATE_HOME").map(|dir| PathBuf::from(dir).join("tether")))
        .or_else(|| var("HOME").map(|home| PathBuf::from(home).join(".local/state/tether")))
        .ok_or(NoStateDir)
}

pub fn sessions_dir(state_dir: &Path) -> PathBuf {
    state_dir.join("sessions")
}

/// Where journals go, unless `--state-dir` says otherwise; exported by every broker to its
/// command, so that nested tether calls journal where their parent does.
pub const STATE_DIR_ENV: &str = "TETHER_STATE_DIR";

/// Names the session a command joins (`tether exec`, `tether run`, the shell shim), and is
/// exported by every broker to its command, so that nested tether calls join it too.
pub const SESSION_ENV: &str = "TETHER_SESSION";

/// Exported by every broker to its command: `<session>/<command directory>`. Its presence
/// tells the shell shim that it already runs under a broker.
pub const BROKER_ID_ENV: &str = "TETHER_BROKER_ID";

/// The longest session name: a directory name that stays readable in listings.
pub const MAX_SESSION_NAME: usize = 64;

/// A session name someone chose (`--session`, `TETHER_SESSION`): the name of a directory
/// under `sessions/`, so nothing that could step out of it or hide in a listing. A name
/// starting with a dot is tether's own (`.pruning-NAME-PID`, a file being written): every
/// lister skips it and a prune takes it for a session set aside, so a session named so would
/// run unseen by `ps`, `watch` and `sessions`, out of `stop`'s reach and never pruned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionName(String);

#[derive(Debug, Error, PartialEq, Eq)]
#[error(
    "invalid session name `{shown}`: a session name is 1 to {MAX_SESSION_NAME} characters of A-Z a-z 0-9 . _ : -, not starting with `.` (names starting with a dot are tether's own and never listed)"
)]
pub struct BadSessionName {
    /// The name as given, with anything unprintable escaped.
    pub shown: String,
}

impl SessionName {
    pub fn parse(name: &str) -> Result<SessionName, BadSessionName> {
        let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-');
        let ok = !name.is_empty()
            && name.len() <= MAX_SESSION_NAME
            && name.chars().all(allowed)
            && !name.starts_with('.');
        if ok {
            Ok(SessionName(name.to_string()))
        } else {
            Err(BadSessionName {
                shown: name.escape_debug().take(80).collect(),
            })
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The session to join: `--session` (given as `flag`), else `TETHER_SESSION` when set and
/// not empty, else none (a fresh session). The error names where the bad name came from.
pub fn chosen_session(flag: Option<&str>) -> Result<Option<SessionName>, String> {
    let (name, source) = match flag {
        Some(name) => (name.to_string(), "--session"),
        None => match std::env::var_os(SESSION_ENV).filter(|v| !v.is_empty()) {
            Some(name) => (name.to_string_lossy().into_owned(), SESSION_ENV),
            None => return Ok(None),
        },
    };
    SessionName::parse(&name)
        .map(Some)
        .map_err(|err| format!("{source}: {err}"))
}

impl std::fmt::Display for SessionName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A session id sorts by start time and is unique per process: `20261130T064143Z-12345`.
pub fn new_session_id(now_ms: u64, pid: u32) -> String {
    format!("{}-{pid}", compact_utc(now_ms))
}

/// A wall-clock time as it appears in session names: `20261130T064143Z`.
pub fn compact_utc(now_ms: u64) -> String {
    let (y, mo, d, h, mi, s) = utc_fields(now_ms);
    format!("{y:04}{mo:02}{d:02}T{h:02}{mi:02}{s:02}Z")
}

/// A session's command directories in order: the directories (not links) whose names carry
/// a command number ([`CommandId::number_of`]), by that number (`100-x` after `11-y`), then by
/// name. Anything else in a session directory (`session.json`, a temporary file) is no
/// command's.
pub fn command_dirs(session: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut dirs: Vec<(u64, String, PathBuf)> = std::fs::read_dir(session)?
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            CommandId::number_of(&name).map(|n| (n, name, e.path()))
        })
        .collect();
    dirs.sort();
    Ok(dirs.into_iter().map(|(_, _, path)| path).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_dirs_go_by_number_and_only_numbered_directories_count() {
        let session = crate::testing::private_tempdir();
        for name in ["100-x", "11-y", "02", "02-b", "notes", ".tmp-3"] {
            crate::testing::private_dir(session.path().join(name));
        }
        crate::testing::write_private(session.path().join("session.json"), "{}");
        crate::testing::write_private(session.path().join("07-file"), "");
        std::os::unix::fs::symlink(session.path().join("11-y"), session.path().join("12-link"))
            .unwrap();
        let names: Vec<_> = command_dirs(session.path())
            .unwrap()
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["02", "02-b", "11-y", "100-x"]);
        assert!(command_dirs(&session.path().join("gone")).is_err());
    }

    #[test]
    fn session_ids_sort_by_time() {
        assert_eq!(new_session_id(0, 7), "19700101T000000Z-7");
        assert_eq!(
            new_session_id(1_796_020_903_000, 12345),
            "20261130T064143Z-12345"
        );
        assert_eq!(format_utc(1_796_020_903_123), "2026-11-30 06:41:43.123");
    }

    #[test]
    fn session_names_follow_the_rule() {
        for good in [
            "agent-1",
            "a",
            "run.2026-01-01T10:00:00Z",
            "A_b.c:d-e",
            &"x".repeat(64),
        ] {
            assert_eq!(SessionName::parse(good).unwrap().as_str(), good);
        }
        let too_long = "x".repeat(65);
        for bad in [
            "",
            ".",
            "..",
            "a/b",
            "../x",
            "a b",
            "é",
            "a\nb",
            "a\u{202e}",
            "*",
            ".hidden",
            ".pruning-x-1",
            &too_long,
        ] {
            let err = SessionName::parse(bad).unwrap_err();
            assert!(
                err.to_string()
                    .contains("1 to 64 characters of A-Z a-z 0-9 . _ : -"),
                "{err}"
            );
        }
        // What cannot be printed is shown escaped.
        assert_eq!(SessionName::parse("a\nb").unwrap_err().shown, "a\\nb");
        // Dots inside a name are fine, not at its start.
        assert!(SessionName::parse("a...").is_ok());
        assert!(SessionName::parse("...").is_err());
        assert!(
            SessionName::parse(".hidden")
                .unwrap_err()
                .to_string()
                .contains("not starting with `.`")
        );
    }

    #[test]
    fn explicit_state_dir_wins() {
        assert_eq!(
            state_dir(Some(Path::new("/x"))).unwrap(),
            PathBuf::from("/x")
        );
    }
}
