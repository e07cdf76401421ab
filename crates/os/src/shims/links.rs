//! `tether shims DIR`: the links `DIR/sh`, `DIR/bash` and `DIR/zsh` to this binary, which
//! make it the shell shim for whoever finds them first on PATH (or is pointed at them).

use std::io;
use std::path::{Path, PathBuf};

use super::Shell;

/// What is at a link's place now.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Found {
    Nothing,
    /// A link to this binary already.
    Ours,
    /// A link to a tether binary elsewhere (another build): replaced.
    OtherTether,
    /// Anything else: never touched.
    Foreign(String),
}

/// Creates the links (the directory too, private, if it is missing); returns what it did.
pub fn make_links(dir: &Path) -> Result<String, String> {
    let exe = std::env::current_exe()
        .and_then(|p| p.canonicalize())
        .map_err(|e| format!("cannot tell where the tether binary is: {e}"))?;
    let dir = absolute(dir).map_err(|e| format!("cannot use {}: {e}", dir.display()))?;
    // Whoever can write here decides what runs as `sh` for you: yours alone. An existing
    // directory is left as it is, but refused (as are the directories above it) if anyone
    // but us or root owns it or may write in it.
    std::os::unix::fs::DirBuilderExt::mode(std::fs::DirBuilder::new().recursive(true), 0o700)
        .create(&dir)
        .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    super::links_dir::check(&dir).map_err(|e| format!("{e}; no link was made"))?;
    let places: Vec<(PathBuf, Found)> = Shell::ALL
        .iter()
        .map(|shell| {
            let path = dir.join(shell.name());
            let found = inspect(&path, &exe);
            (path, found)
        })
        .collect();
    let refused: Vec<String> = places
        .iter()
        .filter_map(|(path, found)| match found {
            Found::Foreign(what) => Some(format!("{} is {what}", path.display())),
            _ => None,
        })
        .collect();
    if !refused.is_empty() {
        return Err(format!(
            "{}, not a link to tether; nothing was changed: remove it, or choose another directory",
            refused.join("; ")
        ));
    }
    let mut report = String::new();
    for (path, found) in places {
        let verb = match found {
            Found::Ours => "already",
            Found::Nothing => {
                std::os::unix::fs::symlink(&exe, &path)
                    .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
                "created"
            }
            Found::OtherTether => {
                replace_link(&exe, &path)
                    .map_err(|e| format!("cannot replace {}: {e}", path.display()))?;
                "replaced"
            }
            Found::Foreign(_) => unreachable!("refused above"),
        };
        report.push_str(&format!(
            "{verb}: {} -> {}\n",
            path.display(),
            exe.display()
        ));
    }
    report.push_str(&format!(
        "put {} first on PATH (or point an agent's shell setting at {}/bash) to journal every `sh -c`, `bash -c` and `zsh -c`\n",
        dir.display(),
        dir.display()
    ));
    Ok(report)
}

pub(super) fn inspect(path: &Path, exe: &Path) -> Found {
    let meta = match path.symlink_metadata() {
        Ok(meta) => meta,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Found::Nothing,
        Err(err) => return Found::Foreign(format!("unreadable ({err})")),
    };
    if !meta.file_type().is_symlink() {
        return Found::Foreign(if meta.is_dir() {
            "a directory".into()
        } else {
            "a file".into()
        });
    }
    let target = std::fs::read_link(path).unwrap_or_default();
    if target == exe {
        return Found::Ours;
    }
    // A link that leads to this binary some other way, or to a binary named tether.
    let leads_here = path.canonicalize().is_ok_and(|real| real == exe);
    if leads_here || target.file_name().is_some_and(|n| n == "tether") {
        Found::OtherTether
    } else {
        Found::Foreign(format!("a link to {}", target.display()))
    }
}

/// Points the link at `exe` in one step: a new link under a temporary name, renamed over.
fn replace_link(exe: &Path, path: &Path) -> io::Result<()> {
    let tmp = path.with_file_name(format!(
        ".{}.tether-{}.tmp",
        path.file_name().unwrap_or_default().to_string_lossy(),
        std::process::id()
    ));
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(exe, &tmp)?;
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

fn absolute(dir: &Path) -> io::Result<PathBuf> {
    if dir.is_absolute() {
        Ok(dir.to_path_buf())
    } else {
        Ok(std::env::current_dir()?.join(dir))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_may_be_replaced() {
        let tmp = crate::testing::private_tempdir();
        let exe = tmp.path().join("tether");
        crate::testing::write_private(&exe, "");
        let at = |name: &str| tmp.path().join(name);
        assert_eq!(inspect(&at("none"), &exe), Found::Nothing);
        std::os::unix::fs::symlink(&exe, at("ours")).unwrap();
        assert_eq!(inspect(&at("ours"), &exe), Found::Ours);
        std::os::unix::fs::symlink("/elsewhere/target/debug/tether", at("old")).unwrap();
        assert_eq!(inspect(&at("old"), &exe), Found::OtherTether);
        std::os::unix::fs::symlink("/bin/dash", at("dash")).unwrap();
        assert_eq!(
            inspect(&at("dash"), &exe),
            Found::Foreign("a link to /bin/dash".into())
        );
        crate::testing::write_private(at("file"), "#!/bin/sh\n");
        assert_eq!(inspect(&at("file"), &exe), Found::Foreign("a file".into()));
    }
}
