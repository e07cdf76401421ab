//! The sampler's own thread: it samples the watch list on its own clock and sends whole
//! snapshots, so the UI loop never waits on `/proc`. Each snapshot carries the machine's
//! figures for the header, read at the same moment.

use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

use super::machine::MachineSampler;
use super::pace::Pace;
use super::{Sampler, Snapshot};

/// Below this the thread would spin rather than sample.
const MIN_INTERVAL: Duration = Duration::from_millis(10);
/// A changed watch list is sampled at once, but not sooner than this after the last sample:
/// an agent that starts 35 commands a second changes the list 70 times a second, and each
/// sample reads every process of the machine.
const CHANGED_LIST_GAP: Duration = Duration::from_millis(100);

enum Control {
    SetBrokers(Vec<i32>),
    SampleNow,
    Attend,
}

/// Runs a Sampler on its own std thread, sampling the current watch list every `interval`
/// (less often while nothing changes: see [`Pace`]) and sending whole snapshots. Dropping
/// the handle stops the thread.
///
/// With an empty watch list the thread sleeps until told otherwise (an idle TUI uses no
/// CPU); emptying the list sends one last, empty snapshot.
pub struct SamplerHandle {
    control: Option<Sender<Control>>,
    thread: Option<JoinHandle<()>>,
}

impl SamplerHandle {
    /// Replaces the watch list; a changed list is sampled at once (or [`CHANGED_LIST_GAP`]
    /// after the last sample, if that is later), so a new command's tree shows without
    /// waiting for the next tick.
    pub fn set_brokers(&self, brokers: Vec<i32>) {
        self.send(Control::SetBrokers(brokers));
    }

    /// Samples as soon as possible (say after a signal, to show its effect) and restarts the
    /// interval from there. Requests that pile up during a sample are merged.
    pub fn sample_now(&self) {
        self.send(Control::SampleNow);
    }

    /// The operator is looking (a key was pressed): sampling goes back to the full pace,
    /// and a sample older than one interval is taken at once.
    pub fn attend(&self) {
        self.send(Control::Attend);
    }

    fn send(&self, message: Control) {
        if let Some(control) = &self.control {
            // An error means the thread ended because nobody receives snapshots any more.
            let _ = control.send(message);
        }
    }
}

impl Drop for SamplerHandle {
    fn drop(&mut self) {
        drop(self.control.take());
        if let Some(thread) = self.thread.take() {
            // Waits for at most the sample in progress; a panic there was already reported.
            let _ = thread.join();
        }
    }
}

/// Starts the sampling thread. Should the OS refuse a thread, the receiver is closed at once
/// and the handle does nothing: the tree pane stays empty, the rest of tether works.
pub fn spawn_sampler(interval: Duration) -> (SamplerHandle, UnboundedReceiver<Snapshot>) {
    let (control, requests) = mpsc::channel();
    let (snapshots, receiver) = unbounded_channel();
    let interval = interval.max(MIN_INTERVAL);
    let thread = std::thread::Builder::new()
        .name("tether-sampler".into())
        .spawn(move || run(interval, &requests, &snapshots))
        .ok();
    let handle = SamplerHandle {
        control: thread.is_some().then_some(control),
        thread,
    };
    (handle, receiver)
}

fn run(interval: Duration, requests: &Receiver<Control>, snapshots: &UnboundedSender<Snapshot>) {
    let mut sampler = Sampler::new();
    let mut machine = MachineSampler::new();
    let mut pace = Pace::new(interval);
    let mut brokers: Vec<i32> = Vec::new();
    // When the next periodic sample is due; `None` while there is nothing to watch.
    let mut next: Option<Instant> = None;
    let mut last_sample: Option<Instant> = None;
    loop {
        let first = match next {
            Some(at) => requests.recv_timeout(at.saturating_duration_since(Instant::now())),
            None => requests.recv().map_err(|_| RecvTimeoutError::Disconnected),
        };
        let mut wanted = match first {
            Ok(message) => apply(message, &mut brokers, &mut pace),
            Err(RecvTimeoutError::Timeout) => Wanted::Now,
            Err(RecvTimeoutError::Disconnected) => return,
        };
        loop {
            match requests.try_recv() {
                Ok(message) => wanted = wanted.max(apply(message, &mut brokers, &mut pace)),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => return,
            }
        }
        let now = Instant::now();
        let since = last_sample.map(|at| now.saturating_duration_since(at));
        match when(wanted, since, pace.base()) {
            When::Now => {}
            When::After(wait) if !brokers.is_empty() => {
                let at = now + wait;
                next = Some(next.map_or(at, |next| next.min(at)));
                continue;
            }
            When::After(_) | When::Unchanged => continue,
        }
        let mut snapshot = sampler.sample(&brokers);
        snapshot.machine = Some(machine.sample(sampler.processes()));
        let wait = pace.after(&snapshot);
        if snapshots.send(snapshot).is_err() {
            return;
        }
        last_sample = Some(Instant::now());
        next = (!brokers.is_empty()).then(|| Instant::now() + wait);
    }
}

/// What a request calls for, least to most.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Wanted {
    Nothing,
    /// A sample unless the last one is younger than the base interval.
    IfStale,
    /// A sample unless the last one is younger than [`CHANGED_LIST_GAP`].
    Soon,
    Now,
}

/// When the sample a request calls for is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum When {
    Now,
    /// This long from now, unless the periodic sample comes first.
    After(Duration),
    /// The schedule stands.
    Unchanged,
}

/// When to sample for `wanted`, the last sample having been taken `since` ago (`None`:
/// never), at a `base` interval.
fn when(wanted: Wanted, since: Option<Duration>, base: Duration) -> When {
    let after = |gap: Duration| match since {
        Some(since) if since < gap => When::After(gap - since),
        _ => When::Now,
    };
    match wanted {
        Wanted::Now => When::Now,
        Wanted::Soon => after(CHANGED_LIST_GAP),
        Wanted::IfStale => after(base),
        Wanted::Nothing => When::Unchanged,
    }
}

/// Applies one request and says what it calls for.
fn apply(message: Control, brokers: &mut Vec<i32>, pace: &mut Pace) -> Wanted {
    match message {
        Control::SampleNow => Wanted::Now,
        Control::Attend => {
            pace.attend();
            Wanted::IfStale
        }
        Control::SetBrokers(list) => {
            let changed = list != *brokers;
            *brokers = list;
            match (changed, brokers.is_empty()) {
                (false, _) => Wanted::Nothing,
                // The last, empty snapshot goes at once: nothing is sampled after it.
                (true, true) => Wanted::Now,
                (true, false) => Wanted::Soon,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A changed list is sampled at once unless the last sample is younger than the gap,
    /// and then when the gap has passed: a burst of new commands costs a sample a gap, not
    /// one a command. A sample asked for (a signal's effect) is never put off.
    #[test]
    fn a_changed_list_is_sampled_at_most_once_a_gap() {
        let base = Duration::from_secs(1);
        let ms = Duration::from_millis;
        assert_eq!(when(Wanted::Soon, None, base), When::Now);
        assert_eq!(when(Wanted::Soon, Some(ms(150)), base), When::Now);
        assert_eq!(when(Wanted::Soon, Some(ms(30)), base), When::After(ms(70)));
        assert_eq!(when(Wanted::Now, Some(ms(1)), base), When::Now);
        assert_eq!(
            when(Wanted::IfStale, Some(ms(400)), base),
            When::After(ms(600))
        );
        assert_eq!(when(Wanted::IfStale, Some(ms(1_000)), base), When::Now);
        assert_eq!(when(Wanted::Nothing, Some(ms(1)), base), When::Unchanged);
        // What each change of the list asks for: a new list soon, an empty one at once.
        let mut pace = Pace::new(base);
        let mut brokers = vec![1];
        assert_eq!(
            apply(Control::SetBrokers(vec![1]), &mut brokers, &mut pace),
            Wanted::Nothing
        );
        assert_eq!(
            apply(Control::SetBrokers(vec![1, 2]), &mut brokers, &mut pace),
            Wanted::Soon
        );
        assert_eq!(
            apply(Control::SetBrokers(vec![]), &mut brokers, &mut pace),
            Wanted::Now
        );
        assert_eq!(
            apply(Control::SampleNow, &mut brokers, &mut pace),
            Wanted::Now
        );
    }
}
