//! The real agents (Claude Code, Codex, Gemini CLI) as test fixtures: installing the pinned
//! versions (here), a scripted model server per wire API (`model_server`), the one place
//! that knows each agent's offline settings (`offline`), the agent as it runs, with or without
//! a terminal (`running`), and what may differ between two runs of the same script (`mask`).
//!
//! Nothing here reaches the network but `npm install` (through `tests/agents/install.sh`, once
//! per version into `target/test-agents/`); every agent talks to a server on 127.0.0.1.

pub mod mask;
pub mod model_server;
pub mod offline;
pub mod running;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

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

pub use super::free_port;
