//! What a later tether must prove before it stops what a killed broker left
//! (`supervisor::abandoned`): a link in the socket directory and the journal it points at are
//! only files, which any process of ours (the command itself) can write, naming any broker
//! and any process group. So:
//!
//! * the journal is a command directory of a state directory
//!   (`STATE/sessions/SESSION/COMMAND`), the state directory fit to hold journals (ours,
//!   writable by nobody else), the session and command directories and `command.json` ours
//!   and private, as tether makes them;
//! * the process group is signalled only if the kernel says its leader was that broker's
//!   command: the journaled pid and start time, leading its group, started after the broker,
//!   in the session the broker made (`setsid`: the session id is the broker's pid, which the
//!   command cannot leave, being a group leader), whose leader is gone or is that very broker
//!   (a pid is not reused while a session holds it, so a session leader still there with
//!   another start time is another process's session), and dead: the command's main process
//!   dies with its broker (`PR_SET_PDEATHSIG`), so a leader still running is no killed
//!   broker's command. A group that fails any of these is left alone; the cgroup named after
//!   the broker, where there is one, is the proof for its members.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use thiserror::Error;

use tether_os::journal::secure::{check_for_reading, open_dir_nofollow};
use tether_os::procfs::{self, ProcStat};
use tether_protocol::protocol::BrokerIdentity;

/// Why a process group is not proved to be a killed broker's command's.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum Unproven {
    #[error("its leader is not the journaled process (pid and start time), or leads no group")]
    NotTheLeader,
    #[error("its leader started before the broker")]
    OlderThanBroker,
    #[error("its leader is in session {sid}, not the broker's ({broker})")]
    OtherSession { sid: i32, broker: i32 },
    #[error("its session's leader runs, and is not the broker")]
    SessionLeaderElsewhere,
    #[error("its leader still runs: a killed broker's command dies with it")]
    LeaderRuns,
}

/// The command's process group, if the journaled leader `(pid, start ticks)` is proved to be
/// `broker`'s command (see the module's rules), read from /proc now; `None` otherwise.
pub fn proven_group(leader: Option<(i32, u64)>, broker: &BrokerIdentity) -> Option<i32> {
    let (pid, start_ticks) = leader?;
    let stat = procfs::read_stat(pid)?;
    let session_leader = procfs::read_stat(stat.sid);
    judge(&stat, start_ticks, broker, session_leader.as_ref())
        .ok()
        .map(|()| pid)
}

/// The rules over what /proc says: `leader` the process at the journaled pid,
/// `session_leader` the process whose pid is its session id, if any.
pub fn judge(
    leader: &ProcStat,
    journaled_start: u64,
    broker: &BrokerIdentity,
    session_leader: Option<&ProcStat>,
) -> Result<(), Unproven> {
    if leader.start_ticks != journaled_start || leader.pgid != leader.pid {
        return Err(Unproven::NotTheLeader);
    }
    if leader.start_ticks < broker.start_ticks {
        return Err(Unproven::OlderThanBroker);
    }
    if leader.sid != broker.pid {
        return Err(Unproven::OtherSession {
            sid: leader.sid,
            broker: broker.pid,
        });
    }
    if session_leader.is_some_and(|s| s.start_ticks != broker.start_ticks) {
        return Err(Unproven::SessionLeaderElsewhere);
    }
    if !leader.is_zombie() {
        return Err(Unproven::LeaderRuns);
    }
    Ok(())
}

/// Whether `journal` is where tether puts a command's journal, as tether makes it: see the
/// module's first rule. `command.json` is checked by [`private_file`] when it is read.
pub fn journal_in_place(journal: &Path) -> bool {
    let in_place = || {
        let session = journal.parent()?;
        let sessions = (session.parent()).filter(|s| s.file_name() == Some("sessions".as_ref()))?;
        let state = sessions.parent()?;
        Some(
            check_for_reading(state).is_ok()
                && sessions.is_dir()
                && [session, journal].iter().all(|dir| private_dir(dir)),
        )
    };
    in_place().unwrap_or(false)
}

/// A real directory (no link followed), ours, with no group or other bits.
fn private_dir(dir: &Path) -> bool {
    open_dir_nofollow(dir)
        .ok()
        .and_then(|fd| nix::sys::stat::fstat(&fd).ok())
        .is_some_and(|stat| ours_and_private(stat.st_uid, stat.st_mode))
}

/// Whether an opened journal file is ours with no group or other bits.
pub fn private_file(file: &std::fs::File) -> bool {
    file.metadata()
        .is_ok_and(|meta| ours_and_private(meta.uid(), meta.mode()))
}

fn ours_and_private(uid: u32, mode: u32) -> bool {
    uid == nix::unistd::geteuid().as_raw() && mode & 0o077 == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    const BROKER: BrokerIdentity = BrokerIdentity {
        pid: 100,
        start_ticks: 5_000,
    };

    /// The command of `BROKER` as /proc shows it once the broker is killed: a zombie leading
    /// its group in the broker's session, started after it.
    fn command() -> ProcStat {
        ProcStat {
            pid: 120,
            ppid: 1,
            pgid: 120,
            sid: BROKER.pid,
            state: b'Z',
            start_ticks: 5_010,
            ..ProcStat::default()
        }
    }

    #[test]
    fn a_killed_brokers_command_is_proved() {
        assert_eq!(judge(&command(), 5_010, &BROKER, None), Ok(()));
        // The broker itself still a zombie nobody reaped: its own session.
        let broker = ProcStat {
            pid: BROKER.pid,
            sid: BROKER.pid,
            pgid: BROKER.pid,
            state: b'Z',
            start_ticks: BROKER.start_ticks,
            ..ProcStat::default()
        };
        assert_eq!(judge(&command(), 5_010, &BROKER, Some(&broker)), Ok(()));
    }

    #[test]
    fn any_other_group_is_left_alone() {
        let other_time = command();
        assert_eq!(
            judge(&other_time, 5_011, &BROKER, None),
            Err(Unproven::NotTheLeader)
        );
        let member = ProcStat {
            pgid: 119,
            ..command()
        };
        assert_eq!(
            judge(&member, 5_010, &BROKER, None),
            Err(Unproven::NotTheLeader)
        );
        let older = ProcStat {
            start_ticks: 4_000,
            ..command()
        };
        assert_eq!(
            judge(&older, 4_000, &BROKER, None),
            Err(Unproven::OlderThanBroker)
        );
        // A forged link naming a dead pid as the broker, for a group of another session.
        let elsewhere = ProcStat {
            sid: 77,
            ..command()
        };
        assert_eq!(
            judge(&elsewhere, 5_010, &BROKER, None),
            Err(Unproven::OtherSession {
                sid: 77,
                broker: 100
            })
        );
        // The session's leader runs, started at another time: not the broker's session.
        let login = ProcStat {
            pid: BROKER.pid,
            start_ticks: 10,
            state: b'S',
            ..ProcStat::default()
        };
        assert_eq!(
            judge(&command(), 5_010, &BROKER, Some(&login)),
            Err(Unproven::SessionLeaderElsewhere)
        );
        // A group leader that runs: a killed broker's command would have died with it.
        let running = ProcStat {
            state: b'S',
            ..command()
        };
        assert_eq!(
            judge(&running, 5_010, &BROKER, None),
            Err(Unproven::LeaderRuns)
        );
    }

    #[test]
    fn only_a_private_command_directory_of_a_state_directory_is_in_place() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tether_os::testing::private_tempdir();
        let state = tmp.path().join("state");
        let journal = state.join("sessions/s1/01-x");
        tether_os::testing::private_dir(&journal);
        for dir in [
            &state,
            &state.join("sessions"),
            &state.join("sessions/s1"),
            &journal,
        ] {
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        }
        assert!(journal_in_place(&journal));
        let elsewhere = tmp.path().join("s1/01-x");
        tether_os::testing::private_dir(&elsewhere);
        assert!(!journal_in_place(&elsewhere), "not under a sessions/");
        tether_os::testing::loosen(&journal, 0o755);
        assert!(!journal_in_place(&journal), "readable by others");
        std::fs::set_permissions(&journal, std::fs::Permissions::from_mode(0o700)).unwrap();
        tether_os::testing::loosen(&state, 0o777);
        assert!(
            !journal_in_place(&journal),
            "in a state directory others can write"
        );
    }
}
