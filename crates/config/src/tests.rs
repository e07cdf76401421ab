use super::*;

fn error(text: &str) -> String {
    match parse(text, "tether.toml") {
        Ok(config) => panic!("expected an error, parsed {config:?}"),
        Err(e) => e.to_string(),
    }
}

/// `text` fails to parse with a message that begins `expected` (shown whole when it does not).
#[track_caller]
fn assert_error_starts(text: &str, expected: &str) {
    let message = error(text);
    assert!(message.starts_with(expected), "{message}");
}

/// A `[[command]]` table named `name` that runs `shell`, then the lines of `rest`.
fn command(name: &str, shell: &str, rest: &str) -> String {
    format!("[[command]]\nname = \"{name}\"\nshell = \"{shell}\"\n{rest}")
}

fn key_of(text: &str) -> String {
    match parse(text, "tether.toml") {
        Err(ConfigError::Invalid { key, .. }) => key,
        other => panic!("expected an Invalid error, got {other:?}"),
    }
}

#[test]
fn parses_every_key_and_defaults() {
    let text = r#"
[[command]]
name = "build"
shell = "make -j2"
cwd = "subdir"
env = { RUST_LOG = "debug", B = "2" }
grace = "2s"
no_output_timeout = "1.5s"
autostart = false

[[command]]
name = "list"
argv = ["ls", "-l", "a b"]

[command.env]
X = "y"
"#;
    let config = parse(text, "tether.toml").unwrap();
    assert_eq!(config.commands.len(), 2);
    let build = &config.commands[0];
    assert_eq!(build.name, "build");
    assert_eq!(build.command, CommandSpec::Shell("make -j2".into()));
    assert_eq!(build.cwd, Some(PathBuf::from("subdir")));
    assert_eq!(build.env.get("RUST_LOG").map(String::as_str), Some("debug"));
    assert_eq!(build.env.len(), 2);
    assert_eq!(build.grace, Some(Duration::from_secs(2)));
    assert_eq!(build.no_output_timeout, Some(Duration::from_millis(1500)));
    assert!(!build.autostart);
    let list = &config.commands[1];
    assert_eq!(
        list.command,
        CommandSpec::Argv(vec!["ls".into(), "-l".into(), "a b".into()])
    );
    assert_eq!(list.cwd, None);
    assert_eq!(list.env.get("X").map(String::as_str), Some("y"));
    assert_eq!((list.grace, list.no_output_timeout), (None, None));
    assert!(list.autostart, "autostart defaults to true");
}

#[test]
fn empty_config_is_allowed() {
    assert_eq!(parse("", "t.toml").unwrap().commands, []);
    assert_eq!(parse("# nothing yet\n", "t.toml").unwrap().commands, []);
}

#[test]
fn inline_array_of_tables_works_too() {
    let text = "command = [{ name = \"a\", argv = [\"true\"] }]\n";
    assert_eq!(parse(text, "t.toml").unwrap().commands[0].name, "a");
}

#[test]
fn unknown_key_names_file_line_column_command_and_choices() {
    let text = "[[command]]\nname = \"a\"\nshell = \"true\"\n\n[[command]]\nshell = \"true\"\nnmae = \"b\"\n";
    assert_eq!(
        error(text),
        "tether.toml:7:1: unknown key `nmae` in [[command]] #2; expected one of \
             name, shell, argv, cwd, env, grace, no_output_timeout, autostart, pty, max_procs, \
             max_memory, drain_on, drain, ready_log, ready_http, ready_tcp, ready_exec, \
             ready_timeout, ready_interval, attention, max_time, max_cpu, max_output, depends_on, \
             restart, max_restarts, restart_backoff, restart_on_change"
    );
    assert_eq!(key_of(text), "nmae");
}

#[test]
fn unknown_top_level_key_and_single_table_are_errors() {
    assert_eq!(
        error("verbose = true\n"),
        "tether.toml:1:1: unknown key `verbose` at the top level; expected [[command]] tables and ordered_shutdown"
    );
    let message = error("[command]\nname = \"a\"\nshell = \"true\"\n");
    assert!(
        message.starts_with("tether.toml:1:1: `command` must be a list"),
        "{message}"
    );
    assert!(message.contains("[[command]]"), "{message}");
}

#[test]
fn missing_name_points_at_the_table() {
    let text = "[[command]]\nname = \"a\"\nshell = \"true\"\n\n[[command]]\nshell = \"true\"\n";
    assert_error_starts(text, "tether.toml:5:1: name: [[command]] #2 has no name");
    assert_eq!(key_of(text), "name");
    assert!(
        error("[[command]]\nname = \" \"\nshell = \"x\"\n")
            .contains("2:8: name: must not be empty")
    );
}

#[test]
fn shell_and_argv_are_exclusive_and_required() {
    assert_error_starts(
        &command("a", "true", "argv = [\"true\"]\n"),
        "tether.toml:4:8: argv: command `a` sets both",
    );
    assert_error_starts(
        "[[command]]\nname = \"a\"\ncwd = \"/\"\n",
        "tether.toml:1:1: shell: command `a` says nothing to run",
    );
    assert_error_starts(&command("a", "  ", ""), "tether.toml:3:9: shell: is empty");
}

#[test]
fn empty_argv_is_an_error() {
    assert_error_starts(
        "[[command]]\nname = \"a\"\nargv = []\n",
        "tether.toml:3:8: argv: needs at least a program name",
    );
    assert!(error("[[command]]\nname = \"a\"\nargv = [\"\"]\n").contains("argv: needs"));
    assert_error_starts(
        "[[command]]\nname = \"a\"\nargv = [\"ls\", 3]\n",
        "tether.toml:3:15: argv[1]: expected a string, found integer",
    );
}

#[test]
fn duplicate_names_point_at_the_second_and_cite_the_first() {
    let text =
        "[[command]]\nname = \"a\"\nshell = \"x\"\n[[command]]\nname = \"a\"\nshell = \"y\"\n";
    assert_error_starts(
        text,
        "tether.toml:5:8: name: `a` is already used by [[command]] #1 (line 2)",
    );
}

#[test]
fn bad_durations_say_how_to_write_them() {
    let text = &command("a", "x", "grace = \"fast\"\n");
    assert_eq!(
        error(text),
        "tether.toml:4:9: grace: `fast` is not a duration of at most a week; write it like 500ms, 2s, 1.5s, 5m or 1h"
    );
    assert_eq!(key_of(text), "grace");
    assert_error_starts(
        &command("a", "x", "no_output_timeout = true\n"),
        "tether.toml:4:21: no_output_timeout: expected a duration",
    );
    let seconds = parse(&command("a", "x", "grace = 3\n"), "t").unwrap();
    assert_eq!(seconds.commands[0].grace, Some(Duration::from_secs(3)));
    assert!(error(&command("a", "x", "grace = -1\n")).contains("grace: `-1`"));
}

#[test]
fn wrong_types_are_named() {
    let name = error("[[command]]\nname = 3\nshell = \"x\"\n");
    assert_eq!(
        name,
        "tether.toml:2:8: name: expected a string, found integer"
    );
    assert_error_starts(
        &command("a", "x", "env = { PORT = 8080 }\n"),
        "tether.toml:4:16: env.PORT: expected a string, found integer",
    );
    assert_error_starts(
        &command("a", "x", "autostart = \"yes\"\n"),
        "tether.toml:4:13: autostart: expected true or false",
    );
    let nul = error("[[command]]\nname = \"a\"\nshell = \"x\\u0000\"\n");
    assert!(nul.contains("shell: must not contain a NUL"), "{nul}");
}

#[test]
fn syntax_errors_name_file_line_and_key() {
    assert_error_starts(
        "[[command]]\nname = \"a\"\nshell = make\n",
        "tether.toml:3:9: shell: invalid TOML:",
    );
    assert_error_starts(
        "[[command]]\nname = \"a\"\nname = \"b\"\n",
        "tether.toml:3:1: name: invalid TOML: duplicate key",
    );
}

#[test]
fn columns_count_characters_not_bytes() {
    let text = &command("é", "x", "env = { \"ü\" = \"1\", B = 2 }\n");
    assert_error_starts(text, "tether.toml:4:24: env.B:");
}

#[test]
fn load_resolves_relative_cwd_against_the_file() {
    let dir = tether_os::testing::private_tempdir();
    let path = dir.path().join("tether.toml");
    tether_os::testing::write_private(
        &path,
        "[[command]]\nname = \"a\"\nshell = \"x\"\ncwd = \"sub\"\n\
             [[command]]\nname = \"b\"\nshell = \"x\"\ncwd = \"/abs\"\n",
    );
    let config = load(&path).unwrap();
    assert_eq!(config.commands[0].cwd, Some(dir.path().join("sub")));
    assert_eq!(config.commands[1].cwd, Some(PathBuf::from("/abs")));
    tether_os::testing::write_private(&path, "[[command]]\nnme = \"a\"\n");
    let message = load(&path).unwrap_err().to_string();
    assert!(message.starts_with(&format!("{}:2:1: unknown key `nme`", path.display())));
}

#[test]
fn unreadable_file_names_the_path_and_what_to_do() {
    let dir = tether_os::testing::private_tempdir();
    let path = dir.path().join("missing.toml");
    let error = load(&path).unwrap_err();
    assert!(
        matches!(&error, ConfigError::Read { io, .. } if io.kind() == std::io::ErrorKind::NotFound)
    );
    let message = error.to_string();
    assert!(message.contains(&path.display().to_string()), "{message}");
    assert!(message.contains("check the path"), "{message}");
}

#[test]
fn demo_has_one_command_per_feature() {
    let demo = demo();
    let names: Vec<&str> = demo.commands.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "build",
            "workers",
            "runaway",
            "silent",
            "failing",
            "missing",
            "prompt",
            "dashboard",
            "db",
            "api"
        ]
    );
    let get = |name: &str| demo.commands.iter().find(|c| c.name == name).unwrap();
    let script = |name: &str| match &get(name).command {
        CommandSpec::Shell(script) => script.clone(),
        other => panic!("{name} should be a shell command, is {other:?}"),
    };
    assert!(demo.commands.iter().all(|c| c.autostart));

    let prompt = script("prompt");
    assert!(prompt.contains("read -r"), "a question to answer with i");
    let dashboard = script("dashboard");
    assert!(
        dashboard.contains("\\033[?1049h"),
        "the alternate screen, for v"
    );

    // A readiness and a dependency, seen at a glance: api waits for db to be ready.
    assert!(get("db").ready.is_some());
    let ready = tether_core::launcher::Condition::Ready;
    assert_eq!(get("api").depends_on, [("db".to_string(), ready)]);

    let build = script("build");
    assert!(build.contains("\\033[1;32m") && build.contains("Compiling"));
    assert!(build.contains("\\033[1;33m") && build.contains("warning"));
    assert!(build.contains("'\\r"), "progress redrawn in place with \\r");
    assert!(build.contains(">&2"), "warnings go to stderr");
    let workers = script("workers");
    assert!(workers.contains("do :; done") && workers.contains("kill -s STOP"));
    assert!(script("runaway").contains("trap '' TERM"));
    assert!(
        get("runaway")
            .grace
            .is_some_and(|g| g <= Duration::from_secs(5))
    );
    assert!(
        get("silent")
            .no_output_timeout
            .is_some_and(|t| t <= Duration::from_secs(10))
    );
    let failing = script("failing");
    assert!(failing.contains(">&2") && failing.contains("exit 3"));
    assert_eq!(
        get("missing").command,
        CommandSpec::Argv(vec!["tether-demo-no-such-command".into()])
    );
    // Self-contained: nothing but sh, coreutils and awk, and no writes outside /tmp.
    for command in &demo.commands {
        let text = command.command.display();
        assert!(!text.contains("python") && !text.contains("curl"), "{text}");
    }
}

#[test]
fn limits_are_read_and_checked() {
    let text = &command("a", "true", "max_procs = 64\nmax_memory = \"512M\"\n");
    let limits = parse(text, "t.toml").unwrap().commands[0].limits;
    assert_eq!(limits.max_procs, Some(64));
    assert_eq!(limits.max_memory, Some(512 << 20));
    let zero = &command("a", "true", "max_procs = 0\n");
    assert_eq!(
        error(zero),
        "tether.toml:4:13: max_procs: must be a whole number above 0, like 64"
    );
    let bad = &command("a", "true", "max_memory = \"lots\"\n");
    assert_error_starts(bad, "tether.toml:4:14: max_memory: ");
}

#[test]
fn budgets_are_read_and_checked() {
    let text = &command(
        "a",
        "true",
        "max_time = \"2m\"\nmax_cpu = \"30s\"\nmax_output = \"64M\"\n",
    );
    let budgets = parse(text, "t.toml").unwrap().commands[0].budgets;
    assert_eq!(
        budgets.budgets(),
        tether_protocol::protocol::Budgets {
            max_time: Some(Duration::from_secs(120)),
            max_cpu: Some(Duration::from_secs(30)),
            max_output: Some(64 << 20),
        }
    );
    // `off` says none, whatever the user's defaults; unset leaves them to the defaults.
    let off = &command("a", "true", "max_cpu = \"off\"\n");
    let budgets = parse(off, "t.toml").unwrap().commands[0].budgets;
    assert_eq!((budgets.max_cpu, budgets.max_time), (Some(None), None));
    assert_error_starts(
        &command("a", "true", "max_cpu = \"lots\"\n"),
        "tether.toml:4:11: max_cpu: ",
    );
    assert_error_starts(
        &command("a", "true", "max_time = 0\n"),
        "tether.toml:4:12: max_time: must be above 0; write \"off\" to turn it off",
    );
    assert_error_starts(
        &command("a", "true", "max_output = [1]\n"),
        "tether.toml:4:14: max_output: expected a size like \"512M\" or \"off\", found array",
    );
}

#[test]
fn drain_on_and_drain_are_per_command_and_the_pattern_is_checked() {
    let text = [
        command(
            "agent",
            "run-agent",
            "drain_on = '^\\{\"type\":\"result\"'\ndrain = \"3s\"",
        ),
        command("tests", "cargo test", r#"drain_on = "test result: ""#),
        command("plain", "true", ""),
    ];
    let config = parse(&text.join("\n"), "tether.toml").unwrap();
    let [agent, tests, plain] = &config.commands[..] else {
        panic!("three commands: {config:?}");
    };
    assert_eq!(agent.drain_on.as_deref(), Some(r#"^\{"type":"result""#));
    assert_eq!(agent.drain, Some(Duration::from_secs(3)));
    // Without `drain`, the broker's default (5 s) applies.
    assert_eq!(
        (tests.drain_on.as_deref(), tests.drain),
        (Some("test result: "), None)
    );
    assert_eq!((plain.drain_on.as_deref(), plain.drain), (None, None));

    let bad = &command("a", "x", "drain_on = \"(oops\"\n");
    assert_error_starts(
        bad,
        "tether.toml:4:12: drain_on: the --drain-on pattern `(oops` is not a valid regex",
    );
    assert_eq!(key_of(bad), "drain_on");
    assert_error_starts(
        &command("a", "x", "drain = \"soon\"\n"),
        "tether.toml:4:9: drain: `soon`",
    );
}

#[test]
fn keys_in_nested_tables_are_named_by_their_path() {
    let text = "[[command]]\nname = \"a\"\nshell = \"x\"\n[[command]]\nname = \"b\"\nshell = \"x\"\n\
                [command.env]\nA = 1\n";
    assert_eq!(
        error(text),
        "tether.toml:8:5: env.A: expected a string, found integer; quote it"
    );
    assert_error_starts(
        &command("a", "x", "attention = { input_after = [1] }\n"),
        "tether.toml:4:29: attention.input_after: expected a duration like \"2s\" or \"off\", found array",
    );
    assert_error_starts(
        "command = [3]\n",
        "tether.toml:1:12: [[command]] #1 must be a table, found integer",
    );
    assert_error_starts(
        "[[command]]\nname = \"a\"\nargv = [\"x\", \"\\u0000\"]\n",
        "tether.toml:3:14: argv[1]: must not contain a NUL character",
    );
}

#[test]
fn each_readiness_probe_is_read_with_its_timing() {
    use tether_protocol::protocol::{Readiness, ReadyProbe};
    let text = [
        command("db", "x", "ready_tcp = 5432\nready_timeout = \"30s\"\n"),
        command("api", "x", "ready_tcp = \"[::1]:8080\"\n"),
        command(
            "web",
            "x",
            "ready_http = \"http://127.0.0.1:8080/health\"\nready_interval = \"250ms\"\n",
        ),
        command("pg", "x", "ready_exec = \"pg_isready -q\"\n"),
        command("log", "x", "ready_log = 'listening on \\d+'\n"),
        command("plain", "x", ""),
    ];
    let config = parse(&text.join("\n"), "tether.toml").unwrap();
    let ready: Vec<Option<Readiness>> = (config.commands.iter())
        .map(|c| c.ready.as_deref().cloned())
        .collect();
    let probe = |i: usize| ready[i].as_ref().map(|r| r.probe.clone());
    assert_eq!(
        ready[0],
        Some(Readiness {
            probe: ReadyProbe::Tcp {
                host: "127.0.0.1".into(),
                port: 5432
            },
            interval: Duration::from_millis(500),
            timeout: Some(Duration::from_secs(30)),
        })
    );
    assert_eq!(
        probe(1),
        Some(ReadyProbe::Tcp {
            host: "[::1]".into(),
            port: 8080
        })
    );
    let web = ready[2].as_ref().unwrap();
    assert_eq!(
        (web.interval, web.timeout),
        (Duration::from_millis(250), None)
    );
    assert_eq!(
        probe(3),
        Some(ReadyProbe::Exec {
            shell: "pg_isready -q".into()
        })
    );
    assert_eq!(
        probe(4),
        Some(ReadyProbe::Log {
            pattern: "listening on \\d+".into()
        })
    );
    assert_eq!(ready[5], None);
}

#[test]
fn a_bad_readiness_probe_is_an_error_at_its_value() {
    let cases = [
        (
            "ready_log = \"(oops\"\n",
            "tether.toml:4:13: ready_log: not a valid regex",
        ),
        (
            "ready_http = \"https://127.0.0.1/health\"\n",
            "tether.toml:4:14: ready_http: `https://127.0.0.1/health` is not a plain http:// URL; for https (or anything curl can check) use ready_exec",
        ),
        (
            "ready_http = \"http://example.com/\"\n",
            "tether.toml:4:14: ready_http: host `example.com` is not an IP address or `localhost`",
        ),
        (
            "ready_http = \"http://127.0.0.1/a\\r\\nX-Injected: 1\"\n",
            "tether.toml:4:14: ready_http: `http://127.0.0.1/a\r\nX-Injected: 1` has a space or a control character in its path",
        ),
        (
            "ready_tcp = 70000\n",
            "tether.toml:4:13: ready_tcp: `70000` is not a port",
        ),
        (
            "ready_tcp = \"db:5432\"\n",
            "tether.toml:4:13: ready_tcp: host `db` is not",
        ),
        (
            "ready_tcp = [1]\n",
            "tether.toml:4:13: ready_tcp: expected a port like 8080 or \"host:port\", found array",
        ),
        (
            "ready_exec = \" \"\n",
            "tether.toml:4:14: ready_exec: is empty",
        ),
        (
            "ready_tcp = 8080\nready_timeout = \"0s\"\n",
            "tether.toml:5:17: ready_timeout: must be above 0",
        ),
        (
            "ready_tcp = 8080\nready_interval = \"soon\"\n",
            "tether.toml:5:18: ready_interval: `soon`",
        ),
        (
            "ready_tcp = 8080\nready_log = \"up\"\n",
            "tether.toml:5:13: ready_log: a command has one readiness probe: keep `ready_tcp` or `ready_log`",
        ),
        (
            "ready_timeout = \"5s\"\n",
            "tether.toml:1:1: ready_timeout: there is no readiness probe to time",
        ),
    ];
    for (rest, expected) in cases {
        assert_error_starts(&command("a", "x", rest), expected);
    }
    assert_eq!(key_of(&command("a", "x", "ready_tcp = 0\n")), "ready_tcp");
}
