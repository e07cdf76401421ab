//! What the operator is told of a real agent run: the real Claude Code (pinned, offline
//! against the scripted Anthropic server, as in `tests/real_agents.rs`) under `tether agent`
//! runs a grep that finds nothing, a server in the background and a CPU runaway. The
//! runaway is flagged on its own row and is the one notification; the agent's own row is
//! never flagged (its commands' CPU is theirs, not the agent's); the grep, a quick failure of
//! the agent's, is counted but not told; every row reads as the command the model asked for.
//!
//! Needs `npm` and the npm registry (the first run installs Claude Code into
//! `target/test-agents/`), and `python3`: without them this test fails, it does not skip.

use crate::common;

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::agents::model_server::{ModelServer, Step};
use common::agents::offline::{AgentInvocation, Interaction};
use common::agents::running::RunningAgent;
use common::agents::{Agent, free_port};
use common::journal::{command_dirs, events_now, load_complete};
use common::procs::is_gone;
use common::{DEADLINE, TestEnv, run_to_end, wait_until, wait_until_within};
use serde_json::Value;
use tether::config::naming::command_text;
use tether::protocol::{AttentionKind, EventKind};

const SESSION: &str = "attention";
/// The runaway rule of this test's config: seconds, not the default minute.
const RUNAWAY_AFTER: Duration = Duration::from_secs(15);

fn session_commands(env: &TestEnv) -> Vec<PathBuf> {
    command_dirs(&env.state_dir())
        .into_iter()
        .filter(|dir| dir.parent().and_then(Path::file_name) == Some(SESSION.as_ref()))
        .collect()
}

/// The attention a command's journal has told so far.
fn attention(dir: &Path) -> Vec<AttentionKind> {
    events_now(dir)
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::Attention { attention, .. } => Some(attention),
            _ => None,
        })
        .collect()
}

/// The session's command whose command line mentions `needle`.
fn command_with(env: &TestEnv, needle: &str) -> PathBuf {
    let mut found = None;
    wait_until(env, &format!("a command with `{needle}`"), || {
        found = session_commands(env).into_iter().find(|dir| {
            fs::read_to_string(dir.join("command.json")).is_ok_and(|t| t.contains(needle))
        });
        found.is_some()
    });
    found.unwrap_or_default()
}

#[test]
fn claude_codes_runaway_is_the_one_thing_told_and_the_agent_is_never_flagged() {
    let env = TestEnv::new("real_claude_attention");
    let agent = Agent::Claude;
    let exe = agent.install();
    let dir = env.path("run");
    let work = dir.join("work");
    fs::create_dir_all(&work).unwrap();
    let notified = env.path("notified.jsonl");
    let config = env.path("config").join("tether");
    fs::create_dir_all(&config).unwrap();
    // A runaway within seconds, not a minute; the agent's own end (it runs longer than the
    // default `finished_after`) is not what this test is about. Not within 2 s: Claude Code
    // starting on a loaded machine wants a core for that long itself (its CPU and its wait
    // for one), and that would be the agent's own runaway, rightly flagged.
    fs::write(
        config.join("config.toml"),
        format!(
            "[attention]\nrunaway_after = \"{}s\"\nfinished_after = \"10m\"\n\
             [notify]\ncommand = [\"sh\", \"-c\", \"cat >> '{}'\"]\n",
            RUNAWAY_AFTER.as_secs(),
            notified.display()
        ),
    )
    .unwrap();

    let port = free_port();
    let asked = [
        "grep -r no_such_pattern_xyz .".to_string(),
        format!(
            "python3 -m http.server {port} --bind 127.0.0.1 > server.log 2>&1 & echo $! > server.pid"
        ),
        // On the cores' idle time only (SCHED_IDLE): it still wants a whole core, which is
        // what the rule counts (its run time and its wait for one), without taking from the
        // tests beside it the 15-20 CPU-s it burns before it is stopped.
        "echo $$ > runaway.pid; chrt --idle 0 yes > /dev/null".to_string(),
        "echo after".to_string(),
    ];
    let steps: Vec<Step> = asked
        .iter()
        .enumerate()
        .map(|(i, command)| {
            let step = Step::new(command, &format!("step {i}"));
            if command.contains("yes") {
                step.timeout_ms(120_000)
            } else {
                step
            }
        })
        .collect();
    let server = ModelServer::start(&env, agent, &dir, &steps, "All done.");
    let invocation = AgentInvocation::prepare(
        agent,
        exe,
        &dir,
        &work,
        server.port,
        "Run the commands you are given.",
        Interaction::Print,
    );
    let mut running =
        RunningAgent::under_tether(&env, &invocation, SESSION, &dir, "Claude Code (attention)");

    let runaway = running.pid_written(&env, &work.join("runaway.pid"));
    let yes = command_with(&env, "runaway.pid");
    // 15 s of wanting a core (its run time and its wait for one: `schedstat`), then a sample
    // that sees it; on a machine busy with other tests the samples come later.
    wait_until_within(
        &env,
        RUNAWAY_AFTER + DEADLINE * 2,
        "the runaway flagged",
        || attention(&yes).contains(&AttentionKind::Runaway),
    );
    let agent_row = &session_commands(&env)[0];
    // The agent's row while its runaway burns a core: nothing.
    assert_eq!(
        attention(agent_row),
        [],
        "the agent's own row was flagged while its command ran away"
    );
    let number = yes.file_name().unwrap().to_string_lossy()[..2].to_string();
    let target = format!("{SESSION}/{number}");
    let out = run_to_end(&env, env.tether(&["stop", &target]), "tether stop");
    assert!(
        out.status.success(),
        "tether stop {target}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let end = running.wait(&env, "Claude Code");
    assert!(is_gone(runaway));
    assert!(
        server.answered_final(),
        "the agent ended ({end}) before the final answer"
    );

    let commands = session_commands(&env);
    let mut failures = Vec::new();
    if !attention(&commands[0]).is_empty() {
        failures.push(format!(
            "the agent's row was flagged: {:?}",
            attention(&commands[0])
        ));
    }
    // Every asked command is a row that reads as it; the agent's own set-up shells are the
    // rest.
    let texts: Vec<String> = commands[1..]
        .iter()
        .map(|dir| command_text(&load_complete(dir).request.expect("command.json").command))
        .collect();
    for command in &asked {
        if !texts.contains(command) {
            failures.push(format!("no row reads `{command}`: {texts:#?}"));
        }
    }
    // One notification: the runaway. The grep's exit 1 is the agent's quick failure, the
    // stop was the operator's own, and the server was stopped with the session.
    let notes: Vec<Value> = fs::read_to_string(&notified)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect();
    let told: Vec<(String, String)> = notes
        .iter()
        .map(|n| {
            let field = |k: &str| n[k].as_str().unwrap_or_default().to_string();
            (field("kind"), field("text"))
        })
        .collect();
    if told != [("runaway".to_string(), asked[2].clone())] {
        failures.push(format!("told: {told:#?}"));
    }
    let grep = command_with(&env, "no_such_pattern_xyz");
    let grep_exit = load_complete(&grep).result.and_then(|r| r.exit);
    if grep_exit.and_then(|e| e.code) != Some(1) {
        failures.push(format!("the grep ended {grep_exit:?}, not with exit 1"));
    }
    if !failures.is_empty() {
        failures.push(what_happened(&env, &server, &dir));
    }
    drop(server);
    env.finish();
    assert!(failures.is_empty(), "- {}", failures.join("\n- "));
}

/// For a failure: what Claude Code sent back to the model for each tool call, every row of
/// the state directory (in any session) with its text and end, tether's own notices and
/// the agent's stderr. Claude Code 2.1.197 reads a shell that died by SIGTERM as `Exit code
/// 144`, and one it could not start, or that died by any other signal, as `Exit code 1`
/// with no output.
fn what_happened(env: &TestEnv, server: &ModelServer, dir: &Path) -> String {
    let mut text = String::from("what happened:\n  tool results sent back:\n");
    for (i, result) in server.tool_results().iter().enumerate() {
        text += &format!(
            "    {i}: error {:?}: {:?}\n",
            result.error,
            result.output.chars().take(400).collect::<String>()
        );
    }
    text += "  rows:\n";
    for row in command_dirs(&env.state_dir()) {
        let record = tether::journal::CommandRecord::load(&row);
        let command = record.request.map(|r| command_text(&r.command));
        let end = record.result.map(|r| (r.exit, r.failure));
        text += &format!("    {}: {command:?} ended {end:?}\n", row.display());
    }
    let notices = env.state_dir().join(tether::exec::NOTICES_FILE);
    for (what, path) in [
        ("notices", notices),
        ("agent stderr", dir.join("agent.stderr")),
    ] {
        let read = fs::read_to_string(&path).unwrap_or_else(|err| format!("({err})"));
        text += &format!("  {what} ({}):\n{read}\n", path.display());
    }
    text
}
