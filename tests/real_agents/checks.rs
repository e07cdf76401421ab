//! What a run with tether must show against the bare run, and the report of both.

use std::fs;
use std::time::{Duration, Instant};

use tether::journal::CommandRecord;
use tether::protocol::LeftoversEnd;

use super::{Ends, REQUEST_STEP, Run, ScriptStep, script, session_commands, session_of};
use crate::common::agents::Agent;
use crate::common::agents::mask::same_but_where_the_tail_was_cut;
use crate::common::agents::offline::Interaction;
use crate::common::journal::leftovers_stopped;
use crate::common::procs::is_gone;
use crate::common::{DEADLINE, TestEnv, wait_until};

/// Compares the two runs' tool results step by step; returns a line per difference.
pub fn compare(steps: &[ScriptStep], bare: &Run, other: &Run, skip: Option<usize>) -> Vec<String> {
    let mut failures = Vec::new();
    if bare.results.len() != steps.len() || other.results.len() != steps.len() {
        failures.push(format!(
            "tool results: {} bare, {} {}, for {} steps",
            bare.results.len(),
            other.results.len(),
            other.label,
            steps.len()
        ));
    }
    for (i, (a, b)) in bare.results.iter().zip(&other.results).enumerate() {
        if skip == Some(i) {
            continue;
        }
        let (masked_a, masked_b) = (bare.mask(&a.output), other.mask(&b.output));
        // Gemini CLI in a terminal now and then reads nothing of a command that printed and
        // exited at once (`echo hello`), bare too: such a step says nothing of tether.
        let lost = |text: &str| text.contains("Output: (empty)");
        if other.interaction == Interaction::Terminal
            && steps[i].prints
            && lost(&masked_a) != lost(&masked_b)
        {
            eprintln!(
                "step {i} ({}) not compared: the agent read no output in one run: bare {:?}, {} {:?}",
                steps[i].step.description,
                clip(&masked_a),
                other.label,
                clip(&masked_b)
            );
            continue;
        }
        let same = masked_a == masked_b || same_but_where_the_tail_was_cut(&masked_a, &masked_b);
        if !same || a.error != b.error {
            failures.push(format!(
                "step {i} ({}): bare sent {:?} (error {:?}), {} sent {:?} (error {:?}){}",
                steps[i].step.description,
                clip(&masked_a),
                a.error,
                other.label,
                clip(&masked_b),
                b.error,
                first_difference(&masked_a, &masked_b)
            ));
        }
    }
    failures
}

/// Where two texts first differ, by line, when that is past what [`clip`] shows.
fn first_difference(a: &str, b: &str) -> String {
    let (mut lines_a, mut lines_b) = (a.lines(), b.lines());
    for n in 1.. {
        let (line_a, line_b) = (lines_a.next(), lines_b.next());
        if line_a != line_b {
            return if a.len().min(b.len()) > CLIP {
                format!("; first differing line {n}: {line_a:?} against {line_b:?}")
            } else {
                String::new()
            };
        }
        if line_a.is_none() {
            break;
        }
    }
    String::new()
}

/// How much of a text a failure message shows.
const CLIP: usize = 600;

pub fn clip(text: &str) -> String {
    if text.len() <= CLIP {
        return text.to_string();
    }
    let mut end = CLIP;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…[{} more bytes]", &text[..end], text.len() - end)
}

/// Undoes the quoting an agent's wrapper puts around a command (Claude Code's `eval '…'`).
pub fn unquote(text: &str) -> String {
    text.replace("'\\''", "'").replace("'\"'\"'", "'")
}

/// The journal checks of a run with tether: every tool call is one journaled command of
/// the session, with its text and its exit status; any other command holds one of the texts
/// in `own` (what the agent runs through its shell for itself). Returns a line per failure.
pub fn check_journal(env: &TestEnv, run: &Run, own: &[&str]) -> Vec<String> {
    let steps = script(run.agent, run.ports, run.interaction);
    let mut failures = Vec::new();
    let text_of = |record: &CommandRecord| {
        record
            .request
            .as_ref()
            .map(|r| unquote(&r.command.argv().join(" ")))
            .unwrap_or_default()
    };
    let load = || -> Vec<CommandRecord> {
        session_commands(env, &session_of(env))
            .iter()
            .map(|dir| CommandRecord::load(dir))
            .collect()
    };
    // A broker writes `result.json` as it closes: after the agent read the command's end,
    // once the journal has all the output and what the command left has ended. The agent
    // may be gone before that on a loaded machine, so each step's result is waited for; a
    // step whose result never comes is reported below as not ended.
    let mut records = load();
    let deadline = Instant::now() + DEADLINE;
    while Instant::now() < deadline
        && steps.iter().any(|step| {
            records.iter().any(|r| {
                r.result.is_none() && !is_agent(r) && text_of(r).contains(&step.step.command)
            })
        })
    {
        std::thread::sleep(Duration::from_millis(100));
        records = load();
    }
    for (i, step) in steps.iter().enumerate() {
        let matching: Vec<&CommandRecord> = records
            .iter()
            .filter(|r| text_of(r).contains(&step.step.command))
            .filter(|r| !is_agent(r))
            .collect();
        let [record] = matching.as_slice() else {
            failures.push(format!(
                "step {i} ({}): {} journaled commands hold its text, not one: {:?}",
                step.step.description,
                matching.len(),
                matching.iter().map(|r| &r.id).collect::<Vec<_>>()
            ));
            continue;
        };
        let exit = record.result.as_ref().and_then(|r| r.exit);
        let ended = exit.and_then(|e| match (e.code, e.signal) {
            (_, Some(signal)) => Some(Ends::Signal(signal)),
            (Some(code), None) => Some(Ends::Code(code)),
            _ => None,
        });
        if ended != Some(step.ends) {
            // What the journal says of its end, to tell a broker still at work from one
            // that lost the command.
            let last: Vec<&str> = record
                .events
                .iter()
                .rev()
                .take(6)
                .map(|e| e.kind.name())
                .collect();
            failures.push(format!(
                "step {i} ({}): journaled {} ended {ended:?}, bash ends it {:?}; result.json {}, last events (newest first) {last:?}",
                step.step.description,
                record.id,
                step.ends,
                match &record.result {
                    Some(result) => format!("{:?} stopped_by {:?}", result.exit, result.stopped_by),
                    None => "absent".into(),
                }
            ));
        }
        if let Some(expected) = &step.journals {
            // In a terminal the line discipline wrote each `\n` as `\r\n`.
            let journaled = fs::read(record.dir.join("stdout.log")).unwrap_or_default();
            let journaled = String::from_utf8_lossy(&journaled).replace("\r\n", "\n");
            if journaled != *expected {
                let first = (journaled.bytes().zip(expected.bytes()))
                    .position(|(a, b)| a != b)
                    .unwrap_or(journaled.len().min(expected.len()));
                failures.push(format!(
                    "step {i} ({}): journaled {}'s stdout is not what the command wrote from byte {first} on ({} bytes journaled, {} written)",
                    step.step.description,
                    record.id,
                    journaled.len(),
                    expected.len(),
                ));
            }
        }
    }
    for record in &records {
        let text = text_of(record);
        let is_step = steps.iter().any(|s| text.contains(&s.step.command));
        let is_own = own.iter().any(|o| text.contains(o));
        if !is_step && !is_own && !is_agent(record) {
            failures.push(format!(
                "journaled {} is no tool call and not one of the agent's own ({own:?}): {}",
                record.id,
                clip(&text)
            ));
        }
    }
    failures
}

/// The agent's own command, under `tether agent`.
pub fn is_agent(record: &CommandRecord) -> bool {
    record
        .request
        .as_ref()
        .is_some_and(|r| r.command.argv().iter().any(|a| a == "session-owner"))
}

/// The checks of a run with tether beyond the journal: the background server answered the
/// later request and is gone now that the agent has exited.
pub fn check_server(env: &TestEnv, run: &Run, keeps_background: bool) -> Vec<String> {
    let mut failures = Vec::new();
    let answer = run.results.get(REQUEST_STEP).map(|r| r.output.as_str());
    let expected = if keeps_background { "200" } else { "no answer" };
    // The line the command printed, in whatever the agent wraps it (`Output: 200`).
    let answered = answer.is_some_and(|text| {
        text.lines()
            .any(|line| line.trim_start_matches("Output: ").trim() == expected)
    });
    if !answered {
        failures.push(format!(
            "the request to the background server ({}) read {answer:?}, not {expected}",
            run.label
        ));
    }
    match run.server_pid {
        Some(pid) => {
            wait_until(env, "the background server to be gone", || is_gone(pid));
        }
        None => failures.push(format!("{}: no server.pid was written", run.label)),
    }
    if run.agent == Agent::Claude {
        let answer = run.results.last().map(|r| r.output.trim());
        if answer != Some("200") {
            failures.push(format!(
                "the run_in_background server ({}) answered {answer:?}, not 200",
                run.label
            ));
        }
        match fs::read_to_string(run.dir.join("work/background.pid")) {
            Ok(pid) => {
                let pid: i32 = pid.trim().parse().expect("a pid");
                wait_until(env, "the run_in_background server to be gone", || {
                    is_gone(pid)
                });
            }
            Err(err) => failures.push(format!("{}: no background.pid: {err}", run.label)),
        }
    }
    failures
}

/// Ends what a bare run left running (the agent does not), by pid: the test started it.
pub fn end_leftovers(run: &Run) {
    if let Some(pid) = run.server_pid
        && !is_gone(pid)
    {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

/// Prints each run's wall time and, for the run with tether, a transcript: each tool call's
/// command and the first lines of what the agent sent back (shown with `--nocapture`, or
/// when the test fails).
pub fn report(agent: Agent, runs: &[&Run]) {
    if let Some(run) = runs.last() {
        eprintln!(
            "{} {} transcript ({}):",
            agent.name(),
            agent.version(),
            run.label
        );
        for (step, result) in script(agent, run.ports, run.interaction)
            .iter()
            .zip(&run.results)
        {
            let command = step.step.command.lines().next().unwrap_or_default();
            eprintln!("  -> {command}");
            let masked = run.mask(&result.output);
            // The agents' fixed framing says nothing here.
            let framing = [
                "Chunk ID",
                "Wall time",
                "Original token count",
                "Process Group PGID",
                "<untrusted_context>",
                "</untrusted_context>",
            ];
            let lines: Vec<&str> = masked
                .lines()
                .filter(|line| !framing.iter().any(|f| line.starts_with(f)))
                .collect();
            for line in lines.iter().take(4) {
                eprintln!("  <- {}", clip(line));
            }
            if lines.len() > 4 {
                eprintln!("  <- …[{} more lines]", lines.len() - 4);
            }
        }
    }
    for run in runs {
        eprintln!(
            "{} {} {}: {:.1} s wall, {}, background server outlived the agent: {}",
            agent.name(),
            agent.version(),
            run.label,
            run.wall.as_secs_f64(),
            run.end,
            run.server_outlived_agent
        );
        if run.end != "exit status: 0" {
            eprintln!("  its stderr: {}", clip(&run.stderr));
        }
    }
}

/// What differs between the agents, as measured.
pub struct Expect {
    /// Texts of the commands the agent runs through its shell for itself.
    pub own: &'static [&'static str],
    /// Whether a server a command starts with `&` outlives that command.
    pub keeps_background: bool,
    /// Why that server was stopped, when tether kept it.
    pub leftovers_end: Option<LeftoversEnd>,
    /// The agent ends the `&` server when its command returns, bare, by killing the process
    /// group the command had (Gemini CLI in a terminal), while under tether the server is in
    /// its broker's group and kept in custody until the agent exits: a known difference,
    /// documented in docs/agents.md, in the later request's answer alone ("no answer" bare,
    /// "200" with tether). Checked as such, so that a change either way is seen.
    pub bare_ends_what_tether_keeps: bool,
}

/// The `&` server's command was kept with its server, and its custody ended for `expected`.
pub fn check_leftovers_end(
    env: &TestEnv,
    run: &Run,
    expected: Option<LeftoversEnd>,
) -> Vec<String> {
    let Some(expected) = expected else {
        return Vec::new();
    };
    let server = format!("http.server {} ", run.ports.http);
    let record = session_commands(env, &session_of(env))
        .iter()
        .map(|dir| CommandRecord::load(dir))
        .find(|r| {
            r.request
                .as_ref()
                .is_some_and(|q| q.command.argv().join(" ").contains(&server))
        });
    let reason = record.and_then(|r| leftovers_stopped(&r.events).map(|(reason, _)| reason));
    if reason == Some(expected) {
        Vec::new()
    } else {
        vec![format!(
            "the `&` server's command: leftovers stopped for {reason:?}, not {expected:?}"
        )]
    }
}
