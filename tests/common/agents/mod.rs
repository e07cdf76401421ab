//! The real agents (Claude Code, Codex, Gemini CLI) as test fixtures: installing the pinned
//! versions (here), a scripted model server per wire API (`model_server`), the one place
//! that knows each agent's offline settings (`offline`), and what may differ between two runs
//! of the same script (`mask`).
//!
//! Nothing here reaches the network but `npm install` (through `tests/agents/install.sh`, once
//! per version into `target/test-agents/`); every agent talks to a server on 127.0.0.1.

pub mod mask;
pub mod model_server;
pub mod offline;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::TestEnv;

/// How long one agent run may take before the test calls it hung: a run takes seconds, and
/// a loaded machine many times that, never minutes.
pub const AGENT_DEADLINE: Duration = Duration::from_secs(180);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Agent {
    Claude,
    Codex,
    Gemini,
}

impl Agent {
    /// The name in `tests/agents/pins` and `install.sh`.
    pub fn name(self) -> &'static str {
        match self {
            Agent::Claude => "claude",
            Agent::Codex => "codex",
            Agent::Gemini => "gemini",
        }
    }

    /// The pinned version, from `tests/agents/pins` (the one place pins are kept).
    pub fn version(self) -> String {
        let pins = fs::read_to_string(agents_dir().join("pins")).expect("read tests/agents/pins");
        pins.lines()
            .filter(|line| !line.starts_with('#'))
            .map(|line| line.split_whitespace().collect::<Vec<_>>())
            .find(|fields| fields.first() == Some(&self.name()))
            .and_then(|fields| fields.get(2).map(|v| v.to_string()))
            .unwrap_or_else(|| panic!("no pin for {} in tests/agents/pins", self.name()))
    }

    /// The scripted model server that speaks this agent's wire API.
    fn server(self) -> &'static str {
        match self {
            Agent::Claude => "anthropic_server.py",
            Agent::Codex => "openai_server.py",
            Agent::Gemini => "gemini_server.py",
        }
    }

    /// Installs the pinned version if the shared cache lacks it (idempotent, locked against
    /// parallel tests) and returns its executable. An agent that cannot be installed fails
    /// the test: it is never skipped.
    pub fn install(self) -> PathBuf {
        let output = Command::new(agents_dir().join("install.sh"))
            .arg(self.name())
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|err| panic!("cannot run tests/agents/install.sh: {err}"));
        assert!(
            output.status.success(),
            "installing {} failed ({}): {}",
            self.name(),
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        let exe = String::from_utf8_lossy(&output.stdout).trim().to_string();
        let exe = PathBuf::from(exe);
        assert!(exe.is_file(), "install.sh named no executable: {exe:?}");
        exe
    }
}

pub fn agents_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/agents")
}

/// A child run to its end within [`AGENT_DEADLINE`]; past it, kills it and fails.
pub fn wait_agent(env: &TestEnv, child: &mut Child, what: &str) -> std::process::ExitStatus {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("wait for the agent") {
            return status;
        }
        if started.elapsed() > AGENT_DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            let killed = super::procs::kill_tagged(&env.tag);
            panic!("{what} did not end within {AGENT_DEADLINE:?}; killed {killed:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A TCP port nobody listens on now (bound and released), for a server a script starts.
pub fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a port");
    listener.local_addr().expect("its address").port()
}

/// Waits until `path` holds a whole line with a pid and returns it, while `child` (the agent
/// that is to write it through one of its commands) runs; fails if the agent ends first.
pub fn pid_written_by(env: &TestEnv, child: &mut Child, path: &Path) -> i32 {
    let started = Instant::now();
    loop {
        if let Ok(text) = fs::read_to_string(path)
            && text.ends_with('\n')
        {
            return text.trim().parse().expect("a pid");
        }
        if let Some(status) = child.try_wait().expect("wait for the agent") {
            panic!(
                "the agent ended ({status}) before writing {}",
                path.display()
            );
        }
        if started.elapsed() > AGENT_DEADLINE {
            let killed = super::procs::kill_tagged(&env.tag);
            panic!(
                "no pid in {} within {AGENT_DEADLINE:?}; killed {killed:?}",
                path.display()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
