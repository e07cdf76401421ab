//! What the launcher says of a command between its runs, or before its first: waiting for a
//! dependency, a restart to come, given up, or never to start because a dependency failed.
//! The runner copies it from `tether_core::launcher` after each of the launcher's steps; the
//! list's state column and the timeline show it.

/// The launcher's word on a command that is not running (`None` while it runs, or when the
/// launcher has nothing to add to its status).
#[derive(Debug, Clone, PartialEq, Eq)]
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
            Plan::Waiting {
                on,
                not_started: false,
            } => format!("waiting for {on}"),
            Plan::Waiting {
                on,
                not_started: true,
            } => format!("waiting for {on} (not started: press r on it)"),
            Plan::Restarting { at_ms, run } => {
                let secs = at_ms.saturating_sub(now_ms).div_ceil(1000);
                format!("restarting in {secs}s (run {run})")
            }
            Plan::GaveUp { restarts } => format!(
                "gave up after {restarts} restart{}",
                if *restarts == 1 { "" } else { "s" }
            ),
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

#[cfg(test)]
mod tests {
    use super::Plan;

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
}
