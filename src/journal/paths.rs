//! Where journals live and how sessions and commands are named on disk.

use std::path::{Path, PathBuf};

use thiserror::Error;

#[derive(Debug, Error)]
#[error(
    "cannot find a state directory: none of --state-dir, TETHER_STATE_DIR, XDG_STATE_HOME or HOME is set"
)]
pub struct NoStateDir;

/// `--state-dir`, then `$TETHER_STATE_DIR`, then `$XDG_STATE_HOME/tether`, then
/// `~/.local/state/tether`.
pub fn state_dir(explicit: Option<&Path>) -> Result<PathBuf, NoStateDir> {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(dir) = explicit {
        return Ok(dir.to_path_buf());
    }
    if let Some(dir) = var("TETHER_STATE_DIR") {
        return Ok(PathBuf::from(dir));
    }
    if let Some(dir) = var("XDG_STATE_HOME") {
        return Ok(PathBuf::from(dir).join("tether"));
    }
    if let Some(home) = var("HOME") {
        return Ok(PathBuf::from(home).join(".local/state/tether"));
    }
    Err(NoStateDir)
}

pub fn sessions_dir(state_dir: &Path) -> PathBuf {
    state_dir.join("sessions")
}

/// A session id sorts by start time and is unique per process: `20261130T064143Z-12345`.
pub fn new_session_id(now_ms: u64, pid: u32) -> String {
    let (y, mo, d, h, mi, s) = utc_fields(now_ms);
    format!("{y:04}{mo:02}{d:02}T{h:02}{mi:02}{s:02}Z-{pid}")
}

/// Year, month, day, hour, minute, second (UTC) of a wall-clock millisecond timestamp.
fn utc_fields(ms: u64) -> (i64, u32, u32, i64, i64, i64) {
    let secs = (ms / 1000) as i64;
    let (y, mo, d) = civil_from_days(secs.div_euclid(86_400));
    let rem = secs.rem_euclid(86_400);
    (y, mo, d, rem / 3600, rem % 3600 / 60, rem % 60)
}

/// A command directory name: its position then a file-safe form of its name (`03-build`).
pub fn command_dir_name(index: usize, name: &str) -> String {
    let safe: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .take(40)
        .collect();
    let safe = safe.trim_matches('.');
    if safe.is_empty() {
        format!("{index:02}")
    } else {
        format!("{index:02}-{safe}")
    }
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

/// Formats a wall-clock millisecond timestamp as `2026-11-30 06:41:43.123` (UTC).
pub fn format_utc(ms: u64) -> String {
    let (y, mo, d, h, mi, s) = utc_fields(ms);
    format!(
        "{y:04}-{mo:02}-{d:02} {h:02}:{mi:02}:{s:02}.{:03}",
        ms % 1000
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_ids_sort_by_time() {
        assert_eq!(new_session_id(0, 7), "19700101T000000Z-7");
        assert_eq!(
            new_session_id(1_796_020_903_000, 12345),
            "20261130T064143Z-12345"
        );
        assert_eq!(format_utc(1_796_020_903_123), "2026-11-30 06:41:43.123");
    }

    #[test]
    fn command_dir_names_are_file_safe() {
        assert_eq!(command_dir_name(3, "build"), "03-build");
        assert_eq!(
            command_dir_name(1, "cargo test --all"),
            "01-cargo_test_--all"
        );
        assert_eq!(command_dir_name(2, "../.."), "02-_");
        assert_eq!(command_dir_name(4, "..."), "04");
        assert_eq!(command_dir_name(5, ""), "05");
    }

    #[test]
    fn explicit_state_dir_wins() {
        assert_eq!(
            state_dir(Some(Path::new("/x"))).unwrap(),
            PathBuf::from("/x")
        );
    }
}
