//! A session set aside while `tether prune` removes it: `sessions/.pruning-NAME-PID`, renamed
//! so that no process joins it by name any more. A prune that is killed half-way leaves one
//! behind; nothing else would ever count or list it again, so whoever finds one whose prune
//! is gone (a prune, `tether sessions`, any reader of the sessions) puts it back under `NAME`,
//! where it is a session like any other.

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::AsFd;
use std::os::unix::ffi::{OsStrExt, OsStringExt};

use nix::errno::Errno;
use nix::fcntl::{AtFlags, RenameFlags, renameat2};
use nix::sys::stat::{FileStat, SFlag, fstatat};

use crate::journal::secure::file_type;

use crate::procfs;

/// The prefix of a session renamed aside while it is removed.
pub const TOMB_PREFIX: &str = ".pruning-";

/// How deep tombs of tombs are unwound: a prune of a tomb that could not be put back names
/// its own tomb after it, and each such prune was interrupted too.
const MAX_NESTING: usize = 8;

/// The name the prune with `pid` gives the session `name` while it removes it.
pub fn tomb_name(name: &OsStr, pid: u32) -> OsString {
    let mut tomb = OsString::from(TOMB_PREFIX);
    tomb.push(name);
    tomb.push(format!("-{pid}"));
    tomb
}

/// The session's own name and the pruner's pid in the tomb name `name`; `None` when it is
/// not one.
pub fn parse(name: &[u8]) -> Option<(&[u8], i32)> {
    let rest = name.strip_prefix(TOMB_PREFIX.as_bytes())?;
    let dash = rest.iter().rposition(|&b| b == b'-')?;
    let pid = std::str::from_utf8(&rest[dash + 1..]).ok()?.parse().ok()?;
    let session = &rest[..dash];
    (!session.is_empty() && pid > 0).then_some((session, pid))
}

/// Whether the prune with `pid` that set a tomb aside at `set_aside_ms` (the tomb's change
/// time, which the rename set) may still be at work on it: that pid runs, and started before
/// then (a process that started later only got the pid again). This process is never at work
/// on one while it looks: a prune works in one thread, and never lists while it removes.
pub fn pruner_at_work(pid: i32, set_aside_ms: u64) -> bool {
    pid != std::process::id() as i32
        && procfs::read_stat(pid)
            .is_some_and(|stat| !stat.is_zombie() && procfs::started_by(&stat, set_aside_ms))
}

/// Whether the entry `name`, whose stat is `stat`, is a tomb that its prune is at work on.
pub fn being_removed(name: &[u8], stat: &FileStat) -> bool {
    parse(name).is_some_and(|(_, pid)| pruner_at_work(pid, changed_ms(stat)))
}

/// A tomb's change time in milliseconds.
// The fields' integer types differ between platforms.
#[allow(clippy::unnecessary_cast, clippy::unnecessary_min_or_max)]
fn changed_ms(stat: &FileStat) -> u64 {
    (stat.st_ctime.max(0) as u64) * 1000 + (stat.st_ctime_nsec.max(0) as u64) / 1_000_000
}

/// Puts back under its name every tomb in the opened `sessions` directory whose prune is no
/// longer at work on it. Returns the tombs of gone prunes that stay (their name was taken
/// meanwhile, or the tomb names none): they are sessions still, under the tomb's name.
pub fn restore_abandoned(sessions: &impl AsFd) -> io::Result<Vec<OsString>> {
    let mut left = Vec::new();
    // rustix: its `Dir` reads through a borrowed descriptor; nix's takes it over.
    for entry in rustix::fs::Dir::read_from(sessions)? {
        let name = entry?.file_name().to_bytes().to_vec();
        if name.starts_with(TOMB_PREFIX.as_bytes())
            && let Some(tomb) = restore(sessions, OsString::from_vec(name))
        {
            left.push(tomb);
        }
    }
    Ok(left)
}

/// Unwinds the tomb `tomb` (and the tombs it was made of) while their prunes are gone;
/// returns the tomb it stopped at when that one is abandoned but cannot be put back.
fn restore(sessions: &impl AsFd, mut tomb: OsString) -> Option<OsString> {
    for _ in 0..MAX_NESTING {
        let stat = fstatat(sessions, tomb.as_os_str(), AtFlags::AT_SYMLINK_NOFOLLOW).ok()?;
        if file_type(&stat) != SFlag::S_IFDIR {
            return None;
        }
        if being_removed(tomb.as_bytes(), &stat) {
            return None;
        }
        let Some((session, _)) = parse(tomb.as_bytes()) else {
            return Some(tomb);
        };
        let session = OsStr::from_bytes(session).to_os_string();
        match renameat2(
            sessions,
            tomb.as_os_str(),
            sessions,
            session.as_os_str(),
            RenameFlags::RENAME_NOREPLACE,
        ) {
            Ok(()) => {}
            // Put back, or taken, by another reader meanwhile.
            Err(Errno::ENOENT) => return None,
            Err(_) => return Some(tomb),
        }
        if !session.as_bytes().starts_with(TOMB_PREFIX.as_bytes()) {
            return None;
        }
        tomb = session;
    }
    Some(tomb)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::secure::open_dir_nofollow;

    #[test]
    fn a_tomb_names_its_session_and_the_prune_removing_it() {
        let name = tomb_name(OsStr::new("20261130T0649-12"), 4242);
        assert_eq!(name, ".pruning-20261130T0649-12-4242");
        assert_eq!(
            parse(name.as_bytes()),
            Some((&b"20261130T0649-12"[..], 4242))
        );
        assert_eq!(parse(b".pruning-agent-x"), None);
        assert_eq!(parse(b".pruning--12"), None);
        assert_eq!(parse(b"agent-12"), None);
    }

    /// A pid that no process has now: a child's, reaped.
    fn dead_pid() -> u32 {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        pid
    }

    #[test]
    fn a_tomb_of_a_gone_prune_is_put_back_under_its_name_and_one_at_work_is_not() {
        let tmp = crate::testing::private_tempdir();
        let gone = dead_pid();
        crate::testing::private_dir(
            tmp.path()
                .join(tomb_name(OsStr::new("s1"), gone))
                .join("01-a"),
        );
        // Set aside by pid 1, which started long before: at work.
        crate::testing::private_dir(tmp.path().join(tomb_name(OsStr::new("s2"), 1)));
        // Abandoned, but a new session took its name: it stays, as a session still.
        crate::testing::private_dir(tmp.path().join("s3"));
        crate::testing::private_dir(tmp.path().join(tomb_name(OsStr::new("s3"), gone)));
        // A tomb of a tomb: unwound to the session.
        let inner = tomb_name(OsStr::new("s4"), gone);
        crate::testing::private_dir(tmp.path().join(tomb_name(&inner, gone)));

        let sessions = open_dir_nofollow(tmp.path()).unwrap();
        let left = restore_abandoned(&sessions).unwrap();
        assert_eq!(left, [tomb_name(OsStr::new("s3"), gone)]);
        let mut names: Vec<String> = std::fs::read_dir(tmp.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        let mut expected = vec![
            "s1".to_string(),
            "s3".into(),
            "s4".into(),
            tomb_name(OsStr::new("s2"), 1)
                .to_string_lossy()
                .into_owned(),
            tomb_name(OsStr::new("s3"), gone)
                .to_string_lossy()
                .into_owned(),
        ];
        expected.sort();
        assert_eq!(names, expected);
        assert!(tmp.path().join("s1/01-a").is_dir(), "put back whole");
    }
}
