//! A small tmpfs for a state directory, to see what a full disk does; unmounted when
//! dropped. Mounting needs root: without it (or without tmpfs) the test says so and skips.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::TestEnv;
use super::mounts::Mounted;

pub struct SmallDisk {
    path: PathBuf,
    _mounted: Mounted,
}

impl SmallDisk {
    /// A tmpfs of `size` (as mount's `size=` takes it: `128k`) at a fresh place in the
    /// test's scratch space; `None` (said on stderr) when it cannot be mounted here.
    pub fn mount(env: &TestEnv, size: &str) -> Option<SmallDisk> {
        let path = env.path(&format!("disk-{size}"));
        fs::create_dir(&path).expect("mkdir");
        let options = format!("size={size},mode=0700");
        let mounted = Mounted::new(&["-t", "tmpfs", "-o", &options, "tmpfs"], &path)?;
        Some(SmallDisk {
            path,
            _mounted: mounted,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Fills what is left of the disk with one file, `fill`.
    pub fn fill(&self) {
        use std::io::Write;
        let mut file = fs::File::create(self.path.join("fill")).expect("create the fill file");
        let chunk = vec![0u8; 4096];
        while file.write_all(&chunk).is_ok() {}
    }

    /// Makes the disk read-only (a remount); `false` when it cannot.
    pub fn read_only(&self) -> bool {
        Command::new("mount")
            .args(["-o", "remount,ro"])
            .arg(&self.path)
            .status()
            .is_ok_and(|s| s.success())
    }

    /// Frees the disk again.
    pub fn unfill(&self) {
        let _ = fs::remove_file(self.path.join("fill"));
    }
}
