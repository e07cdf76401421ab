//! What an inotify event means for the journals: which path changed, and so what to read
//! again. Pure: the watcher hands in what the kernel said about which watched directory.

use std::path::{Path, PathBuf};

use nix::sys::inotify::AddWatchFlags;

use crate::journal::writer::{COMMAND_FILE, EVENTS_FILE, LAUNCHER_FILE, RESULT_FILE};

/// What a watched directory is in the journal's layout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Watched {
    /// `STATE/sessions`: session directories appear in it.
    Sessions(PathBuf),
    /// A session: command directories appear in it, and its launcher's word
    /// (`launcher.jsonl`) grows.
    Session(PathBuf),
    /// A command that has no result yet: its journal files change.
    Command(PathBuf),
    /// A command whose end alone matters (the export follower): its result appearing, not
    /// every event its broker appends.
    Ending(PathBuf),
}

impl Watched {
    pub fn path(&self) -> &Path {
        match self {
            Watched::Sessions(path)
            | Watched::Session(path)
            | Watched::Command(path)
            | Watched::Ending(path) => path,
        }
    }
}

/// Which journal file of a command changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JournalFile {
    /// `command.json`: the launch request and broker, written once the broker runs.
    Command,
    /// `events.jsonl` grew.
    Events,
    /// `result.json` appeared: the command is over.
    Result,
}

/// What to read again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// Events were lost (the kernel's queue overflowed): look at everything again.
    Rescan,
    SessionAppeared(PathBuf),
    /// Renamed away or removed (`tether prune` renames a session before removing it).
    SessionGone(PathBuf),
    CommandAppeared(PathBuf),
    /// A reserved number renamed to its command's name, or removed.
    CommandGone(PathBuf),
    Journal {
        dir: PathBuf,
        file: JournalFile,
    },
    /// The session's `launcher.jsonl` appeared or grew.
    Launcher(PathBuf),
}

/// The change an event on `watched` stands for; `None` for what concerns no reader (a stream
/// file growing, a temporary file, `session.json`).
pub fn change_of(watched: &Watched, flags: AddWatchFlags, name: Option<&str>) -> Option<Change> {
    if flags.contains(AddWatchFlags::IN_Q_OVERFLOW) {
        return Some(Change::Rescan);
    }
    // Names starting with a dot are never journals: a session being pruned, a file being
    // written before its rename.
    let name = name.filter(|n| !n.is_empty() && !n.starts_with('.'))?;
    let appeared = flags.intersects(AddWatchFlags::IN_CREATE | AddWatchFlags::IN_MOVED_TO);
    let gone = flags.intersects(AddWatchFlags::IN_MOVED_FROM | AddWatchFlags::IN_DELETE);
    let is_dir = flags.contains(AddWatchFlags::IN_ISDIR);
    match watched {
        Watched::Sessions(dir) if is_dir && appeared => {
            Some(Change::SessionAppeared(dir.join(name)))
        }
        Watched::Sessions(dir) if is_dir && gone => Some(Change::SessionGone(dir.join(name))),
        Watched::Session(dir) if is_dir && appeared => {
            Some(Change::CommandAppeared(dir.join(name)))
        }
        Watched::Session(dir) if is_dir && gone => Some(Change::CommandGone(dir.join(name))),
        Watched::Session(dir)
            if !is_dir
                && name == LAUNCHER_FILE
                && (appeared
                    || flags
                        .intersects(AddWatchFlags::IN_MODIFY | AddWatchFlags::IN_CLOSE_WRITE)) =>
        {
            Some(Change::Launcher(dir.clone()))
        }
        Watched::Command(dir) if !is_dir => {
            let written = appeared || flags.contains(AddWatchFlags::IN_CLOSE_WRITE);
            let file = match name {
                EVENTS_FILE if written || flags.contains(AddWatchFlags::IN_MODIFY) => {
                    JournalFile::Events
                }
                RESULT_FILE if written => JournalFile::Result,
                COMMAND_FILE if written => JournalFile::Command,
                _ => return None,
            };
            Some(Change::Journal {
                dir: dir.clone(),
                file,
            })
        }
        Watched::Ending(dir) if !is_dir && appeared && name == RESULT_FILE => {
            Some(Change::Journal {
                dir: dir.clone(),
                file: JournalFile::Result,
            })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session() -> Watched {
        Watched::Session("/s/sessions/agent".into())
    }

    fn command() -> Watched {
        Watched::Command("/s/sessions/agent/03-ls".into())
    }

    #[test]
    fn a_launcher_journal_growing_is_a_change_of_its_session() {
        for flags in [
            AddWatchFlags::IN_CREATE,
            AddWatchFlags::IN_MODIFY,
            AddWatchFlags::IN_CLOSE_WRITE,
        ] {
            assert_eq!(
                change_of(&session(), flags, Some(LAUNCHER_FILE)),
                Some(Change::Launcher("/s/sessions/agent".into()))
            );
        }
        for (flags, name) in [
            (AddWatchFlags::IN_MODIFY, "session.json"),
            (
                AddWatchFlags::IN_MODIFY | AddWatchFlags::IN_ISDIR,
                LAUNCHER_FILE,
            ),
        ] {
            assert_eq!(change_of(&session(), flags, Some(name)), None, "{name}");
        }
    }

    #[test]
    fn a_command_watched_for_its_end_changes_only_when_its_result_appears() {
        let ending = Watched::Ending("/s/sessions/agent/03-ls".into());
        assert_eq!(
            change_of(&ending, AddWatchFlags::IN_MOVED_TO, Some(RESULT_FILE)),
            Some(Change::Journal {
                dir: "/s/sessions/agent/03-ls".into(),
                file: JournalFile::Result,
            })
        );
        for (flags, name) in [
            (AddWatchFlags::IN_MODIFY, EVENTS_FILE),
            (AddWatchFlags::IN_CREATE, COMMAND_FILE),
            (AddWatchFlags::IN_CREATE, ".result.json.tmp"),
        ] {
            assert_eq!(change_of(&ending, flags, Some(name)), None, "{name}");
        }
    }

    #[test]
    fn new_session_and_command_directories_are_listed() {
        let sessions = Watched::Sessions("/s/sessions".into());
        let dir = AddWatchFlags::IN_CREATE | AddWatchFlags::IN_ISDIR;
        assert_eq!(
            change_of(&sessions, dir, Some("agent")),
            Some(Change::SessionAppeared("/s/sessions/agent".into()))
        );
        assert_eq!(
            change_of(
                &session(),
                AddWatchFlags::IN_MOVED_TO | AddWatchFlags::IN_ISDIR,
                Some("03-ls")
            ),
            Some(Change::CommandAppeared("/s/sessions/agent/03-ls".into()))
        );
        // A reserved number renamed to its name: the old path goes.
        assert_eq!(
            change_of(
                &session(),
                AddWatchFlags::IN_MOVED_FROM | AddWatchFlags::IN_ISDIR,
                Some("03")
            ),
            Some(Change::CommandGone("/s/sessions/agent/03".into()))
        );
        // A session being pruned, and plain files, are no sessions or commands.
        assert_eq!(change_of(&sessions, dir, Some(".pruning-agent")), None);
        assert_eq!(
            change_of(&session(), AddWatchFlags::IN_CREATE, Some("session.json")),
            None
        );
    }

    #[test]
    fn journal_files_say_what_to_read_again() {
        let journal = |file| {
            Some(Change::Journal {
                dir: "/s/sessions/agent/03-ls".into(),
                file,
            })
        };
        assert_eq!(
            change_of(&command(), AddWatchFlags::IN_MODIFY, Some("events.jsonl")),
            journal(JournalFile::Events)
        );
        // Written to a temporary name then renamed: the rename says it is whole.
        assert_eq!(
            change_of(&command(), AddWatchFlags::IN_MOVED_TO, Some("result.json")),
            journal(JournalFile::Result)
        );
        assert_eq!(
            change_of(
                &command(),
                AddWatchFlags::IN_CLOSE_WRITE,
                Some("command.json")
            ),
            journal(JournalFile::Command)
        );
        assert_eq!(
            change_of(
                &command(),
                AddWatchFlags::IN_CREATE,
                Some(".result.json.tmp")
            ),
            None
        );
        // Half-written results are not read: a modification alone is not a result.
        assert_eq!(
            change_of(&command(), AddWatchFlags::IN_MODIFY, Some("result.json")),
            None
        );
        assert_eq!(
            change_of(&command(), AddWatchFlags::IN_MODIFY, Some("stdout.log")),
            None
        );
    }

    #[test]
    fn an_overflow_reads_everything_again() {
        assert_eq!(
            change_of(&command(), AddWatchFlags::IN_Q_OVERFLOW, None),
            Some(Change::Rescan)
        );
        assert_eq!(change_of(&command(), AddWatchFlags::IN_IGNORED, None), None);
    }
}
