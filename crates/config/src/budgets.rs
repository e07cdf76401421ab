//! Budgets: what a command may use before it is stopped. Set per command in `tether.toml`
//! (`max_time`, `max_cpu`, `max_output` in a `[[command]]`), on `tether exec` (`--max-time`,
//! `--max-cpu`, `--output-budget`), in the environment (`TETHER_MAX_TIME`, `TETHER_MAX_CPU`,
//! `TETHER_OUTPUT_BUDGET`), and as defaults for every command tether launches in the user
//! config's `[budgets]` table:
//!
//! ```toml
//! [budgets]
//! max_time = "30m"     # wall time from the start, as timeout(1)
//! max_cpu = "5m"       # CPU time of the whole tree, user and system
//! max_output = "256M"  # bytes of output, stdout and stderr together
//! ```
//!
//! Each budget is taken from the command's own setting, else the variable, else the user
//! config; `"off"` (or `false`) at any of them means none. `tether agent`'s own agent is
//! exempt from the defaults (it runs for hours); its shell calls are not.
//!
//! The output budget stops the command. `[journal] max_output` (and exec's `--max-output`)
//! is another thing: how much output the journal stores, the command running on.

use std::time::Duration;

use serde::Deserialize;

use super::values::threshold;
use tether_protocol::protocol::Budgets;
use tether_protocol::units::{UnitError, parse_duration, parse_size};

pub const MAX_TIME_ENV: &str = "TETHER_MAX_TIME";
pub const MAX_CPU_ENV: &str = "TETHER_MAX_CPU";
pub const OUTPUT_BUDGET_ENV: &str = "TETHER_OUTPUT_BUDGET";

/// Budgets as one place sets them: each unset (`None`: the next place decides), off
/// (`Some(None)`) or a limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields, expecting = "a table ([budgets])")]
pub struct BudgetSettings {
    #[serde(deserialize_with = "threshold")]
    pub max_time: Option<Option<Duration>>,
    #[serde(deserialize_with = "threshold")]
    pub max_cpu: Option<Option<Duration>>,
    #[serde(deserialize_with = "threshold")]
    pub max_output: Option<Option<u64>>,
}

impl BudgetSettings {
    /// These settings, and `under`'s where these leave one unset.
    pub fn over(self, under: BudgetSettings) -> BudgetSettings {
        BudgetSettings {
            max_time: self.max_time.or(under.max_time),
            max_cpu: self.max_cpu.or(under.max_cpu),
            max_output: self.max_output.or(under.max_output),
        }
    }

    /// The budgets these settings give: unset and off alike are none.
    pub fn budgets(self) -> Budgets {
        Budgets {
            max_time: self.max_time.flatten(),
            max_cpu: self.max_cpu.flatten(),
            max_output: self.max_output.flatten(),
        }
    }
}

/// `"off"` or a duration (`"30s"`, `"2m"`), as a flag or a variable gives it.
pub fn parse_time_limit(text: &str) -> Result<Option<Duration>, String> {
    parse_limit(text, parse_duration)
}

/// `"off"` or a size (`"64M"`), as a flag or a variable gives it.
pub fn parse_size_limit(text: &str) -> Result<Option<u64>, String> {
    parse_limit(text, parse_size)
}

fn parse_limit<T: Default + PartialEq>(
    text: &str,
    parse: fn(&str) -> Result<T, UnitError>,
) -> Result<Option<T>, String> {
    if text.trim() == "off" {
        return Ok(None);
    }
    match parse(text.trim()) {
        Ok(amount) if amount == T::default() => Err("must be above 0; or \"off\"".into()),
        Ok(amount) => Ok(Some(amount)),
        Err(err) => Err(format!("{err}; or \"off\"")),
    }
}

/// The budgets a front end asks its broker to keep: the command's own `asked` (its
/// `tether.toml` keys, exec's flags), else the variables, else the user's `[budgets]`
/// (`defaults: false` for `tether agent`'s agent: its own only). Also what to say of a
/// variable passed over because it does not read.
pub fn for_launch(
    asked: BudgetSettings,
    user: &BudgetSettings,
    defaults: bool,
) -> (Budgets, Vec<String>) {
    let var = |name: &str| std::env::var(name).ok();
    let (from_env, ignored) = from_env(var);
    if !defaults {
        return (asked.budgets(), ignored);
    }
    (asked.over(from_env).over(*user).budgets(), ignored)
}

/// The budgets the variables set, read by `var`, and what to say of one that does not read.
fn from_env(var: impl Fn(&str) -> Option<String>) -> (BudgetSettings, Vec<String>) {
    let mut ignored = Vec::new();
    let settings = BudgetSettings {
        max_time: read_var(&var, MAX_TIME_ENV, parse_time_limit, &mut ignored),
        max_cpu: read_var(&var, MAX_CPU_ENV, parse_time_limit, &mut ignored),
        max_output: read_var(&var, OUTPUT_BUDGET_ENV, parse_size_limit, &mut ignored),
    };
    (settings, ignored)
}

/// Variable `name` read by `parse`; unset or empty: `None`; not read: `None`, and said.
fn read_var<T>(
    var: &impl Fn(&str) -> Option<String>,
    name: &str,
    parse: fn(&str) -> Result<Option<T>, String>,
    ignored: &mut Vec<String>,
) -> Option<Option<T>> {
    let text = var(name).filter(|text| !text.is_empty())?;
    parse(&text)
        .map_err(|why| ignored.push(format!("{name} is ignored: {why}")))
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::user::parse_user;

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn the_table_sets_the_defaults() {
        let text = "[budgets]\nmax_time = \"30m\"\nmax_cpu = 90\nmax_output = \"64M\"\n";
        let config = parse_user(text, "c.toml").unwrap();
        assert_eq!(
            config.budgets.budgets(),
            Budgets {
                max_time: Some(secs(1800)),
                max_cpu: Some(secs(90)),
                max_output: Some(64 << 20),
            }
        );
        let off = parse_user("[budgets]\nmax_cpu = \"off\"\n", "c.toml").unwrap();
        assert_eq!(off.budgets.max_cpu, Some(None));
        assert_eq!(
            parse_user("", "c.toml").unwrap().budgets,
            BudgetSettings::default()
        );
    }

    #[test]
    fn errors_name_the_line_the_column_and_the_key() {
        for (text, at, says) in [
            (
                "[budgets]\nmax_cpu = \"lots\"\n",
                "c.toml:2:11:",
                "budgets.max_cpu",
            ),
            (
                "[budgets]\nmax_time = true\n",
                "c.toml:2:12:",
                "found boolean",
            ),
            (
                "[budgets]\nmax_output = \"0\"\n",
                "c.toml:2:14:",
                "must be above 0",
            ),
            (
                "[budgets]\nmax_cpus = \"1s\"\n",
                "c.toml:2:1:",
                "expected one of max_time",
            ),
        ] {
            let err = parse_user(text, "c.toml").unwrap_err().to_string();
            assert!(err.starts_with(at), "{text:?}: {err}");
            assert!(err.contains(says), "{text:?}: {err}");
        }
    }

    #[test]
    fn the_command_wins_then_the_variable_then_the_user_config() {
        let user = BudgetSettings {
            max_time: Some(Some(secs(60))),
            max_cpu: Some(Some(secs(30))),
            max_output: Some(Some(1000)),
        };
        let env = |name: &str| match name {
            MAX_CPU_ENV => Some("10s".to_string()),
            OUTPUT_BUDGET_ENV => Some("off".to_string()),
            _ => None,
        };
        let (from_env, ignored) = from_env(env);
        assert!(ignored.is_empty());
        let asked = BudgetSettings {
            max_time: Some(Some(secs(5))),
            ..BudgetSettings::default()
        };
        assert_eq!(
            asked.over(from_env).over(user).budgets(),
            Budgets {
                max_time: Some(secs(5)),
                max_cpu: Some(secs(10)),
                max_output: None,
            }
        );
        let off = BudgetSettings {
            max_time: Some(None),
            ..BudgetSettings::default()
        };
        assert_eq!(off.over(user).budgets().max_time, None);
    }

    #[test]
    fn the_agent_itself_takes_its_own_budgets_only() {
        let user = BudgetSettings {
            max_cpu: Some(Some(secs(30))),
            ..BudgetSettings::default()
        };
        let (budgets, _) = for_launch(BudgetSettings::default(), &user, false);
        assert!(budgets.is_empty(), "{budgets:?}");
        let own = BudgetSettings {
            max_time: Some(Some(secs(5))),
            ..BudgetSettings::default()
        };
        assert_eq!(for_launch(own, &user, false).0.max_time, Some(secs(5)));
    }

    #[test]
    fn a_variable_that_does_not_read_is_passed_over_and_said() {
        let env = |name: &str| (name == MAX_CPU_ENV).then(|| "lots".to_string());
        let (settings, ignored) = from_env(env);
        assert_eq!(settings, BudgetSettings::default());
        assert_eq!(ignored.len(), 1);
        assert!(ignored[0].starts_with(MAX_CPU_ENV), "{ignored:?}");
    }

    #[test]
    fn flags_take_a_limit_or_off() {
        assert_eq!(parse_time_limit("1s"), Ok(Some(secs(1))));
        assert_eq!(parse_time_limit("off"), Ok(None));
        assert!(parse_time_limit("0s").is_err());
        assert!(parse_time_limit("soon").is_err());
        assert_eq!(parse_size_limit("1K"), Ok(Some(1024)));
    }
}
