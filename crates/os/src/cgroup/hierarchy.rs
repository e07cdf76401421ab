//! Finding the cgroup v2 directory this process may create command cgroups below: the
//! cgroup2 mount (from `/proc/self/mountinfo`) joined with this process's own cgroup (the
//! `0::PATH` line of `/proc/self/cgroup`), writable by us.
//!
//! A process that runs inside a command's cgroup (an agent's shell call, a `tether exec` in
//! a command) makes its command's cgroup beside that command's, not in it: where the
//! outermost command cgroup of its path is, which is where that command's broker lives. Its
//! broker moves itself there too ([`Hierarchy::enter`]). So an agent's cgroup holds only
//! the agent's processes, what the agent costs is the agent's own, and stopping the agent
//! (`cgroup.kill`) cannot kill the broker of one of its commands before that broker has
//! stopped its command.
//!
//! Parsing is pure (tested on sample text); [`Hierarchy::find`] reads the two files and asks
//! the kernel whether we may write there.

use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use nix::fcntl::AtFlags;
use nix::unistd::{AccessFlags, faccessat};

use super::Unavailable;

/// `TETHER_CGROUP=off` forces the /proc containment, so that it stays tested where cgroups
/// work.
pub const CGROUP_ENV: &str = "TETHER_CGROUP";

/// The cgroup command cgroups are created in: ours, opened once.
#[derive(Debug, Clone)]
pub struct Hierarchy {
    path: PathBuf,
    dir: Arc<OwnedFd>,
    /// The command cgroup this process runs in, below `path`, when there is one.
    inside: Option<PathBuf>,
}

/// Where the cgroup2 filesystem is mounted, and the cgroup its root shows (not `/` inside a
/// cgroup namespace's bind mount), from `/proc/self/mountinfo`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cgroup2Mount {
    pub mount_point: PathBuf,
    pub root: String,
    pub read_only: bool,
}

/// The first cgroup2 mount in `mountinfo`. Fields: `id parent dev root mount-point options
/// [optional...] - fstype source super-options`; paths escape spaces and such as `\040`.
pub fn parse_mountinfo(mountinfo: &str) -> Option<Cgroup2Mount> {
    mountinfo.lines().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        let mut right = right.split_ascii_whitespace();
        if right.next()? != "cgroup2" {
            return None;
        }
        let super_options = right.nth(1).unwrap_or("");
        let fields: Vec<&str> = left.split_ascii_whitespace().collect();
        let (root, mount_point, options) = (fields.get(3)?, fields.get(4)?, fields.get(5)?);
        let ro = |opts: &str| opts.split(',').any(|o| o == "ro");
        Some(Cgroup2Mount {
            mount_point: PathBuf::from(unescape(mount_point)),
            root: unescape(root),
            read_only: ro(options) || ro(super_options),
        })
    })
}

/// This process's cgroup in the v2 hierarchy: the path of the `0::` line.
pub fn parse_own_cgroup(proc_self_cgroup: &str) -> Option<String> {
    proc_self_cgroup
        .lines()
        .find_map(|line| line.strip_prefix("0::"))
        .map(|path| path.trim_end().to_string())
}

/// The directory of our own cgroup: the mount point, then our path below the mount's root.
pub fn own_cgroup_dir(mount: &Cgroup2Mount, own: &str) -> Result<PathBuf, Unavailable> {
    if own.contains("(deleted)") {
        return Err(Unavailable::OwnCgroupDeleted);
    }
    let below_root = match mount.root.as_str() {
        "/" => own,
        root => own
            .strip_prefix(root)
            .filter(|rest| rest.is_empty() || rest.starts_with('/'))
            .ok_or_else(|| Unavailable::OutsideMount(own.to_string()))?,
    };
    let relative = below_root.trim_start_matches('/');
    if relative.split('/').any(|part| part == "..") {
        return Err(Unavailable::OutsideMount(own.to_string()));
    }
    Ok(if relative.is_empty() {
        mount.mount_point.clone()
    } else {
        mount.mount_point.join(relative)
    })
}

/// The part of a cgroup path above its outermost command cgroup (one named by
/// [`super::name::command_cgroup_name`]), if it has one: `/a/tether.s.01-x.7-9/inner` gives
/// `/a`.
pub fn above_commands(cgroup: &str) -> Option<&str> {
    let mut at = 0;
    for part in cgroup.split('/') {
        if super::name::owner(part).is_some() {
            let above = cgroup[..at].trim_end_matches('/');
            return Some(if above.is_empty() { "/" } else { above });
        }
        at += part.len() + 1;
    }
    None
}

/// `\040` and the like, as the kernel escapes mountinfo paths.
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| bytes[i] == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match octal.and_then(|d| u8::from_str_radix(std::str::from_utf8(d).ok()?, 8).ok()) {
            Some(byte) => {
                out.push(byte);
                i += 4;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

impl Hierarchy {
    /// The hierarchy this process may use, or why there is none. `TETHER_CGROUP=off` says
    /// there is none.
    pub fn find() -> Result<Hierarchy, Unavailable> {
        if std::env::var_os(CGROUP_ENV).is_some_and(|v| v == "off") {
            return Err(Unavailable::Disabled);
        }
        let read = |path: &str| {
            std::fs::File::open(path)
                .and_then(|file| crate::procfs::read_small(file, 8192))
                .map_err(|err| Unavailable::Unreadable {
                    what: path.into(),
                    reason: err.to_string(),
                })
        };
        let mount = parse_mountinfo(&read("/proc/self/mountinfo")?).ok_or(Unavailable::NoV2)?;
        if mount.read_only {
            return Err(Unavailable::ReadOnly(mount.mount_point));
        }
        let own = parse_own_cgroup(&read("/proc/self/cgroup")?).ok_or(Unavailable::NotInV2)?;
        let own_dir = own_cgroup_dir(&mount, &own)?;
        // Beside the command it runs in where we may write there, else in it, as before.
        let beside = above_commands(&own)
            .and_then(|above| own_cgroup_dir(&mount, above).ok())
            .and_then(|dir| Hierarchy::at(&dir).ok());
        match beside {
            Some(mut hierarchy) => {
                hierarchy.inside = Some(own_dir);
                Ok(hierarchy)
            }
            None => Hierarchy::at(&own_dir),
        }
    }

    /// Moves this process out of the command cgroup it runs in into the hierarchy's own, as
    /// the module says. Where it may not move, the hierarchy is the cgroup it is in, as it
    /// was before commands' cgroups were made beside each other: nested, the command is
    /// still held, only counted in the outer command too.
    pub fn enter(self) -> Result<Hierarchy, Unavailable> {
        let Some(inside) = &self.inside else {
            return Ok(self);
        };
        match super::file::write(self.dir(), "cgroup.procs", "0") {
            Ok(()) => Ok(Hierarchy {
                inside: None,
                ..self
            }),
            Err(_) => Hierarchy::at(inside),
        }
    }

    /// The command cgroup this process runs in, below [`Hierarchy::path`], if any.
    pub fn inside(&self) -> Option<&Path> {
        self.inside.as_deref()
    }

    /// The hierarchy at `dir` (a real one, or a directory a test made), if we may create
    /// cgroups in it and move processes between it and them.
    pub fn at(dir: &Path) -> Result<Hierarchy, Unavailable> {
        let not_writable = |reason: String| Unavailable::NotWritable {
            path: dir.to_path_buf(),
            reason,
        };
        let fd = super::file::open_path_dir(dir).map_err(|err| not_writable(err.to_string()))?;
        // Delegation: creating a child takes write access to the directory; moving a
        // process into it takes write access to the common ancestor's `cgroup.procs`.
        // Errors as the standard library words them, as everywhere else.
        let io = io::Error::from;
        faccessat(
            &fd,
            ".",
            AccessFlags::W_OK | AccessFlags::X_OK,
            AtFlags::AT_EACCESS,
        )
        .map_err(|err| not_writable(io(err).to_string()))?;
        faccessat(&fd, "cgroup.procs", AccessFlags::W_OK, AtFlags::AT_EACCESS)
            .map_err(|err| not_writable(format!("cgroup.procs: {}", io(err))))?;
        Ok(Hierarchy {
            path: dir.to_path_buf(),
            dir: Arc::new(fd),
            inside: None,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub(super) fn dir(&self) -> &OwnedFd {
        &self.dir
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYBRID: &str = "\
22 1 0:21 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
31 22 0:26 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
42 31 0:39 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
";

    #[test]
    fn finds_the_cgroup2_mount_in_a_hybrid_layout() {
        let mount = parse_mountinfo(HYBRID).expect("a cgroup2 mount");
        assert_eq!(mount.mount_point, PathBuf::from("/sys/fs/cgroup/unified"));
        assert_eq!(mount.root, "/");
        assert!(!mount.read_only);
        assert_eq!(
            parse_mountinfo("42 31 0:39 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory"),
            None
        );
        let ro = "30 1 0:27 / /sys/fs/cgroup ro,nosuid shared:4 - cgroup2 cgroup2 rw,nsdelegate";
        assert!(parse_mountinfo(ro).expect("mount").read_only);
        let spaced = r"30 1 0:27 / /mnt/my\040cgroups rw - cgroup2 none rw";
        assert_eq!(
            parse_mountinfo(spaced).expect("mount").mount_point,
            PathBuf::from("/mnt/my cgroups")
        );
    }

    #[test]
    fn joins_the_mount_with_our_own_cgroup() {
        let cgroup =
            "9:name=systemd:/\n4:memory:/x\n0::/user.slice/user-1000.slice/session-2.scope\n";
        let own = parse_own_cgroup(cgroup).expect("a v2 line");
        let mount = parse_mountinfo(HYBRID).expect("mount");
        assert_eq!(
            own_cgroup_dir(&mount, &own).expect("dir"),
            PathBuf::from("/sys/fs/cgroup/unified/user.slice/user-1000.slice/session-2.scope")
        );
        assert_eq!(
            own_cgroup_dir(&mount, "/").expect("dir"),
            PathBuf::from("/sys/fs/cgroup/unified")
        );
        // v1 only: no `0::` line.
        assert_eq!(parse_own_cgroup("4:memory:/\n1:cpu:/\n"), None);
        // A container's bind mount shows its own subtree as the mount's root.
        let nested = Cgroup2Mount {
            mount_point: "/sys/fs/cgroup".into(),
            root: "/docker/abc".into(),
            read_only: false,
        };
        assert_eq!(
            own_cgroup_dir(&nested, "/docker/abc/inner").expect("dir"),
            PathBuf::from("/sys/fs/cgroup/inner")
        );
        assert!(own_cgroup_dir(&nested, "/docker/abcdef").is_err());
        assert!(own_cgroup_dir(&mount, "/a/../../etc").is_err());
        assert!(matches!(
            own_cgroup_dir(&mount, "/gone (deleted)"),
            Err(Unavailable::OwnCgroupDeleted)
        ));
    }

    #[test]
    fn a_directory_we_cannot_write_is_no_hierarchy() {
        let missing = Path::new("/nonexistent/tether-cgroup-test");
        let err = Hierarchy::at(missing).expect_err("no such directory");
        assert!(
            err.to_string().contains("/nonexistent/tether-cgroup-test"),
            "{err}"
        );
        let dir = crate::testing::private_tempdir();
        // No cgroup.procs: not a cgroup we can move processes through.
        assert!(Hierarchy::at(dir.path()).is_err());
        crate::testing::write_private(dir.path().join("cgroup.procs"), "");
        assert_eq!(
            Hierarchy::at(dir.path()).expect("usable").path(),
            dir.path()
        );
    }

    #[test]
    fn a_command_cgroup_is_made_beside_the_outermost_command_cgroup_of_the_path() {
        let agent = "tether.s.01-claude.4242-99";
        assert_eq!(
            above_commands(&format!("/user/app/{agent}")),
            Some("/user/app")
        );
        assert_eq!(above_commands(&format!("/{agent}")), Some("/"));
        let deeper = format!("/user/{agent}/inner/tether.s.02-ls.77-1");
        assert_eq!(above_commands(&deeper), Some("/user"));
        for plain in [
            "/",
            "/user/app",
            "/tether",
            "/tether.a.b",
            "/x/tether.a.b.c",
        ] {
            assert_eq!(above_commands(plain), None, "{plain}");
        }
        let mount = Cgroup2Mount {
            mount_point: PathBuf::from("/sys/fs/cgroup"),
            root: "/".into(),
            read_only: false,
        };
        let inside = format!("/{agent}");
        let top = above_commands(&inside).expect("above");
        assert_eq!(
            own_cgroup_dir(&mount, top).expect("dir"),
            PathBuf::from("/sys/fs/cgroup")
        );
    }
}
