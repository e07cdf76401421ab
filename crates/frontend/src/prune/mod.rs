//! `tether prune` and `[retention]`: keeping the state directory bounded by removing whole
//! sessions, oldest first, never one in which anything may still run.
//!
//! [`plan`] decides (pure, unit-tested); [`scan`] reads what it decides on from the disk;
//! [`remove`] deletes one session without following links. This file ties them together for
//! the command line and for the end of a session.

pub mod detached;
pub mod entry;
pub mod plan;
pub mod remove;
pub mod scan;

use std::ffi::OsString;
use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::time::Duration;

use thiserror::Error;

pub use plan::{Candidate, Liveness, Rules, plan};

use tether_config::user::{UserConfig, load_user, user_config_path};
use tether_model::output::one_line;
use tether_os::clock::now_ms;
use tether_os::journal::secure::{UnsafeDir, check_for_reading, open_dir_nofollow, unfit_dir};
use tether_os::journal::{sessions_dir, state_dir};
use tether_protocol::units::{format_age, format_size};

#[derive(Debug, Error)]
pub enum PruneError {
    #[error(transparent)]
    UnsafeStateDir(#[from] UnsafeDir),
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// What one prune did (or, dry, would do).
#[derive(Debug, Default)]
pub struct Outcome {
    /// Sessions removed (or to remove), oldest first.
    pub removed: Vec<Candidate>,
    /// Sessions that were to go but could not, with why.
    pub failed: Vec<(Candidate, String)>,
    /// Live sessions a rule would have removed, with why they are live.
    pub kept_live: Vec<Candidate>,
    pub unmet: Vec<String>,
    /// Sessions and bytes left.
    pub left: (usize, u64),
}

/// Applies `rules` to the sessions under `state`: removes what they say (or, `dry_run`, only
/// says it), never a live session nor `protect`.
pub fn prune(
    state: &Path,
    rules: &Rules,
    dry_run: bool,
    protect: Option<&str>,
    now_ms: u64,
) -> Result<Outcome, PruneError> {
    check_for_reading(state)?;
    let path = sessions_dir(state);
    let Some(sessions) = open_sessions(&path)? else {
        return Ok(Outcome::default());
    };
    let found = scan::scan_sessions(&sessions, now_ms).map_err(|source| PruneError::Io {
        path: path.clone(),
        source,
    })?;
    let (names, candidates): (Vec<OsString>, Vec<Candidate>) = found.into_iter().unzip();
    let decided = plan(&candidates, rules, now_ms, protect);
    let mut outcome = Outcome {
        kept_live: decided
            .kept_live
            .iter()
            .map(|&i| candidates[i].clone())
            .collect(),
        unmet: decided.unmet,
        ..Outcome::default()
    };
    for &i in &decided.remove {
        let candidate = candidates[i].clone();
        if dry_run {
            outcome.removed.push(candidate);
            continue;
        }
        match remove::remove_session(&sessions, &names[i], now_ms) {
            Ok(()) => outcome.removed.push(candidate),
            Err(remove::RemoveError::AlreadyGone) => {}
            Err(err) => outcome.failed.push((candidate, err.to_string())),
        }
    }
    let left = candidates.iter().filter(|c| !outcome.removed.contains(c));
    outcome.left = (left.clone().count(), left.map(|c| c.size).sum());
    Ok(outcome)
}

/// `sessions/`, opened without following a link and checked as the state directory is;
/// `None` when there is none yet.
fn open_sessions(path: &Path) -> Result<Option<OwnedFd>, PruneError> {
    let io_error = |source: io::Error| PruneError::Io {
        path: path.to_path_buf(),
        source,
    };
    let fd = match open_dir_nofollow(path) {
        Ok(fd) => fd,
        Err(nix::errno::Errno::ENOENT) => return Ok(None),
        Err(nix::errno::Errno::ELOOP) => {
            return Err(UnsafeDir::Symlink {
                path: path.to_path_buf(),
            }
            .into());
        }
        Err(err) => return Err(io_error(err.into())),
    };
    let stat = nix::sys::stat::fstat(&fd).map_err(|err| io_error(err.into()))?;
    if unfit_dir(&stat, 0o022).is_some() {
        // check_for_reading said why a moment ago; this is the same directory or a swap.
        return Err(io_error(io::Error::other(
            "not a private directory of yours",
        )));
    }
    Ok(Some(fd))
}

/// `tether prune`: the rules from the flags, or `[retention]` when no flag is given.
/// Returns the exit code: 0 done, 1 when a session could not be removed, 2 for bad input.
pub fn main(state: Option<&Path>, flags: Rules, dry_run: bool) -> i32 {
    if !dry_run {
        remove_stale_sockets();
    }
    let pruned = || {
        let rules = match flags.is_empty() {
            false => flags,
            true => match user_config()?.and_then(|(c, file)| Some((c.retention?, file))) {
                Some((rules, file)) if !rules.is_empty() => {
                    println!(
                        "applying [retention] from {}: {}",
                        file.display(),
                        rules.describe()
                    );
                    rules
                }
                _ => {
                    return Err(format!(
                        "prune needs a rule: --older-than AGE (e.g. 30d), --keep N, --max-size SIZE (e.g. 2G), and --dry-run to see first; or set them in a [retention] section of {}",
                        user_config_path().map_or_else(
                            || "$XDG_CONFIG_HOME/tether/config.toml".into(),
                            |p| p.display().to_string()
                        )
                    ));
                }
            },
        };
        let state = state_dir(state).map_err(|err| err.to_string())?;
        let now = now_ms();
        let outcome = prune(&state, &rules, dry_run, None, now).map_err(|err| err.to_string())?;
        print_outcome(&outcome, dry_run, now);
        Ok(if outcome.failed.is_empty() { 0 } else { 1 })
    };
    pruned().unwrap_or_else(|err: String| {
        eprintln!("tether: {err}");
        2
    })
}

/// The user config and its path; `None` without a file.
fn user_config() -> Result<Option<(UserConfig, PathBuf)>, String> {
    let Some(path) = user_config_path() else {
        return Ok(None);
    };
    let config = load_user(&path).map_err(|err| err.to_string())?;
    Ok(config.map(|config| (config, path)))
}

/// Applies the rules retention applies on its own (`[retention]`'s, its default when the
/// user config sets none: see [`tether_config::user`]) to `state`, never removing `protect`
/// nor a live session; `None` when retention is turned off. The error says why it was not
/// applied.
pub fn retain(state: &Path, protect: Option<&str>) -> Result<Option<Outcome>, String> {
    remove_stale_sockets();
    let config = user_config()?.map(|(config, _)| config);
    let Some(rules) = config.unwrap_or_default().retention_rules() else {
        return Ok(None);
    };
    let outcome = prune(state, &rules, false, protect, now_ms()).map_err(|e| e.to_string())?;
    Ok(Some(outcome))
}

/// Removes the control sockets killed brokers left (each named after its broker), with or
/// without retention rules: only in a directory fit for sockets (ours, private).
fn remove_stale_sockets() {
    let sockets = tether_os::socket_dir::socket_dir();
    if tether_os::socket_dir::check(&sockets).is_ok() {
        tether_os::socket_dir::remove_stale(&sockets);
    }
}

/// Applies retention when a session ends (`tether exec` done, the TUI quit): never the
/// session `just_ended`, never a live one. It cannot fail the command: whatever goes wrong is
/// one line on stderr (none for a user config that does not parse when `config_said`: the
/// front end said so at launch). Silent when it removes something, as a cleanup should be.
pub fn at_session_end(state: &Path, just_ended: &str, config_said: bool) {
    if config_said && user_config().is_err() {
        remove_stale_sockets();
        return;
    }
    let outcome = match retain(state, Some(just_ended)) {
        Ok(Some(outcome)) => outcome,
        Ok(None) => return,
        Err(err) => return eprintln!("tether: retention not applied: {err}"),
    };
    if let Some((candidate, why)) = outcome.failed.first() {
        eprintln!(
            "tether: retention: cannot remove session {} ({why}){}",
            candidate.id,
            match outcome.failed.len() {
                1 => String::new(),
                n => format!(" and {} more", n - 1),
            }
        );
    }
}

/// Says on stderr which sessions could not be removed, and why.
fn print_failures(outcome: &Outcome) {
    for (c, why) in &outcome.failed {
        eprintln!("tether: cannot remove session {}: {why}", one_line(&c.id));
    }
}

/// Session names are printed with anything unprintable escaped: they come from the disk.
fn print_outcome(outcome: &Outcome, dry_run: bool, now: u64) {
    let verb = if dry_run { "would remove" } else { "removed" };
    let age = |c: &Candidate| format_age(Duration::from_millis(now.saturating_sub(c.ended_ms)));
    for c in &outcome.removed {
        println!(
            "{verb}  {}  ended {} ago  {}",
            one_line(&c.id),
            age(c),
            format_size(c.size)
        );
    }
    print_failures(outcome);
    for c in &outcome.kept_live {
        if let Liveness::Live(why) = &c.liveness {
            println!("kept  {}  live: {}", one_line(&c.id), one_line(why));
        }
    }
    let freed: u64 = outcome.removed.iter().map(|c| c.size).sum();
    let count = outcome.removed.len();
    println!(
        "{} {} in {count} session{}; {} session{} left ({})",
        if dry_run { "would free" } else { "freed" },
        format_size(freed),
        if count == 1 { "" } else { "s" },
        outcome.left.0,
        if outcome.left.0 == 1 { "" } else { "s" },
        format_size(outcome.left.1),
    );
    for unmet in &outcome.unmet {
        eprintln!("tether: not met: {unmet}");
    }
}
