use super::*;

const ANY: fn(&Action) -> bool = |_| true;

fn key(code: KeyCode, modifiers: KeyModifiers) -> KeyEvent {
    KeyEvent::new(code, modifiers)
}

/// What a key does in `context` where every action applies.
fn pressed(
    b: &[Binding],
    context: KeyContext,
    code: KeyCode,
    modifiers: KeyModifiers,
) -> Option<Action> {
    action_for(b, context, key(code, modifiers), &ANY)
}

fn unmodified(b: &[Binding], context: KeyContext, code: KeyCode) -> Option<Action> {
    pressed(b, context, code, KeyModifiers::NONE)
}

/// The first binding of `action`.
fn bound_to(b: &[Binding], action: Action) -> &Binding {
    b.iter()
        .find(|x| x.action == action)
        .unwrap_or_else(|| panic!("a key for {action:?}"))
}

#[test]
fn keys_map_to_actions_by_context() {
    let b = bindings();
    let plain = |context, c| unmodified(&b, context, KeyCode::Char(c));
    assert_eq!(plain(KeyContext::Normal, 't'), Some(Action::Term));
    assert_eq!(
        pressed(
            &b,
            KeyContext::Normal,
            KeyCode::Char('K'),
            KeyModifiers::SHIFT
        ),
        Some(Action::Kill)
    );
    assert_eq!(plain(KeyContext::Normal, 'Z'), None);
    assert_eq!(plain(KeyContext::Prompt, 't'), Some(Action::Input('t')));
    assert_eq!(plain(KeyContext::Confirm, 'y'), Some(Action::Confirm));
    assert_eq!(plain(KeyContext::Confirm, 't'), None);
    // Enter is the default answer, not a yes: a SIGKILL question has none.
    assert_eq!(
        unmodified(&b, KeyContext::Confirm, KeyCode::Enter),
        Some(Action::Submit)
    );
    assert_eq!(
        pressed(
            &b,
            KeyContext::Normal,
            KeyCode::Char('c'),
            KeyModifiers::CONTROL
        ),
        Some(Action::Quit)
    );
}

#[test]
fn typing_turns_every_key_into_input_but_ctrl_a() {
    let b = bindings();
    let typed = |code, modifiers| pressed(&b, KeyContext::Input, code, modifiers);
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
        unmodified(&b, KeyContext::Normal, KeyCode::Char('i')),
        Some(Action::StartTyping)
    );
}

#[test]
fn output_view_and_copy_keys() {
    let b = bindings();
    let normal = |code| unmodified(&b, KeyContext::Normal, code);
    assert_eq!(normal(KeyCode::Char('v')), Some(Action::ToggleScreen));
    assert_eq!(normal(KeyCode::Char('V')), Some(Action::SelectLines));
    assert_eq!(normal(KeyCode::Char('y')), Some(Action::Copy));
    assert_eq!(normal(KeyCode::Esc), Some(Action::Cancel));
    // y still answers a question.
    assert_eq!(
        unmodified(&b, KeyContext::Confirm, KeyCode::Char('y')),
        Some(Action::Confirm)
    );
}

#[test]
fn home_and_end_move_the_time_cursor_where_it_applies_and_scroll_elsewhere() {
    let b = bindings();
    let home = key(KeyCode::Home, KeyModifiers::NONE);
    let no_cursor = |a: &Action| !matches!(a, Action::TimeFirst | Action::TimeOff);
    assert_eq!(
        action_for(&b, KeyContext::Normal, home, &ANY),
        Some(Action::TimeFirst)
    );
    assert_eq!(
        action_for(&b, KeyContext::Normal, home, &no_cursor),
        Some(Action::Top)
    );
    // A key whose only action is refused still maps to it: the refusal says why.
    let bracket = key(KeyCode::Char('['), KeyModifiers::NONE);
    assert_eq!(
        action_for(&b, KeyContext::Normal, bracket, &|_| false),
        Some(Action::TimePrevEvent)
    );
    let top = bound_to(&b, Action::Top);
    // The live TUI: no time cursor, no attention key.
    let live = |a: &Action| no_cursor(a) && *a != Action::GoToAttention;
    assert_eq!(keys_label(&b, top, &live), "Home g");
    // A finished recording: Home moves the cursor.
    let finished = |a: &Action| *a != Action::GoToAttention;
    assert_eq!(keys_label(&b, top, &finished), "g");
}

#[test]
fn in_a_watch_g_goes_to_the_latest_attention_and_home_to_the_top() {
    let b = bindings();
    let g = key(KeyCode::Char('g'), KeyModifiers::NONE);
    let watch = |a: &Action| !a.moves_in_time();
    let live = |a: &Action| watch(a) && *a != Action::GoToAttention;
    assert_eq!(
        action_for(&b, KeyContext::Normal, g, &watch),
        Some(Action::GoToAttention)
    );
    assert_eq!(
        action_for(&b, KeyContext::Normal, g, &live),
        Some(Action::Top)
    );
    let top = bound_to(&b, Action::Top);
    assert_eq!(keys_label(&b, top, &watch), "Home");
    let attention = bound_to(&b, Action::GoToAttention);
    assert_eq!(keys_label(&b, attention, &watch), "g");
}

#[test]
fn down_is_labelled_with_both_keys() {
    let b = bindings();
    let down = bound_to(&b, Action::Down);
    assert_eq!(keys_label(&b, down, &ANY), "↓ j");
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

#[test]
fn ctrl_u_clears_a_prompt_and_up_recalls_the_last_search() {
    let b = bindings();
    assert_eq!(
        pressed(
            &b,
            KeyContext::Prompt,
            KeyCode::Char('u'),
            KeyModifiers::CONTROL
        ),
        Some(Action::ClearInput)
    );
    assert_eq!(
        unmodified(&b, KeyContext::Prompt, KeyCode::Char('u')),
        Some(Action::Input('u'))
    );
    assert_eq!(
        unmodified(&b, KeyContext::Prompt, KeyCode::Up),
        Some(Action::Up)
    );
}
