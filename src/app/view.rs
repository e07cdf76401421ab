//! View state: what is selected, focused, scrolled and open. Small, and separate from the
//! model it looks at.

use std::ops::Range;

use crate::model::CommandId;
use crate::model::output::StyledLine;
use crate::model::screen::{FullScreenSigns, ReplayStart, ScreenGrid};
use crate::protocol::Stream;
use crate::sampler::{Machine, TreeRow};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pane {
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
        command: CommandId,
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
        command: CommandId,
        pid: i32,
        argv: String,
        input: String,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ViewState {
    pub selected: CommandId,
    pub focus: Pane,
    pub zoom: bool,
    /// The header shows each core's CPU instead of the machine's summary.
    pub cores: bool,
    pub wrap: bool,
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
    pub typing: Option<CommandId>,
}

impl ViewState {
    /// Selects a command. Every change of selection comes here, so that what was scrolled,
    /// searched or selected in the last command's panes never carries over to another.
    pub fn select_command(&mut self, index: CommandId) {
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

impl Default for ViewState {
    fn default() -> Self {
        ViewState {
            selected: 0,
            focus: Pane::Commands,
            zoom: false,
            cores: false,
            wrap: false,
            outputs: Default::default(),
            tree_selected: 0,
            timeline_back: 0,
            dialog: None,
            message: None,
            quitting: false,
            typing: None,
        }
    }
}

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
    pub cgroup: Option<crate::cgroup::CgroupStats>,
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
}
