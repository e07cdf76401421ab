//! The user's own settings, `$XDG_CONFIG_HOME/tether/config.toml` (default
//! `~/.config/tether/config.toml`): how tether behaves for this user, whatever the project.
//! A project's `tether.toml` lists commands and never holds these.
//!
//! It holds six sections, `[retention]` below, `[notify]` (how tether tells the operator a
//! command needs them, see [`super::notify`]), `[attention]` (when a command needs them, see
//! [`super::attention`]), `[journal]` (how much of a command's output is journaled, see
//! [`super::journal`]), `[budgets]` (what every command may use before it is stopped, see
//! [`super::budgets`]) and `[export.otlp]` (where the live OTLP export sends, see
//! [`super::otlp`]):
//!
//! ```toml
//! [retention]
//! older_than = "30d"   # remove sessions that ended longer ago than this
//! keep = 100           # keep at most this many sessions
//! max_size = "2G"      # keep the sessions directory under this size
//! enabled = true       # false: never remove anything unasked (only `tether prune` does)
//! ```
//!
//! Retention runs when a `tether exec` or the TUI's session ends, and after a shell shim's
//! command (detached, at most once a minute per state directory). Without a `[retention]`
//! section, or with one that sets no rule, [`DEFAULT_RETENTION`] applies: sessions that
//! ended more than 14 days ago go, and the oldest go while all of them take more than
//! 5 GiB, so a shim on PATH can never fill a disk by itself. `enabled = false` turns
//! retention off altogether; `tether prune` with flags still removes what it is told.
//!
//! Errors name the file, the line and column, and the key, as `tether.toml`'s do.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Deserializer};
use toml::Value;

use super::attention::AttentionSettings;
use super::budgets::BudgetSettings;
use super::document::{Source, described};
use super::journal::JournalSettings;
use super::notify::NotifySettings;
use super::otlp::ExportSettings;
use super::values::{amount, expected, flag, read};
use super::{ConfigError, FileKind};
use tether_protocol::units::{format_age, format_size, parse_age};

/// The retention rules. A rule that is `None` does not apply; with none, nothing is removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Rules {
    /// Remove sessions that ended longer ago than this.
    pub older_than: Option<Duration>,
    /// Keep at most this many sessions (live ones count, and are never removed).
    pub keep: Option<usize>,
    /// Keep the sessions' total size at most this many bytes.
    pub max_size: Option<u64>,
}

impl Rules {
    pub fn is_empty(&self) -> bool {
        self.older_than.is_none() && self.keep.is_none() && self.max_size.is_none()
    }

    /// `older than 30d00h, keep 100, max size 2.0 GiB`.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(age) = self.older_than {
            parts.push(format!("older than {}", format_age(age)));
        }
        if let Some(keep) = self.keep {
            parts.push(format!("keep {keep}"));
        }
        if let Some(size) = self.max_size {
            parts.push(format!("max size {}", format_size(size)));
        }
        parts.join(", ")
    }
}

/// The retention that applies when the user config sets none: 14 days, 5 GiB.
pub const DEFAULT_RETENTION: Rules = Rules {
    older_than: Some(std::time::Duration::from_secs(14 * 86_400)),
    keep: None,
    max_size: Some(5 << 30),
};

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UserConfig {
    /// The `[retention]` rules, if the section is there (even empty: then no rule).
    pub retention: Option<Rules>,
    /// `[retention] enabled = false`: no retention at all, not even the default.
    pub retention_disabled: bool,
    /// The `[notify]` settings, their defaults without the table.
    pub notify: NotifySettings,
    /// The `[attention]` thresholds (see [`super::attention`]); nothing set without the table.
    pub attention: AttentionSettings,
    /// The `[journal]` bound (see [`super::journal`]); nothing set without the table.
    pub journal: JournalSettings,
    /// The `[export.otlp]` settings (see [`super::otlp`]); nothing set without the table.
    pub export: ExportSettings,
    /// The `[budgets]` every launched command gets unless it sets its own (see
    /// [`super::budgets`]); none without the table.
    pub budgets: BudgetSettings,
}

impl UserConfig {
    /// The rules retention applies: those of `[retention]`, or [`DEFAULT_RETENTION`] when it
    /// sets none; `None` when it is turned off.
    pub fn retention_rules(&self) -> Option<Rules> {
        if self.retention_disabled {
            return None;
        }
        Some(
            self.retention
                .filter(|rules| !rules.is_empty())
                .unwrap_or(DEFAULT_RETENTION),
        )
    }
}

/// Where the user config lives: `$XDG_CONFIG_HOME/tether/config.toml` when that variable is
/// an absolute path (the XDG spec says to ignore anything else), else
/// `~/.config/tether/config.toml`; `None` without either.
pub fn user_config_path() -> Option<PathBuf> {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(dir) = var("XDG_CONFIG_HOME").map(PathBuf::from)
        && dir.is_absolute()
    {
        return Some(dir.join("tether/config.toml"));
    }
    var("HOME").map(|home| PathBuf::from(home).join(".config/tether/config.toml"))
}

/// The user config as a front end starting a command reads it: the defaults when there is
/// none, and when it does not parse, with the error to say.
pub fn for_launch() -> (UserConfig, Option<ConfigError>) {
    match user_config_path().map(|path| load_user(&path)) {
        Some(Ok(config)) => (config.unwrap_or_default(), None),
        Some(Err(err)) => (UserConfig::default(), Some(err)),
        None => (UserConfig::default(), None),
    }
}

/// Reads the user config at `path`; `Ok(None)` when there is no such file.
pub fn load_user(path: &Path) -> Result<Option<UserConfig>, ConfigError> {
    let text = match super::file::read_regular_text(path, FileKind::Config) {
        Ok(text) => text,
        Err(ConfigError::Read { io, .. }) if io.kind() == std::io::ErrorKind::NotFound => {
            return Ok(None);
        }
        Err(err) => return Err(err),
    };
    parse_user(&text, &path.display().to_string()).map(Some)
}

/// Parses a user config document; `file` names it in errors.
pub fn parse_user(text: &str, file: &str) -> Result<UserConfig, ConfigError> {
    let holds = "the user config holds [retention], [notify], [attention], [journal], \
                 [budgets] and [export.otlp] tables";
    let tables: UserTables = Source { text, file }.read(holds, described)?;
    let retention = tables.retention.as_ref();
    Ok(UserConfig {
        retention: retention.map(|table| Rules {
            older_than: table.older_than,
            keep: table.keep,
            max_size: table.max_size,
        }),
        retention_disabled: retention.is_some_and(|table| table.enabled == Some(false)),
        notify: tables.notify,
        attention: tables.attention,
        journal: tables.journal,
        export: tables.export,
        budgets: tables.budgets,
    })
}

/// The user config as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UserTables {
    retention: Option<RetentionTable>,
    #[serde(default)]
    notify: NotifySettings,
    #[serde(default)]
    attention: AttentionSettings,
    #[serde(default)]
    journal: JournalSettings,
    #[serde(default)]
    export: ExportSettings,
    #[serde(default)]
    budgets: BudgetSettings,
}

/// The `[retention]` table as written, its keys in the order an unknown key's message lists
/// them.
#[derive(Default, Deserialize)]
#[serde(default, deny_unknown_fields, expecting = "a table ([retention])")]
struct RetentionTable {
    #[serde(deserialize_with = "age")]
    older_than: Option<Duration>,
    #[serde(deserialize_with = "keep")]
    keep: Option<usize>,
    #[serde(deserialize_with = "amount")]
    max_size: Option<u64>,
    #[serde(deserialize_with = "flag")]
    enabled: Option<bool>,
}

/// How long ago a session ended (`"30d"`): a string, in days and weeks too.
fn age<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    read(d, |value| match value.as_str() {
        Some(text) => parse_age(text).map_err(|e| e.to_string()),
        None => Err(expected("an age like \"30d\"", &value)),
    })
}

/// How many sessions to keep: 0 or more.
fn keep<'de, D: Deserializer<'de>>(d: D) -> Result<Option<usize>, D::Error> {
    read(d, |value| {
        let count = value.as_integer().and_then(|n| usize::try_from(n).ok());
        count.ok_or_else(|| {
            let found = match value {
                Value::Integer(n) => n.to_string(),
                other => other.type_str().to_string(),
            };
            format!("expected a number of sessions (0 or more), found {found}")
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_retention_section_reads_into_rules() {
        let config = parse_user(
            "[retention]\nolder_than = \"30d\"\nkeep = 100\nmax_size = \"2G\"\n",
            "c.toml",
        )
        .unwrap();
        assert_eq!(
            config.retention,
            Some(Rules {
                older_than: Some(Duration::from_secs(30 * 86_400)),
                keep: Some(100),
                max_size: Some(2 << 30),
            })
        );
        assert_eq!(parse_user("", "c.toml").unwrap(), UserConfig::default());
        let bytes = parse_user("[retention]\nmax_size = 1048576\n", "c.toml").unwrap();
        assert_eq!(bytes.retention.unwrap().max_size, Some(1 << 20));
    }

    #[test]
    fn without_a_rule_the_default_applies_unless_turned_off() {
        let rules = |text: &str| parse_user(text, "c.toml").unwrap().retention_rules();
        assert_eq!(rules(""), Some(DEFAULT_RETENTION));
        assert_eq!(rules("[retention]\n"), Some(DEFAULT_RETENTION));
        assert_eq!(
            rules("[retention]\nenabled = true\n"),
            Some(DEFAULT_RETENTION)
        );
        assert_eq!(
            rules("[retention]\nkeep = 5\n").and_then(|r| r.keep),
            Some(5)
        );
        assert_eq!(rules("[retention]\nkeep = 5\nenabled = false\n"), None);
        assert_eq!(rules("[retention]\nenabled = false\n"), None);
        assert_eq!(DEFAULT_RETENTION.max_size, Some(5 << 30));
    }

    #[test]
    fn errors_name_the_file_the_line_and_the_key() {
        let cases = [
            ("[retention]\nkeep = -1\n", 2, "retention.keep", "0 or more"),
            (
                "[retention]\nkeep = \"ten\"\n",
                2,
                "retention.keep",
                "found string",
            ),
            (
                "[retention]\nolder_than = \"30 days\"\n",
                2,
                "retention.older_than",
                "30d",
            ),
            (
                "[retention]\nolder_than = 30\n",
                2,
                "retention.older_than",
                "found integer",
            ),
            (
                "[retention]\nmax_size = \"lots\"\n",
                2,
                "retention.max_size",
                "512M",
            ),
            (
                "[retention]\n\nkepe = 3\n",
                3,
                "retention.kepe",
                "older_than, keep, max_size, enabled",
            ),
            (
                "[retention]\nenabled = \"no\"\n",
                2,
                "retention.enabled",
                "true or false",
            ),
            ("retention = 3\n", 1, "retention", "expected a table"),
            (
                "[retension]\nkeep = 3\n",
                1,
                "retension",
                "[retention], [notify], [attention], [journal], [budgets] and [export.otlp] tables",
            ),
            ("[retention]\nkeep = \n", 2, "keep", "invalid TOML"),
        ];
        for (text, line, key, says) in cases {
            let err = parse_user(text, "/home/u/.config/tether/config.toml").unwrap_err();
            let shown = err.to_string();
            assert!(
                shown.starts_with(&format!("/home/u/.config/tether/config.toml:{line}:")),
                "{text:?}: {shown}"
            );
            assert!(shown.contains(key), "{text:?}: {shown}");
            assert!(shown.contains(says), "{text:?}: {shown}");
        }
    }

    #[test]
    fn a_missing_file_is_no_config() {
        let tmp = tether_os::testing::private_tempdir();
        assert_eq!(load_user(&tmp.path().join("none.toml")).unwrap(), None);
    }
}
