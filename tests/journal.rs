//! Reading back a journal that a crash cut short.

use crate::common;

use std::fs;

use common::TestEnv;
use common::journal::{kinds, load_complete};
use tether::journal::{CommandRecord, Damage, SessionRecord, list_sessions};

#[test]
fn journal_cut_mid_line_opens_and_reports_the_damage() {
    let env = TestEnv::new("cut_journal");
    let run = env.exec(&[], &["sh", "-c", "echo out; echo err >&2; exit 4"]);
    assert_eq!(run.code(), 4, "stderr: {}", run.stderr_text());
    let dir = env.command_dir();
    let whole = load_complete(&dir);
    let total = whole.events.len();
    assert!(total >= 3, "{:?}", kinds(&whole.events));

    // Cut the last line in the middle, as a crash while writing it would, and lose the result.
    let events_path = dir.join("events.jsonl");
    let bytes = fs::read(&events_path).unwrap();
    assert_eq!(bytes.last(), Some(&b'\n'));
    let last_start = bytes[..bytes.len() - 1]
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    let last_len = bytes.len() - 1 - last_start;
    let cut = last_start + last_len / 2;
    fs::write(&events_path, &bytes[..cut]).unwrap();
    fs::remove_file(dir.join("result.json")).unwrap();

    let record = CommandRecord::load(&dir);
    assert_eq!(
        record.events,
        whole.events[..total - 1],
        "the earlier events load"
    );
    assert!(record.result.is_none());
    assert!(record.request.is_some(), "command.json is intact");
    assert!(!record.damage.is_empty(), "the record is damaged");
    assert!(
        record.damage.contains(&Damage::PartialLastLine {
            bytes: cut - last_start
        }),
        "{:?}",
        record.damage
    );
    assert!(
        record.damage.contains(&Damage::MissingResult),
        "{:?}",
        record.damage
    );
    for damage in &record.damage {
        assert!(!damage.to_string().is_empty());
    }

    let sessions = list_sessions(&env.state_dir().join("sessions")).unwrap();
    assert_eq!(sessions.len(), 1);
    let session = SessionRecord::load(&sessions[0]).expect("the session opens");
    assert!(session.info.is_some(), "session.json is intact");
    assert!(session.damage.is_empty(), "{:?}", session.damage);
    assert_eq!(session.commands.len(), 1);
    let command = &session.commands[0];
    assert_eq!(command.events, record.events);
    assert_eq!(command.damage, record.damage);
    env.finish();
}

#[test]
fn journal_cut_inside_the_first_line_opens_empty() {
    let env = TestEnv::new("cut_first_line");
    let run = env.exec(&[], &["true"]);
    assert_eq!(run.code(), 0, "stderr: {}", run.stderr_text());
    let dir = env.command_dir();
    let events_path = dir.join("events.jsonl");
    let bytes = fs::read(&events_path).unwrap();
    fs::write(&events_path, &bytes[..10]).unwrap();
    fs::remove_file(dir.join("result.json")).unwrap();
    let record = CommandRecord::load(&dir);
    assert!(record.events.is_empty());
    assert!(
        record
            .damage
            .contains(&Damage::PartialLastLine { bytes: 10 })
    );
    assert!(record.damage.contains(&Damage::MissingResult));
    env.finish();
}
