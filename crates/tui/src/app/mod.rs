//! The TUI's state machine: the model, the view state, and what is read from disk for the
//! next frame. `run` starts it, `event_loop` drives it, `runner` carries out its effects.

pub mod action;
mod changes;
mod copy;
mod event_loop;
mod input_batch;
pub mod keymap;
mod launcher;
pub mod layout;
pub mod list;
mod past;
mod run;
mod runner;
mod screen;
mod search;
mod streams;
mod tell;
mod terminal_guard;
pub mod terminal_keys;
pub mod update;
pub mod view;
mod watch;

use std::collections::HashMap;

use ratatui::layout::Rect;

pub use run::{Launch, run_tui};

use self::action::Action;
use self::keymap::{Binding, KeyContext};
use self::streams::{OpenStreams, into_rows};
use self::update::{Effect, Geometry, update};
use self::view::{Dialog, FrameContent, Pane, ViewState};
use tether_model::output::{StyledLine, text_width};
use tether_model::{CommandIndex, CommandState, Model};
use tether_os::journal::read_result;
use tether_os::sampler::{ProcessInfo, Snapshot, build_tree};
use tether_protocol::protocol::{Event, EventKind, ProcessEntry, Stream, WindowSize};

/// Bytes of output indexed per frame at most, so a flood never freezes the screen.
const INDEX_BUDGET: u64 = 32 << 20;
/// Bytes indexed in a frame that shows the end of a log read backwards just before.
const FIRST_INDEX_BUDGET: u64 = 1 << 20;

pub struct App {
    pub model: Model,
    pub view: ViewState,
    pub bindings: Vec<Binding>,
    pub content: FrameContent,
    geometry: Geometry,
    /// Open log files of each command's current run.
    streams: HashMap<(CommandIndex, u32), OpenStreams>,
    snapshot: Snapshot,
    /// The selected command's cgroup figures, read with each snapshot (not each frame: they
    /// move on the sampler's clock), and which command they are of.
    cgroup_stats: Option<(CommandIndex, tether_os::cgroup::CgroupStats)>,
    /// The moment and command `content.cursor` was made for (see `past.rs`).
    cursor_for: Option<(u64, CommandIndex)>,
    size: Rect,
    /// The output on screen has more bytes than are indexed yet: draw again soon.
    pub behind: bool,
    /// The stdout pane's text area as last drawn: the size of the commands' terminals.
    pub terminal_size: WindowSize,
    screens: screen::PaneScreens,
    clipboard: copy::ClipboardOut,
    /// The recording as it was at the time cursor's moment, when the cursor is set.
    past: Option<(u64, Model)>,
    /// What a watch followed at the last frame ([`list::ListRows::followed`]).
    followed: Option<CommandIndex>,
    /// The status bar's message as first drawn, and when (ms on the clock `prepare` is
    /// given): it goes after [`MESSAGE_KEPT_MS`], or at the next key.
    message_since: Option<(String, u64)>,
}

/// How long the status bar keeps what it said with no key pressed: long enough to read it
/// and to act on it, not so long that it tells of a stop minutes gone as news.
pub const MESSAGE_KEPT_MS: u64 = 30_000;

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
            cgroup_stats: None,
            cursor_for: None,
            size: Rect::default(),
            behind: false,
            terminal_size: WindowSize::DEFAULT,
            screens: Default::default(),
            followed: None,
            message_since: None,
            clipboard: Default::default(),
            past: None,
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
            // The same words said again by this key are news again.
            self.message_since = None;
        }
        if let Action::ScrollAt { column, row, .. } | Action::ClickAt { column, row } = action {
            // A dialog owns the screen: the mouse must not change what it acts on.
            if self.view.dialog.is_some() {
                return Vec::new();
            }
            let areas = layout::areas(self.size, self.view.focus, self.view.zoom);
            let Some(pane) = areas.and_then(|a| a.pane_at(column, row)) else {
                return Vec::new();
            };
            self.view.focus = pane;
            if let (Action::ClickAt { .. }, Pane::Commands, Some(a)) = (&action, pane, areas) {
                self.refresh_list();
                let list = &self.content.list;
                let cursor = list.cursor_row(self.view.selected).unwrap_or(0);
                let clicked = layout::command_at(cursor, a.commands, row, list.rows.len())
                    .and_then(|row| list.command_of_row(row));
                if let Some(id) = clicked {
                    self.view.select_command(id);
                    self.view.list_moved = true;
                }
            }
        }
        // Typing into a command (a paste is a key per character) neither reads nor changes
        // the list: the rows are made current once a frame anyway (`prepare`).
        let before = self.view.typing.is_none().then(|| {
            self.refresh_list();
            self.view.list.clone()
        });
        let effects = update(&self.model, &mut self.view, &self.geometry, action);
        if before.is_some_and(|before| self.view.list != before) {
            self.refresh_list();
            // Another filter, order or fold: what is followed is selected again.
            self.followed = None;
        }
        effects
    }

    /// Builds the list's rows again if what they show changed (a command started or ended,
    /// the filter, the order, a fold), and keeps the selection on a listed command.
    fn refresh_list(&mut self) {
        let model = self.shown();
        if !self.content.list.is_current(model, &self.view.list) {
            let rows = std::sync::Arc::new(list::ListRows::build(model, &self.view.list));
            self.geometry.list = rows.clone();
            self.content.list = rows;
        }
        if let Some(id) = self.content.list.nearest(self.view.selected) {
            self.view.select_command(id);
        }
    }

    /// A watch follows the newest running command (not the agent's row nor a kept server;
    /// the busiest under the CPU sort) until the
    /// operator moves the list. By start, the selection goes to it when it changes (a newer
    /// one starts, or the one followed ends), so that `End`, which follows again, leaves the
    /// selection at the bottom of the list until then, also where the command followed is
    /// above it (nothing runs, and the last to end started earlier). By CPU the busiest is
    /// listed first, where `Home` goes, and is selected at every frame. Once a frame, before
    /// it is drawn, never on the way to a key's action: a key acts on the command the
    /// operator saw selected.
    fn follow_newest(&mut self) {
        let live = matches!(self.model.mode, tether_model::Mode::Watched) && self.past.is_none();
        let followed = self.content.list.followed;
        let by_cpu = self.view.list.sort == list::ListSort::Cpu;
        if live
            && !self.view.list_moved
            && (followed != self.followed || by_cpu)
            && let Some(id) = followed
        {
            self.view.select_command(id);
        }
        self.followed = followed;
    }

    /// Drops the status bar's message once it has been on screen for [`MESSAGE_KEPT_MS`]
    /// (a dialog's own words stay while it is open).
    fn age_message(&mut self, now_ms: u64) {
        let Some(message) = &self.view.message else {
            self.message_since = None;
            return;
        };
        match &self.message_since {
            Some((seen, since)) if seen == message => {
                let old = now_ms.saturating_sub(*since) >= MESSAGE_KEPT_MS;
                if old && self.view.dialog.is_none() {
                    self.view.message = None;
                    self.message_since = None;
                }
            }
            _ => self.message_since = Some((message.clone(), now_ms)),
        }
    }

    /// An event from the broker of `command`'s run `run`; stale runs are ignored.
    pub fn apply_event(&mut self, command: CommandIndex, run: u32, event: &Event) {
        if let Some(c) = self.model.commands.get_mut(command)
            && c.run == run
        {
            c.apply(event);
            // `result.json` is written before `close`: what the run cost is there.
            if matches!(event.kind, EventKind::Close { .. })
                && let Some(result) = c.journal_dir.as_deref().and_then(read_result)
            {
                c.apply_result(&result);
            }
        }
    }

    /// The quit question follows the commands it is about: its count stays current, and
    /// once nothing runs it has no answer left to wait for. True then: the dialog is gone and
    /// the TUI quits, as `q` does with nothing running.
    pub fn settle_quit_question(&mut self) -> bool {
        let Some(view::Dialog::ConfirmQuit { running }) = &mut self.view.dialog else {
            return false;
        };
        *running = self.model.running();
        if *running > 0 {
            return false;
        }
        self.view.dialog = None;
        true
    }

    /// Inserts `commands` in a row at `index` (commands another process started, in `tether
    /// watch`), the list moved once (a watch's backlog is read in blocks of rows that go in
    /// one place); the selection stays on the command it was on.
    pub fn insert_commands(&mut self, index: usize, commands: Vec<CommandState>) {
        let index = index.min(self.model.commands.len());
        let had_any = !self.model.commands.is_empty();
        let count = commands.len();
        self.model.commands.splice(index..index, commands);
        if had_any && index <= self.view.selected {
            self.view.selected += count;
        }
        self.follow_moved(|i| Some(if i >= index { i + count } else { i }));
        // Open logs are keyed by position.
        self.streams.clear();
    }

    /// Takes every command `gone` picks (by index and command) off the list in one pass (a
    /// dismissed command, the rows of a removed session, thousands maybe); the selection
    /// stays on its command, or moves to the nearest one kept. Returns how many went.
    pub fn remove_commands(&mut self, gone: impl Fn(usize, &CommandState) -> bool) -> usize {
        let selected = self.view.selected;
        let commands = self.model.commands.iter().enumerate();
        let gone: Vec<bool> = commands.map(|(index, c)| gone(index, c)).collect();
        let removed = gone.iter().filter(|g| **g).count();
        if removed == 0 {
            return 0;
        }
        let kept_before = gone.iter().take(selected).filter(|g| !**g).count();
        self.follow_moved(|i| {
            let kept = !gone.get(i).copied().unwrap_or(true);
            kept.then(|| gone.iter().take(i).filter(|g| !**g).count())
        });
        let mut going = gone.iter();
        self.model.commands.retain(|_| going.next() != Some(&true));
        if gone.get(selected) == Some(&true) {
            // Its neighbour is another command: nothing of this one's view applies to it.
            self.view.reset_command_view();
        }
        self.view.selected = kept_before.min(self.model.commands.len().saturating_sub(1));
        self.streams.clear();
        removed
    }

    /// What names a command by its place in the list (a kill or signal waiting to be
    /// confirmed, the command being typed into) follows it when rows move: a confirmation
    /// must never reach the command that took its place. One whose command went is closed.
    fn follow_moved(&mut self, to: impl Fn(CommandIndex) -> Option<CommandIndex>) {
        let named = match &self.view.dialog {
            Some(Dialog::ConfirmKill { command } | Dialog::SignalProcess { command, .. }) => {
                Some(to(*command))
            }
            _ => None,
        };
        match (named, &mut self.view.dialog) {
            (Some(None), _) => {
                self.view.dialog = None;
                self.view
                    .say("the command went from the list: nothing was sent");
            }
            (
                Some(Some(moved)),
                Some(Dialog::ConfirmKill { command } | Dialog::SignalProcess { command, .. }),
            ) => *command = moved,
            _ => {}
        }
        if let Some(typing) = self.view.typing {
            self.view.typing = to(typing);
        }
        self.followed = self.followed.and_then(&to);
    }

    /// A new sample of the processes; a command whose own process it shows stopped (state
    /// `T`) reads `paused`, and so does one whose kept processes it shows all stopped.
    pub fn set_snapshot(&mut self, snapshot: Snapshot) {
        for command in &mut self.model.commands {
            let (Some(broker), Some(pid)) = (command.broker_pid, command.pid) else {
                continue;
            };
            let Some(tree) = snapshot.trees.get(&broker) else {
                continue;
            };
            if let Some(process) = tree.iter().find(|p| p.pid == pid) {
                command.observe_state(process.state);
            }
            command.observe_kept_states(tree.iter().filter(|p| p.pid != broker).map(|p| p.state));
            if command.status.is_active() {
                // The command's processes: the broker's own work is tether's, not the command's.
                let own = tree.iter().filter(|p| p.pid != broker);
                let (cpu, rss) = own.fold((0.0, 0), |(cpu, rss), p| {
                    (cpu + p.cpu_percent, rss + p.rss_bytes)
                });
                command.observe_usage(cpu, rss);
            }
        }
        self.snapshot = snapshot;
        // One or two small reads of the kernel's accounting, for the command on screen only.
        let selected = self.view.selected;
        self.cgroup_stats = self
            .model
            .commands
            .get(selected)
            .filter(|c| c.status.is_active())
            .and_then(|c| c.cgroup.as_deref())
            .and_then(|path| tether_os::cgroup::CommandCgroup::open_existing(path).ok())
            .map(|cgroup| (selected, cgroup.stats()));
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

    fn current_streams(&mut self) -> Option<&mut OpenStreams> {
        let id = self.view.selected;
        let command = self.shown().commands.get(id)?;
        let (dir, run) = (command.journal_dir.clone()?, command.run);
        Some(
            self.streams
                .entry((id, run))
                .or_insert_with(|| OpenStreams::new(&dir)),
        )
    }

    /// What the selected command's log files hold (at the time cursor, if set): past a cap,
    /// bytes are counted but not stored.
    fn stored_lens(&self) -> Option<[u64; 2]> {
        self.shown().commands.get(self.view.selected).map(|c| {
            Stream::BOTH.map(|s| {
                let i = s as usize;
                c.capped[i].map_or(c.bytes[i], |(_, stored)| c.bytes[i].min(stored))
            })
        })
    }

    /// Reads what the next frame shows: visible output lines and the selected tree. With
    /// the time cursor set, as they were at its moment.
    pub fn prepare(&mut self, size: Rect, now_ms: u64) {
        self.size = size;
        self.age_message(now_ms);
        self.content.now_ms = self.prepare_cursor(now_ms).unwrap_or(now_ms);
        self.refresh_list();
        self.follow_newest();
        self.geometry.compact = layout::is_compact(size);
        let areas = layout::areas(size, self.view.focus, self.view.zoom);
        let panes =
            Stream::BOTH.map(|s| areas.map(|a| a.of(Pane::of_stream(s))).unwrap_or_default());
        // Rows and columns inside each output pane's border.
        self.geometry.output_rows = panes.map(|a| a.height.saturating_sub(2) as usize);
        self.geometry.output_cols = panes.map(|a| a.width.saturating_sub(2) as usize);
        let wrap = self.view.wrap;
        let lens = self.stored_lens();
        let id = self.view.selected;
        let shown = self.past.as_ref().map_or(&self.model, |(_, model)| model);
        let command = shown.commands.get(id);
        // Only the command on screen keeps its files open and indexed.
        let current = command.map(|c| (id, c.run));
        self.streams.retain(|key, _| Some(*key) == current);
        self.content.outputs = Default::default();
        (self.geometry.widest, self.geometry.total_lines) = ([0; 2], [0; 2]);
        self.behind = false;
        let dir = command.and_then(|c| c.journal_dir.clone());
        if let (Some(lens), Some(dir), Some(command)) = (lens, dir, command) {
            let runs = &command.runs;
            let open = self
                .streams
                .entry((id, command.run))
                .or_insert_with(|| OpenStreams::new(&dir));
            if (0..2).any(|i| open.files[i].len() > lens[i]) {
                // The time cursor went back: the panes end where the streams were then.
                *open = OpenStreams::new(&dir);
                self.screens.replay();
            }
            let follow = [0, 1].map(|i| self.view.outputs[i].follow);
            // A frame that shows an end just read is drawn at once; indexing goes on after.
            let budget = if open.read_tails(lens, INDEX_BUDGET, follow) {
                FIRST_INDEX_BUDGET
            } else {
                INDEX_BUDGET
            };
            self.behind = open.catch_up(runs.as_slice(), lens, budget);
            let time_of = |stream: Stream, at: u64| runs.time_of(stream, at);
            let stamp: Option<&dyn Fn(Stream, u64) -> Option<u64>> =
                self.view.stamps.then_some(&time_of);
            for stream in Stream::BOTH {
                let i = stream as usize;
                let (rows, width) = (self.geometry.output_rows[i], self.geometry.output_cols[i]);
                let merged = self.view.merged && stream == Stream::Stdout;
                let view = &mut self.view.outputs[i];
                let total = if merged {
                    open.merged.total() as usize
                } else {
                    open.settle(i, view)
                };
                self.geometry.total_lines[i] = total;
                let first = if view.follow {
                    total.saturating_sub(rows)
                } else {
                    view.top.min(total.saturating_sub(1))
                };
                let sources = match (rows, merged) {
                    (0, _) => Vec::new(),
                    (_, true) => open.merged_from(runs.as_slice(), first, rows),
                    (_, false) => open.lines_from(i, first, rows, stamp),
                };
                let prefix = prefix_width(self.view.stamps, merged);
                let width = width.saturating_sub(prefix).max(1);
                let out = &mut self.content.outputs[i];
                *out = into_rows(sources, rows, width, wrap, view.follow);
                out.total = total;
                out.merged = merged;
                out.written_as_one = command.merged_streams;
                out.estimated = !merged && open.estimated(i);
                // The streams the pane shows: the merged view's, both.
                let shows = if merged { 0..2 } else { i..i + 1 };
                out.journal_cut = (shows.clone())
                    .filter_map(|s| command.journal_cut(Stream::BOTH[s]))
                    .reduce(|(k1, d1), (k2, d2)| (k1 + k2, d1 + d2));
                let done = shows.clone().map(|s| open.files[s].len()).sum();
                out.bytes = shows.map(|s| lens[s]).sum();
                out.indexing = streams::indexing(done, out.bytes);
                self.geometry.widest[i] =
                    out.lines.iter().map(line_width).max().unwrap_or(0) + prefix;
            }
        }
        // Terminals follow the stdout pane, kept while another pane is zoomed over it.
        let (rows, cols) = (self.geometry.output_rows[0], self.geometry.output_cols[0]);
        if cols > 0 && rows > 0 {
            self.terminal_size = WindowSize {
                cols: cols as u16,
                rows: rows as u16,
            };
        }
        self.prepare_screens(std::time::Instant::now());
        self.content.tree = self.tree_rows();
        self.content.machine.clone_from(&self.snapshot.machine);
        self.content.cgroup = self
            .cgroup_stats
            .filter(|(id, _)| *id == self.view.selected)
            .map(|(_, stats)| stats);
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
    fn tree_rows(&self) -> Vec<tether_os::sampler::TreeRow> {
        let model = self.shown();
        let Some(command) = model.commands.get(self.view.selected) else {
            return Vec::new();
        };
        let Some(broker) = command.broker_pid else {
            return Vec::new();
        };
        let (group, active) = (command.pid, command.status.is_active());
        // A live command is sampled, whoever started it; a post-mortem shows what was recorded.
        let sampled = (self.snapshot.trees.get(&broker))
            .filter(|processes| active && !model.mode.is_finished() && !processes.is_empty());
        if let Some(processes) = sampled {
            return build_tree(broker, processes, group);
        }
        let entries = if active { &command.tree } else { &command.seen };
        recorded_tree(broker, entries, group, command.started_ms.unwrap_or(0))
    }
}

/// A tree from the broker's records, under a row for the broker itself.
fn recorded_tree(
    broker: i32,
    entries: &[ProcessEntry],
    group: Option<i32>,
    started_ms: u64,
) -> Vec<tether_os::sampler::TreeRow> {
    if entries.is_empty() {
        return Vec::new();
    }
    let info = |pid, ppid, pgid, sid, start_ms, argv| ProcessInfo {
        pid,
        ppid,
        pgid,
        sid,
        state: '-',
        cpu_percent: 0.0,
        rss_bytes: 0,
        start_ms,
        argv,
    };
    let root = vec!["tether".into(), "broker".into()];
    let root = info(broker, 0, broker, broker, started_ms, root);
    let processes: Vec<ProcessInfo> = std::iter::once(root)
        .chain(entries.iter().map(|e| {
            // What the broker recorded decides: in the command's session unless it escaped.
            let sid = if e.escaped { 0 } else { group.unwrap_or(0) };
            info(e.pid, e.ppid, e.pgid, sid, e.start_ms, e.argv.clone())
        }))
        .collect();
    build_tree(broker, &processes, group)
}

/// Columns a rendered line takes.
fn line_width(line: &StyledLine) -> usize {
    line.iter().map(|span| text_width(&span.text)).sum()
}

/// Columns each row gives to what precedes the line: its time, and in the merged view its
/// stream (as the UI draws them).
fn prefix_width(stamps: bool, merged: bool) -> usize {
    usize::from(stamps) * view::STAMP_WIDTH + usize::from(merged) * view::MARK_WIDTH
}
