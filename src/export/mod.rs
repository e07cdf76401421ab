//! Handing a recorded session to other tools: `tether export` (a Chrome/Perfetto trace, JSON
//! lines, a text report, OTLP/JSON) and `tether sessions --json`.
//!
//! A session is read once into a [`SessionExport`] (the post-mortem's model beside the
//! journal's events) and each format is a pure function of it; only [`cli`] and
//! [`output`] touch the disk beyond the journal. No terminal library is involved.

pub mod chrome;
pub mod cli;
pub mod follow;
pub mod jsonl;
#[cfg(feature = "otlp")]
pub mod otlp;
pub mod output;
pub mod session;
pub mod summary;
pub mod text;

pub use session::{CommandExport, SessionExport};
pub use summary::SessionsDocument;

/// What `tether export --format` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Trace Event Format JSON, for Perfetto and chrome://tracing.
    ChromeTrace,
    /// Every event of every command, merged in time order, one JSON object a line.
    Jsonl,
    /// A report to paste into a bug: a summary table, timelines, stderr tails.
    Text,
    /// OpenTelemetry OTLP/JSON (an ExportTraceServiceRequest).
    Otlp,
}

impl Format {
    /// Why this build cannot write the format, if it cannot: OTLP needs the cargo feature.
    pub fn missing(self) -> Option<&'static str> {
        match self {
            Format::Otlp if cfg!(not(feature = "otlp")) => Some(
                "this tether was built without OTLP (cargo feature `otlp`); build it with \
                 the default features (`cargo install --path .`) to export OTLP",
            ),
            _ => None,
        }
    }
}

/// The session in `format`, as the bytes to write.
pub fn render(session: &SessionExport, format: Format) -> Vec<u8> {
    // Serializing a `Value` cannot fail.
    let json = |value: serde_json::Value, pretty: bool| {
        let mut bytes = crate::model::output::json::to_vec(&value, pretty).unwrap_or_default();
        bytes.push(b'\n');
        bytes
    };
    match format {
        Format::ChromeTrace => json(chrome::trace(session), true),
        Format::Jsonl => jsonl::lines(session),
        Format::Text => text::report(session).into_bytes(),
        // One line: an OTLP JSON file is JSON lines, one request a line (what the
        // collector's `otlpjsonfile` receiver reads), so sessions can be appended to one.
        // The generated messages' serde is the OTLP/JSON mapping: hex ids, 64-bit integers as
        // strings, enums as integers.
        #[cfg(feature = "otlp")]
        Format::Otlp => json(
            serde_json::to_value(otlp::request(session)).unwrap_or_default(),
            false,
        ),
        // `tether export` refuses the format first in such a build ([`Format::missing`]).
        #[cfg(not(feature = "otlp"))]
        Format::Otlp => Vec::new(),
    }
}

/// `text` cut to at most `max` characters, ending in `…` when cut.
pub(crate) fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut out: String = text.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn otlp_is_missing_only_from_a_build_without_its_feature() {
        let missing = Format::Otlp.missing();
        assert_eq!(missing.is_some(), cfg!(not(feature = "otlp")));
        assert!(missing.is_none_or(|why| why.contains("cargo feature `otlp`")));
        assert_eq!(Format::Jsonl.missing(), None);
    }
}
