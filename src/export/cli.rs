//! `tether export` and `tether sessions --json`: finding the session, reading it, writing
//! the result, and saying on stderr what a damaged journal lacks. Returns exit codes.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::output::write_private;
use super::summary::{SESSIONS_JSON_VERSION, SessionSummary, SessionsDocument};
use super::{Format, SessionExport, render};
use crate::exit::{EXIT_FAILED, EXIT_USAGE, OrExit, exit_code};
use crate::journal::secure::check_for_reading;
use crate::journal::{SessionRecord, state_dir};
use crate::model::output::one_line;
use crate::postmortem::{exit_of_writing, resolve, session_dirs};

/// `tether export [SESSION] --format F [-o FILE]`.
pub fn export(
    state: Option<&Path>,
    wanted: Option<&str>,
    format: Format,
    output: Option<&Path>,
) -> i32 {
    exit_code(|| {
        if let Some(missing) = format.missing() {
            return Err((EXIT_USAGE, missing.to_string()));
        }
        let dir = resolve(state, wanted).or_exit(EXIT_USAGE)?;
        let record = SessionRecord::load(&dir)
            .map_err(|err| format!("cannot read the session in {}: {err}", dir.display()))
            .or_exit(EXIT_FAILED)?;
        let session = SessionExport::from_record(&record);
        warn_damage(&session);
        let bytes = render(&session, format);
        let Some(path) = output else {
            let mut stdout = std::io::stdout().lock();
            let written = stdout.write_all(&bytes).and_then(|()| stdout.flush());
            return Ok(exit_of_writing(written, "the export"));
        };
        write_private(path, &bytes)
            .map_err(|err| {
                format!(
                    "cannot write {}: {err}; choose another -o FILE",
                    path.display()
                )
            })
            .or_exit(EXIT_FAILED)?;
        Ok(0)
    })
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
            one_line(&command.id.dir_name()),
            one_line(&command.damage.join("; "))
        );
    }
}

/// `tether sessions --json`: one document, sessions oldest first (or the one `wanted` names).
pub fn sessions_json(state: Option<&Path>, wanted: Option<&str>) -> i32 {
    exit_code(|| {
        let state = state_dir(state).or_exit(EXIT_USAGE)?;
        check_for_reading(&state).or_exit(EXIT_USAGE)?;
        let dirs = match wanted {
            Some(wanted) => vec![
                resolve(Some(&state), Some(wanted))
                    .map_err(|err| one_line(&err))
                    .or_exit(EXIT_USAGE)?,
            ],
            None => session_dirs(Some(&state))?.1,
        };
        let document = sessions_document(&state, &dirs);
        let mut stdout = std::io::stdout().lock();
        let written = crate::model::output::json::to_vec(&document, true)
            .map_err(std::io::Error::from)
            .and_then(|json| stdout.write_all(&json))
            .and_then(|()| writeln!(stdout))
            .and_then(|()| stdout.flush());
        Ok(exit_of_writing(written, "the sessions"))
    })
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
#[derive(Debug, Clone, Default, clap::Args)]
pub struct FollowFlags {
    /// Send every command of every session to an OpenTelemetry endpoint (OTLP/HTTP) as
    /// it ends, until stopped; what the endpoint took is kept, so nothing is lost while
    /// it is down (docs/exports.md).
    #[arg(long)]
    pub follow: bool,
    /// The endpoint's base URL (traces go to URL/v1/traces); default
    /// $OTEL_EXPORTER_OTLP_ENDPOINT, else `[export.otlp] endpoint`.
    #[arg(long, value_name = "URL", requires = "follow")]
    pub endpoint: Option<String>,
    /// http/protobuf (the default) or http/json.
    #[arg(long, value_name = "PROTOCOL", requires = "follow")]
    pub protocol: Option<String>,
    /// Send the commands' output too, as log records (it may hold secrets).
    #[arg(long, requires = "follow")]
    pub logs: bool,
    /// A header for every request (repeatable), e.g. `authorization=Bearer T`.
    #[arg(long = "header", value_name = "K=V", requires = "follow")]
    pub headers: Vec<String>,
    /// Send what is not sent yet, then exit: 0, or 1 if something could not be sent.
    #[arg(long, requires = "follow")]
    pub once: bool,
    /// Print the state of the follower for this endpoint (running or not) and exit.
    #[arg(long, requires = "follow", conflicts_with = "once")]
    pub status: bool,
}

/// `tether export --follow [--once | --status]`.
#[cfg(not(feature = "otlp"))]
pub fn follow(_state: Option<&Path>, _flags: FollowFlags) -> i32 {
    eprintln!(
        "tether: {}",
        Format::Otlp
            .missing()
            .unwrap_or("this tether cannot send OTLP")
    );
    EXIT_USAGE
}

/// `tether export --follow [--once | --status]`.
#[cfg(feature = "otlp")]
pub fn follow(state: Option<&Path>, flags: FollowFlags) -> i32 {
    use super::follow::machine::Limits;
    use super::otlp::{Encoder, LogBudget, OtlpSink, Target};

    exit_code(|| {
        let state = state_dir(state).or_exit(EXIT_USAGE)?;
        let settings = crate::config::user::user_config_path()
            .map(|path| crate::config::user::load_user(&path))
            .transpose()
            .or_exit(EXIT_USAGE)?
            .flatten()
            .unwrap_or_default()
            .export
            .otlp;
        let env = |name: &str| std::env::var(name).ok();
        let target = target_flags(&flags)
            .and_then(|t| Target::resolve(&t, env, &settings))
            .or_exit(EXIT_USAGE)?;
        if flags.status {
            return Ok(super::follow::run::print_status(&state, &target.traces));
        }
        let logs = (flags.logs || settings.logs == Some(true)).then(|| LogBudget {
            bytes: settings.log_bytes(),
        });
        let encoder = Encoder::local(env, logs).or_exit(EXIT_USAGE)?;
        let options = super::follow::FollowOptions {
            state,
            endpoint: target.traces.clone(),
            once: flags.once,
            limits: Limits {
                max_backoff: settings.max_backoff(),
                session_quiet: settings.session_quiet(),
                ..Limits::default()
            },
        };
        Ok(super::follow::follow(
            options,
            Box::new(OtlpSink::new(encoder, target)),
        ))
    })
}

/// The command line's part of the target: `--protocol` and each `--header K=V` read.
#[cfg(feature = "otlp")]
fn target_flags(flags: &FollowFlags) -> Result<super::otlp::TargetFlags, String> {
    let protocol = (flags.protocol.as_deref())
        .map(crate::config::otlp::Protocol::parse)
        .transpose()
        .map_err(|err| format!("--protocol: {err}"))?;
    let headers = (flags.headers.iter())
        .map(|header| match header.split_once('=') {
            Some((name, value)) if !name.trim().is_empty() => {
                Ok((name.trim().to_string(), value.trim().to_string()))
            }
            _ => Err(format!(
                "--header: expected NAME=VALUE, like authorization=Bearer T, found \"{}\"",
                one_line(header)
            )),
        })
        .collect::<Result<_, _>>()?;
    Ok(super::otlp::TargetFlags {
        endpoint: flags.endpoint.clone(),
        protocol,
        headers,
        logs: flags.logs,
    })
}
