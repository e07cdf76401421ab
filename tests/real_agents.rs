//! The real agents, end to end: Claude Code, Gemini CLI and Codex (pinned in
//! `tests/agents/pins`, installed from npm by `tests/agents/install.sh`) each run one script of
//! tool calls against a scripted model server, once bare and once with tether in between, and
//! what the agent sent back to the model for each tool call must be the same, in order, after
//! [`mask`]. With tether, the journal must hold one command per tool call with its text and
//! exit status, a server started in the background must answer a later command and be gone
//! when the agent has exited, and a runaway stopped from outside must reach the agent as a
//! death by SIGTERM, as bash gives it.
//!
//! A failing comparison or check does not stop the others: each test reports every step that
//! differs, then fails.

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use common::agents::{
    Agent, AgentInvocation, ModelServer, Step, ToolResult, free_port, pid_written_by, wait_agent,
    with_codex_tether_hook,
};
use common::journal::{command_dirs, leftovers_stopped};
use common::procs::is_gone;
use common::{TestEnv, run_to_end, wait_until};
use regex::Regex;
use tether::journal::CommandRecord;
use tether::protocol::LeftoversEnd;

/// The session a run with tether journals into: its own name, since command cgroups are
/// named for their session and tests running at once must not take each other's for theirs.
fn session_of(agent: Agent) -> String {
    format!("real-{}-{}", agent.name(), std::process::id())
}

/// How a step's command ends, as bash ends it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ends {
    Code(i32),
    Signal(i32),
}

struct ScriptStep {
    step: Step,
    ends: Ends,
}

/// The request to the background server, by index in [`script`].
const REQUEST_STEP: usize = 6;

/// The tool calls every agent makes: short commands, a failure, interleaved stdout and
/// stderr, a background server and a later request to it, a large output, a runaway that the
/// test stops from outside, and one more command after it. Paths are relative to the run's
/// working directory, so that the command texts are the same in every run but the port.
/// No `$(...)`: Gemini CLI refuses command substitution. Claude Code also starts a second
/// server with its own `run_in_background`, and asks it too.
fn script(agent: Agent, ports: Ports) -> Vec<ScriptStep> {
    let Ports {
        http: http_port,
        background,
    } = ports;
    let step = |command: &str, description: &str, ends| ScriptStep {
        step: Step::new(command, description),
        ends,
    };
    let mut steps = vec![
        step("echo hello", "a short command", Ends::Code(0)),
        step("printf 'a\\nb\\nc\\n' | wc -l", "a pipeline", Ends::Code(0)),
        step("echo about to fail; exit 3", "a failure", Ends::Code(3)),
        step(
            "for i in {1..20}; do echo out$i; echo err$i >&2; done",
            "stdout and stderr interleaved",
            Ends::Code(0),
        ),
        step(
            &format!(
                "python3 -m http.server {http_port} --bind 127.0.0.1 > server.log 2>&1 & echo $! > server.pid"
            ),
            "a server in the background",
            Ends::Code(0),
        ),
        step("seq 1 200000", "a large output", Ends::Code(0)),
        step(
            &request(http_port),
            "a request to the server",
            Ends::Code(0),
        ),
        ScriptStep {
            step: Step::new("echo $$ > runaway.pid; sleep 300", "a runaway").timeout_ms(120_000),
            ends: Ends::Signal(15),
        },
        step("echo after", "a command after the stop", Ends::Code(0)),
    ];
    if agent == Agent::Claude {
        steps.push(ScriptStep {
            step: Step::new(
                &format!(
                    "echo $$ > background.pid; exec python3 -m http.server {background} --bind 127.0.0.1"
                ),
                "a server with run_in_background",
            )
            .in_background(),
            // Stopped when the agent exits.
            ends: Ends::Signal(15),
        });
        steps.push(step(
            &request(background),
            "a request to the run_in_background server",
            Ends::Code(0),
        ));
    }
    steps
}

/// A request to the server on `port`, retried for 3 s (the server may still be binding;
/// under Codex it has already been ended): prints its status, or `no answer`.
fn request(port: u16) -> String {
    format!(
        "python3 -c \"import time, urllib.request as u\nfor _ in range(30):\n    try:\n        print(u.urlopen('http://127.0.0.1:{port}/').status); break\n    except OSError: time.sleep(0.1)\nelse: print('no answer')\""
    )
}

/// The ports of a run's two servers, chosen free for each run.
#[derive(Debug, Clone, Copy)]
struct Ports {
    http: u16,
    background: u16,
}

impl Ports {
    fn free() -> Ports {
        Ports {
            http: free_port(),
            background: free_port(),
        }
    }
}

/// How the test stops the runaway from outside.
#[derive(Debug, Clone, Copy)]
enum Stop {
    /// `kill -TERM -PGID` of the process group of the shell that runs it (no tether).
    ProcessGroup,
    /// `tether stop SESSION/NN` of its journaled command.
    Tether,
}

/// One run of an agent through the script.
struct Run {
    label: &'static str,
    dir: PathBuf,
    agent: Agent,
    ports: Ports,
    results: Vec<ToolResult>,
    wall: Duration,
    status: std::process::ExitStatus,
    /// The background server's pid, and whether it outlived the agent.
    server_pid: Option<i32>,
    server_outlived_agent: bool,
    stderr: String,
}

/// Runs `agent` (at `exe`) through the script in `env.path(label)`, started by `launch` from
/// its prepared invocation, the runaway stopped by `stop`.
/// its prepared invocation, the runaway stopped by `stop`.
fn run(
    env: &TestEnv,
    agent: Agent,
    exe: &Path,
    label: &'static str,
    launch: impl FnOnce(&AgentInvocation) -> Command,
    stop: Stop,
) -> Run {
    let dir = env.path(label);
    let work = dir.join("work");
    fs::create_dir_all(&work).expect("create the run's working directory");
    let ports = Ports::free();
    let steps: Vec<Step> = script(agent, ports).into_iter().map(|s| s.step).collect();
    let server = ModelServer::start(env, agent, &dir, &steps, "All done.");
    let invocation = AgentInvocation::prepare(
        agent,
        exe.to_path_buf(),
        &dir,
        &work,
        server.port,
        "Run the commands you are given.",
    );
    let mut command = launch(&invocation);
    let stderr_path = dir.join("agent.stderr");
    command
        .stdout(fs::File::create(dir.join("agent.stdout")).expect("stdout file"))
        .stderr(fs::File::create(&stderr_path).expect("stderr file"));
    let started = Instant::now();
    let mut child = command
        .spawn()
        .unwrap_or_else(|err| panic!("cannot start {} ({label}): {err}", agent.name()));

    let runaway = pid_written_by(env, &mut child, &work.join("runaway.pid"));
    wait_until(env, "the runaway's sleep", || sleeping_under(runaway));
    match stop {
        Stop::ProcessGroup => {
            let group = nix::unistd::getpgid(Some(nix::unistd::Pid::from_raw(runaway)))
                .expect("the runaway's process group");
            nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGTERM)
                .expect("SIGTERM the runaway's process group");
        }
        Stop::Tether => {
            let session = session_of(agent);
            let id = running_command_with(env, &session, "runaway.pid");
            let target = format!("{session}/{id}");
            let out = run_to_end(env, env.tether(&["stop", &target]), "tether stop");
            assert!(
                out.status.success(),
                "tether stop {target}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
    let status = wait_agent(env, &mut child, &format!("{} ({label})", agent.name()));
    let wall = started.elapsed();
    let server_pid = fs::read_to_string(work.join("server.pid"))
        .ok()
        .and_then(|t| t.trim().parse().ok());
    let server_outlived_agent = server_pid.is_some_and(|pid| !is_gone(pid));
    let stderr = fs::read_to_string(&stderr_path).unwrap_or_default();
    Run {
        label,
        dir,
        agent,
        ports,
        results: server.tool_results(),
        wall,
        status,
        server_pid,
        server_outlived_agent,
        stderr,
    }
}

/// True once `sleep 300` runs as `shell` or below it. The runaway's shell writes its pid before
/// it starts the sleep; a SIGTERM in between would be a different test. (Gemini CLI's
/// wrapper sets an EXIT trap, so its subshell catches SIGTERM and runs on until its child
/// ends: a sleep forked after the signal makes the command run its 300 s, bare or not.)
fn sleeping_under(shell: i32) -> bool {
    let processes = tether::procfs::all_processes();
    let parent_of = |pid: i32| processes.iter().find(|p| p.pid == pid).map(|p| p.ppid);
    processes
        .iter()
        .filter(|p| common::procs::cmdline(p.pid) == "sleep 300")
        .any(|p| {
            let mut pid = p.pid;
            for _ in 0..64 {
                if pid == shell {
                    return true;
                }
                match parent_of(pid) {
                    Some(parent) if parent > 1 => pid = parent,
                    _ => return false,
                }
            }
            false
        })
}

/// The `NN` of the session's command whose argv mentions `needle` and that has not ended.
fn running_command_with(env: &TestEnv, session: &str, needle: &str) -> String {
    let mut found = None;
    wait_until(env, &format!("a running command with `{needle}`"), || {
        found = session_commands(env, session).into_iter().find(|dir| {
            !dir.join("result.json").exists()
                && fs::read_to_string(dir.join("command.json")).is_ok_and(|t| t.contains(needle))
        });
        found.is_some()
    });
    let name = found
        .and_then(|dir| dir.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_default();
    name.split('-').next().unwrap_or_default().to_string()
}

fn session_commands(env: &TestEnv, session: &str) -> Vec<PathBuf> {
    command_dirs(&env.state_dir())
        .into_iter()
        .filter(|dir| dir.parent().and_then(Path::file_name) == Some(session.as_ref()))
        .collect()
}

static MASKS: LazyLock<Vec<(Regex, &'static str)>> = LazyLock::new(|| {
    [
        // Where an agent saved a large output (Claude Code, Gemini CLI): a fresh file each run.
        (r"(saved to|full output see): \S+", "$1: <file>"),
        // Gemini CLI: the process group and background pids of each call.
        (r"Process Group PGID: \d+", "Process Group PGID: <pgid>"),
        (r"Background PIDs: [\d, ]+", "Background PIDs: <pids>"),
        // Codex: a random id and the wall time of each result, the id of a running process.
        (r"Chunk ID: \w+", "Chunk ID: <id>"),
        (r"Wall time: [\d.]+ seconds", "Wall time: <t> seconds"),
        (r"session ID \d+", "session ID <id>"),
        // Claude Code: a background task's id and its output file.
        (r"with ID: \w+", "with ID: <id>"),
        (r"written to: \S+", "written to: <file>"),
    ]
    .into_iter()
    .map(|(re, to)| (Regex::new(re).expect("a mask"), to))
    .collect()
});

/// What legitimately differs between two runs of the same script, made equal; everything
/// else an agent sent back must match byte for byte:
/// - the run's own directory (its HOME and working directory), also in the dashed form
///   Claude Code gives its project directories;
/// - the port of the script's HTTP server, chosen free for each run;
/// - pids, process groups, and the ids, file names and times an agent makes up per call
///   ([`MASKS`]);
/// - for an agent that reads a command's stdout and stderr on two pipes (Codex; Gemini CLI
///   with `-p`), how the lines of the two interleave, which bash does not fix either (Codex's
///   bare runs differ from each other): there, each stream's lines keep their order
///   ([`streams_apart`]). Claude Code gives one file for both, and its order is compared as
///   it is.
fn mask(agent: Agent, run: &Run, text: &str) -> String {
    let dir = run.dir.to_string_lossy().into_owned();
    let dashed = dir.replace(['/', '.'], "-");
    let mut text = text
        .replace(&dir, "<run>")
        .replace(&dashed, "<run>")
        .replace(&format!("127.0.0.1:{}", run.ports.http), "127.0.0.1:<port>")
        .replace(
            &format!("127.0.0.1:{}", run.ports.background),
            "127.0.0.1:<port>",
        );
    for (re, to) in MASKS.iter() {
        text = re.replace_all(&text, *to).into_owned();
    }
    if agent != Agent::Claude {
        text = streams_apart(&text);
    }
    text
}

/// The interleaved step's lines (`outN`, `errN`, maybe behind the agent's own prefix such
/// as `Output: `) rebuilt as all of stdout's, then all of stderr's, each in its own order, where
/// the first of them was.
fn streams_apart(text: &str) -> String {
    static LINE: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"^(.*?)((out|err)\d+)$").expect("a regex"));
    let mut first = None;
    let (mut out, mut err, mut rest) = (Vec::new(), Vec::new(), Vec::new());
    for line in text.split('\n') {
        match LINE.captures(line) {
            Some(c) => {
                if first.is_none() {
                    first = Some((rest.len(), c[1].to_string()));
                }
                let which = if &c[3] == "out" { &mut out } else { &mut err };
                which.push(c[2].to_string());
            }
            None => rest.push(line.to_string()),
        }
    }
    let Some((at, prefix)) = first else {
        return text.to_string();
    };
    let mut streams: Vec<String> = out.into_iter().chain(err).collect();
    streams[0] = format!("{prefix}{}", streams[0]);
    rest.splice(at..at, streams);
    rest.join("\n")
}

/// Compares the two runs' tool results step by step; returns a line per difference.
fn compare(agent: Agent, steps: &[ScriptStep], bare: &Run, other: &Run) -> Vec<String> {
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
        let (masked_a, masked_b) = (mask(agent, bare, &a.output), mask(agent, other, &b.output));
        if masked_a != masked_b || a.error != b.error {
            failures.push(format!(
                "step {i} ({}): bare sent {:?} (error {:?}), {} sent {:?} (error {:?})",
                steps[i].step.description,
                clip(&masked_a),
                a.error,
                other.label,
                clip(&masked_b),
                b.error
            ));
        }
    }
    failures
}

fn clip(text: &str) -> String {
    if text.len() <= 600 {
        return text.to_string();
    }
    let mut end = 600;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…[{} more bytes]", &text[..end], text.len() - end)
}

/// Undoes the quoting an agent's wrapper puts around a command (Claude Code's `eval '…'`).
fn unquote(text: &str) -> String {
    text.replace("'\\''", "'").replace("'\"'\"'", "'")
}

/// The journal checks of a run with tether: every tool call is one journaled command of
/// the session, with its text and its exit status; any other command holds one of the texts
/// in `own` (what the agent runs through its shell for itself). Returns a line per failure.
fn check_journal(env: &TestEnv, run: &Run, own: &[&str]) -> Vec<String> {
    let steps = script(run.agent, run.ports);
    let mut failures = Vec::new();
    let records: Vec<CommandRecord> = session_commands(env, &session_of(run.agent))
        .iter()
        .map(|dir| CommandRecord::load(dir))
        .collect();
    let text_of = |record: &CommandRecord| {
        record
            .request
            .as_ref()
            .map(|r| unquote(&r.command.argv().join(" ")))
            .unwrap_or_default()
    };
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
            failures.push(format!(
                "step {i} ({}): journaled {} ended {ended:?}, bash ends it {:?}",
                step.step.description, record.id, step.ends
            ));
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
fn is_agent(record: &CommandRecord) -> bool {
    record
        .request
        .as_ref()
        .is_some_and(|r| r.command.argv().iter().any(|a| a == "session-owner"))
}

/// The checks of a run with tether beyond the journal: the background server answered the
/// later request and is gone now that the agent has exited.
fn check_server(env: &TestEnv, run: &Run, keeps_background: bool) -> Vec<String> {
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
fn end_leftovers(run: &Run) {
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
fn report(agent: Agent, runs: &[&Run]) {
    if let Some(run) = runs.last() {
        eprintln!(
            "{} {} transcript ({}):",
            agent.name(),
            agent.version(),
            run.label
        );
        for (step, result) in script(agent, run.ports).iter().zip(&run.results) {
            let command = step.step.command.lines().next().unwrap_or_default();
            eprintln!("  -> {command}");
            let masked = mask(agent, run, &result.output);
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
            run.status,
            run.server_outlived_agent
        );
        if !run.status.success() {
            eprintln!("  its stderr: {}", clip(&run.stderr));
        }
    }
}

/// What differs between the agents, as measured.
struct Expect {
    /// Texts of the commands the agent runs through its shell for itself.
    own: &'static [&'static str],
    /// Whether a server a command starts with `&` outlives that command.
    keeps_background: bool,
    /// Why that server was stopped, when tether kept it.
    leftovers_end: Option<LeftoversEnd>,
}

/// The `&` server's command was kept with its server, and its custody ended for `expected`.
fn check_leftovers_end(env: &TestEnv, run: &Run, expected: Option<LeftoversEnd>) -> Vec<String> {
    let Some(expected) = expected else {
        return Vec::new();
    };
    let server = format!("http.server {} ", run.ports.http);
    let record = session_commands(env, &session_of(run.agent))
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

/// How a run with tether starts the agent from its prepared invocation.
type Launch = fn(&TestEnv, &AgentInvocation) -> Command;

/// `tether agent --session S -- AGENT ...`.
fn under_tether_agent(env: &TestEnv, invocation: &AgentInvocation) -> Command {
    let session = session_of(invocation.agent);
    let mut wrapper = env.tether(&["agent", "--session", &session, "--"]);
    wrapper.stdin(Stdio::null());
    invocation.wrapped(env, wrapper)
}

/// Codex with its documented hook, each command rewritten to `tether exec`.
fn through_codex_hook(env: &TestEnv, invocation: &AgentInvocation) -> Command {
    let mut command = with_codex_tether_hook(
        invocation,
        Path::new(common::BIN),
        &env.state_dir(),
        &session_of(invocation.agent),
    )
    .bare(env);
    // As `env.tether` gives every tether it starts: a config directory of the test's own.
    command.env("XDG_CONFIG_HOME", env.path("config"));
    command
}

/// The whole comparison for one agent: bare, then started by `launch` with tether.
fn bare_and_with_tether(agent: Agent, launch: Launch, expect: Expect) {
    let env = TestEnv::new(&format!("real_{}", agent.name()));
    let exe = agent.install();
    let bare = run(
        &env,
        agent,
        &exe,
        "bare",
        |i| i.bare(&env),
        Stop::ProcessGroup,
    );
    end_leftovers(&bare);
    let tethered = run(
        &env,
        agent,
        &exe,
        "tether",
        |i| launch(&env, i),
        Stop::Tether,
    );
    report(agent, &[&bare, &tethered]);
    let mut failures = compare(agent, &script(agent, tethered.ports), &bare, &tethered);
    failures.extend(check_journal(&env, &tethered, expect.own));
    failures.extend(check_server(&env, &tethered, expect.keeps_background));
    failures.extend(check_leftovers_end(&env, &tethered, expect.leftovers_end));
    end_leftovers(&tethered);
    env.finish();
    assert!(
        failures.is_empty(),
        "{} {}, bare against with tether:\n- {}",
        agent.name(),
        agent.version(),
        failures.join("\n- ")
    );
}

#[test]
fn claude_code_sees_under_tether_what_it_sees_bare() {
    // Before the first tool call it runs two shells of its own: an `env` probe and the
    // script that writes its shell snapshot.
    bare_and_with_tether(
        Agent::Claude,
        under_tether_agent,
        Expect {
            own: &["bash -c env", "SNAPSHOT_FILE="],
            keeps_background: true,
            leftovers_end: Some(LeftoversEnd::SessionOwnerExited),
        },
    );
}

#[test]
fn gemini_cli_sees_under_tether_what_it_sees_bare() {
    // It relaunches itself: the child that runs the shells is their caller, and goes first.
    bare_and_with_tether(
        Agent::Gemini,
        under_tether_agent,
        Expect {
            own: &[],
            keeps_background: true,
            leftovers_end: Some(LeftoversEnd::CallerExited),
        },
    );
}

/// Codex ends a command's process group when the command returns, so its background server
/// never answers, bare or not. `tether agent -- codex` is one more test of this shape, with
/// a launch that is `under_tether_agent`.
#[test]
fn codex_through_its_hook_sees_what_it_sees_bare() {
    bare_and_with_tether(
        Agent::Codex,
        through_codex_hook,
        Expect {
            own: &[],
            keeps_background: false,
            leftovers_end: None,
        },
    );
}

#[test]
fn the_mask_keeps_each_streams_order_but_not_their_interleaving() {
    let bare = "<x>\nOutput: out1\nout2\nerr1\nerr2\nExit Code: 0";
    let other = "<x>\nOutput: err1\nout1\nerr2\nout2\nExit Code: 0";
    assert_eq!(streams_apart(bare), streams_apart(other));
    assert_eq!(
        streams_apart(other),
        "<x>\nOutput: out1\nout2\nerr1\nerr2\nExit Code: 0"
    );
    assert_ne!(
        streams_apart("out2\nout1\nerr1"),
        streams_apart("out1\nout2\nerr1")
    );
    assert_eq!(streams_apart("no streams here"), "no streams here");
}
