//! Readiness: how the command proves it is ready (`ready_*` in tether.toml). A `log` probe
//! is a line of stdout or stderr matching a regex, watched here as output arrives; the
//! others (`http`, `tcp`, `exec`) are tries the interpreter makes when asked
//! ([`Output::TryReady`]), one at a time, every interval from the spawn, their answers
//! coming back as [`Input::ReadyTried`]. The first pass journals `ready`; the timeout
//! passing first journals `not_ready` with the last failure. Either ends the probing, and so
//! does the command's exit or a stop.
//!
//! [`Output::TryReady`]: super::Output::TryReady
//! [`Input::ReadyTried`]: super::Input::ReadyTried

use std::time::Instant;

use regex::bytes::Regex;

use super::machine::Output;
use super::{Broker, Phase};
use crate::final_drain::{LineMatcher, journaled_line};
use crate::protocol::{EventKind, Readiness, ReadyProbe, Stream};
use crate::readiness::{MIN_INTERVAL, try_timeout};

/// What a try of a probe found: its detail when it passed (`HTTP 200`), its failure when
/// not (`connection refused`).
pub type TryOutcome = Result<String, String>;

pub(super) struct ReadyWatch {
    readiness: Readiness,
    /// A `log` probe's matcher per stream (stdout, stderr): each has its own line in progress.
    lines: Option<[LineMatcher; 2]>,
    /// The spawn: tries are counted from it, and `after_ms`.
    since: Option<Instant>,
    next_try: Option<Instant>,
    /// The try asked for and not answered yet.
    trying: Option<u64>,
    tries: u64,
    last_failure: Option<String>,
    /// `ready` or `not_ready` was journaled, or the command ended or is being stopped.
    over: bool,
}

impl ReadyWatch {
    /// The watch for `readiness`; `pattern` is a `log` probe's regex, compiled by the
    /// interpreter (without it a `log` probe is not watched: the interpreter refused it).
    pub(super) fn new(mut readiness: Readiness, pattern: Option<Regex>) -> Option<ReadyWatch> {
        readiness.interval = readiness.interval.max(MIN_INTERVAL);
        let lines = match (&readiness.probe, pattern) {
            (ReadyProbe::Log { .. }, Some(regex)) => {
                Some([LineMatcher::new(regex.clone()), LineMatcher::new(regex)])
            }
            (ReadyProbe::Log { .. }, None) => return None,
            _ => None,
        };
        Some(ReadyWatch {
            readiness,
            lines,
            since: None,
            next_try: None,
            trying: None,
            tries: 0,
            last_failure: None,
            over: false,
        })
    }

    fn timeout_at(&self) -> Option<Instant> {
        Some(self.since? + self.readiness.timeout?)
    }
}

impl Broker {
    /// Whether the probe still looks: the command runs, nothing stops it, nothing was
    /// decided yet.
    fn ready_watching(&self) -> Option<&ReadyWatch> {
        let watch = self.ready.as_ref()?;
        let live = self.phase == Phase::Running && self.stop.is_none() && !watch.over;
        (live && watch.since.is_some()).then_some(watch)
    }

    /// Whether the probe still looks: a try still going once it does not is given up.
    pub fn ready_probing(&self) -> bool {
        self.ready_watching().is_some()
    }

    /// [call site: spawned] The first try is due an interval after the spawn.
    pub(super) fn ready_spawned(&mut self, now: Instant) {
        if let Some(watch) = self.ready.as_mut() {
            watch.since = Some(now);
            if watch.lines.is_none() {
                watch.next_try = Some(now + watch.readiness.interval);
            }
        }
    }

    /// [call site: output] A `log` probe looks at each complete line of either stream.
    pub(super) fn ready_output(&mut self, stream: Stream, bytes: &[u8]) {
        if self.ready_watching().is_none() {
            return;
        }
        let Some(watch) = self.ready.as_mut() else {
            return;
        };
        let Some(matchers) = watch.lines.as_mut() else {
            return;
        };
        if let Some(line) = matchers[stream as usize].feed(bytes) {
            self.ready_decided(true, journaled_line(&line));
        }
    }

    /// When the probe next has something to do: a try, or its timeout.
    pub(super) fn ready_deadline(&self) -> Option<Instant> {
        let watch = self.ready_watching()?;
        let next_try = watch.next_try.filter(|_| watch.trying.is_none());
        [next_try, watch.timeout_at()].into_iter().flatten().min()
    }

    /// [call site: tick] Gives up once the timeout passed, else asks for a try when due.
    pub(super) fn ready_tick(&mut self, now: Instant) {
        let Some(watch) = self.ready_watching() else {
            return;
        };
        if watch.timeout_at().is_some_and(|at| now >= at) {
            let detail = (watch.last_failure.clone()).unwrap_or_else(|| "timed out".into());
            self.ready_decided(false, detail);
            return;
        }
        let due = watch.trying.is_none() && watch.next_try.is_some_and(|at| now >= at);
        let Some(watch) = self.ready.as_mut().filter(|_| due) else {
            return;
        };
        watch.tries += 1;
        watch.trying = Some(watch.tries);
        watch.next_try = Some(now + watch.readiness.interval);
        let try_out = Output::TryReady {
            attempt: watch.tries,
            probe: watch.readiness.probe.clone(),
            timeout: try_timeout(watch.readiness.interval),
        };
        self.outputs.push_back(try_out);
    }

    /// A try answered ([`super::Input::ReadyTried`]): a pass makes the command ready; a
    /// failure is kept for `not_ready`, and the next try comes at its time. An answer that
    /// comes after the probing ended, or for another try, is no news.
    pub(super) fn ready_tried(&mut self, attempt: u64, outcome: TryOutcome) {
        let answered = self
            .ready_watching()
            .is_some_and(|w| w.trying == Some(attempt));
        let Some(watch) = self.ready.as_mut().filter(|_| answered) else {
            return;
        };
        watch.trying = None;
        match outcome {
            Ok(detail) => self.ready_decided(true, detail),
            Err(failure) => watch.last_failure = Some(failure),
        }
    }

    fn ready_decided(&mut self, ready: bool, detail: String) {
        let Some(watch) = self.ready.as_mut() else {
            return;
        };
        watch.over = true;
        let probe = watch.readiness.probe.kind().to_string();
        let since = watch.since.unwrap_or(self.now);
        let after_ms = self.now.saturating_duration_since(since).as_millis() as u64;
        let detail = journaled_line(detail.as_bytes());
        self.emit(if ready {
            EventKind::Ready {
                probe,
                detail,
                after_ms,
            }
        } else {
            EventKind::NotReady {
                probe,
                detail,
                after_ms,
            }
        });
    }
}
