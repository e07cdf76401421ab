//! The TUI's state machine: the model, the view state, and what is read from disk for the
//! next frame. `run` drives it from one event loop.

pub mod action;
mod copy;
pub mod keymap;
pub mod layout;
mod run;
mod screen;
pub mod terminal_keys;
pub mod update;
pub mod view;
mod watch;

use std::collections::HashMap;

use ratatui::layout::Rect;

pub use run::{Draw, Launch, run_tui};

use self::action::Action;
use self::keymap::{Binding, KeyContext};
use self::update::{Effect, Geometry, update};
use self::view::{Dialog, FrameContent, Pane, PaneLines, ViewState};
use crate::model::output::{StreamFile, StyledLine, plain_text, text_width};
use crate::model::{CommandId, CommandState, Model};
use crate::protocol::{Event, ProcessEntry, Stream, WindowSize};
use crate::sampler::{ProcessInfo, Snapshot, build_tree};

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
    /// The stdout pane's text area as last drawn: the size of the commands' terminals.
    pub terminal_size: WindowSize,
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
            terminal_size: WindowSize::DEFAULT,
            screens: Default::default(),
            clipboard: Default::default(),
        }
    }

    pub fn key_context(&self) -> KeyContext {
        match &self.view.dialog {
            None if self.view.typing.is_some() => KeyContext::Input,
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
                let count = self.model.commands.len();
                if let Some(index) = layout::command_at(self.view.selected, a.commands, row, count)
                {
                    self.view.select_command(index);
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
        let selected = self.view.selected;
        if selected == index {
            // Its neighbour is another command: nothing of this one's view applies to it.
            self.view.reset_command_view();
        }
        if selected > index || selected >= self.model.commands.len() {
            // The same command one row up, or the neighbour of the last one.
            self.view.selected = selected.saturating_sub(1);
        }
        self.streams.clear();
    }

    /// A new sample of the processes; a command whose own process it shows stopped (state
    /// `T`) reads `stopped`.
    pub fn set_snapshot(&mut self, snapshot: Snapshot) {
        for command in &mut self.model.commands {
            let (Some(broker), Some(pid)) = (command.broker_pid, command.pid) else {
                continue;
            };
            let own = snapshot.trees.get(&broker);
            if let Some(process) = own.and_then(|tree| tree.iter().find(|p| p.pid == pid)) {
                command.observe_state(process.state);
            }
        }
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
                // Where on its line the match is, to scroll it into sight sideways.
                let column = match file.lines(line..line + 1) {
                    Ok(lines) => lines.first().and_then(|l| match_columns(l, &needle)),
                    Err(_) => None,
                };
                let rows = self.geometry.output_rows[i];
                let cols = self.geometry.output_cols[i];
                let wrap = self.view.wrap;
                let view = &mut self.view.outputs[i];
                view.matched = Some(line);
                view.follow = false;
                view.top = line.saturating_sub(rows / 2);
                if let (Some((start, end)), false) = (column, wrap) {
                    view.left = left_to_show(view.left, cols, start, end);
                }
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
        let mut cols_of = [0usize; 2];
        let mut widest = [0usize; 2];
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
                cols_of[i] = width;
                totals[i] = file.line_count();
                outputs[i] = visible_lines(file, &views[i], rows, width, wrap);
                outputs[i].bytes = file.len();
                widest[i] = outputs[i].lines.iter().map(line_width).max().unwrap_or(0);
            }
        }
        // Terminals follow the stdout pane, kept while another pane is zoomed over it.
        if let Some(area) = areas.map(|a| a.of(Pane::Stdout)) {
            let (cols, rows) = (area.width.saturating_sub(2), area.height.saturating_sub(2));
            if cols > 0 && rows > 0 {
                self.terminal_size = WindowSize { cols, rows };
            }
        }
        self.content.outputs = outputs;
        self.behind = behind;
        self.geometry.output_rows = rows_of;
        self.geometry.output_cols = cols_of;
        self.geometry.widest = widest;
        self.geometry.total_lines = totals;
        let panes =
            Stream::BOTH.map(|s| areas.map(|a| a.of(Pane::of_stream(s))).unwrap_or_default());
        self.prepare_screens(panes, std::time::Instant::now());
        self.content.tree = self.tree_rows();
        self.content.machine.clone_from(&self.snapshot.machine);
        // One or two small reads of the kernel's accounting, for the command on screen only.
        self.content.cgroup = self
            .model
            .commands
            .get(self.view.selected)
            .filter(|c| c.status.is_active())
            .and_then(|c| c.cgroup.as_deref())
            .and_then(|path| crate::cgroup::CommandCgroup::open_existing(path).ok())
            .map(|cgroup| cgroup.stats());
        self.geometry.tree_rows = areas.map_or(0, |a| a.tree.height.saturating_sub(3) as usize);
        self.geometry.timeline_rows = areas.map_or(0, |a| {
            layout::timeline_event_rows(a.timeline, self.model.commands.len())
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
        sid: broker,
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
            // What the broker recorded decides: in the command's session unless it escaped.
            sid: if entry.escaped { 0 } else { group.unwrap_or(0) },
            state: '-',
            cpu_percent: 0.0,
            rss_bytes: 0,
            start_ms: entry.start_ms,
            argv: entry.argv.clone(),
        }))
        .collect();
    build_tree(broker, &processes, group)
}

/// Columns a rendered line takes.
fn line_width(line: &StyledLine) -> usize {
    line.iter().map(|span| text_width(&span.text)).sum()
}

/// The columns (from, to) of the first match of `needle` in `line`, compared as search
/// compares (ignoring ASCII case).
fn match_columns(line: &StyledLine, needle: &str) -> Option<(usize, usize)> {
    let text = plain_text(line).to_ascii_lowercase();
    let at = text.find(&needle.to_ascii_lowercase())?;
    let start = text_width(&text[..at]);
    Some((start, start + text_width(&text[at..at + needle.len()])))
}

/// The first column to show so that columns `start..end` are in a pane `cols` wide that
/// now shows from `left`: unchanged if they are in sight already, else with the match a
/// third of the way in (at the left edge, for a match wider than that leaves).
fn left_to_show(left: usize, cols: usize, start: usize, end: usize) -> usize {
    if start >= left && end <= left + cols {
        return left;
    }
    let context = cols / 3;
    if end - start + context <= cols {
        start.saturating_sub(context)
    } else {
        start
    }
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
