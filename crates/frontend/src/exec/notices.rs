//! Where `tether exec`'s own lines go. By default, stderr (`tether: …`). The shell shim
//! stands in for a shell whose caller (an agent, a script) reads the command's stderr as the
//! command's own: once the command runs, nothing of tether's may be in it. The shim makes
//! its lines *notices* instead, appended to `shim-notices.log` in the state directory (the
//! operator's, private), unless the operator asked for them on stderr
//! (`TETHER_SHIM_NOTICES=stderr`). What they tell is in the command's journal too where it
//! has one: a stop is a `signal_sent` event with who sent it, a cap an `output_truncated`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The file of the shim's notices, in the state directory.
pub const NOTICES_FILE: &str = "shim-notices.log";
/// `stderr`: the shim's lines go to stderr, as `tether exec`'s do.
pub const NOTICES_ENV: &str = "TETHER_SHIM_NOTICES";
/// A notices file past this size takes no more lines (it is the user's to remove).
const NOTICES_LIMIT: u64 = 1 << 20;

/// Set once by the shim: where its lines go instead of stderr.
static NOTICES: OnceLock<PathBuf> = OnceLock::new();

/// From now on, this process's lines go to the notices file in `state_dir`, unless
/// [`NOTICES_ENV`] says `stderr`.
pub fn divert_to(state_dir: &Path) {
    if std::env::var_os(NOTICES_ENV).is_some_and(|v| v == "stderr") {
        return;
    }
    let _ = NOTICES.set(state_dir.join(NOTICES_FILE));
}

/// Says `text` as one line: diverted, as a line of the notices file; else, or when that
/// file cannot take it (a state directory that is missing, not private, full or read-only:
/// the case where the command runs unjournaled, which must not go unsaid), `tether: TEXT`
/// on stderr in one write, so that it never lands inside a line of the command's stderr,
/// which a copy thread writes at the same time.
pub fn say(text: &str) {
    if NOTICES
        .get()
        .is_some_and(|path| append(path, text).is_some())
    {
        return;
    }
    let line = format!("tether: {text}\n");
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

/// Appends `text` to the notices file at `path`, in a state directory that is the user's
/// alone; `None` if it could not. A file at its limit takes nothing, silently: it was said
/// there before.
fn append(path: &Path, text: &str) -> Option<()> {
    tether_os::journal::secure::check_for_reading(path.parent()?).ok()?;
    let mut file = tether_os::journal::secure::open_private(path, true).ok()?;
    if file.metadata().is_ok_and(|m| m.len() >= NOTICES_LIMIT) {
        return Some(());
    }
    let now = tether_protocol::units::iso_utc(tether_os::clock::now_ms());
    let line = format!(
        "{now} pid {} in {}: {}\n",
        std::process::id(),
        std::env::current_dir()
            .map(|d| d.display().to_string())
            .unwrap_or_default(),
        text.replace('\n', " ")
    );
    file.write_all(line.as_bytes()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_notice_is_one_line_of_a_private_file_that_stops_growing_at_its_limit() {
        let dir = tether_os::testing::private_tempdir();
        let path = dir.path().join(NOTICES_FILE);
        assert!(append(&path, "stopped by the operator:\nSIGTERM").is_some());
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 1, "{text}");
        assert!(
            text.ends_with("stopped by the operator: SIGTERM\n"),
            "{text}"
        );
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        tether_os::testing::write_private(&path, vec![b'x'; NOTICES_LIMIT as usize]);
        assert!(append(&path, "more").is_some());
        assert_eq!(std::fs::metadata(&path).unwrap().len(), NOTICES_LIMIT);
    }

    #[test]
    fn a_fifo_in_its_place_takes_nothing_and_holds_nothing() {
        let dir = tether_os::testing::private_tempdir();
        let path = dir.path().join(NOTICES_FILE);
        nix::unistd::mkfifo(&path, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        assert!(append(&path, "never blocks").is_none());
    }

    #[test]
    fn a_state_directory_others_may_write_takes_no_notice() {
        let tmp = tether_os::testing::private_tempdir();
        let state = tmp.path().join("state");
        tether_os::testing::private_dir(&state);
        tether_os::testing::loosen(&state, 0o777);
        let path = state.join(NOTICES_FILE);
        assert!(append(&path, "to stderr instead").is_none());
        assert!(!path.exists());
    }
}
