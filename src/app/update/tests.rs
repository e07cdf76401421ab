use super::*;
use crate::model::CommandState;
use crate::protocol::{Event, EventKind};

fn model(recorded: bool, running: bool) -> Model {
    let mut command =
        CommandState::new(CommandConfig::new("job", CommandSpec::Shell("true".into())));
    command.begin_run("/nonexistent".into(), 0);
    for ms in 0..40 {
        command.apply(&Event {
            ts_ms: ms,
            mono_us: 0,
            kind: EventKind::ParentUnresponsive { silent_ms: ms },
        });
    }
    if running {
        command.apply(&Event {
            ts_ms: 50,
            mono_us: 0,
            kind: EventKind::Spawned {
                pid: 7,
                pgid: 7,
                argv: vec![],
            },
        });
    }
    Model {
        session_id: "s".into(),
        session_dir: "/nonexistent".into(),
        started_ms: 0,
        commands: vec![command],
        recorded,
        controllable: false,
    }
}

fn geometry() -> Geometry {
    Geometry {
        output_rows: [10, 10],
        tree_rows: 5,
        timeline_rows: 10,
        total_lines: [100, 0],
        tree_processes: vec![None, Some((8, "sleep 1".into()))],
        ..Geometry::default()
    }
}

#[test]
fn timeline_scrolls_back_no_further_than_its_first_entry() {
    let model = model(false, true);
    let mut view = ViewState {
        focus: Pane::Timeline,
        ..ViewState::default()
    };
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
    let mut view = ViewState {
        focus: Pane::Stdout,
        ..ViewState::default()
    };
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

#[test]
fn signalling_a_process_names_its_command() {
    let model = model(false, true);
    let mut view = ViewState {
        focus: Pane::Tree,
        tree_selected: 1,
        ..ViewState::default()
    };
    update(&model, &mut view, &geometry(), Action::SignalProcess);
    update(&model, &mut view, &geometry(), Action::Backspace);
    update(&model, &mut view, &geometry(), Action::Input('M'));
    let effects = update(&model, &mut view, &geometry(), Action::Submit);
    assert_eq!(
        effects,
        [Effect::Send(
            0,
            ToBroker::Signal {
                signal: "TERM".into(),
                scope: Scope::Pid,
                pid: Some(8)
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
