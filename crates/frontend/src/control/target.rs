//! What `tether stop`, `kill` and `signal` act on: `SESSION/NAME` (or `SESSION/NN`, the
//! command's number, as notifications name it), a whole `SESSION`, or the command whose tree
//! holds a pid.

use std::fmt;
use std::path::Path;

use super::discover::LiveCommand;
use tether_model::output::one_line;
use tether_os::journal::CommandId;
use tether_os::procfs::{ProcStat, descendants_in};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// One command of a session, by name or by directory id (`01-sleep`). A name that
    /// several live commands share is refused with their ids, as git refuses an ambiguous
    /// ref. A number (`1`, `01`) names the command of that number when no command goes by
    /// that name.
    Command { session: String, name: String },
    /// Every live command of a session.
    Session(String),
    /// The command whose broker has this pid in its tree (or is it).
    Pid(i32),
}

impl Target {
    /// Reads `SESSION/NAME` or `SESSION`.
    pub fn parse(text: &str) -> Result<Target, String> {
        let bad = || {
            format!(
                "`{text}` is not a target; give SESSION/NAME, SESSION or --pid PID (`tether ps` lists them)"
            )
        };
        match text.split_once('/') {
            None if !text.is_empty() => Ok(Target::Session(text.into())),
            Some((session, name))
                if !session.is_empty() && !name.is_empty() && !name.contains('/') =>
            {
                Ok(Target::Command {
                    session: session.into(),
                    name: name.into(),
                })
            }
            _ => Err(bad()),
        }
    }

    /// The commands of `live` this target names; `processes` is a /proc scan, used for
    /// [`Target::Pid`] only.
    pub fn select<'a>(
        &self,
        live: &'a [LiveCommand],
        processes: &[ProcStat],
    ) -> Result<Vec<&'a LiveCommand>, String> {
        let (session, name) = match self {
            Target::Command { session, name } => (session, name),
            Target::Session(session) => {
                return Ok(live.iter().filter(|c| c.id.session == *session).collect());
            }
            Target::Pid(pid) => {
                let holds = |c: &LiveCommand| {
                    c.broker.pid == *pid
                        || (descendants_in(processes, c.broker.pid).iter()).any(|p| p.pid == *pid)
                };
                return Ok(live.iter().filter(|c| holds(c)).collect());
            }
        };
        let in_session = live.iter().filter(|c| c.id.session == *session);
        // A number names the command of that number, as `ps` shows it (`SESSION/NN`), so
        // that the id always names one command; a command named like a number is reached
        // by its directory id (`01-2`).
        let number = number_in(name);
        let numbered: Vec<_> = (in_session.clone())
            .filter(|c| Some(c.id.number) == number)
            .collect();
        if !numbered.is_empty() {
            return Ok(numbered);
        }
        let named: Vec<_> = in_session
            .filter(|c| c.name == *name || c.id.dir_name() == *name)
            .collect();
        if named.len() > 1 {
            return Err(ambiguous(self, &named));
        }
        Ok(named)
    }
}

/// The number `name` is, when it is all digits (`02`, `2`).
fn number_in(name: &str) -> Option<u64> {
    (!name.is_empty() && name.bytes().all(|b| b.is_ascii_digit()))
        .then(|| name.parse().ok())
        .flatten()
}

/// Whether `asked`, the NAME of a `SESSION/NAME` target, could name command `id`, which
/// goes by `name`: by its number, its name or its directory id, as [`Target::select`] reads it.
fn could_name(asked: &str, id: &CommandId, name: &str) -> bool {
    number_in(asked) == Some(id.number) || asked == name || asked == id.dir_name()
}

/// How many of a session's names a message lists before it counts the rest.
const NAMES_LISTED: usize = 10;

/// The message for a `SESSION/NAME` target that matched no live command because no command
/// of the session goes by NAME, ended ones included (`journaled`: each with the name it goes
/// by, [`super::discover::journaled_commands`]): the session's names, the first ten. `None`
/// when one does, and has ended: [`no_match`] says that.
pub fn unknown_name(
    session: &str,
    name: &str,
    journaled: &[(CommandId, String)],
) -> Option<String> {
    if journaled.iter().any(|(id, n)| could_name(name, id, n)) {
        return None;
    }
    let mut names: Vec<String> = Vec::new();
    for (_, n) in journaled {
        let n = one_line(n);
        if !names.contains(&n) {
            names.push(n);
        }
    }
    let session = one_line(session);
    let mut text = format!(
        "no command of session `{session}` is named `{}`",
        one_line(name)
    );
    match names.len() {
        0 => text.push_str("; it has none yet"),
        n => {
            let shown = names[..n.min(NAMES_LISTED)].join(", ");
            text.push_str(&format!("; its commands: {shown}"));
            if n > NAMES_LISTED {
                text.push_str(&format!(
                    " and {} more (`tether sessions {session}` lists them)",
                    n - NAMES_LISTED
                ));
            }
        }
    }
    Some(text)
}

/// A session that is not there, as `open`, `sessions`, `grep` and `export` say it.
pub fn no_session(session: &str, sessions: &Path) -> String {
    format!(
        "no session `{}` in {}{}",
        one_line(session),
        sessions.display(),
        whole_ids_of(session, sessions)
    )
}

/// What to say after a session that is not there: the ids that begin with it, since `open`
/// and `sessions` take a prefix and the control commands take only a whole id; else where
/// the sessions are listed.
pub fn whole_ids_of(session: &str, sessions: &Path) -> String {
    let mut begin: Vec<String> = tether_os::journal::session_dirs(sessions)
        .unwrap_or_default()
        .iter()
        .filter_map(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()))
        .filter(|name| !session.is_empty() && name.starts_with(session))
        .collect();
    begin.sort();
    match begin.as_slice() {
        [] => "; `tether sessions` lists them".into(),
        [one] => format!("; `{}` begins so: give its whole id", one_line(one)),
        more => format!(
            "; {} sessions begin so (`{}`, ...): give a whole id",
            more.len(),
            one_line(&more[0])
        ),
    }
}

/// The refusal of a name that several live commands share, with their ids.
fn ambiguous(target: &Target, named: &[&LiveCommand]) -> String {
    let mut text = format!(
        "`{target}` names {} live commands; give one by its id:",
        named.len()
    );
    for c in named {
        let pid = c.pid.map_or_else(|| "-".into(), |p| p.to_string());
        text.push_str(&format!(
            "\n  {}  (pid {pid}, {})",
            one_line(&c.id.target()),
            c.state
        ));
    }
    text
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Command { session, name } => write!(f, "{session}/{name}"),
            Target::Session(session) => write!(f, "{session}"),
            Target::Pid(pid) => write!(f, "--pid {pid}"),
        }
    }
}

/// The message for a target that names no live command: what was asked, that its session
/// is not there at all (`missing_in`: the sessions' directory, where it is not; a command's
/// name given without its session, a typo, a prefix of a session's id) with the ids that
/// begin with it, and what is live.
pub fn no_match(target: &Target, live: &[LiveCommand], missing_in: Option<&Path>) -> String {
    let mut text = format!("no live command matches `{target}`");
    if let (Some(sessions), Target::Command { session, .. } | Target::Session(session)) =
        (missing_in, target)
    {
        text.push_str(&format!(
            ": there is no session `{}`{}",
            one_line(session),
            whole_ids_of(session, sessions)
        ));
    }
    if live.is_empty() {
        text.push_str("; no brokered command of yours is running");
        return text;
    }
    text.push_str("; live commands:");
    for c in live {
        let pid = c.pid.map_or_else(|| "-".into(), |p| p.to_string());
        text.push_str(&format!(
            "\n  {}  {}  (pid {pid}, {})",
            one_line(&c.id.target()),
            one_line(&c.label()),
            c.state
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use tether_protocol::protocol::BrokerIdentity;

    fn live(session: &str, name: &str, id: &str, broker: i32) -> LiveCommand {
        LiveCommand {
            id: CommandId::parse(session, id).unwrap(),
            name: name.into(),
            dir: format!("/s/{session}/{id}").into(),
            broker: BrokerIdentity {
                pid: broker,
                start_ticks: 1,
            },
            broker_token: None,
            pid: Some(broker + 1),
            started_ms: 0,
            state: "running".into(),
            left_running: false,
            grace: std::time::Duration::from_secs(2),
            control_socket: None,
            containment: None,
            cgroup: None,
        }
    }

    fn stat(pid: i32, ppid: i32) -> ProcStat {
        ProcStat::leader(pid, ppid)
    }

    #[test]
    fn targets_parse_as_documented() {
        assert_eq!(
            Target::parse("agent-1/npm").unwrap(),
            Target::Command {
                session: "agent-1".into(),
                name: "npm".into()
            }
        );
        assert_eq!(
            Target::parse("agent-1").unwrap(),
            Target::Session("agent-1".into())
        );
        for bad in ["", "/x", "s/", "a/b/c"] {
            let err = Target::parse(bad).unwrap_err();
            assert!(err.contains("SESSION/NAME"), "{bad}: {err}");
        }
    }

    #[test]
    fn targets_select_by_name_id_session_and_pid() {
        let all = [
            live("a", "sleep", "01-sleep", 100),
            live("a", "sleep", "02-sleep", 200),
            live("a", "npm", "03-npm", 300),
            live("b", "sleep", "01-sleep", 400),
        ];
        let pick = |t: Target, procs: &[ProcStat]| -> Vec<i32> {
            let chosen = t.select(&all, procs).unwrap();
            chosen.iter().map(|c| c.broker.pid).collect()
        };
        let cmd = |s: &str, n: &str| Target::Command {
            session: s.into(),
            name: n.into(),
        };
        // A name two commands share is refused, with the ids that name each.
        let refused = cmd("a", "sleep").select(&all, &[]).unwrap_err();
        assert!(
            refused.contains("`a/sleep` names 2 live commands"),
            "{refused}"
        );
        assert!(
            refused.contains("a/01") && refused.contains("a/02"),
            "{refused}"
        );
        assert_eq!(pick(cmd("b", "sleep"), &[]), [400]);
        assert_eq!(pick(cmd("a", "02-sleep"), &[]), [200]);
        assert_eq!(pick(Target::Session("a".into()), &[]), [100, 200, 300]);
        assert!(pick(cmd("c", "sleep"), &[]).is_empty());
        // SESSION/NN, as `ps` and notifications name a command.
        assert_eq!(pick(cmd("a", "02"), &[]), [200]);
        assert_eq!(pick(cmd("a", "3"), &[]), [300]);
        assert!(pick(cmd("a", "4"), &[]).is_empty());
        assert!(pick(cmd("a", "-1"), &[]).is_empty());
        // A number is the command of that number, whatever another is named: `a/2` is
        // `02-x`; the command named `2` is `a/01-2` (or `a/1`).
        let numbered = [live("a", "2", "01-2", 500), live("a", "x", "02-x", 600)];
        let pick_in = |t: Target| -> Vec<i32> {
            let chosen = t.select(&numbered, &[]).unwrap();
            chosen.iter().map(|c| c.broker.pid).collect()
        };
        assert_eq!(pick_in(cmd("a", "2")), [600]);
        assert_eq!(pick_in(cmd("a", "01-2")), [500]);
        // 301 is the command of broker 300; 302 its setsid escapee, re-parented to it.
        let procs = [stat(300, 1), stat(301, 300), stat(302, 300), stat(303, 302)];
        assert_eq!(pick(Target::Pid(303), &procs), [300]);
        assert_eq!(pick(Target::Pid(300), &procs), [300]);
        assert!(pick(Target::Pid(999), &procs).is_empty());
    }

    #[test]
    fn no_match_lists_the_live_commands() {
        let all = [live("a", "sleep", "01-sleep", 100)];
        let text = no_match(&Target::Session("zz".into()), &all, None);
        assert!(
            text.contains("no live command matches `zz`; live"),
            "{text}"
        );
        assert!(text.contains("a/sleep"), "{text}");
        let state = tether_os::testing::private_tempdir();
        let sessions = state.path().join("sessions");
        let text = no_match(&Target::Session("sleep".into()), &all, Some(&sessions));
        assert!(
            text.starts_with(
                "no live command matches `sleep`: there is no session `sleep`; `tether \
                 sessions` lists them; live commands:"
            ),
            "{text}"
        );
        // A prefix of a session's id: the id is named.
        tether_os::testing::private_dir(sessions.join("sleepy-1"));
        let text = no_match(&Target::Session("sleep".into()), &all, Some(&sessions));
        assert!(
            text.contains("there is no session `sleep`; `sleepy-1` begins so: give its whole id"),
            "{text}"
        );
        assert!(text.contains("a/sleep"), "{text}");
        let none = no_match(&Target::Pid(5), &[], None);
        assert!(none.contains("no brokered command"), "{none}");
    }

    /// A name that no command of the session ever had is said to be unknown, with the
    /// names it has; a name whose commands all ended is left to `no_match`.
    #[test]
    fn a_name_no_command_of_the_session_had_is_said_unknown() {
        let journaled = |names: &[&str]| -> Vec<(CommandId, String)> {
            (names.iter().enumerate())
                .map(|(i, n)| (CommandId::new("s", i as u64 + 1, n), n.to_string()))
                .collect()
        };
        let session = journaled(&["build", "cargo test", "build"]);
        let text = unknown_name("s", "nosuchname", &session).unwrap();
        assert_eq!(
            text,
            "no command of session `s` is named `nosuchname`; its commands: build, cargo test"
        );
        // By name, by directory id, by number: known, ended.
        for known in ["cargo test", "02-cargo_test", "2", "03", "build"] {
            assert_eq!(unknown_name("s", known, &session), None, "{known}");
        }
        assert!(unknown_name("s", "4", &session).is_some());
        assert!(
            unknown_name("s", "x", &[])
                .unwrap()
                .ends_with("; it has none yet")
        );
        let many: Vec<String> = (1..=12).map(|i| format!("job{i}")).collect();
        let many = journaled(&many.iter().map(String::as_str).collect::<Vec<_>>());
        let text = unknown_name("s", "x", &many).unwrap();
        assert!(
            text.ends_with("job9, job10 and 2 more (`tether sessions s` lists them)"),
            "{text}"
        );
        // What came from outside is one safe line.
        let text = unknown_name("s", "a\x1b[2Jb", &session).unwrap();
        assert!(!text.chars().any(char::is_control), "{text:?}");
    }

    /// `open` and `sessions` take a prefix of a session's id, the control commands a whole
    /// one: a prefix given to them is answered with the ids it begins.
    #[test]
    fn a_session_not_there_names_the_ids_it_begins() {
        let state = tether_os::testing::private_tempdir();
        let sessions = state.path().join("sessions");
        tether_os::testing::private_dir(sessions.join("agent-1"));
        let said = no_session("agent", &sessions);
        assert!(
            said.ends_with("; `agent-1` begins so: give its whole id"),
            "{said}"
        );
        tether_os::testing::private_dir(sessions.join("agent-2"));
        let said = no_session("agent", &sessions);
        assert!(
            said.ends_with("2 sessions begin so (`agent-1`, ...): give a whole id"),
            "{said}"
        );
        let said = no_session("web", &sessions);
        assert!(said.ends_with("; `tether sessions` lists them"), "{said}");
    }
}
