//! The columns of `tether ps` and `tether sessions` line up: each as wide as its widest
//! cell (what is shown, not a fixed width), measured in terminal columns, with long
//! session and command names, wide characters (CJK, emoji) and a name holding an escape
//! (shown sanitized, never raw). Printed to a pipe without `COLUMNS`, nothing is cut.

use crate::common;

use common::{TestEnv, run_to_end, wait_until};
use tether::model::output::text_width;

/// The terminal column where `needle` starts in `line`.
fn column_of(line: &str, needle: &str) -> Option<usize> {
    line.find(needle).map(|at| text_width(&line[..at]))
}

fn tether(env: &TestEnv, args: &[&str]) -> String {
    let mut command = env.tether(args);
    command.env("COLUMNS", "220");
    let out = run_to_end(env, command, &format!("tether {args:?}"));
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        !text.contains('\x1b'),
        "a raw escape reached the terminal: {text:?}"
    );
    text
}

/// Commands named to stretch the columns, in two sessions whose ids differ in length.
const NAMES: [(&str, &str); 3] = [
    ("s1", "构建🚀"),
    ("s1", "x\x1b[31mred"),
    (
        "session-with-a-rather-long-name",
        "a-very-long-command-name-indeed-longer-than-the-cap",
    ),
];

#[test]
fn ps_and_sessions_columns_line_up_whatever_the_names() {
    let env = TestEnv::new("columns");
    let running: Vec<_> = NAMES
        .iter()
        .map(|(session, name)| {
            env.spawn_exec(
                &["--no-pty", "--session", session, "--name", name],
                &["sleep", "300"],
            )
        })
        .collect();
    wait_until(&env, "three commands running", || {
        tether(&env, &["ps"]).lines().count() == 4
    });

    let ps = tether(&env, &["ps"]);
    let lines: Vec<&str> = ps.lines().collect();
    let header = lines[0];
    for title in ["NAME", "STATE", "COMMAND"] {
        let at = column_of(header, title).expect(title);
        for row in &lines[1..] {
            let cell = match title {
                "STATE" => "running",
                "COMMAND" => "sleep 300",
                _ => row.split_whitespace().nth(1).unwrap(),
            };
            assert_eq!(
                column_of(row, cell),
                Some(at),
                "{title} at column {at} in every row:\n{ps}"
            );
        }
    }
    assert!(ps.contains("构建🚀 "), "{ps}");
    assert!(
        ps.contains("x\u{fffd}[31mred"),
        "the escape shown, sanitized: {ps}"
    );

    for session in ["s1", "session-with-a-rather-long-name"] {
        tether(&env, &["stop", session]);
    }
    for run in running {
        run.wait(&env);
    }

    // One line per session: their starts line up although their ids differ in length.
    let sessions = tether(&env, &["sessions"]);
    let starts: Vec<Option<usize>> = sessions.lines().map(|l| column_of(l, "20")).collect();
    assert_eq!(starts.len(), 2, "{sessions}");
    assert!(
        starts.iter().all(|s| *s == starts[0] && s.is_some()),
        "{sessions}"
    );

    // --long: the commands' tables of both sessions share their columns.
    let long = tether(&env, &["sessions", "--long"]);
    let headers: Vec<&str> = long.lines().filter(|l| l.contains("DURATION")).collect();
    assert_eq!(headers.len(), 2, "{long}");
    let command_at = column_of(headers[0], "COMMAND");
    assert_eq!(command_at, column_of(headers[1], "COMMAND"), "{long}");
    for row in long.lines().filter(|l| l.contains("sleep 300")) {
        assert_eq!(column_of(row, "sleep 300"), command_at, "{long}");
    }
    env.finish();
}

/// `tether ARGS` printed to a pipe, as a script reads it, with no `COLUMNS` set.
fn piped(env: &TestEnv, args: &[&str]) -> String {
    let mut command = env.tether(args);
    command.env_remove("COLUMNS");
    let out = run_to_end(env, command, &format!("tether {args:?}"));
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// A script reading `ps` or `sessions` gets whole lines: a long name and command line, the
/// session's start and every failure. Before, output that was not a terminal was fitted to
/// 80 columns: the command cut to `echo '…`, the start and the failures dropped.
#[test]
fn piped_without_columns_nothing_is_cut() {
    let env = TestEnv::new("columns_piped");
    let words = "word ".repeat(30);
    let failing = format!("echo '{}'; exit 3", words.trim_end());
    for _ in 0..3 {
        let run = env.exec(
            &["--no-pty", "--session", "whole", "-n", "failing"],
            &["sh", "-c", &failing],
        );
        assert_eq!(run.code(), 3, "{}", run.stderr_text());
    }
    let name = "a-name-longer-than-the-twenty-four-columns-of-ps";
    let tail = "x".repeat(120);
    let server = env.spawn_exec(
        &["--no-pty", "--session", "whole", "--name", name],
        &["sh", "-c", &format!("sleep 300; : {tail}")],
    );
    wait_until(&env, "the server listed", || {
        piped(&env, &["ps", "whole"]).lines().count() == 2
    });

    let ps = piped(&env, &["ps", "whole"]);
    let row = ps.lines().nth(1).unwrap();
    assert!(row.contains(name), "{ps}");
    assert!(row.ends_with(&format!(": {tail}")), "{ps}");
    assert!(ps.lines().next().unwrap().contains("CONTAIN"), "{ps}");

    let sessions = piped(&env, &["sessions", "whole"]);
    let summary = sessions.lines().next().unwrap();
    let start = summary.split_whitespace().nth(1).unwrap_or_default();
    assert!(
        start.len() == 10 && start.starts_with("20"),
        "the start: {summary}"
    );
    assert!(
        summary.ends_with("01-failing 02-failing 03-failing"),
        "{summary}"
    );
    let commands: Vec<&str> = sessions.lines().filter(|l| l.contains("exit 3")).collect();
    assert_eq!(commands.len(), 3, "{sessions}");
    for line in commands {
        assert!(line.contains(words.trim_end()), "{sessions}");
    }
    assert!(
        !sessions.contains('…') && !ps.contains('…'),
        "{ps}{sessions}"
    );

    tether(&env, &["stop", "whole"]);
    server.wait(&env);
    env.finish();
}
