//! Proving that a pid read from a journal is that journal's broker before anything signals
//! it. A journal is only a file: copied and edited, it could name any process of the user.
//! The process must run as us, with the journaled start time, and hold the token that the
//! journal records, which its front end made for it alone: as the name of a memfd it holds
//! (every broker does, forked or exec'd), or, for a broker an older tether started, in its
//! environment beside the `TETHER_BROKER=1` marker. A broker is not dumpable (its command
//! must not ptrace it), so only root reads its `/proc/PID/fd`; anyone else proves it by the
//! shared `flock` it holds on its journal's `events.jsonl` for its whole life, which
//! `/proc/locks` lists with its pid and the file's device and inode: a process that is not
//! that journal's broker holds no lock on that file.
//!
//! The executable is not compared with ours: a broker outlives the binary it was started
//! from (a rebuild or an upgrade replaces the file), and must still be stoppable; the token,
//! 128 random bits nothing else has, is the proof.

use std::os::fd::OwnedFd;
use std::path::Path;

use thiserror::Error;

use super::discover::LiveCommand;
use tether_broker::broker::{BROKER_ENV, BROKER_TOKEN_ENV, TOKEN_MEMFD_PREFIX};
use tether_os::procfs::{broker_alive, holds_journal_lock, status_uids};
use tether_os::sys::SendSignal;
use tether_protocol::protocol::BrokerIdentity;

#[derive(Debug, Error)]
pub enum BrokerCheck {
    #[error("its broker (pid {pid}) has ended; nothing was signalled")]
    Gone { pid: i32 },
    #[error(
        "its broker pid {pid} is not the tether broker that wrote this journal ({why}); nothing was signalled"
    )]
    NotTheBroker { pid: i32, why: String },
    #[error("cannot signal its broker (pid {pid}): {source}")]
    Io {
        pid: i32,
        #[source]
        source: std::io::Error,
    },
}

/// Opens a pidfd on the broker of `command`, then checks that it is that broker. The pidfd
/// is opened first, so the checks are of the very process any signal through it reaches.
pub fn open_broker(command: &LiveCommand) -> Result<OwnedFd, BrokerCheck> {
    open_verified(
        &command.broker,
        command.broker_token.as_deref(),
        &command.dir,
    )
}

/// [`open_broker`] for a broker known by its identity, journaled token and journal
/// directory.
pub fn open_verified(
    broker: &BrokerIdentity,
    token: Option<&str>,
    journal: &Path,
) -> Result<OwnedFd, BrokerCheck> {
    // rustix: nix has no pidfds.
    use rustix::process::{Pid, PidfdFlags, pidfd_open};
    let pid = broker.pid;
    let gone = || BrokerCheck::Gone { pid };
    let target = Pid::from_raw(pid).ok_or_else(gone)?;
    let pidfd = pidfd_open(target, PidfdFlags::empty()).map_err(|err| match err {
        rustix::io::Errno::SRCH => gone(),
        err => BrokerCheck::Io {
            pid,
            source: err.into(),
        },
    })?;
    if !broker_alive(broker) {
        return Err(gone());
    }
    let not = |why: String| BrokerCheck::NotTheBroker { pid, why };
    let me = nix::unistd::geteuid().as_raw();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .map_err(|err| not(format!("cannot read its status: {err}")))?;
    match status_uids(&status) {
        Some((real, effective)) if real == me && effective == me => {}
        Some((real, _)) => return Err(not(format!("it runs as uid {real}, not {me}"))),
        None => return Err(not("its status names no uid".into())),
    }
    let Some(token) = token else {
        return Err(not(
            "the journal records no broker token: an older tether wrote it, and its pid cannot be proved to be the broker"
                .into(),
        ));
    };
    if holds_token_memfd(pid, token) || holds_journal_lock(pid, journal) {
        return Ok(pidfd);
    }
    // A broker an older tether started holds its token in its environment only.
    let environ = std::fs::read(format!("/proc/{pid}/environ"))
        .map_err(|err| not(format!("cannot read its environment: {err}")))?;
    check_environ(&environ, token).map_err(|why| not(why.into()))?;
    Ok(pidfd)
}

/// Whether process `pid` holds a memfd named for `token` (see
/// [`TOKEN_MEMFD_PREFIX`]): what every broker holds for its life.
fn holds_token_memfd(pid: i32, token: &str) -> bool {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    let name = format!("/memfd:{TOKEN_MEMFD_PREFIX}{token} (deleted)");
    fds.flatten().any(|fd| {
        std::fs::read_link(fd.path()).is_ok_and(|target| target.as_os_str() == name.as_str())
    })
}

/// Whether a `/proc/PID/environ` block is a broker's holding `token`.
fn check_environ(environ: &[u8], token: &str) -> Result<(), &'static str> {
    let value = |name: &str| {
        environ.split(|&b| b == 0).find_map(|entry| {
            entry
                .strip_prefix(name.as_bytes())
                .and_then(|rest| rest.strip_prefix(b"="))
        })
    };
    if value(BROKER_ENV) != Some(b"1") {
        return Err("it is not a tether broker: its environment has no broker marker");
    }
    match value(BROKER_TOKEN_ENV) {
        None => Err("its environment holds no broker token"),
        Some(held) if held != token.as_bytes() => {
            Err("its broker token is not the one the journal records")
        }
        Some(_) => Ok(()),
    }
}

/// Signals the verified broker of `command` by its pidfd. Returns the pidfd, which becomes
/// readable when the broker exits.
pub fn signal_broker(
    command: &LiveCommand,
    signal: tether_protocol::protocol::ProcessSignal,
) -> Result<OwnedFd, BrokerCheck> {
    let pid = command.broker.pid;
    let pidfd = open_broker(command)?;
    signal
        .send_to_pidfd(&pidfd)
        .map_err(|source| BrokerCheck::Io { pid, source })?;
    Ok(pidfd)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tether_os::journal::writer::EVENTS_FILE;

    const TOKEN: &str = "00112233445566778899aabbccddeeff";

    #[test]
    fn only_a_broker_holding_the_journals_token_passes() {
        let env = |vars: &[&str]| vars.join("\0").into_bytes();
        let broker = env(&[
            "HOME=/h",
            "TETHER_BROKER=1",
            &format!("TETHER_BROKER_TOKEN={TOKEN}"),
        ]);
        assert_eq!(check_environ(&broker, TOKEN), Ok(()));
        let other = "ffeeddccbbaa99887766554433221100";
        assert!(check_environ(&broker, other).is_err());
        let sleep = env(&["HOME=/h", "PATH=/bin"]);
        assert!(check_environ(&sleep, TOKEN).is_err());
        let no_marker = env(&[&format!("TETHER_BROKER_TOKEN={TOKEN}")]);
        assert!(check_environ(&no_marker, TOKEN).is_err());
        let prefix = env(&["TETHER_BROKER=1", &format!("TETHER_BROKER_TOKEN_X={TOKEN}")]);
        assert!(check_environ(&prefix, TOKEN).is_err());
    }

    /// This process takes the lock a broker takes and is proved by it, through the real
    /// /proc/locks; another file's lock proves nothing.
    #[test]
    fn a_shared_flock_on_the_event_log_is_found_in_proc_locks() {
        let journal = tether_os::testing::private_tempdir();
        let events = tether_os::testing::create_private(journal.path().join(EVENTS_FILE));
        let me = std::process::id() as i32;
        assert!(!holds_journal_lock(me, journal.path()));
        rustix::fs::flock(&events, rustix::fs::FlockOperation::LockShared).unwrap();
        assert!(holds_journal_lock(me, journal.path()));
        let other = tether_os::testing::private_tempdir();
        tether_os::testing::create_private(other.path().join(EVENTS_FILE));
        assert!(!holds_journal_lock(me, other.path()));
    }

    #[test]
    fn this_test_is_not_a_broker_and_nothing_is_signalled() {
        let me = tether_os::procfs::read_stat(std::process::id() as i32).unwrap();
        let identity = BrokerIdentity {
            pid: me.pid,
            start_ticks: me.start_ticks,
        };
        let journal = tether_os::testing::private_tempdir();
        tether_os::testing::write_private(journal.path().join(EVENTS_FILE), "");
        let refused = open_verified(&identity, Some(TOKEN), journal.path()).unwrap_err();
        assert!(
            matches!(refused, BrokerCheck::NotTheBroker { .. }),
            "{refused}"
        );
        let old = open_verified(&identity, None, journal.path()).unwrap_err();
        assert!(old.to_string().contains("no broker token"), "{old}");
    }
}
