//! The `run` tool: a shell command under a broker, waited for a bounded time.

use std::collections::BTreeMap;
use std::time::Duration;

use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::{Peer, RoleServer};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::budget::{
    COMMAND_CAP, ERROR_CAP, NAME_CAP, PATH_CAP, PIDS_SHOWN, REPLY_BUDGET, capped, reply_size,
    text_cost,
};
use super::commands::{Commands, Tracked};
use super::fit::{end_within, share};
use super::text::{not_journaled, stored_len, tail};
use super::{ToolError, parse_duration};
use crate::config::naming::derive_name;
use crate::journal::CommandId;
use crate::protocol::{CommandSpec, LaunchRequest, Stream};
use crate::supervisor::intervals::Pace;
use crate::supervisor::launch_request;

pub const DEFAULT_WAIT_MS: u64 = 10_000;
pub const MAX_WAIT_MS: u64 = 60_000;
/// The most of each stream's end a result carries.
const TAIL_BYTES: usize = 4096;
/// How often a waiting call tells a client that asked for progress.
const PROGRESS_EVERY: Duration = Duration::from_secs(1);

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunParams {
    /// The command line, run by `/bin/sh -c`.
    pub command: String,
    /// Working directory (default: the server's).
    #[serde(default)]
    pub cwd: Option<String>,
    /// Variables set on top of the server's environment.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// A short name for lists and `tether watch` (default: derived from the command).
    #[serde(default)]
    pub name: Option<String>,
    /// How long to wait for the command to end, in milliseconds (default 10000, at most
    /// 60000). A command still running then is left running: poll it with `output`/`list`.
    #[serde(default)]
    pub wait_ms: Option<u64>,
    /// Stop the command when it prints nothing for this long (`30s`, `5m`; at least 1ms;
    /// leave it out for no limit).
    #[serde(default)]
    pub no_output_timeout: Option<String>,
    /// A regex over stdout lines marking the command's final output: once a line matches,
    /// the command gets the `drain` period to exit, then it is stopped and counts as done.
    #[serde(default)]
    pub drain_on: Option<String>,
    /// The drain period after `drain_on` matched (`5s`; default the broker's).
    #[serde(default)]
    pub drain: Option<String>,
}

/// Where a command stands, as `run`, `signal` and `list` report it.
#[derive(Debug, Serialize, JsonSchema)]
pub struct CommandStatus {
    /// The id to pass to `output` and `signal`.
    pub id: String,
    /// Past 128 bytes cut, marked `…[N more bytes]`.
    pub name: String,
    /// `starting`, `running`, `exited` (main process gone, leftovers being handled),
    /// `finished` or `failed`.
    pub state: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The signal that ended it (`TERM`, `KILL`, ...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<String>,
    pub duration_ms: u64,
    pub stdout_bytes: u64,
    pub stderr_bytes: u64,
    /// Why it could not run, or what tether had to do itself (past 512 bytes cut).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The journal directory: `command.json`, `events.jsonl`, `stdout.log`, `stderr.log`.
    pub journal: String,
    /// Processes it left running (a server started with `&`), kept until this MCP server
    /// exits or `signal` stops them: the first 64 pids.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub left_running: Vec<i32>,
    /// How many more processes it left running than `left_running` lists.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub left_running_more: Option<usize>,
}

impl CommandStatus {
    pub fn of(tracked: &Tracked) -> CommandStatus {
        let signal = tracked
            .exit
            .and_then(|e| e.signal)
            .and_then(crate::protocol::ProcessSignal::from_number)
            .map(|s| s.name().to_string());
        let error = tracked
            .failure
            .clone()
            .or_else(|| tracked.notes.last().cloned());
        let pids = &tracked.left_running;
        CommandStatus {
            id: tracked.id.dir_name(),
            name: capped(&tracked.name, NAME_CAP),
            state: tracked.state().to_string(),
            exit_code: tracked.exit.and_then(|e| e.code),
            signal,
            duration_ms: tracked.runtime_ms(),
            stdout_bytes: stored_len(&tracked.journal, Stream::Stdout),
            stderr_bytes: stored_len(&tracked.journal, Stream::Stderr),
            error: error.map(|e| capped(&e, ERROR_CAP)),
            journal: capped(&tracked.journal.display().to_string(), PATH_CAP),
            left_running: pids.iter().take(PIDS_SHOWN).copied().collect(),
            left_running_more: (pids.len() > PIDS_SHOWN).then(|| pids.len() - PIDS_SHOWN),
        }
    }
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct RunResult {
    #[serde(flatten)]
    pub status: CommandStatus,
    /// The command line as given (past 1,024 bytes cut, marked `…[N more bytes]`).
    pub command: String,
    /// True when `wait_ms` passed first: the command runs on. (False once its main process
    /// exited, even with processes it started left running.)
    pub still_running: bool,
    /// The last lines of stdout (from at most its last 4 KiB, escape sequences removed;
    /// fewer where the reply would pass 40,000 bytes of JSON).
    pub stdout_tail: String,
    /// Earlier stdout was left out: page it with `output`.
    pub stdout_cut: bool,
    pub stderr_tail: String,
    pub stderr_cut: bool,
    /// Present when the command printed past its journal cap: the bytes of stdout after the
    /// journaled head, never stored. The tail is then the end of the head, not of the output.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stdout_not_journaled_bytes: Option<u64>,
    /// As `stdout_not_journaled_bytes`, for stderr.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stderr_not_journaled_bytes: Option<u64>,
}

pub async fn run(
    commands: &Commands,
    params: RunParams,
    progress: Option<(Peer<RoleServer>, ProgressToken)>,
    cancelled: CancellationToken,
) -> Result<RunResult, ToolError> {
    let wait_ms = params.wait_ms.unwrap_or(DEFAULT_WAIT_MS);
    if wait_ms > MAX_WAIT_MS {
        return Err(ToolError::new(format!(
            "wait_ms {wait_ms} is over the limit of {MAX_WAIT_MS}; the command runs on after the wait, so poll it with `output` instead"
        )));
    }
    if params.command.trim().is_empty() {
        return Err(ToolError::new("command is empty"));
    }
    if let Some(pattern) = &params.drain_on {
        // The broker's own rule (bounded size), so that what is accepted here it runs.
        crate::broker::final_drain::compile(pattern)
            .map_err(|err| ToolError::new(format!("drain_on is not a usable pattern: {err}")))?;
    }
    let no_output_timeout = (params.no_output_timeout.as_deref())
        .map(|text| match parse_duration("no_output_timeout", text)? {
            // The broker counts it in whole milliseconds from the command's start: under
            // 1 ms it would stop the command before it could print anything.
            timeout if timeout.as_millis() == 0 => Err(ToolError::new(format!(
                "no_output_timeout {text} would stop the command at once: give at least 1ms, or leave it out for no limit"
            ))),
            timeout => Ok(timeout),
        })
        .transpose()?;
    let drain = params
        .drain
        .as_deref()
        .map(|t| parse_duration("drain", t))
        .transpose()?;
    if let Some(cwd) = &params.cwd
        && !std::path::Path::new(cwd).is_dir()
    {
        return Err(ToolError::new(format!("cwd {cwd} is not a directory")));
    }
    let spec = CommandSpec::Shell(params.command.clone());
    let name = params.name.clone().unwrap_or_else(|| derive_name(&spec));
    let (user, config_error) = crate::config::user::for_launch();
    let attention = crate::config::attention::with_user(&user, &Default::default());
    let (max_output, ignored) = crate::config::journal::max_output(None, &user.journal);
    if let Some(err) = config_error {
        eprintln!("tether mcp: {err}; attention uses its defaults");
    }
    // An agent's tool call, as its shell calls through the shim: the user's budgets apply.
    let (budgets, budgets_ignored) =
        crate::config::budgets::for_launch(Default::default(), &user.budgets, true);
    for message in ignored.into_iter().chain(budgets_ignored) {
        eprintln!("tether mcp: {message}");
    }
    let tracked = commands
        .launch(&name, params.command.clone(), |journal, session| {
            LaunchRequest {
                cwd: params.cwd.as_ref().map(Into::into),
                env: params.env,
                no_output_timeout,
                leftovers: commands.leftovers.clone(),
                drain_on: params.drain_on,
                drain,
                attention,
                max_output,
                budgets,
                // An agent's tool call carries no trace context of its own.
                ..launch_request(name.clone(), spec, &journal, session, Pace::FLEET)
            }
        })
        .map_err(ToolError::new)?;
    let id = tracked.id;
    let wait = Duration::from_millis(wait_ms);
    let waited = wait_reporting(commands, &id, wait, progress, &cancelled).await;
    let dir_name = id.dir_name();
    if !waited {
        return Err(ToolError::new(format!(
            "cancelled; command {dir_name} was left as it is"
        )));
    }
    let tracked = commands
        .get(&id)
        .ok_or_else(|| ToolError::new(format!("command {dir_name} vanished")))?;
    Ok(result_of(&tracked))
}

/// The result for `tracked`: its command line capped, and as much of each stream's end,
/// from a line's start, as keeps the reply within [`REPLY_BUDGET`].
pub fn result_of(tracked: &Tracked) -> RunResult {
    let streams = [Stream::Stdout, Stream::Stderr];
    let [(stdout, stdout_cut), (stderr, stderr_cut)] =
        streams.map(|s| tail(&tracked.journal, s, TAIL_BYTES));
    let [stdout_not_journaled_bytes, stderr_not_journaled_bytes] =
        streams.map(|s| not_journaled(&tracked.journal, s));
    // Weighed without the tails, `false` being longer than `true`: they share the rest.
    let mut result = RunResult {
        status: CommandStatus::of(tracked),
        command: capped(&tracked.command, COMMAND_CAP),
        still_running: !tracked.is_settled(),
        stdout_tail: String::new(),
        stdout_cut: false,
        stderr_tail: String::new(),
        stderr_cut: false,
        stdout_not_journaled_bytes,
        stderr_not_journaled_bytes,
    };
    let room = REPLY_BUDGET.saturating_sub(reply_size(&result));
    let [stdout_room, stderr_room] = share(room, [text_cost(&stdout), text_cost(&stderr)]);
    let (kept, cut) = end_within(&stdout, stdout_room);
    (result.stdout_tail, result.stdout_cut) = (kept.to_string(), stdout_cut || cut);
    let (kept, cut) = end_within(&stderr, stderr_room);
    (result.stderr_tail, result.stderr_cut) = (kept.to_string(), stderr_cut || cut);
    result
}

/// Waits for command `id` to settle, at most `wait`, telling the client how it goes once a
/// second where it asked. False if the call was cancelled.
async fn wait_reporting(
    commands: &Commands,
    id: &CommandId,
    wait: Duration,
    progress: Option<(Peer<RoleServer>, ProgressToken)>,
    cancelled: &CancellationToken,
) -> bool {
    let started = Instant::now();
    let deadline = started + wait;
    // In milliseconds: the wait is the total.
    let total = wait.as_millis() as f64;
    loop {
        let step = (Instant::now() + PROGRESS_EVERY).min(deadline);
        let done = tokio::select! {
            done = commands.wait_until(step, || commands.get(id).is_none_or(|t| t.is_settled())) => done,
            _ = cancelled.cancelled() => return false,
        };
        if done || Instant::now() >= deadline {
            return true;
        }
        if let Some((peer, token)) = &progress
            && let Some(tracked) = commands.get(id)
        {
            let elapsed = started.elapsed().as_millis() as f64;
            let message = format!(
                "{} {}: {} bytes of output so far",
                tracked.id.dir_name(),
                tracked.state(),
                stored_len(&tracked.journal, Stream::Stdout)
                    + stored_len(&tracked.journal, Stream::Stderr)
            );
            let _ = peer
                .notify_progress(
                    ProgressNotificationParam::new(token.clone(), elapsed)
                        .with_total(total)
                        .with_message(message),
                )
                .await;
        }
    }
}
