//! How a conversation with a launched broker ends, and what a broker that could not finish
//! its work left for the front end to stop.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::intervals::{KILL_PATIENCE, STOP_SLACK};
use super::leftovers::{Cleanup, GroupLeader, LiveBrokers, stop_leftovers};

/// How a conversation with a broker ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// The broker said `close`: it did its work.
    Closed,
    /// The command exited and the broker keeps what it left running (`leftovers_kept`):
    /// the front end's part is over, and the broker is not waited for.
    LeftRunning,
    /// The broker refused the launch itself: nothing runs.
    Refused,
    /// Its events ended without a `close`: it died.
    Lost,
    /// It stopped answering pings (stopped, wedged).
    Unresponsive,
    /// Asked to stop, it had not finished at the end of the grace period.
    StopOverdue,
    /// It did not acknowledge a stop in time.
    StopUnanswered,
    /// The front end is quitting and cannot wait any longer.
    Aborted,
}

impl End {
    /// Why the front end stops what the broker left, if it must.
    pub(super) fn why(self) -> Option<&'static str> {
        match self {
            End::Closed | End::LeftRunning | End::Refused => None,
            End::Lost => Some("broker lost"),
            End::Unresponsive => Some("the broker stopped answering and was killed; broker lost"),
            End::StopOverdue => Some(
                "the broker had not finished stopping the command at the end of the grace period and was killed; broker lost",
            ),
            End::StopUnanswered => {
                Some("the broker did not answer the stop: tether killed it; broker lost")
            }
            End::Aborted => {
                Some("quitting: the broker did not finish in time and was killed; broker lost")
            }
        }
    }
}

/// What a broker that could not finish left, to be stopped by the front end.
pub struct Remains {
    /// Why the front end stops it: `broker lost`, and how.
    pub why: &'static str,
    pub(super) live: LiveBrokers,
    pub(super) leader: Option<GroupLeader>,
    pub(super) cgroup: Option<PathBuf>,
    pub(super) grace: Duration,
    pub(super) patience: Duration,
}

impl Remains {
    /// Stops it with the broker's own sequence.
    pub async fn stop(self) -> Cleanup {
        stop_leftovers(
            &self.live,
            self.leader,
            self.cgroup.as_deref(),
            self.grace,
            self.patience,
        )
        .await
    }
}

/// The grace and the patience after KILL of the front end's own stop, once the broker is
/// given up on: KILL when the grace asked for is over, and give up [`STOP_SLACK`] after. Asked
/// to stop, exec so ends within grace + 1 s, or grace + 5.5 s when the broker was seen at
/// work ([`super::intervals::BUSY_STOP_PATIENCE`]).
pub(super) fn cleanup_timing(
    stop_asked: Option<Instant>,
    grace: Duration,
    now: Instant,
) -> (Duration, Duration) {
    match stop_asked {
        Some(at) => ((at + grace).saturating_duration_since(now), STOP_SLACK),
        None => (grace, KILL_PATIENCE),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stop_already_asked_for_keeps_its_deadline() {
        let t0 = Instant::now();
        let grace = Duration::from_secs(2);
        // The broker died with no stop asked: the whole sequence, patient with KILL.
        assert_eq!(cleanup_timing(None, grace, t0), (grace, KILL_PATIENCE));
        // It died 500 ms into a stop: the rest of the grace, then KILL, soon over.
        let half = Duration::from_millis(500);
        assert_eq!(
            cleanup_timing(Some(t0), grace, t0 + half),
            (grace - half, STOP_SLACK)
        );
        // It did not finish in time: KILL at once.
        assert_eq!(
            cleanup_timing(Some(t0), grace, t0 + grace + STOP_SLACK),
            (Duration::ZERO, STOP_SLACK)
        );
    }

    #[test]
    fn only_ends_short_of_the_brokers_work_leave_remains() {
        for end in [End::Closed, End::LeftRunning, End::Refused] {
            assert_eq!(end.why(), None, "{end:?}");
        }
        for end in [
            End::Lost,
            End::Unresponsive,
            End::StopOverdue,
            End::StopUnanswered,
            End::Aborted,
        ] {
            assert!(
                end.why().is_some_and(|w| w.ends_with("broker lost")),
                "{end:?}"
            );
        }
    }
}
