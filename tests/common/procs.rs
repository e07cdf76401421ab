//! Finding, and if need be killing, every process a test started.
//!
//! Each test sets a unique `TEST_TAG_TETHER` on the process it starts; the broker and the whole
//! command tree inherit it. Not a `TETHER_*` name: a `[notify] command` run gets none of those
//! (see `shim::outside`), and its leftovers must be found too. A process counts as alive
//! unless `/proc/PID/stat` is gone or says `Z`/`X`: PID 1 on the test machine does not reap
//! orphans, so zombies linger.

use std::fs;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

pub const TAG_VAR: &str = "TEST_TAG_TETHER";

/// How long processes get to disappear before a leftover is a failure: generous, for a
/// machine under load (two cores, a dozen builders); a test that passes waits only as long
/// as its processes take.
pub const LEFTOVER_WINDOW: Duration = Duration::from_secs(10);

/// A live process carrying a test's tag.
#[derive(Debug, Clone)]
pub struct Tagged {
    pub pid: i32,
    pub cmdline: String,
}

/// The state letter of `/proc/PID/stat`, or `None` when the process is gone.
pub fn state(pid: i32) -> Option<u8> {
    tether::procfs::read_stat(pid).map(|s| s.state)
}

/// True when `pid` no longer runs: absent, or a zombie nobody reaped.
pub use tether::procfs::is_gone;

pub fn cmdline(pid: i32) -> String {
    fs::read(format!("/proc/{pid}/cmdline"))
        .map(|raw| {
            String::from_utf8_lossy(&raw)
                .trim_end_matches('\0')
                .replace('\0', " ")
        })
        .unwrap_or_default()
}

/// Every live process whose environment holds `TEST_TAG_TETHER=<tag>`.
pub fn tagged(tag: &str) -> Vec<Tagged> {
    let needle = format!("{TAG_VAR}={tag}");
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(environ) = fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        if environ.split(|&b| b == 0).any(|v| v == needle.as_bytes()) && !is_gone(pid) {
            found.push(Tagged {
                pid,
                cmdline: cmdline(pid),
            });
        }
    }
    found
}

/// SIGKILLs, by pid, every live process carrying `tag`; returns what it found.
pub fn kill_tagged(tag: &str) -> Vec<Tagged> {
    let mut all = Vec::new();
    // A process forking as it dies may leave a fresh child; a few rounds catch those.
    for _ in 0..10 {
        let round = tagged(tag);
        if round.is_empty() {
            break;
        }
        for p in &round {
            signal(p.pid, Signal::SIGKILL);
        }
        all.extend(round);
        std::thread::sleep(Duration::from_millis(20));
    }
    all
}

/// Sends `sig` to one process, by pid. Errors (the process already went) are ignored.
pub fn signal(pid: i32, sig: Signal) {
    let _ = kill(Pid::from_raw(pid), sig);
}

/// Fails the test if a process carrying `tag` is still alive after [`LEFTOVER_WINDOW`];
/// leftovers are killed first so that a failing test leaves nothing behind either.
pub fn assert_none_left(tag: &str) {
    let deadline = Instant::now() + LEFTOVER_WINDOW;
    loop {
        if tagged(tag).is_empty() {
            return;
        }
        if Instant::now() >= deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let leftovers = kill_tagged(tag);
    if leftovers.is_empty() {
        return;
    }
    let list: Vec<String> = leftovers
        .iter()
        .map(|p| format!("{} `{}`", p.pid, p.cmdline))
        .collect();
    panic!(
        "processes still alive {LEFTOVER_WINDOW:?} after the test (now killed): {}",
        list.join(", ")
    );
}

/// Waits until every pid in `pids` is gone; returns those still alive at `timeout`.
pub fn wait_gone(pids: &[i32], timeout: Duration) -> Vec<i32> {
    let deadline = Instant::now() + timeout;
    loop {
        let alive: Vec<i32> = pids.iter().copied().filter(|&p| !is_gone(p)).collect();
        if alive.is_empty() || Instant::now() >= deadline {
            return alive;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The signal set `field` (`SigPnd`, `ShdPnd`, `SigBlk`, `SigIgn`, `SigCgt`) of
/// `/proc/PID/status`, as a mask (bit N-1 for signal N); `None` once `pid` is gone.
fn signal_set(pid: i32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))?;
    u64::from_str_radix(line.trim(), 16).ok()
}

fn has(mask: Option<u64>, sig: Signal) -> bool {
    mask.is_some_and(|m| m & (1 << (sig as i32 - 1)) != 0)
}

/// Whether `pid` ignores `sig` (`SIG_IGN`): the kernel discards it as it is sent.
pub fn ignores(pid: i32, sig: Signal) -> bool {
    has(signal_set(pid, "SigIgn"), sig)
}

/// Whether `sig` was sent to `pid` (or its thread group) and is not yet acted on: a signal
/// sent before this is either pending here or already done its work.
pub fn pending(pid: i32, sig: Signal) -> bool {
    has(signal_set(pid, "SigPnd"), sig) || has(signal_set(pid, "ShdPnd"), sig)
}
