//! What the output panes show of their streams as screens: the emulators of the panes in the
//! screen view (`v`), and, for the line log, whether a stream looks like a full-screen
//! program's. Only the command on screen has them, as only it keeps its logs open.

use std::time::Instant;

use super::App;
use super::view::ScreenContent;
use crate::ui::screen::first_row;
use tether_model::CommandIndex;
use tether_model::screen::{SignsReader, StreamScreen};
use tether_protocol::protocol::Stream;

/// The screens and hints of one command's run.
#[derive(Default)]
pub(super) struct PaneScreens {
    run: Option<(CommandIndex, u32)>,
    signs: [Option<SignsReader>; 2],
    /// Only for a pane in the screen view: an emulator is dropped with the view.
    screens: [Option<StreamScreen>; 2],
    /// Whether each stream was on the alternate screen at the last look: a switch turns the
    /// screen view on or off by itself (`v` still chooses in between).
    alternate: [bool; 2],
}

impl PaneScreens {
    /// Forgets the screens and hints, to be read again from the start (the time cursor went
    /// back), keeping whose run they are and where the streams were: the operator's `v`
    /// holds.
    pub(super) fn replay(&mut self) {
        (self.signs, self.screens) = Default::default();
    }
}

impl App {
    /// Feeds the screens and hints of the command on screen what its logs gained (as far as
    /// the line view indexed them), each the size of the stream's terminal, or, for a pipe,
    /// the size inside its output pane's border. Called by `prepare` once the line view is read.
    pub(super) fn prepare_screens(&mut self, now: Instant) {
        let selected = self.view.selected;
        let command = self.shown().commands.get(selected);
        let run = command.map(|c| (selected, c.run));
        let dir = command.and_then(|c| c.journal_dir.clone());
        let terminal = command.and_then(|c| c.terminal);
        // An agent's own row shows its terminal's screen: its prompt, its status line and its
        // answers are drawn there, where the line log holds the drawing (`v` gives it).
        let agents_screen =
            command.is_some_and(|c| c.is_session_owner()) && terminal.is_some_and(|t| t.stdout);
        if self.screens.run != run {
            self.screens = PaneScreens {
                run,
                ..PaneScreens::default()
            };
            if agents_screen {
                self.view.outputs[Stream::Stdout as usize].screen = true;
            }
        }
        let lens = self
            .current_streams()
            .map_or([0; 2], |open| [open.files[0].len(), open.files[1].len()]);
        let mut content: [ScreenContent; 2] = Default::default();
        let mut pending = false;
        for stream in Stream::BOTH {
            let i = stream as usize;
            // Known only while a screen is drawn: the keys move nothing without one.
            (
                self.geometry.screen_size[i],
                self.geometry.screen_auto_top[i],
            ) = ((0, 0), 0);
            let lines = &self.content.outputs[i];
            self.geometry.last_shown[i] = lines
                .lines
                .len()
                .checked_sub(1)
                .map(|row| lines.line_of_row(row));
            let Some(dir) = &dir else {
                continue;
            };
            let path = dir.join(stream.file_name());
            let signs = self.screens.signs[i].get_or_insert_with(|| SignsReader::new(path.clone()));
            // A hint only: a log that cannot be read gives none.
            content[i].signs = signs.update(lens[i]).unwrap_or(signs.signs());
            // A full-screen program (top, an editor) reads only as a screen; back to the
            // line log when it leaves the alternate screen (an agent's row to its screen).
            let alternate = content[i].signs.alternate;
            if alternate != self.screens.alternate[i] {
                self.screens.alternate[i] = alternate;
                let agents = agents_screen && stream == Stream::Stdout;
                self.view.outputs[i].screen = alternate || agents;
                self.view.outputs[i].selection = None;
            }
            let pane = (
                self.geometry.output_rows[i] as u16,
                self.geometry.output_cols[i] as u16,
            );
            if !self.view.outputs[i].screen {
                self.screens.screens[i] = None;
                continue;
            }
            // A pane not drawn (zoomed away, the compact layout's hidden one) is fed nothing.
            if pane.0 == 0 || pane.1 == 0 {
                continue;
            }
            // A terminal's program drew for the size its terminal had: emulated at any other
            // (the pane's), its cursor moves land in the wrong cells. Each part of its log is
            // fed at the size it was drawn for; the pane shows what fits. A pipe's output gets
            // the pane's size, whatever it was written at.
            let mut sizes = self.shown().commands[selected].screen_sizes(stream);
            if sizes.is_empty() {
                sizes.push((0, pane));
            }
            let screen = self.screens.screens[i]
                .get_or_insert_with(|| StreamScreen::new(path.clone(), pane.0, pane.1));
            // A log that cannot be read leaves the screen as it was, as it leaves the line log.
            pending |= screen.update(lens[i], &sizes, now).unwrap_or(false);
            let grid = screen.grid();
            let auto = first_row(&grid, pane.0);
            let (rows, cols) = (grid.rows.len(), usize::from(grid.size().1));
            let (pane_rows, pane_cols) = (usize::from(pane.0), usize::from(pane.1));
            let out = &self.view.outputs[i];
            content[i].top = out
                .screen_top
                .map_or(auto, |top| top.min(rows.saturating_sub(pane_rows)));
            content[i].left = out.screen_left.min(cols.saturating_sub(pane_cols));
            self.geometry.screen_size[i] = (rows, cols);
            self.geometry.screen_auto_top[i] = auto;
            content[i].grid = Some(grid);
            content[i].start = Some(screen.start());
        }
        self.content.screens = content;
        // A synchronized update still open is shown when it times out: draw again soon.
        self.behind |= pending;
    }

    /// The text of a stream's whole screen (the screen view shows what fits of it); `None`
    /// without one.
    pub(super) fn screen_text(&self, stream: Stream) -> Option<String> {
        self.screens.screens[stream as usize]
            .as_ref()
            .map(StreamScreen::text)
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::super::copy::tests::app_with_stdout;
    use super::*;
    use crate::app::action::Action;
    use ratatui::layout::Rect;
    use tether_protocol::protocol::fixtures::output;

    /// What `top` writes to a terminal: the alternate screen, a clear, a frame drawn by
    /// cursor moves, another frame over it.
    const TOP: &[u8] = b"\x1b[?1049h\x1b[H\x1b[2Jtop - 10:00:01 up 1 day,  load average: 0.10\x1b[2;1HTasks: 120 total\x1b[4;1H  PID USER      %CPU COMMAND\x1b[5;1H    1 root       0.0 init\x1b[1;1Htop - 10:00:04 up 1 day,  load average: 0.12";

    fn grow(app: &mut App, dir: &std::path::Path, bytes: &[u8]) {
        let offset = app.model.commands[0].bytes[0];
        std::fs::OpenOptions::new()
            .append(true)
            .open(dir.join("stdout.log"))
            .and_then(|mut f| f.write_all(bytes))
            .expect("append to the log");
        app.model.commands[0].apply(&output(1, Stream::Stdout, offset, bytes.len() as u64));
        app.prepare(Rect::new(0, 0, 120, 40), 2);
    }

    #[test]
    fn a_full_screen_program_shows_as_its_screen_until_it_leaves_the_alternate_screen() {
        let dir = tether_os::testing::private_tempdir();
        let mut app = app_with_stdout(dir.path(), b"starting top\n");
        assert!(!app.view.outputs[0].screen, "lines, before the switch");
        grow(&mut app, dir.path(), TOP);
        assert!(app.view.outputs[0].screen, "the screen view, without `v`");
        let grid = app.content.screens[0]
            .grid
            .as_ref()
            .expect("the emulated screen");
        assert!(grid.alternate);
        let text = grid.text();
        assert!(text.starts_with("top - 10:00:04"), "{text}");
        assert!(text.contains("Tasks: 120 total"), "{text}");
        // `v` still gives the line log while it is there...
        app.handle(Action::ToggleScreen);
        grow(&mut app, dir.path(), b"\x1b[1;1Htop - 10:00:07");
        assert!(!app.view.outputs[0].screen, "the operator's choice holds");
        app.handle(Action::ToggleScreen);
        // ...and leaving the alternate screen goes back to the lines.
        grow(&mut app, dir.path(), b"\x1b[?1049lbye\n");
        assert!(!app.view.outputs[0].screen, "back to the line log");
        assert!(app.content.screens[0].grid.is_none());
    }

    /// A command on a terminal of its own size (an agent in the operator's terminal, seen
    /// from a watch) is emulated at that size, not the pane's: its cursor moves land where it
    /// meant them.
    #[test]
    fn a_terminal_s_program_is_emulated_at_its_terminal_s_size() {
        use tether_protocol::protocol::fixtures::event;
        use tether_protocol::protocol::{EventKind, TerminalRequest, WindowSize};
        let dir = tether_os::testing::private_tempdir();
        let mut app = app_with_stdout(dir.path(), b"");
        app.model.commands[0].apply(&event(
            0,
            EventKind::Terminal {
                streams: TerminalRequest {
                    stdout: true,
                    stderr: false,
                    size: WindowSize { cols: 30, rows: 10 },
                },
            },
        ));
        grow(&mut app, dir.path(), b"\x1b[?1049h\x1b[10;21Hbottom");
        let grid = app.content.screens[0].grid.as_ref().expect("the screen");
        assert_eq!(grid.size(), (10, 30));
        let text = grid.text();
        assert_eq!(text.lines().count(), 10, "{text}");
        assert!(text.ends_with("\n                    bottom"), "{text}");
    }

    /// An agent's own row opens on its screen, each time it is selected; `v` still gives the
    /// line log.
    #[test]
    fn an_agents_row_opens_on_its_screen() {
        use tether_protocol::protocol::fixtures::event;
        use tether_protocol::protocol::{EventKind, TerminalRequest, WindowSize};
        let dir = tether_os::testing::private_tempdir();
        let mut app = app_with_stdout(dir.path(), b"");
        let agent = &mut app.model.commands[0];
        agent.config = tether_model::CommandState::agent_for_test("claude");
        agent.apply(&event(
            0,
            EventKind::Terminal {
                streams: TerminalRequest {
                    stdout: true,
                    stderr: false,
                    size: WindowSize { cols: 30, rows: 10 },
                },
            },
        ));
        app.screens = PaneScreens::default();
        grow(&mut app, dir.path(), b"\x1b[10;1H> prompt");
        assert!(app.view.outputs[0].screen, "the screen view, without `v`");
        assert!(app.content.screens[0].grid.is_some());
        app.handle(Action::ToggleScreen);
        grow(&mut app, dir.path(), b".");
        assert!(!app.view.outputs[0].screen, "the operator's choice holds");
        // The time cursor gone back: the screens are read again, the choice holds.
        app.screens.replay();
        grow(&mut app, dir.path(), b".");
        assert!(!app.view.outputs[0].screen, "still the lines");
        // Selected again (a new run of the row here): its screen again.
        app.view.reset_command_view();
        app.screens = PaneScreens::default();
        grow(&mut app, dir.path(), b".");
        assert!(app.view.outputs[0].screen);
    }

    /// A screen larger than the pane: Up, PageUp and Home move its rows under the pane, End
    /// gives back the rows it picks by itself; the arrows sideways move its columns.
    #[test]
    fn a_screen_larger_than_the_pane_scrolls_by_hand() {
        use tether_protocol::protocol::fixtures::event;
        use tether_protocol::protocol::{EventKind, TerminalRequest, WindowSize};
        let dir = tether_os::testing::private_tempdir();
        let mut app = app_with_stdout(dir.path(), b"");
        let streams = TerminalRequest {
            stdout: true,
            stderr: false,
            size: WindowSize {
                cols: 400,
                rows: 100,
            },
        };
        app.model.commands[0].apply(&event(0, EventKind::Terminal { streams }));
        grow(
            &mut app,
            dir.path(),
            b"\x1b[?1049h\x1b[1;1Hheader\x1b[100;1H> prompt",
        );
        let shown = |app: &App| (app.content.screens[0].top, app.content.screens[0].left);
        let rows = app.geometry.output_rows[0];
        let auto = 100 - rows;
        assert_eq!(shown(&app), (auto, 0), "down to the prompt by itself");
        app.handle(Action::Up);
        grow(&mut app, dir.path(), b"");
        assert_eq!(shown(&app), (auto - 1, 0));
        app.handle(Action::Top);
        grow(&mut app, dir.path(), b"");
        assert_eq!(shown(&app), (0, 0), "the header's row");
        // Output goes on: the rows stay where they were moved.
        grow(&mut app, dir.path(), b"\x1b[100;1H> more");
        assert_eq!(shown(&app).0, 0);
        app.handle(Action::ScrollRight);
        app.handle(Action::LineEnd);
        grow(&mut app, dir.path(), b"");
        assert_eq!(shown(&app), (0, 400 - app.geometry.output_cols[0]));
        app.handle(Action::Bottom);
        app.handle(Action::LineStart);
        grow(&mut app, dir.path(), b"");
        assert_eq!(shown(&app), (auto, 0), "End: the rows it picks again");
    }
}
