//! The command list's keys: fold a session, cycle the filter, toggle the order, dismiss
//! every ended command of a watch, go to what needs the operator most.

use super::{Effect, Geometry};
use crate::app::action::Action;
use std::path::Path;

use crate::app::list::{ListFilter, ListSort};
use crate::app::view::ViewState;
use tether_model::{CommandIndex, Model};

pub(super) fn update(
    model: &Model,
    view: &mut ViewState,
    geometry: &Geometry,
    action: &Action,
) -> Vec<Effect> {
    let mut effects = Vec::new();
    match action {
        Action::DismissEnded => {
            // From the end, so that each index still names its command when it is taken.
            let ended = (0..model.commands.len()).rev();
            effects.extend(
                ended
                    .filter(|&id| {
                        let c = &model.commands[id];
                        !c.status.is_active() && c.journal_dir.is_some() && !super::waits(c)
                    })
                    .map(Effect::Dismiss),
            );
            view.say(match effects.len() {
                0 => "nothing to dismiss: every command listed runs or waits to start".into(),
                n => format!(
                    "dismissed {}",
                    crate::ui::format::count(n, "ended command", "ended commands")
                ),
            });
        }
        Action::ToggleFold => toggle_fold(view, geometry),
        Action::GoToAttention => go_to_attention(model, view),
        Action::CycleFilter => {
            view.list.filter = view.list.filter.next();
            view.say(match view.list.filter {
                ListFilter::NeedsYou => {
                    "the list shows the commands that need you (F: next)".into()
                }
                filter => format!("the list shows {} commands (F: next)", filter.label()),
            });
        }
        Action::ToggleSetup => {
            view.list.show_setup = !view.list.show_setup;
            view.say(if view.list.show_setup {
                "the list shows an agent's set-up shells one by one (S: fold them)"
            } else {
                "an agent's set-up shells that ended well are folded into one row (S: show)"
            });
        }
        Action::ToggleSort => {
            let (sort, said) = match view.list.sort {
                ListSort::Start => (
                    ListSort::Cpu,
                    "the list: busiest first, by CPU (o: as started)",
                ),
                ListSort::Cpu => (
                    ListSort::Start,
                    "the list: as the commands started (o: by CPU)",
                ),
            };
            view.list.sort = sort;
            view.say(said);
        }
        _ => {}
    }
    effects
}

/// Selects the command that needs the operator most (a wait for input or a runaway before a
/// failure, then the latest: `AttentionMark::urgency`); `g` again right after, the next in
/// that order (round to the first again). Whatever the filter and the folding hid is shown,
/// and the status line says how to reach it from a shell. A first `g` on the most urgent,
/// selected by the watch's following or by hand, stays there: the key after it (`s`) is
/// meant for that command.
fn go_to_attention(model: &Model, view: &mut ViewState) {
    let mut marked: Vec<((u8, u64), CommandIndex)> = (model.commands.iter().enumerate())
        .filter_map(|(id, c)| c.needs_you().map(|mark| (mark.urgency(), id)))
        .collect();
    // The most urgent first; of two alike, the one listed last (as the status bar names it).
    marked.sort_unstable_by(|a, b| b.cmp(a));
    let next = match marked.iter().position(|&(_, id)| id == view.selected) {
        Some(at) if view.attention_cycle => (at + 1) % marked.len(),
        _ => 0,
    };
    let Some(&(_, id)) = marked.get(next) else {
        view.say("nothing needs you now");
        return;
    };
    let command = &model.commands[id];
    view.select_command(id);
    view.list_moved = true;
    if !view.list.filter.shows(command) {
        view.list.filter = ListFilter::NeedsYou;
    }
    if let Some(session) = command.journal_dir.as_deref().and_then(Path::parent) {
        view.list.folded.remove(session);
    }
    view.message = command.needs_you().map(|mark| {
        let target = command.id().map(|id| id.target());
        let target = target.as_deref().unwrap_or(&command.config.name);
        let mut text = format!("{target} {}: ", command.config.name);
        // A detail that begins with the mark's words says them (`over budget (max_cpu)
        // after 504ms`): not twice.
        match (mark.words(), mark.detail.as_str()) {
            (words, detail) if detail.starts_with(words) => text.push_str(detail),
            (words, "") => text.push_str(words),
            (words, detail) => text.push_str(&format!("{words} ({detail})")),
        }
        if marked.len() > 1 {
            text.push_str(&format!(" · g: the next ({} in all)", marked.len()));
        }
        // Last, in backticks: a narrow status bar keeps it whole and cuts what comes before.
        if command.status.is_active() {
            text.push_str(&format!(" · from a shell: `tether stop {target}`"));
        }
        text
    });
}

/// Folds the selected command's session under its header, or unfolds it.
fn toggle_fold(view: &mut ViewState, geometry: &Geometry) {
    let session = geometry.list.session_of(view.selected);
    let Some(session) = session.filter(|_| geometry.list.has_headers()) else {
        view.say(super::NO_FOLD);
        return;
    };
    let folded = &mut view.list.folded;
    let name = tether_model::output::one_line(&session.name);
    let said = if folded.remove(&session.dir) {
        format!("{name} unfolded")
    } else {
        folded.insert(session.dir.clone());
        format!("{name} folded: {} commands", session.counts.total)
    };
    view.say(said);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::list::ListRows;
    use crate::app::update::tests::{geometry, model};
    use crate::app::update::update;
    use crate::app::update::{NO_DISMISS, refusal};
    use tether_model::Mode;
    use tether_model::command::AttentionMark;
    use tether_protocol::protocol::AttentionKind;

    /// A watch of two sessions: a running command and an ended one in each.
    fn watched_sessions() -> Model {
        let mut model = model(true, true);
        model.mode = Mode::Watched;
        let job = model.commands[0].clone();
        model.commands = ["/s/a/01-up", "/s/a/02-done", "/s/b/01-up", "/s/b/02-done"]
            .iter()
            .map(|dir| {
                let mut command = job.clone();
                command.journal_dir = Some((*dir).into());
                if dir.ends_with("done") {
                    command.status = tether_model::Status::FailedToStart;
                }
                command
            })
            .collect();
        model
    }

    fn with_list(model: &Model, view: &ViewState) -> Geometry {
        Geometry {
            list: std::sync::Arc::new(ListRows::build(model, &view.list)),
            ..geometry()
        }
    }

    #[test]
    fn capital_d_dismisses_every_ended_command_from_the_last() {
        let model = watched_sessions();
        let mut view = ViewState::default();
        let effects = update(&model, &mut view, &geometry(), Action::DismissEnded);
        assert_eq!(effects, vec![Effect::Dismiss(3), Effect::Dismiss(1)]);
        let recorded = crate::app::update::tests::model(true, false);
        assert_eq!(refusal(&recorded, &Action::DismissEnded), Some(NO_DISMISS));
    }

    #[test]
    fn a_session_folds_under_its_header_and_the_keys_move_over_it() {
        let model = watched_sessions();
        let mut view = ViewState::default();
        let unfolded = with_list(&model, &view);
        update(&model, &mut view, &unfolded, Action::ToggleFold);
        assert!(view.list.folded.contains(std::path::Path::new("/s/a")));
        assert!(
            view.message
                .as_deref()
                .unwrap()
                .contains("folded: 2 commands")
        );
        // Folded: down from a's header goes to b's first command.
        let geometry = with_list(&model, &view);
        update(&model, &mut view, &geometry, Action::Down);
        assert_eq!(view.selected, 2);
        update(&model, &mut view, &geometry, Action::Up);
        assert_eq!(view.selected, 0, "a's header stands for its first command");
        update(&model, &mut view, &geometry, Action::ToggleFold);
        assert!(view.list.folded.is_empty(), "unfolded again");
    }

    #[test]
    fn the_filter_cycles_and_the_sort_toggles() {
        let model = watched_sessions();
        let mut view = ViewState::default();
        let geometry = geometry();
        let filters = [
            ListFilter::Running,
            ListFilter::Failed,
            ListFilter::NeedsYou,
            ListFilter::All,
        ];
        for filter in filters {
            update(&model, &mut view, &geometry, Action::CycleFilter);
            assert_eq!(view.list.filter, filter);
        }
        update(&model, &mut view, &geometry, Action::ToggleSort);
        assert_eq!(view.list.sort, ListSort::Cpu);
    }

    fn mark(model: &mut Model, id: usize, kind: AttentionKind, at_ms: u64) {
        model.commands[id].mark_attention(AttentionMark {
            kind,
            detail: format!("seen at {at_ms}"),
            at_ms,
            active: true,
        });
    }

    #[test]
    fn g_goes_to_what_needs_the_operator_most_then_on() {
        let mut model = watched_sessions();
        mark(&mut model, 0, AttentionKind::NeedsInput, 100);
        mark(&mut model, 2, AttentionKind::Runaway, 200);
        // Later than the wait for input, but a failure: after it.
        mark(&mut model, 3, AttentionKind::Failed, 150);
        // An episode of a command that has ended no longer needs anyone.
        mark(&mut model, 1, AttentionKind::Quiet, 300);
        let mut view = ViewState::default();
        // From a command that needs nobody: `g` starts at the most urgent.
        view.select_command(1);
        view.list.filter = ListFilter::Running;
        view.list.folded.insert("/s/b".into());
        let geometry = geometry();
        update(&model, &mut view, &geometry, Action::GoToAttention);
        assert_eq!(view.selected, 2);
        assert!(view.list.folded.is_empty(), "its session unfolded");
        assert_eq!(
            view.list.filter,
            ListFilter::Running,
            "it is running: shown"
        );
        let said = view.message.clone().unwrap();
        assert!(
            said.starts_with("b/01 job: runaway (seen at 200)"),
            "{said}"
        );
        assert!(said.contains("tether stop b/01"), "{said}");
        assert!(said.contains("3 in all"), "{said}");
        update(&model, &mut view, &geometry, Action::GoToAttention);
        assert_eq!(
            view.selected, 0,
            "the wait for input, before the later failure"
        );
        update(&model, &mut view, &geometry, Action::GoToAttention);
        assert_eq!(view.selected, 3);
        assert_eq!(
            view.list.filter,
            ListFilter::NeedsYou,
            "a failed one is shown"
        );
        let said = view.message.clone().unwrap();
        assert!(!said.contains("tether stop"), "it has ended: {said}");
        update(&model, &mut view, &geometry, Action::GoToAttention);
        assert_eq!(view.selected, 2, "round to the first again");
        // The filter lists what needs the operator, and the rows know the latest.
        let rows = ListRows::build(&model, &view.list);
        let listed: Vec<_> = (0..rows.rows.len())
            .filter_map(|r| rows.command_of_row(r))
            .collect();
        assert_eq!(listed, [0, 2, 3]);
        assert_eq!(rows.latest_attention, Some(2));
        assert_eq!(rows.counts.needs_you, 3);
        let per_session: Vec<usize> = rows.sessions.iter().map(|s| s.counts.needs_you).collect();
        assert_eq!(per_session, [1, 2], "each header counts its own");
    }

    /// The watch selected the runaway (or the operator did): `g` names it and stays, so
    /// that the `s` after it stops the runaway, not the next command that needs anyone.
    #[test]
    fn a_first_g_stays_on_the_most_urgent_where_it_is_selected() {
        let mut model = watched_sessions();
        mark(&mut model, 0, AttentionKind::Finished, 300);
        mark(&mut model, 2, AttentionKind::Runaway, 200);
        let mut view = ViewState::default();
        view.select_command(2);
        let geometry = geometry();
        update(&model, &mut view, &geometry, Action::GoToAttention);
        assert_eq!(view.selected, 2, "the runaway, still");
        let said = view.message.clone().unwrap();
        assert!(said.contains("runaway"), "{said}");
        // A resize between is no key: g again goes on.
        update(&model, &mut view, &geometry, Action::Resize);
        update(&model, &mut view, &geometry, Action::GoToAttention);
        assert_eq!(view.selected, 0, "g again: the next");
        // Any other key between: the most urgent first again.
        update(&model, &mut view, &geometry, Action::Down);
        update(&model, &mut view, &geometry, Action::GoToAttention);
        assert_eq!(view.selected, 2);
    }

    #[test]
    fn g_with_nothing_to_go_to_says_so_and_is_the_top_outside_a_watch() {
        let model = watched_sessions();
        let mut view = ViewState::default();
        update(&model, &mut view, &geometry(), Action::GoToAttention);
        assert_eq!(view.message.as_deref(), Some("nothing needs you now"));
        let tui = crate::app::update::tests::model(false, true);
        assert_eq!(
            refusal(&tui, &Action::GoToAttention),
            Some(crate::app::update::NO_ATTENTION_KEY)
        );
    }
}
