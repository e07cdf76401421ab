//! The agent's own shims directory: `sh`, `bash` and `zsh` linked to tether, first on the
//! agent's PATH. Private (0700, made by this run and no other: whoever could write in it
//! would choose what the agent runs as its shell) and removed when the agent is done.
//!
//! It lives in the socket directory (ours, 0700, checked as tmux checks its own), named for
//! this process (`control::agent_shims`): if this process is SIGKILLed and cannot remove it,
//! the next tether that starts finds its maker gone and removes it.

use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use crate::control::{agent_shims, socket_dir};
use crate::protocol::BrokerIdentity;

pub struct PrivateShims {
    dir: PathBuf,
}

impl PrivateShims {
    /// This process's shims directory in the socket directory, with the links in it.
    pub fn create() -> Result<PrivateShims, String> {
        let base = socket_dir::socket_dir();
        socket_dir::prepare(&base).map_err(|e| format!("cannot make the agent's shims: {e}"))?;
        let pid = std::process::id() as i32;
        let me = crate::procfs::read_stat(pid)
            .ok_or("cannot make the agent's shims: cannot read this process's start time")?;
        let dir = base.join(agent_shims::dir_name(&BrokerIdentity {
            pid,
            start_ticks: me.start_ticks,
        }));
        // Not recursive: the socket directory is there, checked. One left by a process of
        // the same pid and start time (before a reboot, on a runtime directory that
        // survives it) is nobody's now.
        let created = match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Err(err) if err.kind() == io::ErrorKind::AlreadyExists => {
                agent_shims::remove(std::slice::from_ref(&dir));
                std::fs::DirBuilder::new().mode(0o700).create(&dir)
            }
            created => created,
        };
        created.map_err(|err| {
            format!(
                "cannot create the agent's shims directory {}: {err}",
                dir.display()
            )
        })?;
        let shims = PrivateShims { dir };
        tether_os::shims::make_links(&shims.dir)?;
        Ok(shims)
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }
}

impl Drop for PrivateShims {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
