//! What the launcher says of a command between its runs, or before its first: waiting for a
//! dependency, a restart to come, given up, or never to start because a dependency failed.
//! The runner copies it from `tether_core::launcher` after each of the launcher's steps; the
//! list's state column and the timeline show it. It journals each change beside the session's
//! `session.json` (`launcher.jsonl`), so that a recorded session shows it as it was: a
//! command that never ran (blocked by a failed dependency) among the others, a run that was
//! the last one the launcher would restart.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::{CommandState, Status};
use tether_config::CommandConfig;
use tether_os::journal::LauncherLine;

/// The launcher's word on a command that is not running (`None` while it runs, or when the
/// launcher has nothing to add to its status).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Plan {
    /// Its first dependency whose condition does not hold yet; `not_started`: that one
    /// waits for the operator to start it (`autostart = false`).
    Waiting { on: String, not_started: bool },
    /// Run `run` starts at `at_ms`.
    Restarting { at_ms: u64, run: u32 },
    /// It ended after `restarts` restarts in a row, the most `max_restarts` allows.
    GaveUp { restarts: u32 },
    /// A dependency's condition can no longer hold: `migrate exited 1`.
    Blocked(String),
}

impl Plan {
    /// `waiting for db`, `restarting in 2s (run 3)`, `gave up after 3 restarts`,
    /// `not started: migrate exited 1`.
    pub fn label(&self, now_ms: u64) -> String {
        match self {
            Plan::Waiting { on, not_started } => {
                let how = if *not_started { " (not started)" } else { "" };
                format!("waiting for {on}{how}")
            }
            Plan::Restarting { at_ms, run } => {
                let secs = at_ms.saturating_sub(now_ms).div_ceil(1000);
                format!("restarting in {secs}s (run {run})")
            }
            Plan::GaveUp { restarts } => tether_core::launcher::gave_up(*restarts),
            Plan::Blocked(why) => format!("not started: {why}"),
        }
    }

    /// The word for the list's state column (8 cells).
    pub fn short_label(&self) -> &'static str {
        match self {
            Plan::Waiting { .. } => "waiting",
            Plan::Restarting { .. } => "restart",
            Plan::GaveUp { .. } => "gave up",
            Plan::Blocked(_) => "blocked",
        }
    }

    /// A failure the operator is told of (`gave up`, `blocked`), not a wait.
    pub fn is_failure(&self) -> bool {
        matches!(self, Plan::GaveUp { .. } | Plan::Blocked(_))
    }
}

impl CommandState {
    /// How a run ended in every view's words, with the launcher's last word where it is an
    /// end: `not started: migrate: exit 1` for a command that never ran, `exit 1, gave up
    /// after 3 restarts` for the last run of one it gave up on.
    pub fn outcome_words(&self) -> String {
        match &self.plan {
            Some(plan) if plan.is_failure() && self.status == Status::Idle => plan.label(0),
            Some(plan) if plan.is_failure() => format!("{}, {}", self.state_words(), plan.label(0)),
            _ => self.state_words(),
        }
    }
}

/// The journal's line for `command`'s plan from `ts_ms` on; `first`: the first line about
/// it, which says what it runs.
pub fn line(ts_ms: u64, command: &CommandState, plan: Option<&Plan>, first: bool) -> LauncherLine {
    LauncherLine {
        ts_ms,
        command: command.config.name.clone(),
        dir: dir_name(command),
        spec: first.then(|| command.config.command.clone()),
        plan: serde_json::to_value(plan).unwrap_or_default(),
    }
}

/// Whether the launcher had said anything of `command` by `at_ms` (a plan, or `null` once it
/// had nothing to add): a line about its run's directory, or, before a first run, about its
/// name.
pub fn spoken_of(command: &CommandState, lines: &[LauncherLine], at_ms: u64) -> bool {
    let dir = dir_name(command);
    (lines.iter().take_while(|l| l.ts_ms <= at_ms)).any(|l| match &l.dir {
        Some(said) => dir.as_ref() == Some(said),
        None => command.run <= 1 && l.command == command.config.name,
    })
}

/// The name of the journal directory of `command`'s run, once it has one.
fn dir_name(command: &CommandState) -> Option<String> {
    let dir = command.journal_dir.as_ref()?.file_name()?;
    Some(dir.to_string_lossy().into_owned())
}

/// The rows of the commands the launcher spoke of that it never started, given the session's
/// `runs` (each one's name and start): no line about one names a run of it (a run's first
/// line names its directory; a run the journal knows by its directory's name alone, `03-web`,
/// is one), and no run of its name began after the launcher's last word on it (a line the
/// launcher could not write, the disk full, does not make a run unseen). In the order the
/// journal first names them, each `idle`, no plan yet. One pass over each.
pub fn unstarted(lines: &[LauncherLine], runs: &[(&str, Option<u64>)]) -> Vec<CommandState> {
    struct Said<'l> {
        name: &'l str,
        last_ms: u64,
        ran: bool,
        spec: Option<&'l tether_protocol::protocol::CommandSpec>,
    }
    let mut said: Vec<Said> = Vec::new();
    let mut at: HashMap<&str, usize> = HashMap::new();
    for line in lines {
        let i = *at.entry(line.command.as_str()).or_insert_with(|| {
            said.push(Said {
                name: &line.command,
                last_ms: 0,
                ran: false,
                spec: None,
            });
            said.len() - 1
        });
        let entry = &mut said[i];
        entry.last_ms = entry.last_ms.max(line.ts_ms);
        entry.ran |= line.dir.is_some();
        entry.spec = entry.spec.or(line.spec.as_ref());
    }
    let mut latest_run: HashMap<&str, u64> = HashMap::new();
    for (name, started) in runs {
        if let Some(started) = started {
            let latest = latest_run.entry(name).or_default();
            *latest = (*latest).max(*started);
        }
    }
    (said.into_iter())
        .filter(|s| !s.ran && latest_run.get(s.name).is_none_or(|run| *run < s.last_ms))
        .map(|s| {
            let spec = (s.spec.cloned())
                .unwrap_or(tether_protocol::protocol::CommandSpec::Argv(Vec::new()));
            CommandState::new(CommandConfig::new(s.name.to_string(), spec))
        })
        .collect()
}

/// Each run's name and start, for [`unstarted`].
pub fn runs_of(commands: &[CommandState]) -> Vec<(&str, Option<u64>)> {
    (commands.iter())
        .filter(|c| c.journal_dir.is_some())
        .map(|c| (c.config.name.as_str(), c.started_ms))
        .collect()
}

/// Gives each command the launcher's word on it at `at_ms` (at the end: `None`), as the
/// journal's `lines` have it: on the run a line names, or, for a line before any run, on a
/// row of that name that had not started by then. A name alone never reaches a run: in a
/// named session that another tether joined, or that a shim call shares, a name is not one
/// command's.
pub fn apply(commands: &mut [CommandState], lines: &[LauncherLine], at_ms: Option<u64>) {
    let mut rows: Vec<&mut CommandState> = commands.iter_mut().collect();
    apply_to(&mut rows, lines, at_ms);
}

/// [`apply`] to some of a list's rows: one session's of a watch over many, whose directory
/// names (`03-web`) another session may have too.
pub fn apply_to(commands: &mut [&mut CommandState], lines: &[LauncherLine], at_ms: Option<u64>) {
    let said = lines
        .iter()
        .filter(|l| at_ms.is_none_or(|at| l.ts_ms <= at));
    let mut latest: Vec<&LauncherLine> = Vec::new();
    let plan_of = |line: &LauncherLine| {
        serde_json::from_value::<Option<Plan>>(line.plan.clone())
            .ok()
            .flatten()
    };
    // A run the launcher gave up on keeps that word whatever it said of the command since
    // (started again by hand, a wait for a dependency first): it is the end of that run.
    // Any other word (a wait, a restart planned, blocked) names the command's current
    // directory, and is the command's only while it is the latest.
    let mut gave_up: HashMap<&str, Plan> = HashMap::new();
    for line in said {
        match latest.iter_mut().find(|l| l.command == line.command) {
            Some(last) => *last = line,
            None => latest.push(line),
        }
        if let (Some(dir), Some(plan @ Plan::GaveUp { .. })) = (&line.dir, plan_of(line)) {
            gave_up.insert(dir, plan);
        }
    }
    for (dir, plan) in gave_up {
        if let Some(row) = (commands.iter_mut()).find(|c| dir_name(c).as_deref() == Some(dir)) {
            row.plan = Some(plan);
        }
    }
    for line in latest {
        let plan = plan_of(line);
        let named = |c: &CommandState| c.config.name == line.command;
        let row = match &line.dir {
            Some(dir) => (commands.iter()).position(|c| dir_name(c).as_ref() == Some(dir)),
            None => (commands.iter()).position(|c| named(c) && c.started_ms.is_none()),
        };
        if let Some(row) = row {
            commands[row].plan = plan;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_say_what_the_launcher_waits_for() {
        let waiting = Plan::Waiting {
            on: "db".into(),
            not_started: false,
        };
        assert_eq!(waiting.label(0), "waiting for db");
        let restarting = Plan::Restarting {
            at_ms: 3_000,
            run: 3,
        };
        assert_eq!(restarting.label(1_200), "restarting in 2s (run 3)");
        assert_eq!(restarting.label(5_000), "restarting in 0s (run 3)");
        assert_eq!(
            Plan::GaveUp { restarts: 3 }.label(0),
            "gave up after 3 restarts"
        );
        let blocked = Plan::Blocked("migrate: exit 1".into());
        assert_eq!(blocked.label(0), "not started: migrate: exit 1");
        assert_eq!(blocked.short_label(), "blocked");
    }

    /// The runner's line for the run of `command` in `dir` (`None`: before its first run).
    fn said(ts_ms: u64, command: &str, dir: Option<&str>, plan: Option<Plan>) -> LauncherLine {
        let mut row = CommandState::new(CommandConfig::new(
            command,
            tether_protocol::protocol::CommandSpec::Shell(format!("run {command}")),
        ));
        row.journal_dir = dir.map(|d| std::path::PathBuf::from("/s").join(d));
        line(ts_ms, &row, plan.as_ref(), dir.is_none())
    }

    fn ran(dir: &str, started_ms: Option<u64>) -> CommandState {
        let name = dir.split_once('-').map_or(dir, |(_, name)| name);
        let mut row = CommandState::new(CommandConfig::new(
            name,
            tether_protocol::protocol::CommandSpec::Argv(vec![name.into()]),
        ));
        row.journal_dir = Some(std::path::PathBuf::from("/s").join(dir));
        row.started_ms = started_ms;
        row
    }

    /// The journal's lines read back as the runner wrote them: the migration failed, so web
    /// never ran; the worker's second run was its last. A `worker` of another tether that
    /// joined the session (08) is not given what was said of this one.
    #[test]
    fn a_recorded_session_shows_what_the_launcher_said_as_it_was_at_each_moment() {
        let blocked = Plan::Blocked("migrate: exit 1".into());
        let gave_up = Plan::GaveUp { restarts: 1 };
        let waiting = Plan::Waiting {
            on: "migrate".into(),
            not_started: false,
        };
        let restarting = Plan::Restarting { at_ms: 120, run: 2 };
        let lines: Vec<LauncherLine> = [
            said(10, "web", None, Some(waiting.clone())),
            said(20, "worker", Some("02-worker"), Some(restarting.clone())),
            said(30, "web", None, Some(blocked.clone())),
            said(120, "worker", Some("03-worker"), None),
            said(300, "worker", Some("03-worker"), Some(gave_up.clone())),
        ]
        .iter()
        .map(|l| serde_json::from_str(&serde_json::to_string(l).unwrap()).unwrap())
        .collect();
        let runs = [
            ran("02-worker", Some(5)),
            ran("03-worker", Some(130)),
            ran("08-worker", Some(400)),
        ];
        let never = unstarted(&lines, &runs_of(&runs));
        assert_eq!(never.len(), 1);
        assert_eq!(never[0].config.name, "web");
        assert_eq!(never[0].config.command.argv(), ["/bin/sh", "-c", "run web"]);

        let mut end: Vec<CommandState> = runs.iter().cloned().chain(never.clone()).collect();
        apply(&mut end, &lines, None);
        let plans: Vec<_> = end.iter().map(|c| c.plan.clone()).collect();
        assert_eq!(plans, [None, Some(gave_up), None, Some(blocked)]);

        // Before the second run began, the first waited for it; web waited for migrate.
        let mut at_25 = vec![ran("02-worker", Some(5)), ran("03-worker", None)];
        at_25.extend(never);
        apply(&mut at_25, &lines, Some(25));
        let plans: Vec<_> = at_25.iter().map(|c| c.plan.clone()).collect();
        assert_eq!(plans, [Some(restarting), None, Some(waiting)]);
    }

    /// The operator started a command again after the launcher gave up on it: the run given
    /// up on keeps the word, the new one has none; a restart once planned for a run is not
    /// its word once the next run began.
    #[test]
    fn a_run_given_up_on_keeps_the_word_after_a_run_by_hand() {
        let gave_up = Plan::GaveUp { restarts: 1 };
        let restarting = Plan::Restarting { at_ms: 120, run: 2 };
        let lines = [
            said(20, "worker", Some("02-worker"), Some(restarting)),
            said(120, "worker", Some("03-worker"), None),
            said(300, "worker", Some("03-worker"), Some(gave_up.clone())),
            said(500, "worker", Some("09-worker"), None),
        ];
        let mut runs = [
            ran("02-worker", Some(5)),
            ran("03-worker", Some(130)),
            ran("09-worker", Some(500)),
        ];
        apply(&mut runs, &lines, None);
        let plans: Vec<_> = runs.iter().map(|c| c.plan.clone()).collect();
        assert_eq!(plans, [None, Some(gave_up.clone()), None]);

        // Started by hand, it first waits for a dependency: the wait names the run given up
        // on (the command's directory until the next run), and is the command's while it
        // lasts; once the next run began, the give-up is that run's again.
        let waiting = Plan::Waiting {
            on: "db".into(),
            not_started: false,
        };
        let mut lines = lines[..3].to_vec();
        lines.push(said(
            400,
            "worker",
            Some("03-worker"),
            Some(waiting.clone()),
        ));
        let mut two = [ran("02-worker", Some(5)), ran("03-worker", Some(130))];
        apply(&mut two, &lines, None);
        assert_eq!(two[1].plan, Some(waiting));
        lines.push(said(500, "worker", Some("09-worker"), None));
        apply(&mut runs, &lines, None);
        let plans: Vec<_> = runs.iter().map(|c| c.plan.clone()).collect();
        assert_eq!(plans, [None, Some(gave_up), None]);
    }

    /// Blocked is the command's word, not a run's: a run that ended before its command was
    /// blocked, then unblocked and started again, does not read blocked.
    #[test]
    fn blocked_does_not_stay_on_the_run_before() {
        let blocked = Plan::Blocked("db: exit 1".into());
        let lines = [
            said(100, "web", Some("03-web"), Some(blocked.clone())),
            said(200, "web", Some("07-web"), None),
        ];
        let mut runs = [ran("03-web", Some(10)), ran("07-web", Some(200))];
        apply(&mut runs, &lines, None);
        assert_eq!(runs[0].plan, None);
        assert_eq!(runs[1].plan, None);
        // While it is the latest word, it is the command's.
        let mut runs = [ran("03-web", Some(10))];
        apply(&mut runs, &lines[..1], None);
        assert_eq!(runs[0].plan, Some(blocked));
    }

    /// Never started is what no line says of a run: a run the journal knows only by its
    /// directory's name (`03-api`, no `command.json`) is one.
    #[test]
    fn a_command_is_unstarted_until_a_line_names_a_run_of_it() {
        let waiting = Plan::Waiting {
            on: "db".into(),
            not_started: false,
        };
        let lines = [
            said(10, "web", None, Some(Plan::Blocked("db: exit 1".into()))),
            said(20, "api", None, Some(waiting)),
            said(30, "api", Some("03-api"), None),
        ];
        let names = |runs: &[(&str, Option<u64>)]| -> Vec<String> {
            unstarted(&lines, runs)
                .into_iter()
                .map(|c| c.config.name)
                .collect()
        };
        assert_eq!(names(&[]), ["web"]);
        // A run of web that began after the launcher's last word on it, whose own line was
        // never written (the disk full): web ran.
        assert!(names(&[("web", Some(15))]).is_empty());
        // One before it does not count: the launcher said more since.
        assert_eq!(names(&[("web", Some(5)), ("api", None)]), ["web"]);
    }
}
