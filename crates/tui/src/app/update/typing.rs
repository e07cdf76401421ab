//! Typing into a command (`i` … Ctrl-a): while it lasts every key and paste is input for the
//! command's terminal, and the status bar says so.

use super::Effect;
use crate::app::action::Action;
use crate::app::terminal_keys::paste_bytes;
use crate::app::view::ViewState;
use tether_model::Model;

/// Why the selected command cannot be typed into, if it cannot. (A recorded session or a
/// watch refuses `i` whatever is selected: `super::refusal`.)
fn refusal(model: &Model, view: &ViewState) -> Option<String> {
    let Some(command) = model.commands.get(view.selected) else {
        return Some("no command selected: press a to launch one".into());
    };
    let name = &command.config.name;
    if !command.status.is_active() {
        return Some(format!(
            "{name} is not running ({}): nothing reads what you would type",
            command.state_words()
        ));
    }
    match command.terminal {
        Some(terminal) if terminal.stdout => None,
        _ if command.pid.is_none() => {
            Some(format!("{name} is still starting; try again in a moment"))
        }
        _ if !command.config.pty => Some(format!(
            "{name} has no terminal (pty = false): its stdin is /dev/null"
        )),
        _ => Some(format!(
            "{name} has no terminal (none could be opened; see its timeline): its stdin is /dev/null"
        )),
    }
}

/// `i`: hands the keyboard to the selected command, or says why not.
pub(super) fn start(model: &Model, view: &mut ViewState) {
    match refusal(model, view) {
        Some(why) => view.say(why),
        None => view.typing = Some(view.selected),
    }
}

/// While typing: keys and pastes become input, Ctrl-a ends it. `None` for anything else
/// (the mouse, a resize), which the normal update handles.
pub(super) fn update(model: &Model, view: &mut ViewState, action: &Action) -> Option<Vec<Effect>> {
    let target = view.typing?;
    let bytes = match action {
        Action::StopTyping => {
            view.typing = None;
            return Some(Vec::new());
        }
        Action::Type(bytes) => bytes.clone(),
        Action::Paste(text) => paste_bytes(text),
        _ => return None,
    };
    // A command that ended takes nothing; the status bar says so and the keys go nowhere
    // (never to tether's own bindings: the operator is still typing).
    let running = model
        .commands
        .get(target)
        .is_some_and(|c| c.status.is_active());
    if !running || bytes.is_empty() {
        return Some(Vec::new());
    }
    Some(vec![Effect::Input(target, bytes)])
}

#[cfg(test)]
mod tests {
    use super::super::{Geometry, update as update_all};
    use super::*;
    use tether_config::CommandConfig;
    use tether_model::CommandState;
    use tether_model::Mode;
    use tether_protocol::protocol::fixtures::{event, spawned};
    use tether_protocol::protocol::{
        CommandSpec, EventKind, ExitStatus, TerminalRequest, WindowSize,
    };

    fn model(pty: bool, terminal: bool, ended: bool) -> Model {
        let mut config = CommandConfig::new("build", CommandSpec::Shell("make".into()));
        config.pty = pty;
        let mut command = CommandState::new(config);
        command.begin_run("/nonexistent".into(), 0);
        let mut apply = |kind| command.apply(&event(1, kind));
        apply(spawned(7));
        if terminal {
            apply(EventKind::Terminal {
                streams: TerminalRequest {
                    stdout: true,
                    stderr: true,
                    size: WindowSize::DEFAULT,
                },
            });
        }
        if ended {
            let status = ExitStatus {
                code: Some(0),
                signal: None,
                core_dumped: false,
            };
            apply(EventKind::Exit { pid: 7, status });
        }
        Model {
            session_id: "s".into(),
            session_dir: "/nonexistent".into(),
            started_ms: 0,
            commands: vec![command],
            mode: Mode::Live,
        }
    }

    fn act(model: &Model, view: &mut ViewState, action: Action) -> Vec<Effect> {
        update_all(model, view, &Geometry::default(), action)
    }

    #[test]
    fn keys_and_pastes_go_to_the_command_until_ctrl_a() {
        let model = model(true, true, false);
        let mut view = ViewState::default();
        assert!(act(&model, &mut view, Action::StartTyping).is_empty());
        assert_eq!(view.typing, Some(0));
        assert_eq!(
            act(&model, &mut view, Action::Type(b"q".to_vec())),
            [Effect::Input(0, b"q".to_vec())],
            "q is input, not quit"
        );
        assert_eq!(
            act(&model, &mut view, Action::Paste("a\nb".into())),
            [Effect::Input(0, b"a\rb".to_vec())]
        );
        assert!(act(&model, &mut view, Action::StopTyping).is_empty());
        assert_eq!(view.typing, None);
        // Keys mean tether's own actions again.
        act(&model, &mut view, Action::Quit);
        assert!(matches!(
            view.dialog,
            Some(crate::app::view::Dialog::ConfirmQuit { .. })
        ));
    }

    #[test]
    fn keys_for_a_command_that_ended_go_nowhere() {
        let running = model(true, true, false);
        let ended = model(true, true, true);
        let mut view = ViewState::default();
        act(&running, &mut view, Action::StartTyping);
        assert!(act(&ended, &mut view, Action::Type(b"q".to_vec())).is_empty());
        assert_eq!(view.typing, Some(0), "still typing until Ctrl-a");
        assert_eq!(view.dialog, None);
    }

    #[test]
    fn i_says_why_a_command_cannot_be_typed_into() {
        let why = |model: &Model| {
            let mut view = ViewState::default();
            act(model, &mut view, Action::StartTyping);
            assert_eq!(view.typing, None);
            view.message.unwrap_or_default()
        };
        assert_eq!(
            why(&model(false, false, false)),
            "build has no terminal (pty = false): its stdin is /dev/null"
        );
        assert!(why(&model(true, false, false)).contains("none could be opened"));
        assert_eq!(
            why(&model(true, true, true)),
            "build is not running (exit 0): nothing reads what you would type"
        );
        let mut recorded = model(true, true, false);
        recorded.mode = Mode::Recorded(None);
        assert_eq!(why(&recorded), super::super::READ_ONLY);
        let mut watched = model(true, true, false);
        watched.mode = Mode::Watched;
        assert_eq!(why(&watched), super::super::NO_TYPING);
    }
}
