//! `tether exec`'s side of the conversation with its broker: events in, requests out, its
//! own signals passed on, and a watch on whether the broker still answers.

use std::io::Write;
use std::time::Duration;

use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio::time::{Instant, sleep_until};

use super::copy::OutputCopy;
use super::keys::{KeyRelay, typed};
use super::{HEARTBEAT, Outcome, QUIET_PING, STOP_PATIENCE, STOP_SLACK};
use crate::control::report::{Sent, describe_signals};
use crate::protocol::{EventKind, Origin, ProcessSignal, Scope, Stream, ToBroker, input_requests};
use crate::supervisor::leftovers::GroupLeader;
use crate::supervisor::liveness::{Heartbeat, PingWatch, is_stopped};
use crate::supervisor::{BrokerLine, BrokerProcess};

/// How the conversation with the broker ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum End {
    /// The broker said `close`: it did its work.
    Closed,
    /// The command exited and the broker keeps what it left running (`leftovers_kept`):
    /// our part is over.
    LeftRunning,
    /// The broker refused the launch itself: nothing runs.
    Refused,
    /// Its events ended without a `close`: it died.
    Lost,
    /// It stopped answering pings (stopped, wedged).
    Unresponsive,
    /// Asked to stop, it had not finished at the end of the grace period.
    StopOverdue,
}

/// The signals `tether exec` acts on.
pub(super) struct Signals {
    interrupt: Signal,
    terminate: Signal,
    hangup: Signal,
    suspend: Signal,
    resume: Signal,
    /// Our terminal changed size: the command's terminals follow (only when it has some).
    resized: Option<Signal>,
}

impl Signals {
    /// `terminal`: the command has terminals whose size follows ours.
    pub(super) fn install(terminal: bool) -> std::io::Result<Signals> {
        Ok(Signals {
            interrupt: signal(SignalKind::interrupt())?,
            terminate: signal(SignalKind::terminate())?,
            hangup: signal(SignalKind::hangup())?,
            suspend: signal(SignalKind::from_raw(libc::SIGTSTP))?,
            resume: signal(SignalKind::from_raw(libc::SIGCONT))?,
            resized: terminal
                .then(|| signal(SignalKind::window_change()))
                .transpose()?,
        })
    }
}

/// Waits for SIGWINCH, if we listen for it; never resolves otherwise.
async fn resized(signal: &mut Option<Signal>) {
    match signal {
        Some(signal) => {
            signal.recv().await;
        }
        None => std::future::pending().await,
    }
}

/// What `tether exec` keeps track of while its broker runs the command.
pub(super) struct Conversation {
    broker_pid: i32,
    json: bool,
    grace: Duration,
    /// The copy of the output to our own streams (none with `--json`).
    pub(super) copy: Option<OutputCopy>,
    pub(super) outcome: Outcome,
    started: bool,
    pub(super) leader: Option<GroupLeader>,
    /// The command's cgroup, as the broker's `containment` event named it: what to kill and
    /// remove if the broker dies.
    pub(super) cgroup: Option<std::path::PathBuf>,
    /// Stops asked for so far: the first runs the stop sequence, a second (another Ctrl-C)
    /// SIGKILLs the group at once.
    stops: u32,
    /// When the first stop was asked for.
    pub(super) stop_asked: Option<Instant>,
    /// When the broker last sent a line: one still reporting its stop is at work.
    last_heard: Instant,
    /// The command's group was sent TSTP on our behalf and awaits CONT.
    paused: bool,
    watch: PingWatch,
    /// The first SIGINT, SIGTERM or SIGHUP goes to the command's group as it came (see
    /// [`super::SignalMode::Forward`]); later ones stop it.
    pub(super) forward_signals: bool,
    /// Signals sent on behalf of a control-socket client (`tether stop`, `kill`, `signal`
    /// from elsewhere), to say so when the command ends.
    from_outside: Vec<Sent>,
    /// What the journal could not keep (a cap, a disk that filled), each said once, to be
    /// told in one line after the command's last bytes: never in the middle of its stderr.
    pub(super) journal_losses: Vec<String>,
    /// Our terminal's keys, passed to the command's (see [`super::keys`]).
    pub(super) keys: Option<KeyRelay>,
}

impl Conversation {
    pub(super) fn new(
        broker_pid: i32,
        json: bool,
        grace: Duration,
        copy: Option<OutputCopy>,
    ) -> Self {
        Conversation {
            broker_pid,
            json,
            grace,
            copy,
            outcome: Outcome::default(),
            started: false,
            leader: None,
            cgroup: None,
            stops: 0,
            stop_asked: None,
            last_heard: Instant::now(),
            paused: false,
            watch: PingWatch::default(),
            forward_signals: false,
            from_outside: Vec::new(),
            journal_losses: Vec::new(),
            keys: None,
        }
    }

    /// When a stop asked for at `asked` is overdue and the broker is killed: `STOP_SLACK`
    /// past the grace period, or, while the broker keeps reporting (signals to a tree that
    /// keeps forking), `STOP_SLACK` after its last line, up to [`STOP_PATIENCE`] past the
    /// grace period. A stopped or wedged broker says nothing, so it is killed on time.
    fn stop_overdue_at(&self, asked: Instant) -> Instant {
        let on_time = asked + self.grace + STOP_SLACK;
        let at_work = (self.last_heard + STOP_SLACK).min(asked + self.grace + STOP_PATIENCE);
        on_time.max(at_work)
    }

    pub(super) async fn converse(
        &mut self,
        broker: &mut BrokerProcess,
        mut signals: Signals,
    ) -> End {
        let mut next_ping = Instant::now() + HEARTBEAT;
        let mut last_ping = Instant::now();
        loop {
            let mut stop: Option<Origin> = None;
            // The signal that asked for the stop, if one did.
            let mut interrupted: Option<ProcessSignal> = None;
            let overdue = self.stop_asked.map(|at| self.stop_overdue_at(at));
            tokio::select! {
                // Signals first: they are rare and must not wait behind a flood of output.
                // Lines before the timers: a line already in the pipe answers our pings, however
                // long we were blocked copying output or stopped.
                biased;
                _ = signals.suspend.recv() => self.suspend(broker),
                _ = signals.resume.recv() => self.resume(broker),
                _ = resized(&mut signals.resized) => {
                    let size = super::terminal::own_size();
                    let _ = broker.post(&ToBroker::Resize { size });
                }
                _ = signals.interrupt.recv() => { stop = Some(Origin::Operator); interrupted = Some(ProcessSignal::INT); }
                _ = signals.terminate.recv() => { stop = Some(Origin::Shutdown); interrupted = Some(ProcessSignal::TERM); }
                _ = signals.hangup.recv() => { stop = Some(Origin::Shutdown); interrupted = Some(ProcessSignal(nix::sys::signal::Signal::SIGHUP)); }
                // Whoever read our output is gone: stop the command, as SIGPIPE would.
                Some(_) = broken_pipe(&mut self.copy) => stop = Some(Origin::Shutdown),
                typed = typed(&mut self.keys) => {
                    for request in input_requests(&typed) {
                        let _ = broker.post(&request);
                    }
                }
                line = broker.next_line() => {
                    let Some(line) = line else { return End::Lost };
                    self.watch.heard();
                    self.last_heard = Instant::now();
                    match self.on_line(line) {
                        Ok(None) => {}
                        Ok(Some(end)) => return end,
                        Err(()) => stop = Some(Origin::Shutdown),
                    }
                }
                _ = sleep_until(overdue.unwrap_or_else(Instant::now)), if overdue.is_some() => {}
                _ = sleep_until(next_ping) => {}
            }
            // Deadlines are checked whatever woke us: a flood of lines must not starve them.
            let now = Instant::now();
            if overdue.is_some_and(|at| now >= at) {
                return End::StopOverdue;
            }
            if now >= next_ping {
                next_ping = now + HEARTBEAT;
                let stopped = is_stopped(self.broker_pid);
                let watching = stopped || !self.watch.answered() || self.stop_asked.is_some();
                if watching || now >= last_ping + QUIET_PING {
                    last_ping = now;
                    match self.watch.due(stopped) {
                        Heartbeat::GiveUp => return End::Unresponsive,
                        Heartbeat::Ping => {
                            let _ = broker.ping();
                        }
                    }
                }
            }
            let Some(origin) = stop else { continue };
            if let (true, Some(name)) = (self.forward_signals, interrupted) {
                // Once: a command that ignores it is then stopped by the next one.
                self.forward_signals = false;
                let _ = broker.post(&group_signal(name));
                continue;
            }
            let message = match self.stops {
                0 => ToBroker::Stop {
                    origin: Some(origin),
                },
                _ if interrupted.is_some() => ToBroker::Signal {
                    signal: ProcessSignal::KILL,
                    scope: Scope::Group,
                    pid: None,
                },
                _ => continue,
            };
            self.stops += 1;
            self.stop_asked.get_or_insert(now);
            let _ = broker.post(&message);
        }
    }

    /// Ctrl-Z: the command's group gets TSTP through the broker (so the journal shows it),
    /// then we stop ourselves, so the shell sees the job stopped. As the kernel does for a
    /// default TSTP, nothing happens if our group is orphaned: nobody would continue us.
    fn suspend(&mut self, broker: &mut BrokerProcess) {
        let us = nix::unistd::getpgrp().as_raw();
        if crate::procfs::group_orphaned(&crate::procfs::all_processes(), us) {
            return;
        }
        self.paused |= broker.post(&group_signal(ProcessSignal::TSTP)).is_ok();
        if let Some(keys) = &self.keys {
            keys.pause();
        }
        let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGSTOP);
    }

    /// `fg`/`bg` (or any SIGCONT): the group we paused goes on too.
    fn resume(&mut self, broker: &mut BrokerProcess) {
        if let Some(keys) = &self.keys {
            keys.resume();
        }
        if std::mem::take(&mut self.paused) {
            let _ = broker.post(&group_signal(ProcessSignal::CONT));
        }
    }

    fn journal_lost(&mut self, message: String) {
        if !self.journal_losses.contains(&message) {
            self.journal_losses.push(message);
        }
    }

    /// Acts on one line from the broker. `Ok(Some(_))` ends the conversation; `Err` means
    /// our own output is gone and the command should be stopped.
    fn on_line(&mut self, line: BrokerLine) -> Result<Option<End>, ()> {
        let event = match line.event {
            Ok(event) => event,
            Err(err) => {
                say!("ignoring a line from the broker: {err}");
                return Ok(None);
            }
        };
        let mut output_gone = false;
        if self.json && !matches!(event.kind, EventKind::Pong) {
            let mut out = std::io::stdout().lock();
            output_gone |= out
                .write_all(&line.raw)
                .and_then(|()| out.write_all(b"\n"))
                .and_then(|()| out.flush())
                .is_err();
        }
        match event.kind {
            EventKind::BrokerStarted { .. } => self.started = true,
            EventKind::Containment { path, .. } => self.cgroup = path.clone(),
            EventKind::Spawned { pgid, .. } => {
                // The leader is the broker's child, or ours if the broker is already gone.
                let parents = [self.broker_pid, std::process::id() as i32];
                self.leader = GroupLeader::find(pgid, &parents);
            }
            // The cap limits what is stored, not what we copy; say so all the same, later.
            EventKind::OutputCapped { message, .. } | EventKind::EventsCapped { message, .. } => {
                self.journal_lost(message);
            }
            EventKind::SpawnError { code, message } => {
                self.outcome.spawn_error = Some((code, message))
            }
            EventKind::Exit { status, .. } => {
                self.outcome.exit = Some(status);
                self.leader = None;
            }
            EventKind::BrokerFailure { message, .. } => {
                if !self.started {
                    // The launch itself was refused: nothing runs, nothing will. The caller
                    // says why, or runs the command directly (`--fail-open`).
                    self.outcome.broker_failure = Some(message);
                    return Ok(Some(End::Refused));
                }
                // The command runs on: said once it is over, with any other loss (with
                // --json, the event says it).
                self.outcome.broker_failure_shown = !self.json;
                if !self.json {
                    self.journal_lost(message.clone());
                }
                self.outcome.broker_failure = Some(message);
            }
            EventKind::SignalSent {
                signal,
                targets,
                client: Some(_),
                ..
            } => self.from_outside.push(Sent {
                signal,
                mono_us: event.mono_us,
                reached: targets.len(),
            }),
            EventKind::FinalDrain {
                pattern, drain_ms, ..
            } => self.outcome.final_line = Some((pattern, drain_ms)),
            EventKind::SignalSent {
                origin: Origin::FinalDrain,
                ..
            } => self.outcome.drained = true,
            EventKind::LeftoversKept { .. } => return Ok(Some(End::LeftRunning)),
            EventKind::Close { .. } => {
                if let (false, Some(message)) =
                    (self.json, stopped_from_outside(&self.from_outside))
                {
                    say!("{message}");
                }
                if let (false, true) = (self.json, self.outcome.drained) {
                    say!("{}", self.outcome.drained_message());
                }
                self.outcome.closed = true;
                return Ok(Some(End::Closed));
            }
            _ => {}
        }
        if output_gone { Err(()) } else { Ok(None) }
    }
}

/// What to tell the caller whose command an operator stopped from elsewhere (`tether stop`,
/// `kill`, `signal`, `tether watch`): `stopped by the operator: SIGTERM, SIGKILL after 2s`.
/// Only for signals that end a process by default; a SIGUSR1 or SIGWINCH is not a stop.
fn stopped_from_outside(sent: &[Sent]) -> Option<String> {
    const ENDING: [&str; 5] = ["TERM", "KILL", "INT", "HUP", "QUIT"];
    sent.iter()
        .any(|s| ENDING.contains(&s.signal.name()))
        .then(|| format!("stopped by the operator: {}", describe_signals(sent)))
}

/// The next stream whose reader went away; never resolves without a copy.
async fn broken_pipe(copy: &mut Option<OutputCopy>) -> Option<Stream> {
    match copy {
        Some(copy) => copy.broken.recv().await,
        None => std::future::pending().await,
    }
}

fn group_signal(signal: ProcessSignal) -> ToBroker {
    ToBroker::Signal {
        signal,
        scope: Scope::Group,
        pid: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sent(signal: &str, ms: u64) -> Sent {
        Sent {
            signal: signal.parse().expect("a signal"),
            mono_us: ms * 1000,
            reached: 1,
        }
    }

    #[test]
    fn a_stop_from_outside_is_told_with_its_signals() {
        let stop = [sent("TERM", 10), sent("CONT", 10), sent("KILL", 2_010)];
        assert_eq!(
            stopped_from_outside(&stop).as_deref(),
            Some("stopped by the operator: SIGTERM, SIGKILL after 2s")
        );
        assert_eq!(
            stopped_from_outside(&[sent("KILL", 5)]).as_deref(),
            Some("stopped by the operator: SIGKILL")
        );
        assert_eq!(stopped_from_outside(&[sent("WINCH", 5)]), None);
        assert_eq!(stopped_from_outside(&[]), None);
    }
}
