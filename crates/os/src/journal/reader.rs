//! Reading journals back: whole sessions for a post-mortem, or the tail of a live event log.
//! A journal cut short by a crash opens; what is missing is reported, never a panic.

use std::fs;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::bounded::{oversized, read_metadata};
use super::secure::open_regular;
use super::tail::EventTail;
use super::writer::{COMMAND_FILE, EVENTS_FILE, LAUNCHER_FILE, RESULT_FILE, SESSION_FILE};
use tether_protocol::CommandId;
use tether_protocol::protocol::{
    BrokerIdentity, CommandFile, CommandResult, Event, EventKind, LaunchRequest, Stream,
};

/// Who started a session, when and where.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionInfo {
    pub id: String,
    pub started_ms: u64,
    pub cwd: PathBuf,
    pub user: String,
    pub host: String,
    pub pid: u32,
    pub tether_version: String,
    /// How tether was invoked.
    pub argv: Vec<String>,
}

/// Something a reader found missing or broken in a journal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Damage {
    /// The event log ends in the middle of a line (a crash while writing it).
    PartialLastLine {
        bytes: usize,
    },
    /// A complete line that is not an event, and how many more lines after it are not
    /// either (a garbage block is one damage, said once, not one per line).
    BadLine {
        line: usize,
        error: String,
        more: usize,
    },
    /// No `result.json`: the broker is still running, or it died before finishing.
    MissingResult,
    Unreadable {
        file: &'static str,
        error: String,
    },
    /// A metadata file over [`super::bounded::METADATA_LIMIT`], skipped unread.
    Oversized(super::bounded::Oversized),
}

impl Damage {
    /// The damage of the metadata file `file`, which [`read_metadata`] failed to read.
    fn of_read(err: &io::Error, file: &'static str) -> Damage {
        match oversized(err) {
            Some(oversized) => Damage::Oversized(oversized.clone()),
            None => Damage::Unreadable {
                file,
                error: err.to_string(),
            },
        }
    }

    /// Whether this is the damage of the file `name` (which is there, but unusable).
    fn is_of(&self, name: &str) -> bool {
        match self {
            Damage::Unreadable { file, .. } => *file == name,
            Damage::Oversized(oversized) => oversized.file == name,
            _ => false,
        }
    }
}

impl std::fmt::Display for Damage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Damage::PartialLastLine { bytes } => write!(
                f,
                "{EVENTS_FILE} ends in a partial line ({bytes} bytes): the journal was cut short"
            ),
            Damage::BadLine { line, error, more } => {
                write!(f, "{EVENTS_FILE} line {line} is not an event: {error}")?;
                match more {
                    0 => Ok(()),
                    1 => write!(f, "; nor is 1 later line"),
                    more => write!(f, "; nor are {more} later lines"),
                }
            }
            Damage::MissingResult => write!(
                f,
                "no {RESULT_FILE}: the command is still running or its broker was killed"
            ),
            Damage::Unreadable { file, error } => write!(f, "cannot read {file}: {error}"),
            Damage::Oversized(oversized) => write!(f, "{oversized}"),
        }
    }
}

/// A command's journal as found on disk.
#[derive(Debug, Clone)]
pub struct CommandRecord {
    pub dir: PathBuf,
    /// Its session and its directory's name there (`agent-1/01-build`).
    pub id: CommandId,
    pub request: Option<LaunchRequest>,
    /// The broker `command.json` names (it writes the file before it journals
    /// `broker_started`).
    pub broker: Option<BrokerIdentity>,
    /// The broker's PID namespace, where it is not the first one (see
    /// `CommandFile::broker_pid_ns`): `broker.pid` is the pid it has there.
    pub broker_pid_ns: Option<u64>,
    pub events: Vec<Event>,
    pub result: Option<CommandResult>,
    pub damage: Vec<Damage>,
}

impl CommandRecord {
    /// The broker `command.json` names, as this process sees it (its pid here, where it ran
    /// in a PID namespace of its own: [`crate::procfs::broker_seen_from_here`]).
    pub fn broker_here(&self) -> Option<BrokerIdentity> {
        let broker = self.broker?;
        Some(crate::procfs::broker_seen_from_here(
            broker,
            self.broker_pid_ns,
            &self.dir,
        ))
    }

    pub fn load(dir: &Path) -> CommandRecord {
        CommandRecord::load_following(dir).0
    }

    /// Loads the journal and returns, with it, the tail that read its event log: polled
    /// again, it gives exactly the events appended since, none missed, none twice.
    pub fn load_following(dir: &Path) -> (CommandRecord, EventTail) {
        let mut damage = Vec::new();
        let file = read_json_or_damage::<CommandFile>(dir, COMMAND_FILE, &mut damage);
        let broker = file.as_ref().and_then(|f| f.broker);
        let broker_pid_ns = file.as_ref().and_then(|f| f.broker_pid_ns);
        let request = file.map(|f| f.request);
        let mut tail = EventTail::new(dir.join(EVENTS_FILE));
        let events = match tail.poll() {
            Ok((events, mut bad)) => {
                damage.append(&mut bad);
                if tail.pending() > 0 {
                    damage.push(Damage::PartialLastLine {
                        bytes: tail.pending(),
                    });
                }
                events
            }
            Err(err) => {
                damage.push(Damage::Unreadable {
                    file: EVENTS_FILE,
                    error: err.to_string(),
                });
                Vec::new()
            }
        };
        let result = read_json_or_damage::<CommandResult>(dir, RESULT_FILE, &mut damage);
        if result.is_none() && !damage.iter().any(|d| d.is_of(RESULT_FILE)) {
            damage.push(Damage::MissingResult);
        }
        let record = CommandRecord {
            dir: dir.to_path_buf(),
            id: id_of(dir),
            request,
            broker,
            broker_pid_ns,
            events,
            result,
            damage,
        };
        (record, tail)
    }
}

/// The command journaled in `dir`, its session's and its own names read lossily as a
/// listing shows them. A directory that is no command's (a test's scratch directory) reads
/// as command 0 of its parent, named as it is.
fn id_of(dir: &Path) -> CommandId {
    let name_of = |path: Option<&Path>| {
        (path.and_then(Path::file_name)).map_or_else(String::new, |n| n.to_string_lossy().into())
    };
    let (session, name) = (name_of(dir.parent()), name_of(Some(dir)));
    CommandId::parse(&session, &name).unwrap_or(CommandId {
        session,
        number: 0,
        name,
    })
}

/// A session directory and every command in it.
#[derive(Debug, Clone)]
pub struct SessionRecord {
    pub dir: PathBuf,
    pub info: Option<SessionInfo>,
    pub damage: Vec<Damage>,
    pub commands: Vec<CommandRecord>,
    /// What its launcher said of its commands between their runs (a TUI session's; none
    /// for others), oldest first.
    pub launcher: Vec<LauncherLine>,
}

/// One line of [`LAUNCHER_FILE`]: from `ts_ms` on, the launcher's word on the command named
/// `command` (`plan`, `null` once it has nothing to add: a run began), about its run whose
/// journal directory is `dir` (`03-worker`; none before its first run). The model reads
/// `plan` (`tether_model::Plan`); `spec` is the command, in a command's first line only, for
/// one that never ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LauncherLine {
    pub ts_ms: u64,
    pub command: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dir: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<tether_protocol::protocol::CommandSpec>,
    pub plan: serde_json::Value,
}

/// The lines of [`LAUNCHER_FILE`] in `dir`, oldest first; none if it does not exist. A line
/// that cannot be read is skipped and said as damage, once.
pub fn read_launcher(dir: &Path, damage: &mut Vec<Damage>) -> Vec<LauncherLine> {
    read_launcher_from(dir, 0, damage).0
}

/// The whole lines of [`LAUNCHER_FILE`] in `dir` from byte `from` on (where the last read
/// ended: the file is only appended to), and where they end; from the start again, with
/// `true`, when the file is shorter than `from` (replaced). As [`read_launcher`] otherwise.
pub fn read_launcher_from(
    dir: &Path,
    from: usize,
    damage: &mut Vec<Damage>,
) -> (Vec<LauncherLine>, usize, bool) {
    let bytes = match read_metadata(&dir.join(LAUNCHER_FILE)) {
        Ok(bytes) => bytes,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return (Vec::new(), 0, true),
        Err(err) => {
            damage.push(Damage::of_read(&err, LAUNCHER_FILE));
            return (Vec::new(), 0, true);
        }
    };
    let again = bytes.len() < from;
    let from = if again { 0 } else { from };
    let mut lines = Vec::new();
    let mut bad = None;
    // A last line cut short (a crash while writing it, or one being written) is not read.
    let end = memchr::memrchr(b'\n', &bytes[from..]).map_or(from, |end| from + end + 1);
    for line in bytes[from..end]
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
    {
        match serde_json::from_slice(line) {
            Ok(line) => lines.push(line),
            Err(err) => {
                bad.get_or_insert(err);
            }
        }
    }
    if let Some(err) = bad {
        damage.push(Damage::Unreadable {
            file: LAUNCHER_FILE,
            error: format!("a line is not the launcher's: {err}"),
        });
    }
    (lines, end, again || from == 0)
}

impl SessionRecord {
    pub fn load(dir: &Path) -> io::Result<SessionRecord> {
        let mut damage = Vec::new();
        let info = read_json_or_damage::<SessionInfo>(dir, SESSION_FILE, &mut damage);
        let command_dirs = super::paths::command_dirs(dir)?;
        let launcher = read_launcher(dir, &mut damage);
        Ok(SessionRecord {
            dir: dir.to_path_buf(),
            info,
            damage,
            launcher,
            commands: command_dirs
                .iter()
                .map(|d| CommandRecord::load(d))
                .collect(),
        })
    }
}

/// Session directories under `sessions_dir`, oldest first: by the start time their
/// `session.json` records, which a named session (`agent-1`) needs, its name saying nothing of
/// when it began. A session without a readable `session.json` (its creator is writing it,
/// or crashed) goes by its directory's modification time.
///
/// A session that a prune set aside and did not finish (`.pruning-NAME-PID`, its prune gone)
/// is put back under its name first, or listed under the tomb's name where that name is taken.
pub fn list_sessions(sessions_dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut dirs = session_dirs(sessions_dir)?;
    dirs.sort_by_cached_key(|d| (started_ms(d), d.clone()));
    Ok(dirs)
}

/// The session directories under `sessions_dir` as [`list_sessions`] finds them (a prune's
/// leftover put back first), in no order: no `session.json` is read, so thousands cost a
/// directory listing.
pub fn session_dirs(sessions_dir: &Path) -> io::Result<Vec<PathBuf>> {
    let left_aside = match super::secure::open_dir_nofollow(sessions_dir) {
        Ok(dir) => super::tomb::restore_abandoned(&dir).unwrap_or_default(),
        Err(_) => Vec::new(),
    };
    match fs::read_dir(sessions_dir) {
        Ok(entries) => Ok(entries
            .filter_map(|e| e.ok())
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            // Never a session: a `.pruning-…` that a prune is removing right now.
            .filter(|e| {
                !e.file_name().as_encoded_bytes().starts_with(b".")
                    || left_aside.contains(&e.file_name())
            })
            .map(|e| e.path())
            .collect()),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(err) => Err(err),
    }
}

/// When the session in `dir` started, as well as can be told.
fn started_ms(dir: &Path) -> u64 {
    #[derive(Deserialize)]
    struct Start {
        started_ms: u64,
    }
    if let Ok(Some(start)) = read_json::<Start>(dir, SESSION_FILE) {
        return start.started_ms;
    }
    fs::symlink_metadata(dir)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(u64::MAX, |d| d.as_millis() as u64)
}

/// When each piece of a stream was written, from the journal's `output` events: the time
/// of the write that holds an offset.
#[derive(Debug, Default)]
pub struct WriteTimes {
    /// (offset, ts_ms), by offset.
    pieces: Vec<(u64, u64)>,
}

impl WriteTimes {
    pub fn of(events: &[Event], stream: Stream) -> WriteTimes {
        let mut pieces: Vec<(u64, u64)> = (events.iter())
            .filter_map(|e| match e.kind {
                EventKind::Output {
                    stream: s, offset, ..
                } if s == stream => Some((offset, e.ts_ms)),
                _ => None,
            })
            .collect();
        pieces.sort_unstable();
        WriteTimes { pieces }
    }

    /// When the byte at `offset` was written; `None` when the journal does not say.
    pub fn at(&self, offset: u64) -> Option<u64> {
        let after = self.pieces.partition_point(|&(o, _)| o <= offset);
        after.checked_sub(1).map(|i| self.pieces[i].1)
    }

    /// When the first piece was written.
    pub fn first(&self) -> Option<u64> {
        self.pieces.first().map(|&(_, ts)| ts)
    }

    /// When the `len` bytes at `offset` were written, first to last: a line of a terminal
    /// stream may be a long redraw, begun before a command ran and ended after.
    pub fn span(&self, offset: u64, len: u64) -> Option<(u64, u64)> {
        let first = self.at(offset)?;
        let last = self.at(offset + len.saturating_sub(1)).unwrap_or(first);
        Some((first, last))
    }
}

/// When the session in `dir` began, by its `session.json`; `None` without a readable one.
pub fn session_started_ms(dir: &Path) -> Option<u64> {
    Some(started_ms(dir)).filter(|&ms| ms != u64::MAX)
}

/// A command's `command.json` (its launch request), if it has a readable one.
pub fn read_request(dir: &Path) -> Option<LaunchRequest> {
    read_json::<LaunchRequest>(dir, COMMAND_FILE).ok()?
}

/// A command's `result.json`, if it has a readable one.
pub fn read_result(dir: &Path) -> Option<CommandResult> {
    read_json::<CommandResult>(dir, RESULT_FILE).ok()?
}

/// The end of a command's `stream` log: its last `window` bytes, from the first line that
/// starts in them, and whether earlier bytes were left out. Nothing while there is no log.
/// (The one reading of a stream's end: export's stderr lines and MCP's tails.)
pub fn stream_tail(dir: &Path, stream: Stream, window: u64) -> io::Result<(Vec<u8>, bool)> {
    let mut file = match open_regular(&dir.join(stream.file_name())) {
        Ok(file) => file,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok((Vec::new(), false)),
        Err(err) => return Err(err),
    };
    let from = file.metadata()?.len().saturating_sub(window);
    file.seek(SeekFrom::Start(from))?;
    let mut bytes = Vec::new();
    file.take(window).read_to_end(&mut bytes)?;
    if from > 0 {
        bytes.drain(..first_line_start(&bytes));
    }
    Ok((bytes, from > 0))
}

/// Where the first whole line of `bytes` begins when they may start inside a line: after
/// the first newline, unless nothing follows it (a window inside one long line shows that).
fn first_line_start(bytes: &[u8]) -> usize {
    match memchr::memchr(b'\n', bytes) {
        Some(i) if i + 1 < bytes.len() => i + 1,
        _ => 0,
    }
}

/// [`read_json`], what cannot be used said as damage.
fn read_json_or_damage<T: for<'de> Deserialize<'de>>(
    dir: &Path,
    file: &'static str,
    damage: &mut Vec<Damage>,
) -> Option<T> {
    read_json(dir, file).unwrap_or_else(|d| {
        damage.push(d);
        None
    })
}

/// The file `file` in `dir`: `Ok(None)` when it does not exist; `Err` when it exists but
/// cannot be used.
fn read_json<T: for<'de> Deserialize<'de>>(
    dir: &Path,
    file: &'static str,
) -> Result<Option<T>, Damage> {
    let bytes = match read_metadata(&dir.join(file)) {
        Ok(bytes) => bytes,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(err) => return Err(Damage::of_read(&err, file)),
    };
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|err| Damage::Unreadable {
            file,
            error: err.to_string(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_times_find_the_piece_holding_an_offset() {
        let times = WriteTimes {
            pieces: vec![(0, 10), (100, 20), (250, 30)],
        };
        assert_eq!(times.at(0), Some(10));
        assert_eq!(times.at(99), Some(10));
        assert_eq!(times.at(100), Some(20));
        assert_eq!(times.at(1_000), Some(30));
        assert_eq!(times.span(90, 20), Some((10, 20)));
        assert_eq!(WriteTimes::default().at(5), None);
    }

    #[test]
    fn a_stream_tail_starts_at_a_whole_line() {
        assert_eq!(first_line_start(b"cut piece\nfirst\nlast"), 10);
        assert_eq!(first_line_start(b"inside one long line\n"), 0);
        assert_eq!(first_line_start(b"no newline at all"), 0);
        let dir = crate::testing::private_tempdir();
        assert_eq!(
            stream_tail(dir.path(), Stream::Stderr, 8).unwrap(),
            (Vec::new(), false)
        );
        crate::testing::write_private(
            dir.path().join(Stream::Stderr.file_name()),
            b"one\ntwo\nthree\n",
        );
        assert_eq!(
            stream_tail(dir.path(), Stream::Stderr, 9).unwrap(),
            (b"three\n".to_vec(), true)
        );
        assert_eq!(
            stream_tail(dir.path(), Stream::Stderr, 100).unwrap(),
            (b"one\ntwo\nthree\n".to_vec(), false)
        );
    }

    const LINE: &str =
        r#"{"ts_ms":1,"mono_us":2,"kind":"output","stream":"stdout","offset":0,"len":3}"#;

    #[test]
    fn sessions_are_listed_by_start_time_not_name() {
        let dir = crate::testing::private_tempdir();
        let session = |name: &str, started_ms: u64| {
            let path = dir.path().join(name);
            crate::testing::private_dir(&path);
            crate::testing::write_private(
                path.join(SESSION_FILE),
                format!(
                    r#"{{"id":"{name}","started_ms":{started_ms},"cwd":"/","user":"u","host":"h","pid":1,"tether_version":"0","argv":[]}}"#
                ),
            );
        };
        session("20261130T064143Z-12", 5_000);
        session("zz-agent", 1_000);
        session("agent-2", 9_000);
        session("20261130T064144Z-13", 6_000);
        // No session.json yet: its directory's time, which is now, so last.
        crate::testing::private_dir(dir.path().join("aaa-new"));
        let names: Vec<String> = list_sessions(dir.path())
            .unwrap()
            .iter()
            .map(|d| d.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            names,
            [
                "zz-agent",
                "20261130T064143Z-12",
                "20261130T064144Z-13",
                "agent-2",
                "aaa-new"
            ]
        );
    }

    #[test]
    fn cut_journal_reports_truncation() {
        let dir = crate::testing::private_tempdir();
        crate::testing::write_private(
            dir.path().join(EVENTS_FILE),
            format!("{LINE}\nnot json\n{}", &LINE[..30]),
        );
        let record = CommandRecord::load(dir.path());
        assert_eq!(record.events.len(), 1);
        assert!(!record.damage.is_empty());
        assert!(
            record
                .damage
                .contains(&Damage::PartialLastLine { bytes: 30 })
        );
        assert!(record.damage.contains(&Damage::MissingResult));
        assert!(matches!(record.damage[0], Damage::BadLine { line: 2, .. }));
    }
}
