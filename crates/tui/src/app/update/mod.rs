//! `update`: the one place where an action changes the view or asks for something to be
//! done. It does no I/O; what must happen outside comes back as [`Effect`]s.

mod copy;
mod list;
mod time;

use std::ops::Range;
use tether_model::Mode;

use super::action::{Action, time_cursor_action};
use super::list::{ListRows, ListSort};
use super::view::{Dialog, Pane, ViewState};
use tether_config::{CommandConfig, naming};
use tether_model::{CommandIndex, Model};
use tether_protocol::protocol::{CommandSpec, Origin, ProcessSignal, Request, Scope, Stream};

pub const READ_ONLY: &str =
    "a recorded session is read-only: run `tether` to launch and signal commands";
pub const NO_LAUNCH: &str =
    "these commands were started elsewhere: signal them here, launch new ones with `tether run`";
pub const NO_DISMISS: &str = "dismiss is for `tether watch`; here an ended command stays listed";
pub const NO_ATTENTION_KEY: &str =
    "g goes to what needs you most in `tether watch`; here F shows what needs you";
pub const NO_TIME_CURSOR: &str =
    "the time cursor moves over a finished session: open one with `tether open`";
pub const NO_TYPING: &str =
    "these commands were started elsewhere: only the tether that started a command types into it";
pub const NO_FOLD: &str = "one session listed: there is nothing to fold";
pub const NO_COMMAND: &str = "no command listed yet: nothing to signal, restart or dismiss";
pub const NO_SETUP: &str =
    "no set-up shells here: S folds or shows an agent's own shells (such as `bash -c env`)";

#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// Start (or restart) a command with a fresh journal directory.
    Launch(CommandIndex),
    Send(CommandIndex, Request),
    /// Bytes typed or pasted into a command's terminal, split into requests on the way.
    Input(CommandIndex, Vec<u8>),
    /// Add a command to the session and launch it. Boxed: a config is large and effects are
    /// many.
    Add(Box<CommandConfig>),
    Search {
        stream: Stream,
        forward: bool,
    },
    /// Take an ended command off the list.
    Dismiss(CommandIndex),
    /// Copy lines of a stream, as plain text, to the clipboard.
    CopyLines {
        stream: Stream,
        lines: Range<usize>,
    },
    /// Copy what the screen view of a stream shows.
    CopyScreen(Stream),
    /// Stop everything still running, then leave.
    StopAllAndQuit,
    Quit,
}

/// Why this screen refuses `action`, if it does: a recorded session launches nothing, and
/// signals only what another tether runs and can be reached through its control socket; only
/// `tether watch` takes ended commands off its list; only a finished recording has a time
/// cursor. The status bar and the help offer only the keys this lets through.
pub fn refusal(model: &Model, action: &Action) -> Option<&'static str> {
    let launches = matches!(action, Action::Restart | Action::NewCommand);
    let dismisses = matches!(action, Action::Dismiss | Action::DismissEnded);
    let signals = matches!(
        action,
        Action::Term | Action::Kill | Action::Stop | Action::SignalProcess
    );
    let types = *action == Action::StartTyping;
    // A finished recording: what `tether open` reads back and nothing adds to (the model
    // drawn at the cursor is one too).
    let finished = model.mode.is_finished();
    if action.moves_in_time() && !finished {
        return Some(NO_TIME_CURSOR);
    }
    // A watch (or a live session opened), where `g` is what it exists for; elsewhere g is
    // the top, as it always was.
    if *action == Action::GoToAttention && !matches!(model.mode, Mode::Watched) {
        return Some(NO_ATTENTION_KEY);
    }
    match model.mode {
        Mode::Watched if launches => Some(NO_LAUNCH),
        // A control socket takes no input: only the tether that started a command holds its
        // terminal.
        Mode::Watched if types => Some(NO_TYPING),
        Mode::Recorded(_) if launches || signals || types => Some(READ_ONLY),
        Mode::Recorded(_) | Mode::Live if dismisses => Some(NO_DISMISS),
        _ => None,
    }
}

/// What the screen at hand holds that decides whether a key does anything there, besides the
/// model: the list as last built, and whether the screen is small.
#[derive(Clone, Copy)]
pub struct OnScreen<'a> {
    pub list: &'a ListRows,
    pub compact: bool,
}

/// Why `action` does nothing on this screen, if it does not: [`refusal`], then what the list
/// holds (one session listed has nothing to fold; `S` needs an agent's set-up shells). The
/// update refuses by this, and the help and the status bar offer only what it lets through.
pub fn refusal_on(model: &Model, on: OnScreen, action: &Action) -> Option<&'static str> {
    refusal(model, action).or_else(|| match action {
        Action::ToggleFold if !on.list.has_headers() => Some(NO_FOLD),
        // Enter opens a command on a small screen; elsewhere it folds, as Space does.
        Action::Open if !on.compact && !on.list.has_headers() => Some(NO_FOLD),
        Action::ToggleSetup if !model.commands.iter().any(|c| c.is_setup()) => Some(NO_SETUP),
        Action::Term
        | Action::Kill
        | Action::Stop
        | Action::SignalProcess
        | Action::Restart
        | Action::Dismiss
        | Action::DismissEnded
            if model.commands.is_empty() =>
        {
            Some(NO_COMMAND)
        }
        _ => None,
    })
}

/// What the update needs from the last frame: sizes, and the process selected in the tree.
#[derive(Debug, Clone, Default)]
pub struct Geometry {
    pub output_rows: [usize; 2],
    pub tree_rows: usize,
    /// Rows of the timeline's event list.
    pub timeline_rows: usize,
    pub total_lines: [usize; 2],
    /// Columns inside each output pane, and the widest line on screen in each.
    pub output_cols: [usize; 2],
    pub widest: [usize; 2],
    /// The last line on screen in each output pane.
    pub last_shown: [Option<usize>; 2],
    /// Rows and columns of each pane's emulated screen (the screen view), and the first row
    /// it shows by itself.
    pub screen_size: [(usize, usize); 2],
    pub screen_auto_top: [usize; 2],
    /// pid and command line of each tree row; `None` for the broker's own row.
    pub tree_processes: Vec<Option<(i32, String)>>,
    /// The command list's rows as last built.
    pub list: std::sync::Arc<ListRows>,
    /// The screen is small ([`crate::app::layout::is_compact`]): the list and the selected
    /// command's panes take it in turn.
    pub compact: bool,
}

pub fn update(
    model: &Model,
    view: &mut ViewState,
    geometry: &Geometry,
    action: Action,
) -> Vec<Effect> {
    // A resize between two `g` is no key between them: the second goes on.
    let cycle = match action {
        Action::GoToAttention => Some(true),
        Action::Resize => None,
        _ => Some(false),
    };
    let effects = act(model, view, geometry, action);
    if let Some(cycle) = cycle {
        view.attention_cycle = cycle;
    }
    // Acting on a command takes the list from a watch's following of the newest running
    // one: the command acted on stays on screen, showing what the action did (a stopped
    // runaway handed the selection to a server, a trial found). A key that did nothing
    // (`is not running`) leaves the following as it was.
    let acted = effects
        .iter()
        .any(|e| matches!(e, Effect::Launch(_) | Effect::Send(..) | Effect::Input(..)))
        || matches!(
            view.dialog,
            Some(Dialog::ConfirmKill { .. } | Dialog::SignalProcess { .. })
        )
        || view.typing.is_some();
    if acted {
        view.list_moved = true;
    }
    effects
}

fn act(model: &Model, view: &mut ViewState, geometry: &Geometry, action: Action) -> Vec<Effect> {
    if let Some(dialog) = view.dialog.clone() {
        return update_dialog(model, view, dialog, action);
    }
    if let Some(effects) = typing::update(model, view, &action) {
        return effects;
    }
    // The mode refuses none of the output panes' own keys (`copy`); the merged view does.
    let on = OnScreen {
        list: &geometry.list,
        compact: geometry.compact,
    };
    if let Some(reason) = merged_refusal(view, &action).or_else(|| refusal_on(model, on, &action)) {
        view.say(reason);
        return Vec::new();
    }
    if let Some(effects) = copy::update_output_keys(view, geometry, &action) {
        return effects;
    }
    let selected = view.selected;
    let command = model.commands.get(selected);
    let mut effects = Vec::new();
    match action {
        Action::Quit => {
            let running = model.running();
            // A recorded session's running commands belong to another tether.
            if running == 0 || model.mode.from_journals() {
                effects.push(Effect::Quit);
            } else {
                view.dialog = Some(Dialog::ConfirmQuit { running });
            }
        }
        Action::Down
        | Action::Up
        | Action::PageDown
        | Action::PageUp
        | Action::Top
        | Action::Bottom => {
            let delta = step_of(&action, page_size(view.focus, geometry));
            move_in_focus(model, view, geometry, delta)
        }
        Action::ScrollLeft | Action::ScrollRight | Action::LineStart | Action::LineEnd => {
            scroll_sideways(view, geometry, &action)
        }
        Action::FocusNext | Action::FocusPrev => {
            let n = Pane::ORDER.len();
            let i = Pane::ORDER.iter().position(|p| *p == view.focus);
            let next = action == Action::FocusNext;
            let step = if next { 1 } else { n - 1 };
            view.focus = Pane::ORDER[(i.unwrap_or(0) + step) % n];
        }
        Action::ToggleFollow => {
            let stream = focused_stream(view);
            let out = &mut view.outputs[stream as usize];
            out.follow = !out.follow;
            if !out.follow {
                let rows = geometry.output_rows[stream as usize];
                out.top = geometry.total_lines[stream as usize].saturating_sub(rows);
            }
            let on = on_off(out.follow);
            view.say(format!("{}: follow {on}", stream.name()));
        }
        Action::ToggleWrap => {
            view.wrap = !view.wrap;
            view.say(format!("wrap {}", on_off(view.wrap)));
        }
        Action::ToggleAbsoluteTimes => {
            view.absolute_times = !view.absolute_times;
            view.say(if view.absolute_times {
                "times: wall clock (UTC)"
            } else {
                "times: from the session's start"
            });
        }
        Action::Zoom => view.zoom = !view.zoom,
        Action::Open => effects = open(model, view, geometry),
        Action::Cancel if geometry.compact && view.focus != Pane::Commands => {
            view.focus = Pane::Commands;
            view.zoom = false;
        }
        Action::ToggleMerged => {
            view.merged = !view.merged;
            // Merged lines are numbered apart from stdout's: the pane starts over at the end.
            view.outputs[Stream::Stdout as usize] = Default::default();
            if view.merged && view.focus.stream().is_some() {
                view.focus = Pane::Stdout;
            }
            view.say(if view.merged {
                "stdout pane: stdout and stderr merged, in the order read (m: stdout alone)"
            } else {
                "stdout pane: stdout alone"
            });
        }
        Action::ToggleStamps => {
            view.stamps = !view.stamps;
            view.say(format!("times of output lines {}", on_off(view.stamps)));
        }
        Action::ToggleCores => view.cores = !view.cores,
        // An empty query, as less and vim start one: Up recalls the last, `n` goes on with it.
        Action::Search => {
            let stream = focused_stream(view);
            view.dialog = Some(Dialog::Search {
                stream,
                input: String::new(),
            });
        }
        Action::SearchNext | Action::SearchPrev => {
            let stream = focused_stream(view);
            if view.outputs[stream as usize].search.is_some() {
                effects.push(Effect::Search {
                    stream,
                    forward: action == Action::SearchNext,
                });
            } else {
                view.say("no search yet: press / to search");
            }
        }
        Action::Term | Action::Kill | Action::Stop | Action::Restart => {
            let Some(command) = command else {
                view.say("no command selected: press a to launch one");
                return effects;
            };
            let active = command.status.is_active();
            match action {
                Action::Term if active => {
                    let term = Request::group_signal(ProcessSignal::TERM);
                    effects.push(Effect::Send(selected, term));
                    view.say(format!("SIGTERM sent to {}", command.config.name));
                }
                Action::Kill if active => {
                    view.dialog = Some(Dialog::ConfirmKill { command: selected })
                }
                // A launcher's wait watched from here is that launcher's to call off.
                Action::Stop
                    if !active && matches!(model.mode, Mode::Watched) && waits(command) =>
                {
                    view.say(format!(
                        "{} is not running: the tether whose launcher it waits on can call that off",
                        command.config.name
                    ));
                }
                // A wait for a dependency or a restart to come: stopping it calls it off.
                Action::Stop if active || waits(command) => {
                    let origin = Some(Origin::Operator);
                    effects.push(Effect::Send(selected, Request::Stop { origin }));
                    let name = &command.config.name;
                    view.say(if active {
                        format!("stopping {name}")
                    } else {
                        format!("{name} will not start")
                    });
                }
                Action::Restart if active => {
                    view.say(format!(
                        "{} is still running: stop it first (s)",
                        command.config.name
                    ));
                }
                Action::Restart => {
                    view.reset_command_view();
                    effects.push(Effect::Launch(selected));
                }
                _ => {
                    view.say(format!("{} is not running", command.config.name));
                }
            }
        }
        Action::Dismiss => match command {
            Some(c) if c.status.is_active() => {
                view.say(format!(
                    "{} is still running; only an ended command can be dismissed",
                    c.config.name
                ));
            }
            // The launcher's word keeps it listed until it starts, or while it waits to
            // start again.
            Some(c) if c.journal_dir.is_none() || waits(c) => {
                let why = match (waits(c), c.journal_dir.is_some()) {
                    (true, true) => "will start again",
                    (true, false) => "waits to start",
                    (false, _) => "never started",
                };
                view.say(format!(
                    "{} {why}: its launcher keeps it listed",
                    c.config.name
                ));
            }
            Some(_) => effects.push(Effect::Dismiss(selected)),
            None => {}
        },
        Action::DismissEnded
        | Action::ToggleFold
        | Action::CycleFilter
        | Action::ToggleSort
        | Action::ToggleSetup
        | Action::GoToAttention => effects = list::update(model, view, geometry, &action),
        Action::SignalProcess => match (
            command,
            geometry
                .tree_processes
                .get(view.tree_selected)
                .cloned()
                .flatten(),
        ) {
            (Some(c), Some((pid, argv))) if c.status.is_active() => {
                view.dialog = Some(Dialog::SignalProcess {
                    command: selected,
                    pid,
                    argv,
                    input: "TERM".into(),
                });
            }
            (Some(c), None) if c.status.is_active() => {
                view.focus = Pane::Tree;
                view.say("select a process in the tree first (Tab, ↑ ↓)");
            }
            _ => view.say("nothing is running to signal"),
        },
        Action::NewCommand => view.dialog = Some(Dialog::NewCommand { input: "".into() }),
        Action::Help => view.dialog = Some(Dialog::Help),
        Action::StartTyping => typing::start(model, view),
        time_cursor_action!() => time::update(model, view, &action),
        Action::ScrollAt { up, .. } => {
            move_in_focus(model, view, geometry, if up { -3 } else { 3 })
        }
        // Handled by `copy::update_output_keys`.
        Action::ToggleScreen | Action::SelectLines | Action::Copy => {}
        Action::ClickAt { .. }
        | Action::Resize
        | Action::Confirm
        | Action::Cancel
        | Action::Input(_)
        | Action::Paste(_)
        | Action::Backspace
        | Action::ClearInput
        | Action::Submit
        | Action::StopTyping
        | Action::Type(_) => {}
    }
    effects
}

/// Enter: on a small screen with the list on it, the selected command's panes take the
/// screen (its output first); on a folded session's header, or where the list is beside
/// the panes, the session is folded or unfolded as Space does.
fn open(model: &Model, view: &mut ViewState, geometry: &Geometry) -> Vec<Effect> {
    let on_header = geometry
        .list
        .cursor_row(view.selected)
        .and_then(|row| geometry.list.rows.get(row))
        .is_some_and(|row| matches!(row, super::list::ListRow::Session(_)));
    if geometry.compact && view.focus != Pane::Commands {
        // A command opened on a small screen hides the list: nothing there to fold behind it
        // (the status bar offers `Esc list`).
        view.say("the command is open already");
        return Vec::new();
    }
    if !geometry.compact || on_header {
        return list::update(model, view, geometry, &Action::ToggleFold);
    }
    let Some(command) = model.commands.get(view.selected) else {
        view.say("no command to open");
        return Vec::new();
    };
    // Where its output is: a failure that wrote only to stderr opens there.
    let only_stderr =
        command.bytes[Stream::Stdout as usize] == 0 && command.bytes[Stream::Stderr as usize] > 0;
    view.focus = if only_stderr {
        Pane::Stderr
    } else {
        Pane::Stdout
    };
    view.zoom = false;
    // The operator chose this one: a watch no longer moves the selection to the newest
    // command under them (`End` in the list follows again).
    view.list_moved = true;
    // The way back, `Esc list`, leads the status bar (ui::status_bar).
    view.say(format!(
        "{}: Tab the next pane · z zoom",
        tether_model::output::one_line(&command.config.name)
    ));
    Vec::new()
}

/// In the merged view the stdout pane's lines come from both streams: searching, selecting
/// and the screen view work on one stream's own lines.
fn merged_refusal(view: &ViewState, action: &Action) -> Option<&'static str> {
    let on_merged = view.merged && focused_stream(view) == Stream::Stdout;
    let per_stream = matches!(
        action,
        Action::Search
            | Action::SearchNext
            | Action::SearchPrev
            | Action::SelectLines
            | Action::Copy
            | Action::ToggleScreen
    );
    (on_merged && per_stream).then_some(
        "the merged view shows both streams: m returns to stdout alone to search or copy",
    )
}

/// The output pane an action about output applies to: the focused one, else stdout.
fn focused_stream(view: &ViewState) -> Stream {
    view.focus.stream().unwrap_or(Stream::Stdout)
}

/// Scrolls the focused output pane sideways: a quarter of the pane at a time (8 columns at
/// least), to the start, or to where its widest line on screen ends. With wrapping on every
/// line is whole already.
fn scroll_sideways(view: &mut ViewState, geometry: &Geometry, action: &Action) {
    let Some(stream) = view.focus.stream() else {
        view.say("← → h l 0 $ scroll an output pane (Tab to one)");
        return;
    };
    let i = stream as usize;
    let screen = view.outputs[i].screen;
    if view.wrap && !screen {
        view.say("wrap is on: every line is whole (w turns it off)");
        return;
    }
    let cols = geometry.output_cols[i];
    // The screen view's rows are as wide as its terminal: never wrapped.
    let widest = if screen {
        geometry.screen_size[i].1
    } else {
        geometry.widest[i]
    };
    let last = widest.saturating_sub(cols);
    let step = (cols / 4).max(8);
    let out = &mut view.outputs[i];
    let left = if screen {
        &mut out.screen_left
    } else {
        &mut out.left
    };
    *left = match action {
        Action::ScrollLeft => left.saturating_sub(step),
        Action::ScrollRight => (*left + step).min(last.max(*left)),
        Action::LineEnd => last,
        _ => 0,
    };
}

fn on_off(on: bool) -> &'static str {
    if on { "on" } else { "off" }
}

fn page_size(focus: Pane, geometry: &Geometry) -> i64 {
    let rows = match focus.stream() {
        Some(stream) => geometry.output_rows[stream as usize],
        None => geometry.tree_rows,
    };
    rows.max(1) as i64
}

/// How many rows a key moves the focused pane's list, lines or selection, `page` rows a
/// page: to the ends, as far as there is.
fn step_of(action: &Action, page: i64) -> i64 {
    match action {
        Action::Down => 1,
        Action::Up => -1,
        Action::PageDown => page,
        Action::PageUp => -page,
        Action::Top => i64::MIN / 2,
        _ => i64::MAX / 2,
    }
}

fn move_in_focus(model: &Model, view: &mut ViewState, geometry: &Geometry, delta: i64) {
    let step = |value: usize, max: usize| -> usize {
        (value as i64).saturating_add(delta).clamp(0, max as i64) as usize
    };
    if view.focus == Pane::Commands {
        // Moved by hand: the watch stops following the newest command; to the end of the
        // list (under the CPU sort, to its top, where the busiest is), it follows again.
        view.list_moved = match view.list.sort {
            ListSort::Start => delta < i64::MAX / 4,
            ListSort::Cpu => delta > i64::MIN / 4,
        };
    }
    match view.focus {
        // Before the first frame there are no rows yet: the commands in their order.
        Pane::Commands if !geometry.list.is_built() => {
            let last = model.commands.len().saturating_sub(1);
            view.select_command(step(view.selected, last));
        }
        Pane::Commands => {
            if let Some(id) = geometry.list.moved(view.selected, delta) {
                view.select_command(id);
            }
        }
        Pane::Tree => {
            let last = geometry.tree_processes.len().saturating_sub(1);
            view.tree_selected = step(view.tree_selected, last);
        }
        // Up in the timeline goes back in time.
        Pane::Timeline => {
            let entries = model
                .commands
                .get(view.selected)
                .map_or(0, |c| c.timeline.len());
            // Wrapped, entries take rows unknown here: back to the first entry.
            let last = if view.wrap {
                entries.saturating_sub(1)
            } else {
                entries.saturating_sub(geometry.timeline_rows.max(1))
            };
            view.timeline_back = (view.timeline_back as i64)
                .saturating_sub(delta)
                .clamp(0, last as i64) as usize;
        }
        Pane::Stdout | Pane::Stderr if view.outputs[focused_stream(view) as usize].screen => {
            // A screen larger than the pane: its rows move under it. Down as far as the rows
            // it shows by itself (End too): those again, as the line log follows at its end.
            let i = focused_stream(view) as usize;
            let (rows, auto) = (geometry.screen_size[i].0, geometry.screen_auto_top[i]);
            if rows == 0 {
                // No screen drawn yet: nothing to move.
                return;
            }
            let last_top = rows.saturating_sub(geometry.output_rows[i]);
            let out = &mut view.outputs[i];
            let next = step(out.screen_top.unwrap_or(auto), last_top);
            out.screen_top = (delta < 0 || next < auto).then_some(next);
        }
        Pane::Stdout | Pane::Stderr => {
            let stream = view.focus.stream().unwrap_or(Stream::Stdout) as usize;
            let rows = geometry.output_rows[stream];
            let total = geometry.total_lines[stream];
            let last_top = total.saturating_sub(rows);
            let out = &mut view.outputs[stream];
            let current = if out.follow { last_top } else { out.top };
            let next = step(current, last_top);
            out.top = next;
            out.follow = next >= last_top && delta > 0;
        }
    }
}

/// A key while `dialog` is open (`view.dialog` holds it): it stays open unless the key
/// answers or cancels it.
fn update_dialog(
    model: &Model,
    view: &mut ViewState,
    dialog: Dialog,
    action: Action,
) -> Vec<Effect> {
    let mut effects = Vec::new();
    match (dialog, action) {
        (_, Action::Cancel) => view.dialog = None,
        (Dialog::ConfirmKill { command }, Action::Confirm) => {
            view.dialog = None;
            let kill = Request::group_signal(ProcessSignal::KILL);
            effects.push(Effect::Send(command, kill));
            if let Some(c) = model.commands.get(command) {
                view.say(format!("SIGKILL sent to {}", c.config.name));
            }
        }
        (Dialog::ConfirmQuit { .. }, Action::Confirm | Action::Submit) => {
            view.dialog = None;
            view.quitting = true;
            let running = model.running();
            view.say(format!(
                "stopping {running} command{}…",
                if running == 1 { "" } else { "s" }
            ));
            effects.push(Effect::StopAllAndQuit);
        }
        (Dialog::ConfirmKill { .. }, Action::Submit) => {
            view.say("y sends SIGKILL, n or Esc cancels")
        }
        (Dialog::Search { stream, .. }, Action::Up) => {
            let last = view.last_search.clone();
            let input = last.or_else(|| view.outputs[stream as usize].search.clone());
            if let (Some(input), Some(typed)) = (input, view.dialog.as_mut().and_then(input_of)) {
                *typed = input;
            }
        }
        (_, Action::ClearInput) => {
            if let Some(input) = view.dialog.as_mut().and_then(input_of) {
                input.clear();
            }
        }
        (_, action @ (Action::Paste(_) | Action::Input(_) | Action::Backspace)) => {
            if let Some(input) = view.dialog.as_mut().and_then(input_of) {
                match action {
                    Action::Paste(text) => {
                        input.extend(text.chars().map(|c| if c.is_control() { ' ' } else { c }))
                    }
                    Action::Input(c) => input.push(c),
                    _ => drop(input.pop()),
                }
            }
        }
        (Dialog::NewCommand { input }, Action::Submit) => {
            view.dialog = None;
            let line = input.trim();
            if line.is_empty() {
                view.say("nothing to launch: type a shell command");
            } else {
                let command = CommandSpec::Shell(line.to_string());
                let name = naming::unique_name(&naming::derive_name(&command), |name| {
                    model.commands.iter().any(|c| c.config.name == name)
                });
                effects.push(Effect::Add(Box::new(CommandConfig::new(name, command))));
            }
        }
        (Dialog::Search { stream, input }, Action::Submit) => {
            view.dialog = None;
            let out = &mut view.outputs[stream as usize];
            out.matched = None;
            out.search = Some(input).filter(|input| !input.is_empty());
            if out.search.is_some() {
                view.last_search = out.search.clone();
                effects.push(Effect::Search {
                    stream,
                    forward: false,
                });
            }
        }
        // What is refused is said, and the prompt stays with what was typed.
        (
            Dialog::SignalProcess {
                command,
                pid,
                input,
                ..
            },
            Action::Submit,
        ) => {
            match input.parse::<ProcessSignal>() {
                Err(err) => view.say(err),
                Ok(signal) => {
                    view.dialog = None;
                    let request = Request::Signal {
                        signal,
                        scope: Scope::Pid,
                        pid: Some(pid),
                        origin: None,
                    };
                    effects.push(Effect::Send(command, request));
                    // The timeline shows whether the broker delivered it.
                    view.say(format!("SIG{signal} asked for pid {pid}"));
                }
            }
        }
        (Dialog::GoToTime { input }, Action::Submit) => match time::go_to(model, view, &input) {
            Err(refused) => view.say(refused),
            Ok(()) => view.dialog = None,
        },
        _ => {}
    }
    effects
}

fn input_of(dialog: &mut Dialog) -> Option<&mut String> {
    match dialog {
        Dialog::NewCommand { input }
        | Dialog::Search { input, .. }
        | Dialog::SignalProcess { input, .. }
        | Dialog::GoToTime { input } => Some(input),
        _ => None,
    }
}

/// A command the launcher will start (again): waiting for a dependency or a restart.
pub(super) fn waits(command: &tether_model::CommandState) -> bool {
    command.plan.as_ref().is_some_and(|p| !p.is_failure())
}

#[cfg(test)]
pub(super) mod tests;
mod typing;
