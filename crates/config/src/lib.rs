//! tether-config: what the user writes, read. The TOML file that lists commands to run
//! (`./tether.toml`, a Procfile, and the embedded demo) and the user config
//! (`~/.config/tether/config.toml`: [`user`]), each error at file:line:column.
//!
//! Above tether-protocol (the launch request the config becomes) and tether-core (the
//! launcher's words: restarts, conditions; a readiness probe's target): it reads files and the
//! environment only when asked to load one (each file through [`file`], which refuses a FIFO
//! without waiting on it: libc's open flags are all it takes of the OS), and holds no
//! process, socket or terminal. Every crate above it (the model, the broker, the front ends,
//! the TUI, the binary) may use it.
//!
//! Read with serde's derive over toml's spanned deserializer ([`document`]): the parser gives
//! every error's position, and the few checks serde cannot make (a name, exactly one of
//! `shell` and `argv`, unique names) use the spans it keeps.

pub mod attention;
pub mod budgets;
mod document;
pub mod example;
pub mod file;
pub mod journal;
pub mod launch;
pub mod naming;
pub mod notify;
pub mod otlp;
pub mod procfile;
pub mod ready;
pub mod user;
mod values;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use thiserror::Error;
use toml::Spanned;

use document::{Problem, Segment, Source, described};
use launch::{DependsOn, LaunchKeys, Word, restarts};
use tether_core::launcher::{Condition, DEFAULT_BACKOFF, DEFAULT_MAX_RESTARTS, Restart};
use tether_protocol::protocol::{CommandSpec, Limits, Readiness};
use values::{amount, count, flag, positive, threshold};

/// The embedded demo: one command per feature of the TUI.
pub const DEMO_TOML: &str = include_str!("../../../assets/demo.toml");

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Config {
    pub commands: Vec<CommandConfig>,
    /// `ordered_shutdown = true`: stopping a command stops what depends on it first, and
    /// quitting stops dependents before what they depend on (process-compose's key).
    pub ordered_shutdown: bool,
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
    /// `ready_log`, `ready_http`, `ready_tcp` or `ready_exec`, with `ready_timeout` and
    /// `ready_interval`: how the command proves it is ready (checked). Boxed, as
    /// `attention` is: most commands have none.
    pub ready: Option<Box<Readiness>>,
    /// `attention`: this command's thresholds, over the user config's `[attention]`. Boxed:
    /// most commands set none, and a config travels inside `Effect`s.
    pub attention: Box<attention::AttentionSettings>,
    /// `max_time`, `max_cpu`, `max_output`: this command's budgets, over the user config's
    /// `[budgets]` (see [`budgets`]).
    pub budgets: budgets::BudgetSettings,
    /// `depends_on`: the commands it waits for, by name, and for what.
    pub depends_on: Vec<(String, Condition)>,
    /// `restart`, `max_restarts`, `restart_backoff`: when and how often it starts again.
    pub restart: Restart,
    pub max_restarts: u32,
    pub restart_backoff: Duration,
    /// `restart_on_change`: globs, relative to its directory, of files that restart it.
    pub restart_on_change: Vec<String>,
}

impl CommandConfig {
    /// The agent of a `tether agent` session (journaled as `tether session-owner ... --
    /// AGENT`), which owns it.
    pub fn is_session_owner(&self) -> bool {
        matches!(&self.command, CommandSpec::Argv(argv) if naming::agent_argv(argv).is_some())
    }

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
            ready: None,
            attention: Default::default(),
            budgets: Default::default(),
            depends_on: Vec::new(),
            restart: Restart::No,
            max_restarts: DEFAULT_MAX_RESTARTS,
            restart_backoff: DEFAULT_BACKOFF,
            restart_on_change: Vec::new(),
        }
    }
}

/// No name and no command line, every option at its default: what a state built before its
/// configuration is known (a run read back from its events alone) starts from.
impl Default for CommandConfig {
    fn default() -> CommandConfig {
        CommandConfig::new(String::new(), CommandSpec::Argv(Vec::new()))
    }
}

#[derive(Debug, Error)]
pub enum ConfigError {
    /// The file could not be read at all. (`io` is in the message, not a `source`, so an
    /// error chain does not print it twice.)
    #[error(
        "cannot read {what} {}: {io}; check the path and that the file is readable",
        path.display()
    )]
    Read {
        what: FileKind,
        path: PathBuf,
        io: std::io::Error,
    },
    /// What is at the path is not a regular file (a FIFO, a directory, a device): refused
    /// without reading it, since a FIFO would hold tether until something wrote to it.
    #[error(
        "cannot read {what} {}: it is {found}, not a regular file; {}",
        path.display(),
        found.advice()
    )]
    NotRegular {
        what: FileKind,
        path: PathBuf,
        found: file::NotRegular,
    },
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

/// What a file that could not be read was to be: its error names it as the operator knows
/// it (`tether run --procfile` reads a Procfile, not a config file).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    Config,
    Procfile,
    /// The `.env` beside a Procfile.
    Dotenv,
}

impl std::fmt::Display for FileKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            FileKind::Config => "config file",
            FileKind::Procfile => "Procfile",
            FileKind::Dotenv => ".env file",
        })
    }
}

/// Parses a config document. `file` names it in errors; relative `cwd`s are left as written.
pub fn parse(text: &str, file: &str) -> Result<Config, ConfigError> {
    let source = Source { text, file };
    let holds = "expected [[command]] tables and ordered_shutdown";
    let document: Document = source.read(holds, described_in_command_file)?;
    let mut commands: Vec<CommandConfig> = Vec::new();
    // name -> (where its value is, which command), to report duplicates against the first.
    let mut names: HashMap<String, (usize, usize)> = HashMap::new();
    let mut written = Vec::new();
    for (i, table) in document.command.into_iter().enumerate() {
        let (number, at) = (i + 1, table.span().start);
        let (command, name_at, launch) = table.into_inner().into_config(&source, at, number)?;
        written.push(launch);
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
    launch::check(&source, &commands, &written)?;
    Ok(Config {
        commands,
        ordered_shutdown: document.ordered_shutdown.unwrap_or(false),
    })
}

/// Reads and parses a config file; relative `cwd`s become relative to the file's directory.
pub fn load(path: &Path) -> Result<Config, ConfigError> {
    let text = file::read_text(path, FileKind::Config)?;
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

/// `tether.toml`: `[[command]]` tables and nothing else.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Document {
    #[serde(default, deserialize_with = "flag")]
    ordered_shutdown: Option<bool>,
    #[serde(default)]
    command: Vec<Spanned<CommandTable>>,
}

/// One `[[command]]` table as written, its keys in the order an unknown key's message lists
/// them.
#[derive(Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct CommandTable {
    name: Option<Spanned<String>>,
    shell: Option<Spanned<String>>,
    argv: Option<Spanned<Vec<String>>>,
    cwd: Option<String>,
    env: BTreeMap<Spanned<String>, String>,
    #[serde(deserialize_with = "amount")]
    grace: Option<Duration>,
    #[serde(deserialize_with = "amount")]
    no_output_timeout: Option<Duration>,
    #[serde(deserialize_with = "flag")]
    autostart: Option<bool>,
    #[serde(deserialize_with = "flag")]
    pty: Option<bool>,
    #[serde(deserialize_with = "count")]
    max_procs: Option<u64>,
    #[serde(deserialize_with = "amount")]
    max_memory: Option<u64>,
    drain_on: Option<Spanned<String>>,
    #[serde(deserialize_with = "amount")]
    drain: Option<Duration>,
    ready_log: Option<Spanned<String>>,
    ready_http: Option<Spanned<String>>,
    ready_tcp: Option<Spanned<toml::Value>>,
    ready_exec: Option<Spanned<String>>,
    #[serde(deserialize_with = "positive")]
    ready_timeout: Option<Duration>,
    #[serde(deserialize_with = "positive")]
    ready_interval: Option<Duration>,
    attention: attention::AttentionSettings,
    #[serde(deserialize_with = "threshold")]
    max_time: Option<Option<Duration>>,
    #[serde(deserialize_with = "threshold")]
    max_cpu: Option<Option<Duration>>,
    #[serde(deserialize_with = "threshold")]
    max_output: Option<Option<u64>>,
    depends_on: DependsOn,
    restart: Option<Word<Restart>>,
    #[serde(deserialize_with = "restarts")]
    max_restarts: Option<u32>,
    #[serde(deserialize_with = "positive")]
    restart_backoff: Option<Duration>,
    restart_on_change: Option<Spanned<Vec<String>>>,
}

impl CommandTable {
    /// The command, once it has a name and exactly one of `shell` and `argv`, and its checks
    /// serde cannot make pass; also where its name's value is. `at` is where the table starts.
    fn into_config(
        self,
        source: &Source<'_>,
        at: usize,
        number: usize,
    ) -> Result<(CommandConfig, usize, Vec<usize>), ConfigError> {
        let fail =
            |at: usize, key: &str, why: String| Err(source.error(at, key, format!("{key}: {why}")));
        let Some(name) = self.name else {
            let why = format!("[[command]] #{number} has no name; add one, like name = \"build\"");
            return fail(at, "name", why);
        };
        let (name_at, name) = (name.span().start, name.into_inner());
        if name.trim().is_empty() {
            return fail(name_at, "name", "must not be empty".into());
        }
        let command = match (self.shell, self.argv) {
            (Some(_), Some(argv)) => {
                let why =
                    format!("command `{name}` sets both `shell` and `argv`; keep exactly one");
                return fail(argv.span().start, "argv", why);
            }
            (None, None) => {
                let why = format!(
                    "command `{name}` says nothing to run; add shell = \"...\" or argv = [...]"
                );
                return fail(at, "shell", why);
            }
            (Some(script), None) if script.get_ref().trim().is_empty() => {
                return fail(script.span().start, "shell", "is empty".into());
            }
            (Some(script), None) => CommandSpec::Shell(script.into_inner()),
            (None, Some(argv)) if argv.get_ref().first().is_none_or(String::is_empty) => {
                let why = "needs at least a program name, like argv = [\"make\", \"-j2\"]";
                return fail(argv.span().start, "argv", why.into());
            }
            (None, Some(argv)) => CommandSpec::Argv(argv.into_inner()),
        };
        let mut env = BTreeMap::new();
        for (variable, value) in self.env {
            if variable.get_ref().is_empty() || variable.get_ref().contains(['=', '\0']) {
                let key = format!("env.{}", variable.get_ref());
                let why = "a variable name must be non-empty, without `=` or NUL";
                return fail(variable.span().start, &key, why.into());
            }
            env.insert(variable.into_inner(), value);
        }
        // A final-drain regex is compiled here so that a bad one is an error at its value.
        if let Some(pattern) = &self.drain_on
            && let Err(e) = tether_core::final_drain::compile(pattern.get_ref())
        {
            return fail(pattern.span().start, "drain_on", e.to_string());
        }
        let ready = ready::ReadyKeys {
            log: self.ready_log,
            http: self.ready_http,
            tcp: self.ready_tcp,
            exec: self.ready_exec,
            timeout: self.ready_timeout,
            interval: self.ready_interval,
        }
        .readiness(source, at)?
        .map(Box::new);

        let launch = LaunchKeys {
            depends_on: self.depends_on,
            restart: self.restart,
            max_restarts: self.max_restarts,
            restart_backoff: self.restart_backoff,
            restart_on_change: self.restart_on_change,
        };
        let mut config = CommandConfig {
            name,
            command,
            cwd: self.cwd.map(PathBuf::from),
            env,
            grace: self.grace,
            no_output_timeout: self.no_output_timeout,
            autostart: self.autostart.unwrap_or(true),
            pty: self.pty.unwrap_or(true),
            limits: Limits {
                max_procs: self.max_procs,
                max_memory: self.max_memory,
            },
            drain_on: self.drain_on.map(Spanned::into_inner),
            drain: self.drain,
            ready,
            attention: Box::new(self.attention),
            budgets: budgets::BudgetSettings {
                max_time: self.max_time,
                max_cpu: self.max_cpu,
                max_output: self.max_output,
            },
            // The launcher's keys are filled below.
            ..CommandConfig::new(String::new(), CommandSpec::Shell(String::new()))
        };
        let written = launch.apply(source, &mut config)?;
        Ok((config, name_at, written))
    }
}

/// Errors in `tether.toml` name a command's keys as written in its table (`grace`, not
/// `command[0].grace`), and say which `[[command]]` a misplaced one is in.
fn described_in_command_file(path: &[Segment], problem: Problem<'_>) -> (String, String) {
    use Segment::{Index, Key};
    match (path, problem) {
        ([Key(_)], Problem::WrongType { .. }) => (
            "command".into(),
            "`command` must be a list of tables: write each one as [[command]], not [command]"
                .into(),
        ),
        ([Key(_), Index(i)], Problem::WrongType { found, .. }) => (
            "command".into(),
            format!("[[command]] #{} must be a table, found {found}", i + 1),
        ),
        ([Key(_), Index(i), Key(key)], Problem::UnknownKey { valid, .. }) => (
            key.clone(),
            format!(
                "unknown key `{key}` in [[command]] #{}; expected one of {valid}",
                i + 1
            ),
        ),
        ([Key(_), Index(_), rest @ ..], Problem::WrongType { expected, found }) => {
            // serde's words for what a list and a table take, in the config's.
            let (expected, hint) = match rest {
                [Key(key)] if key == "argv" => ("an array of strings", ""),
                [Key(key)] if key == "env" => ("a table like { RUST_LOG = \"debug\" }", ""),
                [Key(key)] if key == "depends_on" => ("a table like { db = \"ready\" }", ""),
                [Key(key), Key(_)] if key == "env" => (expected, "; quote it"),
                _ => (expected, ""),
            };
            let (key, message) = described(rest, Problem::WrongType { expected, found });
            (key, message + hint)
        }
        ([Key(_), Index(_), rest @ ..], problem) => described(rest, problem),
        (path, problem) => described(path, problem),
    }
}

#[cfg(test)]
mod tests;
