//! The values a config's keys take, for `#[serde(deserialize_with = "...")]`. Each is read
//! from what TOML has there (`toml::Value`), so that an error says what was found in TOML's
//! words (`found integer`); an error is the words after the key, and [`super::document`] adds
//! the file, the position and the key. A duration and a size have one reader each: a string
//! in their units, or a bare number of seconds or bytes.

use std::time::Duration;

use serde::de::Error;
use serde::{Deserialize, Deserializer};
use toml::Value;

use tether_protocol::units::{UnitError, parse_duration, parse_size};

/// Reads a present key's value as TOML has it; `convert`'s `Err` is the message.
pub(super) fn read<'de, D: Deserializer<'de>, T>(
    d: D,
    convert: impl FnOnce(Value) -> Result<T, String>,
) -> Result<Option<T>, D::Error> {
    convert(Value::deserialize(d)?)
        .map(Some)
        .map_err(D::Error::custom)
}

pub(super) fn expected(what: &str, value: &Value) -> String {
    format!("expected {what}, found {}", value.type_str())
}

/// `true` or `false`.
pub(super) fn flag<'de, D: Deserializer<'de>>(d: D) -> Result<Option<bool>, D::Error> {
    read(d, |value| {
        (value.as_bool()).ok_or_else(|| expected("true or false", &value))
    })
}

/// A positive whole number (`max_procs = 64`).
pub(super) fn count<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    read(d, |value| match value.as_integer() {
        Some(n) if n > 0 => Ok(n as u64),
        Some(_) => Err("must be a whole number above 0, like 64".into()),
        None => Err(expected("a whole number like 64", &value)),
    })
}

/// A duration (`"2s"`, or seconds) or a size (`"512M"`, or bytes).
pub(super) fn amount<'de, D: Deserializer<'de>, T: Amount>(d: D) -> Result<Option<T>, D::Error> {
    read(d, T::read)
}

/// An [`Amount`] above zero (a timeout, a longest wait: zero would time out everything, or
/// try again at once forever).
pub(super) fn positive<'de, D: Deserializer<'de>, T: Amount>(d: D) -> Result<Option<T>, D::Error> {
    read(d, |value| match T::read(value)? {
        amount if amount == T::default() => Err("must be above 0".into()),
        amount => Ok(amount),
    })
}

/// A threshold: `"off"` or `false` turn it off (`Some(None)`), else an [`Amount`] above zero
/// (zero must be written `"off"`).
pub(super) fn threshold<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
where
    D: Deserializer<'de>,
    T: Amount,
{
    read(d, |value| match value {
        Value::Boolean(false) => Ok(None),
        Value::String(ref word) if word == "off" => Ok(None),
        Value::String(_) | Value::Integer(_) => match T::read(value) {
            Ok(amount) if amount != T::default() => Ok(Some(amount)),
            Ok(_) => Err("must be above 0; write \"off\" to turn it off".into()),
            Err(why) => Err(format!("{why}; or \"off\"")),
        },
        other => Err(expected(&format!("{} or \"off\"", T::EXPECTED), &other)),
    })
}

/// What [`amount`] and [`threshold`] read: a string in units, or a bare number of the unit.
pub(super) trait Amount: Sized + Default + PartialEq {
    const EXPECTED: &'static str;
    const PARSE: fn(&str) -> Result<Self, UnitError>;

    fn read(value: Value) -> Result<Self, String> {
        let parsed = match value {
            Value::String(text) => Self::PARSE(&text),
            Value::Integer(n) => Self::PARSE(&n.to_string()),
            other => return Err(expected(Self::EXPECTED, &other)),
        };
        parsed.map_err(|e| e.to_string())
    }
}

impl Amount for Duration {
    const EXPECTED: &'static str = "a duration like \"2s\"";
    const PARSE: fn(&str) -> Result<Duration, UnitError> = parse_duration;
}

/// Bytes.
impl Amount for u64 {
    const EXPECTED: &'static str = "a size like \"512M\"";
    const PARSE: fn(&str) -> Result<u64, UnitError> = parse_size;
}
