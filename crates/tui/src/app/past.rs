//! The time cursor's side of a frame: the model as the recording was at the cursor, rebuilt
//! only when the cursor moves, and what the panes draw besides it.

use super::App;
use super::view::{CursorContent, ToldEvent};

/// The entries after the cursor kept for the timeline, which shows at most a third of its
/// pane of them: more than the tallest pane's third.
const LATER_KEPT: usize = 128;
use tether_model::Model;

impl App {
    /// The model the panes show: the recording as it was at the time cursor, else the
    /// model itself.
    pub fn shown(&self) -> &Model {
        self.past.as_ref().map_or(&self.model, |(_, model)| model)
    }

    /// Follows the time cursor: the model at its moment and the frame's cursor content, or
    /// neither when it is off. `end_ms` is where the recording ends. Returns the moment.
    pub(super) fn prepare_cursor(&mut self, end_ms: u64) -> Option<u64> {
        let (Some(at), Some(recording)) = (self.view.time.at_ms, self.model.mode.recording())
        else {
            self.past = None;
            self.content.cursor = None;
            self.cursor_for = None;
            return None;
        };
        if self.past.as_ref().map(|(ms, _)| *ms) != Some(at) {
            let mut commands = recording.commands_at(at);
            // The selected command stays listed (`idle`) before it began: moving the cursor
            // never moves the selection.
            if let Some(selected) = commands.get_mut(self.view.selected) {
                selected.not_yet = false;
            }
            let model = Model {
                session_id: self.model.session_id.clone(),
                session_dir: self.model.session_dir.clone(),
                started_ms: self.model.started_ms,
                commands,
                mode: self.model.mode.without_recording(),
            };
            self.past = Some((at, model));
        }
        // The panel is the same while the moment and the selected command are.
        let key = (at, self.view.selected);
        if let (Some(cursor), true) = (self.content.cursor.as_mut(), self.cursor_for == Some(key)) {
            cursor.end_ms = end_ms.max(at);
            return Some(at);
        }
        self.cursor_for = Some(key);
        // Each event is told by its whole run (the model of the whole recording), so that it
        // reads the same wherever the cursor is.
        let runs = &self.model.commands;
        // What changed how a run went first: it is what `{` and `}` stop at; then an exit,
        // which a clean `exit 0` is without being notable.
        let mut events: Vec<_> = recording.events_at(at).collect();
        events.sort_by_key(|(_, e)| {
            let exit = matches!(e.kind, tether_protocol::protocol::EventKind::Exit { .. });
            (!tether_model::recording::is_notable(&e.kind), !exit)
        });
        let first = events.first().and_then(|(i, e)| {
            let run = runs.get(*i)?;
            Some((
                run.config.name.clone(),
                ToldEvent::of(run, e.ts_ms, &e.kind),
            ))
        });
        let later = runs
            .get(self.view.selected)
            .map(|run| {
                (run.timeline.iter())
                    .filter(|e| e.ts_ms > at)
                    .take(LATER_KEPT)
                    .map(|e| ToldEvent::of(run, e.ts_ms, &e.kind))
                    .collect()
            })
            .unwrap_or_default();
        self.content.cursor = Some(CursorContent {
            at_ms: at,
            end_ms: end_ms.max(at),
            events: events.len(),
            first,
            later,
        });
        Some(at)
    }
}
