//! The real Claude Code (pinned in `tests/agents/pins`), interactive in a terminal (tmux)
//! under `tether agent`, against the scripted Anthropic server: it starts a command in the
//! background (`run_in_background`, a server's stand-in that runs to the end), runs a 10 s
//! command, then waits 8 s for the model's final answer (both with its spinner going), then
//! sits at its prompt. Its broker must flag it `waiting for you` (a `needs_input` of the
//! agent) soon after the threshold has passed since the answer, the background command
//! still running (a second in the runs measured; here held to what a loaded machine meets),
//! never before (not during the command, not while the reply is pending), and clear it when
//! the operator types. The attention events are printed with their times, from the model's
//! answers.

use crate::common;

use std::fs;
use std::path::Path;

use common::TestEnv;
use common::agents::Agent;
use common::agents::model_server::{ModelServer, Step};
use common::agents::offline::{AgentInvocation, Interaction};
use common::agents::running::RunningAgent;
use common::journal::{command_dirs, events_now};
use serde_json::Value;
use tether::protocol::{AttentionKind, Event, EventKind};

/// How late past the threshold a flag may come on a machine busy with other builds: the
/// broker's look is scheduled, and so is the agent's event loop, whose CPU after its answer
/// (Node's collector) counts as work until it stops. The threshold itself is held on a
/// simulated clock (attention::tests::agent); here only what a loaded machine meets: 7.5 s
/// was seen with two copies of the suite and a release build on two cores.
const LOADED_SLACK_MS: u64 = 15_000;

/// The threshold the test's config sets (`input_after`): short, so that the run is.
const THRESHOLD_MS: u64 = 2_000;
/// The model's final answer comes this long after it is asked for.
const REPLY_DELAY_MS: u64 = 8_000;
/// The command the model asks for in the foreground.
const COMMAND: &str = "sleep 10";
/// The one it asks for in the background first: it runs until the session ends.
const BACKGROUND: &str = "tail -f /dev/null";

/// The test's user config: `[attention] input_after = AFTER`.
fn set_input_after(env: &TestEnv, after: &str) {
    let config = env.path("config/tether");
    fs::create_dir_all(&config).expect("create the config directory");
    fs::write(
        config.join("config.toml"),
        format!("[attention]\ninput_after = \"{after}\"\n"),
    )
    .expect("write the config");
}

/// The agent's own journal (command 01 of its session), once there is one.
fn agent_journal(env: &TestEnv) -> Option<std::path::PathBuf> {
    command_dirs(&env.state_dir()).into_iter().find(|d| {
        d.file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("01-"))
    })
}

#[test]
fn claude_code_at_its_prompt_is_waiting_for_you_and_not_while_it_works() {
    let env = TestEnv::new("agent_waiting");
    let exe = Agent::Claude.install();
    set_input_after(&env, &format!("{THRESHOLD_MS}ms"));
    let dir = env.path("claude");
    let work = dir.join("work");
    fs::create_dir_all(&work).expect("create the working directory");
    let steps = [
        Step::new(BACKGROUND, "a server").in_background(),
        Step::new(COMMAND, "a ten-second command"),
    ];
    let server = ModelServer::start_slow(
        &env,
        Agent::Claude,
        &dir,
        &steps,
        "All done.",
        REPLY_DELAY_MS,
    );
    let invocation = AgentInvocation::prepare(
        Agent::Claude,
        exe,
        &dir,
        &work,
        server.port,
        "Run the commands you are given.",
        Interaction::Terminal,
    );
    let session = format!("waiting-{}", env.tag);
    let wrapper = env.tether(&["agent", "--session", &session, "--"]);
    let command = invocation.wrapped(&env, wrapper);
    let mut running = RunningAgent::in_terminal(&env, &command, &dir.join("agent.status"));

    let attention = |dir: &Path| -> Vec<Event> {
        events_now(dir)
            .into_iter()
            .filter(|e| {
                matches!(
                    e.kind,
                    EventKind::Attention { .. } | EventKind::AttentionCleared { .. }
                )
            })
            .collect()
    };
    let raised = |events: &[Event]| {
        events.iter().any(|e| {
            matches!(
                e.kind,
                EventKind::Attention {
                    attention: AttentionKind::NeedsInput,
                    ..
                }
            )
        })
    };
    running.wait_for(&env, "the model's final answer", || server.answered_final());
    running.wait_for(&env, "`waiting for you` in the agent's journal", || {
        agent_journal(&env).is_some_and(|dir| raised(&attention(&dir)))
    });
    let typed_ms = now_ms();
    running.type_text(&env, "x");
    let cleared = |events: &[Event]| {
        events.iter().any(|e| {
            e.ts_ms >= typed_ms
                && matches!(
                    e.kind,
                    EventKind::AttentionCleared {
                        attention: AttentionKind::NeedsInput
                    }
                )
        })
    };
    let dir = agent_journal(&env).expect("the agent's journal");
    running.wait_for(&env, "the flag cleared after typing", || {
        cleared(&attention(&dir))
    });
    // What was typed is taken back before `/quit`.
    running.press(&env, &["BSpace"]);
    running.quit_with(&env, "/quit");
    let end = running.wait(&env, "claude");

    let requests = server.requests();
    let step_answer = answered(&requests, |step| step == &Value::from(1));
    let final_asked = received(&requests, |step| step == "final");
    let final_answer = answered(&requests, |step| step == "final");
    let events = attention(&dir);
    let command_dir = command_dirs(&env.state_dir())
        .into_iter()
        .find(|d| {
            d.file_name()
                .is_some_and(|n| n.to_string_lossy().ends_with("-sleep"))
        })
        .expect("the command's journal");
    let command_events = events_now(&command_dir);
    let spawned = command_events
        .iter()
        .find(|e| matches!(e.kind, EventKind::Spawned { .. }))
        .map(|e| e.ts_ms);
    let exited = command_events
        .iter()
        .find(|e| matches!(e.kind, EventKind::Exit { .. }))
        .map(|e| e.ts_ms);

    // The timeline, from the model's answer with the command.
    let t0 = step_answer;
    let at = |ms: u64| format!("{:+8.2}s", (ms as f64 - t0 as f64) / 1000.0);
    let mut lines = vec![(t0, format!("model asks for `{COMMAND}`"))];
    if let (Some(s), Some(e)) = (spawned, exited) {
        lines.push((s, "command starts".into()));
        lines.push((e, "command ends".into()));
    }
    lines.push((final_asked, "final answer asked for".into()));
    lines.push((final_answer, "final answer sent".into()));
    lines.push((typed_ms, "operator types `x`".into()));
    for e in &events {
        let what = match &e.kind {
            EventKind::Attention { attention, detail } => {
                format!("{} ({detail})", attention.name())
            }
            EventKind::AttentionCleared { attention } => format!("{} cleared", attention.name()),
            _ => unreachable!(),
        };
        lines.push((e.ts_ms, format!("attention: {what}")));
    }
    // By time; at the same moment, in the order told.
    lines.sort_by_key(|(ms, _)| *ms);
    let lines: Vec<String> = lines
        .into_iter()
        .map(|(ms, what)| format!("{} {what}", at(ms)))
        .collect();
    println!(
        "Claude Code {} under tether agent, input_after {THRESHOLD_MS} ms, reply delayed {REPLY_DELAY_MS} ms ({end}):\n{}",
        Agent::Claude.version(),
        lines.join("\n")
    );

    let mut failures = Vec::new();
    let raised_at: Vec<(u64, String)> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Attention {
                attention: AttentionKind::NeedsInput,
                detail,
            } => Some((e.ts_ms, detail.clone())),
            _ => None,
        })
        .collect();
    // Nothing before the answer: not while the command ran, not while the reply was pending.
    if let Some((ts, detail)) = raised_at.iter().find(|(ts, _)| *ts < final_answer) {
        failures.push(format!(
            "flagged before the final answer, at {}: {detail}",
            at(*ts)
        ));
    }
    match raised_at.iter().find(|(ts, _)| *ts >= final_answer) {
        Some((ts, detail)) => {
            // Printed for the record (2.27–2.41 s in five runs at a 2 s threshold); held to
            // the threshold plus a second by the rule's tests on a simulated clock
            // (attention::tests::agent), and here only to what a loaded machine meets.
            let after = ts - final_answer;
            eprintln!("flagged {after} ms after the final answer");
            if after > THRESHOLD_MS + LOADED_SLACK_MS {
                failures.push(format!(
                    "flagged {after} ms after the answer, past the threshold plus {LOADED_SLACK_MS} ms"
                ));
            }
            if !detail.starts_with("waiting for you: ") || !detail.contains("on its terminal") {
                failures.push(format!("the detail says {detail:?}"));
            }
        }
        None => failures.push("never flagged after the answer".into()),
    }
    // The background command ran from before the answer to past the flag.
    let background_dir = command_dirs(&env.state_dir()).into_iter().find(|d| {
        d.file_name()
            .is_some_and(|n| n.to_string_lossy().ends_with("-tail"))
    });
    let background = background_dir
        .as_deref()
        .map(events_now)
        .unwrap_or_default();
    let background_at =
        |is: fn(&EventKind) -> bool| background.iter().find(|e| is(&e.kind)).map(|e| e.ts_ms);
    let started = background_at(|k| matches!(k, EventKind::Spawned { .. }));
    let ended = background_at(|k| matches!(k, EventKind::Exit { .. }));
    let flagged = raised_at
        .iter()
        .map(|(ts, _)| *ts)
        .find(|ts| *ts >= final_answer);
    if started.is_none_or(|s| s > final_answer) {
        failures.push(format!(
            "the background `{BACKGROUND}` did not start before the answer: {started:?}"
        ));
    }
    if let (Some(ended), Some(flagged)) = (ended, flagged)
        && ended <= flagged
    {
        failures.push(format!(
            "the background `{BACKGROUND}` ended at {} before the flag at {}",
            at(ended),
            at(flagged)
        ));
    }
    if exited.zip(spawned).is_none_or(|(e, s)| e - s < 9_500) {
        failures.push(format!(
            "the command did not run its 10 s: {spawned:?} to {exited:?}"
        ));
    }
    if final_answer - final_asked < REPLY_DELAY_MS - 500 {
        failures.push("the final answer was not delayed".into());
    }
    assert!(end.contains("exit status: 0"), "claude ended with {end}");
    drop(server);
    drop(running);
    env.finish();
    assert!(failures.is_empty(), "- {}", failures.join("\n- "));
}

/// When the server sent its answer to the first request whose step `matches`, in ms.
fn answered(requests: &[Value], matches: impl Fn(&Value) -> bool) -> u64 {
    time_of(requests, "answered", matches)
}

fn received(requests: &[Value], matches: impl Fn(&Value) -> bool) -> u64 {
    time_of(requests, "received", matches)
}

fn time_of(requests: &[Value], field: &str, matches: impl Fn(&Value) -> bool) -> u64 {
    let request = requests
        .iter()
        .find(|r| matches(&r["step"]))
        .unwrap_or_else(|| panic!("no such request in the model server's log"));
    (request[field].as_f64().expect("a time") * 1000.0) as u64
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// An agent that says nothing while its command runs (no spinner), waiting all along in
/// `select` on its terminal and the command's pipe: not flagged while the command runs (its
/// broker is still waited for by the shim), nor sooner than the threshold after its end;
/// cleared by a key.
#[test]
fn a_silent_agent_is_not_waiting_while_its_command_runs() {
    let env = TestEnv::new("agent_waiting_silent");
    set_input_after(&env, &format!("{THRESHOLD_MS}ms"));
    // Runs `sleep 8` through its shell (the shim), waits in select on its terminal and the
    // command's pipe until the command ends, then on its terminal for a line.
    let agent = r#"
import os, select, subprocess, sys
print("ready", flush=True)
p = subprocess.Popen([os.environ["SHELL"], "-c", "sleep 8"], stdin=subprocess.DEVNULL,
                     stdout=subprocess.PIPE)
while True:
    ready, _, _ = select.select([0, p.stdout], [], [])
    if p.stdout in ready and not os.read(p.stdout.fileno(), 4096):
        break
p.wait()
select.select([0], [], [])
sys.stdin.readline()
"#;
    let session = format!("silent-{}", env.tag);
    let mut command = env.tether(&["agent", "--session", &session, "--", "python3", "-c", agent]);
    command
        .env(common::TAG_VAR, &env.tag)
        .current_dir(env.dir.path());
    let mut running = RunningAgent::in_terminal(&env, &command, &env.path("agent.status"));
    let dirs = || command_dirs(&env.state_dir());
    let sleep_dir = || {
        dirs().into_iter().find(|d| {
            d.file_name()
                .is_some_and(|n| n.to_string_lossy().ends_with("-sleep"))
        })
    };
    running.wait_for(&env, "the command's end", || {
        sleep_dir().is_some_and(|d| d.join("result.json").exists())
    });
    let agent_dir = agent_journal(&env).expect("the agent's journal");
    let raised = |events: &[Event]| {
        events.iter().find_map(|e| match &e.kind {
            EventKind::Attention {
                attention: AttentionKind::NeedsInput,
                detail,
            } => Some((e.ts_ms, detail.clone())),
            _ => None,
        })
    };
    running.wait_for(&env, "`waiting for you` after the command", || {
        raised(&events_now(&agent_dir)).is_some()
    });
    let typed_ms = now_ms();
    running.type_text(&env, "x");
    running.press(&env, &["Enter"]);
    let end = running.wait(&env, "the silent agent");

    let command_events = events_now(&sleep_dir().expect("the command's journal"));
    let time_of = |kind: &str| {
        command_events
            .iter()
            .find(|e| e.kind.name() == kind)
            .map(|e| e.ts_ms)
            .unwrap_or_else(|| panic!("no {kind} in the command's journal"))
    };
    let (spawned, exited) = (time_of("spawned"), time_of("exit"));
    let agent_events = events_now(&agent_dir);
    let (flagged, detail) = raised(&agent_events).expect("flagged");
    let cleared = agent_events.iter().find_map(|e| match e.kind {
        EventKind::AttentionCleared {
            attention: AttentionKind::NeedsInput,
        } => Some(e.ts_ms),
        _ => None,
    });
    let at = |ms: u64| format!("{:+8.2}s", (ms as f64 - spawned as f64) / 1000.0);
    println!(
        "a silent agent (python3, select on its terminal), input_after {THRESHOLD_MS} ms ({end}):\n{} command `sleep 8` starts\n{} command ends\n{} attention: needs_input ({detail})\n{} operator types `x`\n{}",
        at(spawned),
        at(exited),
        at(flagged),
        at(typed_ms),
        cleared.map_or("never cleared".to_string(), |c| format!(
            "{} attention: needs_input cleared",
            at(c)
        )),
    );
    drop(running);
    env.finish();
    // Not while it ran, nor sooner than the threshold after it.
    assert!(
        flagged >= exited + THRESHOLD_MS,
        "flagged at {}, the command having ended at {}",
        at(flagged),
        at(exited)
    );
    assert!(
        detail.starts_with("waiting for you: python3 ") && detail.contains("select"),
        "{detail}"
    );
    assert!(
        cleared.is_some_and(|c| c >= typed_ms),
        "not cleared by the key"
    );
}

/// Claude Code's own word: asked for permission to run a command, it runs its `Notification`
/// hook (given by `tether agent` with `--settings`), and the agent's row says `waiting for
/// you` with its message at once (the kernel's look is put out of the way: a threshold of a
/// minute); the operator's answer clears it.
#[test]
fn claude_codes_permission_prompt_is_told_by_its_hook() {
    let env = TestEnv::new("agent_waiting_hook");
    let exe = Agent::Claude.install();
    set_input_after(&env, "60s");
    let dir = env.path("claude");
    let work = dir.join("work");
    fs::create_dir_all(&work).expect("create the working directory");
    let steps = [Step::new("touch made.txt", "make a file")];
    let server = ModelServer::start(&env, Agent::Claude, &dir, &steps, "All done.");
    let mut invocation = AgentInvocation::prepare(
        Agent::Claude,
        exe,
        &dir,
        &work,
        server.port,
        "Run the commands you are given.",
        Interaction::Terminal,
    );
    // Asked, not skipped: the permission prompt.
    invocation
        .args
        .retain(|arg| arg != "--dangerously-skip-permissions");
    let session = format!("hook-{}", env.tag);
    let wrapper = env.tether(&["agent", "--session", &session, "--"]);
    let command = invocation.wrapped(&env, wrapper);
    let mut running = RunningAgent::in_terminal(&env, &command, &dir.join("agent.status"));
    let told = |dir: &Path| {
        events_now(dir).into_iter().find_map(|e| match e.kind {
            EventKind::Attention {
                attention: AttentionKind::NeedsInput,
                detail,
            } => Some((e.ts_ms, detail)),
            _ => None,
        })
    };
    running.wait_for(&env, "the hook's `waiting for you`", || {
        agent_journal(&env).is_some_and(|dir| told(&dir).is_some())
    });
    let dir_01 = agent_journal(&env).expect("the agent's journal");
    let (told_ms, detail) = told(&dir_01).expect("told");
    let asked_ms = received(&server.requests(), |step| step == &Value::from(0));
    // `1. Yes`.
    let answered_ms = now_ms();
    running.press(&env, &["Enter"]);
    running.wait_for(&env, "the model's final answer", || server.answered_final());
    running.quit_with(&env, "/quit");
    let end = running.wait(&env, "claude");
    let cleared = events_now(&dir_01).into_iter().find_map(|e| match e.kind {
        EventKind::AttentionCleared {
            attention: AttentionKind::NeedsInput,
        } => Some(e.ts_ms),
        _ => None,
    });
    let at = |ms: u64| format!("{:+8.2}s", (ms as f64 - asked_ms as f64) / 1000.0);
    println!(
        "Claude Code {} asking permission under tether agent ({end}):\n{} model asks for `touch made.txt`\n{} attention: needs_input ({detail})\n{} operator presses Enter (Yes)\n{}",
        Agent::Claude.version(),
        at(asked_ms),
        at(told_ms),
        at(answered_ms),
        cleared.map_or("never cleared".to_string(), |c| format!(
            "{} attention: needs_input cleared",
            at(c)
        )),
    );
    let made = work.join("made.txt").exists();
    drop(server);
    drop(running);
    env.finish();
    assert_eq!(detail, "waiting for you: Claude needs your permission");
    assert!(
        cleared.is_some_and(|c| c >= answered_ms),
        "not cleared by the answer"
    );
    assert!(made, "the command did not run after the answer");
}
