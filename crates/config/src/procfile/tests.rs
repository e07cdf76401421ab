use super::*;

fn process(name: &str, command: &str) -> Process {
    Process {
        name: name.into(),
        command: command.into(),
    }
}

/// The message of a parse error, as the user reads it (`file:line:column: ...`).
fn error_of(result: Result<impl std::fmt::Debug, ConfigError>) -> String {
    result.expect_err("an error").to_string()
}

#[test]
fn a_procfile_of_names_and_commands_with_comments_and_blank_lines() {
    let text = "# the app\nweb: bundle exec rails s -p $PORT\n\n  # workers\nworker:sidekiq -c 5\r\nclock_2-b:   ruby clock.rb  \n";
    let processes = parse(text, "Procfile").unwrap();
    assert_eq!(
        processes,
        [
            process("web", "bundle exec rails s -p $PORT"),
            process("worker", "sidekiq -c 5"),
            process("clock_2-b", "ruby clock.rb"),
        ]
    );
}

#[test]
fn a_colon_in_the_command_stays_in_the_command() {
    let processes = parse("api: echo a:b", "Procfile").unwrap();
    assert_eq!(processes, [process("api", "echo a:b")]);
}

#[test]
fn a_line_that_is_no_process_is_an_error_at_its_line() {
    let text = "web: serve\nthis is not a process\n";
    assert_eq!(
        error_of(parse(text, "Procfile")),
        "Procfile:2:1: expected `name: command` (a name of letters, digits, `_` and `-`), \
         found `this is not a process`"
    );
}

#[test]
fn a_name_outside_foremans_characters_is_an_error() {
    for line in ["web.1: serve", "my web: serve", ": serve", "wéb: serve"] {
        let message = error_of(parse(line, "Procfile"));
        assert!(
            message.starts_with("Procfile:1:1: expected `name: command`"),
            "{line}: {message}"
        );
    }
}

#[test]
fn a_process_without_a_command_is_an_error_after_its_colon() {
    assert_eq!(
        error_of(parse("web: serve\nworker:   \n", "Procfile")),
        "Procfile:2:8: worker: has no command; write it after the colon"
    );
}

#[test]
fn a_name_used_twice_is_an_error_at_the_second() {
    assert_eq!(
        error_of(parse("web: a\nworker: b\nweb: c\n", "Procfile")),
        "Procfile:3:1: web: is already the name of the process on line 1; give every process \
         a unique name"
    );
}

#[test]
fn a_dotenv_is_read_as_foreman_reads_it() {
    let text = "# settings\nPORT=5000\nexport RUST_LOG=debug\nQUOTED='a \"b\" $c'\nESCAPED=\"line\\none \\\"two\\\"\"\nEMPTY=\nSPACES=  kept  \n";
    let env = parse_env(text, ".env").unwrap();
    let expected: BTreeMap<String, String> = [
        ("PORT", "5000"),
        ("RUST_LOG", "debug"),
        ("QUOTED", "a \"b\" $c"),
        ("ESCAPED", "line\none \"two\""),
        ("EMPTY", ""),
        ("SPACES", "  kept  "),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    assert_eq!(env, expected);
}

#[test]
fn a_dotenv_line_that_is_no_assignment_is_an_error_at_its_line() {
    assert_eq!(
        error_of(parse_env("A=1\nB-C=2\n", "app/.env")),
        "app/.env:2:1: expected `KEY=VALUE` (a key of letters, digits and `_`), found `B-C=2`"
    );
}

#[test]
fn load_gives_each_process_the_dotenv_and_the_procfiles_directory() {
    let dir = tether_os::testing::private_tempdir();
    let procfile = dir.path().join("Procfile");
    tether_os::testing::write_private(&procfile, "web: serve\nworker: work\n");
    tether_os::testing::write_private(dir.path().join(".env"), "PORT=5000\n");
    let config = load(&procfile).unwrap();
    let names: Vec<&str> = config.commands.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["web", "worker"]);
    for command in &config.commands {
        assert_eq!(command.env.get("PORT").map(String::as_str), Some("5000"));
        assert_eq!(command.cwd.as_deref(), Some(dir.path()));
    }
    assert_eq!(
        config.commands[0].command,
        CommandSpec::Shell("serve".into())
    );
}

#[test]
fn load_without_a_dotenv_and_of_a_missing_procfile() {
    let dir = tether_os::testing::private_tempdir();
    let procfile = dir.path().join("Procfile");
    let missing = error_of(load(&procfile));
    assert!(
        missing.starts_with(&format!("cannot read Procfile {}", procfile.display())),
        "{missing}"
    );
    tether_os::testing::write_private(&procfile, "web: serve\n");
    let config = load(&procfile).unwrap();
    assert!(config.commands[0].env.is_empty());
}

/// A file that cannot be read is named as what it was to be: the Procfile whatever its
/// name, the `.env` beside it; neither is a config file.
#[test]
fn an_unreadable_file_is_named_a_procfile_or_a_dotenv() {
    let dir = tether_os::testing::private_tempdir();
    let procfile = dir.path().join("nonexist");
    let missing = error_of(load(&procfile));
    assert!(
        missing.starts_with(&format!("cannot read Procfile {}: ", procfile.display())),
        "{missing}"
    );
    assert!(!missing.contains("config file"), "{missing}");
    {
        use std::io::Write;
        use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&procfile)
            .unwrap();
        file.write_all(b"web: serve\n").unwrap();
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(dir.path().join(".env"))
            .unwrap();
    }
    let dotenv = dir.path().join(".env");
    let unreadable = error_of(load(&procfile));
    assert!(
        unreadable.starts_with(&format!("cannot read .env file {}: ", dotenv.display())),
        "{unreadable}"
    );
}
