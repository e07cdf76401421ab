//! Reading what the follower decides on: a session's command numbers (one directory
//! listing) and, for a command not yet sent, four facts from its small files (whether it
//! ended, failed, is the agent, when it last ran). A command's events are read only when
//! its broker is found gone without a result, to see how far it got, or when its result
//! says something stopped it or it did not exit 0: whether that was a failure is the
//! model's word (`CommandState::is_failure`), which a stop or signal of the operator's
//! makes none.

use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;
use std::time::{Duration, UNIX_EPOCH};

use super::cursor::Cursor;
use super::machine::{CommandScan, SessionScan};
use crate::export::CommandExport;
use crate::journal::CommandId;
use crate::journal::bounded::read_metadata;
use crate::journal::reader::read_request;
use crate::journal::secure::open_regular;
use crate::journal::writer::{EVENTS_FILE, SESSION_FILE};
use crate::journal::{MAX_EVENT_LINE, SessionInfo, command_dirs, read_result};
use crate::model::replay::{broker_pid_alive, dir_name};
use crate::protocol::{Event, EventKind};

/// A command directory with no broker's word after this long is a number reserved by a
/// process that died before using it: found cut short, not waited for.
const UNCLAIMED: Duration = Duration::from_secs(60);

/// A session as the follower needs it, given what `cursor` says was sent: a command sent
/// already is not read again, unless the session's root is still to be sent (its timing
/// needs every command). With it, the commands that run (to watch).
pub fn scan_session(dir: &Path, cursor: &Cursor, now_ms: u64) -> io::Result<SessionScan> {
    let mut commands = Vec::new();
    for command in command_dirs(dir)? {
        let Some(number) = number_of(&command) else {
            continue;
        };
        if cursor.session_sent && cursor.has(number) {
            continue;
        }
        commands.extend(scan_command(&command, number, now_ms));
    }
    let started_ms = read_info(dir).map_or_else(
        || commands.iter().map(|c| c.last_ms).min().unwrap_or(now_ms),
        |info| info.started_ms,
    );
    Ok(SessionScan {
        id: dir_name(dir),
        started_ms,
        commands,
    })
}

/// A command directory's number.
pub fn number_of(dir: &Path) -> Option<u64> {
    CommandId::number_of(&dir.file_name()?.to_string_lossy())
}

fn read_info(dir: &Path) -> Option<SessionInfo> {
    let bytes = read_metadata(&dir.join(SESSION_FILE)).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// Whether the command in `dir` is the agent of a `tether agent` session: its request says
/// so, or, in a journal written before requests said it, it ran through the session owner
/// that only `tether agent` starts.
pub fn is_agent(dir: &Path) -> bool {
    read_request(dir).is_some_and(|request| {
        request.attention.agent
            || crate::config::naming::agent_argv(&request.command.argv()).is_some()
    })
}

/// What the follower needs of one command; `None` when its directory is gone once it has
/// been read. A number is reserved as a bare `NN` that is renamed `NN-name` as its command
/// starts (docs/journal.md): what was read at the old name is of no command (a directory
/// gone reads as a journal without events, cut short), and the number comes back under its
/// final name. Looking after the reads catches a rename at any point during them.
pub fn scan_command(dir: &Path, number: u64, now_ms: u64) -> Option<CommandScan> {
    let scan = look_at_command(dir, number, now_ms);
    dir.symlink_metadata()
        .is_ok_and(|meta| meta.is_dir())
        .then_some(scan)
}

fn look_at_command(dir: &Path, number: u64, now_ms: u64) -> CommandScan {
    let agent = is_agent(dir);
    let mut scan = CommandScan {
        number,
        dir: dir.to_path_buf(),
        ended: false,
        failed: false,
        agent,
        last_ms: now_ms,
    };
    if let Some(result) = read_result(dir) {
        scan.ended = true;
        // An exit 0 that nothing stopped is no failure by any reading; any other end is
        // read as every view reads it (a stop or signal of the operator's is no failure, a
        // budget's is), from its events.
        let clean = result.exit.is_some_and(|e| e.code == Some(0))
            && result.stopped_by.is_none()
            && !(result.response_timeout || result.hard_killed || result.parent_lost);
        scan.failed = !clean && !result.drained && CommandExport::load(dir).failed_or_cut_short();
        scan.last_ms = result.ended_ms;
        return scan;
    }
    match first_event(dir) {
        Some(Event {
            ts_ms,
            kind: EventKind::BrokerStarted { broker_pid, .. },
            ..
        }) if broker_pid_alive(broker_pid) => scan.last_ms = ts_ms,
        // No broker has written yet: one is starting, unless that was long ago.
        None if modified_ms(dir).is_some_and(|m| now_ms < m + UNCLAIMED.as_millis() as u64) => {}
        _ => {
            // Its broker is gone without a result: cut short, as far as its journal goes.
            let command = CommandExport::load(dir);
            scan.ended = command.ended_ms().is_some() || command.events.is_empty();
            scan.failed = command.failed_or_cut_short();
            scan.last_ms = command
                .ended_ms()
                .or_else(|| modified_ms(dir))
                .unwrap_or(now_ms);
        }
    }
    scan
}

/// When the command in `dir` began: its broker's first event.
pub fn started_ms(dir: &Path) -> Option<u64> {
    first_event(dir).map(|e| e.ts_ms)
}

/// The first event of a command's log (its broker's start), read alone.
fn first_event(dir: &Path) -> Option<Event> {
    let file = open_regular(&dir.join(EVENTS_FILE)).ok()?;
    let mut line = Vec::new();
    BufReader::new(file.take(MAX_EVENT_LINE as u64))
        .read_until(b'\n', &mut line)
        .ok()?;
    serde_json::from_slice(&line).ok()
}

fn modified_ms(dir: &Path) -> Option<u64> {
    let modified = std::fs::symlink_metadata(dir).ok()?.modified().ok()?;
    Some(
        modified
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_millis() as u64,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn fixture(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/every-kind")
            .join(name)
    }

    const LATER: u64 = 1_800_000_000_000;

    #[test]
    fn a_command_is_read_as_ended_failed_or_cut_short_from_its_small_files() {
        let ok = scan_command(&fixture("01-ok"), 1, LATER).unwrap();
        assert!(ok.ended && !ok.failed && !ok.agent);
        assert!(ok.last_ms < LATER);
        let failed = scan_command(&fixture("02-fail"), 2, LATER).unwrap();
        assert!(failed.ended && failed.failed);
        // How it ended is the model's word: the operator's INT is no failure, a budget's
        // stop is one.
        let interrupted = scan_command(&fixture("05-interrupted"), 5, LATER).unwrap();
        assert!(interrupted.ended && !interrupted.failed, "{interrupted:?}");
        let over_budget = scan_command(&fixture("11-runaway"), 11, LATER).unwrap();
        assert!(over_budget.ended && over_budget.failed, "{over_budget:?}");
        // No result, its broker long gone: cut short, ended where its journal ends.
        let crashed = scan_command(&fixture("10-crashed"), 10, LATER).unwrap();
        assert!(crashed.ended && crashed.failed, "{crashed:?}");
        assert!(crashed.last_ms < LATER);
    }

    #[test]
    fn a_command_no_broker_wrote_to_is_starting_until_long_after() {
        let session = tether_os::testing::private_tempdir();
        let reserved = session.path().join("07");
        crate::testing::private_dir(&reserved);
        let now = crate::clock::now_ms();
        assert!(
            !scan_command(&reserved, 7, now).unwrap().ended,
            "a broker is starting"
        );
        let later = now + UNCLAIMED.as_millis() as u64 + 1000;
        assert!(
            scan_command(&reserved, 7, later).unwrap().ended,
            "a number nobody used"
        );
        // Renamed to its final name: the old name is no command (nothing to send as cut
        // short); the final one is read in its turn.
        std::fs::rename(&reserved, session.path().join("07-make")).unwrap();
        assert!(scan_command(&reserved, 7, later).is_none());
    }

    #[test]
    fn a_session_sent_whole_is_one_listing() {
        let session = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/every-kind");
        let mut cursor = Cursor::default();
        let all = scan_session(&session, &cursor, LATER).unwrap();
        assert_eq!(all.id, "every-kind");
        assert_eq!(all.commands.len(), 11);
        // From its session.json, not its first command.
        assert_eq!(all.started_ms, 1_767_323_045_000);
        for n in 1..=11 {
            cursor.mark(n);
        }
        // The root still to send: every command's timing is needed.
        assert_eq!(
            scan_session(&session, &cursor, LATER)
                .unwrap()
                .commands
                .len(),
            11
        );
        cursor.session_sent = true;
        assert!(
            scan_session(&session, &cursor, LATER)
                .unwrap()
                .commands
                .is_empty()
        );
    }
}
