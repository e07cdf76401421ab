//! The TUI's state machine: the model, the view state, and what is read from disk for the
//! next frame. `run` drives it from one event loop.

pub mod action;
mod copy;
pub mod keymap;
mod run;
mod screen;
pub mod update;
pub mod view;
mod watch;

use std::collections::HashMap;

use ratatui::layout::Rect;

pub use run::{Launch, run_tui};

use self::action::Action;
use self::keymap::{Binding, KeyContext};
use self::update::{Effect, Geometry, update};
use self::view::{Dialog, FrameContent, Pane, PaneLines, ViewState};
use crate::model::output::{StreamFile, StyledLine};
use crate::model::{CommandId, CommandState, Model};
use crate::protocol::{Event, ProcessEntry, Stream};
use crate::sampler::{ProcessInfo, Snapshot, build_tree};
use crate::ui::layout;

/// Bytes of output indexed per frame at most, so a flood never freezes the screen.
const INDEX_BUDGET: u64 = 32 << 20;

pub struct App {
    pub model: Model,
    pub view: ViewState,
    pub bindings: Vec<Binding>,
    pub content: FrameContent,
    geometry: Geometry,
    /// Open log files of each command's current run.
    streams: HashMap<(CommandId, u32), [StreamFile; 2]>,
    snapshot: Snapshot,
    size: Rect,
    /// The output on screen has more bytes than are indexed yet: draw again soon.
    pub behind: bool,
    screens: screen::PaneScreens,
    clipboard: copy::ClipboardOut,
}

impl App {
    pub fn new(model: Model) -> App {
        App {
            model,
            view: ViewState::default(),
            bindings: keymap::bindings(),
            content: FrameContent::default(),
            geometry: Geometry::default(),
            streams: HashMap::new(),
            snapshot: Snapshot::default(),
            size: Rect::default(),
            behind: false,
            screens: Default::default(),
            clipboard: Default::default(),
        }
    }

    pub fn key_context(&self) -> KeyContext {
        match &self.view.dialog {
            None => KeyContext::Normal,
            Some(Dialog::Help) => KeyContext::Help,
            Some(Dialog::ConfirmKill { .. } | Dialog::ConfirmQuit { .. }) => KeyContext::Confirm,
            Some(_) => KeyContext::Prompt,
        }
    }

    /// Applies an action; returns what must be done outside (launching, sending, quitting).
    pub fn handle(&mut self, action: Action) -> Vec<Effect> {
        if self.view.dialog.is_none() {
            self.view.message = None;
        }
        if let Action::ScrollAt { column, row, .. } | Action::ClickAt { column, row } = action {
            // A dialog owns the screen: the mouse must not change what it acts on.
            if self.view.dialog.is_some() {
                return Vec::new();
            }
            let areas = layout::areas(self.size, self.view.zoom.then_some(self.view.focus));
            let Some(pane) = areas.and_then(|a| a.pane_at(column, row)) else {
                return Vec::new();
            };
            self.view.focus = pane;
            if let (Action::ClickAt { .. }, Pane::Commands, Some(a)) = (&action, pane, areas) {
                // Rows start below the border and the header.
                let skip = crate::ui::command_list::first_visible(self.view.selected, a.commands);
                let index = skip + row.saturating_sub(a.commands.y + 2) as usize;
                if index < self.model.commands.len() && index != self.view.selected {
                    self.view.selected = index;
                    self.view.outputs = Default::default();
                    self.view.tree_selected = 0;
                }
            }
        }
        update(&self.model, &mut self.view, &self.geometry, action)
    }

    /// An event from the broker of `command`'s run `run`; stale runs are ignored.
    pub fn apply_event(&mut self, command: CommandId, run: u32, event: &Event) {
        if let Some(c) = self.model.commands.get_mut(command) {
            if c.run == run {
                c.apply(event);
            }
        }
    }

    /// Puts a command on the list at `index` (one another process started, in `tether
    /// watch`); the selection stays on the command it was on.
    pub fn insert_command(&mut self, index: usize, command: CommandState) {
        let index = index.min(self.model.commands.len());
        let had_any = !self.model.commands.is_empty();
        self.model.commands.insert(index, command);
        if had_any && index <= self.view.selected {
            self.view.selected += 1;
        }
        // Open logs are keyed by position.
        self.streams.clear();
    }

    /// Takes a command off the list; the selection moves to its neighbour.
    pub fn remove_command(&mut self, index: usize) {
        if index >= self.model.commands.len() {
            return;
        }
        self.model.commands.remove(index);
        if self.view.selected == index {
            self.view.outputs = Default::default();
            self.view.tree_selected = 0;
        }
        if self.view.selected > index || self.view.selected >= self.model.commands.len() {
            self.view.selected = self.view.selected.saturating_sub(1);
        }
        self.streams.clear();
    }

    pub fn set_snapshot(&mut self, snapshot: Snapshot) {
        self.snapshot = snapshot;
    }

    /// Brokers whose trees the sampler should watch.
    pub fn brokers(&self) -> Vec<i32> {
        self.model
            .commands
            .iter()
            .filter(|c| c.status.is_active())
            .filter_map(|c| c.broker_pid)
            .collect()
    }

    /// Searches the stream for the current needle from the current match (or the end).
    pub fn search(&mut self, stream: Stream, forward: bool) {
        let i = stream as usize;
        let Some(needle) = self.view.outputs[i].search.clone() else {
            return;
        };
        let matched = self.view.outputs[i].matched;
        let Some(files) = self.current_streams() else {
            return;
        };
        let file = &mut files[i];
        let total = file.line_count();
        let found = match (matched, forward) {
            (Some(0), false) => Ok(None),
            (Some(line), true) => file.find(&needle, line + 1, true),
            (Some(line), false) => file.find(&needle, line - 1, false),
            (None, _) => file.find(&needle, total.saturating_sub(1), false),
        };
        match found {
            Ok(Some(line)) => {
                let rows = self.geometry.output_rows[i];
                let view = &mut self.view.outputs[i];
                view.matched = Some(line);
                view.follow = false;
                view.top = line.saturating_sub(rows / 2);
            }
            Ok(None) => {
                self.view.message = Some(format!(
                    "`{needle}` not found {}",
                    if forward { "below" } else { "above" }
                ));
            }
            Err(err) => self.view.message = Some(format!("search failed: {err}")),
        }
    }

    fn current_streams(&mut self) -> Option<&mut [StreamFile; 2]> {
        let id = self.view.selected;
        let command = self.model.commands.get(id)?;
        let dir = command.journal_dir.clone()?;
        Some(
            self.streams
                .entry((id, command.run))
                .or_insert_with(|| Stream::BOTH.map(|s| StreamFile::new(dir.join(s.file_name())))),
        )
    }

    /// Reads what the next frame shows: visible output lines and the selected tree.
    pub fn prepare(&mut self, size: Rect, now_ms: u64) {
        self.size = size;
        self.content.now_ms = now_ms;
        let areas = layout::areas(size, self.view.zoom.then_some(self.view.focus));
        let wrap = self.view.wrap;
        // What the files hold: past a cap, bytes are counted but not stored.
        let lens = self.model.commands.get(self.view.selected).map(|c| {
            Stream::BOTH.map(|s| {
                let i = s as usize;
                c.capped[i].map_or(c.bytes[i], |(_, stored)| c.bytes[i].min(stored))
            })
        });
        let current = self
            .model
            .commands
            .get(self.view.selected)
            .map(|c| (self.view.selected, c.run));
        // Only the command on screen keeps its files open and indexed.
        self.streams.retain(|key, _| Some(*key) == current);
        let mut outputs: [PaneLines; 2] = Default::default();
        let mut rows_of = [0usize; 2];
        let mut totals = [0usize; 2];
        let views = self.view.outputs.clone();
        let mut behind = false;
        if let (Some(lens), Some(files)) = (lens, self.current_streams()) {
            for stream in Stream::BOTH {
                let i = stream as usize;
                let file = &mut files[i];
                if file.len() < lens[i] {
                    let caught_up = file.refresh_within(lens[i], INDEX_BUDGET).unwrap_or(true);
                    behind |= !caught_up;
                }
                let area = areas
                    .map(|a| a.of(Pane::of_stream(stream)))
                    .unwrap_or_default();
                let rows = area.height.saturating_sub(2) as usize;
                let width = area.width.saturating_sub(2) as usize;
                rows_of[i] = rows;
                totals[i] = file.line_count();
                outputs[i] = visible_lines(file, &views[i], rows, width, wrap);
                outputs[i].bytes = file.len();
            }
        }
        self.content.outputs = outputs;
        self.behind = behind;
        self.geometry.output_rows = rows_of;
        self.geometry.total_lines = totals;
        let panes =
            Stream::BOTH.map(|s| areas.map(|a| a.of(Pane::of_stream(s))).unwrap_or_default());
        self.prepare_screens(panes, std::time::Instant::now());
        self.content.tree = self.tree_rows();
        self.geometry.tree_rows = areas.map_or(0, |a| a.tree.height.saturating_sub(3) as usize);
        self.geometry.timeline_rows = areas.map_or(0, |a| {
            crate::ui::timeline::event_rows(a.timeline, self.model.commands.len())
        });
        if !self.content.tree.is_empty() {
            self.view.tree_selected = self.view.tree_selected.min(self.content.tree.len() - 1);
        }
        self.geometry.tree_processes = self
            .content
            .tree
            .iter()
            .map(|row| (row.depth > 0).then(|| (row.process.pid, row.process.argv.join(" "))))
            .collect();
    }

    /// The selected command's tree: sampled if the sampler has it, else the broker's own
    /// record (without CPU and memory); once the command has ended, every process the broker
    /// saw during the run (state `-`).
    fn tree_rows(&self) -> Vec<crate::sampler::TreeRow> {
        let Some(command) = self.model.commands.get(self.view.selected) else {
            return Vec::new();
        };
        let Some(broker) = command.broker_pid else {
            return Vec::new();
        };
        let group = command.pid;
        // A live command is sampled, whoever started it; a post-mortem shows what was recorded.
        let sampled =
            command.status.is_active() && (!self.model.recorded || self.model.controllable);
        if !sampled {
            let entries = if command.status.is_active() {
                &command.tree
            } else {
                &command.seen
            };
            return recorded_tree(broker, entries, group, command.started_ms.unwrap_or(0));
        }
        match self.snapshot.trees.get(&broker) {
            Some(processes) if !processes.is_empty() => build_tree(broker, processes, group),
            _ => recorded_tree(
                broker,
                &command.tree,
                group,
                command.started_ms.unwrap_or(0),
            ),
        }
    }
}

/// A tree from the broker's records, under a row for the broker itself.
fn recorded_tree(
    broker: i32,
    entries: &[ProcessEntry],
    group: Option<i32>,
    started_ms: u64,
) -> Vec<crate::sampler::TreeRow> {
    if entries.is_empty() {
        return Vec::new();
    }
    let root = ProcessInfo {
        pid: broker,
        ppid: 0,
        pgid: broker,
        state: '-',
        cpu_percent: 0.0,
        rss_bytes: 0,
        start_ms: started_ms,
        argv: vec!["tether".into(), "broker".into()],
    };
    let processes: Vec<ProcessInfo> = std::iter::once(root)
        .chain(entries.iter().map(|entry| ProcessInfo {
            pid: entry.pid,
            ppid: entry.ppid,
            pgid: entry.pgid,
            state: '-',
            cpu_percent: 0.0,
            rss_bytes: 0,
            start_ms: entry.start_ms,
            argv: entry.argv.clone(),
        }))
        .collect();
    build_tree(broker, &processes, group)
}

/// The rows an output pane shows: the end when following, else from its top line; with
/// wrapping, each line cut into rows by display width, as many as fit.
fn visible_lines(
    file: &mut StreamFile,
    view: &view::OutputView,
    rows: usize,
    width: usize,
    wrap: bool,
) -> PaneLines {
    let total = file.line_count();
    let mut pane = PaneLines {
        total,
        ..PaneLines::default()
    };
    if rows == 0 || total == 0 {
        return pane;
    }
    let rows_of = |line: StyledLine| -> Vec<StyledLine> {
        if wrap {
            crate::model::output::wrap(&line, width)
        } else {
            vec![line]
        }
    };
    // Every line takes at least one row, so `rows` lines always fill the pane.
    let first = if view.follow {
        total.saturating_sub(rows)
    } else {
        view.top.min(total - 1)
    };
    let lines = file.lines(first..first + rows).unwrap_or_default();
    let mut picked: Vec<(usize, StyledLine)> = lines
        .into_iter()
        .enumerate()
        .flat_map(|(i, line)| rows_of(line).into_iter().map(move |row| (first + i, row)))
        .collect();
    if view.follow {
        let excess = picked.len().saturating_sub(rows);
        picked.drain(..excess);
    } else {
        picked.truncate(rows);
    }
    pane.first = picked.first().map_or(0, |(n, _)| *n);
    (pane.numbers, pane.lines) = picked.into_iter().unzip();
    pane
}
