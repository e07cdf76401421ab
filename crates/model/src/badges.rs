//! What happened to a run beyond its exit status, in short tags: the command list shows
//! them, `tether sessions --json` and the exports write them.

use serde::{Deserialize, Serialize};

use super::CommandState;
use tether_protocol::protocol::{EventKind, Origin, ProcessSignal};

/// A run's badges, each derived from the events the model applied.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Badges {
    /// The no-output watchdog fired (`response_timeout`).
    pub timeout: bool,
    /// A stop sequence ended in SIGKILL after its grace (`hard_kill`).
    pub killed: bool,
    /// The front end died and the broker stopped the command (`parent_lost`); not a shim
    /// its caller killed, whose stop is the caller's.
    pub parent_lost: bool,
    /// Processes reaped after escaping the command's group or session.
    pub orphans: u32,
    /// A stream stopped being stored (its cap, a full disk).
    pub capped: bool,
    /// After the command exited, processes still holding its pipes or left in its tree
    /// were stopped: a signal sent after `exit` that reached a process, but not once the
    /// leftovers rule kept what was left (`leftovers_kept`): a server kept for an agent, and
    /// stopped when its custody ended, was meant to run on. Leftovers stopped at once for
    /// want of a custodian (no `leftovers_kept`) are stragglers. Not a CONT, nor the
    /// signal that ended the command (its exit says which) sent again to what it reached (a
    /// group's TERM that ended the command ends the rest too); a KILL to what outlived that
    /// TERM is, and so is a signal to what an earlier one did not end.
    #[serde(default)]
    pub stragglers: bool,
    /// How many processes the leftovers rule kept running after the exit (a server started
    /// with `&`), once their custody is over; while it lasts the state says `left N`.
    #[serde(default, skip_serializing_if = "tether_protocol::protocol::is_default")]
    pub kept: usize,
    /// The command printed its final line (`drain_on`), did not exit within the drain
    /// period and was stopped (origin `final_drain`): it counts as finished.
    #[serde(default)]
    pub drained: bool,
    /// One of an agent's own set-up shells (Claude Code's `env` probe, its shell snapshot),
    /// not a command it was asked to run.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub setup: bool,
}

/// One badge, for whoever draws it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Badge {
    Timeout,
    Killed,
    ParentLost,
    Orphans(u32),
    Capped,
    Stragglers,
    Kept(usize),
    Drained,
    Setup,
}

impl Badge {
    /// `timeout`, `orphans:2`: the tag as the command list shows it.
    pub fn label(self) -> String {
        match self {
            Badge::Timeout => "timeout".into(),
            Badge::Killed => "killed".into(),
            Badge::ParentLost => "parent-lost".into(),
            Badge::Orphans(n) => format!("orphans:{n}"),
            Badge::Capped => "capped".into(),
            Badge::Stragglers => "stragglers".into(),
            Badge::Kept(n) => format!("kept:{n}"),
            Badge::Drained => "drained".into(),
            Badge::Setup => "set-up".into(),
        }
    }
}

impl Badges {
    pub fn of(command: &CommandState) -> Badges {
        let exited_at = command
            .timeline
            .iter()
            .position(|e| matches!(e.kind, EventKind::Exit { .. }));
        let stragglers = exited_at.is_some_and(|at| {
            let (before, after) = command.timeline.split_at(at);
            // The signal that ended the command, if one did (its exit says so): the last
            // one sent before the exit but a CONT. The end-of-run stop that follows (an
            // agent's TERM to its background shell's group) finds what that signal is still
            // ending, which outlived nothing.
            let died_of = match &after[0].kind {
                EventKind::Exit { status, .. } => status.signal,
                _ => None,
            };
            let ending = (before.iter().rev())
                .find_map(|e| match &e.kind {
                    EventKind::SignalSent {
                        signal, targets, ..
                    } if *signal != ProcessSignal::CONT => Some((*signal, targets)),
                    _ => None,
                })
                .filter(|(signal, _)| died_of == Some(signal.number()));
            (after.iter())
                .take_while(|e| !matches!(e.kind, EventKind::LeftoversKept { .. }))
                .any(|e| match &e.kind {
                    // CONT wakes what a stop signals; it stops nothing.
                    EventKind::SignalSent {
                        signal, targets, ..
                    } if *signal != ProcessSignal::CONT => targets.iter().any(|pid| {
                        !ending.is_some_and(|(ended_by, reached)| {
                            ended_by == *signal && reached.contains(pid)
                        })
                    }),
                    _ => false,
                })
        });
        Badges {
            timeout: command.response_timeout,
            killed: command.hard_killed,
            // Not where the front end stood in for a caller that killed it (an agent's
            // SIGKILL to the shim's group): that stop is the caller's, and reads so.
            parent_lost: command.parent_lost.is_some() && command.last_stop != Some(Origin::Caller),
            orphans: command.escapees_reaped,
            capped: command.capped.iter().any(Option::is_some),
            stragglers,
            kept: (command.leftovers)
                .filter(|kept| kept.until_ms.is_some())
                .map_or(0, |kept| kept.kept),
            drained: command.drained,
            setup: command.is_setup(),
        }
    }

    /// The badges that apply, in the order the command list shows them.
    pub fn list(&self) -> Vec<Badge> {
        [
            (self.timeout, Badge::Timeout),
            (self.killed, Badge::Killed),
            (self.parent_lost, Badge::ParentLost),
            (self.orphans > 0, Badge::Orphans(self.orphans)),
            (self.capped, Badge::Capped),
            (self.stragglers, Badge::Stragglers),
            (self.kept > 0, Badge::Kept(self.kept)),
            (self.drained, Badge::Drained),
            (self.setup, Badge::Setup),
        ]
        .into_iter()
        .filter_map(|(on, badge)| on.then_some(badge))
        .collect()
    }
}
