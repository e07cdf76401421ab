//! Typing into a command (`i` … Ctrl-a): while it lasts every key and paste is input for the
//! command's terminal, and the status bar says so.

use super::{Effect, READ_ONLY};
use crate::app::action::Action;
use crate::app::terminal_keys::paste_bytes;
use crate::app::view::ViewState;
use crate::model::Model;

/// Why the selected command cannot be typed into, if it cannot.
fn refusal(model: &Model, view: &ViewState) -> Option<String> {
    if model.recorded && !model.controllable {
        return Some(READ_ONLY.into());
    }
    let Some(command) = model.commands.get(view.selected) else {
        return Some("no command selected: press a to launch one".into());
    };
    let name = &command.config.name;
    if model.recorded {
        return Some(format!(
            "{name} was started elsewhere: only the tether that started a command types into it"
        ));
    }
    if !command.status.is_active() {
        return Some(format!(
            "{name} is not running ({}): nothing reads what you would type",
            command.status.label()
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
        Some(why) => view.message = Some(why),
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
