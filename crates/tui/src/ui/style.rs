//! The look: colours of states and the translation of the model's output styles.

use ratatui::style::{Color, Modifier, Style};

use tether_model::Status;
use tether_model::output;

pub const FOCUSED_BORDER: Style = Style::new().fg(Color::Cyan);
pub const BORDER: Style = Style::new().fg(Color::DarkGray);
pub const DIM: Style = Style::new().fg(Color::DarkGray);
pub const KEY: Style = Style::new().fg(Color::Black).bg(Color::Gray);
pub const SELECTED: Style = Style::new()
    .bg(Color::Indexed(236))
    .add_modifier(Modifier::BOLD);
pub const MATCH: Style = Style::new().fg(Color::Black).bg(Color::Yellow);
/// Lines selected for copying.
pub const SELECTION: Style = Style::new().bg(Color::Indexed(24));
/// The mark of a stderr line in the merged view.
pub const STDERR_MARK: Style = Style::new().fg(Color::Red);

pub fn status(status: Status) -> Style {
    match status {
        Status::Idle => DIM,
        Status::Starting | Status::Running => Style::new().fg(Color::Green),
        Status::Stopping | Status::Stopped | Status::LeftRunning { .. } => {
            Style::new().fg(Color::Yellow)
        }
        Status::Exited(s) if s.code == Some(0) => Style::new().fg(Color::Blue),
        Status::Exited(_) | Status::FailedToStart | Status::Lost => Style::new().fg(Color::Red),
    }
}

/// A command's state: the launcher's word's colour while it has one (red for a command
/// that gave up or cannot start, yellow for a wait or a restart to come); else, running,
/// green and bold once ready and yellow once its readiness probe gave up (it runs, and what
/// waits for it waits in vain); else, ended, the colour of how it ended as every view counts
/// it (`model::ending`: blue for ok, magenta for a stop of yours, as the timeline's `exit`,
/// red for a failure or a kill); else its status's colour.
pub fn state(command: &tether_model::CommandState) -> Style {
    use tether_model::ending::{Count, Ending};
    match (&command.plan, command.readiness.as_ref()) {
        (Some(plan), _) if plan.is_failure() => Style::new().fg(Color::Red),
        (Some(_), _) => Style::new().fg(Color::Yellow),
        (None, Some(mark)) if command.status == Status::Running && mark.ready => {
            Style::new().fg(Color::Green).add_modifier(Modifier::BOLD)
        }
        (None, Some(_)) if command.status == Status::Running => Style::new().fg(Color::Yellow),
        (None, _) => match Ending::of(command).map(Ending::count) {
            Some(Count::Ok) => Style::new().fg(Color::Blue),
            Some(Count::Stopped) => Style::new().fg(Color::Magenta),
            Some(Count::Failed | Count::Killed) => Style::new().fg(Color::Red),
            None => status(command.status),
        },
    }
}

fn color(c: output::Color) -> Option<Color> {
    match c {
        output::Color::Default => None,
        output::Color::Indexed(i) => Some(match i {
            0 => Color::Black,
            1 => Color::Red,
            2 => Color::Green,
            3 => Color::Yellow,
            4 => Color::Blue,
            5 => Color::Magenta,
            6 => Color::Cyan,
            7 => Color::Gray,
            8 => Color::DarkGray,
            9 => Color::LightRed,
            10 => Color::LightGreen,
            11 => Color::LightYellow,
            12 => Color::LightBlue,
            13 => Color::LightMagenta,
            14 => Color::LightCyan,
            15 => Color::White,
            i => Color::Indexed(i),
        }),
        output::Color::Rgb(r, g, b) => Some(Color::Rgb(r, g, b)),
    }
}

/// A command's output style as ratatui draws it.
pub fn output_style(s: output::Style) -> Style {
    let mut style = Style::new();
    if let Some(fg) = color(s.fg) {
        style = style.fg(fg);
    }
    if let Some(bg) = color(s.bg) {
        style = style.bg(bg);
    }
    for (on, modifier) in [
        (s.bold, Modifier::BOLD),
        (s.dim, Modifier::DIM),
        (s.italic, Modifier::ITALIC),
        (s.underline, Modifier::UNDERLINED),
        (s.reverse, Modifier::REVERSED),
    ] {
        if on {
            style = style.add_modifier(modifier);
        }
    }
    style
}

#[cfg(test)]
mod tests {
    use super::*;
    use tether_model::CommandState;

    /// An ended command's state is coloured as every view counts its end: a run the operator
    /// stopped (exit 143 after their TERM) is not red as a failure is.
    #[test]
    fn an_ended_state_is_coloured_by_how_it_ended() {
        let fg = |command: &CommandState| state(command).fg;
        let mut stopped = CommandState::ended_for_test(Some(143), None);
        stopped.stopped_by_hand = true;
        assert_eq!(fg(&stopped), Some(Color::Magenta));
        assert_eq!(
            fg(&CommandState::ended_for_test(Some(143), None)),
            Some(Color::Red)
        );
        assert_eq!(
            fg(&CommandState::ended_for_test(Some(0), None)),
            Some(Color::Blue)
        );
        let mut drained = CommandState::ended_for_test(None, Some(15));
        drained.drained = true;
        assert_eq!(fg(&drained), Some(Color::Blue));
    }
}
