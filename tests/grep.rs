//! `tether grep` over sessions made by real `tether exec` runs whose output holds invalid
//! UTF-8 and escape sequences: what is printed, --stream, --json read back, -i, session
//! selection, and grep's exit codes.

use crate::common;

use std::fs;
use std::process::Output;

use common::{TestEnv, run_to_end};

fn run(env: &TestEnv, args: &[&str]) -> Output {
    run_to_end(env, env.tether(args), &format!("tether {args:?}"))
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// What the fixture command writes: invalid UTF-8, a title-setting OSC, colours, a line
/// longer than any screen, and a line on stderr.
const SCRIPT: &str = r#"
printf 'first line\n'
printf '\377\376 bad bytes then error one\n'
printf '\033]0;pwned\007\033[31mred ERROR two\033[0m\r\n'
printf 'quiet\n'
head -c 3000 /dev/zero | tr '\0' a; printf ' error far away\n'
printf 'warn: error on stderr\n' >&2
"#;

/// Runs the fixture through `tether exec`; returns the session id and its command directory.
fn fixture(env: &TestEnv) -> (String, std::path::PathBuf) {
    let out = run(
        env,
        &[
            "exec", "--no-pty", "-n", "fixture", "--", "sh", "-c", SCRIPT,
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let dir = common::journal::command_dirs(&env.state_dir())
        .into_iter()
        .find(|d| d.ends_with("01-fixture"))
        .expect("the fixture's journal");
    let session = dir
        .parent()
        .unwrap()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    (session, dir)
}

#[test]
fn matches_print_with_their_origin_sanitized_and_exit_codes_follow_grep() {
    let env = TestEnv::new("grep_text");
    let (session, dir) = fixture(&env);
    let stdout_log = fs::read(dir.join("stdout.log")).unwrap();
    assert!(
        stdout_log.starts_with(b"first line\n\xff\xfe"),
        "the fixture is stored raw"
    );

    let out = run(&env, &["grep", "error"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let printed = text(&out.stdout);
    let lines: Vec<&str> = printed.lines().collect();
    let origin = format!("{session}/01-fixture");
    assert_eq!(lines.len(), 3, "{printed}");
    assert_eq!(
        lines[0],
        format!("{origin}:stdout:2: \u{fffd}\u{fffd} bad bytes then error one")
    );
    assert!(
        lines[1].starts_with(&format!("{origin}:stdout:5: …aaa")),
        "{}",
        lines[1]
    );
    assert!(lines[1].ends_with("aaa error far away"), "{}", lines[1]);
    assert!(
        lines[1].len() < 700,
        "a long line is cut: {}",
        lines[1].len()
    );
    assert_eq!(
        lines[2],
        format!("{origin}:stderr:1: warn: error on stderr")
    );
    assert!(
        !out.stdout.contains(&0x1b),
        "no escape reaches the terminal"
    );

    // -i finds the coloured line, shown without its escapes or its carriage return. (The
    // pattern meets the bytes as written: `two$` would not match, an escape follows it.)
    let out = run(&env, &["grep", "-i", "^\\x1b.*red error TWO"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        format!("{origin}:stdout:3: red ERROR two\n")
    );

    // --stream
    let out = run(&env, &["grep", "--stream", "stderr", "error"]);
    assert_eq!(
        text(&out.stdout),
        format!("{origin}:stderr:1: warn: error on stderr\n")
    );
    let out = run(&env, &["grep", "--stream", "stdout", "stderr"]);
    assert_eq!(out.status.code(), Some(1), "stdout never says stderr");

    // Nothing matched: 1, silently.
    let out = run(&env, &["grep", "no such words"]);
    assert_eq!((out.status.code(), out.stdout.len()), (Some(1), 0));
    // A bad regex: 2, and a message that names the pattern and what is wrong.
    let out = run(&env, &["grep", "error (one"]);
    assert_eq!(out.status.code(), Some(2));
    let said = text(&out.stderr);
    assert!(
        said.contains("invalid pattern `error (one`: unclosed group"),
        "{said}"
    );
    assert_eq!(said.lines().count(), 1, "{said}");
    // An unknown session: 2.
    let out = run(&env, &["grep", "error", "no-such-session"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("no session `no-such-session`"));
    env.finish();
}

#[test]
fn matches_are_highlighted_when_asked_and_the_commands_escapes_never_pass() {
    let env = TestEnv::new("grep_color");
    fixture(&env);
    let out = run(&env, &["grep", "--color", "always", "ERROR"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let printed = text(&out.stdout);
    assert!(
        printed.contains("red \x1b[1;31mERROR\x1b[0m two"),
        "{printed:?}"
    );
    assert!(
        !printed.contains("\x1b]"),
        "the command's OSC is gone: {printed:?}"
    );
    assert!(!printed.contains("\x1b[31m"), "and its colour: {printed:?}");
    env.finish();
}

#[test]
fn json_lines_read_back_to_the_stored_bytes() {
    let env = TestEnv::new("grep_json");
    let (session, dir) = fixture(&env);
    let out = run(&env, &["grep", "--json", "error"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let records: Vec<serde_json::Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect();
    assert_eq!(records.len(), 3);
    for record in &records {
        assert_eq!(record["session"], session.as_str());
        assert_eq!(record["command"], "01-fixture");
        let stream = record["stream"].as_str().unwrap();
        let stored = fs::read(dir.join(format!("{stream}.log"))).unwrap();
        let offset = record["offset"].as_u64().unwrap() as usize;
        for range in record["matches"].as_array().unwrap() {
            let start = offset + range["start"].as_u64().unwrap() as usize;
            let end = offset + range["end"].as_u64().unwrap() as usize;
            assert_eq!(&stored[start..end], b"error", "{record}");
        }
        let line = record["line"].as_u64().unwrap() as usize;
        let line_start = stored
            .split(|&b| b == b'\n')
            .take(line - 1)
            .map(|l| l.len() + 1)
            .sum::<usize>();
        assert_eq!(line_start, offset, "{record}");
    }
    assert_eq!(
        records[0]["text"],
        "\u{fffd}\u{fffd} bad bytes then error one"
    );
    assert_eq!(records[0]["line"], 2);
    assert_eq!(records[2]["stream"], "stderr");
    env.finish();
}

#[test]
fn sessions_named_are_the_only_ones_searched() {
    let env = TestEnv::new("grep_sessions");
    let (first, _) = fixture(&env);
    let out = run(&env, &["exec", "--no-pty", "--", "echo", "another error"]);
    assert_eq!(out.status.code(), Some(0));
    let out = run(&env, &["grep", "error"]);
    assert_eq!(text(&out.stdout).lines().count(), 4);
    let out = run(&env, &["grep", "error", &first]);
    let printed = text(&out.stdout);
    assert_eq!(printed.lines().count(), 3, "{printed}");
    assert!(!printed.contains("another"), "{printed}");
    // A prefix that names both sessions lists them.
    let out = run(&env, &["grep", "error", "2"]);
    assert_eq!(out.status.code(), Some(2));
    let said = text(&out.stderr);
    assert!(said.contains("`2` names 2 sessions ("), "{said}");
    assert!(said.contains(&first), "{said}");
    env.finish();
}

#[test]
fn a_match_inside_an_escape_sequence_shows_the_line_as_without_colour() {
    let env = TestEnv::new("grep_escape_match");
    let script = r"printf 'copy \033]52;c;cHduZWQ=\007\033[2Jdone\n'";
    let out = run(&env, &["exec", "--no-pty", "--", "sh", "-c", script]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let grep = |color: &str| {
        let out = run(&env, &["grep", "--color", color, r"\x1b"]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        text(&out.stdout)
    };
    let (colored, plain) = (grep("always"), grep("never"));
    assert!(plain.ends_with(":stdout:1: copy done\n"), "{plain:?}");
    for shown in [&colored, &plain] {
        assert!(
            !shown.contains("]52;") && !shown.contains("[2J"),
            "{shown:?}"
        );
    }
    // The coloured line is the plain one plus colour codes, nothing else.
    let mut stripped = colored.clone();
    for code in ["\x1b[35m", "\x1b[32m", "\x1b[1;31m", "\x1b[0m"] {
        stripped = stripped.replace(code, "");
    }
    assert_eq!(stripped, plain);
    env.finish();
}

/// Two commands in one session (`tether exec --session`), for the options that speak of
/// commands: `build` says `error` twice among other lines, `lint` once.
fn two_commands(env: &TestEnv) {
    for (name, script) in [
        (
            "build",
            "printf 'a\\nb\\nerror one\\nc\\nd\\ne\\nf\\nERROR two\\ng\\n'",
        ),
        ("lint", "printf 'ok\\nerror three\\n'"),
    ] {
        let out = run(
            env,
            &[
                "exec",
                "--no-pty",
                "--session",
                "two",
                "-n",
                name,
                "--",
                "sh",
                "-c",
                script,
            ],
        );
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    }
}

#[test]
fn count_names_invert_and_case_as_grep() {
    let env = TestEnv::new("grep_count");
    two_commands(&env);
    let grep = |args: &[&str]| {
        let mut all = vec!["grep", "--color", "never"];
        all.extend(args);
        let out = run(&env, &all);
        (out.status.code(), text(&out.stdout))
    };
    assert_eq!(
        grep(&["-c", "error"]),
        (Some(0), "two/01-build:1\ntwo/02-lint:1\n".into())
    );
    assert_eq!(
        grep(&["-c", "-i", "error"]),
        (Some(0), "two/01-build:2\ntwo/02-lint:1\n".into())
    );
    // One command searched: the count alone, as grep -c of one file.
    assert_eq!(
        grep(&["-ci", "--name", "build", "error"]),
        (Some(0), "2\n".into())
    );
    // -c counts 0 where nothing is selected, and exits 1 when nothing is anywhere.
    assert_eq!(
        grep(&["-c", "nowhere"]),
        (Some(1), "two/01-build:0\ntwo/02-lint:0\n".into())
    );
    // -v selects the other lines; -c -v counts them.
    assert_eq!(
        grep(&["-cv", "-i", "error"]),
        (Some(0), "two/01-build:7\ntwo/02-lint:1\n".into())
    );
    let (code, printed) = grep(&["-v", "--name", "lint", "error"]);
    assert_eq!(
        (code, printed),
        (Some(0), "two/02-lint:stdout:1: ok\n".into())
    );
    // -l names the commands with a selected line; with -v those with a line that does not
    // match.
    assert_eq!(grep(&["-l", "ERROR"]), (Some(0), "two/01-build\n".into()));
    assert_eq!(
        grep(&["-l", "-v", "^(ok|error three)$"]),
        (Some(0), "two/01-build\n".into())
    );
    assert_eq!(grep(&["-l", "nowhere"]), (Some(1), String::new()));
    // --name: a glob over the name or the directory, exact without a wildcard.
    assert_eq!(
        grep(&["-l", "--name", "0?-*", "error"]),
        (Some(0), "two/01-build\ntwo/02-lint\n".into())
    );
    assert_eq!(
        grep(&["-l", "--name", "buil", "error"]),
        (Some(1), String::new())
    );
    // A bad pattern is still 2, whatever the options.
    assert_eq!(grep(&["-c", "("]).0, Some(2));
    env.finish();
}

#[test]
fn context_lines_and_group_breaks_as_grep() {
    let env = TestEnv::new("grep_context");
    two_commands(&env);
    let out = run(
        &env,
        &["grep", "--color", "never", "-i", "-C", "1", "error"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        "two/01-build-stdout-2- b\n\
         two/01-build:stdout:3: error one\n\
         two/01-build-stdout-4- c\n\
         --\n\
         two/01-build-stdout-7- f\n\
         two/01-build:stdout:8: ERROR two\n\
         two/01-build-stdout-9- g\n\
         --\n\
         two/02-lint-stdout-1- ok\n\
         two/02-lint:stdout:2: error three\n"
    );
    // -A and -B on their own side; -A wins over -C for its side, as in grep.
    let out = run(
        &env,
        &[
            "grep", "--color", "never", "-C", "5", "-A", "0", "--name", "lint", "three",
        ],
    );
    assert_eq!(
        text(&out.stdout),
        "two/02-lint-stdout-1- ok\ntwo/02-lint:stdout:2: error three\n"
    );
    // JSON marks context lines instead of a separator.
    let out = run(
        &env,
        &["grep", "--json", "-B", "1", "--name", "lint", "three"],
    );
    let records: Vec<serde_json::Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(records.len(), 2);
    assert_eq!(records[0]["context"], true);
    assert!(records[1].get("context").is_none());
    env.finish();
}

/// A `tether agent` session whose agent (a sh script) runs commands through its shell and
/// shows what they printed, as an agent's terminal does: once as it arrives (a command that
/// inherits the agent's output), and twice more with the decoration of a tool's result (a
/// redraw), beside a line only the agent printed.
#[test]
fn an_agents_echo_of_its_commands_output_counts_once() {
    let env = TestEnv::new("grep_echo");
    let agent = env.path("fake-agent");
    common::write_script(
        &agent,
        r#"#!/bin/sh
"$CLAUDE_CODE_SHELL" -c 'echo "inherited: 3 warnings"'
out=$("$CLAUDE_CODE_SHELL" -c 'echo "captured: 2 warnings"; echo "done"')
printf '  \342\216\277  %s\n' "$out"
printf '\033[2K\033[1A  \342\216\277  %s\n' "$out"
echo "agent: I saw warnings"
for frame in 1 2 3; do printf '\033[2K\342\224\202 Shell: count the warnings \342\224\202\n'; done
"#,
    );
    let mut command = env.tether(&["agent", "--session", "S", "--", "./fake-agent"]);
    command
        .current_dir(env.dir.path())
        .env_remove("TETHER_LEFTOVERS")
        .env_remove("TETHER_SESSION_OWNER")
        .stdin(std::process::Stdio::null());
    let out = run_to_end(&env, command, "the fake agent");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));

    let grep = |args: &[&str]| {
        let mut all = vec!["grep", "--color", "never"];
        all.extend(args);
        let out = run(&env, &all);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        (text(&out.stdout), text(&out.stderr))
    };
    let (printed, said) = grep(&["warnings"]);
    assert_eq!(
        printed,
        "S/02-echo:stdout:1: inherited: 3 warnings\n\
         S/03-echo:stdout:1: captured: 2 warnings\n\
         S/01-fake-agent:stdout:6: agent: I saw warnings\n\
         S/01-fake-agent:stdout:7: │ Shell: count the warnings │\n",
        "each line once, the agent's own lines too (stderr: {said})"
    );
    assert!(
        said.contains("S: 3 lines of the agent's terminal echoed what its commands printed"),
        "{said}"
    );
    // Its box drawn three times (a terminal program's redraws): once.
    assert!(
        said.contains("S: 2 lines of the agent's terminal drew again what it showed above"),
        "{said}"
    );
    let (counts, _) = grep(&["-c", "warnings"]);
    assert_eq!(counts, "S/01-fake-agent:2\nS/02-echo:1\nS/03-echo:1\n");
    // --echoes shows every line where it is.
    let (all, said) = grep(&["--echoes", "warnings"]);
    assert_eq!(all.lines().count(), 9, "{all}");
    assert!(
        !said.contains("echoed") && !said.contains("again"),
        "{said}"
    );
    // Under -v an agent's line is selected for what it lacks: nothing folds, its `done`
    // (also 03-echo's) is shown.
    let (others, said) = grep(&["-v", "warnings"]);
    assert!(!said.contains("echoed"), "{said}");
    assert!(
        others.contains("S/01-fake-agent:stdout:3: done\n"),
        "{others}"
    );
    env.finish();
}

/// The real thing: Claude Code 2.1.197 in a terminal under `tether agent` (see
/// tests/fixtures/README.md), its one tool call `echo UNIQUE-LINE-42; echo second-line-77`.
/// Its terminal stream holds the words twice, each time inside a redraw of several rows
/// joined by cursor moves: the call as it is made (`● Bash(echo UNIQUE-LINE-42; …)`), then
/// its result (`⎿ UNIQUE-LINE-42`). Three hits for one line; folded, one.
#[test]
fn claude_codes_terminal_echo_of_a_tool_result_counts_once() {
    let env = TestEnv::new("grep_claude_echo");
    let state = env.state_dir();
    let sessions = state.join("sessions");
    fs::create_dir_all(&sessions).unwrap();
    use std::os::unix::fs::PermissionsExt;
    for dir in [&state, &sessions] {
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700)).unwrap();
    }
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/claude-code-tui/sessions/claude-tui");
    common::copy_dir(&fixture, &sessions.join("claude-tui"));
    let grep = |args: &[&str]| {
        let mut all = vec!["grep", "--color", "never"];
        all.extend(args);
        let out = run(&env, &all);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        (text(&out.stdout), text(&out.stderr))
    };
    let (printed, said) = grep(&["UNIQUE-LINE-42|second-line-77"]);
    assert_eq!(
        printed,
        "claude-tui/04-echo:stdout:1: UNIQUE-LINE-42\n\
         claude-tui/04-echo:stdout:2: second-line-77\n"
    );
    assert!(
        said.contains("2 lines of the agent's terminal echoed"),
        "{said}"
    );
    let (all, _) = grep(&["--echoes", "-c", "UNIQUE-LINE-42"]);
    assert_eq!(all, "claude-tui/01-claude:2\nclaude-tui/04-echo:1\n");
    // The call's row as the terminal showed it: Claude Code draws the spaces between its
    // words by moves to a column (`CSI 29 G`), which are the spaces they skip.
    let (call, _) = grep(&["--echoes", "Bash"]);
    assert_eq!(
        call,
        "claude-tui/01-claude:stdout:30: …● Bash(echo UNIQUE-LINE-42; echo second-line-77)…\n"
    );
    // What the agent wrote on its own is a hit as before.
    let (own, said) = grep(&["-c", "All done"]);
    assert_eq!(own, "claude-tui/01-claude:1\nclaude-tui/04-echo:0\n");
    assert!(!said.contains("echoed"), "{said}");
    env.finish();
}
