//! The `[notify]` table of the user config: how tether tells the operator that a command needs
//! them (an `attention` event in the journal).
//!
//! ```toml
//! [notify]
//! command = ["ntfy", "publish", "builds"]  # run by the broker for each event (default: none)
//! terminal = "auto"   # auto | osc9 | osc777 | bel | off   (default auto)
//! desktop = "auto"    # auto | true | false | "off"         (default auto)
//! ```
//!
//! - `command`: a program and its arguments, no shell; the broker runs it once per attention
//!   event with the event as one JSON object on its stdin. Absent: nothing runs.
//! - `terminal`: what a TUI or `tether watch` writes to its own terminal when its window may
//!   not be looked at (the terminal said it lost focus, or never says). `auto` writes OSC 777
//!   to terminals known to take it (VTE-based ones, foot, urxvt), OSC 9 to the others, then
//!   BEL; `osc9` and `osc777` write that one and BEL; `bel` only BEL; `off` nothing.
//! - `desktop`: a desktop notification over D-Bus (`org.freedesktop.Notifications`). `auto`
//!   sends one where a session bus exists and is silent where none does; `true` does the same
//!   and says once, in the TUI's notice line, when it cannot; `false` or `"off"` never sends.
//!
//! Errors name the file, line, column and key, as the rest of the user config's do.

use serde::{Deserialize, Deserializer};
use toml::Value;

use super::values::{expected, read};

/// The `[notify]` settings; [`Default`] is what applies without the table. Its keys are in the
/// order an unknown key's message lists them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields, expecting = "a table ([notify])")]
pub struct NotifySettings {
    /// The program (and its arguments) the broker runs per attention event; `None`: nothing.
    #[serde(deserialize_with = "command")]
    pub command: Option<Vec<String>>,
    pub terminal: TerminalNotify,
    pub desktop: DesktopNotify,
}

/// What a front end writes to its terminal to draw the operator's eye.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(try_from = "Value")]
pub enum TerminalNotify {
    /// OSC 777 where the terminal is known to take it, else OSC 9; then BEL.
    #[default]
    Auto,
    /// `ESC ] 9 ; text BEL`, then BEL.
    Osc9,
    /// `ESC ] 777 ; notify ; title ; body BEL`, then BEL.
    Osc777,
    /// BEL alone.
    Bel,
    Off,
}

impl TerminalNotify {
    const WORDS: [(&'static str, TerminalNotify); 5] = [
        ("auto", TerminalNotify::Auto),
        ("osc9", TerminalNotify::Osc9),
        ("osc777", TerminalNotify::Osc777),
        ("bel", TerminalNotify::Bel),
        ("off", TerminalNotify::Off),
    ];
}

/// Whether a front end sends desktop notifications over D-Bus.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(try_from = "Value")]
pub enum DesktopNotify {
    /// Where a session bus exists; silently nothing where none does.
    #[default]
    Auto,
    /// `true`: as `Auto`, and says once when no notification could be sent.
    On,
    Off,
}

impl TryFrom<Value> for TerminalNotify {
    type Error = String;
    fn try_from(value: Value) -> Result<TerminalNotify, String> {
        let word = value.as_str();
        let found = TerminalNotify::WORDS.iter().find(|(w, _)| Some(*w) == word);
        found.map(|&(_, terminal)| terminal).ok_or_else(|| {
            format!(
                "expected one of \"auto\", \"osc9\", \"osc777\", \"bel\", \"off\", found {}",
                shown(&value)
            )
        })
    }
}

impl TryFrom<Value> for DesktopNotify {
    type Error = String;
    fn try_from(value: Value) -> Result<DesktopNotify, String> {
        match &value {
            Value::Boolean(true) => Ok(DesktopNotify::On),
            Value::Boolean(false) => Ok(DesktopNotify::Off),
            Value::String(word) if word == "auto" => Ok(DesktopNotify::Auto),
            Value::String(word) if word == "off" => Ok(DesktopNotify::Off),
            _ => Err(format!(
                "expected true, false, \"auto\" or \"off\", found {}",
                shown(&value)
            )),
        }
    }
}

/// `command = ["prog", "args"...]`: at least a program name, every item a string.
fn command<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<String>>, D::Error> {
    const LIKE: &str = "like command = [\"ntfy\", \"publish\", \"builds\"]";
    read(d, |value| {
        let Some(items) = value.as_array() else {
            return Err(expected(&format!("an array of strings, {LIKE}"), &value));
        };
        let argv = (items.iter().enumerate())
            .map(|(i, item)| {
                let word = item.as_str().map(str::to_string);
                word.ok_or_else(|| format!("item {i}: {}", expected("a string", item)))
            })
            .collect::<Result<Vec<_>, _>>()?;
        if argv.first().is_none_or(|program| program.is_empty()) {
            return Err(format!("needs at least a program name, {LIKE}"));
        }
        Ok(argv)
    })
}

/// A value as the message shows it: a string quoted, else its type.
fn shown(value: &Value) -> String {
    match value {
        Value::String(text) => format!("\"{}\"", text.escape_debug()),
        other => other.type_str().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::user::parse_user;

    fn settings(text: &str) -> NotifySettings {
        parse_user(text, "c.toml").unwrap().notify
    }

    #[test]
    fn without_the_table_the_defaults_apply() {
        let defaults = NotifySettings {
            command: None,
            terminal: TerminalNotify::Auto,
            desktop: DesktopNotify::Auto,
        };
        assert_eq!(settings(""), defaults);
        assert_eq!(settings("[notify]\n"), defaults);
    }

    #[test]
    fn a_notify_table_reads_every_value() {
        let all = settings(
            "[notify]\ncommand = [\"ntfy\", \"publish\", \"builds\"]\nterminal = \"osc777\"\ndesktop = false\n",
        );
        assert_eq!(
            all.command,
            Some(vec!["ntfy".into(), "publish".into(), "builds".into()])
        );
        assert_eq!(all.terminal, TerminalNotify::Osc777);
        assert_eq!(all.desktop, DesktopNotify::Off);
        for (word, terminal) in TerminalNotify::WORDS {
            let text = format!("[notify]\nterminal = \"{word}\"\n");
            assert_eq!(settings(&text).terminal, terminal, "{word}");
        }
        for (value, desktop) in [
            ("true", DesktopNotify::On),
            ("false", DesktopNotify::Off),
            ("\"auto\"", DesktopNotify::Auto),
            ("\"off\"", DesktopNotify::Off),
        ] {
            let text = format!("[notify]\ndesktop = {value}\n");
            assert_eq!(settings(&text).desktop, desktop, "{value}");
        }
        let retention =
            parse_user("[retention]\nkeep = 3\n[notify]\nterminal = \"bel\"\n", "c").unwrap();
        assert_eq!(retention.retention.and_then(|r| r.keep), Some(3));
        assert_eq!(retention.notify.terminal, TerminalNotify::Bel);
    }

    #[test]
    fn bad_values_name_the_file_the_line_and_the_key() {
        let cases = [
            (
                "[notify]\nterminal = \"loud\"\n",
                2,
                12,
                "notify.terminal",
                "\"loud\"",
            ),
            (
                "[notify]\nterminal = 9\n",
                2,
                12,
                "notify.terminal",
                "found integer",
            ),
            (
                "[notify]\ndesktop = \"yes\"\n",
                2,
                11,
                "notify.desktop",
                "true, false",
            ),
            (
                "[notify]\ndesktop = 1\n",
                2,
                11,
                "notify.desktop",
                "found integer",
            ),
            (
                "[notify]\ncommand = \"ntfy pub\"\n",
                2,
                11,
                "notify.command",
                "array of strings",
            ),
            (
                "[notify]\ncommand = []\n",
                2,
                11,
                "notify.command",
                "program name",
            ),
            (
                "[notify]\ncommand = [\"\"]\n",
                2,
                11,
                "notify.command",
                "program name",
            ),
            (
                "[notify]\ncommand = [\"ntfy\", 3]\n",
                2,
                11,
                "notify.command",
                "item 1",
            ),
            (
                "[notify]\n\nsound = true\n",
                3,
                1,
                "notify.sound",
                "command, terminal, desktop",
            ),
            ("notify = \"on\"\n", 1, 10, "notify", "expected a table"),
            (
                "[notify]\ncommand = [\"ntfy\", \"a\\u0000\"]\n",
                2,
                20,
                "notify.command[1]",
                "must not contain a NUL",
            ),
        ];
        for (text, line, column, key, says) in cases {
            let err = parse_user(text, "/home/u/.config/tether/config.toml").unwrap_err();
            let shown = err.to_string();
            assert!(
                shown.starts_with(&format!(
                    "/home/u/.config/tether/config.toml:{line}:{column}"
                )),
                "{text:?}: {shown}"
            );
            assert!(shown.contains(key), "{text:?}: {shown}");
            assert!(shown.contains(says), "{text:?}: {shown}");
        }
    }
}
