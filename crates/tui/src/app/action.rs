//! Everything the operator (or a test) can ask of the TUI. Keys, mouse and scripted tests
//! all become an `Action`, and `App::update` is the only place that acts on one.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    Quit,
    /// Move the selection (command list, tree) or scroll (output, timeline) down/up.
    Down,
    Up,
    PageDown,
    PageUp,
    Top,
    Bottom,
    /// Scroll the focused output left/right (long lines, wrap off).
    ScrollLeft,
    ScrollRight,
    /// Scroll the focused output to the start / the end of its longest line on screen.
    LineStart,
    LineEnd,
    FocusNext,
    FocusPrev,
    ToggleFollow,
    ToggleWrap,
    /// The timeline's times: offsets from the session's start, or the wall clock.
    ToggleAbsoluteTimes,
    Zoom,
    /// The header: each core's CPU, or the machine's summary.
    ToggleCores,
    Search,
    SearchNext,
    SearchPrev,
    /// An output pane: the screen as a terminal shows it, or the line log.
    ToggleScreen,
    /// The stdout pane: stdout and stderr merged in the order read, or stdout alone.
    ToggleMerged,
    /// Output lines stamped with the time they were written, or not.
    ToggleStamps,
    /// Start or end a selection of lines in an output pane.
    SelectLines,
    /// Copy the selection, the search match's line, the last line on screen, or the screen.
    Copy,
    /// SIGTERM to the selected command's whole group.
    Term,
    /// SIGKILL to the selected command's whole group (asks to confirm).
    Kill,
    /// The stop sequence: TERM, grace, KILL.
    Stop,
    /// A signal to the process selected in the tree (asks which).
    SignalProcess,
    Restart,
    NewCommand,
    /// Take an ended command off the list (`tether watch`).
    Dismiss,
    /// Take every ended command off the list (`tether watch`).
    DismissEnded,
    /// Fold the selected command's session under its header, or unfold it.
    ToggleFold,
    /// Enter: on a small screen, where the list takes it, open the selected command's panes
    /// (Esc goes back); elsewhere, and on a folded session's header, fold or unfold.
    Open,
    /// An agent's set-up shells: folded into one row, or listed one by one.
    ToggleSetup,
    /// The list shows all commands, the running ones, the failed ones, those that need you.
    CycleFilter,
    /// Select the command that needs the operator most (`tether
    /// watch`'s `g`); again, the next (see `AttentionMark::urgency`).
    GoToAttention,
    /// The list in the order started, or the busiest first.
    ToggleSort,
    /// Hand the keyboard to the selected command's terminal (`i`)...
    StartTyping,
    /// ...until Ctrl-a.
    StopTyping,
    /// Bytes for the command being typed into: a key or a paste as a terminal sends it.
    Type(Vec<u8>),
    Help,
    /// The time cursor over a recorded session: to the previous/next journaled event, the
    /// previous/next notable one (signal, error, timeout, exit but a clean one, kill, orphan), back/on by
    /// the step, a shorter/longer step, the first event, and off (the end).
    TimePrevEvent,
    TimeNextEvent,
    TimePrevNotable,
    TimeNextNotable,
    TimeStepBack,
    TimeStepForward,
    TimeStepShorter,
    TimeStepLonger,
    TimeFirst,
    TimeOff,
    /// Ask for a moment typed as an offset from the session's start (`+1:23`, `83s`).
    TimeGoTo,
    /// Answers in dialogs and prompts.
    Confirm,
    Cancel,
    Input(char),
    /// Text pasted into the terminal (bracketed paste).
    Paste(String),
    Backspace,
    /// Ctrl-U in a prompt: the line typed so far goes.
    ClearInput,
    Submit,
    /// Mouse wheel over the screen cell (column, row).
    ScrollAt {
        up: bool,
        column: u16,
        row: u16,
    },
    ClickAt {
        column: u16,
        row: u16,
    },
    Resize,
}

/// The time cursor's actions, as a pattern: what `moves_in_time` says and what the update
/// hands to the time cursor are one list.
macro_rules! time_cursor_action {
    () => {
        $crate::app::action::Action::TimePrevEvent
            | $crate::app::action::Action::TimeNextEvent
            | $crate::app::action::Action::TimePrevNotable
            | $crate::app::action::Action::TimeNextNotable
            | $crate::app::action::Action::TimeStepBack
            | $crate::app::action::Action::TimeStepForward
            | $crate::app::action::Action::TimeStepShorter
            | $crate::app::action::Action::TimeStepLonger
            | $crate::app::action::Action::TimeFirst
            | $crate::app::action::Action::TimeOff
            | $crate::app::action::Action::TimeGoTo
    };
}
pub(crate) use time_cursor_action;

impl Action {
    /// The time cursor's actions: only a finished recording has one.
    pub fn moves_in_time(&self) -> bool {
        matches!(self, time_cursor_action!())
    }
}
