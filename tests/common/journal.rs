//! Reading a command's journal back, and picking events out of it.

use std::fs;
use std::path::{Path, PathBuf};

use tether::journal::{CommandRecord, list_sessions};
use tether::protocol::{Event, EventKind, ExitStatus, LeftoversEnd, Origin, ProcessEntry, Stage};

/// Every `sessions/<id>/<command>/` directory under `state`, sorted.
pub fn command_dirs(state: &Path) -> Vec<PathBuf> {
    let sessions = list_sessions(&state.join("sessions")).unwrap_or_default();
    let mut dirs: Vec<PathBuf> = sessions
        .iter()
        .filter_map(|s| fs::read_dir(s).ok())
        .flatten()
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .collect();
    dirs.sort();
    dirs
}

/// Parses JSON lines into events; every line must be one.
pub fn parse_lines(bytes: &[u8]) -> Vec<Event> {
    bytes
        .split(|&b| b == b'\n')
        .filter(|line| !line.is_empty())
        .map(|line| {
            serde_json::from_slice(line).unwrap_or_else(|err| {
                panic!(
                    "not an event line ({err}): {}",
                    String::from_utf8_lossy(line)
                )
            })
        })
        .collect()
}

/// Loads a finished command's journal and checks it is whole.
pub fn load_complete(dir: &Path) -> CommandRecord {
    let record = CommandRecord::load(dir);
    assert!(
        record.damage.is_empty(),
        "journal {} is damaged: {:?}",
        dir.display(),
        record.damage
    );
    assert!(
        record.request.is_some(),
        "no command.json in {}",
        dir.display()
    );
    record
}

/// The events of a journal as it is now (running or not).
pub fn events_now(dir: &Path) -> Vec<Event> {
    CommandRecord::load(dir).events
}

pub fn read(dir: &Path, file: &str) -> Vec<u8> {
    fs::read(dir.join(file)).unwrap_or_else(|err| panic!("read {file}: {err}"))
}

pub fn kinds(events: &[Event]) -> Vec<&'static str> {
    events.iter().map(|e| e.kind.name()).collect()
}

/// A `signal_sent` event, flattened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sent {
    pub signal: String,
    pub origin: Origin,
    pub targets: Vec<i32>,
}

pub fn signals_sent(events: &[Event]) -> Vec<Sent> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::SignalSent {
                signal,
                origin,
                targets,
                ..
            } => Some(Sent {
                signal: signal.to_string(),
                origin: *origin,
                targets: targets.clone(),
            }),
            _ => None,
        })
        .collect()
}

/// The main command's exit status, from its single `exit` event.
pub fn exit_status(events: &[Event]) -> ExitStatus {
    let exits: Vec<ExitStatus> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Exit { status, .. } => Some(*status),
            _ => None,
        })
        .collect();
    assert_eq!(
        exits.len(),
        1,
        "expected one exit event: {:?}",
        kinds(events)
    );
    exits[0]
}

/// The pid in the `spawned` event.
pub fn spawned_pid(events: &[Event]) -> i32 {
    events
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::Spawned { pid, .. } => Some(*pid),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no spawned event: {:?}", kinds(events)))
}

pub fn broker_pid(events: &[Event]) -> i32 {
    events
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::BrokerStarted { broker_pid, .. } => Some(*broker_pid),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no broker_started event: {:?}", kinds(events)))
}

/// Pids from `orphan_reaped` events.
pub fn orphans_reaped(events: &[Event]) -> Vec<i32> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::OrphanReaped { pid, .. } => Some(*pid),
            _ => None,
        })
        .collect()
}

/// `(stage, code)` of every `broker_failure` event.
pub fn broker_failures(events: &[Event]) -> Vec<(Stage, String)> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::BrokerFailure { stage, code, .. } => Some((*stage, code.clone())),
            _ => None,
        })
        .collect()
}

/// Every process entry of every `tree` event.
pub fn tree_entries(events: &[Event]) -> Vec<ProcessEntry> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Tree { processes } => Some(processes.clone()),
            _ => None,
        })
        .flatten()
        .collect()
}

/// The pid a command printed as `LABEL PID` on a line of its own.
pub fn labelled_pid(output: &[u8], label: &str) -> i32 {
    let text = String::from_utf8_lossy(output);
    text.lines()
        .find_map(|line| line.strip_prefix(label)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no `{label} PID` line in output: {text:?}"))
}

/// A command's session name: its journal directory's parent's.
pub fn session_of(dir: &Path) -> String {
    dir.parent()
        .and_then(Path::file_name)
        .map(|n| n.to_string_lossy().into_owned())
        .expect("a session directory")
}

/// How a command's leftovers ended, and the custodian whose exit ended them.
pub fn leftovers_stopped(events: &[Event]) -> Option<(LeftoversEnd, Option<i32>)> {
    events.iter().find_map(|e| match e.kind {
        EventKind::LeftoversStopped { reason, pid } => Some((reason, pid)),
        _ => None,
    })
}
