//! Readiness probes' pure parts: how long one try may take, and an HTTP answer's status.
//! The tries themselves are the I/O layer's (`broker::probes`); when to try and what the
//! answers mean is the broker's state (`state::ready`).

pub mod target;

use std::time::Duration;

/// The shortest a try may take before it counts as failed (`timed out`)...
pub const TRY_TIMEOUT_MIN: Duration = Duration::from_secs(2);
/// ...and the longest: a try is given its interval, within these bounds. One try runs at a
/// time, so a slow one delays the next rather than piling up.
pub const TRY_TIMEOUT_MAX: Duration = Duration::from_secs(10);

/// The shortest interval between two tries: a request that says less (zero) would try
/// without pause.
pub const MIN_INTERVAL: Duration = Duration::from_millis(50);

/// How long one try of a probe tried every `interval` may take.
pub fn try_timeout(interval: Duration) -> Duration {
    interval.clamp(TRY_TIMEOUT_MIN, TRY_TIMEOUT_MAX)
}

/// The status code of an HTTP/1.x status line (`HTTP/1.1 200 OK`), if it is one.
pub fn status_code(line: &[u8]) -> Option<u16> {
    let text = std::str::from_utf8(line).ok()?;
    let mut words = text.split_ascii_whitespace();
    if !words.next()?.starts_with("HTTP/") {
        return None;
    }
    let code = words.next()?;
    (code.len() == 3).then(|| code.parse().ok()).flatten()
}

/// A `ready_log` pattern compiled, bounded as `drain_on`'s is: the regex, or what is wrong.
pub fn log_pattern(pattern: &str) -> Result<regex::bytes::Regex, String> {
    use crate::final_drain::{PatternError, compile};
    compile(pattern).map_err(|err| match err {
        PatternError::Empty => "the pattern is empty; give a regex that matches the line that says the command is ready, like 'listening on'".into(),
        PatternError::TooLong(len) => format!("the pattern is {len} bytes long; at most 4096 are accepted"),
        PatternError::Invalid { reason, .. } => format!("not a valid regex: {reason}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_line_gives_its_code() {
        assert_eq!(status_code(b"HTTP/1.1 204 No Content"), Some(204));
        assert_eq!(status_code(b"HTTP/1.0 503"), Some(503));
        assert_eq!(status_code(b"SSH-2.0-OpenSSH"), None);
    }

    #[test]
    fn a_try_is_given_its_interval_within_bounds() {
        assert_eq!(try_timeout(Duration::from_millis(500)), TRY_TIMEOUT_MIN);
        assert_eq!(try_timeout(Duration::from_secs(5)), Duration::from_secs(5));
        assert_eq!(try_timeout(Duration::from_secs(60)), TRY_TIMEOUT_MAX);
    }
}
