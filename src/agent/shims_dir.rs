//! The agent's own shims directory: `sh`, `bash` and `zsh` linked to tether, first on the
//! agent's PATH. Private (0700, made by this run and no other: whoever could write in it
//! would choose what the agent runs as its shell) and removed when the agent is done.

use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

pub struct PrivateShims {
    dir: PathBuf,
}

impl PrivateShims {
    /// A new directory under the temporary directory, with the links in it.
    pub fn create() -> Result<PrivateShims, String> {
        let base = std::env::temp_dir();
        let stamp = crate::clock::now_ms();
        for attempt in 0..16u64 {
            let dir = base.join(format!(
                "tether-agent-{}-{}",
                std::process::id(),
                stamp + attempt
            ));
            // Not recursive: one that exists already (someone else's) is never used.
            match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
                Ok(()) => {
                    let shims = PrivateShims { dir };
                    crate::shim::make_links(&shims.dir)?;
                    return Ok(shims);
                }
                Err(err) if err.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(err) => {
                    return Err(format!(
                        "cannot create the agent's shims directory {}: {err}",
                        dir.display()
                    ));
                }
            }
        }
        Err(format!(
            "cannot create the agent's shims directory in {}: every name tried exists",
            base.display()
        ))
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
