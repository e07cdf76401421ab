//! An agent that runs: a child of the test (its print mode) or the process of a tmux pane
//! (its interactive mode, which needs a terminal).

use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use super::AGENT_DEADLINE;
use crate::common::TestEnv;
use crate::common::procs::{is_gone, kill_tagged};
use crate::common::tmux::Tmux;

pub enum RunningAgent {
    Child(Child),
    Pane {
        tmux: Tmux,
        pid: i32,
        status_file: PathBuf,
    },
}

impl RunningAgent {
    pub fn spawn(mut command: Command, what: &str) -> RunningAgent {
        let child = command
            .spawn()
            .unwrap_or_else(|err| panic!("cannot start {what}: {err}"));
        RunningAgent::Child(child)
    }

    /// `invocation`'s agent under `tether agent --session SESSION`, in print mode, stdin from
    /// /dev/null, its stdout and stderr kept in `dir` (`agent.stdout`, `agent.stderr`).
    pub fn under_tether(
        env: &TestEnv,
        invocation: &super::offline::AgentInvocation,
        session: &str,
        dir: &Path,
        what: &str,
    ) -> RunningAgent {
        let mut wrapper = env.tether(&["agent", "--session", session, "--"]);
        wrapper.stdin(std::process::Stdio::null());
        let mut command = invocation.wrapped(env, wrapper);
        let file = |name: &str| fs::File::create(dir.join(name)).expect("the agent's output file");
        command
            .stdout(file("agent.stdout"))
            .stderr(file("agent.stderr"));
        RunningAgent::spawn(command, what)
    }

    /// Runs `command` (program, arguments, environment and directory as set on it) as the
    /// process of a tmux pane of `cols`×`rows`; its exit status goes to `status_file`.
    pub fn in_terminal(env: &TestEnv, command: &Command, status_file: &Path) -> RunningAgent {
        let tmux = Tmux::start(env, 120, 40);
        let mut unset: Vec<OsString> = Vec::new();
        let mut set: Vec<OsString> = Vec::new();
        for (key, value) in command.get_envs() {
            match value {
                Some(value) => {
                    let mut pair = key.to_os_string();
                    pair.push("=");
                    pair.push(value);
                    set.push(pair);
                }
                None => {
                    unset.push("-u".into());
                    unset.push(key.to_os_string());
                }
            }
        }
        let report = format!("\"$@\"; echo $? > '{}'", status_file.display());
        let mut argv: Vec<OsString> = vec!["env".into()];
        argv.extend(unset);
        argv.extend(set);
        argv.extend(["sh".into(), "-c".into(), report.into(), "sh".into()]);
        argv.push(command.get_program().to_os_string());
        argv.extend(command.get_args().map(|a| a.to_os_string()));
        let dir = command
            .get_current_dir()
            .map(|d| d.to_string_lossy().into_owned())
            .unwrap_or_else(|| ".".to_string());
        let argv: Vec<String> = argv
            .iter()
            .map(|a| a.to_str().expect("a UTF-8 argument").to_string())
            .collect();
        let mut args = vec!["respawn-pane", "-k", "-t", "0", "-c", &dir, "--"];
        args.extend(argv.iter().map(String::as_str));
        let out = tmux.cmd(&args, env);
        assert!(
            out.status.success(),
            "tmux respawn-pane: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let pid = tmux.pane_pid(env);
        RunningAgent::Pane {
            tmux,
            pid,
            status_file: status_file.to_path_buf(),
        }
    }

    /// How it ended, once it has.
    pub fn ended(&mut self) -> Option<String> {
        match self {
            RunningAgent::Child(child) => child
                .try_wait()
                .expect("wait for the agent")
                .map(|status| status.to_string()),
            RunningAgent::Pane {
                pid, status_file, ..
            } => is_gone(*pid).then(|| match fs::read_to_string(status_file) {
                Ok(code) => format!("exit status: {}", code.trim()),
                Err(_) => "ended without an exit status".to_string(),
            }),
        }
    }

    /// Types `command` (`/quit`) into the agent's terminal and presses Enter until the agent
    /// has ended: an Enter that follows the text at once can reach it as part of a paste, or
    /// close a completion menu, and not submit.
    pub fn quit_with(&mut self, env: &TestEnv, command: &str) {
        self.terminal().text(env, command);
        let started = Instant::now();
        while started.elapsed() < AGENT_DEADLINE {
            self.terminal().keys(env, &["Enter"]);
            let pressed = Instant::now();
            while pressed.elapsed() < Duration::from_secs(2) {
                if self.ended().is_some() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }

    fn terminal(&self) -> &Tmux {
        match self {
            RunningAgent::Child(_) => panic!("the agent has no terminal to type into"),
            RunningAgent::Pane { tmux, .. } => tmux,
        }
    }

    /// What its terminal shows (nothing for a child).
    pub fn screen(&self, env: &TestEnv) -> String {
        match self {
            RunningAgent::Child(_) => String::new(),
            RunningAgent::Pane { tmux, .. } => tmux.screen(env),
        }
    }

    /// Waits for its end within [`AGENT_DEADLINE`]; past it, kills everything the test
    /// started and fails.
    pub fn wait(&mut self, env: &TestEnv, what: &str) -> String {
        let started = Instant::now();
        loop {
            if let Some(end) = self.ended() {
                return end;
            }
            if started.elapsed() > AGENT_DEADLINE {
                let screen = self.screen(env);
                let killed = kill_tagged(&env.tag);
                panic!("{what} did not end within {AGENT_DEADLINE:?}; killed {killed:?}\n{screen}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits until `done`, while the agent runs, within [`AGENT_DEADLINE`]; fails if the agent
    /// ends first or the deadline passes, killing everything the test started.
    pub fn wait_for(&mut self, env: &TestEnv, what: &str, mut done: impl FnMut() -> bool) {
        let started = Instant::now();
        while !done() {
            if let Some(end) = self.ended() {
                panic!("the agent ended ({end}) before {what}");
            }
            if started.elapsed() > AGENT_DEADLINE {
                let screen = self.screen(env);
                let killed = kill_tagged(&env.tag);
                panic!("no {what} within {AGENT_DEADLINE:?}; killed {killed:?}\n{screen}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Types `text` into its terminal as it is, without Enter.
    pub fn type_text(&self, env: &TestEnv, text: &str) {
        self.terminal().text(env, text);
    }

    /// Presses keys by tmux's names (`BSpace`, `Enter`).
    pub fn press(&self, env: &TestEnv, keys: &[&str]) {
        self.terminal().keys(env, keys);
    }

    /// Waits until `path` holds a whole line with a pid, written by one of the agent's
    /// commands, and returns it; fails if the agent ends first.
    pub fn pid_written(&mut self, env: &TestEnv, path: &Path) -> i32 {
        let started = Instant::now();
        loop {
            if let Ok(text) = fs::read_to_string(path)
                && text.ends_with('\n')
            {
                return text.trim().parse().expect("a pid");
            }
            if let Some(end) = self.ended() {
                panic!("the agent ended ({end}) before writing {}", path.display());
            }
            if started.elapsed() > AGENT_DEADLINE {
                let screen = self.screen(env);
                let killed = kill_tagged(&env.tag);
                panic!(
                    "no pid in {} within {AGENT_DEADLINE:?}; killed {killed:?}\n{screen}",
                    path.display()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
