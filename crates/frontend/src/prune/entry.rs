//! What prune needs to know of an entry before it removes anything in or below it: its type,
//! its identity, and the mount it is on. A bind mount of a directory of the same file system
//! has the same `st_dev` as the session around it, so the device alone cannot tell a mount
//! point; the mount id that `statx` reports (unique since Linux 6.8, reusable before) can.

use std::os::fd::AsFd;

use rustix::fs::{AtFlags, FileType, StatxFlags};

/// `STATX_MNT_ID_UNIQUE` (Linux 6.8), which rustix does not name: a mount id never reused,
/// where `STATX_MNT_ID` may name a mount made after the one it named is gone.
const STATX_MNT_ID_UNIQUE: u32 = 0x4000;

/// One entry as `statx` (or, on a kernel without it, `fstatat`) saw it, links not followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    pub kind: FileType,
    pub dev: u64,
    pub ino: u64,
    /// The mount it is on; `None` where the kernel does not say (before Linux 5.8).
    pub mount: Option<MountId>,
}

/// A mount id, of the kind the kernel gave: ids of two kinds never count as one mount.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MountId {
    Unique(u64),
    Reusable(u64),
}

impl Entry {
    /// The entry `name` in the directory `dir`, not following a link nor an automount.
    pub fn at(dir: &impl AsFd, name: &std::ffi::OsStr) -> rustix::io::Result<Entry> {
        Entry::statx(dir, name, AtFlags::SYMLINK_NOFOLLOW | AtFlags::NO_AUTOMOUNT)
    }

    /// What the open `fd` is.
    pub fn of(fd: &impl AsFd) -> rustix::io::Result<Entry> {
        Entry::statx(fd, "", AtFlags::EMPTY_PATH)
    }

    fn statx(
        dir: &impl AsFd,
        name: impl rustix::path::Arg + Copy,
        flags: AtFlags,
    ) -> rustix::io::Result<Entry> {
        let mask = StatxFlags::TYPE
            | StatxFlags::INO
            | StatxFlags::MNT_ID
            | StatxFlags::from_bits_retain(STATX_MNT_ID_UNIQUE);
        // rustix: nix has no statx (the mount id tells a mount point from its parent).
        let statx = match rustix::fs::statx(dir, name, flags, mask) {
            Ok(statx) => statx,
            // Before Linux 4.11, or a sandbox that forbids it: the device is all there is.
            Err(rustix::io::Errno::NOSYS | rustix::io::Errno::PERM) => {
                let stat = rustix::fs::statat(dir, name, flags)?;
                return Ok(Entry {
                    kind: FileType::from_raw_mode(stat.st_mode),
                    dev: stat.st_dev,
                    ino: stat.st_ino,
                    mount: None,
                });
            }
            Err(err) => return Err(err),
        };
        let given = StatxFlags::from_bits_retain(statx.stx_mask);
        let mount = if given.contains(StatxFlags::from_bits_retain(STATX_MNT_ID_UNIQUE)) {
            Some(MountId::Unique(statx.stx_mnt_id))
        } else if given.contains(StatxFlags::MNT_ID) {
            Some(MountId::Reusable(statx.stx_mnt_id))
        } else {
            None
        };
        Ok(Entry {
            kind: FileType::from_raw_mode(statx.stx_mode.into()),
            dev: rustix::fs::makedev(statx.stx_dev_major, statx.stx_dev_minor),
            ino: statx.stx_ino,
            mount,
        })
    }

    /// Whether this entry is on the mount `around` is on: the same device, and the same mount
    /// where the kernel says which. An entry that is not is a mount point (or below one).
    pub fn on_mount_of(&self, around: &Entry) -> bool {
        self.dev == around.dev
            && match (self.mount, around.mount) {
                (Some(mine), Some(theirs)) => mine == theirs,
                _ => true,
            }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tether_os::journal::secure::open_dir_nofollow;

    #[test]
    fn entries_of_one_directory_are_on_its_mount_and_say_what_they_are() {
        let tmp = tether_os::testing::private_tempdir();
        tether_os::testing::private_dir(tmp.path().join("sub"));
        tether_os::testing::write_private(tmp.path().join("file"), "x");
        let dir = open_dir_nofollow(tmp.path()).unwrap();
        let here = Entry::of(&dir).unwrap();
        assert_eq!(here.kind, FileType::Directory);
        assert!(here.mount.is_some(), "this kernel names mounts");
        let sub = Entry::at(&dir, "sub".as_ref()).unwrap();
        let file = Entry::at(&dir, "file".as_ref()).unwrap();
        assert_eq!(
            (sub.kind, file.kind),
            (FileType::Directory, FileType::RegularFile)
        );
        assert!(sub.on_mount_of(&here) && file.on_mount_of(&here));
        let opened = Entry::of(&open_dir_nofollow(&tmp.path().join("sub")).unwrap()).unwrap();
        assert_eq!(opened, sub);
        // /proc is a mount of its own wherever tether runs.
        let proc = Entry::of(&open_dir_nofollow(std::path::Path::new("/proc")).unwrap()).unwrap();
        assert!(!proc.on_mount_of(&here));
    }

    #[test]
    fn a_mount_id_of_either_kind_tells_mounts_apart_and_none_defers_to_the_device() {
        let entry = |dev, mount| Entry {
            kind: FileType::Directory,
            dev,
            ino: 2,
            mount,
        };
        let base = entry(1, Some(MountId::Unique(10)));
        assert!(!entry(1, Some(MountId::Unique(11))).on_mount_of(&base));
        assert!(entry(1, Some(MountId::Unique(10))).on_mount_of(&base));
        assert!(entry(1, None).on_mount_of(&base));
        assert!(!entry(2, None).on_mount_of(&base));
    }
}
