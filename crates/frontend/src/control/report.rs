//! Saying in a few words what a stop or a signal did, from the broker's events: shared by
//! `tether stop` and by the `tether exec` whose command was stopped from outside.

use tether_model::command::exit_label;
use tether_model::ending::Ending;
use tether_protocol::protocol::{Event, EventKind, ExitStatus, ProcessSignal};
use tether_protocol::units::short_duration;

/// One signal sent: its name (`TERM`), when (µs since the broker started), how many
/// processes it reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sent {
    pub signal: ProcessSignal,
    pub mono_us: u64,
    pub reached: usize,
}

impl Sent {
    /// The signal `event` says was sent, if it says one was.
    pub fn of(event: &Event) -> Option<Sent> {
        match &event.kind {
            EventKind::SignalSent {
                signal, targets, ..
            } => Some(Sent {
                signal: *signal,
                mono_us: event.mono_us,
                reached: targets.len(),
            }),
            _ => None,
        }
    }

    /// For tests: `signal` sent `ms` after the broker started, reaching one process.
    #[cfg(test)]
    pub(crate) fn to_one(signal: &str, ms: u64) -> Sent {
        Sent {
            signal: signal.parse().expect("a signal"),
            mono_us: ms * 1000,
            reached: 1,
        }
    }
}

/// `SIGTERM, SIGKILL after 2s`: the signals in order, each after the first with its delay.
/// The SIGCONT that follows every stop signal is left out (it only wakes stopped processes).
pub fn describe_signals(sent: &[Sent]) -> String {
    let mut shown: Vec<&Sent> = sent
        .iter()
        .filter(|s| s.signal != ProcessSignal::CONT)
        .collect();
    // Repeats of one signal (a sweep reaching newcomers) are one step.
    shown.dedup_by_key(|s| s.signal);
    let Some(first) = shown.first() else {
        return "no signal".into();
    };
    let after = |s: &Sent| short_duration(s.mono_us.saturating_sub(first.mono_us) / 1000);
    let rest = shown[1..]
        .iter()
        .map(|s| format!(", SIG{} after {}", s.signal, after(s)));
    std::iter::once(format!("SIG{}", first.signal))
        .chain(rest)
        .collect()
}

/// What a subscriber learns of a stop, event by event.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StopReport {
    pub sent: Vec<Sent>,
    pub exit: Option<ExitStatus>,
    /// The events that say how the run ended (who stopped it, a hard kill, its exit), for
    /// the words every view uses for that ([`Ending`]).
    pub ending_events: Vec<Event>,
    pub orphans_reaped: usize,
    /// The broker said `close`: nothing of the command is left.
    pub closed: bool,
}

impl StopReport {
    pub fn apply(&mut self, event: &Event) {
        if !matches!(
            event.kind,
            EventKind::Output { .. } | EventKind::Tree { .. } | EventKind::OrphanReaped { .. }
        ) {
            self.ending_events.push(event.clone());
        }
        match &event.kind {
            EventKind::SignalSent { .. } => self.sent.extend(Sent::of(event)),
            EventKind::Exit { status, .. } => self.exit = Some(*status),
            // Only escapees: not a process re-parented when its parent ended (unknown in a
            // journal from before the broker said, and counted then, as it was).
            EventKind::OrphanReaped { escaped, .. } if *escaped != Some(false) => {
                self.orphans_reaped += 1
            }
            EventKind::Close { .. } => self.closed = true,
            _ => {}
        }
    }

    /// `SIGTERM, SIGKILL after 2s; the command ended: stopped (SIGKILL); 2 escaped processes
    /// reaped`.
    pub fn describe(&self) -> String {
        let mut text = describe_signals(&self.sent);
        if let Some(status) = self.exit {
            text.push_str(&format!(
                "; the command ended: {}",
                ended_words(&self.ending_events, status)
            ));
        }
        if self.orphans_reaped > 0 {
            let es = if self.orphans_reaped == 1 { "" } else { "es" };
            text.push_str(&format!(
                "; {} escaped process{es} reaped",
                self.orphans_reaped
            ));
        }
        text
    }
}

/// How a run ended, in the words every view uses (`stopped (SIGTERM)`, `exit 1`), read from
/// its events; the bare status where they do not say (its leftovers still kept).
pub fn ended_words(events: &[Event], status: ExitStatus) -> String {
    Ending::of_events(events).map_or_else(|| exit_label(status), Ending::words)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sent(signal: &str, ms: u64) -> Sent {
        Sent::to_one(signal, ms)
    }

    #[test]
    fn a_stop_reads_as_its_signals_and_their_delays() {
        let stop = [
            sent("TERM", 100),
            sent("CONT", 100),
            sent("TERM", 150),
            sent("CONT", 150),
            sent("KILL", 2_101),
            sent("KILL", 2_130),
        ];
        assert_eq!(describe_signals(&stop), "SIGTERM, SIGKILL after 2s");
        assert_eq!(describe_signals(&stop[..2]), "SIGTERM");
        assert_eq!(describe_signals(&[]), "no signal");
        assert_eq!(
            describe_signals(&[sent("INT", 0), sent("KILL", 300)]),
            "SIGINT, SIGKILL after 300ms"
        );
    }

    #[test]
    fn a_stop_report_sums_up_the_events() {
        let ev = |kind| Event {
            ts_ms: 0,
            mono_us: 0,
            kind,
        };
        let mut report = StopReport::default();
        report.apply(&ev(EventKind::SignalSent {
            signal: ProcessSignal::TERM,
            scope: tether_protocol::protocol::Scope::Group,
            origin: tether_protocol::protocol::Origin::Operator,
            targets: vec![1, 2],
            client: None,
        }));
        let status = ExitStatus {
            code: None,
            signal: Some(15),
            core_dumped: false,
        };
        report.apply(&ev(EventKind::Exit { pid: 1, status }));
        report.apply(&ev(EventKind::OrphanReaped {
            pid: 2,
            status,
            escaped: Some(true),
        }));
        report.apply(&ev(EventKind::OrphanReaped {
            pid: 3,
            status,
            escaped: Some(false),
        }));
        report.apply(&ev(EventKind::Close {
            stdout_bytes: 0,
            stderr_bytes: 0,
        }));
        assert!(report.closed);
        assert_eq!(
            report.describe(),
            "SIGTERM; the command ended: stopped (SIGTERM); 1 escaped process reaped"
        );
    }
}
