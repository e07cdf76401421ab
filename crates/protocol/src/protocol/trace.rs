//! W3C trace context (<https://www.w3.org/TR/trace-context/>) carried from a command's
//! caller to the command: an agent with telemetry on gives its shell a `TRACEPARENT` naming
//! the tool call's span. The command gets a span of its own in that trace, journaled in its
//! `command.json`, exported as the caller's child, and handed to the command as its own
//! `TRACEPARENT`, so that instrumented programs nest beneath it.

use serde::{Deserialize, Serialize};

pub const TRACEPARENT_ENV: &str = "TRACEPARENT";
pub const TRACESTATE_ENV: &str = "TRACESTATE";
/// The most `TRACESTATE` bytes journaled: the W3C asks vendors to carry at least 512.
pub const MAX_TRACESTATE: usize = 512;

/// The caller's span and the command's own, in one trace. Ids are lowercase hex, never all
/// zero: `trace_id` 32 digits, the span ids 16, `flags` 2.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceContext {
    pub trace_id: String,
    /// The caller's span, the one its `TRACEPARENT` named.
    pub parent_span_id: String,
    /// The command's span, made at launch.
    pub span_id: String,
    pub flags: String,
    /// The caller's `TRACESTATE`, as it was, when there was one of at most
    /// [`MAX_TRACESTATE`] bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
}

/// The parts of a valid `TRACEPARENT` that matter here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceParent {
    pub trace_id: String,
    pub parent_span_id: String,
    pub flags: String,
}

/// Why a `TRACEPARENT` was not used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TraceParentError {
    #[error("it is not VERSION-TRACEID-PARENTID-FLAGS")]
    Shape,
    #[error("its {0} is not lowercase hex of the right length")]
    NotHex(&'static str),
    #[error("version ff is invalid")]
    VersionFF,
    #[error("its {0} is all zeros")]
    AllZero(&'static str),
}

impl TraceParent {
    /// Reads a `traceparent` header value. Version `00` has exactly four fields; a later
    /// version may add fields after them, which are ignored (as the W3C asks).
    pub fn parse(header: &str) -> Result<TraceParent, TraceParentError> {
        let mut fields = header.split('-');
        let (Some(version), Some(trace_id), Some(parent), Some(flags)) =
            (fields.next(), fields.next(), fields.next(), fields.next())
        else {
            return Err(TraceParentError::Shape);
        };
        let rest = fields.next();
        hex_field(version, 2, "version")?;
        if version == "ff" {
            return Err(TraceParentError::VersionFF);
        }
        if version == "00" && rest.is_some() {
            return Err(TraceParentError::Shape);
        }
        hex_field(trace_id, 32, "trace id")?;
        hex_field(parent, 16, "parent id")?;
        hex_field(flags, 2, "flags")?;
        for (id, name) in [(trace_id, "trace id"), (parent, "parent id")] {
            if id.bytes().all(|b| b == b'0') {
                return Err(TraceParentError::AllZero(name));
            }
        }
        Ok(TraceParent {
            trace_id: trace_id.into(),
            parent_span_id: parent.into(),
            flags: flags.into(),
        })
    }
}

fn hex_field(field: &str, len: usize, name: &'static str) -> Result<(), TraceParentError> {
    let lower_hex = |b: u8| b.is_ascii_digit() || (b'a'..=b'f').contains(&b);
    if field.len() == len && field.bytes().all(lower_hex) {
        Ok(())
    } else {
        Err(TraceParentError::NotHex(name))
    }
}

impl TraceContext {
    /// The command's context under `caller`, with the span id `span_id` (16 hex digits).
    pub fn child_of(caller: TraceParent, span_id: String, state: Option<String>) -> Self {
        TraceContext {
            trace_id: caller.trace_id,
            parent_span_id: caller.parent_span_id,
            span_id,
            flags: caller.flags,
            state,
        }
    }

    /// Whether every id is what the W3C allows: a `command.json` is read back from disk,
    /// and what it says goes into an export only if it is.
    pub fn is_valid(&self) -> bool {
        let id = |field: &str, len| {
            hex_field(field, len, "").is_ok() && field.bytes().any(|b| b != b'0')
        };
        id(&self.trace_id, 32)
            && id(&self.parent_span_id, 16)
            && id(&self.span_id, 16)
            && hex_field(&self.flags, 2, "").is_ok()
    }

    /// The `TRACEPARENT` the command gets: the same trace and flags, its own span.
    pub fn command_traceparent(&self) -> String {
        format!("00-{}-{}-{}", self.trace_id, self.span_id, self.flags)
    }
}

/// What a caller's environment says about its trace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallerTrace {
    /// No `TRACEPARENT` (or an empty one).
    None,
    Parent {
        parent: TraceParent,
        /// `TRACESTATE`, when set and at most [`MAX_TRACESTATE`] bytes.
        state: Option<String>,
    },
    /// A `TRACEPARENT` that cannot be used, and why (in words).
    Ignored(String),
}

impl CallerTrace {
    /// From the two variables' values. A `TRACEPARENT` that is not UTF-8 is malformed.
    pub fn from_values(
        traceparent: Option<&std::ffi::OsStr>,
        tracestate: Option<&std::ffi::OsStr>,
    ) -> CallerTrace {
        let Some(raw) = traceparent.filter(|v| !v.is_empty()) else {
            return CallerTrace::None;
        };
        let parsed = raw
            .to_str()
            .ok_or(TraceParentError::Shape)
            .and_then(|header| TraceParent::parse(header.trim()));
        match parsed {
            Ok(parent) => CallerTrace::Parent {
                parent,
                state: tracestate
                    .and_then(|s| s.to_str())
                    .filter(|s| !s.is_empty() && s.len() <= MAX_TRACESTATE)
                    .map(str::to_owned),
            },
            Err(err) => CallerTrace::Ignored(format!(
                "{TRACEPARENT_ENV} ignored: {err}; the command's span is not linked to the caller's trace"
            )),
        }
    }

    /// From this process's environment.
    pub fn from_env() -> CallerTrace {
        CallerTrace::from_values(
            std::env::var_os(TRACEPARENT_ENV).as_deref(),
            std::env::var_os(TRACESTATE_ENV).as_deref(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;

    const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
    const SPAN: &str = "00f067aa0ba902b7";

    #[test]
    fn a_valid_traceparent_is_read() {
        let parent = TraceParent::parse(&format!("00-{TRACE}-{SPAN}-01")).unwrap();
        assert_eq!(parent.trace_id, TRACE);
        assert_eq!(parent.parent_span_id, SPAN);
        assert_eq!(parent.flags, "01");
        // A later version may carry more fields.
        let later = TraceParent::parse(&format!("cc-{TRACE}-{SPAN}-00-what-ever")).unwrap();
        assert_eq!(later.flags, "00");
    }

    #[test]
    fn malformed_traceparents_are_refused() {
        let zero_trace = "0".repeat(32);
        let zero_span = "0".repeat(16);
        let upper = TRACE.to_uppercase();
        for bad in [
            String::new(),
            "garbage".into(),
            format!("00-{TRACE}-{SPAN}"),
            format!("00-{TRACE}-{SPAN}-01-extra"),
            format!("ff-{TRACE}-{SPAN}-01"),
            format!("0-{TRACE}-{SPAN}-01"),
            format!("00-{upper}-{SPAN}-01"),
            format!("00-{zero_trace}-{SPAN}-01"),
            format!("00-{TRACE}-{zero_span}-01"),
            format!("00-{TRACE}-{SPAN}-1"),
            format!("00-{TRACE}x-{SPAN}-01"),
            format!("00-{}-{SPAN}-01", &TRACE[..31]),
            format!("00-{TRACE}-{SPAN}-0g"),
        ] {
            assert!(TraceParent::parse(&bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_caller_trace_from_the_environment() {
        let header = format!("00-{TRACE}-{SPAN}-01");
        let read = |p: Option<&str>, s: Option<&str>| {
            CallerTrace::from_values(p.map(OsStr::new), s.map(OsStr::new))
        };
        assert_eq!(read(None, Some("a=b")), CallerTrace::None);
        assert_eq!(read(Some(""), None), CallerTrace::None);
        let CallerTrace::Parent { state, .. } = read(Some(&header), Some("vendor=x")) else {
            panic!("not read");
        };
        assert_eq!(state.as_deref(), Some("vendor=x"));
        let long = "a".repeat(MAX_TRACESTATE + 1);
        let CallerTrace::Parent { state, .. } = read(Some(&header), Some(&long)) else {
            panic!("not read");
        };
        assert_eq!(state, None);
        let CallerTrace::Ignored(why) = read(Some("00-nope"), None) else {
            panic!("not ignored");
        };
        assert!(why.contains("TRACEPARENT ignored"), "{why}");
    }

    #[test]
    fn the_command_gets_its_own_span_in_the_same_trace() {
        let parent = TraceParent::parse(&format!("00-{TRACE}-{SPAN}-01")).unwrap();
        let span = "b7ad6b7169203331".to_string();
        let context = TraceContext::child_of(parent, span.clone(), None);
        assert_eq!(
            context.command_traceparent(),
            format!("00-{TRACE}-{span}-01")
        );
        assert!(TraceParent::parse(&context.command_traceparent()).is_ok());
        assert!(context.is_valid());
        let zero_span = TraceContext {
            span_id: "0".repeat(16),
            ..context.clone()
        };
        assert!(!zero_span.is_valid());
        let short = TraceContext {
            trace_id: "abc".into(),
            ..context
        };
        assert!(!short.is_valid());
    }
}
