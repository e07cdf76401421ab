//! A signal as it crosses every boundary (requests, events, the control socket, the command
//! line): one type, parsed once where text comes in, written as its name without `SIG`
//! (`TERM`, `KILL`), so no side parses a string the other side made.

use std::fmt;
use std::str::FromStr;

use nix::sys::signal::Signal;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ProcessSignal(pub Signal);

impl ProcessSignal {
    pub const TERM: ProcessSignal = ProcessSignal(Signal::SIGTERM);
    pub const KILL: ProcessSignal = ProcessSignal(Signal::SIGKILL);
    pub const CONT: ProcessSignal = ProcessSignal(Signal::SIGCONT);
    pub const INT: ProcessSignal = ProcessSignal(Signal::SIGINT);
    pub const TSTP: ProcessSignal = ProcessSignal(Signal::SIGTSTP);

    /// `TERM`, `SIGTERM`, `term` or `15`.
    pub fn parse(text: &str) -> Option<ProcessSignal> {
        let text = text.trim();
        if let Ok(n) = text.parse::<i32>() {
            return Signal::try_from(n).ok().map(ProcessSignal);
        }
        let upper = text.to_ascii_uppercase();
        let full = if upper.starts_with("SIG") {
            upper
        } else {
            format!("SIG{upper}")
        };
        full.parse().ok().map(ProcessSignal)
    }

    /// `TERM`: the name events and messages carry.
    pub fn name(self) -> &'static str {
        self.0.as_str().trim_start_matches("SIG")
    }

    pub fn number(self) -> i32 {
        self.0 as i32
    }
}

impl From<Signal> for ProcessSignal {
    fn from(signal: Signal) -> ProcessSignal {
        ProcessSignal(signal)
    }
}

impl fmt::Display for ProcessSignal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for ProcessSignal {
    type Err = String;

    fn from_str(text: &str) -> Result<ProcessSignal, String> {
        ProcessSignal::parse(text)
            .ok_or_else(|| format!("`{text}` is not a signal; use a name like TERM or a number"))
    }
}

impl Serialize for ProcessSignal {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for ProcessSignal {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<ProcessSignal, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Text {
            Name(String),
            Number(i32),
        }
        let text = match Text::deserialize(deserializer)? {
            Text::Name(name) => name,
            Text::Number(n) => n.to_string(),
        };
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_names_and_numbers_and_writes_names() {
        assert_eq!(ProcessSignal::parse("TERM"), Some(ProcessSignal::TERM));
        assert_eq!(ProcessSignal::parse("sigkill"), Some(ProcessSignal::KILL));
        assert_eq!(ProcessSignal::parse("2"), Some(ProcessSignal::INT));
        assert_eq!(ProcessSignal::parse("NOPE"), None);
        assert_eq!(ProcessSignal::parse("999"), None);
        assert_eq!(ProcessSignal::TERM.to_string(), "TERM");
        assert_eq!(
            serde_json::to_string(&ProcessSignal::KILL).unwrap(),
            r#""KILL""#
        );
        let parsed: ProcessSignal = serde_json::from_str(r#""hup""#).unwrap();
        assert_eq!(parsed.name(), "HUP");
        let parsed: ProcessSignal = serde_json::from_str("15").unwrap();
        assert_eq!(parsed, ProcessSignal::TERM);
        let err = serde_json::from_str::<ProcessSignal>(r#""NOPE""#).unwrap_err();
        assert!(err.to_string().contains("is not a signal"), "{err}");
    }
}
