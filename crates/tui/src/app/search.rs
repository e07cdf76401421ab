//! Searching an output pane (`/`, `n`, `N`) and opening a recorded session at the first match
//! (`tether open --search`). A search reads the whole log: the index is finished first.

use super::App;
use super::view::Pane;
use tether_model::output::{StyledLine, plain_text, text_width};
use tether_protocol::protocol::Stream;

impl App {
    /// Searches the stream for the current needle from the current match (or the end).
    pub fn search(&mut self, stream: Stream, forward: bool) {
        let i = stream as usize;
        let Some(needle) = self.view.outputs[i].search.clone() else {
            return;
        };
        if !self.finish_index(i) {
            return;
        }
        let matched = self.view.outputs[i].matched;
        let Some(open) = self.current_streams() else {
            return;
        };
        let file = &mut open.files[i];
        let total = file.line_count();
        let found = match (matched, forward) {
            (Some(0), false) => Ok(None),
            (Some(line), true) => file.find(&needle, line + 1, true),
            (Some(line), false) => file.find(&needle, line - 1, false),
            (None, _) => file.find(&needle, total.saturating_sub(1), false),
        };
        match found {
            Ok(Some(line)) => self.show_match(i, line, &needle),
            // Without a match to go on from, the whole log was searched.
            Ok(None) => self.view.say(match (matched, forward) {
                (None, _) => format!("`{needle}` not found"),
                (Some(_), true) => format!("`{needle}` not found below"),
                (Some(_), false) => format!("`{needle}` not found above"),
            }),
            Err(err) => self.view.say(format!("search failed: {err}")),
        }
    }

    /// `tether open --search`: the first command whose output shows `needle` (its stdout,
    /// then its stderr) is selected, its pane focused, and the view put on the first match
    /// with the pane's search set to `needle`, so that `n` goes on from there. Matching is
    /// `/`'s: the rendered text, ASCII letters in either case.
    pub fn open_at_first_match(&mut self, needle: &str) {
        for id in 0..self.model.commands.len() {
            self.view.select_command(id);
            for stream in Stream::BOTH {
                let i = stream as usize;
                if !self.finish_index(i) {
                    continue;
                }
                let Some(open) = self.current_streams() else {
                    continue;
                };
                match open.files[i].find(needle, 0, true) {
                    Ok(Some(line)) => {
                        self.view.focus = Pane::of_stream(stream);
                        self.view.outputs[i].search = Some(needle.to_string());
                        self.show_match(i, line, needle);
                        return;
                    }
                    Ok(None) => {}
                    Err(err) => {
                        self.view.say(format!("search failed: {err}"));
                        return;
                    }
                }
            }
        }
        self.view.select_command(0);
        // What was written and then drawn over (an agent's redraws) is not on screen any
        // more, but is still in the log: grep says so.
        self.view.say(format!(
            "`{needle}` shows in no command's output (as drawn: `tether grep` searches what was written)"
        ));
    }

    /// Indexes the selected command's stream `i` to its end (an end shown before it was
    /// numbered gets its true numbers). False without a command or a log.
    fn finish_index(&mut self, i: usize) -> bool {
        let Some(lens) = self.stored_lens() else {
            return false;
        };
        // The model the panes show (the time cursor's, if set): its lengths and its runs.
        let Some(command) = self.shown().commands.get(self.view.selected) else {
            return false;
        };
        let (runs, key) = (command.runs.clone(), (self.view.selected, command.run));
        if self.current_streams().is_none() {
            return false;
        }
        let Some(open) = self.streams.get_mut(&key) else {
            return false;
        };
        open.catch_up(runs.as_slice(), lens, u64::MAX);
        open.settle(i, &mut self.view.outputs[i]);
        true
    }

    /// Puts line `line` of stream `i`, a match of `needle`, in the middle of its pane, and
    /// its match in sight sideways.
    fn show_match(&mut self, i: usize, line: usize, needle: &str) {
        let column = match self
            .current_streams()
            .map(|o| o.files[i].lines(line..line + 1))
        {
            Some(Ok(lines)) => lines.first().and_then(|l| match_columns(l, needle)),
            _ => None,
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
}

/// The columns (from, to) of the first match of `needle` in `line`, compared as search
/// compares (ignoring ASCII case).
pub(super) fn match_columns(line: &StyledLine, needle: &str) -> Option<(usize, usize)> {
    let text = plain_text(line).to_ascii_lowercase();
    let at = text.find(&needle.to_ascii_lowercase())?;
    let start = text_width(&text[..at]);
    Some((start, start + text_width(&text[at..at + needle.len()])))
}

/// The first column to show so that columns `start..end` are in a pane `cols` wide that
/// now shows from `left`: unchanged if they are in sight already, else with the match a
/// third of the way in (at the left edge, for a match wider than that leaves).
pub(super) fn left_to_show(left: usize, cols: usize, start: usize, end: usize) -> usize {
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

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::layout::Rect;
    use tether_config::CommandConfig;
    use tether_model::Mode;
    use tether_model::{CommandState, Model};
    use tether_protocol::protocol::CommandSpec;
    use tether_protocol::protocol::fixtures::output;

    /// A recorded command whose logs hold `stdout` and `stderr`, each one `output` event.
    fn command(root: &std::path::Path, name: &str, stdout: &str, stderr: &str) -> CommandState {
        let dir = root.join(name);
        tether_os::testing::private_dir(&dir);
        let mut command =
            CommandState::new(CommandConfig::new(name, CommandSpec::Shell("x".into())));
        command.begin_run(dir.clone(), 0);
        for (stream, text) in [(Stream::Stdout, stdout), (Stream::Stderr, stderr)] {
            tether_os::testing::write_private(dir.join(stream.file_name()), text);
            command.apply(&output(1, stream, 0, text.len() as u64));
        }
        command
    }

    fn app(commands: Vec<CommandState>) -> App {
        App::new(Model {
            session_id: "s".into(),
            session_dir: "/nonexistent".into(),
            started_ms: 0,
            commands,
            mode: Mode::Recorded(None),
        })
    }

    #[test]
    fn open_search_shows_the_first_match_on_the_first_frame() {
        let root = tether_os::testing::private_tempdir();
        let many: String = (0..1000)
            .map(|n| {
                if n == 500 {
                    "the Needle here\n".into()
                } else {
                    format!("line {n}\n")
                }
            })
            .collect();
        let mut app = app(vec![
            command(root.path(), "first", "nothing\n", "still nothing\n"),
            command(root.path(), "second", &many, "needle in stderr too\n"),
        ]);
        let size = Rect::new(0, 0, 160, 45);
        app.prepare(size, 0);
        app.open_at_first_match("NEEDLE");
        app.prepare(size, 0);
        assert_eq!(app.view.selected, 1);
        assert_eq!(app.view.focus, Pane::Stdout);
        let view = &app.view.outputs[0];
        assert_eq!(view.search.as_deref(), Some("NEEDLE"));
        assert_eq!(view.matched, Some(500));
        let shown: Vec<String> = app.content.outputs[0]
            .lines
            .iter()
            .map(plain_text)
            .collect();
        assert!(shown.contains(&"the Needle here".to_string()), "{shown:?}");
    }

    #[test]
    fn open_search_prefers_stdout_then_stderr_then_the_next_command() {
        let root = tether_os::testing::private_tempdir();
        let mut app = app(vec![
            command(root.path(), "first", "a\n", "b\nneedle\n"),
            command(root.path(), "second", "needle\n", ""),
        ]);
        app.prepare(Rect::new(0, 0, 160, 45), 0);
        app.open_at_first_match("needle");
        assert_eq!((app.view.selected, app.view.focus), (0, Pane::Stderr));
        assert_eq!(app.view.outputs[1].matched, Some(1));
    }

    #[test]
    fn open_search_without_a_match_says_so() {
        let root = tether_os::testing::private_tempdir();
        let mut app = app(vec![command(root.path(), "only", "a\n", "b\n")]);
        app.prepare(Rect::new(0, 0, 160, 45), 0);
        app.open_at_first_match("absent");
        assert_eq!(app.view.selected, 0);
        let message = app.view.message.clone().expect("a message");
        assert!(message.contains("absent"), "{message}");
        assert!(message.contains("tether grep"), "{message}");
    }

    #[test]
    fn a_query_found_nowhere_says_not_found_and_from_a_match_says_which_way() {
        let root = tether_os::testing::private_tempdir();
        let mut app = app(vec![command(root.path(), "only", "a\nbuild\nc\n", "")]);
        let size = Rect::new(0, 0, 160, 45);
        app.prepare(size, 0);
        app.view.outputs[0].search = Some("zzz".into());
        app.search(Stream::Stdout, false);
        assert_eq!(app.view.message.as_deref(), Some("`zzz` not found"));
        app.search(Stream::Stdout, true);
        assert_eq!(app.view.message.as_deref(), Some("`zzz` not found"));
        app.view.message = None;
        app.view.outputs[0].search = Some("build".into());
        app.search(Stream::Stdout, false);
        assert_eq!(app.view.outputs[0].matched, Some(1));
        app.search(Stream::Stdout, false);
        assert_eq!(app.view.message.as_deref(), Some("`build` not found above"));
        app.search(Stream::Stdout, true);
        assert_eq!(app.view.message.as_deref(), Some("`build` not found below"));
    }
}
