//! What the list, the status bar and the timeline show of the moments that need the
//! operator (`attention` events), over the checked-in session `tests/fixtures/every-kind`,
//! whose `02-fail` has a `needs_input` episode and then a `failed` mark; drawn by the real
//! `App` into a fixed-size TestBackend.

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
use tether::model::{Mode, Model};
use tether::protocol::fixtures::event;
use tether::protocol::{AttentionKind, EventKind};

/// `11-runaway`, stopped by its CPU budget: the latest attention of the fixture.
const RUNAWAY: usize = 10;

fn open(dir: &Path) -> Model {
    let record = SessionRecord::load(dir).expect("the fixture loads");
    let mut model = model_from_session(&record);
    model.mode = Mode::Recorded(Some(Box::new(Recording::from_session(record))));
    model
}

/// The fixture as a watch lists it: its commands' journals, live ones signalled through
/// their sockets (here none is live), no time cursor.
fn watched() -> Model {
    let mut model = open(&every_kind_fixture());
    model.mode = Mode::Watched;
    model
}

fn app_of(model: Model, actions: &[Action]) -> App {
    let end = frozen_at(&model, 0);
    let mut app = App::new(model);
    let size = Rect::new(0, 0, 120, 36);
    app.prepare(size, end);
    for action in actions {
        app.handle(action.clone());
        app.prepare(size, end);
    }
    app
}

fn draw(app: &App) -> String {
    let mut terminal = Terminal::new(TestBackend::new(120, 36)).unwrap();
    terminal
        .draw(|frame| tether::ui::draw(frame, app.shown(), &app.view, &app.content, &app.bindings))
        .unwrap();
    tether::ui::buffer_text(terminal.backend().buffer())
}

fn status_line(screen: &str) -> &str {
    screen.lines().last().unwrap_or_default()
}

/// The list's rows: the lines of the left pane that hold a command.
fn list_rows(screen: &str) -> Vec<&str> {
    screen
        .lines()
        .skip(3)
        .take_while(|l| !l.starts_with('┗') && !l.starts_with('╰'))
        .filter(|l| l.contains('#'))
        .collect()
}

#[test]
fn the_needs_you_filter_lists_the_failed_mark_and_the_status_bar_names_it() {
    let app = app_of(watched(), &[]);
    let all = draw(&app);
    assert!(
        status_line(&all).starts_with(" every-kind/11 runaway: over budget "),
        "{all}"
    );
    // The list zoomed, so that it has every column.
    let mut filters = vec![Action::Zoom];
    filters.extend(vec![Action::CycleFilter; 3]);
    let app = app_of(watched(), &filters);
    let filtered = draw(&app);
    assert!(
        filtered.contains("Commands: needs you 2 of 11"),
        "{filtered}"
    );
    let rows = list_rows(&filtered);
    assert_eq!(rows.len(), 2, "{filtered}");
    assert!(rows[0].contains("fail"), "{rows:?}");
    assert!(rows[1].contains("runaway"), "{rows:?}");
    insta::assert_snapshot!(filtered);
}

#[test]
fn g_in_a_watch_selects_the_latest_attention_and_says_how_to_stop_it() {
    // The ended session opens at its last command, the runaway: from the top, `g` goes to it.
    let app = app_of(watched(), &[Action::Top, Action::GoToAttention]);
    assert_eq!(app.view.selected, RUNAWAY);
    let screen = draw(&app);
    let status = status_line(&screen);
    assert!(
        status.contains("every-kind/11 runaway: over budget (max_cpu) after 504ms · "),
        "{status}"
    );
    insta::assert_snapshot!(screen);
    // The failed command's timeline, zoomed, has the episode, its end and the failure.
    let timeline = [Action::Top, Action::Down, Action::FocusPrev, Action::Zoom];
    let screen = draw(&app_of(watched(), &timeline));
    for words in [
        "needs input: sh read(0) blocked on a pipe",
        "needs input no longer",
        "failed: exit 3",
    ] {
        assert!(screen.contains(words), "{words}: {screen}");
    }
}

/// `read x` under `quiet_after = "4s"`: `needs_input` at 3.0 s, then `quiet` at 4.1 s, both
/// standing. Every view names the wait for input, the more pressing, though quiet came
/// later: the list's badge, the status bar, and `g`'s line.
#[test]
fn a_wait_for_input_that_fell_quiet_needs_input_in_every_view() {
    let mut model = watched();
    let asking = &mut model.commands[8];
    asking.status = tether::model::Status::Running;
    asking.ended_ms = None;
    let t0 = asking.started_ms.unwrap();
    for (after, attention, detail) in [
        (
            3_000,
            AttentionKind::NeedsInput,
            "sh read(0) blocked on a terminal",
        ),
        (
            4_100,
            AttentionKind::Quiet,
            "no output for 4.1s, no CPU used",
        ),
    ] {
        asking.apply(&event(
            t0 + after,
            EventKind::Attention {
                attention,
                detail: detail.into(),
            },
        ));
    }
    // The watch selects it (the newest running); a first `g` stays on it, the most
    // urgent, and names it; `g` again goes on to the two failures, then round to it.
    let app = app_of(model, &vec![Action::GoToAttention; 4]);
    assert_eq!(app.view.selected, 8, "{:?}", app.view.message);
    let said = app.view.message.clone().unwrap_or_default();
    assert!(
        said.starts_with("every-kind/09 pty: needs input (sh read(0) blocked"),
        "{said}"
    );
    let screen = draw(&app);
    let row = (screen.lines())
        .find(|l| l.starts_with('┃') && l.contains(" pty "))
        .unwrap_or_else(|| panic!("no row for pty: {screen}"));
    // Its badge, cut to the narrow column.
    assert!(row.contains("needs inp"), "{row}");
    assert!(!row.contains("quiet"), "{row}");
    let status = status_line(&screen);
    assert!(
        status.starts_with(" every-kind/09 pty: needs input "),
        "{status}"
    );
}

/// The screen of the finished recording with the time cursor at `at_ms` from its start
/// (moved there by `]`, which stops at every moment on the way).
fn at_moment(at_ms: u64) -> String {
    let model = open(&every_kind_fixture());
    let (t0, r) = (model.started_ms, model.mode.recording().unwrap());
    let mut actions = vec![Action::Zoom, Action::TimeFirst];
    let mut at = r.first();
    while at.is_some_and(|t| t < t0 + at_ms) {
        at = r.next_event(at);
        actions.push(Action::TimeNextEvent);
    }
    assert_eq!(at, Some(t0 + at_ms), "{at_ms} is a moment of the fixture");
    draw(&app_of(model, &actions))
}

#[test]
fn an_episode_shows_as_a_badge_while_it_lasts() {
    // The episode began at +0:00.855 and ended at +0:00.906, when the command wrote again;
    // `{ }` stop at it, as at what else changed how a run went.
    let model = open(&every_kind_fixture());
    let (t0, r) = (model.started_ms, model.mode.recording().unwrap());
    assert_eq!(r.next_notable(Some(t0 + 804)), Some(t0 + 855));
    let during = at_moment(855);
    assert!(during.contains("Commands at +0:00.855"), "{during}");
    let row = during.lines().find(|l| l.contains("#2 ")).expect("row #2");
    assert!(row.contains("needs input"), "{during}");
    let after = at_moment(906);
    let row = after.lines().find(|l| l.contains("#2 ")).expect("row #2");
    assert!(!row.contains("needs input"), "{after}");
    insta::assert_snapshot!(format!("{during}\n{after}"));
}

/// The watch's help names `g` for what needs you most and Home for the top, and still fits
/// the smallest terminal; the TUI's keeps `g` for the top.
#[test]
fn the_help_of_a_watch_names_g_for_the_latest_attention() {
    let app = app_of(watched(), &[Action::Help]);
    let mut terminal = Terminal::new(TestBackend::new(80, 24)).unwrap();
    terminal
        .draw(|frame| tether::ui::draw(frame, app.shown(), &app.view, &app.content, &app.bindings))
        .unwrap();
    let buffer = terminal.backend().buffer();
    let screen: String = (0..24)
        .map(|y| {
            let row: String = (0..80).map(|x| buffer[(x, y)].symbol()).collect();
            row + "\n"
        })
        .collect();
    assert!(
        screen.contains("g       go to what needs you most"),
        "{screen}"
    );
    assert!(screen.contains("Home    go to the top"), "{screen}");
    assert!(screen.contains("needs you"), "the filter's words: {screen}");
    assert!(screen.contains("closes this help"), "it fits: {screen}");
}

/// A watch the operator took from following says what is listed below the screen and how to
/// follow again; following, or with nothing below, it says nothing.
#[test]
fn a_watch_not_following_says_what_is_below() {
    let long = || {
        let mut model = watched();
        let first = model.commands[0].clone();
        let session = first.journal_dir.as_deref().and_then(|d| d.parent());
        let session = session.unwrap().to_path_buf();
        for n in 20..50 {
            let mut more = first.clone();
            more.journal_dir = Some(session.join(format!("{n}-more")));
            model.commands.push(more);
        }
        model
    };
    let following = draw(&app_of(long(), &[]));
    assert!(!following.contains("End: follow"), "{following}");
    let moved = draw(&app_of(long(), &[Action::Top]));
    let bottom = (moved.lines())
        .find(|l| l.contains("End: follow"))
        .unwrap_or_else(|| panic!("{moved}"));
    assert!(bottom.contains("more · End: follow"), "{bottom}");
    let again = draw(&app_of(long(), &[Action::Top, Action::Bottom]));
    assert!(!again.contains("End: follow"), "{again}");
    // By CPU the followed command is listed first: Home follows there.
    let by_cpu = draw(&app_of(long(), &[Action::ToggleSort, Action::Down]));
    assert!(by_cpu.contains("more · Home: follow"), "{by_cpu}");
}
