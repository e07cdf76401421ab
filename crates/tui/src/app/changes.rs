//! `restart_on_change`: the files under each such command's directory, watched with inotify,
//! matched against its globs. One descriptor for all; a directory is watched once whatever
//! how many commands look at it; a directory created later is watched as it appears, and
//! the files already in it then (written before its watch was added) are matched too. The
//! launcher debounces what is seen here.
//!
//! Only the directories a glob can reach are watched: from its literal start (`src` of
//! `src/**/*.rs`) down as many levels as its segments go (none for `Cargo.toml` or
//! `src/*.rs`, one for `src/*/mod.rs`), every level only below a `**`, leaving out `.git`,
//! `target` and `node_modules` there (thousands of directories that a build writes, each a
//! watch of the user's `fs.inotify.max_user_watches`). A directory that cannot be watched
//! (the watches used up) is said once, by [`ChangeWatcher::take_trouble`]. A file written,
//! created, moved, deleted or touched (its attributes) is a change; when the kernel's queue
//! overflowed (events lost), every command with globs is taken as changed.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use nix::sys::inotify::{AddWatchFlags, WatchDescriptor};
use tether_core::launcher::GlobSet;
use tether_os::journal::watcher::{AsyncInotify, Readiness};

/// Directories never descended into below a glob's start.
const SKIPPED: [&str; 3] = [".git", "target", "node_modules"];

/// A command's globs and the directory they are relative to.
struct Watcher {
    command: usize,
    base: PathBuf,
    globs: GlobSet,
}

/// How many levels below a directory are watched: `None` for every one (below a `**`).
type Depth = Option<usize>;

pub(super) struct ChangeWatcher {
    fd: AsyncInotify,
    /// Each watched directory and how deep below it is watched.
    dirs: HashMap<WatchDescriptor, (PathBuf, Depth)>,
    /// The watched directories' descriptors.
    watched: HashMap<PathBuf, WatchDescriptor>,
    watchers: Vec<Watcher>,
    /// Why a directory could not be watched, the first time, until taken.
    trouble: Option<String>,
    /// Whether `trouble` was ever set: said once.
    troubled: bool,
}

impl ChangeWatcher {
    /// Watches for `(command, base directory, globs)`; `None` when nothing asks, and the
    /// reason when inotify cannot be had (the commands then run without it).
    pub(super) fn new(
        wanted: Vec<(usize, PathBuf, Vec<String>)>,
    ) -> Result<Option<ChangeWatcher>, String> {
        if wanted.is_empty() {
            return Ok(None);
        }
        let fd = AsyncInotify::new()
            .map_err(|e| format!("restart_on_change: inotify is unavailable ({e})"))?;
        let mut watcher = ChangeWatcher {
            fd,
            dirs: HashMap::new(),
            watched: HashMap::new(),
            watchers: Vec::new(),
            trouble: None,
            troubled: false,
        };
        for (command, base, globs) in wanted {
            // The config checked them.
            let Ok(set) = GlobSet::new(&globs) else {
                continue;
            };
            for glob in &globs {
                let (start, depth) = reach(glob);
                watcher.watch_tree(&base.join(start), depth, &mut Vec::new());
            }
            watcher.watchers.push(Watcher {
                command,
                base,
                globs: set,
            });
        }
        Ok(Some(watcher))
    }

    /// The descriptor's readiness, owned, for the event loop's `select!`.
    pub(super) fn readiness(&self) -> Readiness {
        self.fd.readiness()
    }

    /// Why a directory could not be watched (the watches used up), once: the TUI says it.
    pub(super) fn take_trouble(&mut self) -> Option<String> {
        self.trouble.take()
    }

    /// A directory and those below it to `depth` (but [`SKIPPED`]), the files in them put
    /// in `files`; one that cannot be watched is left out (gone: silently; else said once).
    fn watch_tree(&mut self, dir: &Path, depth: Depth, files: &mut Vec<PathBuf>) {
        let deeper = |than: Depth| match (depth, than) {
            (_, None) => false,
            (None, Some(_)) => true,
            (Some(want), Some(have)) => want > have,
        };
        let known = self.watched.get(dir).and_then(|wd| self.dirs.get_mut(wd));
        match known {
            Some((_, have)) if !deeper(*have) => return,
            Some((_, have)) => *have = depth,
            None => {
                let flags = AddWatchFlags::IN_ONLYDIR
                    | AddWatchFlags::IN_CLOSE_WRITE
                    | AddWatchFlags::IN_ATTRIB
                    | AddWatchFlags::IN_CREATE
                    | AddWatchFlags::IN_DELETE
                    | AddWatchFlags::IN_MOVED_TO
                    | AddWatchFlags::IN_MOVED_FROM;
                match self.fd.inotify().add_watch(dir, flags) {
                    Ok(wd) => {
                        self.dirs.insert(wd, (dir.to_path_buf(), depth));
                        self.watched.insert(dir.to_path_buf(), wd);
                    }
                    Err(nix::errno::Errno::ENOENT | nix::errno::Errno::ENOTDIR) => return,
                    Err(err) => {
                        self.troubled(dir, err);
                        return;
                    }
                }
            }
        }
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                files.push(entry.path());
            } else if depth != Some(0) && !SKIPPED.iter().any(|s| name == *s) {
                self.watch_tree(&entry.path(), depth.map(|d| d - 1), files);
            }
        }
    }

    fn troubled(&mut self, dir: &Path, err: nix::errno::Errno) {
        if !self.troubled {
            self.troubled = true;
            let hint = if err == nix::errno::Errno::ENOSPC {
                " (fs.inotify.max_user_watches reached)"
            } else {
                ""
            };
            self.trouble = Some(format!(
                "restart_on_change: cannot watch {}: {err}{hint}; changes there restart nothing",
                dir.display()
            ));
        }
    }

    /// The commands whose globs match a change queued now (each once).
    pub(super) fn drain(&mut self) -> Vec<usize> {
        let mut changed = HashSet::new();
        loop {
            let events = match self.fd.inotify().read_events() {
                Ok(events) if !events.is_empty() => events,
                Err(nix::errno::Errno::EINTR) => continue,
                _ => break,
            };
            for event in events {
                // Events were lost: any file may have changed.
                if event.mask.contains(AddWatchFlags::IN_Q_OVERFLOW) {
                    changed.extend(self.watchers.iter().map(|w| w.command));
                    continue;
                }
                let Some((dir, depth)) = self.dirs.get(&event.wd).cloned() else {
                    continue;
                };
                if event.mask.contains(AddWatchFlags::IN_IGNORED) {
                    self.dirs.remove(&event.wd);
                    // Unless the directory came back and is watched anew.
                    if self.watched.get(&dir) == Some(&event.wd) {
                        self.watched.remove(&dir);
                    }
                    continue;
                }
                let Some(name) = event.name else { continue };
                let path = dir.join(&name);
                let mut paths = vec![path.clone()];
                let is_dir = event.mask.contains(AddWatchFlags::IN_ISDIR);
                if is_dir
                    && event
                        .mask
                        .intersects(AddWatchFlags::IN_CREATE | AddWatchFlags::IN_MOVED_TO)
                    && depth != Some(0)
                    && !SKIPPED.iter().any(|s| name == *s)
                {
                    // Files written in it before its watch was added have no event.
                    self.watch_tree(&path, depth.map(|d| d - 1), &mut paths);
                }
                for path in &paths {
                    changed.extend(self.matching(path));
                }
            }
        }
        let mut changed: Vec<usize> = changed.into_iter().collect();
        changed.sort_unstable();
        changed
    }

    /// The commands whose globs match `path`.
    fn matching<'a>(&'a self, path: &'a Path) -> impl Iterator<Item = usize> + 'a {
        self.watchers.iter().filter_map(move |watcher| {
            let relative = path.strip_prefix(&watcher.base).ok()?;
            watcher
                .globs
                .matches(&relative.to_string_lossy())
                .then_some(watcher.command)
        })
    }
}

/// Where a glob's directories start and how many levels below that it reaches: `src`
/// and every level for `src/**/*.rs`, `` and none for `Cargo.toml` or `*.rs`, `src` and
/// one for `src/*/mod.rs`.
fn reach(glob: &str) -> (PathBuf, Depth) {
    let start = literal_start(glob);
    let segments = glob.trim_start_matches("./").split('/').count();
    let depth = if glob.contains("**") {
        None
    } else {
        Some(segments - start.components().count() - 1)
    };
    (start, depth)
}

/// The directories of a glob before its first wildcard: `src` of `src/**/*.rs`, `` of `*.rs`.
fn literal_start(glob: &str) -> PathBuf {
    let glob = glob.trim_start_matches("./");
    let segments: Vec<&str> = glob.split('/').collect();
    segments[..segments.len() - 1]
        .iter()
        .take_while(|s| !s.contains(['*', '?', '[']))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_glob_is_watched_from_its_literal_start() {
        assert_eq!(literal_start("src/**/*.rs"), PathBuf::from("src"));
        assert_eq!(
            literal_start("./web/static/*.css"),
            PathBuf::from("web/static")
        );
        assert_eq!(literal_start("*.rs"), PathBuf::new());
        assert_eq!(literal_start("Cargo.toml"), PathBuf::new());
    }

    #[test]
    fn a_glob_reaches_as_deep_as_its_segments() {
        assert_eq!(reach("src/**/*.rs"), (PathBuf::from("src"), None));
        assert_eq!(reach("**/*.rs"), (PathBuf::new(), None));
        assert_eq!(reach("Cargo.toml"), (PathBuf::new(), Some(0)));
        assert_eq!(reach("./src/*.rs"), (PathBuf::from("src"), Some(0)));
        assert_eq!(reach("src/*/mod.rs"), (PathBuf::from("src"), Some(1)));
        assert_eq!(
            reach("web/static/app.css"),
            (PathBuf::from("web/static"), Some(0))
        );
    }

    /// `Cargo.toml` and `src/*.rs` watch two directories, not the tree below them.
    #[tokio::test(flavor = "current_thread")]
    async fn a_glob_without_double_star_watches_only_the_levels_it_names() {
        let dir = tether_os::testing::private_tempdir();
        let base = dir.path().to_path_buf();
        for sub in ["src/a/b", "docs/x", "src/c"] {
            tether_os::testing::private_dir(base.join(sub));
        }
        let globs = vec!["Cargo.toml".to_string(), "src/*.rs".to_string()];
        let watcher = ChangeWatcher::new(vec![(0, base.clone(), globs)]);
        let watcher = watcher.unwrap().unwrap();
        let mut watched: Vec<&PathBuf> = watcher.watched.keys().collect();
        watched.sort();
        assert_eq!(watched, [&base, &base.join("src")]);
        let deep = vec!["src/**/*.rs".to_string()];
        let watcher = ChangeWatcher::new(vec![(0, base.clone(), deep)])
            .unwrap()
            .unwrap();
        assert_eq!(watcher.watched.len(), 4, "{:?}", watcher.watched);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn files_in_a_new_directory_before_its_watch_and_a_touch_are_changes() {
        let dir = tether_os::testing::private_tempdir();
        let base = dir.path().to_path_buf();
        tether_os::testing::private_dir(base.join("src"));
        tether_os::testing::write_private(base.join("src/lib.rs"), "x");
        let wanted = vec![
            (1, base.clone(), vec!["src/**/*.rs".to_string()]),
            (2, base.clone(), vec!["*.toml".to_string()]),
        ];
        let mut watcher = ChangeWatcher::new(wanted).unwrap().unwrap();
        // `mkdir -p src/new/deeper && echo > src/new/deeper/x.rs` before the watcher reads:
        // no watch was on src/new when x.rs was written.
        tether_os::testing::private_dir(base.join("src/new/deeper"));
        tether_os::testing::write_private(base.join("src/new/deeper/x.rs"), "x");
        watcher.readiness().wait().await;
        assert_eq!(watcher.drain(), [1]);
        // `touch`: its attributes only.
        let status = std::process::Command::new("touch")
            .arg(base.join("src/lib.rs"))
            .status()
            .unwrap();
        assert!(status.success());
        watcher.readiness().wait().await;
        assert_eq!(watcher.drain(), [1]);
        assert_eq!(watcher.take_trouble(), None);
    }

    /// More events than the kernel queues (`fs.inotify.max_queued_events`): some are lost,
    /// so any file may have changed.
    #[tokio::test(flavor = "current_thread")]
    async fn lost_events_are_a_change_for_every_command() {
        let dir = crate::memory_tempdir();
        let base = dir.path().to_path_buf();
        let wanted = vec![
            (1, base.clone(), vec!["*.rs".to_string()]),
            (2, base.clone(), vec!["*.toml".to_string()]),
        ];
        let mut watcher = ChangeWatcher::new(wanted).unwrap().unwrap();
        let queued: usize = std::fs::read_to_string("/proc/sys/fs/inotify/max_queued_events")
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        for i in 0..=queued {
            tether_os::testing::write_private(base.join(format!("{i}.txt")), "");
        }
        watcher.readiness().wait().await;
        assert_eq!(watcher.drain(), [1, 2]);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_matching_file_written_in_a_new_directory_is_seen() {
        let dir = tether_os::testing::private_tempdir();
        let base = dir.path().to_path_buf();
        tether_os::testing::private_dir(base.join("src"));
        let wanted = vec![(3, base.clone(), vec!["src/**/*.rs".to_string()])];
        let mut watcher = ChangeWatcher::new(wanted).unwrap().unwrap();
        tether_os::testing::write_private(base.join("src/notes.txt"), "x");
        tether_os::testing::write_private(base.join("top.rs"), "x");
        tether_os::testing::private_dir(base.join("src/app"));
        watcher.readiness().wait().await;
        assert_eq!(watcher.drain(), Vec::<usize>::new());
        tether_os::testing::write_private(base.join("src/app/mod.rs"), "x");
        watcher.readiness().wait().await;
        assert_eq!(watcher.drain(), [3]);
    }
}
