//! The time cursor of `tether open` over the checked-in session `tests/fixtures/every-kind`
//! (every kind of event; see `tests/fixtures/README.md`): the state at a moment, and the
//! screens at several moments, drawn by the real `App` into a fixed-size TestBackend. The
//! fixture's times and pids are fixed, so nothing needs filtering.

use crate::common;

use std::path::Path;

use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::layout::Rect;

use common::every_kind_fixture;
use tether::app::App;
use tether::app::action::Action;
use tether::journal::SessionRecord;
use tether::model::recording::Recording;
use tether::model::replay::{frozen_at, model_from_session};
use tether::model::{Mode, Model, Status};
use tether::protocol::{Event, EventKind, Stream};

/// The session's start: 2026-01-02T03:04:05Z.
const T0: u64 = 1_767_323_045_000;
const OK: usize = 0;
const KILLED: usize = 3;
const CRASHED: usize = 9;

/// What `tether open` builds: the model of the whole journal, and its recording.
fn open(dir: &Path) -> Model {
    let record = SessionRecord::load(dir).expect("the fixture loads");
    let mut model = model_from_session(&record);
    model.mode = Mode::Recorded(Some(Box::new(Recording::from_session(record))));
    model
}

fn recording() -> Recording {
    Recording::from_session(SessionRecord::load(&every_kind_fixture()).expect("the fixture loads"))
}

#[test]
fn the_state_at_a_moment_over_every_kind_of_event() {
    let r = recording();
    let pids = |at: u64, command: usize| -> Vec<i32> {
        r.commands_at(at)[command]
            .tree
            .iter()
            .map(|p| p.pid)
            .collect()
    };
    // The tree is the last snapshot at or before the moment.
    assert_eq!(pids(T0 + 4_256, KILLED), [8490, 8494, 8495]);
    assert_eq!(pids(T0 + 4_257 - 1, KILLED), [8490, 8494, 8495]);
    assert_eq!(pids(T0 + 4_257, KILLED), [8490, 8494, 8552]);
    assert_eq!(pids(T0 + 4_509, KILLED), Vec::<i32>::new());

    // Each stream ends where the last output event at or before the moment ended.
    let bytes = |at: u64, command: usize| r.commands_at(at)[command].bytes;
    assert_eq!(bytes(T0 + 104, OK), [0, 0]);
    assert_eq!(bytes(T0 + 105, OK), [17, 0]);
    assert_eq!(bytes(T0 + 309, OK), [17, 25]);
    assert_eq!(bytes(T0 + 310, OK), [34, 25]);
    assert_eq!(bytes(T0 + 521, OK), [39, 44]);

    // Each command's state and badges as they were.
    let killed = |at: u64| r.commands_at(T0 + at).swap_remove(KILLED);
    assert_eq!(killed(1_000).status, Status::Idle, "not started yet");
    assert_eq!(killed(3_203).status, Status::Running);
    let timed_out = killed(4_204);
    assert!(timed_out.response_timeout && !timed_out.hard_killed);
    assert_eq!(timed_out.status, Status::Running);
    assert_eq!(killed(4_207).status, Status::Stopping, "TERM then CONT");
    assert!(killed(4_508).hard_killed);
    let ended = killed(4_509);
    assert_eq!(ended.status.label(), "SIGKILL");
    assert_eq!(ended.escapees_reaped, 1);

    // A journal cut short: at its last event the run was still running; only the end
    // (the whole journal, with no broker left) calls it lost.
    let crashed = r
        .commands_at(r.last().expect("events"))
        .swap_remove(CRASHED);
    assert_eq!(crashed.status, Status::Running);
    assert_eq!(
        open(&every_kind_fixture()).commands[CRASHED].status,
        Status::Lost
    );

    // The moments: the first event, the last, and every notable kind is a stop for `{ }`.
    assert_eq!(r.first(), Some(T0 + 100));
    // ok's exit 0 is not one, its final drain at the same moment is.
    assert_eq!(r.next_notable(Some(T0 + 100)), Some(T0 + 520), "ok's drain");
    assert_eq!(
        r.next_notable(Some(T0 + 2_809 - 1)),
        Some(T0 + 2_912),
        "tree's exit 0 passed by, to the signal after it"
    );
    assert_eq!(
        r.next_notable(Some(T0 + 4_204 - 1)),
        Some(T0 + 4_204),
        "timeout"
    );
    assert_eq!(
        r.next_notable(Some(T0 + 4_249)),
        Some(T0 + 4_508),
        "hard kill"
    );
}

/// The screen of the fixture opened with `actions` applied, at 120×36.
fn screen_after(actions: &[Action]) -> String {
    screen_of(open(&every_kind_fixture()), actions)
}

fn screen_of(model: Model, actions: &[Action]) -> String {
    let end = frozen_at(&model, 0);
    let mut app = App::new(model);
    let size = Rect::new(0, 0, 120, 36);
    app.prepare(size, end);
    for action in actions {
        app.handle(action.clone());
        app.prepare(size, end);
    }
    draw(&app, size)
}

fn draw(app: &App, size: Rect) -> String {
    let mut terminal = Terminal::new(TestBackend::new(size.width, size.height)).unwrap();
    terminal
        .draw(|frame| tether::ui::draw(frame, app.shown(), &app.view, &app.content, &app.bindings))
        .unwrap();
    tether::ui::buffer_text(terminal.backend().buffer())
}

fn status_line(screen: &str) -> &str {
    screen.lines().last().unwrap_or_default()
}

/// Moves the cursor by `]` until it reaches `at_ms` (it stops at every moment on the way).
fn to(at_ms: u64) -> Vec<Action> {
    moves_to(&recording(), at_ms)
}

/// [`to`] over the recording `r`.
fn moves_to(r: &Recording, at_ms: u64) -> Vec<Action> {
    let mut actions = vec![Action::TimeFirst];
    let mut at = r.first();
    while at.is_some_and(|t| t < at_ms) {
        at = r.next_event(at);
        actions.push(Action::TimeNextEvent);
    }
    assert_eq!(at, Some(at_ms), "{at_ms} is a moment of the fixture");
    actions
}

fn select(command: usize, mut actions: Vec<Action>) -> Vec<Action> {
    let mut all = vec![Action::Down; command];
    all.append(&mut actions);
    all
}

#[test]
fn cursor_off_shows_the_end() {
    let screen = screen_after(&[]);
    let status = status_line(&screen);
    assert!(!status.contains('⏱'), "{status}");
    assert!(
        status.contains("[ ]  event") && status.contains("step 1s"),
        "{status}"
    );
    assert!(
        screen.contains("┏ Commands 11 · "),
        "no cursor in the list's title"
    );
    insta::assert_snapshot!(screen);
}

#[test]
fn cursor_at_the_first_event() {
    let screen = screen_after(&[Action::TimeFirst]);
    assert!(
        status_line(&screen).contains("⏱ 03:04:05.100 (+0:00.100)  ok broker_started"),
        "{screen}"
    );
    assert!(screen.contains("Commands at +0:00.100"));
    assert!(
        screen.contains("stdout · 0 lines · 0 B"),
        "nothing written yet"
    );
    assert!(screen.contains("▶ +0:00.100 containment cgroup"));
    insta::assert_snapshot!(screen);
}

#[test]
fn cursor_in_the_middle_of_output() {
    let screen = screen_after(&to(T0 + 310));
    // stdout has its first two lines (34 bytes), stderr its first (25 bytes).
    assert!(screen.contains("stdout · 2 lines · 34 B"), "{screen}");
    assert!(screen.contains("compiling 2 of 2") && !screen.contains("│done"));
    assert!(screen.contains("stderr · 1 line · 25 B"), "{screen}");
    assert!(!screen.contains("dead code"));
    insta::assert_snapshot!(screen);
}

#[test]
fn cursor_just_after_a_signal() {
    // The watchdog's stop of `killed` (`stop_started`, then TERM and CONT in the same
    // millisecond), found with `{`, from the kill after it.
    let mut actions = select(KILLED, to(T0 + 4_508));
    actions.push(Action::TimePrevNotable);
    actions.push(Action::TimePrevNotable);
    let screen = screen_after(&actions);
    assert!(status_line(&screen).contains("(+0:04.207)"), "{screen}");
    assert!(screen.contains("stopping"), "{screen}");
    assert!(screen.contains("timeout"), "badges as of then");
    assert!(!screen.contains("killed   SIGKILL"), "{screen}");
    // The second tree snapshot is not yet taken: the first one's sleep is there.
    assert!(screen.contains("8495"), "{screen}");
    insta::assert_snapshot!(screen);
}

#[test]
fn cursor_after_the_exit() {
    let screen = screen_after(&select(KILLED, to(T0 + 4_509)));
    assert!(screen.contains("SIGKILL"), "{screen}");
    assert!(screen.contains("orphan_reaped pid 8494 esc…"), "{screen}");
    assert!(screen.contains("every process seen"), "{screen}");
    // What comes after, dimmed, below the cursor's entry.
    assert!(screen.contains("▶ +0:04.509"), "{screen}");
    insta::assert_snapshot!(screen);
}

/// `05-interrupted`, which the operator's INT ended: at its signal the timeline's dimmed
/// `exit` after the cursor reads as it does at the end (`exit stopped (SIGINT)`, not `exit
/// SIGINT`), and so does the status bar once the cursor is on the exit; the same for the
/// watchdog's stop of `killed` (`timed out (SIGKILL)`).
#[test]
fn an_exit_reads_as_its_run_ended_wherever_the_cursor_is() {
    const INTERRUPTED: usize = 4;
    let before = screen_after(&select(INTERRUPTED, to(T0 + 5_789)));
    assert!(before.contains("exit stopped (SIGINT)"), "{before}");
    assert!(!before.contains("exit SIGINT"), "{before}");
    let at = screen_after(&select(INTERRUPTED, to(T0 + 5_792)));
    let status = status_line(&at);
    assert!(
        status.contains("interrupted exit stopped (SIGINT)"),
        "{status}"
    );
    let killed = screen_after(&select(KILLED, to(T0 + 4_509)));
    let status = status_line(&killed);
    assert!(
        status.contains("killed exit timed out (SIGKILL)"),
        "{status}"
    );
}

#[test]
fn end_leaves_the_cursor_and_shows_the_end_again() {
    let end = screen_after(&[]);
    let back = screen_after(&[Action::TimeFirst, Action::TimeNextEvent, Action::TimeOff]);
    assert_eq!(back, end);
}

/// An output event that ends mid-line: the pane shows that line cut where the event ended,
/// and going back in time cuts the stream again.
#[test]
fn a_line_written_in_two_parts_is_cut_at_the_first() {
    let dir = tempfile::tempdir().unwrap();
    let session = dir.path().join("cut");
    let command = session.join("01-cut");
    std::fs::create_dir_all(&command).unwrap();
    std::fs::write(
        session.join("session.json"),
        r#"{"id":"cut","started_ms":1000}"#,
    )
    .unwrap();
    std::fs::write(command.join("stdout.log"), "first line\nsecond half").unwrap();
    let event = |ms: u64, kind: EventKind| {
        serde_json::to_string(&Event {
            ts_ms: ms,
            mono_us: 0,
            kind,
        })
        .unwrap()
    };
    let output = |ms, offset, len| {
        event(
            ms,
            EventKind::Output {
                stream: Stream::Stdout,
                offset,
                len,
            },
        )
    };
    let lines = [
        output(1_000, 0, 17),
        output(2_000, 17, 6),
        event(
            3_000,
            EventKind::Close {
                stdout_bytes: 23,
                stderr_bytes: 0,
            },
        ),
    ];
    std::fs::write(command.join("events.jsonl"), lines.join("\n") + "\n").unwrap();
    let model = open(&session);
    assert_eq!(model.commands.len(), 1, "the command is found");

    let cut = screen_of(open(&session), &[Action::TimeFirst]);
    assert!(cut.contains("│second"), "{cut}");
    assert!(!cut.contains("second half"), "{cut}");
    // On to the whole line, then back: the index is cut again.
    let again = screen_of(
        open(&session),
        &[
            Action::TimeFirst,
            Action::TimeNextEvent,
            Action::TimePrevEvent,
        ],
    );
    assert_eq!(again, cut);
    let whole = screen_of(open(&session), &[Action::TimeFirst, Action::TimeNextEvent]);
    assert!(whole.contains("second half"), "{whole}");
}

/// The screen view (`v`) of a stream follows the cursor too, back and forth.
#[test]
fn the_screen_view_follows_the_cursor() {
    const PTY: usize = 8;
    let view_stdout = |mut actions: Vec<Action>| {
        let mut all = vec![Action::FocusNext, Action::FocusNext, Action::ToggleScreen];
        all.append(&mut actions);
        select(PTY, all)
    };
    let end = screen_after(&view_stdout(vec![]));
    assert!(end.contains("┃in a terminal"), "{end}");
    // Before the output (it all came at the exit), then the end again, then back.
    let before = screen_after(&view_stdout(vec![Action::TimeFirst]));
    assert!(!before.contains("┃in a terminal"), "{before}");
    // Not begun then, and still selected: the cursor never moves the selection.
    assert!(before.contains("▶ pty "), "{before}");
    assert!(before.contains("idle"), "{before}");
    let back = screen_after(&view_stdout(vec![
        Action::TimeFirst,
        Action::TimeOff,
        Action::TimeFirst,
    ]));
    assert_eq!(back, before);
}

/// At a moment where a command wrote its last output and exited 0 (Claude Code's `ls`, as
/// recorded), the status bar names the exit, not the output, though a clean exit is no stop
/// for `{ }`: at one moment the notable events come first, then an exit.
#[test]
fn the_status_bar_names_a_clean_exit_at_its_moment() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/claude-code/sessions/claude-run");
    let record = SessionRecord::load(&dir).expect("the fixture loads");
    let ls_exit_ms = 1_796_517_928_412;
    let actions = moves_to(&Recording::from_session(record), ls_exit_ms);
    let screen = screen_of(open(&dir), &actions);
    let status = status_line(&screen);
    assert!(status.contains("ls exit code 0"), "{status}");
}
