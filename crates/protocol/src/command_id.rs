//! A command's identity: its session, its number there and the file-safe form of its name,
//! as its journal directory `SESSION/NN-name` says them. Made and read back here only: the
//! journal, the broker, the watch, the MCP server and `tether stop`'s `SESSION/NN` all take a
//! command's number and name from it.

use std::fmt;
use std::path::Path;

use thiserror::Error;

/// A command id given from outside (a message, a tool call) that is not one tether makes.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error(
    "`{given}` is not a command id: one is a command's number and name as its journal directory says them (`03-build`, or `04` with no name)"
)]
pub struct BadCommandId {
    pub given: String,
}

/// Command `number` of `session`, named `name` (`agent-1/03-build`). Ordered as a session's
/// directories are: by number (`100-x` after `11-y`), then by name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CommandId {
    /// The session's directory name under `sessions/`.
    pub session: String,
    pub number: u64,
    /// File-safe: ASCII letters, digits, `-`, `_` and `.`, at most 40, not starting or
    /// ending with `.`; empty for none.
    pub name: String,
}

impl CommandId {
    /// Command `number` of `session` named `name`, made file-safe (`cargo test` →
    /// `cargo_test`; nothing left of `...`).
    pub fn new(session: &str, number: u64, name: &str) -> CommandId {
        let safe: String = name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                    c
                } else {
                    '_'
                }
            })
            .take(40)
            .collect();
        CommandId {
            session: session.to_string(),
            number,
            name: safe.trim_matches('.').to_string(),
        }
    }

    /// The command whose directory in `session` is named `dir_name`; `None` for anything
    /// else in a session directory (`session.json`, a temporary file). Only the form
    /// [`Self::dir_name`] writes is one (`03`, not `3` or `003`; not `03-`), so that an id
    /// names one directory and prints back as it was read.
    pub fn parse(session: &str, dir_name: &str) -> Option<CommandId> {
        let (digits, name) = dir_name.split_once('-').unwrap_or((dir_name, ""));
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) || name.contains('/') {
            return None;
        }
        let id = CommandId {
            session: session.to_string(),
            number: digits.parse().ok()?,
            name: name.to_string(),
        };
        (id.dir_name() == dir_name).then_some(id)
    }

    /// [`Self::parse`] for an id given from outside (a message, a tool call), with what is
    /// wrong with one that is none.
    pub fn from_dir_name(session: &str, text: &str) -> Result<CommandId, BadCommandId> {
        CommandId::parse(session, text).ok_or_else(|| BadCommandId {
            given: text.to_string(),
        })
    }

    /// The command journaled in `dir` (`…/sessions/SESSION/NN-name`).
    pub fn of_dir(dir: &Path) -> Option<CommandId> {
        let session = dir.parent()?.file_name()?.to_str()?;
        CommandId::parse(session, dir.file_name()?.to_str()?)
    }

    /// The number a command directory's name starts with (`03-build` → 3, `07` → 7); `None`
    /// for anything else in a session directory.
    pub fn number_of(dir_name: &str) -> Option<u64> {
        CommandId::parse("", dir_name).map(|id| id.number)
    }

    /// Its directory's name in the session: `03-build`, or `04` with no name.
    pub fn dir_name(&self) -> String {
        match self.name.as_str() {
            "" => format!("{:02}", self.number),
            name => format!("{:02}-{name}", self.number),
        }
    }

    /// `SESSION/NN`: what `tether ps` shows, notifications name and `tether stop` takes,
    /// which always names exactly one command.
    pub fn target(&self) -> String {
        format!("{}/{:02}", self.session, self.number)
    }
}

/// `SESSION/NN-name`: the session and the directory, as `TETHER_BROKER_ID` carries them.
impl fmt::Display for CommandId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.session, self.dir_name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_file_safe() {
        let dir = |number, name| CommandId::new("s", number, name).dir_name();
        assert_eq!(dir(3, "build"), "03-build");
        assert_eq!(dir(1, "cargo test --all"), "01-cargo_test_--all");
        assert_eq!(dir(2, "../.."), "02-_");
        assert_eq!(dir(4, "..."), "04");
        assert_eq!(dir(5, ""), "05");
        assert_eq!(dir(123, "x"), "123-x");
    }

    #[test]
    fn a_command_dir_name_reads_back_as_it_was_made() {
        for (number, name) in [
            (3, "build"),
            (4, "..."),
            (12, "cargo test --all"),
            (100, "a-b"),
        ] {
            let made = CommandId::new("s", number, name);
            assert_eq!(CommandId::parse("s", &made.dir_name()), Some(made));
        }
        let parsed = CommandId::parse("s", "03-cargo_test").unwrap();
        assert_eq!((parsed.number, parsed.name.as_str()), (3, "cargo_test"));
        assert_eq!(CommandId::parse("s", "07").unwrap().name, "");
        assert_eq!(CommandId::parse("s", "x-07"), None);
    }

    #[test]
    fn an_id_names_one_directory_and_prints_back_as_given() {
        for given in ["03-build", "04", "123-a-b", "01-cargo_test_--all", "05-.."] {
            let id = CommandId::from_dir_name("s", given).unwrap();
            assert_eq!(
                (id.session.as_str(), id.dir_name()),
                ("s", given.to_string())
            );
        }
        for bad in [
            "",
            "build",
            "3-build",
            "003-build",
            "03-",
            "03-../x",
            "-3",
            "x-07",
        ] {
            let err = CommandId::from_dir_name("s", bad).unwrap_err();
            assert_eq!(err.given, bad);
            assert!(err.to_string().contains("is not a command id"), "{err}");
        }
    }

    #[test]
    fn numbers_of_dir_names() {
        assert_eq!(CommandId::number_of("03-build"), Some(3));
        assert_eq!(CommandId::number_of("07"), Some(7));
        assert_eq!(CommandId::number_of("123-a-b"), Some(123));
        assert_eq!(CommandId::number_of("session.json"), None);
        assert_eq!(CommandId::number_of(".session.json.12.tmp"), None);
        assert_eq!(CommandId::number_of("-3"), None);
        assert_eq!(CommandId::number_of("3x-y"), None);
    }

    #[test]
    fn an_id_shows_its_session_and_directory() {
        let id = CommandId::of_dir(Path::new("/state/sessions/agent-1/07-make")).unwrap();
        assert_eq!(id.to_string(), "agent-1/07-make");
        assert_eq!(id.target(), "agent-1/07");
        assert_eq!(CommandId::parse("a", "123-x").unwrap().target(), "a/123");
        assert_eq!(CommandId::of_dir(Path::new("/s/agent-1/notes")), None);
    }

    #[test]
    fn ids_order_as_a_session_lists_its_directories() {
        let mut ids: Vec<_> = ["100-x", "11-y", "02-b", "02"]
            .iter()
            .map(|d| CommandId::parse("s", d).unwrap().dir_name())
            .collect();
        ids.sort_by_key(|d| CommandId::parse("s", d));
        assert_eq!(ids, ["02", "02-b", "11-y", "100-x"]);
    }
}
