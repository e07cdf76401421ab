//! Durations (`500ms`, `2s`, `5m`) and sizes (`64K`, `1G`) as people type them, and every
//! way tether shows them: the one home of both.

use std::time::Duration;

use thiserror::Error;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum UnitError {
    #[error("`{0}` is not a duration of at most a week; write it like 500ms, 2s, 1.5s, 5m or 1h")]
    Duration(String),
    #[error("`{0}` is not a size; write it like 1048576, 64K, 512M or 1G")]
    Size(String),
    #[error("`{0}` is not an age; write it like 90m, 12h, 30d or 2w")]
    Age(String),
    #[error(
        "`{0}` is not a time in the session; write it as the timeline does, +1:23 or \
         +0:01.5 (minutes:seconds), or as 83s, 1.5s or 500ms, each from the session's start"
    )]
    Offset(String),
}

/// Splits `1.5s` into (1.5, "s").
fn split_number(text: &str) -> Option<(f64, &str)> {
    let text = text.trim();
    let end = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let value: f64 = text[..end].parse().ok()?;
    (value.is_finite() && value >= 0.0).then_some((value, text[end..].trim()))
}

pub fn parse_duration(text: &str) -> Result<Duration, UnitError> {
    let err = || UnitError::Duration(text.to_string());
    let (value, unit) = split_number(text).ok_or_else(err)?;
    let scale = match unit {
        "ms" => 0.001,
        "s" | "" => 1.0,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        _ => return Err(err()),
    };
    // Past a week a duration is a typo, and would overflow deadline arithmetic.
    let secs = value * scale;
    if secs > crate::protocol::MAX_INTERVAL.as_secs_f64() {
        return Err(err());
    }
    Duration::try_from_secs_f64(secs).map_err(|_| err())
}

/// An age for retention rules (`30d`, `12h`, `2w`): unlike [`parse_duration`], days and
/// weeks, and no upper bound short of overflow, since sessions are kept for months.
pub fn parse_age(text: &str) -> Result<Duration, UnitError> {
    let err = || UnitError::Age(text.to_string());
    let (value, unit) = split_number(text).ok_or_else(err)?;
    let scale = match unit {
        "s" | "" => 1.0,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        "d" => 86_400.0,
        "w" => 7.0 * 86_400.0,
        _ => return Err(err()),
    };
    Duration::try_from_secs_f64(value * scale).map_err(|_| err())
}

/// `3 d 4 h`-style compact age for people: the two largest units (`3d4h`, `5m12s`, `40s`).
pub fn format_age(age: Duration) -> String {
    let secs = age.as_secs();
    let (d, h, m, s) = (secs / 86_400, secs / 3600 % 24, secs / 60 % 60, secs % 60);
    match (d, h, m) {
        (0, 0, 0) => format!("{s}s"),
        (0, 0, _) => format!("{m}m{s:02}s"),
        (0, _, _) => format!("{h}h{m:02}m"),
        _ => format!("{d}d{h:02}h"),
    }
}

pub fn parse_size(text: &str) -> Result<u64, UnitError> {
    let err = || UnitError::Size(text.to_string());
    let (value, unit) = split_number(text).ok_or_else(err)?;
    let scale: u64 = match unit
        .to_ascii_uppercase()
        .trim_end_matches("IB")
        .trim_end_matches('B')
    {
        "" => 1,
        "K" => 1 << 10,
        "M" => 1 << 20,
        "G" => 1 << 30,
        "T" => 1 << 40,
        _ => return Err(err()),
    };
    let bytes = value * scale as f64;
    if bytes > u64::MAX as f64 {
        return Err(err());
    }
    Ok(bytes as u64)
}

/// `850ms`, `4.2s`, `1m23s`, `2h05m`.
pub fn duration_ms(ms: u64) -> String {
    match ms {
        0..1_000 => format!("{ms}ms"),
        1_000..60_000 => format!("{:.1}s", ms as f64 / 1000.0),
        60_000..3_600_000 => format!("{}m{:02}s", ms / 60_000, ms / 1000 % 60),
        _ => format!("{}h{:02}m", ms / 3_600_000, ms / 60_000 % 60),
    }
}

/// A [`Duration`] as [`duration_ms`] shows it.
pub fn duration(interval: Duration) -> String {
    duration_ms(crate::protocol::millis::to_wire(interval))
}

/// Time since the session started: `+1:02.345`.
pub fn offset_ms(ms: u64) -> String {
    format!("+{}:{:02}.{:03}", ms / 60_000, ms / 1000 % 60, ms % 1000)
}

/// A moment typed as an offset from the session's start, as [`offset_ms`] writes it or
/// nearly: `+1:23`, `1:23`, `+0:01.5`, `1:02:03` (hours too), or a duration (`83s`, `1.5s`,
/// `500ms`, `2m`; a bare number is seconds). In milliseconds.
pub fn parse_offset(text: &str) -> Result<u64, UnitError> {
    let err = || UnitError::Offset(text.to_string());
    let bare = text.trim();
    let bare = bare.strip_prefix('+').unwrap_or(bare).trim_start();
    if bare.is_empty() {
        return Err(err());
    }
    if !bare.contains(':') {
        let duration = parse_duration(bare).map_err(|_| err())?;
        return u64::try_from(duration.as_millis()).map_err(|_| err());
    }
    // Hours and minutes whole, the seconds maybe with a fraction: `1:02:03.5`.
    let parts: Vec<&str> = bare.split(':').collect();
    let whole = |part: &str| -> Option<u64> {
        (!part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()))
            .then(|| part.parse().ok())
            .flatten()
    };
    let (seconds_part, larger) = parts.split_last().ok_or_else(err)?;
    let mut minutes = 0u64;
    for part in larger {
        minutes = minutes.checked_mul(60).ok_or_else(err)? + whole(part).ok_or_else(err)?;
    }
    let (seconds, fraction) = match seconds_part.split_once('.') {
        Some((s, f)) => (s, f),
        None => (*seconds_part, ""),
    };
    let seconds = whole(seconds).filter(|s| *s < 60 || larger.is_empty());
    let fraction_ok = fraction.bytes().all(|b| b.is_ascii_digit()) && fraction.len() <= 3;
    let (Some(seconds), true, 1..=2) = (seconds, fraction_ok, larger.len()) else {
        return Err(err());
    };
    let millis: u64 = format!("{fraction:0<3}").parse().map_err(|_| err())?;
    minutes
        .checked_mul(60_000)
        .and_then(|ms| ms.checked_add(seconds * 1000 + millis))
        .ok_or_else(err)
}

/// The longest start of `text` of at most `max` bytes that ends on a character boundary.
pub fn head(text: &str, max: usize) -> &str {
    let mut cut = max.min(text.len());
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    &text[..cut]
}

/// `1536` → `1.5 KiB`: compact sizes for people.
pub fn format_size(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// `300ms`, `2s`, `2.5s`, `1m05s`: a delay between two signals.
pub fn short_duration(ms: u64) -> String {
    match ms {
        0..1_000 => format!("{ms}ms"),
        1_000..60_000 if ms % 1000 < 50 => format!("{}s", ms / 1000),
        1_000..60_000 => format!("{:.1}s", ms as f64 / 1000.0),
        _ => format!("{}m{:02}s", ms / 60_000, ms / 1000 % 60),
    }
}

/// `100ms`, `1s`, `5m`, `1h`: a step as the status bar names it.
pub fn step_label(ms: u64) -> String {
    match ms {
        0..1_000 => format!("{ms}ms"),
        1_000..60_000 => format!("{}s", ms / 1_000),
        60_000..3_600_000 => format!("{}m", ms / 60_000),
        _ => format!("{}h", ms / 3_600_000),
    }
}

/// `12.3M`, `512K`: resident memory in a narrow column.
pub fn compact_bytes(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["K", "M", "G", "T"];
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if value >= 100.0 {
        format!("{value:.0}{}", UNITS[unit])
    } else {
        format!("{value:.1}{}", UNITS[unit])
    }
}

/// Formats a wall-clock millisecond timestamp as `2026-11-30 06:41:43.123` (UTC).
pub fn format_utc(ms: u64) -> String {
    let (y, mo, d, h, mi, s) = utc_fields(ms);
    format!(
        "{y:04}-{mo:02}-{d:02} {h:02}:{mi:02}:{s:02}.{:03}",
        ms % 1000
    )
}

/// `2026-01-02T03:04:05.000Z`.
pub fn iso_utc(ms: u64) -> String {
    format!("{}Z", format_utc(ms).replacen(' ', "T", 1))
}

/// Year, month, day, hour, minute, second (UTC) of a wall-clock millisecond timestamp.
pub fn utc_fields(ms: u64) -> (i64, u32, u32, i64, i64, i64) {
    let secs = (ms / 1000) as i64;
    let (y, mo, d) = civil_from_days(secs.div_euclid(86_400));
    let rem = secs.rem_euclid(86_400);
    (y, mo, d, rem / 3600, rem % 3600 / 60, rem % 60)
}

/// Days since 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_offset_reads_as_the_timeline_writes_it_or_as_a_duration() {
        for (text, ms) in [
            ("+1:23", 83_000),
            ("1:23", 83_000),
            ("+0:01.5", 1_500),
            ("+1:02.345", 62_345),
            (" + 0:07 ", 7_000),
            ("1:02:03", 3_723_000),
            ("83s", 83_000),
            ("1.5s", 1_500),
            ("500ms", 500),
            ("2m", 120_000),
            ("90", 90_000),
            (&offset_ms(754_321), 754_321),
        ] {
            assert_eq!(parse_offset(text), Ok(ms), "{text}");
        }
        for text in [
            "",
            "+",
            "1:",
            ":30",
            "1:75",
            "1:2:3:4",
            "1:23.4567",
            "abc",
            "-5s",
            "1:x",
        ] {
            assert_eq!(
                parse_offset(text),
                Err(UnitError::Offset(text.into())),
                "{text}"
            );
        }
        let said = parse_offset("soon").unwrap_err().to_string();
        assert!(
            said.starts_with("`soon` is not a time in the session"),
            "{said}"
        );
    }

    #[test]
    fn delays_read_as_people_write_them() {
        assert_eq!(short_duration(300), "300ms");
        assert_eq!(short_duration(2_003), "2s");
        assert_eq!(short_duration(2_500), "2.5s");
        assert_eq!(short_duration(65_000), "1m05s");
    }

    #[test]
    fn labels() {
        assert_eq!(compact_bytes(1536 * 1024), "1.5M");
        assert_eq!(compact_bytes(300 << 20), "300M");
        assert_eq!(step_label(250), "250ms");
        assert_eq!(step_label(300_000), "5m");
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("3"), Ok(Duration::from_secs(3)));
        assert!(parse_duration("fast").is_err());
        assert!(parse_duration("-1s").is_err());
        assert!(parse_duration("2 fortnights").is_err());
        assert!(parse_duration("3000000000000000h").is_err());
        assert!(parse_duration("7d").is_err());
        assert!(parse_duration("168h").is_ok());
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("1024"), Ok(1024));
        assert_eq!(parse_size("64K"), Ok(65536));
        assert_eq!(parse_size("1G"), Ok(1 << 30));
        assert_eq!(parse_size("2MiB"), Ok(2 << 20));
        assert!(parse_size("lots").is_err());
        assert_eq!(format_size(512), "512 B");
        assert_eq!(format_size(1536), "1.5 KiB");
    }

    #[test]
    fn ages() {
        assert_eq!(parse_age("30d"), Ok(Duration::from_secs(30 * 86_400)));
        assert_eq!(parse_age("2w"), Ok(Duration::from_secs(14 * 86_400)));
        assert_eq!(parse_age("90m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_age("0"), Ok(Duration::ZERO));
        assert!(parse_age("30 days").is_err());
        assert!(parse_age("-1d").is_err());
        assert!(parse_age("1e400d").is_err());
        assert_eq!(format_age(Duration::from_secs(40)), "40s");
        assert_eq!(format_age(Duration::from_secs(312)), "5m12s");
        assert_eq!(format_age(Duration::from_secs(3 * 3600 + 60)), "3h01m");
        assert_eq!(
            format_age(Duration::from_secs(3 * 86_400 + 4 * 3600)),
            "3d04h"
        );
    }
}
