//! An event in a few words, as the timeline shows it and the exports write it: one wording
//! for the TUI, the text report and the trace exports, with no terminal library involved
//! (the UI turns the [`Tone`] into a colour).

use tether_protocol::protocol::{
    AttentionKind, Budget, EventKind, ExitStatus, Origin, Peer, Stream,
};
use tether_protocol::units::{duration, duration_ms};

use super::CommandState;
use super::command::exit_label;
use super::output::one_line;

/// What kind of news an event is: the UI colours by it, the exports mark errors by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tone {
    /// Bookkeeping: the broker started, sizes, totals.
    Quiet,
    /// The command started.
    Started,
    /// Ended well (exit 0).
    Success,
    /// Worth a look: a timeout, a cap, a refused connection.
    Warning,
    /// A signal sent, an escapee reaped.
    Signal,
    /// Something failed: a spawn error, a non-zero exit, a lost parent, a hard kill.
    Error,
}

/// The mark of a stream the journal did not keep whole, in every view of the output: the
/// pane, the text export, `tether grep`, the MCP tool.
pub fn truncated_words(stream: Stream, kept: u64, dropped: u64) -> String {
    use tether_protocol::units::format_size;
    format!(
        "{}: the journal kept the first {} of {}; the last {} were not journaled",
        stream.name(),
        format_size(kept),
        format_size(kept + dropped),
        format_size(dropped)
    )
}

/// How the list, the timeline and a notification name a kind of attention.
pub fn attention_words(kind: AttentionKind) -> &'static str {
    match kind {
        AttentionKind::NeedsInput => "needs input",
        AttentionKind::Quiet => "quiet",
        AttentionKind::Runaway => "runaway",
        AttentionKind::Failed => "failed",
        AttentionKind::Finished => "finished",
    }
}

/// How every view names one attention mark, as its detail begins where the broker's
/// detector words it more closely: an agent's `needs_input` is `waiting for you`, a
/// `failed` that a budget's stop was is `over budget` (the words every view has for that
/// end). The journal's kind stays `needs_input` or `failed` for every reader.
pub fn mark_words(kind: AttentionKind, detail: &str) -> &'static str {
    use tether_core::attention::detector::WAITING_FOR_YOU;
    use tether_protocol::protocol::OVER_BUDGET;
    match kind {
        AttentionKind::NeedsInput if detail.starts_with(WAITING_FOR_YOU) => WAITING_FOR_YOU,
        AttentionKind::Failed if detail.starts_with(OVER_BUDGET) => OVER_BUDGET,
        kind => attention_words(kind),
    }
}

/// A mark in a line, its words then what was seen, without saying its words twice:
/// `failed: exit 3 after 2.0s`, `over budget (max_cpu) after 504ms`.
fn mark_line(kind: AttentionKind, detail: &str) -> String {
    let detail = one_line(detail);
    match mark_words(kind, &detail) {
        words if detail.starts_with(words) => detail,
        words => format!("{words}: {detail}"),
    }
}

/// The details of an event, in a few words, and its tone. A reaped orphan is told better by
/// [`describe_in`], which knows the command's tree.
pub fn describe(kind: &EventKind) -> (String, Tone) {
    match kind {
        EventKind::BrokerStarted { broker_pid, .. } => {
            (format!("broker {broker_pid}"), Tone::Quiet)
        }
        EventKind::Spawned { pid, .. } => (format!("pid {pid}"), Tone::Started),
        EventKind::SpawnError { message, .. }
        | EventKind::BrokerFailure { message, .. }
        | EventKind::ControlError { message, .. } => (message.clone(), Tone::Error),
        EventKind::TerminalUnavailable { message, .. }
        | EventKind::OutputCapped { message, .. }
        | EventKind::EventsCapped { message, .. }
        | EventKind::LimitUnavailable { message, .. }
        | EventKind::ControlUnavailable { message, .. }
        | EventKind::TraceContextIgnored { reason: message } => (message.clone(), Tone::Warning),
        EventKind::Terminal { streams } => {
            let names: Vec<&str> = Stream::BOTH
                .into_iter()
                .filter(|s| streams.has(*s))
                .map(|s| s.name())
                .collect();
            let size = streams.size;
            (
                format!("{} {}×{}", names.join(", "), size.cols, size.rows),
                Tone::Quiet,
            )
        }
        EventKind::StreamsMerged {} => (
            "stderr in stdout, in the order written: the caller gave one file for both".into(),
            Tone::Quiet,
        ),
        EventKind::Input { bytes, dropped } => match dropped {
            0 => (format!("{bytes} B typed"), Tone::Quiet),
            d => (
                format!("{bytes} B typed, {d} B not delivered"),
                Tone::Warning,
            ),
        },
        EventKind::Resize { size } => (format!("{}×{}", size.cols, size.rows), Tone::Quiet),
        EventKind::OutputTruncated {
            stream,
            kept,
            dropped,
        } => (truncated_words(*stream, *kept, *dropped), Tone::Warning),
        EventKind::OutputUndelivered { stream, bytes } => (
            format!(
                "{} of {} never reached the caller (it took no more); the journal has them",
                tether_protocol::units::format_size(*bytes),
                stream.name()
            ),
            Tone::Warning,
        ),
        EventKind::ResponseTimeout { silent_ms } | EventKind::ParentUnresponsive { silent_ms } => {
            (format!("silent {}", duration_ms(*silent_ms)), Tone::Warning)
        }
        // The line is the command's output: neutralised like every other byte of it.
        EventKind::FinalDrain { line, drain, .. } => (
            format!(
                "final line \"{}\"; {} to exit",
                one_line(line),
                duration(*drain)
            ),
            Tone::Warning,
        ),
        EventKind::Attention { attention, detail } => (
            mark_line(*attention, detail),
            match attention {
                AttentionKind::Failed => Tone::Error,
                AttentionKind::Finished => Tone::Quiet,
                _ => Tone::Warning,
            },
        ),
        EventKind::AttentionCleared { attention } => (
            format!("{} no longer", attention_words(*attention)),
            Tone::Quiet,
        ),
        EventKind::NotifyFailed { message } => (
            format!("notify command failed: {}", one_line(message)),
            Tone::Warning,
        ),
        EventKind::SignalSent {
            signal,
            origin,
            targets,
            client,
            ..
        } => (
            format!(
                "SIG{signal} by {} → {}",
                signal_origin(*origin, client.as_ref()),
                processes(targets.len())
            ),
            Tone::Signal,
        ),
        EventKind::StopStarted { origin, grace } => (
            format!(
                "by {}, grace {}",
                signal_origin(*origin, None),
                duration(*grace)
            ),
            Tone::Signal,
        ),
        EventKind::HardKill { after_ms } => {
            (format!("after {}", duration_ms(*after_ms)), Tone::Error)
        }
        EventKind::Ready {
            probe,
            detail,
            after_ms,
        } => (
            format!(
                "{probe}: {} after {}",
                one_line(detail),
                duration_ms(*after_ms)
            ),
            Tone::Success,
        ),
        EventKind::NotReady {
            probe,
            detail,
            after_ms,
        } => (
            format!(
                "{probe} gave up after {}: {}",
                duration_ms(*after_ms),
                one_line(detail)
            ),
            Tone::Warning,
        ),
        EventKind::BudgetExceeded {
            budget,
            limit,
            used,
        } => {
            let amount = |n: u64| match budget {
                Budget::Output => format!("{n} bytes"),
                Budget::Time | Budget::Cpu => duration_ms(n),
            };
            (
                format!(
                    "{} {} reached ({} used)",
                    budget.key(),
                    amount(*limit),
                    amount(*used)
                ),
                Tone::Error,
            )
        }
        EventKind::OrphanReaped { pid, status, .. } => {
            (format!("pid {pid} {}", exit_label(*status)), Tone::Signal)
        }
        EventKind::ParentLost { cause } => (snake(cause), Tone::Error),
        EventKind::Containment { mode, path, reason } => (
            // After the kind's own name: `containment cgroup PATH`, `containment procfs (WHY)`.
            tether_protocol::protocol::containment_line(*mode, path.as_deref(), reason.as_deref())
                .trim_start_matches("containment: ")
                .to_string(),
            match mode {
                tether_protocol::protocol::ContainmentMode::Cgroup => Tone::Quiet,
                tether_protocol::protocol::ContainmentMode::Procfs => Tone::Warning,
            },
        ),
        // The kind already says `exit`: `exit code 0`, `exit SIGKILL`.
        EventKind::Exit { status, .. } => (
            match status.code {
                Some(code) => format!("code {code}"),
                None => exit_label(*status),
            },
            if status.code == Some(0) {
                Tone::Success
            } else {
                Tone::Error
            },
        ),
        EventKind::LeftoversKept { pids } => (
            format!(
                "{} left running: {}",
                processes(pids.len()),
                pids.iter()
                    .map(i32::to_string)
                    .collect::<Vec<_>>()
                    .join(" ")
            ),
            Tone::Warning,
        ),
        EventKind::LeftoversStopped { reason, pid } => (
            match pid {
                Some(pid) => format!("{} (pid {pid})", reason.label()),
                None => reason.label().to_string(),
            },
            Tone::Signal,
        ),
        EventKind::Close {
            stdout_bytes,
            stderr_bytes,
        } => (
            format!("stdout {stdout_bytes} B, stderr {stderr_bytes} B"),
            Tone::Quiet,
        ),
        EventKind::ControlRefused { uid, pid, .. } => {
            (format!("uid {uid} (pid {pid}) refused"), Tone::Warning)
        }
        EventKind::ControlAck { request, .. } => (request.clone(), Tone::Quiet),
        EventKind::Output {
            stream,
            offset,
            len,
        } => (
            format!("{len} B of {} at {offset}", stream.name()),
            Tone::Quiet,
        ),
        EventKind::Tree { processes: tree } => (processes(tree.len()), Tone::Quiet),
        EventKind::Pong => (String::new(), Tone::Quiet),
    }
}

/// `1 process`, `3 processes`.
fn processes(n: usize) -> String {
    format!("{n} process{}", if n == 1 { "" } else { "es" })
}

/// [`describe`], with what only the command knows: a reaped orphan's command line, and
/// whether it had escaped; an agent's `waiting for you no longer`; at the run's `exit`, how
/// it ended in the words every view uses (`exit timed out (SIGKILL)`, `exit stopped
/// (SIGINT)`; a plain exit stays `exit code 3`).
pub fn describe_in(command: &CommandState, kind: &EventKind) -> (String, Tone) {
    match kind {
        EventKind::OrphanReaped {
            pid,
            status,
            escaped,
        } => orphan(command, *pid, *status, *escaped),
        EventKind::Exit { pid, .. } if command.pid == Some(*pid) => {
            let (words, tone) = describe(kind);
            match super::ending::Ending::of(command) {
                Some(super::ending::Ending::Exited(_)) | None => (words, tone),
                Some(ending) => {
                    let tone = match ending.count() {
                        super::ending::Count::Ok => Tone::Success,
                        super::ending::Count::Stopped => Tone::Signal,
                        _ => Tone::Error,
                    };
                    (ending.words(), tone)
                }
            }
        }
        // An agent's wait for you ends in the words it began with.
        EventKind::AttentionCleared {
            attention: AttentionKind::NeedsInput,
        } if command.is_session_owner() => (
            format!(
                "{} no longer",
                tether_core::attention::detector::WAITING_FOR_YOU
            ),
            Tone::Quiet,
        ),
        kind => describe(kind),
    }
}

/// A reaped orphan: which process (its pid and command line), and whether it had escaped
/// the command's group (what the `orphans:N` badge counts) or was only re-parented to the
/// broker when its parent ended.
fn orphan(
    command: &CommandState,
    pid: i32,
    status: ExitStatus,
    escaped: Option<bool>,
) -> (String, Tone) {
    let how = exit_label(status);
    let argv = command
        .seen_process(pid)
        .map(|p| p.argv.join(" "))
        .filter(|argv| !argv.is_empty())
        .map_or_else(String::new, |argv| format!(": {argv}"));
    if command.reaped_escapee(pid, escaped) {
        (format!("pid {pid} escaped, {how}{argv}"), Tone::Signal)
    } else {
        (format!("pid {pid} re-parented, {how}{argv}"), Tone::Quiet)
    }
}

/// Who a signal came from: `tether watch, pid 26880`, `watchdog`, `tether exec, pid 12
/// (shutdown)`; `operator` in a journal that names no client.
pub fn signal_origin(origin: Origin, client: Option<&Peer>) -> String {
    let cause = match origin {
        Origin::Operator => None,
        Origin::Watchdog => Some("watchdog"),
        Origin::ParentLost => Some("parent loss"),
        Origin::Shutdown => Some("shutdown"),
        Origin::Reclaim => Some("a later tether's reclaim"),
        Origin::FinalDrain => Some("final drain"),
        // A signal passed on names the program that sent it; a stop on a caller's behalf
        // (it killed the shim, or left `tether mcp`) names nobody.
        Origin::Caller if client.is_some() => Some("passed on from its caller"),
        Origin::Caller => Some("its caller"),
        Origin::Budget => Some("budget"),
        Origin::FileChanged => Some("a watched file changed"),
        Origin::Leftovers => Some("the leftovers rule"),
    };
    match (client, cause) {
        (Some(client), None) => one_line(&client.describe()),
        (Some(client), Some(cause)) => format!("{} ({cause})", one_line(&client.describe())),
        (None, Some(cause)) => cause.into(),
        (None, None) => "operator".into(),
    }
}

/// How an enum is written in the journal (`stdin_eof`, `parent_lost`).
pub fn snake(value: &impl serde::Serialize) -> String {
    serde_json::to_value(value)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exit_says_exit_once() {
        let (text, tone) = describe(&EventKind::Exit {
            pid: 1,
            status: ExitStatus {
                code: Some(0),
                signal: None,
                core_dumped: false,
            },
        });
        assert_eq!((text.as_str(), tone), ("code 0", Tone::Success));
        let (text, tone) = describe(&EventKind::Exit {
            pid: 1,
            status: ExitStatus {
                code: None,
                signal: Some(9),
                core_dumped: false,
            },
        });
        assert_eq!((text.as_str(), tone), ("SIGKILL", Tone::Error));
    }

    /// An agent's wait for you ends as it began (a trial read `waiting for you`, then
    /// `needs input no longer`); a command's wait for input as before.
    #[test]
    fn an_agents_wait_ends_in_its_own_words() {
        use tether_protocol::protocol::CommandSpec;
        let agent = CommandState::new(CommandState::agent_for_test("gemini"));
        let command = CommandState::new(tether_config::CommandConfig::new(
            "read",
            CommandSpec::Shell("read a".into()),
        ));
        let cleared = EventKind::AttentionCleared {
            attention: AttentionKind::NeedsInput,
        };
        assert_eq!(describe_in(&agent, &cleared).0, "waiting for you no longer");
        assert_eq!(describe_in(&command, &cleared).0, "needs input no longer");
    }

    /// A caller's stop (after it killed the shim or `tether exec` that ran the command)
    /// reads as theirs; one passed on with the program that sent it names the program.
    #[test]
    fn a_callers_stop_reads_by_its_caller() {
        let (text, _) = describe(&EventKind::StopStarted {
            origin: Origin::Caller,
            grace: std::time::Duration::from_secs(2),
        });
        assert_eq!(text, "by its caller, grace 2.0s");
        let client = Peer {
            pid: 7,
            uid: 0,
            program: Some("codex (pid 6) through its shell".into()),
        };
        assert_eq!(
            signal_origin(Origin::Caller, Some(&client)),
            "codex (pid 6) through its shell, pid 7 (passed on from its caller)"
        );
    }
}
