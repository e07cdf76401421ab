//! Every interval a launch request carries is a `Duration` in the code and a whole number of
//! milliseconds on the wire (`grace_ms`, `drain_ms`, ...): converted here and only here, for
//! `#[serde(with = "millis")]` (and `millis::option`). Read, an interval is cut to
//! [`MAX_INTERVAL`], so that no request, from a front end of any version or from elsewhere,
//! makes a broker's deadline arithmetic overflow.

use std::time::Duration;

use serde::{Deserialize, Deserializer, Serializer};

/// The longest grace, timeout or heartbeat interval a broker honours; longer ones are cut
/// to it (a week is "never" for a watchdog, and keeps deadline arithmetic from overflowing).
pub const MAX_INTERVAL: Duration = Duration::from_secs(7 * 24 * 3600);

/// `interval`, cut to [`MAX_INTERVAL`].
pub fn bounded(interval: Duration) -> Duration {
    interval.min(MAX_INTERVAL)
}

/// `interval` in whole milliseconds, as the wire carries it (a longer one than `u64` holds
/// saturates).
pub fn to_wire(interval: Duration) -> u64 {
    u64::try_from(interval.as_millis()).unwrap_or(u64::MAX)
}

fn from_wire(ms: u64) -> Duration {
    bounded(Duration::from_millis(ms))
}

pub fn serialize<S: Serializer>(interval: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(to_wire(*interval))
}

pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    u64::deserialize(d).map(from_wire)
}

/// An interval that may be absent (`null`, or left out with `#[serde(default)]`).
pub mod option {
    use super::*;

    pub fn serialize<S: Serializer>(interval: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match interval {
            Some(interval) => s.serialize_some(&to_wire(*interval)),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        Option::<u64>::deserialize(d).map(|ms| ms.map(from_wire))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
    struct Both {
        #[serde(with = "super")]
        grace_ms: Duration,
        #[serde(with = "option")]
        drain_ms: Option<Duration>,
    }

    #[test]
    fn whole_milliseconds_cut_to_a_week() {
        let line = r#"{"grace_ms":1500,"drain_ms":null}"#;
        let both: Both = serde_json::from_str(line).unwrap();
        assert_eq!(
            both,
            Both {
                grace_ms: Duration::from_millis(1500),
                drain_ms: None
            }
        );
        assert_eq!(serde_json::to_string(&both).unwrap(), line);
        let long: Both = serde_json::from_str(&format!(
            r#"{{"grace_ms":{},"drain_ms":{}}}"#,
            u64::MAX,
            MAX_INTERVAL.as_millis() + 1
        ))
        .unwrap();
        assert_eq!(
            (long.grace_ms, long.drain_ms),
            (MAX_INTERVAL, Some(MAX_INTERVAL))
        );
        assert!(serde_json::from_str::<Both>(r#"{"grace_ms":-1,"drain_ms":null}"#).is_err());
    }
}
