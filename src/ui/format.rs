//! Numbers and times as the screen shows them.

/// `850ms`, `4.2s`, `1m23s`, `2h05m`.
pub fn duration_ms(ms: u64) -> String {
    match ms {
        0..1_000 => format!("{ms}ms"),
        1_000..60_000 => format!("{:.1}s", ms as f64 / 1000.0),
        60_000..3_600_000 => format!("{}m{:02}s", ms / 60_000, ms / 1000 % 60),
        _ => format!("{}h{:02}m", ms / 3_600_000, ms / 60_000 % 60),
    }
}

/// Time since the session started: `+1:02.345`.
pub fn offset_ms(ms: u64) -> String {
    format!("+{}:{:02}.{:03}", ms / 60_000, ms / 1000 % 60, ms % 1000)
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

/// Cuts `text` to `width` characters, ending in `…` when cut.
pub fn truncate(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_string();
    }
    let mut out: String = text.chars().take(width.saturating_sub(1)).collect();
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(duration_ms(850), "850ms");
        assert_eq!(duration_ms(4_200), "4.2s");
        assert_eq!(duration_ms(83_000), "1m23s");
        assert_eq!(duration_ms(7_500_000), "2h05m");
        assert_eq!(offset_ms(62_345), "+1:02.345");
        assert_eq!(compact_bytes(1536 * 1024), "1.5M");
        assert_eq!(truncate("abcdef", 4), "abc…");
        assert_eq!(truncate("abc", 4), "abc");
    }
}
