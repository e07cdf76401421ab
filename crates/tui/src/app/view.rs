//! View state: what is selected, focused, scrolled and open. Small, and separate from the
//! model it looks at.

use std::ops::Range;
use std::sync::Arc;

use super::list::{ListRows, ListView};

use tether_model::describe::Tone;
use tether_model::output::StyledLine;
use tether_model::screen::{FullScreenSigns, ReplayStart, ScreenGrid};
use tether_model::{CommandIndex, CommandState};
use tether_os::sampler::{Machine, TreeRow};
use tether_protocol::protocol::{EventKind, Stream};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Pane {
    #[default]
    Commands,
    Tree,
    Stdout,
    Stderr,
    Timeline,
}

impl Pane {
    pub const ORDER: [Pane; 5] = [
        Pane::Commands,
        Pane::Tree,
        Pane::Stdout,
        Pane::Stderr,
        Pane::Timeline,
    ];

    pub fn stream(self) -> Option<Stream> {
        match self {
            Pane::Stdout => Some(Stream::Stdout),
            Pane::Stderr => Some(Stream::Stderr),
            _ => None,
        }
    }

    pub fn of_stream(stream: Stream) -> Pane {
        match stream {
            Stream::Stdout => Pane::Stdout,
            Stream::Stderr => Pane::Stderr,
        }
    }
}

/// Scrolling and search in one output pane.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputView {
    /// Stick to the end as output arrives.
    pub follow: bool,
    /// First line shown when not following.
    pub top: usize,
    pub search: Option<String>,
    /// The line of the current match.
    pub matched: Option<usize>,
    /// Columns scrolled to the right, when long lines are not wrapped.
    pub left: usize,
    /// The screen view (`v`): the output as its terminal shows it, not the line log.
    pub screen: bool,
    /// The screen view's first row shown, moved there by hand; `None`: the rows
    /// [`crate::ui::screen::first_row`] picks (End goes back to them).
    pub screen_top: Option<usize>,
    /// Columns of the screen view scrolled to the right.
    pub screen_left: usize,
    /// Lines selected for copying (`V`).
    pub selection: Option<LineSelection>,
}

impl Default for OutputView {
    fn default() -> Self {
        OutputView {
            follow: true,
            top: 0,
            search: None,
            matched: None,
            left: 0,
            screen: false,
            screen_top: None,
            screen_left: 0,
            selection: None,
        }
    }
}

/// A selection of whole lines in the line log: from where it started to where it was moved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LineSelection {
    pub anchor: usize,
    pub cursor: usize,
}

impl LineSelection {
    pub fn lines(self) -> Range<usize> {
        self.anchor.min(self.cursor)..self.anchor.max(self.cursor) + 1
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dialog {
    Help,
    ConfirmKill {
        command: CommandIndex,
    },
    ConfirmQuit {
        running: usize,
    },
    NewCommand {
        input: String,
    },
    Search {
        stream: Stream,
        input: String,
    },
    SignalProcess {
        command: CommandIndex,
        pid: i32,
        argv: String,
        input: String,
    },
    /// The time cursor to a moment typed as an offset from the session's start.
    GoToTime {
        input: String,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ViewState {
    pub selected: CommandIndex,
    pub focus: Pane,
    pub zoom: bool,
    /// The header shows each core's CPU instead of the machine's summary.
    pub cores: bool,
    pub wrap: bool,
    /// The timeline shows wall-clock times (UTC) instead of offsets from the session's start.
    pub absolute_times: bool,
    pub outputs: [OutputView; 2],
    pub tree_selected: usize,
    /// Timeline lines scrolled up from the newest.
    pub timeline_back: usize,
    pub dialog: Option<Dialog>,
    /// One line for the status bar: what just happened or what went wrong.
    pub message: Option<String>,
    /// Stopping everything before leaving.
    pub quitting: bool,
    /// Every key goes to this command's terminal, until Ctrl-a.
    pub typing: Option<CommandIndex>,
    /// The stdout pane shows stdout and stderr merged, in the order they were read.
    pub merged: bool,
    /// Output lines are stamped with the time they were written.
    pub stamps: bool,
    /// Where the time cursor is over a recorded session.
    pub time: TimeCursor,
    /// The command list's filter, order and folded sessions.
    pub list: ListView,
    /// The operator moved the list's selection: in a watch it no longer follows the newest
    /// running command (`End` in the list follows again).
    pub list_moved: bool,
    /// The last key was `g`: another goes on to the next command that needs the operator.
    /// After any other key `g` goes to the most urgent again, even where it is selected.
    pub attention_cycle: bool,
    /// The last query searched for, in any pane: what Up recalls in the search prompt.
    pub last_search: Option<String>,
}

/// The time cursor: the moment every pane shows the recorded run as it was at (`None`: off,
/// the end of the recording), and the step `<` and `>` move by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeCursor {
    pub at_ms: Option<u64>,
    /// An index into [`tether_model::recording::STEPS_MS`].
    pub step: usize,
}

impl TimeCursor {
    pub fn step_ms(self) -> u64 {
        let steps = tether_model::recording::STEPS_MS;
        steps[self.step.min(steps.len() - 1)]
    }
}

impl Default for TimeCursor {
    fn default() -> Self {
        TimeCursor {
            at_ms: None,
            step: tether_model::recording::DEFAULT_STEP,
        }
    }
}

impl ViewState {
    /// Says `text` on the status bar (what just happened or what went wrong).
    pub fn say(&mut self, text: impl Into<String>) {
        self.message = Some(text.into());
    }

    /// Selects a command. Every change of selection comes here, so that what was scrolled,
    /// searched or selected in the last command's panes never carries over to another.
    pub fn select_command(&mut self, index: CommandIndex) {
        if index != self.selected {
            self.selected = index;
            self.reset_command_view();
        }
    }

    /// Forgets the view of the selected command's panes (scrolling, searches, the process
    /// selected in its tree, the timeline's position): another command, or a new run.
    pub fn reset_command_view(&mut self) {
        self.outputs = Default::default();
        self.tree_selected = 0;
        self.timeline_back = 0;
    }
}

/// Columns of a line's time before it (`+1:02.345` and a space, right-aligned).
pub const STAMP_WIDTH: usize = 11;
/// Columns of a merged line's stream mark before it (`2│`).
pub const MARK_WIDTH: usize = 2;

/// Rows read for one output pane this frame.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PaneLines {
    /// The first line shown.
    pub first: usize,
    /// Screen rows: whole lines, or with wrapping the pieces of lines.
    pub lines: Vec<StyledLine>,
    /// The line each row belongs to; empty means row `i` is line `first + i`.
    pub numbers: Vec<usize>,
    pub total: usize,
    pub bytes: u64,
    /// When each row's line was written (its first byte's `output` event), if known.
    pub stamps: Vec<Option<u64>>,
    /// In the merged view, the stream of each row's line.
    pub marks: Vec<Option<Stream>>,
    /// While the line index has not reached the end: how far it is, in percent.
    pub indexing: Option<u8>,
    /// Line numbers past the indexed lines are estimates (the end is shown before the index
    /// reaches it).
    pub estimated: bool,
    /// The pane shows stdout and stderr merged.
    pub merged: bool,
    /// The command wrote both streams to one (its caller gave one file for both:
    /// `streams_merged`): stdout's log holds its stderr too, stderr's is empty.
    pub written_as_one: bool,
    /// The journal did not keep the whole of what the pane shows (the command's bound):
    /// bytes kept, and bytes dropped after them (both streams', merged).
    pub journal_cut: Option<(u64, u64)>,
}

impl PaneLines {
    pub fn line_of_row(&self, row: usize) -> usize {
        self.numbers.get(row).copied().unwrap_or(self.first + row)
    }
}

/// What a frame shows that is read from disk or sampled, prepared before drawing so that
/// drawing does no I/O.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FrameContent {
    pub now_ms: u64,
    pub outputs: [PaneLines; 2],
    pub tree: Vec<TreeRow>,
    /// The machine's figures for the header, from the last snapshot.
    pub machine: Option<Machine>,
    pub screens: [ScreenContent; 2],
    /// What the selected command's cgroup accounted, read when the frame is prepared, while
    /// the command runs in one.
    pub cgroup: Option<tether_os::cgroup::CgroupStats>,
    /// What the time cursor shows, when it is set.
    pub cursor: Option<CursorContent>,
    /// The command list's rows, rebuilt only when what they show changed.
    pub list: Arc<ListRows>,
}

/// The time cursor's frame: the panes show the commands as they were at `at_ms` (the model
/// drawn is the one at that moment); this is what they need besides.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CursorContent {
    pub at_ms: u64,
    /// The recording's end: the all-commands strip spans the whole session.
    pub end_ms: u64,
    /// What was journaled at the cursor's moment, the notable first: how many events, and
    /// the first with its command's name.
    pub events: usize,
    pub first: Option<(String, ToldEvent)>,
    /// The selected command's first timeline entries after the cursor (no more than a pane
    /// shows), shown dimmed after it.
    pub later: Vec<ToldEvent>,
}

/// An event as its whole run tells it ([`tether_model::describe::describe_in`] the command
/// as the recording ends): before the cursor reaches the run's end, its `exit` still reads
/// as the run ended (`stopped (SIGTERM)`), as it does at the end and in every other view.
#[derive(Debug, Clone, PartialEq)]
pub struct ToldEvent {
    pub ts_ms: u64,
    pub kind: EventKind,
    pub text: String,
    pub tone: Tone,
}

impl ToldEvent {
    pub fn of(run: &CommandState, ts_ms: u64, kind: &EventKind) -> ToldEvent {
        let (text, tone) = tether_model::describe::describe_in(run, kind);
        ToldEvent {
            ts_ms,
            kind: kind.clone(),
            text,
            tone,
        }
    }
}

/// What an output pane shows of its stream as a screen.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ScreenContent {
    /// The emulated screen, when the pane shows it.
    pub grid: Option<ScreenGrid>,
    /// Where the screen's replay started.
    pub start: Option<ReplayStart>,
    /// Whether the stream looks like a full-screen program's (for a hint in the line log).
    pub signs: FullScreenSigns,
    /// The first row and column of the grid the pane shows.
    pub top: usize,
    pub left: usize,
}
