//! Knowing when journals change, without looking: one inotify descriptor watching
//! `sessions/`, each session directory and each command that has no result yet. Its readiness
//! wakes the event loop; [`JournalWatcher::drain`] says what changed ([`change_of`]).
//!
//! A command's watch is removed once its result is read: thousands of ended commands cost no
//! watch (the kernel allows `/proc/sys/fs/inotify/max_user_watches` per user).

pub mod change;

use std::collections::HashMap;
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use nix::errno::Errno;
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, WatchDescriptor};
use thiserror::Error;
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

pub use change::{Change, JournalFile, Watched, change_of};

#[derive(Debug, Error)]
pub enum WatchError {
    #[error("inotify is unavailable ({0})")]
    Unavailable(std::io::Error),
    #[error("the inotify watches are used up (fs.inotify.max_user_watches; raise it with sysctl)")]
    Exhausted,
    /// The directory went away (or is not one) before it could be watched.
    #[error("cannot watch {path}: {source}")]
    Gone {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

pub struct JournalWatcher {
    fd: AsyncInotify,
    by_wd: HashMap<WatchDescriptor, Watched>,
    by_path: HashMap<PathBuf, WatchDescriptor>,
}

/// nix's inotify instance, as tokio's reactor takes a descriptor: by its number.
struct Instance(Inotify);

impl AsRawFd for Instance {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_fd().as_raw_fd()
    }
}

/// A non-blocking inotify instance registered with tokio's reactor (the journals' watcher's
/// and the launcher's `restart_on_change`); needs a tokio runtime.
pub struct AsyncInotify(Rc<AsyncFd<Instance>>);

impl AsyncInotify {
    pub fn new() -> std::io::Result<AsyncInotify> {
        let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC)?;
        // SAFETY: the `Inotify` owns its descriptor, never replaces it and closes it only when
        // dropped, with the `AsyncFd` that holds it.
        let fd = unsafe { AsyncFd::register_with_interest(Instance(inotify), Interest::READABLE) }?;
        Ok(AsyncInotify(Rc::new(fd)))
    }

    pub fn inotify(&self) -> &Inotify {
        &self.0.get_ref().0
    }

    /// The descriptor's readiness, owned: waited on in the event loop while the watcher is
    /// borrowed elsewhere.
    pub fn readiness(&self) -> Readiness {
        Readiness(Rc::clone(&self.0))
    }
}

impl JournalWatcher {
    /// A watcher watching nothing yet; needs a tokio runtime.
    pub fn new() -> Result<JournalWatcher, WatchError> {
        Ok(JournalWatcher {
            fd: AsyncInotify::new().map_err(WatchError::Unavailable)?,
            by_wd: HashMap::new(),
            by_path: HashMap::new(),
        })
    }

    /// Watches a directory for what matters of it as `watched`; watching it again is a no-op.
    pub fn watch(&mut self, watched: Watched) -> Result<(), WatchError> {
        if self.by_path.contains_key(watched.path()) {
            return Ok(());
        }
        // An entry made (or renamed) in the directory, which every watch wants to know.
        let made = AddWatchFlags::IN_CREATE | AddWatchFlags::IN_MOVED_TO;
        let entries = made | AddWatchFlags::IN_MOVED_FROM | AddWatchFlags::IN_DELETE;
        let flags = AddWatchFlags::IN_ONLYDIR
            | AddWatchFlags::IN_DONT_FOLLOW
            | match watched {
                Watched::Sessions(_) => entries,
                // And its launcher's journal, appended to in place.
                Watched::Session(_) => entries | AddWatchFlags::IN_MODIFY,
                // A result is written whole and renamed into place.
                Watched::Ending(_) => made,
                Watched::Command(_) => {
                    made | AddWatchFlags::IN_MODIFY | AddWatchFlags::IN_CLOSE_WRITE
                }
            };
        let wd = match self.fd.inotify().add_watch(watched.path(), flags) {
            Ok(wd) => wd,
            Err(Errno::ENOSPC) => return Err(WatchError::Exhausted),
            Err(err) => {
                return Err(WatchError::Gone {
                    path: watched.path().to_path_buf(),
                    source: err.into(),
                });
            }
        };
        // One inode watched under two names (a directory renamed then seen again) keeps one
        // name: the latest.
        if let Some(old) = self.by_wd.insert(wd, watched.clone()) {
            self.by_path.remove(old.path());
        }
        self.by_path.insert(watched.path().to_path_buf(), wd);
        Ok(())
    }

    pub fn unwatch(&mut self, path: &Path) {
        if let Some(wd) = self.by_path.remove(path) {
            self.by_wd.remove(&wd);
            // Fails only if the kernel dropped it already (the directory was removed).
            let _ = self.fd.inotify().rm_watch(wd);
        }
    }

    /// How many directories are watched.
    pub fn watching(&self) -> usize {
        self.by_wd.len()
    }

    /// The descriptor's readiness (see [`AsyncInotify::readiness`]).
    pub fn readiness(&self) -> Readiness {
        self.fd.readiness()
    }

    /// Every change queued now, in the order the kernel saw them.
    pub fn drain(&mut self) -> Vec<Change> {
        let mut changes = Vec::new();
        loop {
            let events = match self.fd.inotify().read_events() {
                Ok(events) if !events.is_empty() => events,
                Err(Errno::EINTR) => continue,
                // EAGAIN: nothing more queued. Anything else would repeat: stop here.
                _ => break,
            };
            for event in events {
                let flags = event.mask;
                if flags.contains(AddWatchFlags::IN_IGNORED) {
                    // The kernel dropped the watch (its directory was removed).
                    if let Some(gone) = self.by_wd.remove(&event.wd) {
                        self.by_path.remove(gone.path());
                    }
                    continue;
                }
                let name = event.name.as_deref().and_then(|n| n.to_str());
                let overflow = Watched::Sessions(PathBuf::new());
                let watched = match self.by_wd.get(&event.wd) {
                    Some(watched) => watched,
                    None if flags.contains(AddWatchFlags::IN_Q_OVERFLOW) => &overflow,
                    None => continue,
                };
                changes.extend(change_of(watched, flags, name));
            }
        }
        changes
    }
}

/// Resolves when an [`AsyncInotify`] has events queued.
pub struct Readiness(Rc<AsyncFd<Instance>>);

impl Readiness {
    /// Waits for events; the readiness is cleared, so the caller must then drain them all.
    pub async fn wait(&self) {
        if let Ok(mut guard) = self.0.readable().await {
            guard.clear_ready();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "current_thread")]
    async fn a_new_command_and_its_result_are_seen_and_an_ended_one_unwatched() {
        let dir = crate::testing::private_tempdir();
        let session = dir.path().join("agent");
        crate::testing::private_dir(&session);
        let mut watcher = JournalWatcher::new().unwrap();
        watcher.watch(Watched::Session(session.clone())).unwrap();
        let command = session.join("01-ls");
        crate::testing::private_dir(&command);
        watcher.readiness().wait().await;
        assert_eq!(watcher.drain(), [Change::CommandAppeared(command.clone())]);
        watcher.watch(Watched::Command(command.clone())).unwrap();
        crate::testing::write_private(command.join(".result.json.1.tmp"), b"{}");
        std::fs::rename(
            command.join(".result.json.1.tmp"),
            command.join("result.json"),
        )
        .unwrap();
        watcher.readiness().wait().await;
        assert_eq!(
            watcher.drain(),
            [Change::Journal {
                dir: command.clone(),
                file: JournalFile::Result
            }]
        );
        watcher.unwatch(&command);
        assert_eq!(watcher.watching(), 1);
        crate::testing::write_private(command.join("events.jsonl"), b"x");
        assert_eq!(watcher.drain(), []);
    }

    #[test]
    fn a_missing_directory_is_gone_not_fatal() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .build()
            .unwrap();
        let _inside = runtime.enter();
        let mut watcher = JournalWatcher::new().unwrap();
        let missing = Watched::Command("/nonexistent/tether/01-x".into());
        assert!(matches!(
            watcher.watch(missing),
            Err(WatchError::Gone { .. })
        ));
        assert_eq!(watcher.watching(), 0);
    }
}
