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
    FocusNext,
    FocusPrev,
    ToggleFollow,
    ToggleWrap,
    Zoom,
    Search,
    SearchNext,
    SearchPrev,
    /// An output pane: the screen as a terminal shows it, or the line log.
    ToggleScreen,
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
    Help,
    /// Answers in dialogs and prompts.
    Confirm,
    Cancel,
    Input(char),
    /// Text pasted into the terminal (bracketed paste).
    Paste(String),
    Backspace,
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
