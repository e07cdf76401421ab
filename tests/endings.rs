//! One word for one ending in every view: the checked-in session `tests/fixtures/every-kind`
//! (an exit 0, an exit 3, a watchdog's kill, an operator's SIGINT, a parent lost, a command
//! that could not start, a broker lost...) read by the TUI's list and timeline (as `tether
//! open` draws them), `tether sessions --long`, the status bar and `tether export --format
//! text` (its table and its sections): each names each command's ending with the same
//! words, those of `model::ending`.

use crate::common;

use std::fs;
use std::os::unix::fs::PermissionsExt;

use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::layout::Rect;

use common::{TestEnv, copy_dir, every_kind_fixture, run_to_end};
use tether::app::App;
use tether::app::action::Action;
use tether::journal::SessionRecord;
use tether::model::recording::Recording;
use tether::model::replay::{frozen_at, model_from_session};
use tether::model::{Mode, Model};

/// The words each of the fixture's commands ended with, as `model::ending` names them.
const ENDINGS: [(&str, &str, &str); 11] = [
    ("01-ok", "exit 0", "exit 0"),
    ("02-fail", "exit 3", "exit 3"),
    ("03-tree", "exit 0", "exit 0"),
    ("04-killed", "timed out (SIGKILL)", "timed out"),
    ("05-interrupted", "stopped (SIGINT)", "stopped"),
    ("06-orphaned", "parent lost (SIGTERM)", "parent lost"),
    ("07-capped", "exit 0", "exit 0"),
    ("08-missing", "failed to start", "failed to start"),
    ("09-pty", "exit 0", "exit 0"),
    ("10-crashed", "lost", "lost"),
    ("11-runaway", "over budget (max_cpu)", "over budget"),
];

fn open() -> Model {
    let record = SessionRecord::load(&every_kind_fixture()).expect("the fixture loads");
    let mut model = model_from_session(&record);
    model.mode = Mode::Recorded(Some(Box::new(Recording::from_session(record))));
    model
}

/// The screen of `tether open` with command `index` selected, at its end.
fn screen_with(index: usize) -> String {
    let model = open();
    let end = frozen_at(&model, 0);
    let mut app = App::new(model);
    let size = Rect::new(0, 0, 160, 48);
    app.prepare(size, end);
    for _ in 0..index {
        app.handle(Action::Down);
        app.prepare(size, end);
    }
    let mut terminal = Terminal::new(TestBackend::new(size.width, size.height)).unwrap();
    terminal
        .draw(|frame| tether::ui::draw(frame, app.shown(), &app.view, &app.content, &app.bindings))
        .unwrap();
    tether::ui::buffer_text(terminal.backend().buffer())
}

#[test]
fn the_model_names_each_ending_as_the_table_says() {
    let model = open();
    for (command, (id, words, short)) in model.commands.iter().zip(ENDINGS) {
        assert_eq!(
            (command.state_words(), command.short_state_words()),
            (words.to_string(), short.to_string()),
            "{id}"
        );
    }
}

#[test]
fn the_list_and_the_timeline_say_the_same_words() {
    for (index, (id, words, short)) in ENDINGS.iter().enumerate() {
        let screen = screen_with(index);
        let name = id.split_once('-').unwrap().1;
        let row = screen
            .lines()
            .find(|l| l.contains('▶') && l.contains(&format!(" {name} ")))
            .unwrap_or_else(|| panic!("no selected row for {id}:\n{screen}"));
        assert!(row.contains(&format!(" {short} ")), "{id}: {row}");
        // The timeline's `exit` row says how the run ended (a plain exit as `exit code N`).
        if words.contains('(') {
            assert!(
                screen.contains(&format!(" exit {words}")),
                "{id}: no `exit {words}` on the timeline:\n{screen}"
            );
        }
    }
}

#[test]
fn sessions_and_the_text_export_say_the_same_words() {
    let env = TestEnv::new("endings");
    let state = env.state_dir();
    let dir = state.join("sessions");
    fs::create_dir_all(&dir).unwrap();
    for d in [&state, &dir] {
        fs::set_permissions(d, fs::Permissions::from_mode(0o700)).unwrap();
    }
    copy_dir(&every_kind_fixture(), &dir.join("every-kind"));
    let run = |args: &[&str]| {
        let mut command = env.tether(args);
        command.env("COLUMNS", "200");
        let out = run_to_end(&env, command, &format!("tether {args:?}"));
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let long = run(&["sessions", "--long", "every-kind"]);
    let text = run(&["export", "every-kind", "--format", "text"]);
    for (id, words, _) in ENDINGS {
        let row = long
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{id} ")))
            .unwrap_or_else(|| panic!("no row for {id}:\n{long}"));
        assert!(row.contains(&format!("  {words}")), "{id}: {row}");
        let section = text
            .split(&format!("== {id} ("))
            .nth(1)
            .unwrap_or_else(|| panic!("no section for {id}:\n{text}"));
        let ended = section
            .lines()
            .find_map(|l| l.trim_start().strip_prefix("ended: "))
            .unwrap_or_else(|| panic!("no `ended:` for {id}"));
        assert!(ended.starts_with(words), "{id}: the export says `{ended}`");
        // Its row of the summary table above the sections says them too.
        let table = text.split("\n== ").next().unwrap_or_default();
        let row = table
            .lines()
            .find(|l| l.starts_with(&format!("{id} ")))
            .unwrap_or_else(|| panic!("no table row for {id}:\n{table}"));
        assert!(row.contains(&format!("  {words}  ")), "{id}: {row}");
    }
    // The raw status beside the words, which not every ending carries (`finished`, `lost`).
    let header = text.lines().find(|l| l.starts_with("COMMAND")).unwrap();
    assert!(
        header.contains(" STATE ") && header.contains(" EXIT "),
        "{header}"
    );
    // The session's counts put each ending where its words say.
    let sessions = run(&["sessions"]);
    assert!(
        sessions.contains("11 cmds: 4 ok, 3 failed, 3 killed, 1 stopped"),
        "{sessions}"
    );
    env.finish();
}
