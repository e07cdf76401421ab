//! The TOML file that lists commands to run (`./tether.toml`, and the embedded demo).
//!
//! The document is walked through toml's spanned parse tree rather than derived with serde:
//! every error then points at the exact key or value (file:line:column) and says which
//! `[[command]]` it is in, which serde's `deny_unknown_fields` message cannot.

use std::collections::{BTreeMap, HashMap};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Duration;

use thiserror::Error;
use toml::Spanned;
use toml::de::{DeTable, DeValue};

use crate::protocol::CommandSpec;
use crate::units::parse_duration;

/// The embedded demo: one command per feature of the TUI.
pub const DEMO_TOML: &str = include_str!("../assets/demo.toml");

/// Keys a `[[command]]` table may hold, in the order the error message lists them.
const COMMAND_KEYS: [&str; 8] = [
    "name",
    "shell",
    "argv",
    "cwd",
    "env",
    "grace",
    "no_output_timeout",
    "autostart",
];

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Config {
    pub commands: Vec<CommandConfig>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct CommandConfig {
    pub name: String,
    pub command: CommandSpec,
    pub cwd: Option<PathBuf>,
    pub env: BTreeMap<String, String>,
    pub grace: Option<Duration>,
    pub no_output_timeout: Option<Duration>,
    pub autostart: bool,
}

#[derive(Debug, Error)]
pub enum ConfigError {
    /// The file could not be read at all. (`io` is in the message, not a `source`, so an
    /// error chain does not print it twice.)
    #[error(
        "cannot read config file {}: {io}; check the path and that the file is readable",
        path.display()
    )]
    Read { path: PathBuf, io: std::io::Error },
    /// The file was read but is not a valid command list. `message` starts with the key.
    #[error("{file}:{line}:{column}: {message}")]
    Invalid {
        file: String,
        line: usize,
        column: usize,
        /// The offending key (`grace`, `env.PORT`, ...), or empty when toml could not say.
        key: String,
        message: String,
    },
}

/// Parses a config document. `file` names it in errors; relative `cwd`s are left as written.
pub fn parse(text: &str, file: &str) -> Result<Config, ConfigError> {
    let source = Source { text, file };
    let doc = DeTable::parse(text).map_err(|e| source.syntax_error(&e))?;
    let mut commands = Vec::new();
    // name -> (where its value is, which command), to report duplicates against the first.
    let mut names: HashMap<String, (usize, usize)> = HashMap::new();
    for (key, value) in by_position(doc.get_ref()) {
        if key.get_ref() != "command" {
            return Err(source.error(
                key.span().start,
                key.get_ref(),
                format!(
                    "unknown key `{}` at the top level; expected only [[command]] tables",
                    key.get_ref()
                ),
            ));
        }
        let DeValue::Array(items) = value.get_ref() else {
            return Err(source.error(
                value.span().start,
                "command",
                "`command` must be a list of tables: write each one as [[command]], not [command]"
                    .to_string(),
            ));
        };
        for item in items.iter() {
            let number = commands.len() + 1;
            let (command, name_at) = parse_command(&source, item, number)?;
            if let Some(&(first_at, first_number)) = names.get(&command.name) {
                return Err(source.error(
                    name_at,
                    "name",
                    format!(
                        "name: `{}` is already used by [[command]] #{first_number} (line {}); \
                         give every command a unique name",
                        command.name,
                        source.line_column(first_at).0
                    ),
                ));
            }
            names.insert(command.name.clone(), (name_at, number));
            commands.push(command);
        }
    }
    Ok(Config { commands })
}

/// Reads and parses a config file; relative `cwd`s become relative to the file's directory.
pub fn load(path: &Path) -> Result<Config, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|io| ConfigError::Read {
        path: path.to_path_buf(),
        io,
    })?;
    let mut config = parse(&text, &path.display().to_string())?;
    let base = path.parent().unwrap_or(Path::new(""));
    for command in &mut config.commands {
        if let Some(cwd) = &mut command.cwd {
            if cwd.is_relative() {
                *cwd = base.join(&*cwd);
            }
        }
    }
    Ok(config)
}

/// The embedded demo config. A unit test proves it parses, so this cannot panic in a build
/// whose tests pass.
pub fn demo() -> Config {
    parse(DEMO_TOML, "demo.toml").expect("the embedded assets/demo.toml parses")
}

/// One `[[command]]` table; also returns where its name's value is, for duplicate reports.
fn parse_command(
    source: &Source<'_>,
    item: &Spanned<DeValue<'_>>,
    number: usize,
) -> Result<(CommandConfig, usize), ConfigError> {
    let at = item.span().start;
    let DeValue::Table(table) = item.get_ref() else {
        return Err(source.error(
            at,
            "command",
            format!(
                "[[command]] #{number} must be a table, found {}",
                item.get_ref().type_str()
            ),
        ));
    };
    let mut name = None;
    let mut shell = None;
    let mut argv = None;
    let mut command = CommandConfig {
        name: String::new(),
        command: CommandSpec::Argv(Vec::new()),
        cwd: None,
        env: BTreeMap::new(),
        grace: None,
        no_output_timeout: None,
        autostart: true,
    };
    for (key, value) in by_position(table) {
        let field = Field {
            source,
            key: key.get_ref(),
            value,
        };
        match key.get_ref().as_ref() {
            "name" => name = Some((field.string()?, value.span().start)),
            "shell" => shell = Some((field.string()?, value.span())),
            "argv" => argv = Some((field.strings()?, value.span())),
            "cwd" => command.cwd = Some(PathBuf::from(field.string()?)),
            "env" => command.env = field.env()?,
            "grace" => command.grace = Some(field.duration()?),
            "no_output_timeout" => command.no_output_timeout = Some(field.duration()?),
            "autostart" => command.autostart = field.boolean()?,
            other => {
                return Err(source.error(
                    key.span().start,
                    other,
                    format!(
                        "unknown key `{other}` in [[command]] #{number}; expected one of {}",
                        COMMAND_KEYS.join(", ")
                    ),
                ));
            }
        }
    }
    let Some((name, name_at)) = name else {
        return Err(source.error(
            at,
            "name",
            format!("name: [[command]] #{number} has no name; add one, like name = \"build\""),
        ));
    };
    if name.trim().is_empty() {
        return Err(source.error(name_at, "name", "name: must not be empty".to_string()));
    }
    command.name = name;
    command.command = match (shell, argv) {
        (Some(_), Some((_, span))) => {
            return Err(source.error(
                span.start,
                "argv",
                format!(
                    "argv: command `{}` sets both `shell` and `argv`; keep exactly one",
                    command.name
                ),
            ));
        }
        (None, None) => {
            return Err(source.error(
                at,
                "shell",
                format!(
                    "shell: command `{}` says nothing to run; add shell = \"...\" or argv = [...]",
                    command.name
                ),
            ));
        }
        (Some((script, span)), None) => {
            if script.trim().is_empty() {
                return Err(source.error(span.start, "shell", "shell: is empty".to_string()));
            }
            CommandSpec::Shell(script)
        }
        (None, Some((argv, span))) => {
            if argv.first().is_none_or(|program| program.is_empty()) {
                return Err(source.error(
                    span.start,
                    "argv",
                    "argv: needs at least a program name, like argv = [\"make\", \"-j2\"]"
                        .to_string(),
                ));
            }
            CommandSpec::Argv(argv)
        }
    };
    Ok((command, name_at))
}

/// The text being parsed and the name it goes by in errors.
struct Source<'a> {
    text: &'a str,
    file: &'a str,
}

impl Source<'_> {
    fn error(&self, offset: usize, key: &str, message: String) -> ConfigError {
        let (line, column) = self.line_column(offset);
        ConfigError::Invalid {
            file: self.file.to_string(),
            line,
            column,
            key: key.to_string(),
            message,
        }
    }

    /// 1-based line and column (in characters) of a byte offset.
    fn line_column(&self, offset: usize) -> (usize, usize) {
        let before = &self.text[..self.floor(offset)];
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let line = before.matches('\n').count() + 1;
        (line, before[line_start..].chars().count() + 1)
    }

    /// `offset`, moved back onto a character boundary within the text.
    fn floor(&self, offset: usize) -> usize {
        let mut offset = offset.min(self.text.len());
        while !self.text.is_char_boundary(offset) {
            offset -= 1;
        }
        offset
    }

    /// A TOML syntax error. toml does not say which key it was reading, so the key is the
    /// bare key before `=` when the error is in a value, else the token the error points at.
    fn syntax_error(&self, error: &toml::de::Error) -> ConfigError {
        let span = error.span().unwrap_or(0..0);
        let key = self.key_near(span.clone());
        let message = if key.is_empty() {
            format!("invalid TOML: {}", error.message())
        } else {
            format!("{key}: invalid TOML: {}", error.message())
        };
        self.error(span.start, &key, message)
    }

    fn key_near(&self, span: Range<usize>) -> String {
        let is_key = |s: &str| {
            !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        };
        let start = self.floor(span.start);
        let line_start = self.text[..start].rfind('\n').map_or(0, |i| i + 1);
        let line_end = self.text[start..]
            .find('\n')
            .map_or(self.text.len(), |i| start + i);
        let line = &self.text[line_start..line_end];
        let key = match line.find('=') {
            // The error is in a value: the key is what precedes `=`.
            Some(equals) if start > line_start + equals => line[..equals].trim(),
            // The error is in a key or a header: the key is the token itself.
            _ => self.text.get(span).map_or("", str::trim),
        };
        if is_key(key) {
            key.to_string()
        } else {
            String::new()
        }
    }
}

/// One `key = value` of a command, with the conversions its keys need.
struct Field<'a, 'i> {
    source: &'a Source<'a>,
    key: &'a str,
    value: &'a Spanned<DeValue<'i>>,
}

impl Field<'_, '_> {
    fn wrong_type(&self, value: &Spanned<DeValue<'_>>, key: &str, wanted: &str) -> ConfigError {
        self.source.error(
            value.span().start,
            key,
            format!(
                "{key}: expected {wanted}, found {}",
                value.get_ref().type_str()
            ),
        )
    }

    /// Strings reach `execve` and friends as C strings, which cannot hold NUL.
    fn checked(&self, value: &Spanned<DeValue<'_>>, key: &str) -> Result<String, ConfigError> {
        let Some(text) = value.get_ref().as_str() else {
            return Err(self.wrong_type(value, key, "a string"));
        };
        if text.contains('\0') {
            return Err(self.source.error(
                value.span().start,
                key,
                format!("{key}: must not contain a NUL character"),
            ));
        }
        Ok(text.to_string())
    }

    fn string(&self) -> Result<String, ConfigError> {
        self.checked(self.value, self.key)
    }

    fn strings(&self) -> Result<Vec<String>, ConfigError> {
        let Some(items) = self.value.get_ref().as_array() else {
            return Err(self.wrong_type(self.value, self.key, "an array of strings"));
        };
        items
            .iter()
            .enumerate()
            .map(|(i, item)| self.checked(item, &format!("{}[{i}]", self.key)))
            .collect()
    }

    fn boolean(&self) -> Result<bool, ConfigError> {
        self.value
            .get_ref()
            .as_bool()
            .ok_or_else(|| self.wrong_type(self.value, self.key, "true or false"))
    }

    /// A duration string (`"2s"`), or a bare integer of seconds.
    fn duration(&self) -> Result<Duration, ConfigError> {
        let text = match self.value.get_ref() {
            DeValue::String(text) => text.to_string(),
            DeValue::Integer(seconds) if seconds.radix() == 10 => seconds.as_str().to_string(),
            _ => return Err(self.wrong_type(self.value, self.key, "a duration like \"2s\"")),
        };
        parse_duration(&text).map_err(|e| {
            self.source.error(
                self.value.span().start,
                self.key,
                format!("{}: {e}", self.key),
            )
        })
    }

    fn env(&self) -> Result<BTreeMap<String, String>, ConfigError> {
        let Some(table) = self.value.get_ref().as_table() else {
            return Err(self.wrong_type(
                self.value,
                self.key,
                "a table like { RUST_LOG = \"debug\" }",
            ));
        };
        let mut env = BTreeMap::new();
        for (name, value) in by_position(table) {
            let key = format!("env.{}", name.get_ref());
            if name.get_ref().is_empty() || name.get_ref().contains(['=', '\0']) {
                return Err(self.source.error(
                    name.span().start,
                    &key,
                    format!("{key}: a variable name must be non-empty, without `=` or NUL"),
                ));
            }
            if !value.get_ref().is_str() {
                return Err(self.source.error(
                    value.span().start,
                    &key,
                    format!(
                        "{key}: expected a string, found {}; quote it",
                        value.get_ref().type_str()
                    ),
                ));
            }
            env.insert(name.get_ref().to_string(), self.checked(value, &key)?);
        }
        Ok(env)
    }
}

/// A table's entries in the order they appear in the file (toml may store them sorted).
fn by_position<'t, 'i>(
    table: &'t DeTable<'i>,
) -> Vec<(
    &'t Spanned<std::borrow::Cow<'i, str>>,
    &'t Spanned<DeValue<'i>>,
)> {
    let mut entries: Vec<_> = table.iter().collect();
    entries.sort_by_key(|(key, _)| key.span().start);
    entries
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(text: &str) -> String {
        match parse(text, "tether.toml") {
            Ok(config) => panic!("expected an error, parsed {config:?}"),
            Err(e) => e.to_string(),
        }
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
             name, shell, argv, cwd, env, grace, no_output_timeout, autostart"
        );
        assert_eq!(key_of(text), "nmae");
    }

    #[test]
    fn unknown_top_level_key_and_single_table_are_errors() {
        assert_eq!(
            error("verbose = true\n"),
            "tether.toml:1:1: unknown key `verbose` at the top level; expected only [[command]] tables"
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
        let message = error(text);
        assert!(
            message.starts_with("tether.toml:5:1: name: [[command]] #2 has no name"),
            "{message}"
        );
        assert_eq!(key_of(text), "name");
        assert!(
            error("[[command]]\nname = \" \"\nshell = \"x\"\n")
                .contains("2:8: name: must not be empty")
        );
    }

    #[test]
    fn shell_and_argv_are_exclusive_and_required() {
        let both = error("[[command]]\nname = \"a\"\nshell = \"true\"\nargv = [\"true\"]\n");
        assert!(
            both.starts_with("tether.toml:4:8: argv: command `a` sets both"),
            "{both}"
        );
        let neither = error("[[command]]\nname = \"a\"\ncwd = \"/\"\n");
        assert!(
            neither.starts_with("tether.toml:1:1: shell: command `a` says nothing to run"),
            "{neither}"
        );
        let blank = error("[[command]]\nname = \"a\"\nshell = \"  \"\n");
        assert!(
            blank.starts_with("tether.toml:3:9: shell: is empty"),
            "{blank}"
        );
    }

    #[test]
    fn empty_argv_is_an_error() {
        let message = error("[[command]]\nname = \"a\"\nargv = []\n");
        assert!(
            message.starts_with("tether.toml:3:8: argv: needs at least a program name"),
            "{message}"
        );
        assert!(error("[[command]]\nname = \"a\"\nargv = [\"\"]\n").contains("argv: needs"));
        let typed = error("[[command]]\nname = \"a\"\nargv = [\"ls\", 3]\n");
        assert!(
            typed.starts_with("tether.toml:3:15: argv[1]: expected a string, found integer"),
            "{typed}"
        );
    }

    #[test]
    fn duplicate_names_point_at_the_second_and_cite_the_first() {
        let text =
            "[[command]]\nname = \"a\"\nshell = \"x\"\n[[command]]\nname = \"a\"\nshell = \"y\"\n";
        let message = error(text);
        assert!(
            message.starts_with(
                "tether.toml:5:8: name: `a` is already used by [[command]] #1 (line 2)"
            ),
            "{message}"
        );
    }

    #[test]
    fn bad_durations_say_how_to_write_them() {
        let text = "[[command]]\nname = \"a\"\nshell = \"x\"\ngrace = \"fast\"\n";
        assert_eq!(
            error(text),
            "tether.toml:4:9: grace: `fast` is not a duration; write it like 500ms, 2s, 1.5s, 5m or 1h"
        );
        assert_eq!(key_of(text), "grace");
        let typed = error("[[command]]\nname = \"a\"\nshell = \"x\"\nno_output_timeout = true\n");
        assert!(
            typed.starts_with("tether.toml:4:21: no_output_timeout: expected a duration"),
            "{typed}"
        );
        let seconds = parse("[[command]]\nname = \"a\"\nshell = \"x\"\ngrace = 3\n", "t").unwrap();
        assert_eq!(seconds.commands[0].grace, Some(Duration::from_secs(3)));
        assert!(
            error("[[command]]\nname = \"a\"\nshell = \"x\"\ngrace = -1\n").contains("grace: `-1`")
        );
    }

    #[test]
    fn wrong_types_are_named() {
        let name = error("[[command]]\nname = 3\nshell = \"x\"\n");
        assert_eq!(
            name,
            "tether.toml:2:8: name: expected a string, found integer"
        );
        let env = error("[[command]]\nname = \"a\"\nshell = \"x\"\nenv = { PORT = 8080 }\n");
        assert!(
            env.starts_with("tether.toml:4:16: env.PORT: expected a string, found integer"),
            "{env}"
        );
        let auto = error("[[command]]\nname = \"a\"\nshell = \"x\"\nautostart = \"yes\"\n");
        assert!(
            auto.starts_with("tether.toml:4:13: autostart: expected true or false"),
            "{auto}"
        );
        let nul = error("[[command]]\nname = \"a\"\nshell = \"x\\u0000\"\n");
        assert!(nul.contains("shell: must not contain a NUL"), "{nul}");
    }

    #[test]
    fn syntax_errors_name_file_line_and_key() {
        let message = error("[[command]]\nname = \"a\"\nshell = make\n");
        assert!(
            message.starts_with("tether.toml:3:9: shell: invalid TOML:"),
            "{message}"
        );
        let dup = error("[[command]]\nname = \"a\"\nname = \"b\"\n");
        assert!(
            dup.starts_with("tether.toml:3:1: name: invalid TOML: duplicate key"),
            "{dup}"
        );
    }

    #[test]
    fn columns_count_characters_not_bytes() {
        let text = "[[command]]\nname = \"é\"\nshell = \"x\"\nenv = { \"ü\" = \"1\", B = 2 }\n";
        let message = error(text);
        assert!(message.starts_with("tether.toml:4:24: env.B:"), "{message}");
    }

    #[test]
    fn load_resolves_relative_cwd_against_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tether.toml");
        std::fs::write(
            &path,
            "[[command]]\nname = \"a\"\nshell = \"x\"\ncwd = \"sub\"\n\
             [[command]]\nname = \"b\"\nshell = \"x\"\ncwd = \"/abs\"\n",
        )
        .unwrap();
        let config = load(&path).unwrap();
        assert_eq!(config.commands[0].cwd, Some(dir.path().join("sub")));
        assert_eq!(config.commands[1].cwd, Some(PathBuf::from("/abs")));
        std::fs::write(&path, "[[command]]\nnme = \"a\"\n").unwrap();
        let message = load(&path).unwrap_err().to_string();
        assert!(message.starts_with(&format!("{}:2:1: unknown key `nme`", path.display())));
    }

    #[test]
    fn unreadable_file_names_the_path_and_what_to_do() {
        let dir = tempfile::tempdir().unwrap();
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
                "build", "workers", "runaway", "silent", "failing", "missing"
            ]
        );
        let get = |name: &str| demo.commands.iter().find(|c| c.name == name).unwrap();
        let script = |name: &str| match &get(name).command {
            CommandSpec::Shell(script) => script.clone(),
            other => panic!("{name} should be a shell command, is {other:?}"),
        };
        assert!(demo.commands.iter().all(|c| c.autostart));

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
}
