//! `tether ps`, `tether stop`, `tether kill` and `tether signal`: the control library from
//! the command line. Exit codes: 0 done, 1 no live command matched (or one could not be
//! controlled), 2 a usage mistake (`ps` of a session that is not there among them).

use std::path::{Path, PathBuf};
use std::time::Duration;
use tether_protocol::protocol::{ProcessSignal, Request};

use serde::Serialize;
use tokio::time::{Instant, timeout_at};

use super::client::Ack;
use super::discover::{LiveCommand, journaled_commands, live_commands_noting, session_dir};
use super::fallback;
use super::report::StopReport;
use super::target::{Target, no_match, no_session, unknown_name};
use crate::supervisor::intervals::{ACK_TIMEOUT, REMOTE_STOP_WAIT};
use crate::supervisor::{Answer, BrokerConversation};
use tether_model::output::one_line;
use tether_os::journal::{sessions_dir, state_dir};
use tether_os::sampler::Sampler;
use tether_protocol::units::short_duration;

/// How long `ps` measures CPU use over.
const CPU_WINDOW: Duration = Duration::from_millis(250);

/// What to do to the targeted commands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    Stop,
    /// A signal to the whole tree (`kill` is `Signal(KILL)`).
    Signal(ProcessSignal),
}

/// The state directory and its live commands, with a line on stderr for each journal
/// skipped; `None` (said on stderr) when they cannot be listed.
fn live(state: Option<&Path>, session: Option<&str>) -> Option<(PathBuf, Vec<LiveCommand>)> {
    let listed = state_dir(state).map_err(|e| e.to_string()).and_then(|dir| {
        let listed = live_commands_noting(&dir, session).map_err(|e| e.to_string())?;
        Ok((dir, listed))
    });
    let (dir, (live, skipped)) = listed.inspect_err(|err| eprintln!("tether: {err}")).ok()?;
    for line in skipped {
        eprintln!("tether: {line}");
    }
    Some((dir, live))
}

/// One row of `tether ps`.
#[derive(Debug, Serialize)]
struct PsRow<'a> {
    session: &'a str,
    name: &'a str,
    /// Its directory in the session (`01-sleep`).
    id: String,
    broker_pid: i32,
    /// The command's own process, as it was spawned.
    pid: Option<i32>,
    /// Left running: the first process of what it left, still alive (the one to act on).
    #[serde(skip_serializing_if = "Option::is_none")]
    left_running_pid: Option<i32>,
    state: &'a str,
    runtime_ms: u64,
    cpu_percent: f32,
    rss_bytes: u64,
    /// Processes of the command's tree (the broker not counted).
    processes: usize,
    controllable: bool,
    control_socket: Option<&'a Path>,
    dir: &'a Path,
    /// `cgroup` or `procfs`: what holds the command's tree.
    containment: Option<&'static str>,
    cgroup: Option<&'a Path>,
    /// CPU time the command's cgroup accounted so far, all its processes, the ended ones
    /// included.
    cgroup_cpu_ms: Option<u64>,
    /// What it runs, as the list says it (an agent's wrapper read as the command it runs),
    /// from its `command.json`; `(set-up)` before an agent's own set-up shell.
    command: String,
}

/// `tether ps [--json] [SESSION]`.
pub fn ps(state: Option<&Path>, json: bool, session: Option<&str>) -> i32 {
    // What killed brokers left running is stopped meanwhile; ps ends once that is done, so
    // that nothing it could see as abandoned is left when it returns.
    let reclaim = crate::supervisor::abandoned::reclaim_in_background();
    let code = ps_now(state, json, session);
    if let Some(reclaim) = reclaim {
        let _ = reclaim.join();
    }
    code
}

fn ps_now(state: Option<&Path>, json: bool, session: Option<&str>) -> i32 {
    let Some((state_dir, commands)) = live(state, session) else {
        return 2;
    };
    // A session with nothing live is listed as such; one that is not there is a mistake,
    // said as `open`, `sessions`, `grep` and `export` say it.
    if let Some(session) = session
        && commands.is_empty()
        && session_dir(&state_dir, session).is_none()
    {
        eprintln!("tether: {}", no_session(session, &sessions_dir(&state_dir)));
        return 2;
    }
    let brokers: Vec<i32> = commands.iter().map(|c| c.broker.pid).collect();
    let mut sampler = Sampler::new();
    let mut snapshot = sampler.sample(&brokers);
    if !commands.is_empty() {
        // CPU use is measured between two samples: now, not averaged since the start.
        std::thread::sleep(CPU_WINDOW);
        snapshot = sampler.sample(&brokers);
    }
    let now = tether_os::clock::now_ms();
    let rows: Vec<PsRow> = commands
        .iter()
        .map(|c| {
            // The broker's own row comes first; the command's tree is the rest.
            let tree = snapshot
                .trees
                .get(&c.broker.pid)
                .map_or(&[][..], |t| t.get(1..).unwrap_or(&[]));
            let live = tree.iter().filter(|p| p.state != 'Z');
            // Once the main process exited and left others running in custody, the pid to
            // act on is theirs: the first still alive in its tree.
            let left_running_pid = (c.left_running)
                .then(|| live.clone().next().map(|p| p.pid))
                .flatten();
            PsRow {
                session: &c.id.session,
                name: &c.name,
                id: c.id.dir_name(),
                broker_pid: c.broker.pid,
                pid: c.pid,
                left_running_pid,
                state: &c.state,
                runtime_ms: now.saturating_sub(c.started_ms),
                // A fold from 0.0: a float sum of nothing is -0.0, printed `-0.0`.
                cpu_percent: tree.iter().fold(0.0, |sum, p| sum + p.cpu_percent),
                rss_bytes: tree.iter().map(|p| p.rss_bytes).sum(),
                processes: live.count(),
                controllable: c.has_socket(),
                control_socket: c.control_socket.as_deref(),
                dir: &c.dir,
                containment: c.containment.map(|m| m.label()),
                cgroup: c.cgroup.as_deref(),
                cgroup_cpu_ms: c
                    .cgroup
                    .as_deref()
                    .and_then(|p| tether_os::cgroup::CommandCgroup::open_existing(p).ok())
                    .and_then(|cg| cg.stats().cpu_usec)
                    .map(|us| us / 1000),
                command: command_text(&c.dir),
            }
        })
        .collect();
    if json {
        match serde_json::to_string(&rows) {
            Ok(text) => println!("{text}"),
            Err(err) => {
                eprintln!("tether: {err}");
                return 1;
            }
        }
        return 0;
    }
    if rows.is_empty() {
        eprintln!("tether: no live brokered commands");
        return 0;
    }
    // The ID is `SESSION/NN`, which always names one command, as `tether stop` takes it.
    let cells: Vec<super::ps_table::PsCells> = rows
        .iter()
        .zip(&commands)
        .map(|(r, c)| {
            [
                c.id.target(),
                r.name.to_string(),
                r.broker_pid.to_string(),
                (r.left_running_pid.or(r.pid)).map_or_else(|| "-".into(), |p| p.to_string()),
                r.state.to_string(),
                tether_protocol::units::duration_ms(r.runtime_ms),
                format!("{:.1}", r.cpu_percent),
                tether_protocol::units::compact_bytes(r.rss_bytes),
                r.processes.to_string(),
                r.containment.unwrap_or("-").to_string(),
                if r.controllable {
                    "socket"
                } else {
                    "by pid (no socket)"
                }
                .to_string(),
                r.command.clone(),
            ]
        })
        .collect();
    let width = tether_os::sys::output_width();
    for line in super::ps_table::ps_lines(&cells, width) {
        println!("{line}");
    }
    0
}

/// What the command in `dir` runs, as the list says it; empty without a readable
/// `command.json`.
fn command_text(dir: &Path) -> String {
    tether_os::journal::reader::read_request(dir).map_or_else(String::new, |request| {
        let text = tether_config::naming::command_text(&request.command);
        if tether_config::naming::is_agent_setup(&request.command) {
            format!("(set-up) {text}")
        } else {
            text
        }
    })
}

/// `tether stop|kill|signal SIG TARGET`: acts on every command the target names, at once,
/// and prints what happened to each.
pub fn act(state: Option<&Path>, action: Action, target: Target) -> i32 {
    let Some((state_dir, all)) = live(state, None) else {
        return 2;
    };
    let chosen: Vec<LiveCommand> = match target.select(&all, &tether_os::procfs::all_processes()) {
        Ok(chosen) => chosen.into_iter().cloned().collect(),
        Err(ambiguous) => {
            eprintln!("tether: {ambiguous}");
            return 2;
        }
    };
    if chosen.is_empty() {
        eprintln!("tether: {}", unmatched(&target, &all, &state_dir));
        return 1;
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(err) => {
            eprintln!("tether: cannot start the event loop: {err}");
            return 1;
        }
    };
    let results = runtime.block_on(async {
        let tasks: Vec<_> = (chosen.iter().cloned())
            .map(|command| {
                let action = action.clone();
                tokio::spawn(async move { act_on(&command, &action).await })
            })
            .collect();
        let mut results = Vec::with_capacity(tasks.len());
        // Every task is waited for, even after one of them failed to finish (a panic):
        // returning early would drop the runtime, and with it the stops still under way.
        for task in tasks {
            results.push(
                (task.await)
                    .unwrap_or_else(|failed| Err(format!("tether failed while at it: {failed}"))),
            );
        }
        results
    });
    let mut code = 0;
    for (command, result) in chosen.iter().zip(results) {
        let label = one_line(&command.label());
        match result {
            Ok(text) => println!("{label}: {}", one_line(&text)),
            Err(err) => {
                eprintln!("tether: {label}: {}", one_line(&err));
                code = 1;
            }
        }
    }
    code
}

/// Why `target` matched no live command: what it names is not there (its session, or a
/// command of that name in it), or it has ended.
fn unmatched(target: &Target, live: &[LiveCommand], state_dir: &Path) -> String {
    let (session, name) = match target {
        Target::Command { session, name } => (session, Some(name)),
        Target::Session(session) => (session, None),
        Target::Pid(_) => return no_match(target, live, None),
    };
    let Some(dir) = session_dir(state_dir, session) else {
        return no_match(target, live, Some(&sessions_dir(state_dir)));
    };
    name.and_then(|name| unknown_name(session, name, &journaled_commands(&dir)))
        .unwrap_or_else(|| no_match(target, live, None))
}

async fn act_on(command: &LiveCommand, action: &Action) -> Result<String, String> {
    let attached = BrokerConversation::attach(command).await;
    if attached.is_err() && !command.is_alive() {
        return fallback::ended_already(command, action);
    }
    let why = match attached {
        Ok(broker) => match through_socket(broker, command, action).await {
            Ok(text) => return Ok(text),
            // A command that ended meanwhile is said to have ended, not why a late signal
            // found nothing to reach.
            Err(Attempt::Failed(_)) if !command.is_alive() => {
                return fallback::ended_already(command, action);
            }
            Err(Attempt::Failed(err)) => return Err(err),
            Err(Attempt::Unreachable(why)) => why,
        },
        // Attaching fails only before the broker heard anything: the pid may still do it.
        Err(err) => err.to_string(),
    };
    // The socket cannot carry it (none, refused, full): by the broker's pid.
    fallback::by_pid(command, action, &why).await
}

/// How a request through the socket failed.
enum Attempt {
    /// Before the broker took it: the pid may still do it.
    Unreachable(String),
    /// The broker took it, or refused it for a reason of its own.
    Failed(String),
}

/// Whether a broker's refusal means the socket could not carry the request (it was full),
/// rather than that the broker heard it and said no.
fn bypassable(code: &str) -> bool {
    code == "too_many_clients"
}

/// How a request was carried out.
enum Carried {
    /// By the broker, as its acknowledgement says.
    Acked(Ack),
    /// By the conversation's fallback, through the broker's pid, as the text says.
    ByPid(String),
}

/// What the broker's answer to a request means for the command line: carried out, refused,
/// or not carried (so to be done by the broker's pid).
fn attempt(answer: Answer) -> Result<Carried, Attempt> {
    match answer {
        Answer::Done(ack) => Ok(Carried::Acked(ack)),
        Answer::Refused { code, message } => Err(if bypassable(&code) {
            Attempt::Unreachable(format!(
                "its control socket failed: the broker refused: {message}"
            ))
        } else {
            Attempt::Failed(format!("the broker refused: {message}"))
        }),
        Answer::SignalledDirectly(told) => Ok(Carried::ByPid(told)),
        Answer::NotSignalled(err) => Err(Attempt::Failed(err)),
        Answer::Unanswered => Err(Attempt::Unreachable(format!(
            "the broker did not answer within {ACK_TIMEOUT:?}"
        ))),
        Answer::Closed => Err(Attempt::Unreachable(
            "its control socket failed: the broker closed the connection".into(),
        )),
    }
}

async fn through_socket(
    mut broker: BrokerConversation,
    command: &LiveCommand,
    action: &Action,
) -> Result<String, Attempt> {
    let name = match action {
        Action::Stop => return stop_through(broker, command).await,
        Action::Signal(name) => name,
    };
    let request = Request::group_signal(*name);
    let targets = match attempt(broker.answer(&request).await)? {
        Carried::Acked(ack) => ack.targets,
        Carried::ByPid(told) => return Ok(told),
    };
    Ok(match targets.len() {
        0 => format!("SIG{name} reached no process"),
        n => format!(
            "SIG{name} sent to {n} process{} ({})",
            if n == 1 { "" } else { "es" },
            targets
                .iter()
                .map(i32::to_string)
                .collect::<Vec<_>>()
                .join(" ")
        ),
    })
}

/// Subscribes, asks for the stop, and follows the events until the broker says `close`.
/// Failing before the broker took the stop, it is [`Attempt::Unreachable`].
async fn stop_through(
    mut broker: BrokerConversation,
    command: &LiveCommand,
) -> Result<String, Attempt> {
    let started = Instant::now();
    let deadline = started + command.grace + REMOTE_STOP_WAIT;
    broker.subscribe();
    let answered = match attempt(broker.answer(&Request::Stop { origin: None }).await)? {
        Carried::Acked(ack) => ack.message,
        Carried::ByPid(told) => return Ok(told),
    };
    let mut report = StopReport::default();
    loop {
        match timeout_at(deadline, broker.next_line()).await {
            Err(_) => {
                return Err(Attempt::Failed(format!(
                    "the stop had not finished after {}: {} so far",
                    short_duration(started.elapsed().as_millis() as u64),
                    report.describe()
                )));
            }
            Ok(None) => break,
            Ok(Some(line)) => {
                let Ok(event) = line.event else { continue };
                report.apply(&event);
                if report.closed {
                    break;
                }
            }
        }
    }
    let mut text = format!("stopped: {}", report.describe());
    if let Some(already) = answered {
        text = format!("{already}; {text}");
    }
    text.push_str(&format!(
        "; nothing is left ({})",
        short_duration(started.elapsed().as_millis() as u64)
    ));
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_broker_that_heard_and_said_no_is_not_bypassed() {
        assert!(bypassable("too_many_clients"));
        assert!(!bypassable("not_in_tree"));
        assert!(!bypassable("malformed"));
        let refused = |code: &str| Answer::Refused {
            code: code.into(),
            message: "no".into(),
        };
        assert!(matches!(
            attempt(refused("too_many_clients")),
            Err(Attempt::Unreachable(_))
        ));
        assert!(matches!(
            attempt(refused("malformed")),
            Err(Attempt::Failed(why)) if why == "the broker refused: no"
        ));
        assert!(matches!(
            attempt(Answer::Closed),
            Err(Attempt::Unreachable(_))
        ));
        assert!(matches!(
            attempt(Answer::Unanswered),
            Err(Attempt::Unreachable(_))
        ));
    }
}
