//! What the follower has sent, on disk: per endpoint a directory
//! `STATE/export/otlp/<key>/` (the key a short hash of the traces URL, so two endpoints
//! keep two records), and in it per session `<session-id>.cursor` (a name no session makes collide with the
//! directory's `lock` and `status.json`, whatever it is called). The journal is the queue;
//! a cursor only says how far an endpoint has taken it, so a restart resends nothing it
//! accepted.
//!
//! Files are 0600 and directories 0700 whatever the umask, opened without following links
//! (`journal::secure`), and a cursor is replaced whole (temporary file, then rename): a crash
//! leaves the old cursor or the new one, never half of one.

use std::collections::BTreeSet;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::journal::secure::{JournalDir, UnsafeDir, open_regular_at};

/// The first command of a session is number 1 (`01-name`).
const FIRST_NUMBER: u64 = 1;
/// A cursor is a few numbers; anything bigger is not one of ours.
const MAX_CURSOR_BYTES: u64 = 1 << 20;
const VERSION: u32 = 1;

/// Which of a session's commands an endpoint has taken, and whether it took the session's
/// root span. Compact: every number below `sent_below` was sent, plus those in `sent`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cursor {
    pub v: u32,
    pub sent_below: u64,
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub sent: BTreeSet<u64>,
    /// The session's root span (its own, or its agent command's) was sent.
    #[serde(default)]
    pub session_sent: bool,
}

impl Default for Cursor {
    fn default() -> Cursor {
        Cursor {
            v: VERSION,
            sent_below: FIRST_NUMBER,
            sent: BTreeSet::new(),
            session_sent: false,
        }
    }
}

impl Cursor {
    pub fn has(&self, number: u64) -> bool {
        number < self.sent_below || self.sent.contains(&number)
    }

    /// Records command `number` as sent, folding a run of numbers into `sent_below`.
    pub fn mark(&mut self, number: u64) {
        if self.has(number) {
            return;
        }
        self.sent.insert(number);
        while self.sent.remove(&self.sent_below) {
            self.sent_below += 1;
        }
    }
}

/// The key of an endpoint: the first 16 hex digits of the SHA-256 of its traces URL.
pub fn endpoint_key(traces_url: &str) -> String {
    let digest = Sha256::digest(traces_url.as_bytes());
    digest.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

/// A cursor that could not be read as one.
#[derive(Debug)]
pub struct Damaged {
    pub path: PathBuf,
    pub why: String,
    /// Where it was moved aside to, if it could be.
    pub moved_to: Option<PathBuf>,
}

impl std::fmt::Display for Damaged {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the cursor {} is damaged ({})",
            self.path.display(),
            self.why
        )?;
        match &self.moved_to {
            Some(to) => write!(f, "; moved to {}", to.display())?,
            None => write!(f, "; it could not be moved aside")?,
        }
        write!(
            f,
            ": the session is sent again from its start, which may duplicate spans the endpoint already has"
        )
    }
}

/// One endpoint's directory of cursors (and its lock and status file).
#[derive(Debug)]
pub struct CursorDir {
    dir: JournalDir,
}

impl CursorDir {
    /// Opens (creating, 0700) `state/export/otlp/<key>`. A link or anything but a directory
    /// on the way is refused with what to remove.
    pub fn open(state: &Path, key: &str) -> Result<CursorDir, String> {
        let refuse = |err: UnsafeDir| match &err {
            UnsafeDir::Symlink { path } | UnsafeDir::NotADirectory { path } => format!(
                "{err}; remove {} and it is made again as a private directory",
                path.display()
            ),
            _ => err.to_string(),
        };
        let dir = JournalDir::open_state(state)
            .and_then(|s| s.open_or_create("export"))
            .and_then(|d| d.open_or_create("otlp"))
            .and_then(|d| d.open_or_create(key))
            .map_err(refuse)?;
        Ok(CursorDir { dir })
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn journal_dir(&self) -> &JournalDir {
        &self.dir
    }

    fn file_name(session: &str) -> String {
        format!("{session}.cursor")
    }

    /// The cursor of `session`: the default when there is none. A damaged one is moved
    /// aside (`.damaged`) and the session starts over; the `Damaged` says so.
    pub fn load(&self, session: &str) -> (Cursor, Option<Damaged>) {
        let name = CursorDir::file_name(session);
        let why = match self.read(&name) {
            Ok(None) => return (Cursor::default(), None),
            Ok(Some(bytes)) => match serde_json::from_slice::<Cursor>(&bytes) {
                Ok(cursor) if cursor.v == VERSION && cursor.sent_below >= FIRST_NUMBER => {
                    return (cursor, None);
                }
                Ok(cursor) => format!("version {} or numbering unknown", cursor.v),
                Err(err) => err.to_string(),
            },
            Err(err) => err.to_string(),
        };
        let aside = format!("{name}.damaged");
        let moved = nix::fcntl::renameat(&self.dir, name.as_str(), &self.dir, aside.as_str());
        let damaged = Damaged {
            path: self.dir.join(&name),
            why,
            moved_to: moved.ok().map(|()| self.dir.join(&aside)),
        };
        (Cursor::default(), Some(damaged))
    }

    fn read(&self, name: &str) -> io::Result<Option<Vec<u8>>> {
        let file = match open_regular_at(&self.dir, name) {
            Ok(file) => file,
            Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(err) => return Err(err),
        };
        let mut bytes = Vec::new();
        file.take(MAX_CURSOR_BYTES + 1).read_to_end(&mut bytes)?;
        if bytes.len() as u64 > MAX_CURSOR_BYTES {
            return Err(io::Error::other("over 1 MiB"));
        }
        Ok(Some(bytes))
    }

    /// Removes the cursor of `session` (its session is gone); there being none is fine.
    pub fn remove(&self, session: &str) -> io::Result<()> {
        let name = CursorDir::file_name(session);
        match nix::unistd::unlinkat(
            &self.dir,
            name.as_str(),
            nix::unistd::UnlinkatFlags::NoRemoveDir,
        ) {
            Ok(()) | Err(nix::errno::Errno::ENOENT) => Ok(()),
            Err(err) => Err(err.into()),
        }
    }

    /// Replaces the cursor of `session` whole (0600, temporary file then rename).
    pub fn write(&self, session: &str, cursor: &Cursor) -> io::Result<()> {
        let mut bytes = serde_json::to_vec(cursor)?;
        bytes.push(b'\n');
        self.dir
            .write_atomic(&CursorDir::file_name(session), &bytes)
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn numbers_fold_into_sent_below() {
        let mut cursor = Cursor::default();
        for n in [3, 1, 5] {
            cursor.mark(n);
        }
        assert_eq!((cursor.sent_below, cursor.sent.len()), (2, 2));
        cursor.mark(2);
        cursor.mark(4);
        assert_eq!(cursor.sent_below, 6);
        assert!(cursor.sent.is_empty());
        assert!(cursor.has(5) && !cursor.has(6));
    }

    #[test]
    fn a_cursor_round_trips_private_whatever_the_umask() {
        // What a loose umask would have made (the umask itself is process-wide, shared with
        // the tests running beside this one): the modes are set, not left to it.
        let state = tether_os::testing::private_tempdir();
        let key = endpoint_key("http://c:4318/v1/traces");
        let loose = state.path().join("export/otlp").join(&key);
        crate::testing::private_dir(&loose);
        for dir in [state.path().join("export"), loose.clone()] {
            crate::testing::loosen(&dir, 0o755);
        }
        crate::testing::write_private(loose.join("s1.cursor"), b"{}");
        crate::testing::loosen(loose.join("s1.cursor"), 0o644);
        let dir = CursorDir::open(state.path(), &key).unwrap();
        let mut cursor = Cursor::default();
        cursor.mark(1);
        cursor.mark(7);
        cursor.session_sent = true;
        dir.write("s1", &cursor).unwrap();
        assert_eq!(dir.load("s1").0, cursor);
        assert_eq!(mode(&dir.path().join("s1.cursor")), 0o600);
        assert_eq!(mode(dir.path()), 0o700);
        assert_eq!(dir.load("other").0, Cursor::default());
        dir.remove("s1").unwrap();
        dir.remove("s1").unwrap();
        assert_eq!(dir.load("s1").0, Cursor::default());
    }

    #[test]
    fn a_write_leaves_no_partial_file_in_sight() {
        let state = tether_os::testing::private_tempdir();
        let dir = CursorDir::open(state.path(), "k").unwrap();
        let mut cursor = Cursor::default();
        for n in 1..300 {
            cursor.mark(n * 2);
            dir.write("s", &cursor).unwrap();
            // Every name in the directory is a whole cursor or nothing we read.
            let names: Vec<String> = std::fs::read_dir(dir.path())
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            assert_eq!(names, ["s.cursor"], "after write {n}");
            if n % 100 == 0 {
                assert_eq!(dir.load("s").0, cursor);
            }
        }
    }

    #[test]
    fn a_damaged_cursor_is_moved_aside_and_the_session_starts_over() {
        let state = tether_os::testing::private_tempdir();
        let dir = CursorDir::open(state.path(), "k").unwrap();
        crate::testing::write_private(dir.path().join("s.cursor"), b"{\"v\":1,\"sent_bel");
        let (cursor, damaged) = dir.load("s");
        assert_eq!(cursor, Cursor::default());
        let damaged = damaged.unwrap();
        assert!(damaged.to_string().contains("may duplicate"), "{damaged}");
        assert!(dir.path().join("s.cursor.damaged").exists());
        assert!(!dir.path().join("s.cursor").exists());
        // A FIFO in a cursor's place is neither waited on nor read.
        nix::unistd::mkfifo(&dir.path().join("f.cursor"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        let (_, damaged) = dir.load("f");
        assert!(damaged.unwrap().why.contains("not a regular file"));
    }

    #[test]
    fn a_link_or_file_in_the_directory_place_says_what_to_remove() {
        let state = tether_os::testing::private_tempdir();
        crate::testing::private_dir(state.path().join("export"));
        std::os::unix::fs::symlink("/tmp", state.path().join("export/otlp")).unwrap();
        let err = CursorDir::open(state.path(), "k").unwrap_err();
        assert!(
            err.contains("symbolic link") && err.contains("remove"),
            "{err}"
        );
        std::fs::remove_file(state.path().join("export/otlp")).unwrap();
        nix::unistd::mkfifo(
            &state.path().join("export/otlp"),
            nix::sys::stat::Mode::S_IRWXU,
        )
        .unwrap();
        let err = CursorDir::open(state.path(), "k").unwrap_err();
        assert!(
            err.contains("not a directory") && err.contains("remove"),
            "{err}"
        );
    }
}
