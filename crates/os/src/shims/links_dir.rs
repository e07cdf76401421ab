//! The rule a directory must meet before tether puts its shell links there: whoever can
//! write in it, or in any directory above it, chooses what runs as `sh` for whoever uses the
//! links (swap `DIR/bash`, or rename `DIR` away and put another in its place), as root too.
//! So, as tmux checks its socket directory: the directory and every directory above it are
//! owned by us or by root, and nobody else may write in them. Above the directory itself a
//! sticky one (`/tmp`) is fine: there nobody but an entry's owner can rename or remove it.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use thiserror::Error;

/// Why a directory may not hold the shell links.
#[derive(Debug, Error)]
pub enum UnsafeLinksDir {
    #[error(
        "{path} is writable by other users (mode {mode:04o}): whoever can write there chooses what runs as your shell; `chmod go-w {path}`, or choose a directory only you can write"
    )]
    Writable { path: PathBuf, mode: u32 },
    #[error(
        "{path} is owned by uid {owner}, neither you (uid {me}) nor root: its owner chooses what runs as your shell; choose a directory of your own"
    )]
    NotOwned { path: PathBuf, owner: u32, me: u32 },
    #[error("cannot check {path} before putting shell links in it: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Where the directory stands in the chain the rule walks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// The directory the links go in.
    Itself,
    /// A directory above it.
    Above,
}

/// The rule for one directory of the chain (its owner `uid` and its `mode`), for the user
/// `me`: `None` when it is fit.
pub fn unfit(uid: u32, mode: u32, place: Place, me: u32, path: &Path) -> Option<UnsafeLinksDir> {
    if uid != me && uid != 0 {
        return Some(UnsafeLinksDir::NotOwned {
            path: path.to_path_buf(),
            owner: uid,
            me,
        });
    }
    let writable = mode & 0o022 != 0;
    let sticky = mode & 0o1000 != 0;
    if writable && (place == Place::Itself || !sticky) {
        return Some(UnsafeLinksDir::Writable {
            path: path.to_path_buf(),
            mode: mode & 0o7777,
        });
    }
    None
}

/// Checks `dir` (absolute, existing) and every directory above it, both as written (each
/// prefix as it resolves: a link's own directory is a prefix) and as the kernel finally
/// reaches it (`canonicalize`: the directories a link leads through).
pub fn check(dir: &Path) -> Result<(), UnsafeLinksDir> {
    let me = nix::unistd::geteuid().as_raw();
    let real = dir.canonicalize().map_err(|source| UnsafeLinksDir::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    for chain in [dir, real.as_path()] {
        for (n, path) in chain.ancestors().enumerate() {
            let meta = std::fs::metadata(path).map_err(|source| UnsafeLinksDir::Io {
                path: path.to_path_buf(),
                source,
            })?;
            let place = if n == 0 { Place::Itself } else { Place::Above };
            if let Some(unfit) = unfit(meta.uid(), meta.mode(), place, me, path) {
                return Err(unfit);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdict(uid: u32, mode: u32, place: Place) -> Option<String> {
        unfit(uid, mode, place, 1000, Path::new("/d")).map(|e| e.to_string())
    }

    #[test]
    fn only_we_or_root_may_write_the_chain() {
        assert!(verdict(1000, 0o700, Place::Itself).is_none());
        assert!(verdict(1000, 0o755, Place::Itself).is_none());
        assert!(verdict(0, 0o755, Place::Above).is_none());
        // /tmp: sticky, so above the directory nobody can swap our entry.
        assert!(verdict(0, 0o1777, Place::Above).is_none());
        // ...but the links' own directory open to all is refused, sticky or not.
        let open = verdict(1000, 0o1777, Place::Itself).expect("refused");
        assert!(
            open.contains("mode 1777") && open.contains("chmod go-w /d"),
            "{open}"
        );
        assert!(verdict(1000, 0o777, Place::Itself).is_some());
        assert!(verdict(1000, 0o770, Place::Itself).is_some());
        assert!(verdict(0, 0o777, Place::Above).is_some());
        let theirs = verdict(65534, 0o755, Place::Above).expect("refused");
        assert!(theirs.contains("owned by uid 65534"), "{theirs}");
        assert!(verdict(65534, 0o700, Place::Itself).is_some());
    }

    #[test]
    fn a_directory_of_ours_under_private_parents_passes() {
        let tmp = crate::testing::private_tempdir();
        let dir = tmp.path().join("shims");
        crate::testing::private_dir(&dir);
        check(&dir).unwrap();
        use std::os::unix::fs::PermissionsExt;
        crate::testing::loosen(&dir, 0o777);
        assert!(matches!(
            check(&dir),
            Err(UnsafeLinksDir::Writable { mode: 0o777, .. })
        ));
        // A link to it is judged by where it leads too.
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        let open = tmp.path().join("open");
        crate::testing::private_dir(&open);
        crate::testing::loosen(&open, 0o777);
        let inner = open.join("inner");
        crate::testing::private_dir(&inner);
        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(&inner, &link).unwrap();
        assert!(matches!(
            check(&link),
            Err(UnsafeLinksDir::Writable { path, .. }) if path == open
        ));
    }
}
