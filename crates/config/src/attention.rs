//! Attention thresholds: an `[attention]` table in the user config, and an `attention` table
//! per command in `tether.toml`, whose keys win over the user's.
//!
//! ```toml
//! [attention]
//! input_after = "3s"      # blocked reading its stdin or terminal, silent this long: needs_input
//! quiet_after = "off"     # silent this long while using no CPU: quiet (default off)
//! runaway_after = "60s"   # 90 % of a core this long: runaway
//! memory_above = "off"    # the tree's resident memory above this: runaway (default off)
//! finished_after = "10s"  # a command that ran this long and ended well: finished
//! agent_failures_after = "10s"  # an agent's command (shell shim) failing sooner: not told
//! enabled = true          # false: no detection, no notification
//! ```
//!
//! A duration is a string (`"500ms"`, `"3s"`, `"2m"`) or a whole number of seconds; a size a
//! string (`"512M"`) or a number of bytes; `"off"` or `false` turns one off. Errors name the
//! file, the line and column, and the key, as the rest of the config's do.

use std::time::Duration;

use serde::Deserialize;

use super::user::UserConfig;
use super::values::{flag, threshold};
use tether_protocol::protocol::AttentionRequest;

/// What one table says; a key it does not set is `None` (the other table's value, else the
/// default), a key set to `"off"` is `Some(None)`.
/// Its keys are in the order an unknown key's message lists them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(
    default,
    deny_unknown_fields,
    expecting = "a table ([attention], or attention = { input_after = \"5s\" })"
)]
pub struct AttentionSettings {
    #[serde(deserialize_with = "threshold")]
    pub input_after: Option<Option<Duration>>,
    #[serde(deserialize_with = "threshold")]
    pub quiet_after: Option<Option<Duration>>,
    #[serde(deserialize_with = "threshold")]
    pub runaway_after: Option<Option<Duration>>,
    #[serde(deserialize_with = "threshold")]
    pub memory_above: Option<Option<u64>>,
    #[serde(deserialize_with = "threshold")]
    pub finished_after: Option<Option<Duration>>,
    /// An agent's command (run through the shell shim) that fails sooner is counted in its
    /// row, not told; `"off"` tells every failure. Default: `finished_after`'s value.
    #[serde(deserialize_with = "threshold")]
    pub agent_failures_after: Option<Option<Duration>>,
    #[serde(deserialize_with = "flag")]
    pub enabled: Option<bool>,
}

impl AttentionSettings {
    /// These settings, with `base`'s where these say nothing.
    pub fn over(self, base: AttentionSettings) -> AttentionSettings {
        AttentionSettings {
            enabled: self.enabled.or(base.enabled),
            input_after: self.input_after.or(base.input_after),
            quiet_after: self.quiet_after.or(base.quiet_after),
            runaway_after: self.runaway_after.or(base.runaway_after),
            memory_above: self.memory_above.or(base.memory_above),
            finished_after: self.finished_after.or(base.finished_after),
            agent_failures_after: self.agent_failures_after.or(base.agent_failures_after),
        }
    }

    /// Every key as a request set it, for a command run again from its journal.
    pub fn from_request(request: &AttentionRequest) -> AttentionSettings {
        AttentionSettings {
            enabled: Some(request.enabled),
            input_after: Some(request.input_after),
            quiet_after: Some(request.quiet_after),
            runaway_after: Some(request.runaway_after),
            memory_above: Some(request.memory_above),
            finished_after: Some(request.finished_after),
            agent_failures_after: None,
        }
    }

    /// What the broker is told: these settings over the defaults, and the notify command.
    pub fn request(&self, notify: Option<Vec<String>>) -> AttentionRequest {
        let defaults = AttentionRequest::default();
        AttentionRequest {
            enabled: self.enabled.unwrap_or(defaults.enabled),
            input_after: self.input_after.unwrap_or(defaults.input_after),
            quiet_after: self.quiet_after.unwrap_or(defaults.quiet_after),
            runaway_after: self.runaway_after.unwrap_or(defaults.runaway_after),
            memory_above: self.memory_above.unwrap_or(defaults.memory_above),
            finished_after: self.finished_after.unwrap_or(defaults.finished_after),
            failed_after: defaults.failed_after,
            agent: false,
            notify,
        }
    }
}

/// The attention part of a launch request for a command whose own table says `command`: the
/// user config's `[attention]` beneath it and its `[notify] command` (the config read by
/// [`super::user::for_launch`]).
pub fn with_user(user: &UserConfig, command: &AttentionSettings) -> AttentionRequest {
    command
        .over(user.attention)
        .request(user.notify.command.clone())
}

/// [`with_user`] for an agent's command, run through the shell shim: its quick failures are
/// counted, not told (see `agent_failures_after`), and its good ends are not told at all:
/// the agent reads how its command ended and goes on; what needs the operator is the
/// agent's own end (`finished` on its row), not each of its builds and test runs.
pub fn for_agent(user: &UserConfig) -> AttentionRequest {
    let request = user.attention.request(user.notify.command.clone());
    AttentionRequest {
        failed_after: (user.attention.agent_failures_after).unwrap_or(request.finished_after),
        finished_after: None,
        ..request
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::user::parse_user;

    #[test]
    fn the_user_table_reads_every_key_and_off() {
        let config = parse_user(
            "[attention]\ninput_after = \"5s\"\nquiet_after = 120\nrunaway_after = \"off\"\n\
             memory_above = \"2G\"\nfinished_after = false\nenabled = true\n",
            "c.toml",
        )
        .unwrap();
        let request = config.attention.request(None);
        assert_eq!(request.input_after, Some(Duration::from_millis(5_000)));
        assert_eq!(request.quiet_after, Some(Duration::from_millis(120_000)));
        assert_eq!(request.runaway_after, None);
        assert_eq!(request.memory_above, Some(2 << 30));
        assert_eq!(request.finished_after, None);
        assert!(request.enabled);
        assert_eq!(
            AttentionSettings::default().request(None),
            AttentionRequest::default()
        );
    }

    #[test]
    fn an_agents_quick_failures_are_bounded_by_their_own_key_or_finished_after() {
        let parse = |text: &str| for_agent(&parse_user(text, "c.toml").unwrap());
        let default = for_agent(&UserConfig::default());
        let finished_after = AttentionRequest::default().finished_after;
        assert_eq!(default.failed_after, finished_after);
        assert!(default.failed_after.is_some());
        assert_eq!(
            default.finished_after, None,
            "an agent's good end is its own"
        );
        assert_eq!(
            AttentionSettings::default().request(None).failed_after,
            None
        );
        let own = parse(
            "[attention]
agent_failures_after = \"3s\"\n",
        );
        assert_eq!(own.failed_after, Some(Duration::from_millis(3_000)));
        let off = parse(
            "[attention]
agent_failures_after = \"off\"\n",
        );
        assert_eq!(off.failed_after, None, "every failure told");
        let finished = parse(
            "[attention]
finished_after = \"1m\"\n",
        );
        assert_eq!(finished.failed_after, Some(Duration::from_millis(60_000)));
    }

    #[test]
    fn a_command_table_wins_over_the_user_one() {
        let user = parse_user(
            "[attention]\ninput_after = \"5s\"\nquiet_after = \"1m\"\n[notify]\ncommand = [\"ntfy\"]\n",
            "c.toml",
        )
        .unwrap();
        let config = crate::parse(
            "[[command]]\nname = \"a\"\nshell = \"true\"\nattention = { quiet_after = \"off\", runaway_after = \"2s\" }\n",
            "tether.toml",
        )
        .unwrap();
        let request = with_user(&user, &config.commands[0].attention);
        assert_eq!(request.input_after, Some(Duration::from_millis(5_000)));
        assert_eq!(request.quiet_after, None);
        assert_eq!(request.runaway_after, Some(Duration::from_millis(2_000)));
        assert_eq!(request.notify, Some(vec!["ntfy".to_string()]));
    }

    #[test]
    fn bad_values_name_the_file_the_line_and_the_key() {
        let user_cases = [
            (
                "[attention]\ninput_after = \"soon\"\n",
                2,
                "attention.input_after",
                "or \"off\"",
            ),
            (
                "[attention]\n\nmemory_above = [1]\n",
                3,
                "attention.memory_above",
                "found array",
            ),
            (
                "[attention]\nquiet_after = \"0s\"\n",
                2,
                "attention.quiet_after",
                "above 0",
            ),
            (
                "[attention]\nenabled = \"yes\"\n",
                2,
                "attention.enabled",
                "true or false",
            ),
            (
                "[attention]\ninput_afterr = \"1s\"\n",
                2,
                "attention.input_afterr",
                "input_after, quiet_after",
            ),
            ("attention = 3\n", 1, "attention", "expected a table"),
        ];
        for (text, line, key, says) in user_cases {
            let shown = parse_user(text, "/u/config.toml").unwrap_err().to_string();
            assert!(
                shown.starts_with(&format!("/u/config.toml:{line}:")),
                "{shown}"
            );
            assert!(shown.contains(key), "{text:?}: {shown}");
            assert!(shown.contains(says), "{text:?}: {shown}");
        }
        let shown = crate::parse(
            "[[command]]\nname = \"a\"\nshell = \"true\"\n[command.attention]\nrunaway_after = \"fast\"\n",
            "tether.toml",
        )
        .unwrap_err()
        .to_string();
        assert!(shown.starts_with("tether.toml:5:"), "{shown}");
        assert!(shown.contains("attention.runaway_after"), "{shown}");
    }
}
