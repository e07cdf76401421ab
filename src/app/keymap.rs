//! The key map is data: which key does what in which mode, with the text the help screen
//! shows. Nothing else decides what a key means.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::action::Action;

/// Which key bindings apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyContext {
    Normal,
    /// A yes/no question is open.
    Confirm,
    /// A text prompt is open (new command, search, signal name).
    Prompt,
    Help,
    /// The keyboard is handed to a command's terminal: every key is input, but Ctrl-a.
    Input,
}

pub struct Binding {
    pub context: KeyContext,
    pub code: KeyCode,
    pub modifiers: KeyModifiers,
    /// How the help screen names the key.
    pub label: &'static str,
    pub action: Action,
    pub description: &'static str,
}

const fn bind(
    context: KeyContext,
    code: KeyCode,
    label: &'static str,
    action: Action,
    description: &'static str,
) -> Binding {
    Binding {
        context,
        code,
        modifiers: KeyModifiers::NONE,
        label,
        action,
        description,
    }
}

pub fn bindings() -> Vec<Binding> {
    use Action as A;
    use KeyCode as K;
    use KeyContext::Normal as N;
    vec![
        bind(N, K::Down, "↓ j", A::Down, "select next / scroll down"),
        bind(N, K::Char('j'), "↓ j", A::Down, ""),
        bind(N, K::Up, "↑ k", A::Up, "select previous / scroll up"),
        bind(N, K::Char('k'), "↑ k", A::Up, ""),
        bind(N, K::Tab, "Tab", A::FocusNext, "focus next pane"),
        bind(N, K::BackTab, "S-Tab", A::FocusPrev, "focus previous pane"),
        bind(N, K::PageDown, "PgDn", A::PageDown, "page down"),
        bind(N, K::PageUp, "PgUp", A::PageUp, "page up"),
        bind(N, K::Home, "Home g", A::Top, "go to the top"),
        bind(N, K::Char('g'), "Home g", A::Top, ""),
        bind(N, K::End, "End G", A::Bottom, "go to the bottom"),
        bind(N, K::Char('G'), "End G", A::Bottom, ""),
        bind(N, K::Left, "← h", A::ScrollLeft, "scroll long lines left"),
        bind(N, K::Char('h'), "← h", A::ScrollLeft, ""),
        bind(
            N,
            K::Right,
            "→ l",
            A::ScrollRight,
            "scroll long lines right",
        ),
        bind(N, K::Char('l'), "→ l", A::ScrollRight, ""),
        bind(
            N,
            K::Char('0'),
            "0",
            A::LineStart,
            "scroll to the line start",
        ),
        bind(N, K::Char('$'), "$", A::LineEnd, "scroll to the line end"),
        bind(
            N,
            K::Char('f'),
            "f",
            A::ToggleFollow,
            "follow output on/off",
        ),
        bind(
            N,
            K::Char('w'),
            "w",
            A::ToggleWrap,
            "wrap long lines on/off",
        ),
        bind(N, K::Char('z'), "z", A::Zoom, "zoom the focused pane"),
        bind(
            N,
            K::Char('c'),
            "c",
            A::ToggleCores,
            "header: CPU per core on/off",
        ),
        bind(N, K::Char('/'), "/", A::Search, "search the focused output"),
        bind(N, K::Char('n'), "n", A::SearchNext, "next match"),
        bind(N, K::Char('N'), "N", A::SearchPrev, "previous match"),
        bind(
            N,
            K::Char('v'),
            "v",
            A::ToggleScreen,
            "output as a screen / as lines",
        ),
        bind(
            N,
            K::Char('m'),
            "m",
            A::ToggleMerged,
            "stdout+stderr merged on/off",
        ),
        bind(
            N,
            K::Char('T'),
            "T",
            A::ToggleStamps,
            "times of output lines on/off",
        ),
        bind(N, K::Char('V'), "V", A::SelectLines, "select lines to copy"),
        bind(N, K::Char('y'), "y", A::Copy, "copy lines or the screen"),
        bind(N, K::Esc, "Esc", A::Cancel, "drop the selection"),
        bind(N, K::Char('t'), "t", A::Term, "SIGTERM the whole group"),
        bind(
            N,
            K::Char('K'),
            "K",
            A::Kill,
            "SIGKILL the group (asks first)",
        ),
        bind(N, K::Char('s'), "s", A::Stop, "stop: TERM, grace, KILL"),
        bind(
            N,
            K::Char('x'),
            "x",
            A::SignalProcess,
            "signal the selected process",
        ),
        bind(N, K::Char('r'), "r", A::Restart, "restart the command"),
        bind(N, K::Char('a'), "a", A::NewCommand, "launch a new command"),
        bind(N, K::Char('d'), "d", A::Dismiss, "dismiss an ended command"),
        bind(
            N,
            K::Char('i'),
            "i",
            A::StartTyping,
            "type into it (Ctrl-a ends)",
        ),
        bind(N, K::Char('?'), "?", A::Help, "help"),
        bind(N, K::Char('q'), "q", A::Quit, "quit (asks if commands run)"),
        bind(KeyContext::Confirm, K::Char('y'), "y", A::Confirm, "yes"),
        // Enter is the default answer, which only a harmless question has (quit: yes); it
        // never confirms a SIGKILL.
        bind(
            KeyContext::Confirm,
            K::Enter,
            "Enter",
            A::Submit,
            "the default answer",
        ),
        bind(
            KeyContext::Confirm,
            K::Char('n'),
            "n Esc",
            A::Cancel,
            "no, cancel",
        ),
        bind(KeyContext::Confirm, K::Esc, "n Esc", A::Cancel, ""),
        bind(KeyContext::Prompt, K::Enter, "Enter", A::Submit, "accept"),
        bind(KeyContext::Prompt, K::Esc, "Esc", A::Cancel, "cancel"),
        bind(
            KeyContext::Prompt,
            K::Backspace,
            "Backspace",
            A::Backspace,
            "delete a character",
        ),
        Binding {
            modifiers: KeyModifiers::CONTROL,
            ..bind(
                KeyContext::Input,
                K::Char('a'),
                "Ctrl-a",
                A::StopTyping,
                "stop typing into the command",
            )
        },
        bind(KeyContext::Help, K::Esc, "Esc ? q", A::Cancel, "close help"),
        bind(KeyContext::Help, K::Char('?'), "Esc ? q", A::Cancel, ""),
        bind(KeyContext::Help, K::Char('q'), "Esc ? q", A::Cancel, ""),
    ]
}

/// The action for a key in a context, if any. In a prompt, printable keys are text.
pub fn action_for(bindings: &[Binding], context: KeyContext, key: KeyEvent) -> Option<Action> {
    if context == KeyContext::Input {
        return Some(input_action(bindings, key));
    }
    if key.code == KeyCode::Char('c') && key.modifiers.contains(KeyModifiers::CONTROL) {
        return Some(match context {
            KeyContext::Normal => Action::Quit,
            _ => Action::Cancel,
        });
    }
    // Shift is implied by the character itself ('G', 'K', 'N', '?').
    let modifiers = key.modifiers - KeyModifiers::SHIFT;
    let found = bindings
        .iter()
        .find(|b| b.context == context && b.code == key.code && b.modifiers == modifiers)
        .map(|b| b.action.clone());
    match (found, context, key.code) {
        (Some(action), _, _) => Some(action),
        (None, KeyContext::Prompt, KeyCode::Char(c))
            if !modifiers.contains(KeyModifiers::CONTROL) =>
        {
            Some(Action::Input(c))
        }
        _ => None,
    }
}

/// While typing into a command: its own binding (Ctrl-a, with or without Shift), else the
/// bytes a terminal sends for the key, Ctrl-c included.
fn input_action(bindings: &[Binding], key: KeyEvent) -> Action {
    let modifiers = key.modifiers - KeyModifiers::SHIFT;
    let code = match key.code {
        KeyCode::Char(c) => KeyCode::Char(c.to_ascii_lowercase()),
        other => other,
    };
    bindings
        .iter()
        .find(|b| b.context == KeyContext::Input && b.code == code && b.modifiers == modifiers)
        .map_or_else(
            || Action::Type(super::terminal_keys::key_bytes(key)),
            |b| b.action.clone(),
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(code: KeyCode, modifiers: KeyModifiers) -> KeyEvent {
        KeyEvent::new(code, modifiers)
    }

    #[test]
    fn keys_map_to_actions_by_context() {
        let b = bindings();
        let plain = |c| key(KeyCode::Char(c), KeyModifiers::NONE);
        assert_eq!(
            action_for(&b, KeyContext::Normal, plain('t')),
            Some(Action::Term)
        );
        assert_eq!(
            action_for(
                &b,
                KeyContext::Normal,
                key(KeyCode::Char('K'), KeyModifiers::SHIFT)
            ),
            Some(Action::Kill)
        );
        assert_eq!(action_for(&b, KeyContext::Normal, plain('Z')), None);
        assert_eq!(
            action_for(&b, KeyContext::Prompt, plain('t')),
            Some(Action::Input('t'))
        );
        assert_eq!(
            action_for(&b, KeyContext::Confirm, plain('y')),
            Some(Action::Confirm)
        );
        assert_eq!(action_for(&b, KeyContext::Confirm, plain('t')), None);
        // Enter is the default answer, not a yes: a SIGKILL question has none.
        assert_eq!(
            action_for(
                &b,
                KeyContext::Confirm,
                key(KeyCode::Enter, KeyModifiers::NONE)
            ),
            Some(Action::Submit)
        );
        assert_eq!(
            action_for(
                &b,
                KeyContext::Normal,
                key(KeyCode::Char('c'), KeyModifiers::CONTROL)
            ),
            Some(Action::Quit)
        );
    }

    #[test]
    fn typing_turns_every_key_into_input_but_ctrl_a() {
        let b = bindings();
        let typed = |code, modifiers| action_for(&b, KeyContext::Input, key(code, modifiers));
        assert_eq!(
            typed(KeyCode::Char('a'), KeyModifiers::CONTROL),
            Some(Action::StopTyping)
        );
        assert_eq!(
            typed(
                KeyCode::Char('A'),
                KeyModifiers::CONTROL | KeyModifiers::SHIFT
            ),
            Some(Action::StopTyping)
        );
        assert_eq!(
            typed(KeyCode::Char('c'), KeyModifiers::CONTROL),
            Some(Action::Type(vec![3])),
            "Ctrl-c interrupts the command, not tether"
        );
        assert_eq!(
            typed(KeyCode::Char('q'), KeyModifiers::NONE),
            Some(Action::Type(b"q".to_vec()))
        );
        assert_eq!(
            typed(KeyCode::Up, KeyModifiers::NONE),
            Some(Action::Type(b"\x1b[A".to_vec()))
        );
        assert_eq!(
            typed(KeyCode::Esc, KeyModifiers::NONE),
            Some(Action::Type(b"\x1b".to_vec()))
        );
        assert_eq!(
            action_for(
                &b,
                KeyContext::Normal,
                key(KeyCode::Char('i'), KeyModifiers::NONE)
            ),
            Some(Action::StartTyping)
        );
    }

    #[test]
    fn output_view_and_copy_keys() {
        let b = bindings();
        let normal = |code| action_for(&b, KeyContext::Normal, key(code, KeyModifiers::NONE));
        assert_eq!(normal(KeyCode::Char('v')), Some(Action::ToggleScreen));
        assert_eq!(normal(KeyCode::Char('V')), Some(Action::SelectLines));
        assert_eq!(normal(KeyCode::Char('y')), Some(Action::Copy));
        assert_eq!(normal(KeyCode::Esc), Some(Action::Cancel));
        // y still answers a question.
        assert_eq!(
            action_for(
                &b,
                KeyContext::Confirm,
                key(KeyCode::Char('y'), KeyModifiers::NONE)
            ),
            Some(Action::Confirm)
        );
    }

    #[test]
    fn every_normal_action_is_described_once() {
        let b = bindings();
        for binding in b.iter().filter(|b| b.context == KeyContext::Normal) {
            let described = b
                .iter()
                .filter(|o| {
                    o.context == binding.context
                        && o.action == binding.action
                        && !o.description.is_empty()
                })
                .count();
            assert_eq!(
                described, 1,
                "{:?} must have exactly one description",
                binding.action
            );
        }
    }
}
