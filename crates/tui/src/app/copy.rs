//! Carrying out `y`: the plain text of lines (or of a screen) to the clipboard through OSC 52,
//! and to a file. The OSC 52 bytes wait here until the event loop writes them to the terminal
//! between two frames.

use std::ops::Range;
use std::path::PathBuf;

use super::App;
use tether_frontend::clipboard::{self, COPY_MAX_TEXT};
use tether_model::output::plain_text;
use tether_protocol::protocol::Stream;

/// Lines read from a log at once while copying.
const BATCH: usize = 1024;

/// Where copies go besides the terminal, and what waits to be written to it.
pub(super) struct ClipboardOut {
    pub(super) dir: PathBuf,
    pending: Option<String>,
}

impl Default for ClipboardOut {
    fn default() -> Self {
        ClipboardOut {
            // The clipboard file goes in the control sockets' directory.
            dir: tether_os::socket_dir::socket_dir(),
            pending: None,
        }
    }
}

impl App {
    /// Copies `lines` of `stream` of the command on screen, as plain text (no escapes, no
    /// colours), one `\n` between lines and none after the last.
    pub(super) fn copy_lines(&mut self, stream: Stream, lines: Range<usize>) {
        let Some(open) = self.current_streams() else {
            self.view.say("nothing to copy: no command selected");
            return;
        };
        if open.estimated(stream as usize) {
            // The selection's line numbers are estimates until the index reaches them.
            self.view.message =
                Some("still indexing the log: copy once its lines are numbered".into());
            return;
        }
        let file = &mut open.files[stream as usize];
        let lines = lines.start..lines.end.min(file.line_count());
        let mut text = String::new();
        let mut cut = false;
        let mut at = lines.start;
        'read: while at < lines.end {
            let batch = at..(at + BATCH).min(lines.end);
            let rendered = match file.lines(batch.clone()) {
                Ok(rendered) => rendered,
                Err(err) => {
                    self.view.say(format!("nothing copied: {err}"));
                    return;
                }
            };
            for line in rendered {
                if at > lines.start {
                    text.push('\n');
                }
                text.push_str(&plain_text(&line));
                at += 1;
                if text.len() > COPY_MAX_TEXT {
                    let mut end = COPY_MAX_TEXT;
                    while !text.is_char_boundary(end) {
                        end -= 1;
                    }
                    text.truncate(end);
                    cut = true;
                    break 'read;
                }
            }
        }
        let what = match lines.len() {
            0 => {
                self.view.say("nothing to copy");
                return;
            }
            1 => format!("line {}", lines.start + 1),
            n => format!("{n} lines ({} to {})", lines.start + 1, lines.end),
        };
        self.deliver(&text, &what, cut);
    }

    /// Copies the screen of `stream`'s screen view, whole: what a pane smaller than the
    /// command's terminal cuts off too.
    pub(super) fn copy_screen(&mut self, stream: Stream) {
        match self.screen_text(stream) {
            Some(text) => self.deliver(&text, "the screen", false),
            None => self.view.say("no screen to copy yet"),
        }
    }

    fn deliver(&mut self, text: &str, what: &str, cut: bool) {
        let copy = clipboard::copy(text, what, cut, &self.clipboard.dir);
        self.clipboard.pending = copy.terminal;
        self.view.say(copy.message);
    }

    /// Bytes for tether's own terminal (an OSC 52 copy), taken once.
    pub fn take_terminal_output(&mut self) -> Option<String> {
        self.clipboard.pending.take()
    }
}

#[cfg(test)]
pub(super) mod tests {

    use tether_model::Mode;

    use ratatui::layout::Rect;

    use super::*;
    use crate::app::action::Action;
    use crate::app::update::Effect;
    use crate::app::view::Pane;
    use tether_config::CommandConfig;
    use tether_model::{CommandState, Model};
    use tether_protocol::protocol::CommandSpec;
    use tether_protocol::protocol::fixtures::output;

    /// An app showing one command whose stdout log holds `bytes`, copying into `clip`.
    pub(in crate::app) fn app_with_stdout(dir: &std::path::Path, bytes: &[u8]) -> App {
        tether_os::testing::write_private(dir.join("stdout.log"), bytes);
        let mut command = CommandState::new(CommandConfig::new(
            "printer",
            CommandSpec::Shell("printf".into()),
        ));
        command.begin_run(dir.to_path_buf(), 0);
        command.apply(&output(0, Stream::Stdout, 0, bytes.len() as u64));
        let mut app = App::new(Model {
            session_id: "s".into(),
            session_dir: dir.to_path_buf(),
            started_ms: 0,
            commands: vec![command],
            mode: Mode::Live,
        });
        app.clipboard.dir = dir.join("clip");
        app.view.focus = Pane::Stdout;
        app.prepare(Rect::new(0, 0, 120, 40), 0);
        app
    }

    fn copy(app: &mut App, action: Action) -> String {
        for effect in app.handle(action) {
            match effect {
                Effect::CopyLines { stream, lines } => app.copy_lines(stream, lines),
                Effect::CopyScreen(stream) => app.copy_screen(stream),
                other => panic!("unexpected effect {other:?}"),
            }
        }
        std::fs::read_to_string(app.clipboard.dir.join(clipboard::FILE_NAME)).unwrap_or_default()
    }

    #[test]
    fn y_copies_the_plain_text_of_the_last_line_on_screen() {
        let dir = tether_os::testing::private_tempdir();
        let mut app = app_with_stdout(dir.path(), b"one\n\x1b[31mtwo\x1b[0m \x1b]0;t\x07end\n");
        assert_eq!(copy(&mut app, Action::Copy), "two end");
        assert_eq!(
            app.take_terminal_output().as_deref(),
            clipboard::osc52("two end").as_deref()
        );
        assert_eq!(app.take_terminal_output(), None, "written once");
        assert!(app.view.message.as_deref().unwrap().contains("line 2"));
    }

    #[test]
    fn a_selection_copies_its_lines_joined() {
        let dir = tether_os::testing::private_tempdir();
        let mut app = app_with_stdout(dir.path(), b"a\nb\r\nc\n");
        app.handle(Action::SelectLines);
        app.handle(Action::Up);
        app.handle(Action::Up);
        assert_eq!(copy(&mut app, Action::Copy), "a\nb\nc");
        assert!(app.view.message.as_deref().unwrap().contains("3 lines"));
    }

    #[test]
    fn y_in_the_screen_view_copies_the_screen() {
        let dir = tether_os::testing::private_tempdir();
        let mut app = app_with_stdout(dir.path(), b"\x1b[?1049h\x1b[2J\x1b[3;5Hdrawn\x1b[1;1Htop");
        // On the alternate screen, the screen view by itself (no `v`).
        assert!(app.view.outputs[0].screen);
        app.prepare(Rect::new(0, 0, 120, 40), 0);
        let grid = app.content.screens[0].grid.as_ref().expect("a screen");
        assert!(grid.alternate);
        assert!(app.content.screens[0].signs.alternate);
        assert_eq!(copy(&mut app, Action::Copy), "top\n\n    drawn");
    }
}
