//! `tether export` and `tether sessions --json`: finding the session, reading it, writing
//! the result, and saying on stderr what a damaged journal lacks. Returns exit codes.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::output::write_private;
use super::summary::{SESSIONS_JSON_VERSION, SessionSummary, SessionsDocument};
use super::{Format, SessionExport, render};
use crate::journal::secure::check_for_reading;
use crate::journal::{SessionRecord, list_sessions, sessions_dir, state_dir};
use crate::model::output::one_line;
use crate::postmortem::{exit_of_writing, resolve};

/// A session that cannot be found or read, a file that cannot be written.
const EXIT_FAILED: i32 = 1;
/// What was asked cannot be understood (no such session, no state directory).
const EXIT_USAGE: i32 = 2;

/// `tether export [SESSION] --format F [-o FILE]`.
pub fn export(
    state: Option<&Path>,
    wanted: Option<&str>,
    format: Format,
    output: Option<&Path>,
) -> i32 {
    let dir = match resolve(state, wanted) {
        Ok(dir) => dir,
        Err(err) => {
            eprintln!("tether: {err}");
            return EXIT_USAGE;
        }
    };
    let record = match SessionRecord::load(&dir) {
        Ok(record) => record,
        Err(err) => {
            eprintln!(
                "tether: cannot read the session in {}: {err}",
                dir.display()
            );
            return EXIT_FAILED;
        }
    };
    let session = SessionExport::from_record(&record);
    warn_damage(&session);
    let bytes = render(&session, format);
    match output {
        Some(path) => match write_private(path, &bytes) {
            Ok(()) => 0,
            Err(err) => {
                eprintln!(
                    "tether: cannot write {}: {err}; choose another -o FILE",
                    path.display()
                );
                EXIT_FAILED
            }
        },
        None => {
            let mut stdout = std::io::stdout().lock();
            let written = stdout.write_all(&bytes).and_then(|()| stdout.flush());
            exit_of_writing(written, "the export")
        }
    }
}

/// Says on stderr which journals are damaged and how: the export holds what they have.
fn warn_damage(session: &SessionExport) {
    for damage in &session.damage {
        eprintln!("tether: {}: {}", one_line(&session.id), one_line(damage));
    }
    for command in session.cut_short() {
        eprintln!(
            "tether: {}/{}: journal cut short, exporting what it has: {}",
            one_line(&session.id),
            one_line(&command.id),
            one_line(&command.damage.join("; "))
        );
    }
}

/// `tether sessions --json`: one document, sessions oldest first (or the one `wanted` names).
pub fn sessions_json(state: Option<&Path>, wanted: Option<&str>) -> i32 {
    let state = match state_dir(state) {
        Ok(dir) => dir,
        Err(err) => {
            eprintln!("tether: {err}");
            return EXIT_USAGE;
        }
    };
    if let Err(err) = check_for_reading(&state) {
        eprintln!("tether: {err}");
        return EXIT_USAGE;
    }
    let sessions = sessions_dir(&state);
    let dirs = match wanted.map(|w| resolve(Some(&state), Some(w))) {
        Some(Ok(dir)) => vec![dir],
        Some(Err(err)) => {
            eprintln!("tether: {}", one_line(&err));
            return EXIT_USAGE;
        }
        None => match list_sessions(&sessions) {
            Ok(dirs) => dirs,
            Err(err) => {
                eprintln!("tether: cannot list {}: {err}", sessions.display());
                return EXIT_FAILED;
            }
        },
    };
    let document = sessions_document(&state, &dirs);
    let mut stdout = std::io::stdout().lock();
    let written = crate::model::output::json::to_vec(&document, true)
        .map_err(std::io::Error::from)
        .and_then(|json| stdout.write_all(&json))
        .and_then(|()| writeln!(stdout))
        .and_then(|()| stdout.flush());
    exit_of_writing(written, "the sessions")
}

/// The document for the session directories `dirs`, in their order.
pub fn sessions_document(state: &Path, dirs: &[PathBuf]) -> SessionsDocument {
    SessionsDocument {
        version: SESSIONS_JSON_VERSION,
        state_dir: state.to_string_lossy().into_owned(),
        sessions: dirs
            .iter()
            .map(|dir| match SessionRecord::load(dir) {
                Ok(record) => SessionSummary::of(&SessionExport::from_record(&record)),
                Err(err) => SessionSummary::unreadable(dir, err.to_string()),
            })
            .collect(),
    }
}

/// `tether export --follow`'s flags.
#[derive(Debug, Clone, Default)]
pub struct FollowFlags {
    /// A base URL: traces go to `URL/v1/traces`.
    pub endpoint: Option<String>,
    pub protocol: Option<String>,
    pub logs: bool,
    pub headers: Vec<String>,
    pub once: bool,
    pub status: bool,
}

/// `tether export --follow [--once | --status]`.
pub fn follow(state: Option<&Path>, flags: FollowFlags) -> i32 {
    let state = match state_dir(state) {
        Ok(dir) => dir,
        Err(err) => {
            eprintln!("tether: {err}");
            return EXIT_USAGE;
        }
    };
    let endpoint = match traces_endpoint(flags.endpoint.as_deref(), |name| std::env::var(name).ok())
    {
        Ok(endpoint) => endpoint,
        Err(err) => {
            eprintln!("tether: {err}");
            return EXIT_USAGE;
        }
    };
    if flags.status {
        return super::follow::run::print_status(&state, &endpoint);
    }
    let sink = match otlp_sink(&flags, &endpoint) {
        Ok(sink) => sink,
        Err(err) => {
            eprintln!("tether: {err}");
            return EXIT_USAGE;
        }
    };
    let options = super::follow::FollowOptions {
        state,
        endpoint,
        once: flags.once,
        limits: super::follow::machine::Limits::default(),
    };
    super::follow::follow(options, sink)
}

/// The traces URL: `--endpoint` (a base), `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (as is),
/// `OTEL_EXPORTER_OTLP_ENDPOINT` (a base). It names the endpoint's cursors.
// The merge replaces this with the OTLP target's resolution, which reads the config too.
pub fn traces_endpoint(
    flag: Option<&str>,
    env: impl Fn(&str) -> Option<String>,
) -> Result<String, String> {
    let var = |name: &str| env(name).filter(|v| !v.trim().is_empty());
    let base = |url: &str| format!("{}/v1/traces", url.trim().trim_end_matches('/'));
    match (flag, var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")) {
        (Some(url), _) => Ok(base(url)),
        (None, Some(url)) => Ok(url.trim().to_string()),
        (None, None) => var("OTEL_EXPORTER_OTLP_ENDPOINT")
            .map(|url| base(&url))
            .ok_or_else(|| {
                "no endpoint: give --endpoint URL, set OTEL_EXPORTER_OTLP_ENDPOINT or [export.otlp] endpoint"
                    .to_string()
            }),
    }
}

/// Where the follower's batches go: the OTLP encoder and HTTP sender.
// The merge wires the OTLP encoder and sender (`export::otlp`) in here.
fn otlp_sink(
    _flags: &FollowFlags,
    _endpoint: &str,
) -> Result<Box<dyn super::follow::Sink>, String> {
    Err("this tether was built without the OTLP sender (cargo feature `otlp`)".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_traces_endpoint_comes_from_the_flag_then_the_variables() {
        let none = |_: &str| None;
        let both = |name: &str| match name {
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT" => Some("https://t.example/x".to_string()),
            "OTEL_EXPORTER_OTLP_ENDPOINT" => Some("http://c:4318/".to_string()),
            _ => None,
        };
        let base = |name: &str| {
            (name == "OTEL_EXPORTER_OTLP_ENDPOINT").then(|| "http://c:4318/".to_string())
        };
        assert_eq!(
            traces_endpoint(Some("http://f:4318"), both).unwrap(),
            "http://f:4318/v1/traces"
        );
        assert_eq!(traces_endpoint(None, both).unwrap(), "https://t.example/x");
        assert_eq!(
            traces_endpoint(None, base).unwrap(),
            "http://c:4318/v1/traces"
        );
        assert!(
            traces_endpoint(None, none)
                .unwrap_err()
                .starts_with("no endpoint")
        );
    }
}
