//! The follower's loop on a recorded session, in this process, with a fake sink: what
//! `--once` sends, what a restart sends again, what a dead endpoint leaves.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::machine::Limits;
use super::{FollowOptions, Item, Sent, Sink, follow};
use crate::testing::copy_dir;

const ENDPOINT: &str = "http://127.0.0.1:9/v1/traces";

/// Records what it is given and answers what `answer` makes.
struct FakeSink {
    got: Arc<Mutex<Vec<String>>>,
    answer: fn() -> Sent,
}

impl Sink for FakeSink {
    fn send(&mut self, items: &[Item]) -> Sent {
        let mut got = self.got.lock().unwrap();
        for item in items {
            got.push(match item {
                Item::Command {
                    command,
                    root: false,
                    ..
                } => command.id.dir_name(),
                Item::Command { command, .. } => format!("root {}", command.id.dir_name()),
                Item::Session(root) => format!("session of {}", root.commands),
            });
        }
        (self.answer)()
    }
}

fn state_with_fixture() -> tempfile::TempDir {
    let state = tether_os::testing::private_tempdir();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/every-kind");
    copy_dir(&fixture, &state.path().join("sessions/every-kind"));
    state
}

fn once(state: &Path, answer: fn() -> Sent) -> (i32, Vec<String>) {
    let got = Arc::new(Mutex::new(Vec::new()));
    let sink = FakeSink {
        got: Arc::clone(&got),
        answer,
    };
    let options = FollowOptions {
        state: state.to_path_buf(),
        endpoint: ENDPOINT.into(),
        once: true,
        limits: Limits {
            first_backoff: Duration::from_millis(1),
            max_backoff: Duration::from_millis(4),
            ..Limits::default()
        },
    };
    let code = follow(options, Box::new(sink));
    let got = got.lock().unwrap().clone();
    (code, got)
}

/// A follower that runs until told to stop.
fn live(state: &Path) -> FollowOptions {
    FollowOptions {
        state: state.to_path_buf(),
        endpoint: ENDPOINT.into(),
        once: false,
        limits: Limits::default(),
    }
}

fn accepted() -> Sent {
    Sent::Accepted {
        rejected: 0,
        message: None,
    }
}

#[test]
fn once_sends_every_command_and_the_session_then_a_restart_sends_nothing() {
    let state = state_with_fixture();
    let (code, got) = once(state.path(), accepted);
    assert_eq!(code, 0);
    let mut expected: Vec<String> = [
        "01-ok",
        "02-fail",
        "03-tree",
        "04-killed",
        "05-interrupted",
        "06-orphaned",
        "07-capped",
        "08-missing",
        "09-pty",
        "10-crashed",
        "11-runaway",
    ]
    .map(String::from)
    .to_vec();
    expected.push("session of 11".into());
    assert_eq!(got, expected);
    let (code, again) = once(state.path(), accepted);
    assert_eq!(
        (code, again),
        (0, Vec::new()),
        "the cursor says all was sent"
    );
    let status = std::fs::read_to_string(
        state
            .path()
            .join("export/otlp")
            .join(super::cursor::endpoint_key(ENDPOINT))
            .join("status.json"),
    )
    .unwrap();
    assert!(status.contains("\"backlog\": 0"), "{status}");
}

#[test]
fn once_against_a_dead_endpoint_fails_and_keeps_everything_for_the_next_run() {
    let state = state_with_fixture();
    let down = || Sent::Retry {
        after: None,
        why: "connection refused".into(),
    };
    let (code, tries) = once(state.path(), down);
    assert_eq!(code, 1);
    // The same batch, tried four times.
    assert_eq!(tries.len(), 4 * 12);
    let (code, got) = once(state.path(), accepted);
    assert_eq!((code, got.len()), (0, 12));
}

#[test]
fn a_second_follower_of_the_same_endpoint_is_refused() {
    let state = state_with_fixture();
    let dir = super::cursor::CursorDir::open(state.path(), &super::cursor::endpoint_key(ENDPOINT))
        .unwrap();
    let _held = super::lock::take(&dir).unwrap();
    let (code, got) = once(state.path(), accepted);
    assert_eq!((code, got.len()), (2, 0));
}

#[test]
fn a_live_follower_sends_what_appears_and_stops_when_told() {
    let state = state_with_fixture();
    assert_eq!(once(state.path(), accepted).0, 0);
    let got = Arc::new(Mutex::new(Vec::new()));
    let sink = FakeSink {
        got: Arc::clone(&got),
        answer: accepted,
    };
    let options = live(state.path());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let follower = std::thread::spawn(move || {
        super::run::follow_until(options, Box::new(sink), async {
            let _ = stopped.await;
        })
    });
    let fixture = state.path().join("sessions/every-kind");
    let sent = |name: &str| got.lock().unwrap().iter().any(|g| g == name);
    // A session appears whole (made aside, renamed in), then a command in it.
    let aside = state.path().join(".new");
    copy_dir(&fixture.join("01-ok"), &aside.join("01-ok"));
    let wait = |name: &str| {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while !sent(name) {
            assert!(std::time::Instant::now() < deadline, "{name} never sent");
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    // The follower may not watch yet: the session is made until it is seen.
    std::fs::rename(&aside, state.path().join("sessions/live")).unwrap();
    wait("01-ok");
    copy_dir(&fixture.join("02-fail"), &state.path().join(".cmd"));
    std::fs::rename(
        state.path().join(".cmd"),
        state.path().join("sessions/live/02-fail"),
    )
    .unwrap();
    wait("02-fail");
    stop.send(()).unwrap();
    assert_eq!(follower.join().unwrap(), 0);
    let got = got.lock().unwrap().clone();
    // The new session's root goes with its command: the fixture's command ended long
    // before session_quiet ago.
    assert_eq!(
        got,
        ["01-ok", "session of 1", "02-fail"],
        "each once, the old session not again"
    );
    let dir = super::cursor::CursorDir::open(state.path(), &super::cursor::endpoint_key(ENDPOINT))
        .unwrap();
    assert_eq!(dir.load("live").0.sent_below, 3);
}

#[test]
fn a_pruned_session_loses_its_cursor() {
    let state = state_with_fixture();
    assert_eq!(once(state.path(), accepted).0, 0);
    let cursors = state
        .path()
        .join("export/otlp")
        .join(super::cursor::endpoint_key(ENDPOINT));
    assert!(cursors.join("every-kind.cursor").exists());
    std::fs::remove_file(cursors.join("status.json")).unwrap();
    let options = live(state.path());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let got = Arc::new(Mutex::new(Vec::new()));
    let sink = FakeSink {
        got: Arc::clone(&got),
        answer: accepted,
    };
    let follower = std::thread::spawn(move || {
        super::run::follow_until(options, Box::new(sink), async {
            let _ = stopped.await;
        })
    });
    // The follower writes its status once it watches.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !cursors.join("status.json").exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the follower never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // Pruned as `tether prune` does: renamed aside, then removed.
    let sessions = state.path().join("sessions");
    std::fs::rename(
        sessions.join("every-kind"),
        sessions.join(".pruning-every-kind-1"),
    )
    .unwrap();
    while cursors.join("every-kind.cursor").exists() {
        assert!(std::time::Instant::now() < deadline, "the cursor stays");
        std::thread::sleep(Duration::from_millis(20));
    }
    stop.send(()).unwrap();
    assert_eq!(follower.join().unwrap(), 0);
}

/// A command's span carries the launcher's give-up on its run, never a word of the moment
/// (a restart planned); a session's root, what the launcher never started. A launcher
/// journal that cannot be read is said once.
#[test]
fn spans_carry_the_launchers_give_up_and_never_started() {
    use super::machine::Planned;
    use crate::model::{CommandState, Plan};
    use crate::testing::{private_dir, write_private};
    use std::collections::HashSet;
    let state = tether_os::testing::private_tempdir();
    let session = state.path().join("sessions/stack");
    let (first, last) = (session.join("01-worker"), session.join("02-worker"));
    private_dir(&first);
    private_dir(&last);
    let line = |ts: u64, name: &str, dir: Option<&Path>, plan: Option<Plan>| {
        let mut row = CommandState::new(crate::config::CommandConfig::new(
            name,
            crate::protocol::CommandSpec::Shell(format!("run {name}")),
        ));
        row.journal_dir = dir.map(Path::to_path_buf);
        let line = crate::model::plan::line(ts, &row, plan.as_ref(), dir.is_none());
        serde_json::to_string(&line).unwrap() + "\n"
    };
    let restarting = Plan::Restarting { at_ms: 50, run: 2 };
    let lines = line(10, "web", None, Some(Plan::Blocked("db: exit 1".into())))
        + &line(20, "worker", Some(&first), Some(restarting))
        + &line(50, "worker", Some(&last), None)
        + &line(
            90,
            "worker",
            Some(&last),
            Some(Plan::GaveUp { restarts: 1 }),
        );
    let launcher = session.join("launcher.jsonl");
    write_private(&launcher, lines);
    let command = |dir: &Path| Planned::Command {
        session: "stack".into(),
        number: 1,
        dir: dir.to_path_buf(),
        root: false,
    };
    let root = super::SessionRoot {
        id: "stack".into(),
        started_ms: 0,
        ended_ms: 100,
        commands: 2,
        failed: 1,
        never_ran: Vec::new(),
    };
    let batch = vec![
        command(&first),
        command(&last),
        Planned::Session {
            root: root.clone(),
            dir: session.clone(),
        },
    ];
    let said = Mutex::new(HashSet::new());
    let items = super::run::items_of(batch, &said);
    let plans: Vec<_> = (items.iter())
        .filter_map(|item| match item {
            Item::Command { command, .. } => Some(command.state.plan.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(plans, [None, Some(Plan::GaveUp { restarts: 1 })]);
    let Some(Item::Session(sent)) = items.last() else {
        panic!("no root")
    };
    assert_eq!(sent.never_ran.len(), 1, "{:?}", sent.never_ran);
    assert_eq!(sent.never_ran[0].name, "web");
    assert!(sent.never_ran[0].blocked);
    assert_eq!(sent.never_ran[0].words, "not started: db: exit 1");

    // Unreadable (a directory in its place): nothing of it, said once.
    std::fs::remove_file(&launcher).unwrap();
    private_dir(&launcher);
    let again = || {
        vec![Planned::Session {
            root: root.clone(),
            dir: session.clone(),
        }]
    };
    let items = super::run::items_of(again(), &said);
    assert!(matches!(&items[..], [Item::Session(r)] if r.never_ran.is_empty()));
    assert!(said.lock().unwrap().contains(&session));
}
