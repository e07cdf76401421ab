//! The launcher's keys of a `[[command]]` (`depends_on`, `restart`, `max_restarts`,
//! `restart_backoff`, `restart_on_change`) and the checks that need every command: a name
//! that is not one, a command depending on itself, a cycle, `ready` of a command with no
//! readiness check. Each error is at file:line:column of what is wrong.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use serde::{Deserialize, Deserializer};
use toml::{Spanned, Value};

use super::document::Source;
use super::values::{expected, read};
use super::{CommandConfig, ConfigError};
use tether_core::launcher::{CommandPlan, Condition, GlobSet, Restart, find_cycle};

/// `depends_on` as written: the dependency's name (where it is) and the condition.
pub(super) type DependsOn = BTreeMap<Spanned<String>, Word<Condition>>;

/// A word among a few (`restart = "on-failure"`, `db = "ready"`).
#[derive(Debug, Clone, Copy)]
pub(super) struct Word<T>(pub T);

/// What a word-valued key takes.
pub(super) trait Words: Sized {
    const WORDS: &'static str;
    fn parse(word: &str) -> Option<Self>;
}

impl Words for Condition {
    const WORDS: &'static str = Condition::WORDS;
    fn parse(word: &str) -> Option<Condition> {
        Condition::parse(word)
    }
}

impl Words for Restart {
    const WORDS: &'static str = Restart::WORDS;
    fn parse(word: &str) -> Option<Restart> {
        Restart::parse(word)
    }
}

impl<'de, T: Words> Deserialize<'de> for Word<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Word<T>, D::Error> {
        let read = read(d, |value| match value {
            Value::String(word) => T::parse(&word)
                .map(Word)
                .ok_or_else(|| format!("expected {}, found \"{word}\"", T::WORDS)),
            other => Err(expected(T::WORDS, &other)),
        })?;
        Ok(read.expect("a present value"))
    }
}

/// `max_restarts`: a whole number, 0 included (no restarts: the policy only reports).
pub(super) fn restarts<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    read(d, |value| match value.as_integer() {
        Some(n) => u32::try_from(n).map_err(|_| "must be a whole number from 0, like 3".into()),
        None => Err(expected("a whole number like 3", &value)),
    })
}

/// A command's launcher keys, read; `ready` conditions are checked once every command is
/// known ([`check`]).
pub(super) struct LaunchKeys {
    pub depends_on: DependsOn,
    pub restart: Option<Word<Restart>>,
    pub max_restarts: Option<u32>,
    pub restart_backoff: Option<Duration>,
    pub restart_on_change: Option<Spanned<Vec<String>>>,
}

impl LaunchKeys {
    /// Fills the command's launcher settings; an error for a glob that is not one. Returns
    /// where each `depends_on` name is, in the table's order, for the checks across commands.
    pub(super) fn apply(
        self,
        source: &Source<'_>,
        config: &mut CommandConfig,
    ) -> Result<Vec<usize>, ConfigError> {
        if let Some(globs) = &self.restart_on_change
            && let Err(why) = GlobSet::new(globs.get_ref())
        {
            let message = format!("restart_on_change: {why}");
            return Err(source.error(globs.span().start, "restart_on_change", message));
        }
        let mut written = Vec::new();
        // In the order written: the first condition that does not hold is the one named.
        let mut entries: Vec<_> = self.depends_on.into_iter().collect();
        entries.sort_by_key(|(name, _)| name.span().start);
        for (name, Word(condition)) in entries {
            written.push(name.span().start);
            config.depends_on.push((name.into_inner(), condition));
        }
        config.restart = self.restart.map_or(Restart::No, |Word(r)| r);
        if let Some(n) = self.max_restarts {
            config.max_restarts = n;
        }
        if let Some(backoff) = self.restart_backoff {
            config.restart_backoff = backoff;
        }
        config.restart_on_change = self
            .restart_on_change
            .map_or(Vec::new(), Spanned::into_inner);
        Ok(written)
    }
}

/// The checks across commands: every dependency names another command, `ready` is asked
/// only of a command with a readiness check, and no cycle. `written`: where each command's
/// `depends_on` names are ([`LaunchKeys::apply`]).
pub(super) fn check(
    source: &Source<'_>,
    commands: &[CommandConfig],
    written: &[Vec<usize>],
) -> Result<(), ConfigError> {
    let index: HashMap<&str, usize> = (commands.iter().enumerate())
        .map(|(i, c)| (c.name.as_str(), i))
        .collect();
    let mut graph = vec![Vec::new(); commands.len()];
    let mut at: HashMap<(usize, usize), usize> = HashMap::new();
    for (i, (command, written)) in commands.iter().zip(written).enumerate() {
        for ((name, condition), offset) in command.depends_on.iter().zip(written) {
            let key = format!("depends_on.{name}");
            let fail = |why: String| Err(source.error(*offset, &key, format!("{key}: {why}")));
            let Some(&on) = index.get(name.as_str()) else {
                let names: Vec<&str> = commands.iter().map(|c| c.name.as_str()).collect();
                return fail(format!(
                    "no command is named `{name}`; the commands are {}",
                    names.join(", ")
                ));
            };
            if on == i {
                return fail(format!("`{name}` cannot depend on itself"));
            }
            if *condition == Condition::Ready && commands[on].ready.is_none() {
                return fail(format!(
                    "\"ready\" needs a readiness check on `{name}`; give it ready_log, \
                     ready_http, ready_tcp or ready_exec, or wait for \"started\""
                ));
            }
            graph[i].push(on);
            at.insert((i, on), *offset);
        }
    }
    if let Some(cycle) = find_cycle(&graph) {
        let path: Vec<&str> = cycle.iter().map(|&i| commands[i].name.as_str()).collect();
        let (from, to) = (cycle[0], cycle[1]);
        let key = format!("depends_on.{}", commands[to].name);
        let message = format!(
            "{key}: the dependencies go round in a cycle, {}; break it",
            path.join(" → ")
        );
        return Err(source.error(at[&(from, to)], &key, message));
    }
    Ok(())
}

/// The launcher's view of the commands: names resolved to indices. The config was checked
/// ([`check`]), so every name is found.
pub fn plans(commands: &[CommandConfig]) -> Vec<CommandPlan> {
    commands.iter().map(|c| plan(c, commands)).collect()
}

/// One command's plan among `commands` (a dependency on a name not there is left out).
pub fn plan(command: &CommandConfig, commands: &[CommandConfig]) -> CommandPlan {
    let depends_on = (command.depends_on.iter())
        .filter_map(|(name, condition)| {
            let on = commands.iter().position(|c| &c.name == name)?;
            Some((on, *condition))
        })
        .collect();
    CommandPlan {
        name: command.name.clone(),
        autostart: command.autostart,
        depends_on,
        restart: command.restart,
        max_restarts: command.max_restarts,
        backoff: command.restart_backoff,
    }
}

#[cfg(test)]
mod tests;
