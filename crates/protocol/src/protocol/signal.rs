//! A signal as it crosses every boundary (requests, events, the control socket, the command
//! line): one type, parsed once where text comes in, written as its name without `SIG`
//! (`TERM`, `KILL`, `RTMIN+3`), so no side parses a string the other side made.
//!
//! It is a signal number, checked: a standard signal (Linux's 1..=31) or a real-time one
//! (`SIGRTMIN..=SIGRTMAX` as the C library leaves them to programs; the few below `SIGRTMIN`
//! are the C library's own and are refused). The numbers are Linux's, written here so that
//! the protocol needs no C library; the OS layer sends the signal (`sys::SendSignal`) and its
//! tests hold these numbers and names to libc's and nix's.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ProcessSignal(i32);

/// `RTMIN+k` and `RTMAX-k` as `&'static str`, so a name costs no allocation. Linux has at
/// most 33 real-time signals (32..=64), so an offset from the nearer end is at most 16.
const RTMIN_NAMES: [&str; 17] = [
    "RTMIN", "RTMIN+1", "RTMIN+2", "RTMIN+3", "RTMIN+4", "RTMIN+5", "RTMIN+6", "RTMIN+7",
    "RTMIN+8", "RTMIN+9", "RTMIN+10", "RTMIN+11", "RTMIN+12", "RTMIN+13", "RTMIN+14", "RTMIN+15",
    "RTMIN+16",
];
const RTMAX_NAMES: [&str; 17] = [
    "RTMAX", "RTMAX-1", "RTMAX-2", "RTMAX-3", "RTMAX-4", "RTMAX-5", "RTMAX-6", "RTMAX-7",
    "RTMAX-8", "RTMAX-9", "RTMAX-10", "RTMAX-11", "RTMAX-12", "RTMAX-13", "RTMAX-14", "RTMAX-15",
    "RTMAX-16",
];

/// The standard signals' names by number (1..=31), as Linux numbers them on every
/// architecture but alpha, mips and sparc, which tether does not build for.
pub const STANDARD_NAMES: [&str; 31] = [
    "HUP", "INT", "QUIT", "ILL", "TRAP", "ABRT", "BUS", "FPE", "KILL", "USR1", "SEGV", "USR2",
    "PIPE", "ALRM", "TERM", "STKFLT", "CHLD", "CONT", "STOP", "TSTP", "TTIN", "TTOU", "URG",
    "XCPU", "XFSZ", "VTALRM", "PROF", "WINCH", "IO", "PWR", "SYS",
];

impl ProcessSignal {
    pub const HUP: ProcessSignal = ProcessSignal(1);
    pub const INT: ProcessSignal = ProcessSignal(2);
    pub const QUIT: ProcessSignal = ProcessSignal(3);
    pub const KILL: ProcessSignal = ProcessSignal(9);
    pub const TERM: ProcessSignal = ProcessSignal(15);
    pub const CONT: ProcessSignal = ProcessSignal(18);
    pub const STOP: ProcessSignal = ProcessSignal(19);
    pub const TSTP: ProcessSignal = ProcessSignal(20);

    /// The first real-time signal the C library leaves to programs: glibc keeps 32 and 33
    /// for its threads, musl also 34 (libc's `SIGRTMIN()`).
    pub fn rtmin() -> i32 {
        if cfg!(target_env = "musl") { 35 } else { 34 }
    }

    /// The last real-time signal (64 on Linux).
    pub fn rtmax() -> i32 {
        64
    }

    /// `n` if it is a signal a process can be sent: a standard one or a real-time one.
    pub fn from_number(n: i32) -> Option<ProcessSignal> {
        let standard = Self::standard_name(n).is_some();
        let realtime = (Self::rtmin()..=Self::rtmax()).contains(&n);
        (standard || realtime).then_some(ProcessSignal(n))
    }

    /// `TERM`, `SIGTERM`, `term`, `15`, `RTMIN`, `RTMIN+3`, `SIGRTMAX-1`.
    pub fn parse(text: &str) -> Option<ProcessSignal> {
        let text = text.trim();
        if let Ok(n) = text.parse::<i32>() {
            return Self::from_number(n);
        }
        let upper = text.to_ascii_uppercase();
        let bare = upper.strip_prefix("SIG").unwrap_or(&upper);
        if let Some(realtime) = Self::parse_realtime(bare) {
            return Some(realtime);
        }
        let index = STANDARD_NAMES.iter().position(|name| *name == bare)?;
        Some(ProcessSignal(index as i32 + 1))
    }

    /// `TERM` for 15: the name of a standard signal without `SIG`.
    fn standard_name(n: i32) -> Option<&'static str> {
        let index = usize::try_from(n.checked_sub(1)?).ok()?;
        STANDARD_NAMES.get(index).copied()
    }

    /// `RTMIN`, `RTMIN+k`, `RTMAX`, `RTMAX-k` (upper case, without `SIG`).
    fn parse_realtime(bare: &str) -> Option<ProcessSignal> {
        let offset = |rest: &str, sign: char| -> Option<i32> {
            match rest.strip_prefix(sign) {
                None if rest.is_empty() => Some(0),
                None => None,
                // Digits only: `RTMIN+-1` or `RTMIN++1` is no signal.
                Some(digits)
                    if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) =>
                {
                    digits.parse().ok()
                }
                Some(_) => None,
            }
        };
        let n = if let Some(rest) = bare.strip_prefix("RTMIN") {
            Self::rtmin().checked_add(offset(rest, '+')?)?
        } else if let Some(rest) = bare.strip_prefix("RTMAX") {
            Self::rtmax().checked_sub(offset(rest, '-')?)?
        } else {
            return None;
        };
        (Self::rtmin()..=Self::rtmax())
            .contains(&n)
            .then_some(ProcessSignal(n))
    }

    /// `TERM`, `RTMIN+3`: the name events and messages carry. A real-time signal is named
    /// from the nearer end of its range, as `kill -l` does (`RTMIN+15`, then `RTMAX-14`).
    pub fn name(self) -> &'static str {
        if let Some(name) = Self::standard_name(self.0) {
            return name;
        }
        let (min, max) = (Self::rtmin(), Self::rtmax());
        let from_min = (self.0 - min) as usize;
        let from_max = (max - self.0) as usize;
        let named = if from_min <= from_max {
            RTMIN_NAMES.get(from_min)
        } else {
            RTMAX_NAMES.get(from_max)
        };
        named.copied().unwrap_or("RT")
    }

    pub fn number(self) -> i32 {
        self.0
    }

    /// One a person sends to end a process (TERM, KILL, INT, HUP, QUIT): a command that
    /// dies of it after the operator sent it was ended by them, not failed.
    pub fn ends_by_hand(self) -> bool {
        [
            ProcessSignal::TERM,
            ProcessSignal::KILL,
            ProcessSignal::INT,
            ProcessSignal::HUP,
            ProcessSignal::QUIT,
        ]
        .contains(&self)
    }

    pub fn is_realtime(self) -> bool {
        Self::standard_name(self.0).is_none()
    }
}

/// `SIGTERM` for 15, `signal 99` for a number that is no signal: how every view, and the
/// broker's `failed` attention, name the signal that ended a process.
pub fn signal_label(sig: i32) -> String {
    ProcessSignal::from_number(sig)
        .map(|s| format!("SIG{s}"))
        .unwrap_or_else(|| format!("signal {sig}"))
}

impl fmt::Display for ProcessSignal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for ProcessSignal {
    type Err = String;

    fn from_str(text: &str) -> Result<ProcessSignal, String> {
        ProcessSignal::parse(text).ok_or_else(|| {
            format!("`{text}` is not a signal; use a name like TERM or RTMIN+1, or a number")
        })
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
        assert_eq!(ProcessSignal::parse("SIGTERM"), Some(ProcessSignal::TERM));
        assert_eq!(ProcessSignal::parse("term"), Some(ProcessSignal::TERM));
        assert_eq!(ProcessSignal::parse("15"), Some(ProcessSignal::TERM));
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
        assert_eq!(parsed, ProcessSignal::HUP);
        assert_eq!(parsed.name(), "HUP");
        let parsed: ProcessSignal = serde_json::from_str("15").unwrap();
        assert_eq!(parsed, ProcessSignal::TERM);
        let err = serde_json::from_str::<ProcessSignal>(r#""NOPE""#).unwrap_err();
        assert!(err.to_string().contains("is not a signal"), "{err}");
    }

    #[test]
    fn carries_real_time_signals_by_name_and_number() {
        let (min, max) = (ProcessSignal::rtmin(), ProcessSignal::rtmax());
        let rtmin = ProcessSignal::parse("RTMIN").unwrap();
        assert_eq!(rtmin.number(), min);
        assert!(rtmin.is_realtime());
        assert_eq!(ProcessSignal::parse("RTMIN+3").unwrap().number(), min + 3);
        assert_eq!(
            ProcessSignal::parse("sigrtmin+3").unwrap().number(),
            min + 3
        );
        assert_eq!(
            ProcessSignal::parse("SIGRTMAX-1").unwrap().number(),
            max - 1
        );
        assert_eq!(ProcessSignal::parse("RTMAX").unwrap().number(), max);
        assert_eq!(
            ProcessSignal::parse(&(min + 1).to_string()).unwrap().name(),
            "RTMIN+1"
        );
        // Every signal's name parses back to it, and so does its number.
        for n in 1..=max {
            let Some(signal) = ProcessSignal::from_number(n) else {
                continue;
            };
            assert_eq!(ProcessSignal::parse(signal.name()), Some(signal), "{n}");
            assert_eq!(ProcessSignal::parse(&format!("SIG{signal}")), Some(signal));
            let json = serde_json::to_string(&signal).unwrap();
            assert_eq!(
                serde_json::from_str::<ProcessSignal>(&json).unwrap(),
                signal
            );
            assert_eq!(
                serde_json::from_str::<ProcessSignal>(&n.to_string()).unwrap(),
                signal
            );
        }
        assert_eq!(
            ProcessSignal::parse("RTMIN+3").unwrap().to_string(),
            "RTMIN+3"
        );
        assert_eq!(
            serde_json::to_string(&ProcessSignal::parse("RTMIN+1").unwrap()).unwrap(),
            r#""RTMIN+1""#
        );
        // Past the middle of the range, the name counts from RTMAX (as `kill -l` does), and
        // RTMIN+k written the long way still parses.
        let late = ProcessSignal::parse(&format!("RTMIN+{}", max - min - 1)).unwrap();
        assert_eq!(late.name(), "RTMAX-1");
    }

    #[test]
    fn refuses_what_is_no_signal() {
        for text in [
            "0", "-1", "65", "RTMIN+99", "RTMAX-99", "RTMAX+1", "RTMIN-1", "RTMIN+", "RTMIN+-1",
            "RTMIN++1", "RTMIN3", "FOO", "SIG", "", "RT",
        ] {
            assert_eq!(ProcessSignal::parse(text), None, "{text:?}");
        }
        // The C library's own real-time signals, below SIGRTMIN (glibc keeps 32 and 33).
        for n in 32..ProcessSignal::rtmin() {
            assert_eq!(ProcessSignal::from_number(n), None, "{n}");
        }
        assert!(serde_json::from_str::<ProcessSignal>("0").is_err());
        assert!(serde_json::from_str::<ProcessSignal>(r#""RTMIN+99""#).is_err());
    }
}
