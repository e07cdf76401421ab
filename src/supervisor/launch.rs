//! The one launch-request builder: what every front end's request holds unless it says
//! otherwise.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use super::intervals::{Pace, grace};
use crate::journal::secure::lossy;
use crate::protocol::{
    CommandSpec, DEFAULT_MAX_OUTPUT, LaunchRequest, PROTOCOL_VERSION, SessionRef, StdinSource,
};

/// A request to run `command` as `name`, journaled in `journal_dir` of `session`, stopped
/// with the `grace` asked for (see [`grace`]), the broker told the front end's `pace`. The
/// rest is the default a caller changes with struct update syntax: the broker's working
/// directory and environment (the front end's), no watchdog, no drain, the default output
/// cap, no mirror, stdin `/dev/null`, no terminals, no limits, leftovers ended with the
/// command, no trace.
pub fn launch_request(
    name: String,
    command: CommandSpec,
    journal_dir: &Path,
    session: SessionRef,
    grace_asked: Option<Duration>,
    pace: Pace,
) -> LaunchRequest {
    LaunchRequest {
        v: PROTOCOL_VERSION,
        name,
        command,
        cwd: None,
        env: BTreeMap::new(),
        journal_dir: lossy(journal_dir),
        parent_pid: std::process::id() as i32,
        grace: grace(grace_asked),
        no_output_timeout: None,
        drain_on: None,
        drain: None,
        max_output: DEFAULT_MAX_OUTPUT,
        heartbeat: Some(pace.quiet_ping),
        mirror: false,
        stdin: StdinSource::Null,
        session: Some(session),
        arg0: None,
        terminal: None,
        merge_stderr: false,
        limits: Default::default(),
        leftovers: Default::default(),
        trace: None,
        trace_ignored: None,
        // Each front end resolves the user's and the command's thresholds (see
        // `config::attention::for_launch`); these are the defaults.
        attention: Default::default(),
    }
}
