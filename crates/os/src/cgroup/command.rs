//! One command's cgroup: created below the hierarchy without following links, entered by the
//! command before it runs, read for its members, figures and `populated`, killed whole with
//! `cgroup.kill`, removed when empty.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag};
use nix::sys::stat::Mode;
use nix::unistd::UnlinkatFlags;

use super::file::{self, open_dir};
use super::name::{self, PREFIX};
use super::{CgroupError, Hierarchy};

/// `f_type` of a cgroup v2 filesystem (`CGROUP2_SUPER_MAGIC` in linux/magic.h).
const CGROUP2_SUPER_MAGIC: i64 = 0x6367_7270;

#[derive(Debug)]
pub struct CommandCgroup {
    path: PathBuf,
    name: String,
    parent: OwnedFd,
    dir: OwnedFd,
}

/// What the kernel accounts to a command's cgroup.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CgroupStats {
    /// CPU time used by every process that ever ran in it (`cpu.stat` `usage_usec`).
    pub cpu_usec: Option<u64>,
    /// Memory in use now (`memory.current`), where the memory controller is enabled.
    pub memory_bytes: Option<u64>,
}

/// The pids a `cgroup.procs` lists.
pub fn parse_procs(text: &str) -> Vec<i32> {
    text.lines().filter_map(|l| l.trim().parse().ok()).collect()
}

/// `populated` from `cgroup.events`: whether any process lives in the cgroup or below.
pub fn parse_populated(text: &str) -> Option<bool> {
    text.lines()
        .find_map(|l| l.strip_prefix("populated "))
        .and_then(|v| match v.trim() {
            "0" => Some(false),
            "1" => Some(true),
            _ => None,
        })
}

/// `usage_usec` from `cpu.stat`, which every v2 cgroup has.
pub fn parse_cpu_usec(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix("usage_usec "))
        .and_then(|v| v.trim().parse().ok())
}

/// The deepest a command's own cgroups are looked into.
const MAX_NESTING: usize = 16;

/// The directories in a cgroup: the cgroups made below it (links are not followed).
fn sub_cgroups(dir: &OwnedFd) -> Vec<OwnedFd> {
    sub_cgroup_names(dir)
        .iter()
        .filter_map(|name| open_dir(dir, name).ok())
        .collect()
}

fn sub_cgroup_names(dir: &OwnedFd) -> Vec<String> {
    // rustix: its `Dir` reads a directory through a borrowed descriptor; nix's takes the
    // descriptor over.
    let Ok(listing) = rustix::fs::Dir::read_from(dir) else {
        return Vec::new();
    };
    listing
        .filter_map(Result::ok)
        .filter(|entry| entry.file_type() == rustix::fs::FileType::Directory)
        .filter_map(|entry| entry.file_name().to_str().ok().map(str::to_string))
        .filter(|name| name != "." && name != "..")
        .collect()
}

/// Adds the members of the cgroup `dir` and of every cgroup below it.
fn members_below(dir: &OwnedFd, depth: usize, members: &mut Vec<i32>) {
    if depth > MAX_NESTING {
        return;
    }
    if let Ok(text) = file::read(dir, "cgroup.procs") {
        members.extend(parse_procs(&text));
    }
    for child in sub_cgroups(dir) {
        members_below(&child, depth + 1, members);
    }
}

/// Removes every cgroup below `dir`, deepest first; one still holding a process stays.
pub(super) fn remove_below(dir: &OwnedFd, depth: usize) {
    if depth > MAX_NESTING {
        return;
    }
    for name in sub_cgroup_names(dir) {
        if let Ok(child) = open_dir(dir, &name) {
            remove_below(&child, depth + 1);
        }
        let _ = nix::unistd::unlinkat(dir, name.as_str(), UnlinkatFlags::RemoveDir);
    }
}

/// A directory that is ours: a link was refused by `O_NOFOLLOW`; another user's is refused
/// here.
fn check_owner(dir: &OwnedFd, what: &Path) -> Result<(), CgroupError> {
    let stat = nix::sys::stat::fstat(dir).map_err(|err| CgroupError::io(what, err.into()))?;
    let me = nix::unistd::geteuid().as_raw();
    if stat.st_uid != me {
        return Err(CgroupError::NotOurs {
            path: what.to_path_buf(),
            owner: stat.st_uid,
        });
    }
    Ok(())
}

impl CommandCgroup {
    /// Creates the cgroup `name` below `hierarchy`, mode 0700 whatever the umask: its files
    /// name the command's processes and what they cost, which is no other user's business.
    /// A name already taken is refused, never reused.
    pub fn create(hierarchy: &Hierarchy, name: &str) -> Result<CommandCgroup, CgroupError> {
        let path = hierarchy.path().join(name);
        nix::sys::stat::mkdirat(hierarchy.dir(), name, Mode::from_bits_truncate(0o700))
            .map_err(|err| CgroupError::io(&path, err.into()))?;
        let parent = hierarchy
            .dir()
            .try_clone()
            .map_err(|err| CgroupError::io(hierarchy.path(), err))?;
        let opened = open_dir(&parent, name).map_err(|err| CgroupError::io(&path, err));
        let cgroup = match opened {
            Ok(dir) => CommandCgroup {
                path,
                name: name.to_string(),
                parent,
                dir,
            },
            Err(err) => {
                let _ = nix::unistd::unlinkat(&parent, name, UnlinkatFlags::RemoveDir);
                return Err(err);
            }
        };
        let private = check_owner(&cgroup.dir, &cgroup.path).and_then(|()| {
            nix::sys::stat::fchmod(&cgroup.dir, Mode::from_bits_truncate(0o700))
                .map_err(|err| CgroupError::io(&cgroup.path, err.into()))
        });
        if let Err(err) = private {
            let _ = cgroup.remove();
            return Err(err);
        }
        // Kernels before 5.14 have no cgroup.kill: without it, a fork storm can outrun
        // signals, which is what the cgroup is for.
        if nix::sys::stat::fstatat(&cgroup.dir, "cgroup.kill", AtFlags::AT_SYMLINK_NOFOLLOW)
            .is_err()
        {
            let _ = cgroup.remove();
            return Err(CgroupError::NoKill);
        }
        Ok(cgroup)
    }

    /// A command cgroup that already exists, named in a broker's `containment` event: taken
    /// only if it is a tether cgroup, a directory (not a link), and ours.
    pub fn open_existing(path: &Path) -> Result<CommandCgroup, CgroupError> {
        CommandCgroup::open_path(path, true)
    }

    /// As [`CommandCgroup::open_existing`], over a fake hierarchy in a temporary directory.
    #[cfg(test)]
    pub fn open_fake(path: &Path) -> Result<CommandCgroup, CgroupError> {
        CommandCgroup::open_path(path, false)
    }

    fn open_path(path: &Path, require_cgroup2: bool) -> Result<CommandCgroup, CgroupError> {
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .filter(|n| name::owner(n).is_some())
            .ok_or_else(|| CgroupError::NotACommandCgroup(path.to_path_buf()))?;
        let parent_path = path
            .parent()
            .ok_or_else(|| CgroupError::NotACommandCgroup(path.to_path_buf()))?;
        let parent =
            file::open_path_dir(parent_path).map_err(|err| CgroupError::io(parent_path, err))?;
        let dir = open_dir(&parent, name).map_err(|err| CgroupError::io(path, err))?;
        check_owner(&dir, path)?;
        // The path comes from a journal or a name worked out from a pid: it must be a
        // cgroup, not a directory elsewhere that only looks like one.
        // `f_type` is i64 here, another width elsewhere.
        #[allow(clippy::unnecessary_cast)]
        let on_cgroup2 = nix::sys::statfs::fstatfs(&dir)
            .is_ok_and(|fs| fs.filesystem_type().0 as i64 == CGROUP2_SUPER_MAGIC);
        if require_cgroup2 && !on_cgroup2 {
            return Err(CgroupError::NotACommandCgroup(path.to_path_buf()));
        }
        Ok(CommandCgroup {
            path: path.to_path_buf(),
            name: name.to_string(),
            parent,
            dir,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Its name, [`name::command_cgroup_name`]'s.
    pub fn name(&self) -> &str {
        &self.name
    }

    fn read(&self, name: &str) -> io::Result<String> {
        file::read(&self.dir, name)
    }

    /// Writes `value` to the cgroup's file `name` (a limit's too: `pids.max`, `memory.max`).
    pub(super) fn write(&self, name: &str, value: &str) -> io::Result<()> {
        file::write(&self.dir, name, value)
    }

    /// `cgroup.procs` open for writing, close-on-exec: where the command cannot be started in
    /// its cgroup (no clone3), it writes `0` to it before it execs (an async-signal-safe
    /// `write`), which moves it in before it can fork.
    pub fn procs_for_child(&self) -> io::Result<OwnedFd> {
        Ok(file::open(&self.dir, "cgroup.procs", OFlag::O_WRONLY)?.into())
    }

    /// The cgroup's directory, which `clone3(CLONE_INTO_CGROUP)` starts a child in.
    pub fn dir(&self) -> std::os::fd::BorrowedFd<'_> {
        self.dir.as_fd()
    }

    /// The pids of every process in the cgroup now, those of the cgroups the command made
    /// below it included (`cgroup.procs` lists only a cgroup's own).
    pub fn members(&self) -> io::Result<Vec<i32>> {
        let mut members = parse_procs(&self.read("cgroup.procs")?);
        for child in sub_cgroups(&self.dir) {
            members_below(&child, 1, &mut members);
        }
        Ok(members)
    }

    /// Whether any process is left in the cgroup.
    pub fn populated(&self) -> io::Result<bool> {
        parse_populated(&self.read("cgroup.events")?).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                "no `populated` in cgroup.events",
            )
        })
    }

    /// SIGKILL to every process in the cgroup at once: the kernel walks it with forks held
    /// off, so nothing forked meanwhile is missed.
    pub fn kill(&self) -> io::Result<()> {
        self.write("cgroup.kill", "1")
    }

    /// Freezes (`true`) or thaws the cgroup (`cgroup.freeze`). A frozen process runs nothing
    /// and forks nothing; a signal sent meanwhile waits and is acted on once thawed.
    pub fn freeze(&self, frozen: bool) -> io::Result<()> {
        self.write("cgroup.freeze", if frozen { "1" } else { "0" })
    }

    /// The CPU time (user and system) of everything that ran in the cgroup, in
    /// microseconds (`cpu.stat`'s `usage_usec`, kept without the cpu controller).
    pub fn cpu_usec(&self) -> Option<u64> {
        self.read("cpu.stat").ok().and_then(|t| parse_cpu_usec(&t))
    }

    /// What the kernel accounted to the cgroup; a figure it does not keep is `None`.
    pub fn stats(&self) -> CgroupStats {
        CgroupStats {
            cpu_usec: self.cpu_usec(),
            memory_bytes: self
                .read("memory.current")
                .ok()
                .and_then(|t| t.trim().parse().ok()),
        }
    }

    /// The most memory the cgroup ever held (`memory.peak`), where the memory controller
    /// accounts it (Linux 5.19 and later, with `memory` enabled for this cgroup).
    pub fn memory_peak(&self) -> Option<u64> {
        self.read("memory.peak").ok()?.trim().parse().ok()
    }

    pub(super) fn parent(&self) -> &OwnedFd {
        &self.parent
    }

    /// Whether the cgroup directory is still there (a delegated subtree can be taken away).
    pub fn exists(&self) -> bool {
        nix::sys::stat::fstatat(&self.dir, "cgroup.procs", AtFlags::AT_SYMLINK_NOFOLLOW).is_ok()
    }

    /// Removes the cgroup; the kernel refuses (`EBUSY`) while a process is in it.
    pub fn remove(&self) -> io::Result<()> {
        debug_assert!(self.name.starts_with(PREFIX));
        // The cgroups the command made below it first, deepest first: a cgroup with
        // children cannot be removed.
        remove_below(&self.dir, 0);
        match nix::unistd::unlinkat(&self.parent, self.name.as_str(), UnlinkatFlags::RemoveDir) {
            Err(Errno::ENOENT) => Ok(()),
            other => Ok(other?),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_kernel_files() {
        assert_eq!(parse_procs("12\n345\n\n"), [12, 345]);
        assert_eq!(parse_procs(""), Vec::<i32>::new());
        assert_eq!(parse_populated("populated 1\nfrozen 0\n"), Some(true));
        assert_eq!(parse_populated("populated 0\nfrozen 0\n"), Some(false));
        assert_eq!(parse_populated("frozen 0\n"), None);
        let cpu = "usage_usec 1500\nuser_usec 1000\nsystem_usec 500\n";
        assert_eq!(parse_cpu_usec(cpu), Some(1500));
        assert_eq!(parse_cpu_usec("user_usec 3\n"), None);
    }

    /// A directory laid out as a cgroup: what the kernel would create, as plain files.
    fn fake_hierarchy() -> (tempfile::TempDir, Hierarchy) {
        let dir = crate::testing::private_tempdir();
        crate::testing::write_private(dir.path().join("cgroup.procs"), "");
        let hierarchy = Hierarchy::at(dir.path()).expect("hierarchy");
        (dir, hierarchy)
    }

    #[test]
    fn a_directory_named_like_a_cgroup_elsewhere_is_not_opened() {
        let (dir, _hierarchy) = fake_hierarchy();
        let lookalike = dir.path().join("tether.s.c.1-2");
        crate::testing::private_dir(&lookalike);
        // A journal naming it must not make a front end freeze, kill in or remove it.
        assert!(CommandCgroup::open_existing(&lookalike).is_err());
        assert!(CommandCgroup::open_fake(&lookalike).is_ok());
    }

    #[test]
    fn a_cgroup_without_cgroup_kill_is_refused_and_removed() {
        let (dir, hierarchy) = fake_hierarchy();
        // A plain directory has no cgroup.kill, as on a kernel before 5.14.
        let err = CommandCgroup::create(&hierarchy, "tether.s.c.1-2").expect_err("no kill");
        assert!(matches!(err, CgroupError::NoKill), "{err}");
        assert!(!dir.path().join("tether.s.c.1-2").exists());
    }

    #[test]
    fn a_link_or_a_taken_name_is_refused() {
        let (dir, hierarchy) = fake_hierarchy();
        std::os::unix::fs::symlink("/tmp", dir.path().join("tether.s.c.1-2")).expect("link");
        assert!(CommandCgroup::create(&hierarchy, "tether.s.c.1-2").is_err());
        assert!(CommandCgroup::open_existing(&dir.path().join("tether.s.c.1-2")).is_err());
        assert!(CommandCgroup::open_existing(&dir.path().join("user.slice")).is_err());
    }
}
