//! The TOML file that lists commands to run (`./tether.toml`, and the embedded demo).
//!
//! The document is walked through toml's spanned parse tree rather than derived with serde:
//! every error then points at the exact key or value (file:line:column) and says which
//! `[[command]]` it is in, which serde's `deny_unknown_fields` message cannot.

pub mod attention;
pub mod journal;
pub mod naming;
pub mod notify;
pub mod user;

use std::collections::{BTreeMap, HashMap};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Duration;

use thiserror::Error;
use toml::Spanned;
use toml::de::{DeTable, DeValue};

use crate::protocol::{CommandSpec, Limits};
use crate::units::{parse_duration, parse_size};

/// The embedded demo: one command per feature of the TUI.
pub const DEMO_TOML: &str = include_str!("../../assets/demo.toml");

/// Keys a `[[command]]` table may hold, in the order the error message lists them.
const COMMAND_KEYS: [&str; 14] = [
    "name",
    "shell",
    "argv",
    "cwd",
    "env",
    "grace",
    "no_output_timeout",
    "autostart",
    "pty",
    "max_procs",
    "max_memory",
    "drain_on",
    "drain",
    "attention",
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
    /// A pseudo-terminal for stdout (also its stdin) and one for stderr; false: pipes and
    /// `/dev/null`.
    pub pty: bool,
    /// `max_procs`, `max_memory`: limits on the command's cgroup, where it has one.
    pub limits: Limits,
    /// `drain_on`: a regex (checked) for the command's final line of stdout; after it, the
    /// command is given `drain` to exit before it is stopped.
    pub drain_on: Option<String>,
    pub drain: Option<Duration>,
    /// `attention`: this command's thresholds, over the user config's `[attention]`. Boxed:
    /// most commands set none, and a config travels inside `Effect`s.
    pub attention: Box<attention::AttentionSettings>,
}

impl CommandConfig {
    /// A command with every option at its default: started at once, in the current
    /// directory, with the default grace and no watchdog.
    pub fn new(name: impl Into<String>, command: CommandSpec) -> CommandConfig {
        CommandConfig {
            name: name.into(),
            command,
            cwd: None,
            env: BTreeMap::new(),
            grace: None,
            no_output_timeout: None,
            autostart: true,
            pty: true,
            limits: Limits::default(),
            drain_on: None,
            drain: None,
            attention: Default::default(),
        }
    }
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
        if let Some(cwd) = &mut command.cwd
            && cwd.is_relative()
        {
            *cwd = base.join(&*cwd);
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
    // Every option at its default until the table sets it; name and command come last.
    let mut command = CommandConfig::new(String::new(), CommandSpec::Argv(Vec::new()));
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
            "pty" => command.pty = field.boolean()?,
            "max_procs" => command.limits.max_procs = Some(field.count()?),
            "max_memory" => command.limits.max_memory = Some(field.size()?),
            "drain_on" => command.drain_on = Some(field.pattern()?),
            "drain" => command.drain = Some(field.duration()?),
            "attention" => {
                command.attention = Box::new(attention::attention(source, value, "attention")?)
            }
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

    /// `value` as a table, or an error at it: `{key}: expected a table ({written}), found …`,
    /// where `written` shows how the table is written.
    fn table<'v, 'i>(
        &self,
        value: &'v Spanned<DeValue<'i>>,
        key: &str,
        written: &str,
    ) -> Result<&'v DeTable<'i>, ConfigError> {
        match value.get_ref() {
            DeValue::Table(table) => Ok(table),
            other => Err(self.error(
                value.span().start,
                key,
                format!(
                    "{key}: expected a table ({written}), found {}",
                    other.type_str()
                ),
            )),
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

    /// An error at this value: `{key}: {why}`.
    fn invalid(&self, why: impl std::fmt::Display) -> ConfigError {
        self.source.error(
            self.value.span().start,
            self.key,
            format!("{}: {why}", self.key),
        )
    }

    /// The text of a string, or the digits of a bare decimal integer (a duration or a size
    /// without its unit).
    fn text_or_integer(&self, wanted: &str) -> Result<String, ConfigError> {
        match self.value.get_ref() {
            DeValue::String(text) => Ok(text.to_string()),
            DeValue::Integer(n) if n.radix() == 10 => Ok(n.as_str().to_string()),
            _ => Err(self.wrong_type(self.value, self.key, wanted)),
        }
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

    /// A final-drain regex, compiled here so that a bad one is an error at its value.
    fn pattern(&self) -> Result<String, ConfigError> {
        let pattern = self.string()?;
        crate::broker::final_drain::compile(&pattern).map_err(|e| self.invalid(e))?;
        Ok(pattern)
    }

    fn boolean(&self) -> Result<bool, ConfigError> {
        self.value
            .get_ref()
            .as_bool()
            .ok_or_else(|| self.wrong_type(self.value, self.key, "true or false"))
    }

    /// A duration string (`"2s"`), or a bare integer of seconds.
    fn duration(&self) -> Result<Duration, ConfigError> {
        let text = self.text_or_integer("a duration like \"2s\"")?;
        parse_duration(&text).map_err(|e| self.invalid(e))
    }

    /// A positive integer (`max_procs = 64`).
    fn count(&self) -> Result<u64, ConfigError> {
        match self.value.get_ref() {
            DeValue::Integer(n) if n.radix() == 10 => match n.as_str().parse::<u64>() {
                Ok(n) if n > 0 => Ok(n),
                _ => Err(self.invalid("must be a whole number above 0, like 64")),
            },
            _ => Err(self.wrong_type(self.value, self.key, "a whole number like 64")),
        }
    }

    /// A size string (`"512M"`), or a bare integer of bytes.
    fn size(&self) -> Result<u64, ConfigError> {
        let text = self.text_or_integer("a size like \"512M\"")?;
        parse_size(&text).map_err(|e| self.invalid(e))
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
mod tests;
