//! A shims directory: the links named like a shell (`sh`, `bash`, `zsh`) that lead to a tether
//! binary and make it the shell shim for whoever finds them first on PATH. Made here
//! ([`make_links`], in a directory only its owner can change), recognised by what it holds
//! ([`is_shims_dir`]), and left out of the environment of what tether runs on the operator's
//! behalf ([`this_environment_outside`]). The shim itself is the tether crate's `shim`.

mod links;
mod links_dir;
mod outside;

pub use links::make_links;
pub use outside::{inside_notify_run, is_shims_dir, this_environment_outside};

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// The shells tether stands in for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shell {
    Sh,
    Bash,
    Zsh,
}

impl Shell {
    pub const ALL: [Shell; 3] = [Shell::Sh, Shell::Bash, Shell::Zsh];

    pub fn name(self) -> &'static str {
        crate::procfs::SHELL_NAMES[self as usize]
    }

    /// Where the real shell may be, in order. Absolute, so that a link of ours on PATH is
    /// never taken for it.
    pub fn candidates(self) -> &'static [&'static str] {
        match self {
            Shell::Sh => &["/bin/sh", "/usr/bin/sh"],
            Shell::Bash => &["/bin/bash", "/usr/bin/bash"],
            Shell::Zsh => &["/bin/zsh", "/usr/bin/zsh"],
        }
    }

    /// The shell a program name stands for: `bash`, `/x/shims/bash`, or `-bash` (a login
    /// shell, as login(1) names it).
    pub fn from_program(argv0: &OsStr) -> Option<Shell> {
        let name = Path::new(argv0).file_name()?.as_bytes();
        let name = name.strip_prefix(b"-").unwrap_or(name);
        Shell::ALL.into_iter().find(|s| s.name().as_bytes() == name)
    }

    /// The first candidate that exists and is not tether itself (`tether shims /bin` would
    /// otherwise make the shim exec itself for ever).
    pub fn real_path(self) -> Result<PathBuf, String> {
        let me = std::env::current_exe().and_then(|p| p.canonicalize()).ok();
        for candidate in self.candidates() {
            match Path::new(candidate).canonicalize() {
                Ok(real) if Some(&real) == me.as_ref() => continue,
                Ok(_) => return Ok(PathBuf::from(candidate)),
                Err(_) => continue,
            }
        }
        Err(format!(
            "no real {} found at {} (the tether binary itself does not count); install it, or remove the `{}` link to tether",
            self.name(),
            self.candidates().join(" or "),
            self.name()
        ))
    }
}
