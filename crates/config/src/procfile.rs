//! `tether run --procfile`: a Procfile, as Foreman reads it, turned into commands. Each
//! `name: command` line is a command run by /bin/sh -c, in the Procfile's directory; a `.env`
//! beside it gives every command its variables, as Foreman's does. Unlike Foreman, a line
//! that is neither a process, a comment nor blank is an error at file:line:column rather than
//! silently skipped: a typo must not drop a process.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use super::file::read_text;
use super::{CommandConfig, Config, ConfigError, FileKind};
use tether_protocol::protocol::CommandSpec;

/// One `name: command` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Process {
    pub name: String,
    pub command: String,
}

/// Reads the Procfile at `path` and the `.env` beside it (when there is one) into commands:
/// each a shell command with the `.env`'s variables, run in the Procfile's directory.
pub fn load(path: &Path) -> Result<Config, ConfigError> {
    let dir = path.parent().filter(|dir| !dir.as_os_str().is_empty());
    let env_path = dir.unwrap_or(Path::new("")).join(".env");
    let env = match read_text(&env_path, FileKind::Dotenv) {
        Ok(text) => parse_env(&text, &env_path.display().to_string())?,
        Err(ConfigError::Read { io, .. }) if io.kind() == std::io::ErrorKind::NotFound => {
            BTreeMap::new()
        }
        Err(err) => return Err(err),
    };
    let text = read_text(path, FileKind::Procfile)?;
    let processes = parse(&text, &path.display().to_string())?;
    let commands = processes
        .into_iter()
        .map(|process| CommandConfig {
            cwd: dir.map(Path::to_path_buf),
            env: env.clone(),
            ..CommandConfig::new(process.name, CommandSpec::Shell(process.command))
        })
        .collect();
    Ok(Config {
        commands,
        ..Config::default()
    })
}

/// The processes of a Procfile's text: `name: command` lines (a name of ASCII letters,
/// digits, `_` and `-`), `#` comments and blank lines. `file` names it in errors.
pub fn parse(text: &str, file: &str) -> Result<Vec<Process>, ConfigError> {
    let mut processes = Vec::new();
    let mut first_line_of: HashMap<String, usize> = HashMap::new();
    for (number, line) in lines(text) {
        let error = |column: usize, key: &str, message: String| ConfigError::Invalid {
            file: file.to_string(),
            line: number,
            column,
            key: key.to_string(),
            message,
        };
        let Some((name, command)) = line.split_once(':').filter(|(name, _)| is_name(name)) else {
            return Err(error(
                1,
                "",
                format!(
                    "expected `name: command` (a name of letters, digits, `_` and `-`), found `{}`",
                    line.trim_end()
                ),
            ));
        };
        let command = command.trim();
        if command.is_empty() {
            let why = format!("{name}: has no command; write it after the colon");
            return Err(error(name.len() + 2, name, why));
        }
        if let Some(first) = first_line_of.insert(name.to_string(), number) {
            let why = format!(
                "{name}: is already the name of the process on line {first}; give every \
                 process a unique name"
            );
            return Err(error(1, name, why));
        }
        processes.push(Process {
            name: name.to_string(),
            command: command.to_string(),
        });
    }
    Ok(processes)
}

/// The variables of a `.env` file, read as Foreman reads them: `KEY=VALUE` lines (a key of
/// ASCII letters, digits and `_`), an optional `export ` before the key; a value in single
/// quotes is taken as written, one in double quotes has `\n` made a newline and any other
/// backslash dropped before the character it escapes, and anything else is the value as
/// written, up to the end of the line (no `#` comment after it, no `$VAR` expansion).
/// `#` comments and blank lines are skipped; any other line is an error at file:line.
pub fn parse_env(text: &str, file: &str) -> Result<BTreeMap<String, String>, ConfigError> {
    let mut env = BTreeMap::new();
    for (number, line) in lines(text) {
        let assignment = line.strip_prefix("export ").unwrap_or(line);
        let Some((key, value)) = assignment
            .split_once('=')
            .filter(|(key, _)| is_env_key(key))
        else {
            return Err(ConfigError::Invalid {
                file: file.to_string(),
                line: number,
                column: 1,
                key: String::new(),
                message: format!(
                    "expected `KEY=VALUE` (a key of letters, digits and `_`), found `{}`",
                    line.trim_end()
                ),
            });
        };
        env.insert(key.to_string(), env_value(value));
    }
    Ok(env)
}

/// The 1-based numbers and text of the lines that say something: not blank, not a comment.
fn lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    (text.lines().enumerate())
        .map(|(i, line)| (i + 1, line.strip_suffix('\r').unwrap_or(line)))
        .filter(|(_, line)| !line.trim().is_empty() && !line.trim_start().starts_with('#'))
}

fn is_name(name: &str) -> bool {
    !name.is_empty()
        && (name.bytes()).all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-'))
}

fn is_env_key(key: &str) -> bool {
    !key.is_empty() && (key.bytes()).all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

fn env_value(value: &str) -> String {
    let quoted_in = |quote: char| {
        (value.len() >= 2)
            .then(|| value.strip_prefix(quote)?.strip_suffix(quote))
            .flatten()
    };
    if let Some(literal) = quoted_in('\'') {
        return literal.to_string();
    }
    let Some(escaped) = quoted_in('"') else {
        return value.to_string();
    };
    let mut unescaped = String::with_capacity(escaped.len());
    let mut chars = escaped.chars();
    while let Some(c) = chars.next() {
        match (c, chars.clone().next()) {
            ('\\', Some('n')) => {
                unescaped.push('\n');
                chars.next();
            }
            ('\\', Some(escaped)) => {
                unescaped.push(escaped);
                chars.next();
            }
            (c, _) => unescaped.push(c),
        }
    }
    unescaped
}

#[cfg(test)]
mod tests;
