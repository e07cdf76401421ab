//! The command list's keys: fold a session, cycle the filter, toggle the order, dismiss
//! every ended command of a watch.

use super::{Effect, Geometry};
use crate::app::action::Action;
use crate::app::list::ListSort;
use crate::app::view::ViewState;
use crate::model::Model;

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
                    .filter(|&id| !model.commands[id].status.is_active())
                    .map(Effect::Dismiss),
            );
            view.message = Some(match effects.len() {
                0 => "nothing has ended: every command listed is running".into(),
                n => format!("dismissed {n} ended commands"),
            });
        }
        Action::ToggleFold => toggle_fold(view, geometry),
        Action::CycleFilter => {
            view.list.filter = view.list.filter.next();
            view.message = Some(format!(
                "the list shows {} commands (F: next)",
                view.list.filter.label()
            ));
        }
        Action::ToggleSort => {
            view.list.sort = match view.list.sort {
                ListSort::Start => ListSort::Cpu,
                ListSort::Cpu => ListSort::Start,
            };
            view.message = Some(match view.list.sort {
                ListSort::Cpu => "the list: busiest first, by CPU (o: as started)".into(),
                ListSort::Start => "the list: as the commands started (o: by CPU)".into(),
            });
        }
        _ => {}
    }
    effects
}

/// Folds the selected command's session under its header, or unfolds it.
fn toggle_fold(view: &mut ViewState, geometry: &Geometry) {
    let session = geometry.list.session_of(view.selected);
    let Some(session) = session.filter(|_| geometry.list.has_headers()) else {
        view.message = Some("one session listed: there is nothing to fold".into());
        return;
    };
    let folded = &mut view.list.folded;
    let name = crate::model::output::one_line(&session.name);
    view.message = Some(if folded.remove(&session.dir) {
        format!("{name} unfolded")
    } else {
        folded.insert(session.dir.clone());
        format!("{name} folded: {} commands", session.counts.total)
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::list::{ListFilter, ListRows};
    use crate::app::update::tests::{geometry, model};
    use crate::app::update::update;
    use crate::app::update::{NO_DISMISS, refusal};
    use crate::model::Mode;

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
                    command.status = crate::model::Status::FailedToStart;
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
        for filter in [ListFilter::Running, ListFilter::Failed, ListFilter::All] {
            update(&model, &mut view, &geometry, Action::CycleFilter);
            assert_eq!(view.list.filter, filter);
        }
        update(&model, &mut view, &geometry, Action::ToggleSort);
        assert_eq!(view.list.sort, ListSort::Cpu);
    }
}
