//! The launcher's word in a watch. A session that a `tether` launcher runs journals its plans
//! beside its commands (`launcher.jsonl`): a command waiting for a dependency or blocked by
//! one that failed, a restart to come, a command given up on. The watch shows them as the
//! launcher's own TUI does, and as `tether open` does once the session ended: a command that
//! has not started as a row of its own in its session, each run's plan in its state; and it
//! follows the file as it grows.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use super::Watch;
use crate::app::App;
use tether_model::CommandState;
use tether_model::output::one_line;
use tether_model::plan::{apply_to, unstarted};
use tether_os::journal::LauncherLine;
use tether_os::journal::reader::read_launcher_from;
use tether_os::journal::session_started_ms;

/// What a session's launcher journaled, as far as it was read.
pub(super) struct Plans {
    lines: Vec<LauncherLine>,
    /// Where the whole lines read end in `launcher.jsonl`.
    read_to: usize,
}

impl Watch {
    /// A followed session's `launcher.jsonl` is to be read (again) at the next settle.
    pub(super) fn plans_changed(&mut self, session: &Path) {
        self.plans_unread.insert(session.to_path_buf());
    }

    /// The rows of `session` changed (a run listed or read again): its plans are shown on
    /// them again at the next settle, if it has any.
    pub(super) fn rows_changed(&mut self, session: &Path) {
        if self.plans.contains_key(session) {
            self.plans_stale.insert(session.to_path_buf());
        }
    }

    /// Reads what is unread and shows the plans of sessions whose rows changed. Returns
    /// whether a row changed.
    pub(super) fn settle_plans(&mut self, app: &mut App) -> bool {
        let mut changed = false;
        for session in std::mem::take(&mut self.plans_unread) {
            let mut damage = Vec::new();
            // What was appended since the last read: the file is only appended to. A damaged
            // line is skipped, and said once.
            let from = self.plans.get(&session).map_or(0, |p| p.read_to);
            let (lines, read_to, whole) = read_launcher_from(&session, from, &mut damage);
            if damage.is_empty() {
                // Whole again: a later damage is said again.
                self.plans_damage_said.remove(&session);
            } else if let Some(damage) = damage.first()
                && self.plans_damage_said.insert(session.clone())
            {
                app.view.say(format!(
                    "{}: {}; the launcher's word may be missing from this session's rows",
                    one_line(&session.to_string_lossy()),
                    one_line(&damage.to_string()),
                ));
            }
            // A file that could not be read at all (unreadable, too large) keeps what was
            // shown from it.
            if !damage.is_empty() && lines.is_empty() && read_to == 0 {
                continue;
            }
            let new = match self.plans.get_mut(&session) {
                None if lines.is_empty() => continue,
                None => {
                    self.plans.insert(session.clone(), Plans { lines, read_to });
                    true
                }
                Some(plans) => {
                    plans.read_to = read_to;
                    if whole {
                        let new = plans.lines != lines;
                        plans.lines = lines;
                        new
                    } else {
                        let new = !lines.is_empty();
                        plans.lines.extend(lines);
                        new
                    }
                }
            };
            if new {
                self.plans_stale.insert(session);
            }
        }
        for session in std::mem::take(&mut self.plans_stale) {
            changed |= self.show_plans(&session, app);
        }
        changed
    }

    /// The session's plans as last read, on its rows: a row for each command not started
    /// (kept while it is not, so that a selection on it stays), and each row's plan.
    fn show_plans(&self, session: &Path, app: &mut App) -> bool {
        let Some(Plans { lines, .. }) = self.plans.get(session) else {
            return false;
        };
        let of_session = |c: &CommandState| run_in(c, session);
        let runs: Vec<(&str, Option<u64>)> = (app.model.commands.iter())
            .filter(|c| of_session(c))
            .map(|c| (c.config.name.as_str(), c.started_ms))
            .collect();
        let wanted = unstarted(lines, &runs);
        let names: HashSet<&str> = wanted.iter().map(|c| c.config.name.as_str()).collect();
        let going =
            |c: &CommandState| unstarted_in(c, session) && !names.contains(c.config.name.as_str());
        if app.model.commands.iter().any(going) {
            app.remove_commands(|_, c| going(c));
        }
        let shown: HashSet<String> = (app.model.commands.iter())
            .filter(|c| unstarted_in(c, session))
            .map(|c| c.config.name.clone())
            .collect();
        let started_ms = session_started_ms(session);
        let new: Vec<CommandState> = (wanted.into_iter())
            .filter(|c| !shown.contains(&c.config.name))
            .map(|mut c| {
                c.unstarted_in = Some(session.to_path_buf());
                c.session_started_ms = started_ms;
                c
            })
            .collect();
        if !new.is_empty() {
            let at = (app.model.commands.iter())
                .rposition(|c| of_session(c) || unstarted_in(c, session))
                .map_or(app.model.commands.len(), |i| i + 1);
            app.insert_commands(at, new);
        }
        let mut rows: Vec<&mut CommandState> = (app.model.commands.iter_mut())
            .filter(|c| run_in(c, session) || unstarted_in(c, session))
            .collect();
        for row in &mut rows {
            row.plan = None;
        }
        apply_to(&mut rows, lines, None);
        true
    }

    /// Forgets the plans of sessions gone, and their rows of commands not started.
    pub(super) fn drop_plans(&mut self, gone: &HashSet<PathBuf>, app: &mut App) -> usize {
        for dir in gone {
            self.plans.remove(dir);
            self.plans_unread.remove(dir);
            self.plans_stale.remove(dir);
            self.plans_damage_said.remove(dir);
        }
        app.remove_commands(|_, c| c.unstarted_in.as_ref().is_some_and(|s| gone.contains(s)))
    }
}

/// A run journaled in `session`.
fn run_in(command: &CommandState, session: &Path) -> bool {
    command.journal_dir.as_deref().and_then(Path::parent) == Some(session)
}

/// A command of `session` that its launcher has not started.
fn unstarted_in(command: &CommandState, session: &Path) -> bool {
    command.journal_dir.is_none() && command.unstarted_in.as_deref() == Some(session)
}
