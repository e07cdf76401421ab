//! A front end's one conversation with one broker: it launches the broker, posts requests,
//! reads its lines, sees acknowledgements and liveness, and when the broker cannot do its
//! work (it died, stopped answering, did not acknowledge or finish a stop) kills it and
//! stops what it left with the broker's own sequence (see [`super::leftovers`]).
//!
//! A front end drives it from its own `select!`: [`BrokerConversation::next_line`] in one
//! branch, a sleep until [`BrokerConversation::deadline`] in another, and after whatever
//! woke it, [`BrokerConversation::check`]; then [`BrokerConversation::end`].

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use tokio::time::Instant;

use super::ack::{Acks, Fallback};
use super::intervals::{ABORT_PATIENCE, BUSY_STOP_PATIENCE, KILL_PATIENCE, Pace, STOP_SLACK};
use super::leftovers::{
    Cleanup, GroupLeader, LiveBrokers, Ticket, signal_directly, stop_leftovers,
};
use super::liveness::{Heartbeat, PingWatch, is_stopped};
use super::process::{BrokerLine, BrokerProcess, Handover};
use crate::journal::JournalDir;
use crate::protocol::{EventKind, LaunchRequest, ToBroker};

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
    fn why(self) -> Option<&'static str> {
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

/// What [`BrokerConversation::check`] found due.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Due {
    /// The broker did not acknowledge a signal: the front end sent it itself, as the text says.
    SignalledDirectly(String),
    /// The broker must be given up on.
    End(End),
}

pub struct BrokerConversation {
    broker: BrokerProcess,
    live: LiveBrokers,
    ticket: Ticket,
    pace: Pace,
    grace: Duration,
    /// The command's group leader, while it runs: what to signal if the broker cannot.
    leader: Option<GroupLeader>,
    /// The command's cgroup: what to kill and remove if the broker dies.
    cgroup: CommandCgroup,
    acks: Acks,
    watch: PingWatch,
    next_look: Instant,
    last_ping: Instant,
    /// When the broker last sent a line: one still reporting its stop is at work.
    last_heard: Instant,
    /// When the first stop with a deadline was asked for (see [`Self::post_stop`]).
    stop_asked: Option<Instant>,
}

impl BrokerConversation {
    /// Starts `tether broker` for `request` (see [`BrokerProcess::spawn`]), registered with
    /// `live` under its lock, so that no walk for leftovers takes it for one. Must be called
    /// inside a tokio runtime.
    pub async fn launch(
        request: &LaunchRequest,
        journal: &JournalDir,
        handover: Handover,
        stderr: Stdio,
        live: &LiveBrokers,
        pace: Pace,
    ) -> std::io::Result<BrokerConversation> {
        let (broker, ticket) = {
            let mut registry = live.lock().await;
            let broker = BrokerProcess::spawn(request, journal, handover, stderr).await?;
            let ticket = registry.register(broker.pid());
            (broker, ticket)
        };
        let now = Instant::now();
        Ok(BrokerConversation {
            cgroup: CommandCgroup::Expected(broker.expected_cgroup.clone()),
            broker,
            live: live.clone(),
            ticket,
            pace,
            grace: Duration::from_millis(request.grace_ms),
            leader: None,
            acks: Acks::default(),
            watch: PingWatch::default(),
            next_look: now + pace.look,
            last_ping: now,
            last_heard: now,
            stop_asked: None,
        })
    }

    pub fn pid(&self) -> i32 {
        self.broker.pid()
    }

    /// Posts a request whose delivery needs no proof (keys, sizes, a signal whose own
    /// event says it was sent). False if the broker is gone.
    pub fn post(&mut self, message: &ToBroker) -> bool {
        self.broker.post(message).is_ok()
    }

    /// Posts a request and, for a group signal or a stop, a ping whose pong proves the
    /// broker read it: if that pong is not in by [`ACK_TIMEOUT`](super::intervals::ACK_TIMEOUT),
    /// [`Self::check`] falls back.
    pub fn request(&mut self, message: &ToBroker) {
        let posted = self.post(message) && self.post(&ToBroker::Ping);
        match Fallback::for_request(message) {
            Some(fallback) => self.acks.request_posted(fallback, posted, Instant::now()),
            None if posted => self.acks.ping_posted(),
            None => {}
        }
    }

    /// Posts a stop (or the KILL of a second one) with a deadline: the broker is given up
    /// on [`STOP_SLACK`] past the grace period counted from the first, unless it is still at
    /// work on it (see [`Self::stop_overdue_at`]).
    pub fn post_stop(&mut self, message: &ToBroker, now: Instant) {
        self.stop_asked.get_or_insert(now);
        self.post(message);
    }

    /// The next line from the broker, `None` once it has closed its end; what the line
    /// says about acknowledgements, liveness, the command's group and its cgroup is noted.
    /// Cancel-safe.
    pub async fn next_line(&mut self) -> Option<BrokerLine> {
        let line = self.broker.next_line().await?;
        self.watch.heard();
        self.last_heard = Instant::now();
        if let Ok(event) = &line.event {
            match &event.kind {
                EventKind::Pong => self.acks.pong(),
                EventKind::Spawned { pgid, .. } => {
                    // The leader is the broker's child, or ours if the broker is already gone.
                    let parents = [self.broker.pid(), std::process::id() as i32];
                    self.leader = GroupLeader::find(*pgid, &parents);
                }
                EventKind::Exit { .. } => self.leader = None,
                EventKind::Containment { path, .. } => {
                    self.cgroup = CommandCgroup::Named(path.clone());
                }
                _ => {}
            }
        }
        Some(line)
    }

    /// When [`Self::check`] next has something to do.
    pub fn deadline(&self) -> Instant {
        [
            Some(self.next_look),
            self.acks.deadline(),
            self.stop_asked.map(|at| self.stop_overdue_at(at)),
        ]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(self.next_look)
    }

    /// Does what is due at `now`: gives up on a stop overdue, falls back for a request not
    /// acknowledged, looks at the broker and pings it. Called after whatever woke the
    /// front end, so that a flood of lines never starves a deadline.
    pub fn check(&mut self, now: Instant) -> Option<Due> {
        if self
            .stop_asked
            .is_some_and(|at| now >= self.stop_overdue_at(at))
        {
            return Some(Due::End(End::StopOverdue));
        }
        match self.acks.take_due(now) {
            Some(Fallback::Signal(signal)) => {
                let why = "the broker did not answer";
                let told = signal_directly(self.broker.pid(), self.leader, signal, why);
                return Some(Due::SignalledDirectly(told));
            }
            Some(Fallback::Stop) => return Some(Due::End(End::StopUnanswered)),
            None => {}
        }
        if now >= self.next_look {
            self.next_look = now + self.pace.look;
            return self.look(now).map(Due::End);
        }
        None
    }

    /// A look at the broker: a ping, at the quiet pace while all is well, at every look
    /// while it is stopped, a ping is unanswered or a stop waits.
    fn look(&mut self, now: Instant) -> Option<End> {
        let silent_ends = self.pace.give_up_when_silent;
        let stopped = silent_ends && is_stopped(self.broker.pid());
        let watching = stopped || !self.watch.answered() || self.stop_asked.is_some();
        if !watching && now < self.last_ping + self.pace.quiet_ping {
            return None;
        }
        self.last_ping = now;
        if self.watch.due(stopped) == Heartbeat::GiveUp && silent_ends {
            return Some(End::Unresponsive);
        }
        if let Ok(true) = self.broker.ping() {
            self.acks.ping_posted();
        }
        None
    }

    /// When a stop asked for at `asked` is overdue and the broker is killed: [`STOP_SLACK`]
    /// past the grace period, or, while the broker keeps reporting (signals to a tree that
    /// keeps forking), `STOP_SLACK` after its last line, up to [`BUSY_STOP_PATIENCE`] past
    /// the grace period. A stopped or wedged broker says nothing, so it is killed on time.
    fn stop_overdue_at(&self, asked: Instant) -> Instant {
        let on_time = asked + self.grace + STOP_SLACK;
        let at_work = (self.last_heard + STOP_SLACK).min(asked + self.grace + BUSY_STOP_PATIENCE);
        on_time.max(at_work)
    }

    /// Ends the conversation: kills the broker unless it closed (through the unreaped
    /// child: its pid cannot have been reused) and reaps it, unless it keeps leftovers
    /// running. What it left, if the front end must stop it, is returned.
    pub async fn end(self, end: End) -> Option<Remains> {
        self.finish(end, false).await
    }

    /// Ends the conversation as [`end`](Self::end) does, but a broker that keeps leftovers
    /// running is waited for as well (reaped once they are stopped): for a front end that
    /// stays, as the TUI and the MCP server do, and learns the end from it.
    pub async fn end_and_reap(self, end: End) -> Option<Remains> {
        self.finish(end, true).await
    }

    async fn finish(self, end: End, reap_kept: bool) -> Option<Remains> {
        let mut child = self.broker.child;
        if end != End::LeftRunning || reap_kept {
            if !matches!(end, End::Closed | End::LeftRunning) {
                let _ = child.kill();
            }
            reap(child).await;
        }
        self.live.lock().await.unregister(self.ticket);
        let why = end.why()?;
        let (grace, patience) = match end {
            End::Aborted => (Duration::ZERO, ABORT_PATIENCE),
            End::StopUnanswered => (self.grace, KILL_PATIENCE),
            _ => cleanup_timing(self.stop_asked, self.grace, Instant::now()),
        };
        Some(Remains {
            why,
            live: self.live,
            leader: self.leader,
            cgroup: self.cgroup.path(),
            grace,
            patience,
        })
    }
}

/// The command's cgroup as a front end knows it.
enum CommandCgroup {
    /// Before the broker's `containment` event: the name it will have, where the front end
    /// finds a hierarchy (looked for only if the broker is lost).
    Expected(Option<String>),
    /// As the broker's `containment` event named it (`None`: no cgroup).
    Named(Option<PathBuf>),
}

impl CommandCgroup {
    fn path(self) -> Option<PathBuf> {
        match self {
            CommandCgroup::Expected(name) => crate::broker::containment::expected_cgroup(&name?),
            CommandCgroup::Named(path) => path,
        }
    }
}

/// Waits for `child` (the broker: unreaped, so its pid cannot name another process) to exit,
/// and reaps it. The wait is a pidfd in the event loop rather than a blocking thread: every
/// shim call ends here, the broker usually a moment from its exit, and a thread started to
/// wait for it cost more than the wait. Without pidfds (a kernel before 5.3, a sandbox), a
/// blocking thread all the same.
async fn reap(mut child: std::process::Child) {
    if let Ok(Some(_)) = child.try_wait() {
        return;
    }
    let pidfd = rustix::process::Pid::from_raw(child.id() as i32)
        .and_then(|pid| rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()).ok())
        .and_then(|fd| crate::fdio::register(fd, tokio::io::Interest::READABLE).ok());
    if let Some(pidfd) = pidfd
        && pidfd.readable().await.is_ok()
    {
        let _ = child.wait();
        return;
    }
    let _ = tokio::task::spawn_blocking(move || child.wait()).await;
}

/// What a broker that could not finish left, to be stopped by the front end.
pub struct Remains {
    why: &'static str,
    live: LiveBrokers,
    leader: Option<GroupLeader>,
    cgroup: Option<PathBuf>,
    grace: Duration,
    patience: Duration,
}

impl Remains {
    /// Why the front end stops it: `broker lost`, and how.
    pub fn why(&self) -> &'static str {
        self.why
    }

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

/// The grace and the patience after KILL of the front end's own stop. Asked to stop, exec
/// ends within grace + 1 s whatever happens: KILL when the grace asked for is over, and give
/// up soon after.
fn cleanup_timing(
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
        assert!(grace + STOP_SLACK * 2 < grace + Duration::from_secs(1));
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
