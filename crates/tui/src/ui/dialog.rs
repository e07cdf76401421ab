//! Questions and prompts drawn over the main view.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph, Wrap};

use super::{centered, format, pane_block, style};
use crate::app::view::Dialog;
use tether_model::Model;
use tether_model::output::one_line;

pub fn draw(frame: &mut Frame, area: Rect, model: &Model, dialog: &Dialog) {
    let (title, body): (&str, Vec<Line>) = match dialog {
        Dialog::Help => return,
        Dialog::ConfirmKill { command } => {
            let name = model
                .commands
                .get(*command)
                .map_or("?", |c| c.config.name.as_str());
            (
                "Confirm SIGKILL",
                vec![
                    Line::raw(format!(
                        "Send SIGKILL to every process of `{}`?",
                        one_line(name)
                    )),
                    Line::styled("Processes get no chance to clean up.", style::DIM),
                    Line::raw(""),
                    // No Enter here: a KILL is never the default answer.
                    answer_keys(false),
                ],
            )
        }
        Dialog::ConfirmQuit { running } => (
            "Quit",
            vec![
                Line::raw(format!(
                    "{} still running.",
                    format::count(*running, "command is", "commands are")
                )),
                Line::raw(format!(
                    "Stop {} (TERM, grace, KILL) and quit?",
                    if *running == 1 { "it" } else { "them all" }
                )),
                Line::raw(""),
                answer_keys(true),
            ],
        ),
        Dialog::NewCommand { input } => (
            "Launch a command",
            prompt(
                "Shell command:",
                input,
                "run by /bin/sh -c in the current directory",
            ),
        ),
        Dialog::Search { stream, input } => {
            let mut body = prompt(
                &format!("Search {} for:", stream.name()),
                input,
                "case-insensitive; n / N for next and previous; empty clears",
            );
            body.push(Line::styled(
                "↑ the last search; Ctrl-U clears the line",
                style::DIM,
            ));
            ("Search", body)
        }
        Dialog::SignalProcess {
            pid, argv, input, ..
        } => (
            "Signal one process",
            prompt(
                &format!(
                    "Signal for pid {pid} ({}):",
                    format::truncate(&one_line(argv), 30)
                ),
                input,
                "a name (TERM, KILL, INT, HUP, STOP, CONT, USR1) or a number",
            ),
        ),
        Dialog::GoToTime { input } => (
            "Time cursor",
            prompt(
                "Go to, from the session's start:",
                input,
                "+1:23, +0:01.5, 1:23, 83s or 500ms",
            ),
        ),
    };
    let height = body.len() as u16 + 2;
    let popup = centered(area, 64, height);
    frame.render_widget(Clear, popup);
    frame.render_widget(
        Paragraph::new(body)
            .wrap(Wrap { trim: false })
            .block(pane_block(title, true, popup.width)),
        popup,
    );
}

/// The keys that answer a question; `enter_says_yes` for a question whose yes is the default.
fn answer_keys(enter_says_yes: bool) -> Line<'static> {
    let yes = if enter_says_yes { " y Enter " } else { " y " };
    Line::from(vec![
        Span::styled(yes, style::KEY),
        Span::raw(" yes   "),
        Span::styled(" n Esc ", style::KEY),
        Span::raw(" no"),
    ])
}

fn prompt(label: &str, input: &str, hint: &str) -> Vec<Line<'static>> {
    vec![
        Line::raw(label.to_string()),
        Line::from(vec![
            Span::raw("> "),
            Span::raw(one_line(input)),
            Span::styled("█", style::DIM),
        ]),
        Line::styled(hint.to_string(), style::DIM),
    ]
}
