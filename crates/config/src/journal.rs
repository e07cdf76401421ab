//! The user config's `[journal]` table: how much of one command's output is journaled.
//!
//! ```toml
//! [journal]
//! max_output = "1G"   # per command, stdout and stderr together
//! ```
//!
//! Past the bound the broker keeps the head it has stored, counts every further byte and
//! says so (`output_capped` when storing stops, `output_truncated` with what was kept and
//! dropped at the end). What the command prints to its caller is never cut. Retention's
//! `max_size` only applies to finished sessions; this bounds a live one.

use serde::Deserialize;

use super::values::amount;
use tether_protocol::protocol::DEFAULT_MAX_OUTPUT;
use tether_protocol::units::parse_size;

/// The variable that sets the bound for one run (`TETHER_MAX_OUTPUT=64M`), over the user
/// config; a front end's own `--max-output` is over both.
pub const MAX_OUTPUT_ENV: &str = "TETHER_MAX_OUTPUT";

/// What the `[journal]` table sets; nothing without it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields, expecting = "a table ([journal])")]
pub struct JournalSettings {
    /// The bound on one command's journaled output, both streams together.
    #[serde(deserialize_with = "amount")]
    pub max_output: Option<u64>,
}

/// The bound a front end asks its broker to keep to: `asked` (its own option), else
/// [`MAX_OUTPUT_ENV`], else the user config's, else [`DEFAULT_MAX_OUTPUT`]. A variable that
/// is not a size is passed over, with the message to say.
pub fn max_output(asked: Option<u64>, user: &JournalSettings) -> (u64, Option<String>) {
    let from_env = std::env::var(MAX_OUTPUT_ENV).ok();
    resolve(asked, from_env.as_deref(), user)
}

fn resolve(
    asked: Option<u64>,
    from_env: Option<&str>,
    user: &JournalSettings,
) -> (u64, Option<String>) {
    let fallback = || user.max_output.unwrap_or(DEFAULT_MAX_OUTPUT);
    if let Some(bytes) = asked {
        return (bytes, None);
    }
    match from_env.filter(|text| !text.is_empty()).map(parse_size) {
        None => (fallback(), None),
        Some(Ok(bytes)) => (bytes, None),
        Some(Err(err)) => (
            fallback(),
            Some(format!("{MAX_OUTPUT_ENV} is ignored: {err}")),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::user::parse_user;

    #[test]
    fn the_table_sets_the_bound() {
        let config = parse_user("[journal]\nmax_output = \"64M\"\n", "c.toml").unwrap();
        assert_eq!(config.journal.max_output, Some(64 << 20));
        let bytes = parse_user("[journal]\nmax_output = 4096\n", "c.toml").unwrap();
        assert_eq!(bytes.journal.max_output, Some(4096));
        assert_eq!(
            parse_user("", "c.toml").unwrap().journal,
            JournalSettings::default()
        );
    }

    #[test]
    fn errors_name_the_line_and_the_key() {
        for (text, says) in [
            ("[journal]\nmax_output = \"lots\"\n", "journal.max_output"),
            ("[journal]\nmax_output = true\n", "found boolean"),
            (
                "[journal]\nmax_outptu = \"1G\"\n",
                "expected one of max_output",
            ),
        ] {
            let err = parse_user(text, "c.toml").unwrap_err().to_string();
            assert!(err.starts_with("c.toml:2:"), "{text:?}: {err}");
            assert!(err.contains(says), "{text:?}: {err}");
        }
    }

    #[test]
    fn the_option_wins_then_the_variable_then_the_config_then_the_default() {
        let user = JournalSettings {
            max_output: Some(2048),
        };
        assert_eq!(resolve(Some(10), Some("1K"), &user), (10, None));
        assert_eq!(resolve(None, Some("1K"), &user), (1024, None));
        assert_eq!(resolve(None, None, &user), (2048, None));
        assert_eq!(resolve(None, Some(""), &user), (2048, None));
        let none = JournalSettings::default();
        assert_eq!(resolve(None, None, &none), (DEFAULT_MAX_OUTPUT, None));
        let (bytes, said) = resolve(None, Some("lots"), &user);
        assert_eq!(bytes, 2048);
        assert!(said.is_some_and(|s| s.contains(MAX_OUTPUT_ENV)));
    }
}
