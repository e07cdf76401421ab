//! The one launch-request builder: a front end gives it what it chose ([`LaunchOptions`]),
//! and it fills in the rest, so that every field of a request is set in one place.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::intervals::{Pace, grace};
use crate::journal::secure::lossy;
use crate::protocol::{
    AttentionRequest, CommandSpec, DEFAULT_MAX_OUTPUT, LaunchRequest, LeftoversRule, Limits,
    PROTOCOL_VERSION, SessionRef, StdinSource, TerminalRequest, TraceContext,
};

/// What a front end asks of a launch beyond the command and its place in the journal, each
/// as the front end chose it (see [`LaunchRequest`] for what each means). The default is
/// what a request holds unless its front end says otherwise: the broker's working directory
/// and environment (the front end's), the default grace, no watchdog, no drain, the default
/// output cap, no mirror, stdin `/dev/null`, no terminals, no limits, leftovers ended with
/// the command, no trace, the default attention thresholds (each front end resolves the
/// user's and the command's: see `config::attention::for_launch`).
#[derive(Debug, Clone, PartialEq)]
pub struct LaunchOptions {
    /// `None`: the broker's, which is the front end's, whatever bytes its path holds.
    pub cwd: Option<PathBuf>,
    pub env: BTreeMap<String, String>,
    /// The grace asked for; `None`: the default (see [`grace`]).
    pub grace: Option<Duration>,
    pub no_output_timeout: Option<Duration>,
    pub drain_on: Option<String>,
    pub drain: Option<Duration>,
    pub max_output: u64,
    pub mirror: bool,
    pub stdin: StdinSource,
    pub arg0: Option<String>,
    pub terminal: Option<TerminalRequest>,
    pub merge_stderr: bool,
    pub limits: Limits,
    pub leftovers: LeftoversRule,
    pub trace: Option<TraceContext>,
    pub trace_ignored: Option<String>,
    pub attention: AttentionRequest,
}

impl Default for LaunchOptions {
    fn default() -> LaunchOptions {
        LaunchOptions {
            cwd: None,
            env: BTreeMap::new(),
            grace: None,
            no_output_timeout: None,
            drain_on: None,
            drain: None,
            max_output: DEFAULT_MAX_OUTPUT,
            mirror: false,
            stdin: StdinSource::Null,
            arg0: None,
            terminal: None,
            merge_stderr: false,
            limits: Limits::default(),
            leftovers: LeftoversRule::default(),
            trace: None,
            trace_ignored: None,
            attention: AttentionRequest::default(),
        }
    }
}

/// A request to run `command` as `name`, journaled in `journal_dir` of `session`, as
/// `options` ask, the broker told the front end's `pace` (its heartbeat) and the front end's
/// pid (its parent, whose death stops the command).
pub fn launch_request(
    name: String,
    command: CommandSpec,
    journal_dir: &Path,
    session: SessionRef,
    pace: Pace,
    options: LaunchOptions,
) -> LaunchRequest {
    // Taken apart, so that an option added to one and not the other does not compile.
    let LaunchOptions {
        cwd,
        env,
        grace: grace_asked,
        no_output_timeout,
        drain_on,
        drain,
        max_output,
        mirror,
        stdin,
        arg0,
        terminal,
        merge_stderr,
        limits,
        leftovers,
        trace,
        trace_ignored,
        attention,
    } = options;
    LaunchRequest {
        v: PROTOCOL_VERSION,
        name,
        command,
        cwd,
        env,
        journal_dir: lossy(journal_dir),
        parent_pid: std::process::id() as i32,
        grace: grace(grace_asked),
        no_output_timeout,
        drain_on,
        drain,
        max_output,
        heartbeat: Some(pace.quiet_ping),
        mirror,
        stdin,
        session: Some(session),
        arg0,
        terminal,
        merge_stderr,
        limits,
        leftovers,
        trace,
        trace_ignored,
        attention,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::DEFAULT_GRACE;

    fn session() -> SessionRef {
        SessionRef {
            id: "s".into(),
            command: "01-a".into(),
            state_dir: None,
        }
    }

    fn request(options: LaunchOptions) -> LaunchRequest {
        let command = CommandSpec::Argv(vec!["true".into()]);
        launch_request(
            "a".into(),
            command,
            Path::new("/s/01-a"),
            session(),
            Pace::EXEC,
            options,
        )
    }

    #[test]
    fn the_defaults_are_what_an_old_request_without_options_reads_as() {
        let request = request(LaunchOptions::default());
        assert_eq!(request.grace, DEFAULT_GRACE);
        assert_eq!(request.heartbeat, Some(Pace::EXEC.quiet_ping));
        assert_eq!(request.parent_pid, std::process::id() as i32);
        assert_eq!(request.session, Some(session()));
        // The same request with only what every launch says.
        let bare = serde_json::json!({
            "v": PROTOCOL_VERSION,
            "name": "a",
            "command": {"argv": ["true"]},
            "journal_dir": "/s/01-a",
            "parent_pid": request.parent_pid,
            "heartbeat_ms": Pace::EXEC.quiet_ping.as_millis() as u64,
            "session": {"id": "s", "command": "01-a"},
        });
        assert_eq!(
            serde_json::from_value::<LaunchRequest>(bare).unwrap(),
            request
        );
    }

    #[test]
    fn each_option_lands_in_the_request_once() {
        let options = LaunchOptions {
            cwd: Some("/w".into()),
            env: BTreeMap::from([("A".into(), "1".into())]),
            grace: Some(Duration::from_millis(300)),
            no_output_timeout: Some(Duration::from_secs(60)),
            drain_on: Some("done".into()),
            drain: Some(Duration::from_secs(1)),
            max_output: 1024,
            mirror: true,
            stdin: StdinSource::Inherit,
            arg0: Some("bash".into()),
            terminal: None,
            merge_stderr: true,
            limits: Limits {
                max_procs: Some(8),
                max_memory: None,
            },
            leftovers: LeftoversRule {
                keep: true,
                ..LeftoversRule::default()
            },
            trace: None,
            trace_ignored: Some("malformed".into()),
            attention: AttentionRequest::off(),
        };
        let request = request(options.clone());
        assert_eq!(request.cwd, options.cwd);
        assert_eq!(request.env, options.env);
        assert_eq!(request.grace, Duration::from_millis(300));
        assert_eq!(request.no_output_timeout, options.no_output_timeout);
        assert_eq!(request.drain_on, options.drain_on);
        assert_eq!(request.drain, options.drain);
        assert_eq!(request.max_output, 1024);
        assert!(request.mirror && request.merge_stderr);
        assert_eq!(request.stdin, StdinSource::Inherit);
        assert_eq!(request.arg0, options.arg0);
        assert_eq!(request.limits, options.limits);
        assert_eq!(request.leftovers, options.leftovers);
        assert_eq!(request.trace_ignored, options.trace_ignored);
        assert_eq!(request.attention, AttentionRequest::off());
    }
}
