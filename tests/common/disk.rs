//! A small tmpfs for a state directory, to see what a full disk does; unmounted when
//! dropped. Mounting needs root: without it (or without tmpfs) the test says so and skips.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::TestEnv;

pub struct SmallDisk(PathBuf);

impl SmallDisk {
    /// A tmpfs of `size` (as mount's `size=` takes it: `128k`) at a fresh place in the
    /// test's scratch space; `None` (said on stderr) when it cannot be mounted here.
    pub fn mount(env: &TestEnv, size: &str) -> Option<SmallDisk> {
        if !rustix::process::geteuid().is_root() {
            eprintln!("skipped: mounting a small disk needs root");
            return None;
        }
        let path = env.path(&format!("disk-{size}"));
        fs::create_dir(&path).expect("mkdir");
        let mounted = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0700"),
                "tmpfs",
            ])
            .arg(&path)
            .status();
        match mounted {
            Ok(status) if status.success() => Some(SmallDisk(path)),
            other => {
                eprintln!("skipped: cannot mount a tmpfs here: {other:?}");
                None
            }
        }
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    /// Fills what is left of the disk with one file, `fill`.
    pub fn fill(&self) {
        use std::io::Write;
        let mut file = fs::File::create(self.0.join("fill")).expect("create the fill file");
        let chunk = vec![0u8; 4096];
        while file.write_all(&chunk).is_ok() {}
    }

    /// Makes the disk read-only (a remount); `false` when it cannot.
    pub fn read_only(&self) -> bool {
        Command::new("mount")
            .args(["-o", "remount,ro"])
            .arg(&self.0)
            .status()
            .is_ok_and(|s| s.success())
    }

    /// Frees the disk again.
    pub fn unfill(&self) {
        let _ = fs::remove_file(self.0.join("fill"));
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}
