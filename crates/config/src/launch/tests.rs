use std::time::Duration;

use super::super::{ConfigError, parse};
use super::*;

fn error(text: &str) -> String {
    match parse(text, "tether.toml") {
        Ok(config) => panic!("expected an error, parsed {config:?}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn reads_the_launcher_keys_and_their_defaults() {
    let text = r#"
ordered_shutdown = true

[[command]]
name = "migrate"
shell = "true"

[[command]]
name = "web"
shell = "serve"
depends_on = { migrate = "succeeded" }
restart = "on-failure"
max_restarts = 3
restart_backoff = "500ms"
restart_on_change = ["src/**/*.rs"]
"#;
    let config = parse(text, "tether.toml").unwrap();
    assert!(config.ordered_shutdown);
    let (migrate, web) = (&config.commands[0], &config.commands[1]);
    assert_eq!(migrate.restart, Restart::No);
    assert_eq!(
        migrate.max_restarts,
        tether_core::launcher::DEFAULT_MAX_RESTARTS
    );
    assert_eq!(migrate.restart_backoff, Duration::from_secs(1));
    assert_eq!(
        web.depends_on,
        [("migrate".to_string(), Condition::Succeeded)]
    );
    assert_eq!(web.restart, Restart::OnFailure);
    assert_eq!(web.max_restarts, 3);
    assert_eq!(web.restart_backoff, Duration::from_millis(500));
    assert_eq!(web.restart_on_change, ["src/**/*.rs"]);
    let plans = plans(&config.commands);
    assert_eq!(plans[1].depends_on, [(0, Condition::Succeeded)]);
    assert!(!parse("", "t").unwrap().ordered_shutdown);
}

#[test]
fn dependencies_keep_the_order_they_are_written_in() {
    let text = "[[command]]\nname = \"z\"\nshell = \"x\"\n[[command]]\nname = \"a\"\nshell = \"x\"\n\
                [[command]]\nname = \"web\"\nshell = \"x\"\n\
                depends_on = { z = \"started\", a = \"succeeded\" }\n";
    let config = parse(text, "tether.toml").unwrap();
    let names: Vec<&str> = (config.commands[2].depends_on.iter())
        .map(|(name, _)| name.as_str())
        .collect();
    assert_eq!(names, ["z", "a"]);
}

#[test]
fn an_unknown_name_is_an_error_at_it() {
    let text = "[[command]]\nname = \"web\"\nshell = \"x\"\ndepends_on = { dbb = \"started\" }\n";
    assert_eq!(
        error(text),
        "tether.toml:4:16: depends_on.dbb: no command is named `dbb`; the commands are web"
    );
}

#[test]
fn a_condition_word_must_be_one_of_three() {
    let text = "[[command]]\nname = \"a\"\nshell = \"x\"\n\n[[command]]\nname = \"b\"\nshell = \"x\"\ndepends_on = { a = \"healthy\" }\n";
    assert_eq!(
        error(text),
        "tether.toml:8:20: depends_on.a: expected \"started\", \"ready\" or \"succeeded\", \
         found \"healthy\""
    );
    let text = "[[command]]\nname = \"a\"\nshell = \"x\"\ndepends_on = [\"b\"]\n";
    assert!(
        error(text)
            .starts_with("tether.toml:4:14: depends_on: expected a table like { db = \"ready\" }"),
        "{}",
        error(text)
    );
}

#[test]
fn a_command_cannot_depend_on_itself() {
    let text = "[[command]]\nname = \"a\"\nshell = \"x\"\ndepends_on = { a = \"started\" }\n";
    assert_eq!(
        error(text),
        "tether.toml:4:16: depends_on.a: `a` cannot depend on itself"
    );
}

#[test]
fn a_cycle_is_named_along_its_path() {
    let text = r#"[[command]]
name = "a"
shell = "x"
depends_on = { b = "started" }

[[command]]
name = "b"
shell = "x"
depends_on = { c = "succeeded" }

[[command]]
name = "c"
shell = "x"
depends_on = { a = "started" }
"#;
    assert_eq!(
        error(text),
        "tether.toml:4:16: depends_on.b: the dependencies go round in a cycle, a → b → c → a; \
         break it"
    );
}

#[test]
fn ready_needs_a_readiness_check() {
    let text = "[[command]]\nname = \"db\"\nshell = \"x\"\n\n[[command]]\nname = \"web\"\nshell = \"x\"\ndepends_on = { db = \"ready\" }\n";
    assert_eq!(
        error(text),
        "tether.toml:8:16: depends_on.db: \"ready\" needs a readiness check on `db`; give it \
         ready_log, ready_http, ready_tcp or ready_exec, or wait for \"started\""
    );
    // With one, the same file is valid.
    let mut db = CommandConfig::new(
        "db",
        tether_protocol::protocol::CommandSpec::Shell("x".into()),
    );
    db.ready = Some(Box::new(tether_protocol::protocol::Readiness {
        probe: tether_protocol::protocol::ReadyProbe::Tcp {
            host: "127.0.0.1".into(),
            port: 5432,
        },
        interval: tether_protocol::protocol::DEFAULT_READY_INTERVAL,
        timeout: None,
    }));
    let mut web = CommandConfig::new(
        "web",
        tether_protocol::protocol::CommandSpec::Shell("x".into()),
    );
    web.depends_on = vec![("db".into(), Condition::Ready)];
    let source = Source {
        text,
        file: "tether.toml",
    };
    let written = [vec![], vec![0]];
    assert!(check(&source, &[db, web], &written).is_ok());
}

#[test]
fn restart_keys_refuse_what_they_do_not_take() {
    let cases = [
        (
            "restart = \"sometimes\"",
            "tether.toml:4:11: restart: expected \"no\", \"on-failure\" or \"always\", found \"sometimes\"",
        ),
        (
            "restart = true",
            "tether.toml:4:11: restart: expected \"no\", \"on-failure\" or \"always\", found boolean",
        ),
        (
            "max_restarts = -1",
            "tether.toml:4:16: max_restarts: must be a whole number from 0, like 3",
        ),
        (
            "restart_backoff = \"0s\"",
            "tether.toml:4:19: restart_backoff: must be above 0",
        ),
        (
            "restart_on_change = [\"src/[ab\"]",
            "tether.toml:4:21: restart_on_change: `src/[ab`: `[` without its `]`",
        ),
        ("ordered_shutdown = 1", ""),
    ];
    for (line, expected) in cases {
        let text = if line.starts_with("ordered_shutdown") {
            format!("{line}\n")
        } else {
            format!("[[command]]\nname = \"a\"\nshell = \"x\"\n{line}\n")
        };
        let message = error(&text);
        if expected.is_empty() {
            assert_eq!(
                message,
                "tether.toml:1:20: ordered_shutdown: expected true or false, found integer"
            );
        } else {
            assert_eq!(message, expected);
        }
    }
    let message = error("[[command]]\nname = \"a\"\nshell = \"x\"\nrestarts = 3\n");
    assert!(message.contains("restart_on_change"), "{message}");
}

#[test]
fn errors_carry_the_key() {
    let text = "[[command]]\nname = \"a\"\nshell = \"x\"\ndepends_on = { z = \"started\" }\n";
    match parse(text, "tether.toml") {
        Err(ConfigError::Invalid { key, .. }) => assert_eq!(key, "depends_on.z"),
        other => panic!("{other:?}"),
    }
}
