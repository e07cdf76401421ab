//! What a launch request says about attention: the thresholds the broker's detector uses for
//! this command and the `[notify] command` it runs for each event. Resolved by the front end
//! (user config, then the command's own table), so the broker reads no config file.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::millis;

/// Defaults, also what a request without the field (an older front end) gets.
pub const DEFAULT_INPUT_AFTER: Duration = Duration::from_secs(3);
pub const DEFAULT_RUNAWAY_AFTER: Duration = Duration::from_secs(60);
pub const DEFAULT_FINISHED_AFTER: Duration = Duration::from_secs(10);

/// Each threshold is `None` when it is off.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttentionRequest {
    /// `false`: no detection at all (and so no notification).
    #[serde(default = "yes", skip_serializing_if = "is_yes")]
    pub enabled: bool,
    /// Blocked reading the command's stdin or terminal, with no output this long.
    #[serde(
        rename = "input_after_ms",
        with = "millis::option",
        default = "default_input_after"
    )]
    pub input_after: Option<Duration>,
    /// No output this long while the tree uses no CPU (default off).
    #[serde(rename = "quiet_after_ms", with = "millis::option", default)]
    pub quiet_after: Option<Duration>,
    /// At least 90 % of a core for this long.
    #[serde(
        rename = "runaway_after_ms",
        with = "millis::option",
        default = "default_runaway_after"
    )]
    pub runaway_after: Option<Duration>,
    /// The tree's resident memory above this many bytes (default off).
    #[serde(default)]
    pub memory_above: Option<u64>,
    /// A command that ran at least this long gets `finished` when it ends well.
    #[serde(
        rename = "finished_after_ms",
        with = "millis::option",
        default = "default_finished_after"
    )]
    pub finished_after: Option<Duration>,
    /// A failure is told only of a command that ran at least this long (an agent's quick
    /// failures, through the shell shim: counted in its row, not told); absent: every one.
    #[serde(
        rename = "failed_after_ms",
        with = "millis::option",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub failed_after: Option<Duration>,
    /// The command is an agent (`tether agent`): `needs_input` is "waiting for you", seen
    /// in a poll or epoll set on its terminal too, never while a command of its runs.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub agent: bool,
    /// The program and arguments run for each event, the event as JSON on its stdin.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notify: Option<Vec<String>>,
}

fn yes() -> bool {
    true
}

fn is_yes(value: &bool) -> bool {
    *value
}

fn default_input_after() -> Option<Duration> {
    Some(DEFAULT_INPUT_AFTER)
}

fn default_runaway_after() -> Option<Duration> {
    Some(DEFAULT_RUNAWAY_AFTER)
}

fn default_finished_after() -> Option<Duration> {
    Some(DEFAULT_FINISHED_AFTER)
}

impl Default for AttentionRequest {
    fn default() -> AttentionRequest {
        AttentionRequest {
            enabled: true,
            input_after: default_input_after(),
            quiet_after: None,
            runaway_after: default_runaway_after(),
            memory_above: None,
            finished_after: default_finished_after(),
            failed_after: None,
            agent: false,
            notify: None,
        }
    }
}

impl AttentionRequest {
    /// No detection, no notification.
    pub fn off() -> AttentionRequest {
        AttentionRequest {
            enabled: false,
            ..AttentionRequest::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_without_the_field_gets_the_defaults() {
        let parsed: AttentionRequest = serde_json::from_str("{}").unwrap();
        assert_eq!(parsed, AttentionRequest::default());
        let off: AttentionRequest =
            serde_json::from_str(r#"{"input_after_ms":null,"memory_above":1024}"#).unwrap();
        assert_eq!(off.input_after, None);
        assert_eq!(off.memory_above, Some(1024));
        assert_eq!(off.runaway_after, Some(DEFAULT_RUNAWAY_AFTER));
        let round = serde_json::to_string(&AttentionRequest::off()).unwrap();
        assert_eq!(
            serde_json::from_str::<AttentionRequest>(&round).unwrap(),
            AttentionRequest::off()
        );
    }
}
