//! Finding the live brokered commands of this user from the journals alone: a command is live
//! when its `command.json` names a broker, it has no `result.json`, and that broker (same pid,
//! same start time, not a zombie) still runs. No daemon keeps a list; the journal is the list.

use std::fs;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::Duration;

use thiserror::Error;

use super::socket_dir;
use tether_config::CommandConfig;
use tether_model::command::{CommandState, Status};
use tether_os::journal::bounded::{Oversized, oversized, read_metadata};
use tether_os::journal::secure::{UnsafeDir, check_for_reading, open_regular};
use tether_os::journal::writer::{COMMAND_FILE, EVENTS_FILE, RESULT_FILE};
use tether_os::journal::{CommandId, command_dirs, list_sessions, session_dirs, sessions_dir};
use tether_os::procfs::{self, broker_alive};
use tether_protocol::protocol::{
    BrokerIdentity, CommandFile, ContainmentMode, Event, EventKind, Frame, LineSplitter, MAX_LINE,
};

/// How much of the start and of the end of an event log is read to learn a command's pid and
/// where it is in its life (the middle is output events).
const LOG_WINDOW: u64 = 64 * 1024;

/// One command whose broker runs now.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveCommand {
    /// Its session and its directory there (`agent-1/01-sleep`): unique where names are not.
    pub id: CommandId,
    pub name: String,
    pub dir: PathBuf,
    pub broker: BrokerIdentity,
    /// The broker's token, from `command.json`: what [`super::verify`] checks before
    /// signalling the broker's pid. Not shown in listings.
    pub broker_token: Option<String>,
    /// The command's own pid (the leader of its process group), once spawned.
    pub pid: Option<i32>,
    /// When the broker started, ms since the Unix epoch.
    pub started_ms: u64,
    /// `running`, `stopping`, `starting`, `left running (N)`, or how the command exited
    /// while its broker finishes (`exit 0`, `SIGKILL`).
    pub state: String,
    /// Its main process exited and what it left runs on in custody (`left running (N)`).
    pub left_running: bool,
    /// The grace period of its stop sequence.
    pub grace: Duration,
    pub control_socket: Option<PathBuf>,
    /// What holds its tree, as the broker's last `containment` event said: `cgroup` or
    /// `procfs` (absent from journals older than containment).
    pub containment: Option<ContainmentMode>,
    pub cgroup: Option<PathBuf>,
}

impl LiveCommand {
    /// `SESSION/NAME`, as targets name it.
    pub fn label(&self) -> String {
        format!("{}/{}", self.id.session, self.name)
    }

    /// Whether a control socket is recorded and is there, ours.
    pub fn has_socket(&self) -> bool {
        self.control_socket
            .as_deref()
            .is_some_and(socket_dir::is_own_socket)
    }

    /// Whether the broker is still the process the journal names.
    pub fn is_alive(&self) -> bool {
        broker_alive(&self.broker)
    }
}

#[derive(Debug, Error)]
pub enum DiscoverError {
    #[error(transparent)]
    UnsafeStateDir(#[from] UnsafeDir),
    #[error("cannot list {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Every live command under `state_dir`, or only those of `session`, in session then
/// command order. Sockets of brokers found dead are removed on the way (owner checked, and
/// only if nobody listens).
pub fn live_commands(
    state_dir: &Path,
    session: Option<&str>,
) -> Result<Vec<LiveCommand>, DiscoverError> {
    live_commands_noting(state_dir, session).map(|(live, _)| live)
}

/// As [`live_commands`], with what was skipped: a line for each journal whose
/// `command.json` is over the bound a metadata file may be (`SESSION/ID: command.json is
/// 3.0 GiB, ...; skipped`). A command that made its own journal unreadable cannot be listed,
/// but is not left unsaid.
pub fn live_commands_noting(
    state_dir: &Path,
    session: Option<&str>,
) -> Result<(Vec<LiveCommand>, Vec<String>), DiscoverError> {
    check_for_reading(state_dir)?;
    let sessions = sessions_dir(state_dir);
    let all = list_sessions(&sessions).map_err(|source| DiscoverError::Io {
        path: sessions.clone(),
        source,
    })?;
    let mut live = Vec::new();
    let mut skipped = Vec::new();
    for session_dir in all {
        let name = file_name(&session_dir);
        if session.is_some_and(|wanted| wanted != name) {
            continue;
        }
        for dir in command_dirs(&session_dir).unwrap_or_default() {
            let Some(id) = CommandId::parse(&name, &file_name(&dir)) else {
                continue;
            };
            match read_live_command(&id, &dir) {
                Ok(Some(command)) => live.push(command),
                Ok(None) => {}
                Err(oversized) => skipped.push(format!("{id}: {oversized}")),
            }
        }
    }
    Ok((live, skipped))
}

/// Command `id`, journaled in `dir`, if its broker runs.
pub fn live_command(id: &CommandId, dir: &Path) -> Option<LiveCommand> {
    read_live_command(id, dir).ok().flatten()
}

/// [`live_command`], or why its `command.json` was not read: it is over the bound.
fn read_live_command(id: &CommandId, dir: &Path) -> Result<Option<LiveCommand>, Oversized> {
    // Finished commands, the great majority, cost one stat.
    if fs::symlink_metadata(dir.join(RESULT_FILE)).is_ok() {
        return Ok(None);
    }
    let bytes = match read_metadata(&dir.join(COMMAND_FILE)) {
        Ok(bytes) => bytes,
        Err(err) => return oversized(&err).cloned().map_or(Ok(None), Err),
    };
    Ok(serde_json::from_slice(&bytes)
        .ok()
        .and_then(|file| live_of(id, dir, file)))
}

/// The live command `file` names in `dir`, if its broker runs.
fn live_of(id: &CommandId, dir: &Path, file: CommandFile) -> Option<LiveCommand> {
    let broker = tether_os::procfs::journaled_broker(&file)?;
    if !broker_alive(&broker) {
        // Killed before it could clean up: its socket is stale.
        if let Some(socket) = &file.control_socket {
            socket_dir::remove_if_stale(socket);
        }
        return None;
    }
    let events = log_window(&dir.join(EVENTS_FILE));
    // A broker in a PID namespace of its own (an agent's sandbox) journals its command's
    // pid there too: the pid here, found by its start, or none.
    let foreign = procfs::is_foreign_namespace(file.broker_pid_ns);
    let pid = events.iter().find_map(|e| match e.kind {
        EventKind::Spawned {
            pid, start_ticks, ..
        } if foreign => procfs::pid_seen_from_here(pid, start_ticks?, file.broker_pid_ns),
        EventKind::Spawned { pid, .. } => Some(pid),
        _ => None,
    });
    let contained = events.iter().rev().find_map(|e| match &e.kind {
        EventKind::Containment { mode, path, .. } => Some((*mode, path.clone())),
        _ => None,
    });
    let started_ms = events.first().map_or_else(
        || procfs::read_stat(broker.pid).map_or(0, |s| procfs::start_time_ms(&s)),
        |e| e.ts_ms,
    );
    let here = Here {
        pid,
        broker: (!foreign).then_some(broker.pid),
    };
    let (state, left_running) = state_label(&file, dir, &events, here);
    Some(LiveCommand {
        id: id.clone(),
        name: file.request.name.clone(),
        dir: dir.to_path_buf(),
        broker,
        broker_token: file.broker_token.clone(),
        pid,
        started_ms,
        state,
        left_running,
        grace: file.request.grace,
        control_socket: file.control_socket,
        containment: contained.as_ref().map(|(mode, _)| *mode),
        cgroup: contained.and_then(|(_, path)| path),
    })
}

/// A live command's pids as this process sees them: its own (found where its broker is in
/// a PID namespace of its own), and its broker's where the journal's pids are this
/// namespace's (what it left is known only by the journal's).
#[derive(Clone, Copy)]
struct Here {
    pid: Option<i32>,
    broker: Option<i32>,
}

/// Where the command is in its life, by the model's own reading of its events, with what
/// needs the operator now (`running, needs input`, `running, runaway`), and whether it is
/// left running. A pause is no event: whether its process, or all it left, is stopped
/// by a signal now (`paused`, `left paused (N)`) is read from `/proc`: by the command's pid
/// here, and by what it left where the journal's pids are this namespace's (the watch reads
/// its sampler's, by the journal's pids).
fn state_label(file: &CommandFile, dir: &Path, events: &[Event], here: Here) -> (String, bool) {
    let config = CommandConfig::new(file.request.name.clone(), file.request.command.clone());
    let mut state = CommandState::new(config);
    state.begin_run(dir.to_path_buf(), events.first().map_or(0, |e| e.ts_ms));
    for event in events {
        state.apply(event);
    }
    // Unreaped while its run lasts, the command's own pid is its; a kept process is known
    // by its start too, the journal's last tree being seconds old.
    let state_now = |pid: i32, started_ms: Option<u64>| {
        let stat = procfs::read_stat(pid)?;
        let same = started_ms.is_none_or(|ms| procfs::started_at(&stat, ms));
        same.then_some(char::from(stat.state))
    };
    if let Some(letter) = here.pid.and_then(|pid| state_now(pid, None)) {
        state.observe_state(letter);
    }
    if let (Status::LeftRunning { .. }, Some(broker_pid)) = (&state.status, here.broker) {
        let kept: Vec<char> = (state.tree.iter())
            .filter(|p| p.pid != broker_pid)
            .filter_map(|p| state_now(p.pid, Some(p.start_ms)))
            .collect();
        state.observe_kept_states(kept.into_iter());
    }
    let left_running = matches!(state.status, Status::LeftRunning { .. });
    let words = match state.status {
        // The broker is alive: the run is not lost, it has not said `close` yet.
        Status::Lost | Status::Idle => "running".into(),
        _ => state.state_words(),
    };
    // What needs the operator now, in the words the watch has for it: `running, needs input`.
    let words = match state.needs_you().filter(|mark| mark.kind.is_episode()) {
        Some(mark) => format!(
            "{words}, {}",
            tether_model::describe::mark_words(mark.kind, &mark.detail)
        ),
        None => words,
    };
    (words, left_running)
}

/// Whether the broker that `dir`'s `command.json` names runs; `None` while no broker is
/// named (the directory is new, or its launch was refused).
pub fn journaled_broker_alive(dir: &Path) -> Option<bool> {
    let file: CommandFile =
        serde_json::from_slice(&read_metadata(&dir.join(COMMAND_FILE)).ok()?).ok()?;
    // An ended run's broker is not looked for in another PID namespace: it is gone or going.
    let broker = match fs::symlink_metadata(dir.join(RESULT_FILE)) {
        Ok(_) => file.broker?,
        Err(_) => tether_os::procfs::journaled_broker(&file)?,
    };
    Some(broker_alive(&broker))
}

/// The directory of the session named `session` under `state_dir`, found as
/// [`live_commands`] finds sessions (a directory listing, no `session.json` read); `None`
/// when there is none.
pub fn session_dir(state_dir: &Path, session: &str) -> Option<PathBuf> {
    session_dirs(&sessions_dir(state_dir))
        .ok()?
        .into_iter()
        .find(|dir| file_name(dir) == session)
}

/// Every command journaled in `session_dir`, ended ones included, with the name it goes by
/// (from its `command.json`, else its directory's): what a target whose name matches no live
/// command is checked against. Reads every `command.json`, so only for a target that failed.
pub fn journaled_commands(session_dir: &Path) -> Vec<(CommandId, String)> {
    let session = file_name(session_dir);
    command_dirs(session_dir)
        .unwrap_or_default()
        .iter()
        .filter_map(|dir| {
            let id = CommandId::parse(&session, &file_name(dir))?;
            let name = tether_os::journal::reader::read_request(dir)
                .map_or_else(|| id.name.clone(), |request| request.name);
            Some((id, name))
        })
        .collect()
}

/// How long after its last command ended `tether watch` still follows a session.
pub const FOLLOW_ENDED_WITHIN_MS: u64 = 60 * 60 * 1000;

/// Whether `tether watch` follows the session in `dir`: it has a live command, or something
/// in it happened in the last [`FOLLOW_ENDED_WITHIN_MS`] (a command ended, one was created,
/// the session itself is new). Newest commands first, so a busy session is told at once.
pub fn session_is_followed(dir: &Path, now_ms: u64) -> bool {
    let recent = |path: &Path| {
        fs::symlink_metadata(path)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .is_some_and(|t| now_ms.saturating_sub(t.as_millis() as u64) < FOLLOW_ENDED_WITHIN_MS)
    };
    if recent(dir) {
        return true;
    }
    command_dirs(dir)
        .unwrap_or_default()
        .iter()
        .rev()
        .any(|command| {
            let result = command.join(RESULT_FILE);
            if fs::symlink_metadata(&result).is_ok() {
                return recent(&result);
            }
            journaled_broker_alive(command) == Some(true) || recent(&command.join(EVENTS_FILE))
        })
}

/// The events at the start and at the end of a log (all of a short one), in order.
pub fn log_window(path: &Path) -> Vec<Event> {
    let Ok(mut file) = open_regular(path) else {
        return Vec::new();
    };
    let len = file.metadata().map_or(0, |m| m.len());
    let mut head = Vec::new();
    let _ = (&mut file).take(LOG_WINDOW).read_to_end(&mut head);
    let mut events = parse_lines(&head, false);
    if len > LOG_WINDOW {
        let start = (len - LOG_WINDOW).max(LOG_WINDOW);
        let mut tail = Vec::new();
        if file.seek(SeekFrom::Start(start)).is_ok() {
            // The window only, however much the log has grown since its size was taken.
            let _ = (&mut file).take(LOG_WINDOW).read_to_end(&mut tail);
        }
        events.extend(parse_lines(&tail, start > LOG_WINDOW));
    }
    events
}

/// Complete event lines in `bytes`; `cut_start` says the first line may be a fragment.
fn parse_lines(bytes: &[u8], cut_start: bool) -> Vec<Event> {
    // An unterminated last line stays in the splitter: it may be half written.
    let frames = LineSplitter::new(MAX_LINE).push(bytes);
    frames
        .into_iter()
        .skip(usize::from(cut_start))
        .filter_map(|frame| match frame {
            Frame::Line(line) => serde_json::from_slice(&line).ok(),
            Frame::TooLong { .. } => None,
        })
        .collect()
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_window_skips_its_first_fragment() {
        let line = r#"{"ts_ms":1,"mono_us":2,"kind":"pong"}"#;
        let bytes = format!("{}\n{line}\n{line}\npartial", &line[5..]);
        assert_eq!(parse_lines(bytes.as_bytes(), true).len(), 2);
        let bytes = format!("{line}\n{line}\n{{\"ts");
        assert_eq!(parse_lines(bytes.as_bytes(), false).len(), 2);
    }

    #[test]
    fn this_process_is_alive_only_with_its_own_start_time() {
        let me = procfs::read_stat(std::process::id() as i32).unwrap();
        let mut identity = BrokerIdentity {
            pid: me.pid,
            start_ticks: me.start_ticks,
        };
        assert!(broker_alive(&identity));
        identity.start_ticks += 1;
        assert!(!broker_alive(&identity), "a reused pid is not the broker");
    }
}
