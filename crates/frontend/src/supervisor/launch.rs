//! The one launch-request builder: every field of a request that no front end chooses is
//! set here, and a front end gives what it chose on top, as fields of the request
//! (`LaunchRequest { grace: grace(asked), ..launch_request(..) }`).

use std::collections::BTreeMap;
use std::path::Path;

use super::intervals::{Pace, grace};
use tether_os::journal::secure::lossy;
use tether_protocol::protocol::{
    AttentionRequest, Budgets, CommandSpec, DEFAULT_MAX_OUTPUT, LaunchRequest, LeftoversRule,
    Limits, PROTOCOL_VERSION, SessionRef, StdinSource,
};

/// A request to run `command` as `name`, journaled in `journal_dir` of `session`, the broker
/// told the front end's `pace` (its heartbeat) and the front end's pid (its parent, whose
/// death stops the command). The rest is what a request holds unless its front end says
/// otherwise: the broker's working directory and environment (the front end's), the default
/// grace, no watchdog, no drain, the default output cap, no mirror, a front end that is no
/// caller's stand-in, stdin `/dev/null`, no terminals, no limits, leftovers ended with the
/// command, no trace, the default attention
/// thresholds (each front end resolves the user's and the command's: see
/// `config::attention::for_launch`). A grace a front end asks for goes through [`grace`].
pub fn launch_request(
    name: String,
    command: CommandSpec,
    journal_dir: &Path,
    session: SessionRef,
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
        caller_stand_in: false,
        grace: grace(None),
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
        limits: Limits::default(),
        leftovers: LeftoversRule::default(),
        trace: None,
        trace_ignored: None,
        attention: AttentionRequest::default(),
        ready: None,
        budgets: Budgets::default(),
        run: 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tether_protocol::protocol::DEFAULT_GRACE;

    fn session() -> SessionRef {
        SessionRef {
            command: tether_os::journal::CommandId::new("s", 1, "a"),
            state_dir: None,
        }
    }

    #[test]
    fn the_defaults_are_what_an_old_request_without_options_reads_as() {
        let command = CommandSpec::Argv(vec!["true".into()]);
        let journal_dir = Path::new("/s/01-a");
        let request = launch_request("a".into(), command, journal_dir, session(), Pace::EXEC);
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
}
