//! The command list's rows: which commands show (the filter), in what order (the sort), under
//! which session headers (folded or not), with the counts the title and headers show.
//!
//! Built once when something it depends on changes, not every frame: a session of 10,000
//! commands scrolls at the speed of 10, as a frame draws only the rows on screen from here.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use tether_model::output::{one_line, text_width};
use tether_model::{CommandIndex, CommandState, Model};
use tether_protocol::CommandId;

/// Which commands the list shows (`F` cycles).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ListFilter {
    #[default]
    All,
    Running,
    Failed,
    /// Those with a moment that needs the operator now ([`CommandState::needs_you`]).
    NeedsYou,
}

impl ListFilter {
    const CYCLE: [ListFilter; 4] = [Self::All, Self::Running, Self::Failed, Self::NeedsYou];

    pub fn next(self) -> ListFilter {
        Self::CYCLE[(self as usize + 1) % Self::CYCLE.len()]
    }

    pub fn label(self) -> &'static str {
        match self {
            ListFilter::All => "all",
            ListFilter::Running => "running",
            ListFilter::Failed => "failed",
            ListFilter::NeedsYou => "needs you",
        }
    }

    pub fn shows(self, command: &CommandState) -> bool {
        match self {
            ListFilter::All => true,
            ListFilter::Running => command.status.is_active(),
            ListFilter::Failed => failed(command),
            ListFilter::NeedsYou => command.needs_you().is_some(),
        }
    }
}

/// The order of the commands inside each session (`o` toggles).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ListSort {
    /// As they started (the journal's order).
    #[default]
    Start,
    /// The busiest first: live commands by CPU %, then ended ones by CPU time.
    Cpu,
}

/// What the operator chose of the list: kept in the view state.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ListView {
    pub filter: ListFilter,
    pub sort: ListSort,
    /// Sessions folded under their header, by session directory.
    pub folded: BTreeSet<PathBuf>,
    /// An agent's set-up shells listed one by one, not folded into one row (`S`).
    pub show_setup: bool,
}

/// One row of the list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListRow {
    /// A session's header: an index into [`ListRows::sessions`].
    Session(usize),
    Command(CommandIndex),
    /// An agent's set-up shells that ended well, folded into one dim row (`2 set-up
    /// shells`) where the first of them would be: an index into [`ListRows::sessions`].
    Setup(usize),
}

/// What the failed filter shows and the title counts as failed: a run that ended badly, or a
/// command the launcher will not start (a dependency failed) or start again (it gave up),
/// as the status bar tells them.
fn failed(command: &CommandState) -> bool {
    command.is_failure() || command.plan.as_ref().is_some_and(|p| p.is_failure())
}

/// Commands running, failed, needing the operator, and in all.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counts {
    pub running: usize,
    pub failed: usize,
    pub needs_you: usize,
    pub total: usize,
}

impl Counts {
    fn add(&mut self, command: &CommandState) {
        self.running += usize::from(command.status.is_active());
        self.failed += usize::from(failed(command));
        self.needs_you += usize::from(command.needs_you().is_some());
        self.total += 1;
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SessionGroup {
    /// The session's directory (where its commands' journal directories are).
    pub dir: PathBuf,
    /// Its id, as the header shows it.
    pub name: String,
    /// What offsets in its rows count from: the session's start where the model knows it,
    /// else its first command's.
    pub started_ms: u64,
    pub counts: Counts,
    pub folded: bool,
    /// Its first command the filter shows, in the list's order: what a folded header selects.
    pub first: Option<CommandIndex>,
    /// Its set-up shells folded into one row (see [`ListRow::Setup`]).
    pub setup_folded: usize,
    header_row: Option<usize>,
}

/// The list as it is drawn and moved through.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ListRows {
    pub rows: Vec<ListRow>,
    pub sessions: Vec<SessionGroup>,
    /// Over every command, whatever the filter.
    pub counts: Counts,
    /// The command whose mark needs the operator most (by [`AttentionMark::urgency`]: the
    /// kind, then the latest), what the status bar names and `g` goes to first in a watch.
    pub latest_attention: Option<CommandIndex>,
    /// What a watch keeps selected while the operator has not moved the list: of the listed
    /// commands, one that needs the operator now (a runaway, a wait for input), else the one
    /// running that started last (not an agent's own row, a server the leftovers rule
    /// keeps, nor a command its agent went on from: they run in the background of the
    /// others), or under the CPU sort the busiest one
    /// running, which is listed first (in its session); with none running, the last to
    /// end but an agent, which ends after its commands (an ended session opens at its end).
    /// (The rows are built again when a command starts or ends: see [`fingerprint`].)
    pub followed: Option<CommandIndex>,
    /// Columns of the widest name, and of the widest number (`#123`).
    pub name_width: usize,
    pub number_width: usize,
    /// Columns of the widest state shown (`timed out`, `failed to start`): the rows are
    /// built again whenever a command ends, or what it left is paused or resumed or fewer,
    /// which is when a state gets wider.
    pub state_width: usize,
    /// Each command's row (`None`: filtered out or folded) and session.
    row_of: Vec<Option<usize>>,
    session_of: Vec<usize>,
    /// Whether sessions show as headers (see [`has_headers`]).
    headers: bool,
    /// What the rows were built from (see [`fingerprint`]).
    built_from: Option<(u64, ListView)>,
}

/// The session a command is of: its run's, or, for a command not started, the one it waits
/// in.
pub(crate) fn session_of(command: &CommandState) -> Option<&Path> {
    (command.journal_dir.as_deref())
        .and_then(Path::parent)
        .or(command.unstarted_in.as_deref())
}

/// The number of the command journaled in `dir`, from the directory's name (`03-build`).
pub(crate) fn number_of(dir: &Path) -> Option<u64> {
    dir.file_name()?.to_str().and_then(CommandId::number_of)
}

/// The session a command belongs to ([`session_of`]), or the model's own session for a
/// command not started yet.
fn session_dir<'m>(model: &'m Model, command: &'m CommandState) -> &'m Path {
    session_of(command).unwrap_or(&model.session_dir)
}

/// A cheap sum of what the rows depend on in the model: how many commands, each one's start,
/// whether it runs or failed, its attention marks, and under the CPU sort its CPU. One
/// pass, no allocation.
pub fn fingerprint(model: &Model, sort: ListSort) -> u64 {
    let mut hash = model.commands.len() as u64;
    let mut mix = |value: u64| {
        hash = (hash ^ value)
            .wrapping_mul(0x0100_0000_01b3)
            .rotate_left(17);
    };
    for command in &model.commands {
        let state = u64::from(command.status.is_active())
            | u64::from(command.is_failure()) << 1
            | u64::from(command.not_yet) << 2;
        mix(command.started_ms.unwrap_or(u64::MAX) << 3 | state);
        // What the state column and the name say that the above does not: readiness, the
        // launcher's word, the run (the column widths are taken from them).
        let ready = command
            .readiness
            .as_ref()
            .map_or(0, |m| 1 + u64::from(m.ready));
        let plan = command
            .plan
            .as_ref()
            .map_or(0, |p| p.short_label().len() as u64);
        // What a command left running: how many, and whether paused (`paused 10`).
        let left = match command.status {
            tether_model::Status::LeftRunning {
                processes, paused, ..
            } => 1 + u64::from(paused) + ((processes as u64) << 1),
            _ => 0,
        };
        mix(ready | plan << 2 | u64::from(command.run) << 8);
        mix(left);
        for mark in &command.attention {
            mix(mark.at_ms << 4 | (mark.kind as u64) << 1 | u64::from(mark.active));
        }
        if sort == ListSort::Cpu {
            mix(command.cpu_percent.map_or(0, |c| u64::from(c.to_bits())));
            mix(command.cpu_ms.unwrap_or(0));
        }
    }
    hash
}

impl ListRows {
    /// Whether these rows still show `model` as `view` asks.
    pub fn is_current(&self, model: &Model, view: &ListView) -> bool {
        self.built_from
            .as_ref()
            .is_some_and(|(print, built)| built == view && *print == fingerprint(model, view.sort))
    }

    pub fn build(model: &Model, view: &ListView) -> ListRows {
        let mut sessions: Vec<SessionGroup> = Vec::new();
        let mut session_of = Vec::with_capacity(model.commands.len());
        let mut members: Vec<Vec<CommandIndex>> = Vec::new();
        let mut counts = Counts::default();
        let mut latest_attention: Option<((u8, u64), CommandIndex)> = None;
        let (mut name_width, mut widest_number) = (4, 0);
        let mut state_width = 0;
        // Per session: whether an agent runs it (its own row is listed), and the latest
        // start of a command of it (see [`followed`]).
        let mut agent_starts: Vec<(bool, u64)> = Vec::new();
        for (id, command) in model.commands.iter().enumerate() {
            let dir = session_dir(model, command);
            // Commands come grouped by session: the last group is nearly always the one.
            let at = match sessions.iter().rposition(|s| s.dir == dir) {
                Some(at) => at,
                None => {
                    sessions.push(new_group(model, dir));
                    members.push(Vec::new());
                    agent_starts.push((false, 0));
                    sessions.len() - 1
                }
            };
            session_of.push(at);
            // The columns are as wide as the whole session's, whatever the time cursor lists.
            name_width = name_width.max(text_width(&one_line(&command.title())));
            // The number alone, from the directory's name (not the whole id: this runs for
            // every command at each change of a list of thousands).
            let number = command.journal_dir.as_deref().and_then(number_of);
            widest_number = widest_number.max(number.unwrap_or(id as u64 + 1));
            state_width = state_width.max(text_width(&command.short_label()));
            // At a time cursor, a command that had not begun was not listed yet.
            if command.not_yet {
                continue;
            }
            let starts = &mut agent_starts[at];
            if command.is_session_owner() {
                starts.0 = true;
            } else if let Some(started) = command.started_ms {
                starts.1 = starts.1.max(started);
            }
            let group = &mut sessions[at];
            // Offsets count from the session's start, as `tether sessions` and the exports
            // count them; a command of a session with no readable `session.json`, from the
            // earliest start listed.
            if dir != model.session_dir
                && let Some(start) = command.session_started_ms.or(command.started_ms)
            {
                group.started_ms = group.started_ms.min(start);
            }
            group.counts.add(command);
            counts.add(command);
            if let Some(mark) = command.needs_you() {
                // The most urgent; of two alike, the one listed last.
                if latest_attention.is_none_or(|(urgency, _)| mark.urgency() >= urgency) {
                    latest_attention = Some((mark.urgency(), id));
                }
            }
            if view.filter.shows(command) {
                members[at].push(id);
            }
        }
        let headers = has_headers(model, &sessions);
        let mut rows = Vec::with_capacity(model.commands.len() + sessions.len());
        let mut row_of = vec![None; model.commands.len()];
        for (at, (group, mut ids)) in sessions.iter_mut().zip(members).enumerate() {
            if view.sort == ListSort::Cpu {
                ids.sort_by(|a, b| cpu_order(&model.commands[*a], &model.commands[*b]));
            }
            group.first = ids.first().copied();
            group.folded = headers && view.folded.contains(&group.dir);
            // Under a filter, a session with nothing to show has no header either; nor, at a
            // time cursor, one none of whose commands had begun.
            let begun = group.counts.total > 0;
            if headers && begun && (view.filter == ListFilter::All || !ids.is_empty()) {
                group.header_row = Some(rows.len());
                rows.push(ListRow::Session(at));
            }
            if group.folded {
                continue;
            }
            for id in ids {
                if folds_away(&model.commands[id], view) {
                    if group.setup_folded == 0 {
                        rows.push(ListRow::Setup(at));
                    }
                    group.setup_folded += 1;
                    continue;
                }
                row_of[id] = Some(rows.len());
                rows.push(ListRow::Command(id));
            }
        }
        let went_on = |id: CommandIndex| {
            let (agent, latest) = agent_starts[session_of[id]];
            agent && model.commands[id].started_ms.is_some_and(|s| s < latest)
        };
        let followed = followed(model, &rows, view.sort, went_on);
        ListRows {
            rows,
            sessions,
            counts,
            latest_attention: latest_attention.map(|(_, id)| id),
            followed,
            name_width,
            state_width,
            number_width: 1 + widest_number.max(1).ilog10() as usize + 1,
            row_of,
            session_of,
            headers,
            built_from: Some((fingerprint(model, view.sort), view.clone())),
        }
    }

    /// Whether these rows were built at all (not before the first frame).
    pub fn is_built(&self) -> bool {
        self.built_from.is_some()
    }

    /// Whether sessions show as headers (more than one is listed, or one that is not the
    /// model's own: a watch).
    pub fn has_headers(&self) -> bool {
        self.headers
    }

    /// The row the selection is on: the selected command's, or the header it is folded
    /// under; `None` when the filter hides it.
    pub fn cursor_row(&self, selected: CommandIndex) -> Option<usize> {
        if let Some(row) = self.row_of.get(selected).copied().flatten() {
            return Some(row);
        }
        let group = self.sessions.get(*self.session_of.get(selected)?)?;
        group.header_row.filter(|_| group.folded)
    }

    /// The session of a command, if it is listed.
    pub fn session_of(&self, id: CommandIndex) -> Option<&SessionGroup> {
        self.sessions.get(*self.session_of.get(id)?)
    }

    /// The command a row selects: its own, or a folded session's first.
    pub fn command_of_row(&self, row: usize) -> Option<CommandIndex> {
        match *self.rows.get(row)? {
            ListRow::Command(id) => Some(id),
            ListRow::Session(at) => self.sessions[at].first.filter(|_| self.sessions[at].folded),
            ListRow::Setup(_) => None,
        }
    }

    /// The command `delta` rows from the selection (clamped to the list), skipping the
    /// headers of open sessions: those only label the rows under them.
    pub fn moved(&self, selected: CommandIndex, delta: i64) -> Option<CommandIndex> {
        let last = self.rows.len().checked_sub(1)?;
        let from = self.cursor_row(selected).unwrap_or(0) as i64;
        let target = from.saturating_add(delta).clamp(0, last as i64) as usize;
        let direction: i64 = if delta < 0 { -1 } else { 1 };
        // Onwards from the target first, then back, so that the ends are reached.
        let onwards = (0..=last as i64).map(|i| target as i64 + i * direction);
        let back = (1..=last as i64).map(|i| target as i64 - i * direction);
        onwards
            .chain(back)
            .filter(|r| (0..=last as i64).contains(r))
            .find_map(|r| self.command_of_row(r as usize))
    }

    /// The listed command nearest to `selected` (itself if it is listed): where the
    /// selection goes when the filter hides it.
    pub fn nearest(&self, selected: CommandIndex) -> Option<CommandIndex> {
        if self.cursor_row(selected).is_some() {
            return Some(selected);
        }
        (0..self.rows.len())
            .filter_map(|row| self.command_of_row(row))
            .min_by_key(|id| id.abs_diff(selected))
    }
}

fn new_group(model: &Model, dir: &Path) -> SessionGroup {
    let own = dir == model.session_dir;
    SessionGroup {
        dir: dir.to_path_buf(),
        name: dir
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
        started_ms: if own { model.started_ms } else { u64::MAX },
        ..SessionGroup::default()
    }
}

/// Whether `command` is one of an agent's set-up shells that the list folds into one row:
/// one that ended well. One that runs, failed or needs the operator is listed as any other.
fn folds_away(command: &CommandState, view: &ListView) -> bool {
    // Whether it is a set-up shell (its command line parsed) is asked last, of the few that
    // ended well.
    !view.show_setup
        && command.status != tether_model::Status::Idle
        && !command.status.is_active()
        && !command.is_failure()
        && command.needs_you().is_none()
        && command.is_setup()
}

/// What a watch follows ([`ListRows::followed`]), of the commands `rows` list.
fn followed(
    model: &Model,
    rows: &[ListRow],
    sort: ListSort,
    went_on: impl Fn(CommandIndex) -> bool,
) -> Option<CommandIndex> {
    let listed = || {
        rows.iter().filter_map(|row| match row {
            ListRow::Command(id) => Some((*id, &model.commands[*id])),
            ListRow::Session(_) | ListRow::Setup(_) => None,
        })
    };
    let running = listed().filter(|(_, c)| c.status.is_active());
    let last = |(id, c): &(CommandIndex, &CommandState)| (c.ended_ms, c.started_ms, *id);
    // What runs in the background of the others is not followed by start: an agent's own row
    // and a server the leftovers rule keeps run through the session, and following them
    // took the selection from the command that just ended up to an old row. So does a
    // command an agent went on from, one of its session started after it (Claude Code's
    // `run_in_background` task): an agent waits on one command at a time, and between two
    // the watch went up to that task and back down.
    let background = |id: CommandIndex, c: &CommandState| {
        c.is_session_owner()
            || matches!(c.status, tether_model::Status::LeftRunning { .. })
            || went_on(id)
    };
    // A command that needs the operator now (a runaway, a wait for input) comes before the
    // newest: the status bar names it, and the key pressed next is meant for it. Not the
    // agent's own wait for you: that is at its terminal, and its row is `g` away.
    let urgent = || {
        listed()
            .filter(|(_, c)| c.status.is_active() && !c.is_session_owner())
            .filter_map(|(id, c)| {
                let mark = c.needs_you().filter(|m| m.is_pressing())?;
                Some((mark.at_ms, id, c))
            })
            .max_by_key(|&(at, id, _)| (at, id))
            .map(|(_, id, c)| (id, c))
    };
    match sort {
        ListSort::Start => urgent().or_else(|| {
            running
                .filter(|(id, c)| !background(*id, c))
                .max_by_key(|(id, c)| (c.started_ms, *id))
        }),
        ListSort::Cpu => running.min_by(|(_, a), (_, b)| cpu_order(a, b)),
    }
    .or_else(|| {
        (listed().filter(|(_, c)| !c.is_session_owner()))
            .max_by_key(last)
            .or_else(|| listed().max_by_key(last))
    })
    .map(|(id, _)| id)
}

/// The busiest first: live commands by CPU %, then ended ones by CPU time, then the rest.
fn cpu_order(a: &CommandState, b: &CommandState) -> std::cmp::Ordering {
    let key = |c: &CommandState| match (c.status.is_active(), c.cpu_percent, c.cpu_ms) {
        (true, Some(percent), _) => (2, f64::from(percent)),
        (false, _, Some(ms)) => (1, ms as f64),
        _ => (0, 0.0),
    };
    let (ka, kb) = (key(a), key(b));
    kb.0.cmp(&ka.0).then(kb.1.total_cmp(&ka.1))
}

#[cfg(test)]
mod tests;

/// Sessions show as headers when the list holds more than one, or in a watch (whose model's
/// directory is `sessions/` itself, each session below it), which names its sessions by
/// their headers only.
fn has_headers(model: &Model, sessions: &[SessionGroup]) -> bool {
    sessions.len() > 1
        || sessions
            .iter()
            .any(|s| s.dir.parent() == Some(model.session_dir.as_path()))
}
