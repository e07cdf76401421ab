//! What prune needs to know of each session, read from the state directory through
//! directory descriptors opened with `O_NOFOLLOW`: its size, when it last changed, and
//! whether anything still runs in it. A symbolic link is looked at, never through.

use std::ffi::OsString;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};

use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, openat};
use nix::sys::stat::{FileStat, Mode, SFlag, fstatat};

use serde::Deserialize;
use tether_os::journal::bounded::read_metadata_at;
use tether_os::journal::secure::file_type;

use super::entry::Entry;
use super::plan::{Candidate, Liveness};
use crate::control::socket_dir;
use tether_os::journal::tomb;
use tether_os::journal::writer::{COMMAND_FILE, RESULT_FILE, SESSION_FILE};
use tether_os::procfs;
use tether_protocol::protocol::CommandFile;

/// How long a command directory may go without a `command.json` before it counts as a
/// reservation abandoned by a crash rather than a command starting (a broker writes it
/// within milliseconds of the directory's creation), and a session directory without
/// `session.json` as one whose creator died rather than one being created.
pub const STARTING_GRACE_MS: u64 = 60_000;

/// Deeper than any journal nests (a session holds command directories holding files); a
/// deeper tree was not made by tether, and is walked no further.
pub const MAX_DEPTH: usize = 8;

/// The sessions under the opened `sessions` directory, in no particular order: each one's
/// name there (as bytes, which may not be UTF-8) and what is known of it.
/// Entries that are not directories (links included) are not sessions, and are left alone.
/// A session set aside by a prune that is gone is put back under its name first, and one that
/// cannot be is a session under its tomb's name: either way it counts, and may go.
pub fn scan_sessions(sessions: &OwnedFd, now_ms: u64) -> io::Result<Vec<(OsString, Candidate)>> {
    tomb::restore_abandoned(sessions)?;
    let mut found = Vec::new();
    for name in entry_names(sessions)? {
        let stat = match fstatat(sessions, name.as_os_str(), AtFlags::AT_SYMLINK_NOFOLLOW) {
            Ok(stat) => stat,
            // Removed meanwhile (another prune): nothing to decide.
            Err(Errno::ENOENT) => continue,
            Err(err) => return Err(err.into()),
        };
        if file_type(&stat) != SFlag::S_IFDIR {
            continue;
        }
        // Being removed by another prune right now.
        if tomb::being_removed(name.as_bytes(), &stat) {
            continue;
        }
        let dir = match open_dir_at(sessions, &name) {
            Ok(dir) => dir,
            Err(Errno::ENOENT) => continue,
            Err(err) => return Err(err.into()),
        };
        let id = name.to_string_lossy().into_owned();
        let info = session_start(&dir);
        let usage = disk_usage(&dir, &stat)?;
        let started_ms = info.as_ref().map_or(mtime_ms(&stat), |s| s.started_ms);
        let liveness = liveness(&dir, info.as_ref(), &stat, now_ms);
        let candidate = Candidate {
            id,
            started_ms,
            ended_ms: usage.latest_ms,
            size: usage.bytes,
            liveness,
        };
        found.push((name, candidate));
    }
    Ok(found)
}

/// What `session.json` says of the session's start.
#[derive(Debug, Deserialize)]
pub struct SessionStart {
    pub started_ms: u64,
    /// The process that created the session (a TUI, a `tether exec`).
    pub pid: u32,
}

pub fn session_start(session: &OwnedFd) -> Option<SessionStart> {
    serde_json::from_slice(&read_metadata_at(session, SESSION_FILE).ok()?).ok()
}

/// Whether anything may still run in the session opened as `session` (whose own stat is
/// `stat`): its creator, a broker of one of its commands, or a command about to start.
/// Whatever cannot be told counts as live: prune removes only what it knows is finished.
pub fn liveness(
    session: &OwnedFd,
    info: Option<&SessionStart>,
    stat: &FileStat,
    now_ms: u64,
) -> Liveness {
    match info {
        Some(info) if creator_runs(info) => {
            return Liveness::Live(format!("its front end (pid {}) still runs", info.pid));
        }
        Some(_) => {}
        None if now_ms.saturating_sub(mtime_ms(stat)) < STARTING_GRACE_MS => {
            return Liveness::Live(format!("no {SESSION_FILE} yet: it may be starting"));
        }
        None => {}
    }
    let names = match entry_names(session) {
        Ok(names) => names,
        Err(err) => return Liveness::Live(format!("cannot list it ({err}): cannot tell")),
    };
    for name in names {
        let Ok(stat) = fstatat(session, name.as_os_str(), AtFlags::AT_SYMLINK_NOFOLLOW) else {
            continue;
        };
        if file_type(&stat) != SFlag::S_IFDIR {
            continue;
        }
        let shown = name.to_string_lossy();
        let command = match open_dir_at(session, &name) {
            Ok(dir) => dir,
            Err(err) => {
                let err = io::Error::from(err);
                return Liveness::Live(format!("cannot open {shown} ({err}): cannot tell"));
            }
        };
        if let Some(why) = command_runs(&command, &shown, &stat, now_ms) {
            return Liveness::Live(why);
        }
    }
    Liveness::Finished
}

/// Why the command journaled in `dir` may still run, or `None` when it has ended.
fn command_runs(dir: &OwnedFd, shown: &str, stat: &FileStat, now_ms: u64) -> Option<String> {
    match fstatat(dir, RESULT_FILE, AtFlags::AT_SYMLINK_NOFOLLOW) {
        // The broker wrote its outcome: it is done.
        Ok(_) => return None,
        Err(Errno::ENOENT) => {}
        Err(err) => {
            let err = io::Error::from(err);
            return Some(format!("cannot look for {shown}/{RESULT_FILE} ({err})"));
        }
    }
    let bytes = match read_metadata_at(dir, COMMAND_FILE) {
        Ok(bytes) => bytes,
        Err(err) if err.kind() == io::ErrorKind::NotFound => {
            return (now_ms.saturating_sub(mtime_ms(stat)) < STARTING_GRACE_MS)
                .then(|| format!("{shown} is starting"));
        }
        Err(err) => return Some(format!("cannot read {shown}/{COMMAND_FILE} ({err})")),
    };
    let file: CommandFile = match serde_json::from_slice(&bytes) {
        Ok(file) => file,
        Err(err) => return Some(format!("{shown}/{COMMAND_FILE} is unreadable ({err})")),
    };
    let Some(broker) = tether_os::procfs::journaled_broker(&file) else {
        return Some(format!(
            "{shown}/{COMMAND_FILE} names no broker: cannot tell"
        ));
    };
    if crate::control::broker_alive(&broker) {
        return Some(format!("broker {} of {shown} runs", broker.pid));
    }
    // Its pid is gone or taken by another process; a socket that still answers would say
    // otherwise (a broker seen through another PID namespace).
    let answers = file.control_socket.as_deref().is_some_and(|socket| {
        socket_dir::is_own_socket(socket) && socket_dir::connect_now(socket).is_ok()
    });
    answers.then(|| format!("the control socket of {shown} answers"))
}

/// Whether the process that created the session still runs: its pid names a live process
/// that started no later than the session did (a pid reused since started after it).
fn creator_runs(info: &SessionStart) -> bool {
    let Ok(pid) = i32::try_from(info.pid) else {
        return false;
    };
    procfs::read_stat(pid)
        .is_some_and(|stat| !stat.is_zombie() && procfs::started_by(&stat, info.started_ms))
}

/// Bytes on disk (allocated blocks, as `du` counts) and the latest modification time.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    pub bytes: u64,
    pub latest_ms: u64,
}

/// The usage of the tree opened as `dir` (whose own stat is `stat`), links counted as links.
/// Nothing is descended into on another mount (a bind mount of the same file system too) or
/// beyond [`MAX_DEPTH`].
pub fn disk_usage(dir: &OwnedFd, stat: &FileStat) -> io::Result<Usage> {
    let mut usage = Usage::default();
    let root = Entry::of(dir)?;
    add_tree(dir, stat, &root, 0, &mut usage)?;
    Ok(usage)
}

fn add_tree(
    dir: &OwnedFd,
    stat: &FileStat,
    root: &Entry,
    depth: usize,
    usage: &mut Usage,
) -> io::Result<()> {
    add(stat, usage);
    if depth >= MAX_DEPTH {
        return Ok(());
    }
    for name in entry_names(dir)? {
        let Ok(stat) = fstatat(dir, name.as_os_str(), AtFlags::AT_SYMLINK_NOFOLLOW) else {
            continue;
        };
        if file_type(&stat) == SFlag::S_IFDIR {
            let child = open_dir_at(dir, &name)
                .ok()
                .filter(|child| Entry::of(child).is_ok_and(|opened| opened.on_mount_of(root)));
            if let Some(child) = child {
                add_tree(&child, &stat, root, depth + 1, usage)?;
                continue;
            }
        }
        add(&stat, usage);
    }
    Ok(())
}

fn add(stat: &FileStat, usage: &mut Usage) {
    usage.bytes += stat.st_blocks as u64 * 512;
    usage.latest_ms = usage.latest_ms.max(mtime_ms(stat));
}

// The fields' integer types differ between platforms.
#[allow(clippy::unnecessary_cast, clippy::unnecessary_min_or_max)]
pub fn mtime_ms(stat: &FileStat) -> u64 {
    (stat.st_mtime.max(0) as u64) * 1000 + (stat.st_mtime_nsec.max(0) as u64) / 1_000_000
}

/// The names in the opened directory `dir`, without `.` and `..`.
pub fn entry_names(dir: &impl AsFd) -> io::Result<Vec<OsString>> {
    let mut names = Vec::new();
    // rustix: its `Dir` reads through a borrowed descriptor; nix's takes it over.
    for entry in rustix::fs::Dir::read_from(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_bytes();
        if name != b"." && name != b".." {
            names.push(OsString::from_vec(name.to_vec()));
        }
    }
    Ok(names)
}

/// Opens the directory `name` in `dir`: never through a link, never a FIFO or device.
pub fn open_dir_at(dir: &impl AsFd, name: &OsString) -> nix::Result<OwnedFd> {
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    openat(dir, name.as_os_str(), flags, Mode::empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    use nix::sys::stat::fstat;
    use tether_os::journal::secure::open_dir_nofollow;

    fn command_json(pid: i32, start_ticks: u64) -> String {
        format!(
            r#"{{"v":3,"name":"sleep","command":{{"argv":["sleep","9"]}},"journal_dir":"/x",
            "parent_pid":1,"grace_ms":2000,"max_output":1024,"mirror":false,"stdin":"null",
            "broker":{{"pid":{pid},"start_ticks":{start_ticks}}}}}"#
        )
    }

    /// A session directory holding one command directory with `files`; its liveness now.
    fn liveness_of(files: &[(&str, String)], now_ms: u64) -> Liveness {
        let tmp = tether_os::testing::private_tempdir();
        let command = tmp.path().join("01-sleep");
        tether_os::testing::private_dir(&command);
        for (name, text) in files {
            tether_os::testing::write_private(command.join(name), text);
        }
        let info = SessionStart {
            started_ms: 0,
            // No process has pid 0: the creator is gone.
            pid: 0,
        };
        let dir = open_dir_nofollow(tmp.path()).unwrap();
        let stat = fstat(&dir).unwrap();
        liveness(&dir, Some(&info), &stat, now_ms)
    }

    #[test]
    fn a_session_is_live_while_a_broker_of_it_runs() {
        let me = procfs::read_stat(std::process::id() as i32).unwrap();
        let now = tether_os::clock::now_ms();
        let running = command_json(me.pid, me.start_ticks);
        assert!(matches!(
            liveness_of(&[(COMMAND_FILE, running.clone())], now),
            Liveness::Live(why) if why.contains(&format!("broker {} of 01-sleep runs", me.pid))
        ));
        // Its result written: done, whatever runs under that pid.
        let done = [(COMMAND_FILE, running), (RESULT_FILE, "{}".to_string())];
        assert_eq!(liveness_of(&done, now), Liveness::Finished);
        // The pid reused by another process (another start time): the broker is gone.
        let reused = command_json(me.pid, me.start_ticks + 1);
        assert_eq!(
            liveness_of(&[(COMMAND_FILE, reused)], now),
            Liveness::Finished
        );
    }

    #[test]
    fn what_cannot_be_told_counts_as_live() {
        let now = tether_os::clock::now_ms();
        let garbage = [(COMMAND_FILE, "{not json".to_string())];
        assert!(
            matches!(liveness_of(&garbage, now), Liveness::Live(why) if why.contains("unreadable"))
        );
        // No command.json yet: starting, for a while; then an abandoned reservation.
        assert!(matches!(liveness_of(&[], now), Liveness::Live(why) if why.contains("starting")));
        assert_eq!(
            liveness_of(&[], now + STARTING_GRACE_MS + 1000),
            Liveness::Finished
        );
    }

    #[test]
    fn a_session_left_aside_by_a_gone_prune_is_put_back_and_counted() {
        let tmp = tether_os::testing::private_tempdir();
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let gone = child.id();
        child.wait().unwrap();
        let tomb = tomb::tomb_name("s1".as_ref(), gone);
        tether_os::testing::private_dir(tmp.path().join(&tomb).join("01-a"));
        tether_os::testing::write_private(
            tmp.path().join(&tomb).join("01-a/stdout.log"),
            [b'x'; 8192],
        );
        // One a prune is at work on (pid 1 set it aside just now): neither counted nor moved.
        let busy = tomb::tomb_name("s2".as_ref(), 1);
        tether_os::testing::private_dir(tmp.path().join(&busy));

        let sessions = open_dir_nofollow(tmp.path()).unwrap();
        let found = scan_sessions(&sessions, u64::MAX).unwrap();
        let names: Vec<&OsString> = found.iter().map(|(name, _)| name).collect();
        assert_eq!(names, ["s1"]);
        assert_eq!(found[0].1.id, "s1");
        assert!(found[0].1.size >= 8192, "{:?}", found[0].1);
        assert!(tmp.path().join("s1/01-a/stdout.log").exists());
        assert!(tmp.path().join(&busy).is_dir());
    }

    #[test]
    fn the_creator_keeps_its_session_live_and_a_reused_pid_does_not() {
        let me = std::process::id();
        let started_now = SessionStart {
            started_ms: tether_os::clock::now_ms(),
            pid: me,
        };
        assert!(creator_runs(&started_now));
        // A session recorded as started before this process: another process had the pid.
        let long_ago = SessionStart {
            started_ms: 1_000,
            pid: me,
        };
        assert!(!creator_runs(&long_ago));
    }
}
