//! The leftovers rule a front end asks its broker for: whether processes its command leaves
//! running are kept (the shell shim's default, as bash keeps them; `tether exec
//! --keep-leftovers`), for how long at most, and for whom: the process that ran us, and the
//! session's owner when `tether agent` runs one (`TETHER_SESSION_OWNER`).

use std::ffi::OsString;
use std::time::Duration;

use tether_protocol::protocol::{Custodian, CustodianRole, LeftoversRule};

pub const LEFTOVERS_ENV: &str = "TETHER_LEFTOVERS";
pub const LEFTOVERS_MAX_ENV: &str = "TETHER_LEFTOVERS_MAX";
/// `PID:START_TICKS` of the session's owner, set by `tether agent` for its agent (its
/// `session-owner` process). The shim's commands end with it.
pub const SESSION_OWNER_ENV: &str = "TETHER_SESSION_OWNER";

/// The rule, as said when a value is refused.
pub const RULE: &str = "TETHER_LEFTOVERS is `keep` (the default for the shell shim: processes a command leaves running, such as a server started with `&`, go on until the caller that ran it exits, `tether stop`, or TETHER_LEFTOVERS_MAX) or `stop` (they are stopped when the command's main process exits); TETHER_LEFTOVERS_MAX is a duration (500ms, 30s, 10m, 2h; at most a week)";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LeftoversError {
    #[error("{LEFTOVERS_ENV}={0:?} is neither `keep` nor `stop`; {RULE}")]
    Rule(String),
    #[error("{LEFTOVERS_MAX_ENV}={0:?} is not a duration; {RULE}")]
    Max(String),
}

/// What the front end chose, before it is a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LeftoversChoice {
    pub keep: bool,
    pub max: Option<Duration>,
    /// The session's owner, whose exit ends the command and its leftovers.
    pub owner: Option<Custodian>,
}

impl LeftoversChoice {
    /// The shim's: `TETHER_LEFTOVERS` (default keep), `TETHER_LEFTOVERS_MAX` and
    /// `TETHER_SESSION_OWNER`.
    pub fn for_shim() -> Result<LeftoversChoice, LeftoversError> {
        from_vars(None, |name| std::env::var_os(name))
    }

    /// `tether exec`'s: nothing outlives it unless `--keep-leftovers`; then
    /// `TETHER_LEFTOVERS_MAX` applies.
    pub fn for_exec(keep_leftovers: bool) -> Result<LeftoversChoice, LeftoversError> {
        if !keep_leftovers {
            return Ok(LeftoversChoice::default());
        }
        from_vars(Some(true), |name| std::env::var_os(name))
    }

    /// The rule for the launch request: the session's owner (watched whatever the rule),
    /// then the process that ran us. The owner comes first: when the agent that owns the
    /// session ran the command itself, both exit at once, and the session being over is the
    /// reason said.
    pub fn rule(self) -> LeftoversRule {
        let caller = if self.keep { caller() } else { None };
        LeftoversRule {
            keep: self.keep,
            max: self.max,
            custodians: self.owner.into_iter().chain(caller).collect(),
        }
    }
}

/// Reads the rule from `var`; `keep`: the choice already made (no `TETHER_LEFTOVERS` read).
fn from_vars(
    keep: Option<bool>,
    var: impl Fn(&str) -> Option<OsString>,
) -> Result<LeftoversChoice, LeftoversError> {
    let text = |name| var(name).map(|v| v.to_string_lossy().trim().to_string());
    let keep = match keep {
        Some(keep) => keep,
        None => match text(LEFTOVERS_ENV).as_deref() {
            None | Some("") | Some("keep") => true,
            Some("stop") => false,
            Some(other) => return Err(LeftoversError::Rule(other.to_string())),
        },
    };
    let max = text(LEFTOVERS_MAX_ENV)
        .filter(|value| !value.is_empty())
        .map(|value| {
            tether_protocol::units::parse_duration(&value)
                .ok()
                .filter(|d| !d.is_zero())
                .ok_or(LeftoversError::Max(value))
        })
        .transpose()?;
    let owner = var(SESSION_OWNER_ENV).and_then(|v| session_owner(&v.to_string_lossy()));
    Ok(LeftoversChoice { keep, max, owner })
}

/// `PID:START_TICKS`. Anything else is no owner: the variable is tether's own, and a command
/// must never fail for a value it did not set (the broker verifies the start time anyway).
fn session_owner(value: &str) -> Option<Custodian> {
    let (pid, start_ticks) = value.trim().split_once(':')?;
    Some(Custodian {
        pid: pid.parse().ok().filter(|pid: &i32| *pid > 0)?,
        start_ticks: start_ticks.parse().ok()?,
        role: CustodianRole::SessionOwner,
    })
}

/// The process that ran us, by pid and start time. `getppid` is read again after the start
/// time: a parent that exited meanwhile (we were re-parented) is no custodian; the broker
/// then finds none and stops the leftovers at once.
fn caller() -> Option<Custodian> {
    let parent = nix::unistd::getppid().as_raw();
    let stat = tether_os::procfs::read_stat(parent)?;
    let still = nix::unistd::getppid().as_raw();
    (still == parent).then_some(Custodian {
        pid: parent,
        start_ticks: stat.start_ticks,
        role: CustodianRole::Caller,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(vars: &[(&str, &str)]) -> Result<LeftoversChoice, LeftoversError> {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        from_vars(None, move |name| {
            vars.iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| OsString::from(v))
        })
    }

    #[test]
    fn the_shim_keeps_by_default_and_takes_a_longest_custody() {
        let keep = LeftoversChoice {
            keep: true,
            ..Default::default()
        };
        assert_eq!(read(&[]), Ok(keep));
        assert_eq!(read(&[(LEFTOVERS_ENV, "keep")]), Ok(keep));
        assert_eq!(
            read(&[(LEFTOVERS_ENV, "stop")]),
            Ok(LeftoversChoice::default())
        );
        assert_eq!(
            read(&[(LEFTOVERS_MAX_ENV, "90s")]),
            Ok(LeftoversChoice {
                keep: true,
                max: Some(Duration::from_secs(90)),
                owner: None,
            })
        );
    }

    #[test]
    fn the_session_owner_is_read_and_a_bad_one_ignored() {
        let owner = read(&[(SESSION_OWNER_ENV, "4242:987654")]).unwrap().owner;
        assert_eq!(
            owner,
            Some(Custodian {
                pid: 4242,
                start_ticks: 987654,
                role: CustodianRole::SessionOwner,
            })
        );
        for bad in ["", "4242", "x:1", "0:5", "-3:5", "12:", "12:ab"] {
            assert_eq!(
                read(&[(SESSION_OWNER_ENV, bad)]).unwrap().owner,
                None,
                "{bad}"
            );
        }
        // Without keeping leftovers, the owner is still a custodian: it ends the command.
        let rule = LeftoversChoice {
            owner,
            ..Default::default()
        }
        .rule();
        assert_eq!(rule.custodians, owner.into_iter().collect::<Vec<_>>());
    }

    #[test]
    fn bad_values_are_refused_with_the_rule() {
        let err = read(&[(LEFTOVERS_ENV, "forever")]).unwrap_err();
        assert_eq!(err, LeftoversError::Rule("forever".into()));
        assert!(err.to_string().contains("neither `keep` nor `stop`"));
        for bad in ["soon", "0s", "-1s", "30d", "5 parsecs"] {
            let err = read(&[(LEFTOVERS_MAX_ENV, bad)]).unwrap_err();
            assert_eq!(err, LeftoversError::Max(bad.into()), "{bad}");
            assert!(err.to_string().contains(RULE));
        }
    }
}
