//! The time cursor's keys: where each moves the cursor over the recording, and what the
//! status bar says when there is nowhere to go. Which moment is which is the recording's
//! business (`model::recording`); this only picks the move.

use crate::app::action::Action;
use crate::app::view::{Dialog, ViewState};
use tether_model::Model;
use tether_model::recording::{STEPS_MS, step_label};
use tether_protocol::units::offset_ms;

pub(super) fn update(model: &Model, view: &mut ViewState, action: &Action) {
    let Some(recording) = model.mode.recording() else {
        view.say("nothing was recorded to move through");
        return;
    };
    let time = &mut view.time;
    let at = time.at_ms;
    // With the cursor off (the whole recording shown, as `tether open` starts), a move
    // forward starts from the session's start and a move back from its end.
    let from_start = at.or_else(|| recording.first().map(|first| first.saturating_sub(1)));
    let (moved, nowhere) = match action {
        Action::TimePrevEvent => (recording.prev_event(at), "no event before this one"),
        Action::TimeNextEvent => (
            recording.next_event(from_start),
            "no event after this one: End leaves the time cursor",
        ),
        Action::TimePrevNotable => (
            recording.prev_notable(at),
            "no signal, error, timeout or exit before this",
        ),
        Action::TimeNextNotable => (
            recording.next_notable(from_start),
            "no signal, error, timeout or exit after this",
        ),
        Action::TimeStepBack => (
            recording.step_back(at, time.step_ms()),
            "at the first event",
        ),
        Action::TimeStepForward if at.is_none() => (recording.first(), "nothing was recorded"),
        Action::TimeStepForward => (
            recording.step_forward(at, time.step_ms()),
            "at the last event: End leaves the time cursor",
        ),
        Action::TimeFirst => (recording.first(), "nothing was recorded"),
        Action::TimeGoTo => {
            view.dialog = Some(Dialog::GoToTime { input: "".into() });
            return;
        }
        Action::TimeOff => {
            time.at_ms = None;
            return;
        }
        Action::TimeStepShorter | Action::TimeStepLonger => {
            time.step = if *action == Action::TimeStepLonger {
                (time.step + 1).min(STEPS_MS.len() - 1)
            } else {
                time.step.saturating_sub(1)
            };
            let step = step_label(time.step_ms());
            view.say(format!("time step {step} (< and > move by it)"));
            return;
        }
        _ => return,
    };
    match moved {
        Some(ms) => time.at_ms = Some(ms),
        None => view.say(nowhere),
    }
}

/// Puts the cursor at the moment `typed` says, from the session's start (`+1:23`, `83s`:
/// [`tether_protocol::units::parse_offset`]), kept within what was recorded; what was not understood
/// is the error, for the status bar.
pub(super) fn go_to(model: &Model, view: &mut ViewState, typed: &str) -> Result<(), String> {
    let offset = tether_protocol::units::parse_offset(typed).map_err(|e| e.to_string())?;
    let Some(recording) = model.mode.recording() else {
        return Err("nothing was recorded to move through".into());
    };
    let (Some(first), Some(last)) = (recording.first(), recording.last()) else {
        return Err("nothing was recorded".into());
    };
    let wanted = model.started_ms.saturating_add(offset);
    let at = wanted.clamp(first, last);
    let shown = |ms: u64| offset_ms(ms.saturating_sub(model.started_ms));
    view.time.at_ms = Some(at);
    view.say(if at == wanted {
        format!("time cursor at {}", shown(at))
    } else if wanted > last {
        format!(
            "the recording ends at {}: the cursor is at its last event",
            shown(last)
        )
    } else {
        format!(
            "the first event is at {}: the cursor is there",
            shown(first)
        )
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tether_config::CommandConfig;
    use tether_model::Mode;
    use tether_model::recording::{CommandRecording, Recording};
    use tether_protocol::protocol::fixtures::{event, spawned};
    use tether_protocol::protocol::{CommandSpec, EventKind};

    fn model() -> Model {
        let recording = Recording::new(vec![CommandRecording {
            config: CommandConfig::new("job", CommandSpec::Shell("true".into())),
            dir: "/nonexistent".into(),
            run: 1,
            caller_pid: None,
            events: vec![
                event(1_000, spawned(7)),
                event(3_500, EventKind::HardKill { after_ms: 1 }),
                event(4_000, EventKind::ParentUnresponsive { silent_ms: 1 }),
            ],
        }]);
        Model {
            session_id: "s".into(),
            session_dir: "/nonexistent".into(),
            started_ms: 1_000,
            commands: Vec::new(),
            mode: Mode::Recorded(Some(Box::new(recording))),
        }
    }

    fn after(model: &Model, view: &mut ViewState, actions: &[Action]) -> Option<u64> {
        for action in actions {
            update(model, view, action);
        }
        view.time.at_ms
    }

    #[test]
    fn keys_move_the_cursor_and_say_when_there_is_nowhere_to_go() {
        let model = model();
        let view = &mut ViewState::default();
        assert_eq!(after(&model, view, &[Action::TimePrevEvent]), Some(4_000));
        assert_eq!(after(&model, view, &[Action::TimePrevNotable]), Some(3_500));
        assert_eq!(after(&model, view, &[Action::TimeStepBack]), Some(2_500));
        assert_eq!(
            after(
                &model,
                view,
                &[Action::TimeStepLonger, Action::TimeStepBack]
            ),
            Some(1_000),
            "2s back stops at the first event"
        );
        view.message = None;
        assert_eq!(after(&model, view, &[Action::TimeStepBack]), Some(1_000));
        assert_eq!(view.message.as_deref(), Some("at the first event"));
        assert_eq!(after(&model, view, &[Action::TimeNextNotable]), Some(3_500));
        assert_eq!(after(&model, view, &[Action::TimeNextEvent]), Some(4_000));
        assert_eq!(after(&model, view, &[Action::TimeNextEvent]), Some(4_000));
        assert!(view.message.as_deref().unwrap_or("").contains("End"));
        assert_eq!(after(&model, view, &[Action::TimeOff]), None);
        // From the whole recording (the cursor off, as `tether open` starts), forward moves
        // start at the session's start.
        assert_eq!(after(&model, view, &[Action::TimeNextEvent]), Some(1_000));
        view.time.at_ms = None;
        assert_eq!(after(&model, view, &[Action::TimeNextNotable]), Some(3_500));
        view.time.at_ms = None;
        assert_eq!(after(&model, view, &[Action::TimeStepForward]), Some(1_000));
        assert_eq!(after(&model, view, &[Action::TimeFirst]), Some(1_000));
    }

    #[test]
    fn a_time_typed_as_an_offset_moves_the_cursor_there() {
        use crate::app::view::Dialog;
        let model = model();
        let view = &mut ViewState::default();
        let geometry = super::super::Geometry::default();
        let type_in = |view: &mut ViewState, text: &str| {
            super::super::update(&model, view, &geometry, Action::TimeGoTo);
            assert_eq!(
                view.dialog,
                Some(Dialog::GoToTime {
                    input: String::new()
                })
            );
            super::super::update(&model, view, &geometry, Action::Paste(text.into()));
            super::super::update(&model, view, &geometry, Action::Submit);
        };
        type_in(view, "+0:02.5");
        assert_eq!(view.time.at_ms, Some(3_500));
        assert_eq!(view.message.as_deref(), Some("time cursor at +0:02.500"));
        type_in(view, "1s");
        assert_eq!(view.time.at_ms, Some(2_000));
        type_in(view, "+1:23");
        assert_eq!(view.time.at_ms, Some(4_000), "kept within the recording");
        assert!(
            view.message
                .as_deref()
                .unwrap_or("")
                .contains("ends at +0:03.000")
        );
        // What was not understood is said, and the prompt stays with it.
        type_in(view, "soon");
        assert_eq!(view.time.at_ms, Some(4_000));
        assert!(
            view.message
                .as_deref()
                .unwrap_or("")
                .starts_with("`soon` is not a time"),
            "{:?}",
            view.message
        );
        assert!(matches!(&view.dialog, Some(Dialog::GoToTime { input }) if input == "soon"));
    }

    #[test]
    fn the_step_stays_between_100ms_and_1h() {
        let model = model();
        let view = &mut ViewState::default();
        assert_eq!(view.time.step_ms(), 1_000);
        for _ in 0..20 {
            update(&model, view, &Action::TimeStepShorter);
        }
        assert_eq!(view.time.step_ms(), 100);
        assert_eq!(
            view.message.as_deref(),
            Some("time step 100ms (< and > move by it)")
        );
        for _ in 0..20 {
            update(&model, view, &Action::TimeStepLonger);
        }
        assert_eq!(view.time.step_ms(), 3_600_000);
    }
}
