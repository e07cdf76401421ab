//! `restart_on_change`: the files under each such command's directory, watched with inotify,
//! matched against its globs. One descriptor for all; a directory is watched once whatever
//! how many commands look at it; a directory created later is watched as it appears. The
//! launcher debounces what is seen here.
//!
//! Only the directories a glob can reach are watched: from its literal start (`src` of
//! `src/**/*.rs`) down, leaving out `.git`, `target` and `node_modules` below it (thousands
//! of directories that a build writes, each a watch of the user's
//! `fs.inotify.max_user_watches`).

use std::collections::HashMap;
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, WatchDescriptor};
use tether_core::launcher::GlobSet;
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

/// Directories never descended into below a glob's start.
const SKIPPED: [&str; 3] = [".git", "target", "node_modules"];

struct Instance(Inotify);

impl AsRawFd for Instance {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_fd().as_raw_fd()
    }
}

/// A command's globs and the directory they are relative to.
struct Watcher {
    command: usize,
    base: PathBuf,
    globs: GlobSet,
}

pub(super) struct ChangeWatcher {
    fd: Rc<AsyncFd<Instance>>,
    dirs: HashMap<WatchDescriptor, PathBuf>,
    watchers: Vec<Watcher>,
}

/// The descriptor's readiness, owned, for the event loop's `select!`.
pub(super) struct Readiness(Rc<AsyncFd<Instance>>);

impl Readiness {
    pub(super) async fn wait(&self) {
        if let Ok(mut guard) = self.0.readable().await {
            guard.clear_ready();
        }
    }
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
        let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC)
            .map_err(|e| format!("restart_on_change: inotify is unavailable ({e})"))?;
        // SAFETY: the `Inotify` owns its descriptor and closes it only when dropped, with the
        // `AsyncFd` that holds it.
        let fd = unsafe { AsyncFd::register_with_interest(Instance(inotify), Interest::READABLE) }
            .map_err(|e| format!("restart_on_change: inotify is unavailable ({e})"))?;
        let mut watcher = ChangeWatcher {
            fd: Rc::new(fd),
            dirs: HashMap::new(),
            watchers: Vec::new(),
        };
        for (command, base, globs) in wanted {
            // The config checked them.
            let Ok(set) = GlobSet::new(&globs) else {
                continue;
            };
            for glob in &globs {
                watcher.watch_tree(&base.join(literal_start(glob)));
            }
            watcher.watchers.push(Watcher {
                command,
                base,
                globs: set,
            });
        }
        Ok(Some(watcher))
    }

    pub(super) fn readiness(&self) -> Readiness {
        Readiness(Rc::clone(&self.fd))
    }

    /// A directory and those below it (but [`SKIPPED`]); one that cannot be watched is
    /// left out (gone, or the watches used up).
    fn watch_tree(&mut self, dir: &Path) {
        if self.dirs.values().any(|d| d == dir) {
            return;
        }
        let flags = AddWatchFlags::IN_ONLYDIR
            | AddWatchFlags::IN_CLOSE_WRITE
            | AddWatchFlags::IN_CREATE
            | AddWatchFlags::IN_DELETE
            | AddWatchFlags::IN_MOVED_TO
            | AddWatchFlags::IN_MOVED_FROM;
        let Ok(wd) = self.fd.get_ref().0.add_watch(dir, flags) else {
            return;
        };
        self.dirs.insert(wd, dir.to_path_buf());
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let skipped = SKIPPED.iter().any(|s| name == *s);
            if !skipped && entry.file_type().is_ok_and(|t| t.is_dir()) {
                self.watch_tree(&entry.path());
            }
        }
    }

    /// The commands whose globs match a change queued now (each once).
    pub(super) fn drain(&mut self) -> Vec<usize> {
        let mut changed = Vec::new();
        loop {
            let events = match self.fd.get_ref().0.read_events() {
                Ok(events) if !events.is_empty() => events,
                Err(nix::errno::Errno::EINTR) => continue,
                _ => break,
            };
            for event in events {
                let Some(dir) = self.dirs.get(&event.wd).cloned() else {
                    continue;
                };
                if event.mask.contains(AddWatchFlags::IN_IGNORED) {
                    self.dirs.remove(&event.wd);
                    continue;
                }
                let Some(name) = event.name else { continue };
                let path = dir.join(&name);
                let is_dir = event.mask.contains(AddWatchFlags::IN_ISDIR);
                if is_dir
                    && event
                        .mask
                        .intersects(AddWatchFlags::IN_CREATE | AddWatchFlags::IN_MOVED_TO)
                    && !SKIPPED.iter().any(|s| name == *s)
                {
                    self.watch_tree(&path);
                }
                for watcher in &self.watchers {
                    let Ok(relative) = path.strip_prefix(&watcher.base) else {
                        continue;
                    };
                    let relative = relative.to_string_lossy();
                    if watcher.globs.matches(&relative) && !changed.contains(&watcher.command) {
                        changed.push(watcher.command);
                    }
                }
            }
        }
        changed
    }
}

/// The directories of a glob before its first wildcard: `src` of `src/**/*.rs`, `` of `*.rs`.
fn literal_start(glob: &str) -> PathBuf {
    let glob = glob.trim_start_matches("./");
    let segments: Vec<&str> = glob.split('/').collect();
    let literal = segments[..segments.len() - 1]
        .iter()
        .take_while(|s| !s.contains(['*', '?', '[']))
        .copied()
        .collect::<Vec<_>>();
    literal.iter().collect()
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

    #[tokio::test(flavor = "current_thread")]
    async fn a_matching_file_written_in_a_new_directory_is_seen() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().to_path_buf();
        std::fs::create_dir(base.join("src")).unwrap();
        let wanted = vec![(3, base.clone(), vec!["src/**/*.rs".to_string()])];
        let mut watcher = ChangeWatcher::new(wanted).unwrap().unwrap();
        std::fs::write(base.join("src/notes.txt"), "x").unwrap();
        std::fs::write(base.join("top.rs"), "x").unwrap();
        std::fs::create_dir(base.join("src/app")).unwrap();
        watcher.readiness().wait().await;
        assert_eq!(watcher.drain(), Vec::<usize>::new());
        std::fs::write(base.join("src/app/mod.rs"), "x").unwrap();
        watcher.readiness().wait().await;
        assert_eq!(watcher.drain(), [3]);
    }
}
