//! `tether exec`'s half of the conversation with its broker: its own signals passed on or
//! made a stop, its keys typed, the events read for how the command ended. Launching,
//! liveness and the fallback are the [`BrokerConversation`]'s.

use std::io::Write;

use tether_os::signal_pipe::SignalPipe;
use tokio::time::{Instant, sleep_until};

use super::Outcome;
use super::copy::OutputCopy;
use super::keys::{KeyRelay, typed};
use crate::control::report::{Sent, describe_signals};
use crate::supervisor::{BrokerConversation, BrokerLine, Due, End};
use tether_protocol::protocol::{
    EventKind, Origin, ProcessSignal, Request, Scope, Stream, input_requests, write_frame,
};

/// Every signal [`install_signals`] takes (SIGWINCH only when the command has terminals).
pub(super) const HANDLED: [nix::sys::signal::Signal; 6] = {
    use nix::sys::signal::Signal::*;
    [SIGINT, SIGTERM, SIGHUP, SIGTSTP, SIGCONT, SIGWINCH]
};

/// The signals `tether exec` hears; `terminal`: the command has terminals whose size follows
/// ours (SIGWINCH is heard). Through a pipe of our own, not tokio's streams: inside an
/// agent's sandbox (Codex's) their wake-up is denied, and the shim heard none of its
/// caller's signals there.
pub(super) fn install_signals(terminal: bool) -> std::io::Result<SignalPipe> {
    let heard: Vec<libc::c_int> = (HANDLED.iter())
        .filter(|s| terminal || **s != nix::sys::signal::Signal::SIGWINCH)
        .map(|s| *s as libc::c_int)
        .collect();
    SignalPipe::install(&heard, &[])
}

/// The stop signals, in the order a batch that holds several is taken, each with the stop's
/// origin when it is ours, not forwarded.
const STOPS: [(libc::c_int, ProcessSignal, Origin); 3] = [
    (libc::SIGINT, ProcessSignal::INT, Origin::Operator),
    (libc::SIGTERM, ProcessSignal::TERM, Origin::Shutdown),
    (libc::SIGHUP, ProcessSignal::HUP, Origin::Shutdown),
];

/// What `tether exec` keeps track of while its broker runs the command: its half of the
/// [`BrokerConversation`].
#[derive(Default)]
pub(super) struct ExecConversation {
    json: bool,
    /// The copy of the output to our own streams (none with `--json`).
    pub(super) copy: Option<OutputCopy>,
    pub(super) outcome: Outcome,
    started: bool,
    /// Stops asked for so far: the first runs the stop sequence, a second (another Ctrl-C)
    /// SIGKILLs the group at once.
    stops: u32,
    /// The command's group was sent TSTP on our behalf and awaits CONT.
    paused: bool,
    /// The first SIGINT, SIGTERM or SIGHUP goes to the command's group as it came (see
    /// [`super::SignalMode::Forward`]); later ones stop it.
    forward_signals: bool,
    /// Whether our signals are our caller's (the shell shim's, in forward mode): the stop a
    /// later one starts is the caller's doing, as the first one passed on was.
    signals_from_caller: bool,
    /// Signals sent on behalf of a control-socket client (`tether stop`, `kill`, `signal`
    /// from elsewhere), to say so when the command ends.
    from_outside: Vec<Sent>,
    /// What the journal could not keep (a cap, a disk that filled), each said once, to be
    /// told in one line after the command's last bytes: never in the middle of its stderr.
    pub(super) journal_losses: Vec<String>,
    /// Our terminal's keys, passed to the command's (see [`super::keys`]).
    keys: Option<KeyRelay>,
}

impl ExecConversation {
    pub(super) fn new(
        json: bool,
        copy: Option<OutputCopy>,
        forward_signals: bool,
        keys: Option<KeyRelay>,
    ) -> Self {
        ExecConversation {
            json,
            copy,
            forward_signals,
            signals_from_caller: forward_signals,
            keys,
            ..Default::default()
        }
    }

    pub(super) async fn converse(
        &mut self,
        broker: &mut BrokerConversation,
        mut signals: SignalPipe,
    ) -> End {
        loop {
            let mut stop: Option<Origin> = None;
            // The signal that asked for the stop, if one did.
            let mut interrupted: Option<ProcessSignal> = None;
            let deadline = broker.deadline();
            tokio::select! {
                // Signals first: they are rare and must not wait behind a flood of output.
                // Lines before the timers: a line already in the pipe answers our pings, however
                // long we were blocked copying output or stopped.
                biased;
                arrived = signals.recv() => {
                    if arrived.has(libc::SIGTSTP) {
                        self.suspend(broker);
                    }
                    if arrived.has(libc::SIGCONT) {
                        self.resume(broker);
                    }
                    if arrived.has(libc::SIGWINCH) {
                        let size = super::terminal::own_size();
                        broker.post(&Request::Resize { size });
                    }
                    if let Some((_, name, origin)) = STOPS.iter().find(|s| arrived.has(s.0)) {
                        stop = Some(*origin);
                        interrupted = Some(*name);
                    }
                }
                // Whoever read our output is gone: stop the command, as SIGPIPE would.
                Some(_) = broken_pipe(&mut self.copy) => stop = Some(Origin::Shutdown),
                typed = typed(&mut self.keys) => {
                    for request in input_requests(&typed) {
                        broker.post(&request);
                    }
                }
                line = broker.next_line() => {
                    let Some(line) = line else { return End::Lost };
                    match self.on_line(line) {
                        Ok(None) => {}
                        Ok(Some(end)) => return end,
                        Err(()) => stop = Some(Origin::Shutdown),
                    }
                }
                _ = sleep_until(deadline) => {}
            }
            // Deadlines are checked whatever woke us: a flood of lines must not starve them.
            let now = Instant::now();
            match broker.check(now) {
                Some(Due::End(end)) => return end,
                Some(Due::SignalledDirectly(told) | Due::NotSignalled(told)) => say!("{told}"),
                None => {}
            }
            let Some(mut origin) = stop else { continue };
            if let (true, Some(name)) = (self.forward_signals, interrupted) {
                // Once: a command that ignores it is then stopped by the next one.
                self.forward_signals = false;
                broker.post(&group_signal(name, Some(Origin::Caller)));
                continue;
            }
            if self.signals_from_caller && interrupted.is_some() {
                origin = Origin::Caller;
            }
            let message = match self.stops {
                0 => Request::Stop {
                    origin: Some(origin),
                },
                _ if interrupted.is_some() => {
                    let caller = self.signals_from_caller.then_some(Origin::Caller);
                    group_signal(ProcessSignal::KILL, caller)
                }
                _ => continue,
            };
            self.stops += 1;
            broker.post_stop(&message, now);
        }
    }

    /// Ctrl-Z: the command's group gets TSTP through the broker (so the journal shows it),
    /// then we stop ourselves, so the shell sees the job stopped. As the kernel does for a
    /// default TSTP, nothing happens if our group is orphaned: nobody would continue us.
    fn suspend(&mut self, broker: &mut BrokerConversation) {
        let us = nix::unistd::getpgrp().as_raw();
        if tether_os::procfs::group_orphaned(&tether_os::procfs::all_processes(), us) {
            return;
        }
        self.paused |= broker.post(&group_signal(ProcessSignal::TSTP, None));
        if let Some(keys) = &self.keys {
            keys.pause();
        }
        let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGSTOP);
    }

    /// `fg`/`bg` (or any SIGCONT): the group we paused goes on too.
    fn resume(&mut self, broker: &mut BrokerConversation) {
        if let Some(keys) = &self.keys {
            keys.resume();
        }
        if std::mem::take(&mut self.paused) {
            broker.post(&group_signal(ProcessSignal::CONT, None));
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
            output_gone |= write_frame(&mut out, &line.raw)
                .and_then(|()| out.flush())
                .is_err();
        }
        match event.kind {
            EventKind::BrokerStarted { .. } => self.started = true,
            // The cap limits what is stored, not what we copy; say so all the same, later.
            EventKind::OutputCapped { message, .. } | EventKind::EventsCapped { message, .. } => {
                self.journal_lost(message);
            }
            // The broker gave up our copy of this stream: what is still in its pipe is
            // counted as never delivered, so it is not waited for.
            EventKind::OutputUndelivered { stream, bytes } => {
                self.outcome.undelivered[stream as usize] += bytes;
            }
            EventKind::SpawnError { code, message } => {
                self.outcome.spawn_error = Some((code, message))
            }
            EventKind::Exit { status, .. } => self.outcome.exit = Some(status),
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
            // The operator's, from elsewhere: not a signal we passed on from our caller.
            EventKind::SignalSent {
                origin: Origin::Operator,
                client: Some(_),
                ..
            } => self.from_outside.extend(Sent::of(&event)),
            EventKind::FinalDrain { pattern, drain, .. } => {
                self.outcome.final_line = Some((pattern, drain))
            }
            EventKind::SignalSent {
                origin: Origin::FinalDrain,
                ..
            } => self.outcome.drained = true,
            EventKind::LeftoversKept { .. } => return Ok(Some(End::LeftRunning)),
            EventKind::ResponseTimeout { silent_ms } => self.outcome.silent_ms = Some(silent_ms),
            ref kind @ EventKind::BudgetExceeded { .. } => {
                let (words, _) = tether_model::describe::describe(kind);
                self.outcome.over_budget = Some(words);
            }
            EventKind::Close {
                stdout_bytes,
                stderr_bytes,
            } => {
                self.outcome.written = Some([stdout_bytes, stderr_bytes]);
                if !self.json {
                    if let Some(message) = stopped_from_outside(&self.from_outside) {
                        say!("{message}");
                    }
                    if self.outcome.drained {
                        say!("{}", self.outcome.drained_message());
                    }
                    if let Some(line) = self.outcome.stopped_by_tether() {
                        say!("{line}");
                    }
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

/// `signal` to the command's group, on the operator's behalf, or (`Caller`) passed on from a
/// signal our caller sent us, as a shell would have it delivered.
fn group_signal(signal: ProcessSignal, origin: Option<Origin>) -> Request {
    Request::Signal {
        signal,
        scope: Scope::Group,
        pid: None,
        origin,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sent(signal: &str, ms: u64) -> Sent {
        Sent::to_one(signal, ms)
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
