use super::*;
use tether_model::CommandState;
use tether_model::Mode;
use tether_protocol::protocol::EventKind;
use tether_protocol::protocol::fixtures::{event, spawned};

pub(super) fn model(recorded: bool, running: bool) -> Model {
    let mut command =
        CommandState::new(CommandConfig::new("job", CommandSpec::Shell("true".into())));
    command.begin_run("/nonexistent".into(), 0);
    for ms in 0..40 {
        command.apply(&event(ms, EventKind::ParentUnresponsive { silent_ms: ms }));
    }
    if running {
        command.apply(&event(50, spawned(7)));
    }
    Model {
        session_id: "s".into(),
        session_dir: "/nonexistent".into(),
        started_ms: 0,
        commands: vec![command],
        mode: if recorded {
            Mode::Recorded(None)
        } else {
            Mode::Live
        },
    }
}

pub(super) fn focused_on(pane: Pane) -> ViewState {
    ViewState {
        focus: pane,
        ..ViewState::default()
    }
}

pub(super) fn geometry() -> Geometry {
    Geometry {
        output_rows: [10, 10],
        tree_rows: 5,
        timeline_rows: 10,
        total_lines: [100, 0],
        output_cols: [20, 20],
        widest: [100, 0],
        tree_processes: vec![None, Some((8, "sleep 1".into()))],
        ..Geometry::default()
    }
}

#[test]
fn timeline_scrolls_back_no_further_than_its_first_entry() {
    let model = model(false, true);
    let mut view = focused_on(Pane::Timeline);
    update(&model, &mut view, &geometry(), Action::Top);
    // 41 entries (40 + spawned), 10 rows: at most 31 back.
    assert_eq!(view.timeline_back, 31);
    update(&model, &mut view, &geometry(), Action::Down);
    assert_eq!(view.timeline_back, 30);
    update(&model, &mut view, &geometry(), Action::Bottom);
    assert_eq!(view.timeline_back, 0);
}

#[test]
fn scrolling_up_pauses_following_and_the_end_resumes_it() {
    let model = model(false, true);
    let mut view = focused_on(Pane::Stdout);
    update(&model, &mut view, &geometry(), Action::Up);
    assert!(!view.outputs[0].follow);
    assert_eq!(view.outputs[0].top, 89);
    update(&model, &mut view, &geometry(), Action::Bottom);
    assert!(view.outputs[0].follow);
}

#[test]
fn a_new_search_starts_afresh_and_paste_fills_the_prompt() {
    let model = model(false, true);
    let mut view = ViewState::default();
    view.outputs[0].matched = Some(4);
    update(&model, &mut view, &geometry(), Action::Search);
    update(
        &model,
        &mut view,
        &geometry(),
        Action::Paste("be\nta".into()),
    );
    assert_eq!(
        view.dialog,
        Some(Dialog::Search {
            stream: Stream::Stdout,
            input: "be ta".into()
        })
    );
    let effects = update(&model, &mut view, &geometry(), Action::Submit);
    assert_eq!(view.outputs[0].matched, None);
    assert_eq!(view.outputs[0].search.as_deref(), Some("be ta"));
    assert_eq!(
        effects,
        [Effect::Search {
            stream: Stream::Stdout,
            forward: false
        }]
    );
}

/// As in less and vim: `/` starts an empty query whatever was searched before, Up recalls
/// the last, Ctrl-U clears what is typed.
#[test]
fn the_search_prompt_starts_empty_recalls_the_last_and_clears() {
    let model = model(false, true);
    let mut view = ViewState::default();
    let act = |view: &mut ViewState, action| update(&model, view, &geometry(), action);
    let typed = |view: &ViewState| match &view.dialog {
        Some(Dialog::Search { input, .. }) => input.clone(),
        other => panic!("no search prompt: {other:?}"),
    };
    act(&mut view, Action::Search);
    for c in "build".chars() {
        act(&mut view, Action::Input(c));
    }
    act(&mut view, Action::Submit);
    assert_eq!(view.outputs[0].search.as_deref(), Some("build"));
    act(&mut view, Action::Search);
    assert_eq!(typed(&view), "");
    act(&mut view, Action::Input('z'));
    assert_eq!(typed(&view), "z");
    act(&mut view, Action::Up);
    assert_eq!(typed(&view), "build");
    act(&mut view, Action::ClearInput);
    assert_eq!(typed(&view), "");
    // Cancelled, the last search still stands for `n`.
    act(&mut view, Action::Cancel);
    assert_eq!(view.outputs[0].search.as_deref(), Some("build"));
}

#[test]
fn signalling_a_process_names_its_command() {
    let model = model(false, true);
    let mut view = ViewState {
        tree_selected: 1,
        ..focused_on(Pane::Tree)
    };
    update(&model, &mut view, &geometry(), Action::SignalProcess);
    update(&model, &mut view, &geometry(), Action::Backspace);
    update(&model, &mut view, &geometry(), Action::Input('M'));
    let effects = update(&model, &mut view, &geometry(), Action::Submit);
    assert_eq!(
        effects,
        [Effect::Send(
            0,
            Request::Signal {
                signal: ProcessSignal::TERM,
                scope: Scope::Pid,
                pid: Some(8),
                origin: None,
            }
        )]
    );
}

#[test]
fn quitting_asks_while_commands_run_except_in_a_recorded_session() {
    let mut view = ViewState::default();
    let effects = update(&model(false, true), &mut view, &geometry(), Action::Quit);
    assert!(effects.is_empty());
    assert_eq!(view.dialog, Some(Dialog::ConfirmQuit { running: 1 }));
    let effects = update(&model(false, true), &mut view, &geometry(), Action::Confirm);
    assert_eq!(effects, [Effect::StopAllAndQuit]);

    let mut view = ViewState::default();
    let effects = update(&model(true, true), &mut view, &geometry(), Action::Quit);
    assert_eq!(effects, [Effect::Quit]);
}

/// A command may end between `q` and the answer: the question then counts what still runs,
/// and once nothing does the TUI quits without waiting for an answer that changes nothing.
#[test]
fn the_quit_question_follows_the_commands_and_goes_when_none_runs() {
    let mut first = model(false, true);
    let second = first.commands[0].clone();
    first.commands.push(second);
    let mut app = crate::app::App::new(first);
    assert!(app.handle(Action::Quit).is_empty());
    assert_eq!(app.view.dialog, Some(Dialog::ConfirmQuit { running: 2 }));
    assert!(!app.settle_quit_question(), "two still run");

    let status = tether_protocol::protocol::ExitStatus {
        code: None,
        signal: Some(15),
        core_dumped: false,
    };
    app.apply_event(0, 1, &event(60, EventKind::Exit { pid: 7, status }));
    assert!(!app.settle_quit_question(), "one still runs");
    assert_eq!(app.view.dialog, Some(Dialog::ConfirmQuit { running: 1 }));

    app.apply_event(1, 1, &event(61, EventKind::Exit { pid: 7, status }));
    assert!(app.settle_quit_question(), "nothing runs: quit");
    assert_eq!(app.view.dialog, None);
    assert!(!app.settle_quit_question(), "asked once");
}

#[test]
fn a_recorded_session_refuses_operator_actions() {
    let model = model(true, true);
    for action in [
        Action::Term,
        Action::Kill,
        Action::Stop,
        Action::Restart,
        Action::NewCommand,
    ] {
        let mut view = ViewState::default();
        let effects = update(&model, &mut view, &geometry(), action);
        assert!(effects.is_empty());
        assert_eq!(view.dialog, None);
        assert_eq!(view.message.as_deref(), Some(READ_ONLY));
    }
}

#[test]
fn a_launched_command_is_named_by_its_program_and_unique() {
    let mut model = model(false, true);
    model.commands[0].config.name = "make".into();
    let mut view = ViewState {
        dialog: Some(Dialog::NewCommand {
            input: "cd sub && make -j2".into(),
        }),
        ..ViewState::default()
    };
    let effects = update(&model, &mut view, &geometry(), Action::Submit);
    assert_eq!(
        effects,
        [Effect::Add(Box::new(CommandConfig::new(
            "make-2",
            CommandSpec::Shell("cd sub && make -j2".into())
        )))]
    );
}

/// Every way of changing the selected command forgets the last one's scrolling, search,
/// process selection and timeline position: keys, and a click on the list.
#[test]
fn another_command_selected_starts_with_a_fresh_view() {
    let mut two = model(false, true);
    two.commands.push(two.commands[0].clone());
    let scrolled = |view: &mut ViewState| {
        view.outputs[0].follow = false;
        view.outputs[0].top = 3;
        view.outputs[1].search = Some("x".into());
        view.tree_selected = 1;
        view.timeline_back = 5;
    };
    let fresh = |view: &ViewState| {
        view.outputs == <[crate::app::view::OutputView; 2]>::default()
            && view.tree_selected == 0
            && view.timeline_back == 0
    };

    let mut view = ViewState::default();
    scrolled(&mut view);
    update(&two, &mut view, &geometry(), Action::Down);
    assert_eq!(view.selected, 1);
    assert!(fresh(&view), "{view:?}");

    let mut app = crate::app::App::new(two);
    app.size = ratatui::layout::Rect::new(0, 0, 120, 40);
    scrolled(&mut app.view);
    let list = crate::app::layout::areas(app.size, Pane::Commands, false)
        .unwrap()
        .commands;
    // The second command's row: below the border and the header.
    app.handle(Action::ClickAt {
        column: list.x + 3,
        row: list.y + 3,
    });
    assert_eq!(app.view.selected, 1);
    assert_eq!(app.view.focus, Pane::Commands);
    assert!(fresh(&app.view), "{:?}", app.view);
}

#[test]
fn enter_answers_quit_but_never_confirms_a_kill() {
    let model = model(false, true);
    let mut view = ViewState::default();
    update(&model, &mut view, &geometry(), Action::Kill);
    assert_eq!(view.dialog, Some(Dialog::ConfirmKill { command: 0 }));
    // Enter is what the keymap makes of the Enter key in a question.
    let effects = update(&model, &mut view, &geometry(), Action::Submit);
    assert!(effects.is_empty(), "Enter sent {effects:?}");
    assert_eq!(view.dialog, Some(Dialog::ConfirmKill { command: 0 }));
    let effects = update(&model, &mut view, &geometry(), Action::Confirm);
    assert_eq!(
        effects,
        [Effect::Send(0, Request::group_signal(ProcessSignal::KILL))]
    );

    let mut view = ViewState::default();
    update(&model, &mut view, &geometry(), Action::Quit);
    let effects = update(&model, &mut view, &geometry(), Action::Submit);
    assert_eq!(effects, [Effect::StopAllAndQuit]);
    assert_eq!(view.message.as_deref(), Some("stopping 1 command…"));
}

/// `i` in a watch, Space and Enter with one session listed, `S` with no set-up shells: each
/// refused with why, by the rule the help lists keys by.
#[test]
fn keys_that_do_nothing_on_this_screen_are_refused_by_one_rule() {
    use super::{NO_FOLD, NO_SETUP, NO_TYPING, OnScreen, refusal_on};
    let live = model(false, true);
    let mut watched = model(false, true);
    watched.mode = Mode::Watched;
    let list = ListRows::build(&live, &Default::default());
    assert!(!list.has_headers());
    let wide = OnScreen {
        list: &list,
        compact: false,
    };
    let small = OnScreen {
        compact: true,
        ..wide
    };
    assert_eq!(
        refusal_on(&watched, wide, &Action::StartTyping),
        Some(NO_TYPING)
    );
    assert_eq!(refusal_on(&live, wide, &Action::StartTyping), None);
    assert_eq!(refusal_on(&live, wide, &Action::ToggleFold), Some(NO_FOLD));
    assert_eq!(refusal_on(&live, wide, &Action::Open), Some(NO_FOLD));
    assert_eq!(refusal_on(&live, small, &Action::Open), None);
    assert_eq!(
        refusal_on(&live, wide, &Action::ToggleSetup),
        Some(NO_SETUP)
    );
    // The update says the same.
    let mut view = ViewState::default();
    update(&watched, &mut view, &geometry(), Action::StartTyping);
    assert_eq!(
        (view.typing, view.message.as_deref()),
        (None, Some(NO_TYPING))
    );
    update(&live, &mut view, &geometry(), Action::ToggleSetup);
    assert_eq!(view.message.as_deref(), Some(NO_SETUP));
    assert!(!view.list.show_setup);
}

#[test]
fn what_a_screen_refuses_is_what_its_keys_leave_out() {
    let live = model(false, true);
    let recorded = model(true, true);
    let mut watched = model(true, true);
    watched.mode = Mode::Watched;
    for action in [
        Action::Term,
        Action::Kill,
        Action::Stop,
        Action::SignalProcess,
    ] {
        assert_eq!(refusal(&live, &action), None);
        assert_eq!(refusal(&recorded, &action), Some(READ_ONLY));
        assert_eq!(refusal(&watched, &action), None);
    }
    for action in [Action::NewCommand, Action::Restart] {
        assert_eq!(refusal(&live, &action), None);
        assert_eq!(refusal(&recorded, &action), Some(READ_ONLY));
        assert_eq!(refusal(&watched, &action), Some(NO_LAUNCH));
    }
    assert_eq!(refusal(&live, &Action::Dismiss), Some(NO_DISMISS));
    assert_eq!(refusal(&watched, &Action::Dismiss), None);
    for action in [Action::Quit, Action::Help, Action::Search, Action::Zoom] {
        assert_eq!(refusal(&recorded, &action), None);
    }
    // Only a finished recording has a time cursor; nothing there types or dismisses.
    for action in [
        Action::TimePrevEvent,
        Action::TimeFirst,
        Action::TimeStepLonger,
    ] {
        assert_eq!(refusal(&recorded, &action), None);
        assert_eq!(refusal(&live, &action), Some(NO_TIME_CURSOR));
        assert_eq!(refusal(&watched, &action), Some(NO_TIME_CURSOR));
    }
    assert_eq!(refusal(&recorded, &Action::StartTyping), Some(READ_ONLY));
    assert_eq!(refusal(&recorded, &Action::Dismiss), Some(NO_DISMISS));
}

#[test]
fn long_lines_scroll_sideways_as_far_as_the_widest_on_screen() {
    let model = model(false, true);
    let mut view = focused_on(Pane::Stdout);
    let press = |view: &mut ViewState, action| {
        update(&model, view, &geometry(), action);
        view.outputs[0].left
    };
    // A quarter of a 20-column pane is less than 8 columns: 8 at a time.
    assert_eq!(press(&mut view, Action::ScrollRight), 8);
    assert_eq!(
        press(&mut view, Action::LineEnd),
        80,
        "100 columns in a 20-column pane"
    );
    assert_eq!(press(&mut view, Action::ScrollRight), 80);
    assert_eq!(press(&mut view, Action::ScrollLeft), 72);
    assert_eq!(press(&mut view, Action::LineStart), 0);
    assert_eq!(press(&mut view, Action::ScrollLeft), 0);

    view.wrap = true;
    assert_eq!(press(&mut view, Action::ScrollRight), 0);
    assert!(view.message.as_deref().unwrap_or("").contains("wrap is on"));
    view.wrap = false;
    view.focus = Pane::Tree;
    assert_eq!(press(&mut view, Action::ScrollRight), 0);
    assert_eq!(view.outputs[1].left, 0);
}

#[test]
fn a_match_off_to_the_right_is_scrolled_into_sight() {
    use crate::app::search::{left_to_show, match_columns};
    use tether_model::output::render_line;
    let line = render_line(format!("{}Needle here", "x".repeat(100)).as_bytes());
    assert_eq!(match_columns(&line, "needle"), Some((100, 106)));
    assert_eq!(
        match_columns(&render_line("中文 needle".as_bytes()), "needle"),
        Some((5, 11))
    );
    assert_eq!(match_columns(&line, "absent"), None);
    // In a 30-column pane: brought in a third of the way, left alone when in sight.
    assert_eq!(left_to_show(0, 30, 100, 106), 90);
    assert_eq!(left_to_show(90, 30, 100, 106), 90);
    assert_eq!(left_to_show(95, 30, 100, 106), 95);
    assert_eq!(left_to_show(101, 30, 100, 106), 90);
    assert_eq!(left_to_show(50, 30, 2, 6), 0);
    // Wider than the pane leaves beside the context: its start at the left edge.
    assert_eq!(left_to_show(0, 30, 100, 125), 100);
}

#[test]
fn a_wrapped_timeline_scrolls_back_to_its_first_entry() {
    let model = model(false, true);
    let mut view = ViewState {
        wrap: true,
        ..focused_on(Pane::Timeline)
    };
    update(&model, &mut view, &geometry(), Action::Top);
    // 41 entries: wrapped, rows per entry are the screen's business; the last is entry 0.
    assert_eq!(view.timeline_back, 40);
}

#[test]
fn the_merged_view_starts_at_the_end_and_refuses_what_works_on_one_stream() {
    let model = model(true, false);
    let mut view = focused_on(Pane::Stdout);
    view.outputs[0].follow = false;
    view.outputs[0].top = 3;
    view.outputs[0].search = Some("x".into());
    assert!(update(&model, &mut view, &geometry(), Action::ToggleMerged).is_empty());
    assert!(view.merged);
    assert_eq!(
        view.outputs[0],
        Default::default(),
        "merged lines are numbered apart"
    );
    for action in [
        Action::Search,
        Action::SearchNext,
        Action::SelectLines,
        Action::Copy,
    ] {
        view.message = None;
        assert!(update(&model, &mut view, &geometry(), action.clone()).is_empty());
        assert!(view.dialog.is_none(), "{action:?}");
        let message = view.message.clone().unwrap_or_default();
        assert!(message.contains("m returns"), "{action:?}: {message}");
    }
    // The stderr pane is still stderr's own.
    view.focus = Pane::Stderr;
    update(&model, &mut view, &geometry(), Action::Search);
    assert!(matches!(
        view.dialog,
        Some(Dialog::Search {
            stream: Stream::Stderr,
            ..
        })
    ));
    view.dialog = None;
    update(&model, &mut view, &geometry(), Action::ToggleStamps);
    assert!(view.stamps);
    update(&model, &mut view, &geometry(), Action::ToggleMerged);
    assert!(!view.merged);
}

/// A watch keeps the newest running command selected while the operator has not moved the
/// list (an agent's next command comes into view as it starts); once they move it, the
/// selection is theirs; `End` in the list follows again.
#[test]
fn a_watch_follows_the_newest_running_command_until_the_list_is_moved() {
    let mut model = model(false, true);
    model.mode = Mode::Watched;
    let first = model.commands[0].clone();
    model.commands.push(first.clone());
    let mut app = crate::app::App::new(model);
    let size = ratatui::layout::Rect::new(0, 0, 120, 40);
    app.prepare(size, 1_000);
    assert_eq!(app.view.selected, 1, "the newest running");
    // A third starts: followed.
    let mut third = first.clone();
    third.apply(&event(900, spawned(9)));
    app.model.commands.push(third);
    app.prepare(size, 1_000);
    assert_eq!(app.view.selected, 2);
    // The operator moves up: theirs from now on, whatever starts.
    app.view.focus = Pane::Commands;
    app.handle(Action::Up);
    assert_eq!(app.view.selected, 1);
    let mut fourth = first;
    fourth.apply(&event(950, spawned(11)));
    app.model.commands.push(fourth);
    app.prepare(size, 1_000);
    assert_eq!(app.view.selected, 1, "not taken from the operator");
    app.handle(Action::Bottom);
    app.prepare(size, 1_000);
    assert_eq!(app.view.selected, 3, "End: following again");
    // A command that starts between two frames does not take a key meant for the one on
    // screen: the key acts on what was drawn selected.
    let mut fifth = app.model.commands[0].clone();
    fifth.apply(&event(990, spawned(13)));
    app.model.commands.push(fifth);
    app.handle(Action::FocusNext);
    assert_eq!(app.view.selected, 3, "no follow on a key's way");
    app.prepare(size, 1_000);
    assert_eq!(app.view.selected, 4);
}

/// A watch's model where nothing runs any more: three commands that exited 0, the first of
/// them last of all, after the two below it (a long build); and `ended`, their status.
fn watched_after_the_end() -> (Model, tether_model::Status) {
    let mut model = model(false, false);
    model.mode = Mode::Watched;
    let ended = tether_model::Status::Exited(tether_protocol::protocol::ExitStatus {
        code: Some(0),
        signal: None,
        core_dumped: false,
    });
    model.commands[0].status = ended;
    let first = model.commands[0].clone();
    for at in [900, 950] {
        let mut later = first.clone();
        later.apply(&event(at, spawned(9)));
        later.status = ended;
        later.ended_ms = Some(at + 10);
        model.commands.push(later);
    }
    model.commands[0].ended_ms = Some(990);
    (model, ended)
}

/// An agent's own row, as `tether agent` journals it (`tether session-owner ... -- claude`).
fn agent_row() -> CommandState {
    CommandState::new(CommandState::agent_for_test("claude"))
}

/// A watch over a session where nothing runs any more selects the command that ended last,
/// not whichever one its first read of the journals caught running.
#[test]
fn a_watch_where_nothing_runs_selects_the_command_that_ended_last() {
    // The first ended last of all: it is the one. An agent, which ends after its commands,
    // is not.
    let (mut model, ended) = watched_after_the_end();
    let mut agent = agent_row();
    agent.status = ended;
    agent.ended_ms = Some(999);
    model.commands.push(agent);
    let mut app = crate::app::App::new(model);
    app.prepare(ratatui::layout::Rect::new(0, 0, 120, 40), 1_000);
    assert_eq!(app.view.selected, 0);
}

/// An agent's row and a server kept after its command exited run through the session: the
/// watch follows the newest command that runs in the foreground, else the last to end, not
/// them (a trial's watch went back from `echo after` to the kept `&` server at the top).
#[test]
fn a_watch_does_not_follow_the_agent_nor_a_kept_server() {
    let (mut model, ended) = watched_after_the_end();
    let tether_model::Status::Exited(exit) = ended else {
        unreachable!()
    };
    // The first command's main process exited; what it left is kept: it started first.
    model.commands[0].status = tether_model::Status::LeftRunning {
        exit,
        processes: 1,
        paused: false,
    };
    model.commands[0].ended_ms = Some(50);
    let mut agent = agent_row();
    agent.apply(&event(100, spawned(5)));
    model.commands.push(agent);
    let mut app = crate::app::App::new(model);
    let size = ratatui::layout::Rect::new(0, 0, 120, 40);
    app.prepare(size, 1_000);
    assert_eq!(app.view.selected, 2, "the last to end, at 960");
    // A command starts: followed; it ends: the last to end again.
    next_command_starts_and_ends(&mut app, ended, "not the kept server nor the agent");
}

/// A watch's next command (the fifth) starts at 995 and is followed; it ends at 998 and is
/// still the one selected (`why` not the others).
fn next_command_starts_and_ends(app: &mut crate::app::App, ended: tether_model::Status, why: &str) {
    let size = ratatui::layout::Rect::new(0, 0, 120, 40);
    let mut next = app.model.commands[1].clone();
    next.apply(&event(995, spawned(11)));
    next.status = tether_model::Status::Running;
    app.model.commands.push(next);
    app.prepare(size, 1_000);
    assert_eq!(app.view.selected, 4);
    app.model.commands[4].status = ended;
    app.model.commands[4].ended_ms = Some(998);
    app.prepare(size, 1_000);
    assert_eq!(app.view.selected, 4, "{why}");
}

/// A command its agent went on from (Claude Code's `run_in_background` task: a later one
/// started while it runs) runs in the background of the others: once the newest ends, the
/// watch stays on it, not up at that task (a trial's watch went there between every two
/// commands). Without an agent's row (a config's servers) the running one is followed.
#[test]
fn a_watch_does_not_go_back_to_a_task_its_agent_went_on_from() {
    let (mut model, ended) = watched_after_the_end();
    model.commands[0].apply(&event(50, spawned(7)));
    model.commands[0].status = tether_model::Status::Running;
    model.commands[0].ended_ms = None;
    let mut app = crate::app::App::new(model);
    let size = ratatui::layout::Rect::new(0, 0, 120, 40);
    app.prepare(size, 1_000);
    assert_eq!(app.view.selected, 0, "no agent: the one running");
    // Its agent's row, in its session.
    let mut agent = agent_row();
    agent.journal_dir = app.model.commands[0].journal_dir.clone();
    agent.apply(&event(10, spawned(5)));
    app.model.commands.push(agent);
    app.prepare(size, 1_000);
    assert_eq!(app.view.selected, 2, "the last to end, not the task");
    // The agent's next command is followed while it runs; once it ends, it stays.
    next_command_starts_and_ends(&mut app, ended, "not back up at the task");
}

/// What the status bar said goes after half a minute on screen with no key (a stop told as
/// news minutes later misled a trial's operator), or at the next key; said again, it stays
/// its own half minute.
#[test]
fn the_status_bar_message_goes_after_half_a_minute() {
    let mut app = crate::app::App::new(model(false, true));
    let size = ratatui::layout::Rect::new(0, 0, 120, 40);
    app.view.say("while: stop sequence started");
    app.prepare(size, 1_000);
    app.prepare(size, 1_000 + crate::app::MESSAGE_KEPT_MS - 1);
    assert!(app.view.message.is_some(), "still news");
    app.prepare(size, 1_000 + crate::app::MESSAGE_KEPT_MS);
    assert_eq!(app.view.message, None, "gone");
    app.view.say("said again");
    app.prepare(size, 50_000);
    app.prepare(size, 50_000 + crate::app::MESSAGE_KEPT_MS - 1);
    assert!(app.view.message.is_some());
    // The same words again after a key (the key said them again): their own half minute.
    app.handle(Action::Down);
    assert_eq!(app.view.message, None, "gone at a key");
    app.view.say("said again");
    app.prepare(size, 90_000);
    assert!(
        app.view.message.is_some(),
        "news again, not as old as the first"
    );
}

/// A runaway flagged while newer commands run (Codex left it in the background) is what the
/// watch follows, not the newest: the status bar names it, and `t` or `s` is meant for it.
/// Once it ends, the newest again.
#[test]
fn a_watch_follows_a_runaway_before_the_newest() {
    let mut model = model(false, true);
    model.mode = Mode::Watched;
    let first = model.commands[0].clone();
    let mut newer = first.clone();
    newer.apply(&event(900, spawned(9)));
    model.commands.push(newer);
    let mut app = crate::app::App::new(model);
    let size = ratatui::layout::Rect::new(0, 0, 120, 40);
    app.prepare(size, 1_000);
    assert_eq!(app.view.selected, 1, "the newest running");
    app.model.commands[0].mark_attention(tether_model::command::AttentionMark {
        kind: tether_protocol::protocol::AttentionKind::Runaway,
        detail: "at least 90% of a core for 1m00s".into(),
        at_ms: 950,
        active: true,
    });
    app.prepare(size, 1_000);
    assert_eq!(app.view.selected, 0, "the runaway");
    app.model.commands[0].status =
        tether_model::Status::Exited(tether_protocol::protocol::ExitStatus {
            code: None,
            signal: Some(15),
            core_dumped: false,
        });
    app.prepare(size, 1_000);
    assert_eq!(app.view.selected, 1, "stopped: the newest again");
}

/// `End` in a watch goes to the bottom of the list and follows again: where nothing runs,
/// and the command followed (the last to end) is above the bottom, the selection stays at
/// the bottom until a command starts or ends.
#[test]
fn end_in_a_watch_goes_to_the_bottom_though_the_last_to_end_is_above() {
    let (model, _) = watched_after_the_end();
    let first = model.commands[0].clone();
    let mut app = crate::app::App::new(model);
    let size = ratatui::layout::Rect::new(0, 0, 120, 40);
    app.prepare(size, 1_000);
    assert_eq!(app.view.selected, 0, "the last to end");
    app.view.focus = Pane::Commands;
    app.handle(Action::Up);
    app.handle(Action::Bottom);
    assert!(!app.view.list_moved, "following again");
    app.prepare(size, 1_000);
    assert_eq!(app.view.selected, 2, "End: the bottom");
    app.prepare(size, 1_000);
    assert_eq!(app.view.selected, 2, "and it stays there");
    // Another order: what is followed is selected again (by CPU time, it is listed first).
    app.handle(Action::ToggleSort);
    app.prepare(size, 1_000);
    assert_eq!(app.view.selected, 0, "followed under another order");
    app.handle(Action::ToggleSort);
    app.prepare(size, 1_000);
    app.handle(Action::Bottom);
    app.prepare(size, 1_000);
    assert_eq!(app.view.selected, 2);
    // A command starts: followed.
    let mut next = first;
    next.apply(&event(995, spawned(11)));
    app.model.commands.push(next);
    app.prepare(size, 1_000);
    assert_eq!(app.view.selected, 3);
}

/// Sorted by CPU, a watch keeps the busiest running command selected, listed first, not the
/// newest (which a busy agent starts every moment, at the bottom, and which would scroll a
/// runaway out of sight); `Home` follows again after the operator moved.
#[test]
fn sorted_by_cpu_a_watch_follows_the_busiest_running_command() {
    let mut model = model(false, true);
    model.mode = Mode::Watched;
    let first = model.commands[0].clone();
    let mut busy = first.clone();
    busy.cpu_percent = Some(97.0);
    model.commands.push(busy);
    let mut app = crate::app::App::new(model);
    let size = ratatui::layout::Rect::new(0, 0, 120, 40);
    app.handle(Action::ToggleSort);
    app.prepare(size, 1_000);
    assert_eq!(app.view.selected, 1, "the busiest");
    // A newer, idle command starts: the busiest stays selected.
    let mut newer = first;
    newer.apply(&event(900, spawned(9)));
    newer.cpu_percent = Some(0.0);
    app.model.commands.push(newer);
    app.prepare(size, 1_000);
    assert_eq!(app.view.selected, 1);
    // The operator moves down, then Home: the busiest again, followed.
    app.view.focus = Pane::Commands;
    app.handle(Action::Down);
    app.prepare(size, 1_000);
    assert_ne!(app.view.selected, 1);
    app.handle(Action::Top);
    app.prepare(size, 1_000);
    assert!(!app.view.list_moved, "Home: following again");
    app.model.commands[2].cpu_percent = Some(99.0);
    app.prepare(size, 1_000);
    assert_eq!(app.view.selected, 2, "the new busiest");
}

#[test]
fn on_a_small_screen_enter_opens_the_command_and_esc_goes_back_to_the_list() {
    let model = model(false, true);
    let compact = Geometry {
        compact: true,
        ..geometry()
    };
    let mut view = ViewState::default();
    update(&model, &mut view, &compact, Action::Open);
    assert_eq!(view.focus, Pane::Stdout, "its output first");
    assert!(
        view.list_moved,
        "a watch keeps the command opened on screen"
    );
    assert!(view.message.as_deref().is_some_and(|m| m.contains("Tab")));
    // Enter again, the command open: the list behind it stays as it was.
    let folded = view.list.folded.clone();
    update(&model, &mut view, &compact, Action::Open);
    assert_eq!(view.focus, Pane::Stdout);
    assert_eq!(view.list.folded, folded, "nothing folded out of sight");
    assert_eq!(view.message.as_deref(), Some("the command is open already"));
    update(&model, &mut view, &compact, Action::Zoom);
    update(&model, &mut view, &compact, Action::Cancel);
    assert_eq!((view.focus, view.zoom), (Pane::Commands, false));
    // A failure that wrote only to stderr opens there.
    let mut failed = super::tests::model(false, true);
    failed.commands[0].bytes = [0, 36];
    let mut opened = ViewState::default();
    update(&failed, &mut opened, &compact, Action::Open);
    assert_eq!(opened.focus, Pane::Stderr, "where its output is");
    // Where the list is beside the panes, Enter folds as it always did.
    update(&model, &mut view, &geometry(), Action::Open);
    assert_eq!(view.focus, Pane::Commands);
    assert!(
        view.message.as_deref().is_some_and(|m| m.contains("fold")),
        "{:?}",
        view.message
    );
}

/// `s` on a command that waits for a dependency or a restart calls the wait off (through
/// the launcher, as every operator's stop goes); on one that gave up it says it is not
/// running.
#[test]
fn stop_calls_off_a_wait_but_not_a_failure() {
    use tether_model::Plan;
    let mut model = model(false, false);
    model.commands[0] = CommandState::new(model.commands[0].config.clone());
    model.commands[0].plan = Some(Plan::Waiting {
        on: "db".into(),
        not_started: false,
    });
    let mut view = ViewState::default();
    let effects = update(&model, &mut view, &geometry(), Action::Stop);
    let stop = Request::Stop {
        origin: Some(Origin::Operator),
    };
    assert_eq!(effects, [Effect::Send(0, stop)]);
    assert_eq!(view.message.as_deref(), Some("job will not start"));

    model.commands[0].plan = Some(Plan::GaveUp { restarts: 3 });
    let effects = update(&model, &mut view, &geometry(), Action::Stop);
    assert!(effects.is_empty());
    assert_eq!(view.message.as_deref(), Some("job is not running"));
}

/// In a watch, a wait is another tether's launcher's: `s` sends nothing and says so, `d` and
/// `D` leave the row (its run ended, but the command will start again); a command that gave
/// up is only not running.
#[test]
fn a_watched_wait_is_neither_stopped_nor_dismissed_from_here() {
    use tether_model::Plan;
    let mut model = model(false, false);
    model.mode = Mode::Watched;
    model.commands[0].ended_ms = Some(60);
    model.commands[0].status =
        tether_model::Status::Exited(tether_protocol::protocol::ExitStatus {
            code: Some(0),
            signal: None,
            core_dumped: false,
        });
    model.commands[0].plan = Some(Plan::Waiting {
        on: "db".into(),
        not_started: false,
    });
    let mut view = ViewState::default();
    assert!(update(&model, &mut view, &geometry(), Action::Stop).is_empty());
    assert!(
        view.message
            .as_deref()
            .unwrap()
            .contains("launcher it waits on")
    );
    assert!(update(&model, &mut view, &geometry(), Action::Dismiss).is_empty());
    assert_eq!(
        view.message.as_deref(),
        Some("job will start again: its launcher keeps it listed")
    );
    assert!(update(&model, &mut view, &geometry(), Action::DismissEnded).is_empty());

    model.commands[0].plan = Some(Plan::GaveUp { restarts: 3 });
    assert!(update(&model, &mut view, &geometry(), Action::Stop).is_empty());
    assert_eq!(view.message.as_deref(), Some("job is not running"));
    assert_eq!(
        update(&model, &mut view, &geometry(), Action::Dismiss),
        [Effect::Dismiss(0)]
    );
}

/// A watch follows the newest running command until the operator moves the list, or acts
/// on the command selected: a stop keeps the stopped command in view. A key that did
/// nothing leaves the following on.
#[test]
fn acting_on_a_command_keeps_it_selected_in_a_watch() {
    let mut model = model(true, true);
    model.mode = Mode::Watched;
    for action in [Action::Stop, Action::Term, Action::Kill] {
        let mut view = ViewState::default();
        let what = format!("{action:?}");
        update(&model, &mut view, &geometry(), action);
        assert!(view.list_moved, "{what}");
    }
    // Ended: a stop, a TERM, a KILL say it is not running, and the following goes on.
    model.commands[0].status =
        tether_model::Status::Exited(tether_protocol::protocol::ExitStatus {
            code: Some(0),
            signal: None,
            core_dumped: false,
        });
    for action in [Action::Stop, Action::Term, Action::Kill] {
        let mut view = ViewState::default();
        let what = format!("{action:?}");
        update(&model, &mut view, &geometry(), action);
        assert!(!view.list_moved, "{what}");
    }
}
