//! How many notify runs the user gets, across all their brokers: at most [`RUNS_PER_WINDOW`]
//! in a window of [`WINDOW_MS`]; the events held back meanwhile are counted, and the next run that may
//! start tells them as one burst ("397 commands failed in 4 s") rather than dropping them
//! silently. 400 failing commands at once make a few runs, not 400.
//!
//! The decision is pure ([`decide`]: the shared state and the time in, the verdict and the
//! new state out); `rate_file` keeps the state in a private file of the state directory.

use serde::{Deserialize, Serialize};

use tether_protocol::protocol::AttentionKind;

/// The window the runs are counted in.
pub const WINDOW_MS: u64 = 60_000;
/// How much older than its window's start an event may be and still count in it: the
/// brokers of commands failing at once, on a loaded machine, take the rate file in another
/// order than their events' times, by milliseconds to seconds.
const LATE_MS: u64 = 10_000;
/// Runs a window, at most, for all of a user's brokers together.
pub const RUNS_PER_WINDOW: u32 = 5;

/// The kinds in the order [`Held::counts`] keeps them.
const KINDS: [AttentionKind; 5] = [
    AttentionKind::NeedsInput,
    AttentionKind::Quiet,
    AttentionKind::Runaway,
    AttentionKind::Failed,
    AttentionKind::Finished,
];

/// The user's notify runs, as every broker shares them (wall-clock milliseconds: brokers are
/// separate processes, and the state outlives them).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RateState {
    /// When the current window opened.
    pub window_start_ms: u64,
    /// Runs started in it.
    pub started: u32,
    /// Events held back since the last run started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held: Option<Held>,
    /// The bytes of `notify-rate.held` already counted (see `rate_file`): that file only
    /// grows, so a byte appended while a holder reads it is counted by the next one.
    #[serde(default, skip_serializing_if = "tether_protocol::protocol::is_default")]
    pub held_taken: u64,
}

/// Events held back: how many of each kind, from when to when.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Held {
    /// By kind, in [`KINDS`]' order.
    pub counts: [u32; 5],
    pub first_ms: u64,
    pub last_ms: u64,
}

impl Held {
    pub fn total(&self) -> u32 {
        self.counts.iter().fold(0, |sum, n| sum.saturating_add(*n))
    }

    /// `397 commands failed, 2 needed input in 4 s`.
    pub fn text(&self) -> String {
        let parts: Vec<String> = KINDS
            .iter()
            .zip(self.counts)
            .filter(|(_, n)| *n > 0)
            .map(|(kind, n)| {
                let noun = if n == 1 { "command" } else { "commands" };
                format!("{n} {noun} {}", happened(*kind))
            })
            .collect();
        let span_ms = self.last_ms.saturating_sub(self.first_ms);
        // Rounded to the second, and never "in 0 s".
        let seconds = ((span_ms + 500) / 1000).max(1);
        format!("{} in {seconds} s", parts.join(", "))
    }

    fn add(&mut self, kind: AttentionKind, now_ms: u64) {
        let index = usize::from(kind_index(kind));
        self.counts[index] = self.counts[index].saturating_add(1);
        self.last_ms = self.last_ms.max(now_ms);
    }
}

/// `kind`'s index in [`Held::counts`].
pub fn kind_index(kind: AttentionKind) -> u8 {
    KINDS.iter().position(|k| *k == kind).unwrap_or(0) as u8
}

/// The kind at `index` of [`Held::counts`].
pub fn kind_of(index: u8) -> Option<AttentionKind> {
    KINDS.get(usize::from(index)).copied()
}

/// One more event of `kind` held back at `now_ms` (one counted without the state at hand).
pub fn add_held(state: &mut RateState, kind: AttentionKind, now_ms: u64) {
    state
        .held
        .get_or_insert_with(|| Held {
            first_ms: now_ms,
            last_ms: now_ms,
            ..Held::default()
        })
        .add(kind, now_ms);
}

/// What happened, worded for a count of commands.
fn happened(kind: AttentionKind) -> &'static str {
    match kind {
        AttentionKind::NeedsInput => "needed input",
        AttentionKind::Quiet => "went quiet",
        AttentionKind::Runaway => "ran away",
        AttentionKind::Failed => "failed",
        AttentionKind::Finished => "finished",
    }
}

/// Whether a run starts for an event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// It starts, telling also of the events held back before it (if any).
    Run { held: Option<Held> },
    /// Held back: counted, told with the next run that starts.
    Hold,
}

/// Whether a run may start for an event of `kind` at `now_ms`, given the user's `state`; the
/// state as it is after. A clock that went back opens a new window (the file outlives
/// reboots and clock changes: a window from the future would hold every run back).
pub fn decide(state: &RateState, kind: AttentionKind, now_ms: u64) -> (Verdict, RateState) {
    let mut next = state.clone();
    // A window opens at its first run. Brokers take the file in turn, not in the order of
    // their events: one at most LATE_MS older than the window's start came late and counts
    // in it; older, the clock was set back, and a new window starts.
    let expired = state.started == 0
        || state.window_start_ms.saturating_sub(now_ms) > LATE_MS
        || now_ms.saturating_sub(state.window_start_ms) >= WINDOW_MS;
    if expired {
        next.window_start_ms = now_ms;
        next.started = 0;
    }
    if next.started < RUNS_PER_WINDOW {
        next.started += 1;
        let held = next.held.take();
        return (Verdict::Run { held }, next);
    }
    add_held(&mut next, kind, now_ms);
    (Verdict::Hold, next)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `events` events of `kind`, `every_ms` apart from `start_ms`, through `state`: the
    /// verdicts.
    fn burst(
        state: &mut RateState,
        kind: AttentionKind,
        start_ms: u64,
        every_ms: u64,
        events: u64,
    ) -> Vec<Verdict> {
        (0..events)
            .map(|i| {
                let (verdict, next) = decide(state, kind, start_ms + i * every_ms);
                *state = next;
                verdict
            })
            .collect()
    }

    /// Twelve brokers failing at once take the file in another order than their events'
    /// times: an event older than the window's start is late, not a new window.
    #[test]
    fn a_late_event_counts_in_the_window_it_came_late_to() {
        let mut state = RateState::default();
        let start = 1_700_000_000_000;
        let times = [105, 100, 110, 98, 120, 99, 130, 97, 101, 102, 103, 96];
        let runs = (times.iter())
            .filter(|&&t| {
                let (verdict, next) = decide(&state, AttentionKind::Failed, start + t);
                state = next;
                verdict != Verdict::Hold
            })
            .count();
        assert_eq!(runs, RUNS_PER_WINDOW as usize);
        assert_eq!(state.started, RUNS_PER_WINDOW);
        // A clock set back further opens a new one.
        let (verdict, next) = decide(&state, AttentionKind::Failed, start - LATE_MS - 1);
        assert_ne!(verdict, Verdict::Hold);
        assert_eq!(next.started, 1);
    }

    #[test]
    fn four_hundred_failures_in_four_seconds_make_a_few_runs_and_one_summary() {
        let mut state = RateState::default();
        let start = 1_700_000_000_000;
        // 400 commands failing 9.5 ms apart: 3.8 s.
        let verdicts = burst(&mut state, AttentionKind::Failed, start, 9, 400);
        let runs = verdicts.iter().filter(|v| **v != Verdict::Hold).count();
        assert_eq!(runs, RUNS_PER_WINDOW as usize);
        assert!(
            verdicts[..RUNS_PER_WINDOW as usize]
                .iter()
                .all(|v| *v == Verdict::Run { held: None })
        );
        // Within the window, still held.
        let (verdict, next) = decide(&state, AttentionKind::NeedsInput, start + WINDOW_MS - 1);
        assert_eq!(verdict, Verdict::Hold);
        state = next;
        // The window over: the next event runs, and tells the burst.
        let (verdict, next) = decide(&state, AttentionKind::Failed, start + WINDOW_MS + 5);
        let Verdict::Run { held: Some(held) } = verdict else {
            panic!("{verdict:?}");
        };
        assert_eq!(held.total(), 396);
        assert_eq!(
            held.text(),
            "1 command needed input, 395 commands failed in 60 s"
        );
        assert_eq!(next.held, None, "told once");
        assert_eq!(next.started, 1);
    }

    #[test]
    fn a_burst_is_worded_in_whole_seconds() {
        let mut state = RateState::default();
        let start = 10_000;
        burst(
            &mut state,
            AttentionKind::Failed,
            start,
            1,
            RUNS_PER_WINDOW as u64,
        );
        burst(&mut state, AttentionKind::Failed, start + 100, 10, 400);
        let held = state.held.clone().unwrap();
        assert_eq!(held.text(), "400 commands failed in 4 s");
        let one = Held {
            counts: [0, 0, 0, 1, 0],
            first_ms: 5,
            last_ms: 5,
        };
        assert_eq!(one.text(), "1 command failed in 1 s");
    }

    #[test]
    fn a_clock_that_went_back_opens_a_new_window() {
        let mut state = RateState::default();
        burst(&mut state, AttentionKind::Failed, 50_000, 1, 10);
        let (verdict, next) = decide(&state, AttentionKind::Failed, 1_000);
        assert!(
            matches!(verdict, Verdict::Run { held: Some(_) }),
            "{verdict:?}"
        );
        assert_eq!(next.window_start_ms, 1_000);
    }

    #[test]
    fn runs_spread_out_are_never_held() {
        let mut state = RateState::default();
        let verdicts = burst(&mut state, AttentionKind::Failed, 0, WINDOW_MS / 4, 40);
        assert!(verdicts.iter().all(|v| *v == Verdict::Run { held: None }));
    }
}
