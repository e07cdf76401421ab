//! Retention after a shell shim's command: the shim must hand its caller the command's exit
//! status at once, as the shell would, so retention runs in a process of its own
//! (`tether prune --retention`), detached: its own session, stdio on /dev/null, every
//! inherited descriptor closed at exec, and not our child (a double fork), so nothing waits
//! for it, not even a program the shim then execs. It ends by itself when the prune is done.
//!
//! At most one a minute per state directory: a stamp file's mtime says when the last one was
//! started, and a lock on it makes concurrent shims agree on who starts the next.
//!
//! libc for the double fork (a raw `clone`, `close_range`, `_exit`), which runs between
//! fork and exec; rustix's flock, as nix's is deprecated for a `Flock` that takes the
//! descriptor over.

use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime};

use tether_protocol::names::PRUNE_COMM;

use super::{print_failures, retain};

pub const STAMP_FILE: &str = "retention.stamp";
/// The least time between two retention runs started by shims on one state directory.
pub const INTERVAL: Duration = Duration::from_secs(60);

/// After a shim's command: starts retention on `state` in the background if none was
/// started in the last [`INTERVAL`], never removing `just_ended` (the command's session).
/// Never fails and never prints: the command's streams are the caller's.
pub fn after_command(state: &Path, just_ended: Option<&str>) {
    if !matches!(claim(state, SystemTime::now()), Ok(true)) {
        return;
    }
    let _ = spawn(state, just_ended);
}

/// Whether this call is the one to start retention now; if so the stamp says so from now
/// on. The stamp is created private and never followed if it is a link. Every command can
/// reach it (`$TETHER_STATE_DIR/retention.stamp`): a FIFO put in its place would hold an
/// open for writing until a reader came, after every later command, so it is opened
/// non-blocking and anything but a regular file of ours is left alone (no retention run).
fn claim(state: &Path, now: SystemTime) -> io::Result<bool> {
    let path = state.join(STAMP_FILE);
    let open = |create_new: bool| {
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(create_new)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
            .open(&path)
    };
    let file = match open(true) {
        // The first stamp: nothing ran before.
        Ok(_) => return Ok(true),
        Err(err) if err.kind() == io::ErrorKind::AlreadyExists => open(false)?,
        Err(err) => return Err(err),
    };
    let meta = file.metadata()?;
    if !meta.is_file() || meta.uid() != nix::unistd::geteuid().as_raw() {
        return Ok(false);
    }
    // Another shim is deciding: it starts the run if one is due.
    if rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive).is_err() {
        return Ok(false);
    }
    let last = file.metadata()?.modified()?;
    if !due(last, now) {
        return Ok(false);
    }
    file.set_modified(now)?;
    Ok(true)
}

/// Whether a run started at `last` is far enough back. A stamp in the future (the clock
/// was set back) does not hold retention off for ever.
fn due(last: SystemTime, now: SystemTime) -> bool {
    match now.duration_since(last) {
        Ok(since) => since >= INTERVAL,
        Err(ahead) => ahead.duration() > INTERVAL,
    }
}

fn spawn(state: &Path, just_ended: Option<&str>) -> io::Result<()> {
    let mut command = Command::new(std::env::current_exe()?);
    command
        .arg("--state-dir")
        .arg(state)
        .args(["prune", "--retention"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if let Some(session) = just_ended {
        command.args(["--protect", session]);
    }
    // SAFETY: only raw system calls (setsid, clone, _exit, close_range) run between fork and
    // exec; they are async-signal-safe and touch no memory shared with the parent (a raw
    // clone, not libc's fork, whose atfork handlers may take locks another thread held).
    unsafe {
        command.pre_exec(|| {
            // Out of the caller's session: its terminal's signals are not for this.
            nix::unistd::setsid()?;
            // The second fork: the process `spawn` made exits now, and the one that goes on
            // to exec belongs to no one here (it is re-parented to the nearest reaper).
            match libc::syscall(libc::SYS_clone, libc::SIGCHLD as libc::c_long, 0, 0, 0, 0) {
                -1 => return Err(io::Error::last_os_error()),
                0 => {}
                _ => libc::_exit(0),
            }
            // Descriptors the caller left open across exec (a pipe an agent waits on for
            // its end) must not be held by a prune that may take a while.
            libc::syscall(
                libc::SYS_close_range,
                3u32,
                u32::MAX,
                libc::CLOSE_RANGE_CLOEXEC,
            );
            Ok(())
        });
    }
    let mut child = command.spawn()?;
    // The first child exits at once: reaped here so it is not left a zombie.
    child.wait()?;
    Ok(())
}

/// `tether prune --retention`: applies retention (the config's or its default) as after a
/// command, quietly; `protect`: a session never removed. Returns the exit code.
pub fn main(state: &Path, protect: Option<&str>) -> i32 {
    let _ = nix::sys::prctl::set_name(PRUNE_COMM);
    let _ = tether_os::cgroup::Hierarchy::find().and_then(tether_os::cgroup::Hierarchy::enter);
    match retain(state, protect) {
        Ok(None) => 0,
        Ok(Some(outcome)) if outcome.failed.is_empty() => 0,
        Ok(Some(outcome)) => {
            print_failures(&outcome);
            1
        }
        Err(err) => {
            eprintln!("tether: retention not applied: {err}");
            2
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::File;

    #[test]
    fn once_a_minute() {
        let tmp = tether_os::testing::private_tempdir();
        let t0 = SystemTime::now();
        assert!(claim(tmp.path(), t0).unwrap(), "the first run");
        assert!(!claim(tmp.path(), t0 + Duration::from_secs(10)).unwrap());
        assert!(claim(tmp.path(), t0 + INTERVAL + Duration::from_secs(1)).unwrap());
        assert!(!claim(tmp.path(), t0 + INTERVAL + Duration::from_secs(2)).unwrap());
        let meta = std::fs::metadata(tmp.path().join(STAMP_FILE)).unwrap();
        assert_eq!(meta.mode() & 0o777, 0o600);
        // A clock set back by hours does not hold it off.
        assert!(due(t0 + Duration::from_secs(3600), t0));
        assert!(!due(t0 + Duration::from_secs(5), t0));
    }

    #[test]
    fn a_stamp_that_is_a_link_is_not_followed() {
        let tmp = tether_os::testing::private_tempdir();
        let target = tmp.path().join("elsewhere");
        tether_os::testing::write_private(&target, "keep");
        std::os::unix::fs::symlink(&target, tmp.path().join(STAMP_FILE)).unwrap();
        assert!(claim(tmp.path(), SystemTime::now()).is_err());
        assert_eq!(std::fs::read(&target).unwrap(), b"keep");
    }

    #[test]
    fn a_stamp_that_is_a_fifo_is_not_waited_on() {
        let tmp = tether_os::testing::private_tempdir();
        let fifo = tmp.path().join(STAMP_FILE);
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        // No reader: a blocking open for writing would wait here for good. (ENXIO.)
        assert!(claim(tmp.path(), SystemTime::now()).is_err());
        // With a reader the open succeeds, but a FIFO is not a stamp: no retention run.
        let reader = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&fifo)
            .unwrap();
        assert!(!claim(tmp.path(), SystemTime::now()).unwrap());
        drop(reader);
    }

    #[test]
    fn a_lock_held_elsewhere_means_someone_else_decides() {
        let tmp = tether_os::testing::private_tempdir();
        let t0 = SystemTime::now();
        assert!(claim(tmp.path(), t0).unwrap());
        let other = File::open(tmp.path().join(STAMP_FILE)).unwrap();
        rustix::fs::flock(&other, rustix::fs::FlockOperation::LockExclusive).unwrap();
        assert!(!claim(tmp.path(), t0 + INTERVAL * 2).unwrap());
    }
}
