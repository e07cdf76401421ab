//! The real agents, end to end: Claude Code, Gemini CLI and Codex (pinned in
//! `tests/agents/pins`, installed from npm by `tests/agents/install.sh`) each run one script of
//! tool calls against a scripted model server, once bare and once with tether in between, and
//! what the agent sent back to the model for each tool call must be the same, in order, once
//! what may differ between runs is masked (`common::agents::mask`). With tether, the journal
//! must hold one command per tool call with its text and exit status, a server started in the
//! background must answer a later command and be gone when the agent has exited, and a
//! runaway stopped from outside must reach the agent as a death by SIGTERM, as bash gives it.
//!
//! A failing comparison or check does not stop the others: each test reports every step that
//! differs, then fails.

mod checks;
use crate::common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use checks::{
    Expect, check_journal, check_leftovers_end, check_server, compare, end_leftovers, report,
};
use common::agents::mask::{Reading, mask, same_but_where_the_tail_was_cut, streams_apart};
use common::agents::model_server::{ModelServer, Step, ToolResult};
use common::agents::offline::{AgentInvocation, Interaction, with_codex_tether_hook};
use common::agents::running::RunningAgent;
use common::agents::{Agent, free_port};
use common::journal::command_dirs;
use common::procs::is_gone;
use common::{TestEnv, run_to_end, wait_until};
use tether::protocol::LeftoversEnd;

/// The session a run with tether journals into: the test's own name, since command cgroups
/// are named for their session and tests running at once must not take each other's for
/// theirs.
fn session_of(env: &TestEnv) -> String {
    format!("real-{}", env.tag)
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
    /// Whether the command prints anything.
    prints: bool,
    /// What the journal must hold as the command's stdout, where that is known and nothing
    /// goes to stderr: every byte, whatever the agent was shown of it.
    journals: Option<String>,
}

/// The request to the background server, by index in [`script`].
const REQUEST_STEP: usize = 6;

/// The tool calls every agent makes: short commands, a failure, interleaved stdout and
/// stderr, a background server and a later request to it, a large output, a runaway that the
/// test stops from outside, and one more command after it. Paths are relative to the run's
/// working directory, so that the command texts are the same in every run but the port.
/// No `$(...)`: Gemini CLI refuses command substitution. Claude Code also starts a second
/// server with its own `run_in_background`, and asks it too.
fn script(agent: Agent, ports: Ports, interaction: Interaction) -> Vec<ScriptStep> {
    let Ports {
        http: http_port,
        background,
    } = ports;
    // Large enough for each agent to cut what it shows the model (Claude Code keeps it in a
    // file, Gemini CLI keeps 40,000 characters, Codex about 10 KB). In a terminal, Gemini CLI
    // reads a command's output back from its own terminal emulator, which on a loaded machine
    // may have taken in only part of it when the command ends (once, in a stress run, a third
    // of 20,000 lines under tether where bare it had them all, and the cut then differed):
    // 200,000 lines stay past the cut however much of them it has, at the cost of the
    // emulator's 20 s. Through pipes, 20,000 lines test as much, and the journal
    // keeps every byte either way (200 MB byte for byte: tests/exec_output.rs).
    let large: u32 = match interaction {
        Interaction::Terminal => 200_000,
        Interaction::Print => 20_000,
    };
    let step = |command: &str, description: &str, ends| ScriptStep {
        step: Step::new(command, description),
        ends,
        prints: true,
        journals: None,
    };
    let journals = |command: &str, description: &str, ends, stdout: String| ScriptStep {
        journals: Some(stdout),
        ..step(command, description, ends)
    };
    let quiet = |command: &str, description: &str, ends| ScriptStep {
        prints: false,
        ..step(command, description, ends)
    };
    let mut steps = vec![
        journals(
            "echo hello",
            "a short command",
            Ends::Code(0),
            "hello\n".into(),
        ),
        step("printf 'a\\nb\\nc\\n' | wc -l", "a pipeline", Ends::Code(0)),
        journals(
            "echo about to fail; exit 3",
            "a failure",
            Ends::Code(3),
            "about to fail\n".into(),
        ),
        step(
            "for i in {1..20}; do echo out$i; echo err$i >&2; done",
            "stdout and stderr interleaved",
            Ends::Code(0),
        ),
        quiet(
            &format!(
                "python3 -m http.server {http_port} --bind 127.0.0.1 > server.log 2>&1 & echo $! > server.pid"
            ),
            "a server in the background",
            Ends::Code(0),
        ),
        journals(
            &format!("seq 1 {large}"),
            "a large output",
            Ends::Code(0),
            (1..=large).map(|n| format!("{n}\n")).collect(),
        ),
        step(
            &request(http_port),
            "a request to the server",
            Ends::Code(0),
        ),
        ScriptStep {
            step: Step::new("echo $$ > runaway.pid; sleep 300", "a runaway").timeout_ms(120_000),
            ends: Ends::Signal(15),
            prints: false,
            journals: None,
        },
        journals(
            "echo after",
            "a command after the stop",
            Ends::Code(0),
            "after\n".into(),
        ),
        // The shell's own words name it as bare (`/bin/bash: line 1: …` for Claude Code,
        // whose shell is the shim called by its path), never a path of tether's.
        step(
            "echo \"$0\" >&2; no_such_command_here",
            "a command not found",
            Ends::Code(127),
        ),
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
            prints: false,
            journals: None,
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
    interaction: Interaction,
    ports: Ports,
    results: Vec<ToolResult>,
    wall: Duration,
    /// How the agent ended (`exit status: 0`).
    end: String,
    /// The `&` server's pid, and whether it outlived the agent.
    server_pid: Option<i32>,
    server_outlived_agent: bool,
    /// Its stderr, or its last screen when it ran in a terminal.
    stderr: String,
}

/// Runs `agent` (at `exe`) through the script in `env.path(label)`, started by `launch` from
/// its prepared invocation, with or without a terminal, the runaway stopped by `stop`.
fn run(
    env: &TestEnv,
    agent: Agent,
    exe: &Path,
    label: &'static str,
    interaction: Interaction,
    launch: impl FnOnce(&AgentInvocation) -> Command,
    stop: Stop,
) -> Run {
    let dir = env.path(label);
    let work = dir.join("work");
    fs::create_dir_all(&work).expect("create the run's working directory");
    let ports = Ports::free();
    let steps: Vec<Step> = (script(agent, ports, interaction).into_iter())
        .map(|s| s.step)
        .collect();
    let server = ModelServer::start(env, agent, &dir, &steps, "All done.");
    let invocation = AgentInvocation::prepare(
        agent,
        exe.to_path_buf(),
        &dir,
        &work,
        server.port,
        "Run the commands you are given.",
        interaction,
    );
    let mut command = launch(&invocation);
    let stderr_path = dir.join("agent.stderr");
    let started = Instant::now();
    let what = format!("{} ({label})", agent.name());
    let mut running = match interaction {
        Interaction::Print => {
            command
                .stdout(fs::File::create(dir.join("agent.stdout")).expect("stdout file"))
                .stderr(fs::File::create(&stderr_path).expect("stderr file"));
            RunningAgent::spawn(command, &what)
        }
        Interaction::Terminal => {
            RunningAgent::in_terminal(env, &command, &dir.join("agent.status"))
        }
    };

    let runaway = running.pid_written(env, &work.join("runaway.pid"));
    wait_until(env, "the runaway's sleep", || sleeping_under(runaway));
    match stop {
        Stop::ProcessGroup => {
            let group = nix::unistd::getpgid(Some(nix::unistd::Pid::from_raw(runaway)))
                .expect("the runaway's process group");
            nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGTERM)
                .expect("SIGTERM the runaway's process group");
        }
        Stop::Tether => {
            let session = session_of(env);
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
    if interaction == Interaction::Terminal {
        // Interactive, it waits for more once it has given its final answer.
        wait_until_agent(env, &mut running, "the final answer", || {
            server.answered_final()
        });
        running.quit_with(env, "/quit");
    }
    let end = running.wait(env, &what);
    let wall = started.elapsed();
    let server_pid = fs::read_to_string(work.join("server.pid"))
        .ok()
        .and_then(|t| t.trim().parse().ok());
    let server_outlived_agent = server_pid.is_some_and(|pid| !is_gone(pid));
    let stderr = match interaction {
        Interaction::Print => fs::read_to_string(&stderr_path).unwrap_or_default(),
        Interaction::Terminal => running.screen(env),
    };
    Run {
        label,
        dir,
        agent,
        interaction,
        ports,
        results: server.tool_results(),
        wall,
        end,
        server_pid,
        server_outlived_agent,
        stderr,
    }
}

/// Waits until `done`, while the agent runs, within the agents' deadline.
fn wait_until_agent(
    env: &TestEnv,
    running: &mut RunningAgent,
    what: &str,
    done: impl FnMut() -> bool,
) {
    running.wait_for(env, what, done);
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

impl Run {
    /// `text` from this run with what differs between runs masked ([`mask`]).
    fn mask(&self, text: &str) -> String {
        // Claude Code gives a command one file for stdout and stderr, Gemini CLI in a
        // terminal one pseudo-terminal; Codex, and Gemini CLI with `-p`, two pipes.
        let in_terminal = self.interaction == Interaction::Terminal;
        let reading = Reading {
            two_pipes: self.agent == Agent::Codex || (self.agent == Agent::Gemini && !in_terminal),
            through_terminal_emulator: self.agent == Agent::Gemini && in_terminal,
        };
        mask(
            reading,
            &self.dir,
            &[self.ports.http, self.ports.background],
            text,
        )
    }
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

/// How a run with tether starts the agent from its prepared invocation.
type Launch = fn(&TestEnv, &AgentInvocation) -> Command;

/// `tether agent --session S -- AGENT ...`.
fn under_tether_agent(env: &TestEnv, invocation: &AgentInvocation) -> Command {
    let session = session_of(env);
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
        &session_of(env),
    )
    .bare(env);
    // As `env.tether` gives every tether it starts: a config directory of the test's own.
    command.env("XDG_CONFIG_HOME", env.path("config"));
    command
}

/// The whole comparison for one agent: bare, then started by `launch` with tether.
fn bare_and_with_tether(agent: Agent, interaction: Interaction, launch: Launch, expect: Expect) {
    let env = TestEnv::new(&format!("real_{}", agent.name()));
    let exe = agent.install();
    let bare = run(
        &env,
        agent,
        &exe,
        "bare",
        interaction,
        |i| i.bare(&env),
        Stop::ProcessGroup,
    );
    end_leftovers(&bare);
    let tethered = run(
        &env,
        agent,
        &exe,
        "tether",
        interaction,
        |i| launch(&env, i),
        Stop::Tether,
    );
    report(agent, &[&bare, &tethered]);
    let differs = expect.bare_ends_what_tether_keeps;
    let skip = differs.then_some(REQUEST_STEP);
    let script = script(agent, tethered.ports, interaction);
    let mut failures = compare(&script, &bare, &tethered, skip);
    failures.extend(check_journal(&env, &tethered, expect.own));
    if differs {
        // Whether the bare run's server died with its terminal is Gemini CLI's and the
        // kernel's business, not tether's: it did in most runs, and once, on a loaded
        // machine, it answered. Said, not checked; tether keeping it is checked.
        let bare_server = check_server(&env, &bare, false);
        if !bare_server.is_empty() {
            eprintln!("bare, not checked: {}", bare_server.join("; "));
        }
        failures.extend(check_server(&env, &tethered, true));
    } else {
        failures.extend(check_server(&env, &tethered, expect.keeps_background));
    }
    failures.extend(check_leftovers_end(&env, &tethered, expect.leftovers_end));
    end_leftovers(&tethered);
    if !failures.is_empty() {
        env.keep();
    }
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
        Interaction::Print,
        under_tether_agent,
        Expect {
            own: &["bash -c env", "SNAPSHOT_FILE="],
            keeps_background: true,
            bare_ends_what_tether_keeps: false,
            leftovers_end: Some(LeftoversEnd::SessionOwnerExited),
        },
    );
}

#[test]
fn gemini_cli_sees_under_tether_what_it_sees_bare() {
    bare_and_with_tether(
        Agent::Gemini,
        Interaction::Print,
        under_tether_agent,
        GEMINI,
    );
}

/// Interactive, in a terminal, Gemini CLI runs each command in a pseudo-terminal of its own:
/// stdout and stderr are one stream there, in the command's order; and what a command starts
/// in the background is gone when the command returns, as its terminal closes (mostly: a
/// loaded machine once kept it bare), where tether keeps it until the agent exits.
#[test]
fn gemini_cli_in_a_terminal_sees_under_tether_what_it_sees_bare() {
    bare_and_with_tether(
        Agent::Gemini,
        Interaction::Terminal,
        under_tether_agent,
        Expect {
            own: &[],
            keeps_background: false,
            leftovers_end: None,
            bare_ends_what_tether_keeps: true,
        },
    );
}

/// It relaunches itself: the child that runs the shells is their caller, and goes first.
const GEMINI: Expect = Expect {
    own: &[],
    keeps_background: true,
    bare_ends_what_tether_keeps: false,
    leftovers_end: Some(LeftoversEnd::CallerExited),
};

/// Codex ends a command's process group when the command returns, so its background server
/// never answers, bare or not. `tether agent -- codex` is one more test of this shape, with
/// a launch that is `under_tether_agent`.
#[test]
fn codex_through_its_hook_sees_what_it_sees_bare() {
    bare_and_with_tether(
        Agent::Codex,
        Interaction::Print,
        through_codex_hook,
        Expect {
            own: &[],
            keeps_background: false,
            bare_ends_what_tether_keeps: false,
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

#[test]
fn the_mask_drops_background_pids_only_where_read_through_a_terminal() {
    let dir = std::path::Path::new("/nonexistent");
    let step = "<x>\nOutput: (empty)\nBackground PIDs: 4242\nProcess Group PGID: 17\n</x>";
    let terminal = Reading {
        two_pipes: false,
        through_terminal_emulator: true,
    };
    let pipes = Reading {
        two_pipes: true,
        through_terminal_emulator: false,
    };
    assert_eq!(
        mask(terminal, dir, &[], step),
        "<x>\nOutput: (empty)\nProcess Group PGID: <pgid>\n</x>"
    );
    assert_eq!(
        mask(pipes, dir, &[], step),
        "<x>\nOutput: (empty)\nBackground PIDs: <pids>\nProcess Group PGID: <pgid>\n</x>"
    );
}

/// Gemini CLI keeps a large output's last characters together with its own framing after
/// them: a process group's pid with one digit more cuts later. The runs seen on a loaded
/// machine: `195436` bare against `95436` under tether (pids 6932 and 16887), and another
/// a whole line apart. Every line both runs kept is still compared.
#[test]
fn a_kept_tail_may_begin_a_line_later_and_nothing_else_differs() {
    let dir = std::path::Path::new("/nonexistent");
    let pipes = Reading {
        two_pipes: true,
        through_terminal_emulator: false,
    };
    let numbers = |from: u32| {
        (from..=200_000)
            .map(|n| n.to_string())
            .collect::<Vec<_>>()
            .join("\n")
    };
    let kept = |from: u32, cut: &str, pgid: &str| {
        mask(
            pipes,
            dir,
            &[],
            &format!(
                "Output too large.\nOutput: 1\n2\n\n... [1,247,041 characters omitted] ...\n\n{cut}\n{}\nProcess Group PGID: {pgid}\n</x>",
                numbers(from)
            ),
        )
    };
    let bare = kept(195_437, "195436", "6932");
    assert!(bare.contains("<cut>\n195437\n"), "{bare}");
    // One character later: the same lines after the cut.
    assert_eq!(bare, kept(195_437, "95436", "16887"));
    // A whole line later.
    let later = kept(195_438, "95437", "16887");
    assert_ne!(bare, later);
    assert!(same_but_where_the_tail_was_cut(&bare, &later));
    assert!(same_but_where_the_tail_was_cut(&later, &bare));
    // A line lost, or changed, among those both kept is a difference.
    let lost = bare.replace("\n199999\n", "\n");
    assert!(!same_but_where_the_tail_was_cut(&lost, &later));
    let changed = bare.replace("\n199999\n", "\n199998\n");
    assert!(!same_but_where_the_tail_was_cut(&changed, &later));
    // Far more than a cut's shift is a difference too.
    assert!(!same_but_where_the_tail_was_cut(
        &bare,
        &kept(195_500, "95499", "16887")
    ));
}

/// The runaway's group sent TERM: whether bash says `Terminated` or names the job it had not
/// reaped is its own race, masked; any other output still counts.
#[test]
fn the_mask_hides_bash_s_race_at_a_group_term_and_nothing_else() {
    let dir = std::path::Path::new("/nonexistent");
    let pipes = Reading {
        two_pipes: true,
        through_terminal_emulator: false,
    };
    let said = "<x>\nOutput: Terminated\nSignal: 15\nProcess Group PGID: 7\n</x>";
    let named = "<x>\nOutput: (empty)\nSignal: 15\nBackground PIDs: 9\nProcess Group PGID: 8\n</x>";
    assert_eq!(mask(pipes, dir, &[], said), mask(pipes, dir, &[], named));
    let other = "<x>\nOutput: oops\nSignal: 15\nProcess Group PGID: 7\n</x>";
    assert_ne!(mask(pipes, dir, &[], other), mask(pipes, dir, &[], named));
    // Not where no TERM ended the call: a server's background pid stays.
    let server = "<x>\nOutput: (empty)\nBackground PIDs: 9\nProcess Group PGID: 8\n</x>";
    assert!(mask(pipes, dir, &[], server).contains("Background PIDs"));
}
