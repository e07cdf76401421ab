//! The final-drain trigger in the broker: a line of stdout that matches `drain_on` starts the
//! drain period; a command still running when it is over is stopped (origin `final_drain`).
//! The sibling of the no-output watchdog in `time.rs`: a deadline, and what happens at it.

use std::time::Duration;

use std::time::Instant;

use super::{Broker, Phase};
use regex::bytes::Regex;

use crate::final_drain::{DEFAULT_DRAIN, LineMatcher, journaled_line};
use crate::protocol::{EventKind, LaunchRequest, Origin, Stream};

pub(super) struct FinalDrain {
    matcher: LineMatcher,
    drain: Duration,
    /// When the drain period is over, once the final line was seen.
    until: Option<Instant>,
}

impl FinalDrain {
    /// The trigger for `regex`, the request's `drain_on` compiled, with its drain period.
    pub(super) fn new(regex: Regex, request: &LaunchRequest) -> FinalDrain {
        FinalDrain {
            matcher: LineMatcher::new(regex),
            drain: request.drain.unwrap_or(DEFAULT_DRAIN),
            until: None,
        }
    }
}

impl Broker {
    /// Looks for the final line in what stdout just gave.
    pub(super) fn watch_for_final_line(&mut self, stream: Stream, bytes: &[u8], now: Instant) {
        if stream != Stream::Stdout || self.phase != Phase::Running || self.stop.is_some() {
            return;
        }
        let Some(trigger) = self.final_drain.as_mut() else {
            return;
        };
        if trigger.until.is_some() {
            return;
        }
        let Some(line) = trigger.matcher.feed(bytes) else {
            return;
        };
        trigger.until = Some(now + trigger.drain);
        let kind = EventKind::FinalDrain {
            pattern: trigger.matcher.pattern().to_string(),
            line: journaled_line(&line),
            drain: trigger.drain,
        };
        self.emit(kind);
    }

    /// When the drain period is over, while it matters: the command still runs and nothing
    /// else stops it.
    pub(super) fn drain_deadline(&self) -> Option<Instant> {
        if self.phase != Phase::Running || self.stop.is_some() {
            return None;
        }
        self.final_drain.as_ref().and_then(|t| t.until)
    }

    /// The drain period is over and the command did not exit: it is stopped, and counts as
    /// finished.
    pub(super) fn check_drain_deadline(&mut self, now: Instant) {
        if self.drain_deadline().is_some_and(|until| now >= until) {
            self.result.drained = true;
            self.start_stop(Origin::FinalDrain);
        }
    }
}
