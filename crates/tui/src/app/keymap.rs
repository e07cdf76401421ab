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
    /// The keys that do it, as the help screen names them in this order.
    pub keys: &'static [KeyCode],
    pub modifiers: KeyModifiers,
    pub action: Action,
    pub description: &'static str,
}

const fn bind(
    context: KeyContext,
    keys: &'static [KeyCode],
    action: Action,
    description: &'static str,
) -> Binding {
    Binding {
        context,
        keys,
        modifiers: KeyModifiers::NONE,
        action,
        description,
    }
}

// A binding a row, as a table reads: rustfmt would spread the longer ones over seven lines.
#[rustfmt::skip]
pub fn bindings() -> Vec<Binding> {
    use Action as A;
    use KeyCode as K;
    use KeyContext::Normal as N;
    vec![
        bind(N, &[K::Down, K::Char('j')], A::Down, "select next / scroll down"),
        bind(N, &[K::Up, K::Char('k')], A::Up, "select previous / scroll up"),
        bind(N, &[K::Tab], A::FocusNext, "focus next pane"),
        bind(N, &[K::BackTab], A::FocusPrev, "focus previous pane"),
        bind(N, &[K::PageDown], A::PageDown, "page down"),
        bind(N, &[K::PageUp], A::PageUp, "page up"),
        // The time cursor, before Home and End: in a recorded session they move the cursor
        // (g and G still scroll); elsewhere the cursor is refused and they scroll.
        bind(N, &[K::Char('[')], A::TimePrevEvent, "time cursor: previous event"),
        bind(N, &[K::Char(']')], A::TimeNextEvent, "time cursor: next event"),
        bind(N, &[K::Char('{')], A::TimePrevNotable, "previous signal/exit/error"),
        bind(N, &[K::Char('}')], A::TimeNextNotable, "next signal/exit/error"),
        bind(N, &[K::Char('<')], A::TimeStepBack, "step back in time"),
        bind(N, &[K::Char('>')], A::TimeStepForward, "step on in time"),
        bind(N, &[K::Char('-')], A::TimeStepShorter, "shorter time step"),
        bind(N, &[K::Char('+'), K::Char('=')], A::TimeStepLonger, "longer time step"),
        bind(N, &[K::Home], A::TimeFirst, "time cursor: first event"),
        bind(N, &[K::End], A::TimeOff, "time cursor off (the end)"),
        bind(N, &[K::Char(':')], A::TimeGoTo, "time cursor to +1:23, 83s…"),
        // In a watch, g goes to what needs the operator (there, Home goes to the top).
        bind(N, &[K::Char('g')], A::GoToAttention, "go to what needs you most"),
        bind(N, &[K::Home, K::Char('g')], A::Top, "go to the top"),
        bind(N, &[K::End, K::Char('G')], A::Bottom, "go to the bottom"),
        bind(N, &[K::Left, K::Char('h')], A::ScrollLeft, "scroll long lines left"),
        bind(N, &[K::Right, K::Char('l')], A::ScrollRight, "scroll long lines right"),
        bind(N, &[K::Char('0')], A::LineStart, "scroll to the line start"),
        bind(N, &[K::Char('$')], A::LineEnd, "scroll to the line end"),
        bind(N, &[K::Char('f')], A::ToggleFollow, "follow output on/off"),
        bind(N, &[K::Char('w')], A::ToggleWrap, "wrap long lines on/off"),
        bind(N, &[K::Char('@')], A::ToggleAbsoluteTimes, "times: offset / wall clock"),
        bind(N, &[K::Char('z')], A::Zoom, "zoom the focused pane"),
        bind(N, &[K::Char('c')], A::ToggleCores, "header: CPU per core on/off"),
        bind(N, &[K::Char('/')], A::Search, "search the focused output"),
        bind(N, &[K::Char('n')], A::SearchNext, "next match"),
        bind(N, &[K::Char('N')], A::SearchPrev, "previous match"),
        bind(N, &[K::Char('v')], A::ToggleScreen, "output as a screen / as lines"),
        bind(N, &[K::Char('m')], A::ToggleMerged, "stdout+stderr merged on/off"),
        bind(N, &[K::Char('T')], A::ToggleStamps, "times of output lines on/off"),
        bind(N, &[K::Char('V')], A::SelectLines, "select lines to copy"),
        bind(N, &[K::Char('y')], A::Copy, "copy lines or the screen"),
        bind(N, &[K::Esc], A::Cancel, "drop selection / back to list"),
        bind(N, &[K::Char('t')], A::Term, "SIGTERM the whole group"),
        bind(N, &[K::Char('K')], A::Kill, "SIGKILL the group (asks first)"),
        bind(N, &[K::Char('s')], A::Stop, "stop: TERM, grace, KILL"),
        bind(N, &[K::Char('x')], A::SignalProcess, "signal the selected process"),
        bind(N, &[K::Char('r')], A::Restart, "restart the command"),
        bind(N, &[K::Char('a')], A::NewCommand, "launch a new command"),
        bind(N, &[K::Char('d')], A::Dismiss, "dismiss an ended command"),
        bind(N, &[K::Char('D')], A::DismissEnded, "dismiss every ended one"),
        bind(N, &[K::Enter], A::Open, "open it (small screen) / fold"),
        bind(N, &[K::Char(' ')], A::ToggleFold, "fold/unfold the session"),
        bind(N, &[K::Char('F')], A::CycleFilter, "list: all/run/fail/needs you"),
        bind(N, &[K::Char('o')], A::ToggleSort, "list: by start / by CPU"),
        bind(N, &[K::Char('S')], A::ToggleSetup, "set-up shells: fold/show"),
        bind(N, &[K::Char('i')], A::StartTyping, "type into it (Ctrl-a ends)"),
        bind(N, &[K::Char('?')], A::Help, "help"),
        bind(N, &[K::Char('q')], A::Quit, "quit (asks if commands run)"),
        bind(KeyContext::Confirm, &[K::Char('y')], A::Confirm, "yes"),
        // Enter is the default answer, which only a harmless question has (quit: yes); it
        // never confirms a SIGKILL.
        bind(KeyContext::Confirm, &[K::Enter], A::Submit, "the default answer"),
        bind(KeyContext::Confirm, &[K::Char('n'), K::Esc], A::Cancel, "no, cancel"),
        bind(KeyContext::Prompt, &[K::Enter], A::Submit, "accept"),
        bind(KeyContext::Prompt, &[K::Esc], A::Cancel, "cancel"),
        bind(KeyContext::Prompt, &[K::Backspace], A::Backspace, "delete a character"),
        // Up recalls the last search, as a shell's history does (`/` starts empty).
        bind(KeyContext::Prompt, &[K::Up], A::Up, "the last search"),
        Binding {
            modifiers: KeyModifiers::CONTROL,
            ..bind(KeyContext::Prompt, &[K::Char('u')], A::ClearInput, "clear the line")
        },
        Binding {
            modifiers: KeyModifiers::CONTROL,
            ..bind(KeyContext::Input, &[K::Char('a')], A::StopTyping, "stop typing into the command")
        },
        bind(KeyContext::Help, &[K::Esc, K::Char('?'), K::Char('q')], A::Cancel, "close help"),
    ]
}

/// The action for a key in a context, if any. In a prompt, printable keys are text.
///
/// A key bound twice (Home: the time cursor's first event, or the top) means the first of
/// its actions that `applies` here; if none does, the first, whose refusal then says why.
pub fn action_for(
    bindings: &[Binding],
    context: KeyContext,
    key: KeyEvent,
    applies: &dyn Fn(&Action) -> bool,
) -> Option<Action> {
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
    let mut bound = bindings
        .iter()
        .filter(|b| b.context == context && b.keys.contains(&key.code) && b.modifiers == modifiers);
    let first = bound.clone().next();
    let found = bound
        .find(|b| applies(&b.action))
        .or(first)
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

/// How the help names the keys that do `binding`'s action here: each key bound to it that
/// `action_for` picks it for (Home is not "go to the top" where it moves the time cursor).
pub fn keys_label(
    bindings: &[Binding],
    binding: &Binding,
    applies: &dyn Fn(&Action) -> bool,
) -> String {
    let names: Vec<String> = bindings
        .iter()
        .filter(|b| b.context == binding.context && b.action == binding.action)
        .flat_map(|b| b.keys.iter().map(move |code| (b, *code)))
        .filter(|(b, code)| {
            let key = KeyEvent::new(*code, b.modifiers);
            action_for(bindings, b.context, key, applies).as_ref() == Some(&binding.action)
        })
        .map(|(_, code)| key_name(code))
        .collect();
    names.join(" ")
}

fn key_name(code: KeyCode) -> String {
    match code {
        KeyCode::Char(' ') => "Space".into(),
        KeyCode::Char(c) => c.to_string(),
        KeyCode::Down => "↓".into(),
        KeyCode::Up => "↑".into(),
        KeyCode::Left => "←".into(),
        KeyCode::Right => "→".into(),
        KeyCode::BackTab => "S-Tab".into(),
        KeyCode::PageDown => "PgDn".into(),
        KeyCode::PageUp => "PgUp".into(),
        other => other.to_string(),
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
        .find(|b| {
            b.context == KeyContext::Input && b.keys.contains(&code) && b.modifiers == modifiers
        })
        .map_or_else(
            || Action::Type(super::terminal_keys::key_bytes(key)),
            |b| b.action.clone(),
        )
}

#[cfg(test)]
mod tests;
