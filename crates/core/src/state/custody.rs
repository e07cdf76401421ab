//! Leftovers in custody: the main process exited, processes of its tree remain, and the
//! leftovers rule says keep them. The broker stays on for them (still journaling their output
//! and their tree) until one of its triggers stops them: a custodian's exit, a stop asked
//! for, the rule's longest custody, a shutdown signal. Each trigger is one call here, so a
//! new one (the session's owner) is one more caller.

use std::time::Instant;

use super::{Broker, Phase};
use crate::protocol::{EventKind, LeftoversEnd, LeftoversRecord, Origin, Peer};

/// The broker's custody of a command's leftovers.
pub(super) struct Custody {
    since: Instant,
    /// When the rule's longest custody is over.
    pub(super) until: Option<Instant>,
}

/// What a stop sequence's origin means for leftovers kept in custody.
fn end_for(origin: Origin) -> LeftoversEnd {
    match origin {
        // The launcher's restart is the operator's TUI stopping it.
        Origin::Operator | Origin::FileChanged => LeftoversEnd::Operator,
        // The caller's signal was for the main process; what it left is the session's.
        Origin::Caller => LeftoversEnd::CallerExited,
        // A budget spent in custody (time, CPU of what was left) ends it as its limit does.
        Origin::Watchdog | Origin::Budget => LeftoversEnd::MaxDuration,
        Origin::ParentLost => LeftoversEnd::CallerExited,
        // A broker never runs a reclaim (a later tether does, once the broker is dead), nor a
        // final drain in custody (its timer runs only while the main process does).
        Origin::Shutdown | Origin::Reclaim | Origin::FinalDrain => LeftoversEnd::Shutdown,
        // Its own stop of what a command left, once what was kept has nobody to answer
        // for it.
        Origin::Leftovers => LeftoversEnd::CallerExited,
    }
}

/// The origin journaled with the signals of a stop that ends a custody.
fn origin_for(end: LeftoversEnd) -> Origin {
    match end {
        LeftoversEnd::Operator => Origin::Operator,
        LeftoversEnd::MaxDuration => Origin::Watchdog,
        // The rule kept them while their caller or the session's owner ran: that it
        // exited is the rule's end, not a loss (`leftovers_stopped` says which).
        LeftoversEnd::CallerExited
        | LeftoversEnd::CallerGone
        | LeftoversEnd::SessionOwnerExited => Origin::Leftovers,
        LeftoversEnd::Shutdown | LeftoversEnd::Exited => Origin::Shutdown,
    }
}

impl Broker {
    /// The main process exited and `pids` remain. Keeps them if the rule says so and someone
    /// is there to answer for them; returns whether it did. Otherwise the caller stops them.
    pub(super) fn keep_leftovers(&mut self, pids: Vec<i32>) -> bool {
        if !self.request.leftovers.keep || pids.is_empty() {
            return false;
        }
        if let Some((end, pid)) = self.custodian_gone {
            // Nobody would be there to stop them: stopped at once, as without the rule.
            self.emit(EventKind::LeftoversStopped { reason: end, pid });
            return false;
        }
        let now = self.now;
        self.result.leftovers = Some(LeftoversRecord {
            kept: pids.clone(),
            ..Default::default()
        });
        self.custody = Some(Custody {
            since: now,
            until: self.request.leftovers.max.map(|max| now + max),
        });
        self.phase = Phase::Custody;
        self.custody_began = true;
        self.emit(EventKind::LeftoversKept { pids });
        true
    }

    pub(super) fn in_custody(&self) -> bool {
        self.phase == Phase::Custody
    }

    /// A custodian exited (`reason`, with its pid). In custody, the leftovers are stopped;
    /// before, it is remembered, and they will be stopped as soon as there are any. The
    /// session's owner ends the session: a command still running is stopped with it.
    pub(super) fn custodian_exited(&mut self, reason: LeftoversEnd, pid: Option<i32>) {
        if self.in_custody() {
            self.stop_leftovers(reason, pid, None);
            return;
        }
        self.custodian_unwatched(reason, pid);
        if reason == LeftoversEnd::SessionOwnerExited {
            self.start_stop(Origin::ParentLost);
        }
    }

    /// A custodian could not be watched when the command started (it had exited already):
    /// nobody will answer for leftovers, which are stopped as soon as there are any. The
    /// command itself runs, as the shell would have run it.
    pub(super) fn custodian_unwatched(&mut self, reason: LeftoversEnd, pid: Option<i32>) {
        self.custodian_gone.get_or_insert((reason, pid));
    }

    /// Ends the custody: `leftovers_stopped` with its reason, then the stop sequence over
    /// what is left (the usual teardown follows it).
    pub(super) fn stop_leftovers(
        &mut self,
        reason: LeftoversEnd,
        pid: Option<i32>,
        client: Option<Peer>,
    ) {
        self.stop_leftovers_as(reason, pid, client, origin_for(reason));
    }

    /// [`Broker::stop_leftovers`], its stop journaled with `origin`.
    fn stop_leftovers_as(
        &mut self,
        reason: LeftoversEnd,
        pid: Option<i32>,
        client: Option<Peer>,
        origin: Origin,
    ) {
        let Some(custody) = self.custody.take() else {
            return;
        };
        if let Some(record) = self.result.leftovers.as_mut() {
            record.kept_ms = (self.now - custody.since).as_millis() as u64;
            record.stopped = Some(reason);
        }
        self.emit(EventKind::LeftoversStopped { reason, pid });
        self.phase = Phase::TearingDown;
        if reason != LeftoversEnd::Exited {
            self.start_stop_for(origin, client);
        }
    }

    /// A stop asked for while in custody (`tether stop`, SIGTERM to the broker) ends it.
    /// Returns whether it did, having started the stop itself.
    pub(super) fn stop_ends_custody(&mut self, origin: Origin, client: Option<Peer>) -> bool {
        if !self.in_custody() {
            return false;
        }
        let end = end_for(origin);
        // A budget's stop says it was the budget (`result.json`'s `budget` names which).
        let journaled = match origin {
            Origin::Budget => Origin::Budget,
            _ => origin_for(end),
        };
        self.stop_leftovers_as(end, None, client, journaled);
        true
    }

    /// The rule's longest custody is over at `now`.
    pub(super) fn check_custody_deadline(&mut self, now: Instant) {
        if self
            .custody
            .as_ref()
            .and_then(|custody| custody.until)
            .is_some_and(|until| now >= until)
        {
            self.stop_leftovers(LeftoversEnd::MaxDuration, None, None);
        }
    }

    /// Custody is over when nothing is left to keep; the teardown then finds nothing to stop.
    pub(super) fn check_custody_emptied(&mut self) {
        if self.in_custody() && !self.tree_left() {
            self.stop_leftovers(LeftoversEnd::Exited, None, None);
        }
    }

    /// Writes the time kept so far, for a broker that ends while still in custody.
    pub(super) fn close_custody_record(&mut self) {
        if let (Some(custody), Some(record)) = (&self.custody, self.result.leftovers.as_mut()) {
            record.kept_ms = (self.now - custody.since).as_millis() as u64;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_and_ends_map_both_ways() {
        for end in [
            LeftoversEnd::Operator,
            LeftoversEnd::MaxDuration,
            LeftoversEnd::CallerExited,
            LeftoversEnd::Shutdown,
        ] {
            assert_eq!(end_for(origin_for(end)), end);
        }
        assert_eq!(origin_for(LeftoversEnd::CallerGone), Origin::Leftovers);
        assert_eq!(
            origin_for(LeftoversEnd::SessionOwnerExited),
            Origin::Leftovers
        );
        // A front end lost in custody is its caller's end.
        assert_eq!(end_for(Origin::ParentLost), LeftoversEnd::CallerExited);
    }
}
