//! A front end's one conversation with one broker. It begins one of two ways: by launching
//! the broker ([`BrokerConversation::launch`]: requests on its stdin, lines from its stdout)
//! or by attaching to one that another front end launched
//! ([`BrokerConversation::attach`](super::attach): requests and lines over its control
//! socket). Either way it posts requests, reads the broker's lines, sees acknowledgements
//! and liveness, and when the broker cannot do its work falls back: a signal it did not
//! acknowledge is sent by the front end itself; a launched broker that died, stopped
//! answering, did not acknowledge or finish a stop is killed and what it left stopped with
//! the broker's own sequence (see [`super::leftovers`]).
//!
//! A front end drives it from its own `select!`: [`BrokerConversation::next_line`] in one
//! branch, a sleep until [`BrokerConversation::deadline`] in another, and after whatever
//! woke it, [`BrokerConversation::check`]; then [`BrokerConversation::end`].

use std::collections::VecDeque;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use tokio::time::Instant;

use super::ack::{Acks, Fallback, repeats_harmlessly};
use super::attach::over_socket;
use super::ending::{End, Remains, cleanup_timing};
use super::intervals::{
    ABORT_PATIENCE, ACK_TIMEOUT, BUSY_STOP_PATIENCE, KILL_PATIENCE, Pace, STOP_SLACK,
};
use super::leftovers::{GroupLeader, LiveBrokers, Ticket, signal_directly};
use super::liveness::{Heartbeat, PingWatch, is_stopped};
use super::process::{BrokerChild, BrokerLine, BrokerProcess, ForkedBroker, Handover};
use crate::control::ControlClient;
use crate::control::discover::LiveCommand;
use crate::control::fallback::signal_through_pid;
use crate::journal::JournalDir;
use crate::protocol::{EventKind, LaunchRequest, ToBroker};

/// What [`BrokerConversation::check`] found due.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Due {
    /// The broker did not acknowledge a signal: the front end sent it itself, as the text says.
    SignalledDirectly(String),
    /// The broker did not acknowledge a signal, and the front end could not send it itself
    /// (an attached broker whose pid could not be proved to be it), as the text says.
    NotSignalled(String),
    /// The broker must be given up on.
    End(End),
}

/// How the conversation reaches its broker.
pub(super) enum Link {
    /// A broker this front end launched, its unreaped child.
    Launched {
        broker: BrokerProcess,
        live: LiveBrokers,
        ticket: Ticket,
    },
    /// A broker another front end launched, through its control socket; the journal's
    /// record of it is what a fallback by its pid is checked against.
    Attached {
        client: ControlClient,
        command: Box<LiveCommand>,
    },
}

impl Link {
    /// Whether the broker answers `message` itself. On stdin it answers pings only, so a
    /// request is followed by a ping; on a control socket it answers every request.
    fn answers(&self, message: &ToBroker) -> bool {
        matches!(self, Link::Attached { .. }) || matches!(message, ToBroker::Ping)
    }
}

pub struct BrokerConversation {
    pub(super) link: Link,
    pace: Pace,
    grace: Duration,
    /// The command's group leader, while it runs: what to signal if the broker cannot.
    leader: Option<GroupLeader>,
    /// The command's cgroup: what to kill and remove if the broker dies.
    cgroup: CommandCgroup,
    pub(super) acks: Acks,
    watch: PingWatch,
    next_look: Instant,
    last_ping: Instant,
    /// When the broker last sent a line: one still reporting its stop is at work.
    last_heard: Instant,
    /// When the first stop with a deadline was asked for (see [`Self::post_stop`]).
    stop_asked: Option<Instant>,
    /// Lines read while waiting for an answer (see [`Self::answer`]), noted already, for
    /// [`Self::next_line`].
    pub(super) kept: VecDeque<BrokerLine>,
    /// A deadline came while the broker's lines waited unread: how many of them are still
    /// to be read before it is acted on (see [`Self::reading_before_due`]).
    unread_before_due: Option<usize>,
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
        Ok(BrokerConversation::launched(
            broker, ticket, request, live, pace,
        ))
    }

    /// Talks to the broker [`fork`](super::process::fork) started for `request` (before any
    /// runtime), registered with `live`. Must be called inside a tokio runtime.
    pub async fn forked(
        forked: ForkedBroker,
        request: &LaunchRequest,
        live: &LiveBrokers,
        pace: Pace,
    ) -> std::io::Result<BrokerConversation> {
        let ticket = live.lock().await.register(forked.pid());
        let broker = BrokerProcess::forked(forked)?;
        Ok(BrokerConversation::launched(
            broker, ticket, request, live, pace,
        ))
    }

    fn launched(
        broker: BrokerProcess,
        ticket: Ticket,
        request: &LaunchRequest,
        live: &LiveBrokers,
        pace: Pace,
    ) -> BrokerConversation {
        let cgroup = CommandCgroup::Expected(broker.expected_cgroup.clone());
        let grace = Duration::from_millis(request.grace_ms);
        let link = Link::Launched {
            broker,
            live: live.clone(),
            ticket,
        };
        BrokerConversation::over(link, pace, grace, cgroup)
    }

    /// A conversation over `link` that has heard nothing yet.
    pub(super) fn over(
        link: Link,
        pace: Pace,
        grace: Duration,
        cgroup: CommandCgroup,
    ) -> BrokerConversation {
        let now = Instant::now();
        BrokerConversation {
            link,
            pace,
            grace,
            leader: None,
            cgroup,
            acks: Acks::default(),
            watch: PingWatch::default(),
            next_look: now + pace.look,
            last_ping: now,
            last_heard: now,
            stop_asked: None,
            kept: VecDeque::new(),
            unread_before_due: None,
        }
    }

    pub fn pid(&self) -> i32 {
        match &self.link {
            Link::Launched { broker, .. } => broker.pid(),
            Link::Attached { command, .. } => command.broker.pid,
        }
    }

    /// Posts a request whose delivery needs no proof (keys, sizes, a signal whose own
    /// event says it was sent). False if the broker is gone, or (attached) the control
    /// socket does not carry such a request.
    pub fn post(&mut self, message: &ToBroker) -> bool {
        let posted = match &mut self.link {
            Link::Launched { broker, .. } => broker.post(message).is_ok(),
            Link::Attached { client, .. } => {
                over_socket(message).is_some_and(|request| client.post(&request).is_ok())
            }
        };
        if posted && self.link.answers(message) {
            self.acks.ping_posted();
        }
        posted
    }

    /// Posts a request and, for a group signal or a stop, makes sure of an answer that
    /// proves the broker read it (on stdin a ping after it, whose pong is that answer): if
    /// it is not in by [`ACK_TIMEOUT`](super::intervals::ACK_TIMEOUT), [`Self::check`]
    /// falls back.
    pub fn request(&mut self, message: &ToBroker) {
        let posted =
            self.post(message) && (self.link.answers(message) || self.post(&ToBroker::Ping));
        if let Some(fallback) = Fallback::for_request(message) {
            self.acks.request_posted(fallback, posted, Instant::now());
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
        if let Some(line) = self.kept.pop_front() {
            return Some(line);
        }
        self.read_line().await
    }

    /// The next line read from the broker, noted; lines kept are not looked at.
    pub(super) async fn read_line(&mut self) -> Option<BrokerLine> {
        let line = match &mut self.link {
            Link::Launched { broker, .. } => broker.next_line().await?,
            Link::Attached { client, .. } => client.next_line().await?,
        };
        if let Some(unread) = self.unread_before_due.as_mut() {
            *unread = unread.saturating_sub(1);
        }
        self.watch.heard();
        self.last_heard = Instant::now();
        if let Ok(event) = &line.event {
            match &event.kind {
                EventKind::Pong | EventKind::ControlAck { .. } | EventKind::ControlError { .. } => {
                    self.acks.pong()
                }
                EventKind::Spawned { pgid, .. } => {
                    // The leader is the broker's child, or ours if the broker is already gone.
                    let parents = [self.pid(), std::process::id() as i32];
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
    /// front end, so that a flood of lines never starves a deadline. A deadline is acted on
    /// only once the lines the broker wrote before it was found due have been read.
    pub fn check(&mut self, now: Instant) -> Option<Due> {
        if self.reading_before_due(now) {
            return None;
        }
        let due = self.due_at(now);
        if due.is_some() {
            self.unread_before_due = None;
        }
        due
    }

    /// Whether a stop or an acknowledgement is due at `now` while lines the broker wrote
    /// before `now` are still unread. A front end kept from running (a loaded machine: two
    /// cores, a dozen processes) wakes past the deadline with the answer waiting in the
    /// pipe, often behind the broker's other lines (the signals of the stop, the exit); it
    /// would take a broker that answered in time for one that did not, kill it, and report
    /// a failed stop. Those lines are read first (the selects put lines before timers), and
    /// only those: what the broker writes after `now` does not put the deadline off again.
    fn reading_before_due(&mut self, now: Instant) -> bool {
        let due = self
            .stop_asked
            .is_some_and(|at| now >= self.stop_overdue_at(at))
            || self.acks.deadline().is_some_and(|at| now >= at);
        if !due {
            self.unread_before_due = None;
            return false;
        }
        let link = &mut self.link;
        let unread = *self.unread_before_due.get_or_insert_with(|| match link {
            Link::Launched { broker, .. } => broker.read_waiting(),
            Link::Attached { client, .. } => client.read_waiting(),
        });
        unread > 0
    }

    /// Whether lines the broker wrote before a deadline found passed are still unread.
    pub(super) fn lines_waiting(&self) -> bool {
        self.unread_before_due.is_some_and(|unread| unread > 0)
    }

    /// What is due at `now`, everything the broker wrote before it read.
    fn due_at(&mut self, now: Instant) -> Option<Due> {
        if self
            .stop_asked
            .is_some_and(|at| now >= self.stop_overdue_at(at))
        {
            return Some(Due::End(End::StopOverdue));
        }
        match self.acks.take_due(now) {
            Some(Fallback::Signal(signal)) => {
                let why = "the broker did not answer";
                return Some(match &self.link {
                    Link::Launched { broker, .. } => Due::SignalledDirectly(signal_directly(
                        broker.pid(),
                        self.leader,
                        signal,
                        why,
                    )),
                    // Another front end's broker, perhaps only slow: a signal that would do
                    // harm the second time is left to it.
                    Link::Attached { .. } if !repeats_harmlessly(signal) => {
                        Due::NotSignalled(format!(
                            "the broker did not answer within {ACK_TIMEOUT:?}; SIG{} was not sent by tether, since the broker may still deliver it and a second one may do harm (only TERM, KILL, STOP and CONT are sent in its place)",
                            signal
                        ))
                    }
                    // Not our child: its pid is proved to be the broker before it is used.
                    Link::Attached { command, .. } => {
                        match signal_through_pid(command, signal, why) {
                            Ok(told) => Due::SignalledDirectly(told),
                            Err(err) => Due::NotSignalled(err),
                        }
                    }
                });
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
        let stopped = silent_ends && is_stopped(self.pid());
        let watching = stopped || !self.watch.answered() || self.stop_asked.is_some();
        if !watching && now < self.last_ping + self.pace.quiet_ping {
            return None;
        }
        self.last_ping = now;
        if self.watch.due(stopped) == Heartbeat::GiveUp && silent_ends {
            return Some(End::Unresponsive);
        }
        let pinged = match &mut self.link {
            Link::Launched { broker, .. } => broker.ping(),
            Link::Attached { client, .. } => client.ping(),
        };
        if let Ok(true) = pinged {
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

    /// Ends the conversation with a launched broker: kills the broker unless it closed
    /// (through the unreaped child: its pid cannot have been reused) and reaps it, unless it
    /// keeps leftovers running. A broker that closed exits at once (it removed its socket and
    /// link and let go of everything of ours before `close`), and is reaped here: left to
    /// exit on its own, it would be re-parented to the nearest subreaper, an agent's broker,
    /// whose journal would show every shim call's broker as an escaped orphan. What it left,
    /// if the front end must stop it, is returned. An attached broker is not the front end's
    /// to kill: it is only let go (see [`Self::stop_by_pid`](super::attach) for a stop it did
    /// not answer).
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
        let Link::Launched {
            broker,
            live,
            ticket,
        } = self.link
        else {
            return None;
        };
        let mut child = broker.child;
        if end != End::LeftRunning || reap_kept {
            if !matches!(end, End::Closed | End::LeftRunning) {
                let _ = child.kill();
            }
            reap(child).await;
        }
        if reap_kept {
            // A front end that stays (a subreaper) adopts what a closed broker let go to end
            // on its own (a notify run, finishing on its deadline): those that ended since
            // are reaped at each end, so they never pile up as zombies.
            live.lock().await.reap_adopted();
        }
        live.lock().await.unregister(ticket);
        let why = end.why()?;
        let (grace, patience) = match end {
            End::Aborted => (Duration::ZERO, ABORT_PATIENCE),
            End::StopUnanswered => (self.grace, KILL_PATIENCE),
            _ => cleanup_timing(self.stop_asked, self.grace, Instant::now()),
        };
        Some(Remains {
            why,
            live,
            leader: self.leader,
            cgroup: self.cgroup.path(),
            grace,
            patience,
        })
    }
}

/// The command's cgroup as a front end knows it.
pub(super) enum CommandCgroup {
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
async fn reap(mut child: BrokerChild) {
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

#[cfg(test)]
mod tests {
    use super::super::intervals::ACK_TIMEOUT;
    use super::*;

    /// A stand-in broker that reads the stop and its ping, writes `lines` (an event line
    /// each), says so by creating `written`, and waits.
    async fn broker_answering(
        lines: &[EventKind],
        written: &std::path::Path,
    ) -> BrokerConversation {
        let text: Vec<u8> = lines
            .iter()
            .flat_map(|kind| {
                let event = crate::protocol::Event {
                    ts_ms: 1,
                    mono_us: 1,
                    kind: kind.clone(),
                };
                event.to_line()
            })
            .collect();
        // It ends when the conversation closes its stdin, even if a test fails before
        // `kill_stand_in`.
        let script = "read stop; read ping; printf %s \"$1\"; : > \"$2\"; exec cat > /dev/null";
        let child = std::process::Command::new("sh")
            .args(["-c", script, "sh", &String::from_utf8_lossy(&text)])
            .arg(written)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("run sh");
        let broker = BrokerProcess::talking_to(child, None, None).expect("the pipes");
        let live = LiveBrokers::new();
        let ticket = live.lock().await.register(broker.pid());
        let cgroup = CommandCgroup::Expected(broker.expected_cgroup.clone());
        let link = Link::Launched {
            broker,
            live,
            ticket,
        };
        let mut conversation =
            BrokerConversation::over(link, Pace::FLEET, Duration::from_millis(100), cgroup);
        conversation.request(&ToBroker::Stop { origin: None });
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while !written.exists() {
            assert!(
                std::time::Instant::now() < deadline,
                "the stand-in never wrote"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        conversation
    }

    impl BrokerConversation {
        fn kill_stand_in(&mut self) {
            if let Link::Launched { broker, .. } = &mut self.link {
                let _ = broker.child.kill();
                let _ = broker.child.wait();
            }
        }
    }

    fn stop_line() -> EventKind {
        EventKind::HardKill { after_ms: 100 }
    }

    /// The front end wakes long past the acknowledgement's deadline (it was kept from
    /// running) and the pong waits in the pipe behind another line: the stop was answered.
    #[tokio::test]
    async fn a_pong_waiting_behind_other_lines_answers_a_deadline_found_passed() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let mut broker =
            broker_answering(&[stop_line(), EventKind::Pong], &dir.path().join("w")).await;
        let late = Instant::now() + ACK_TIMEOUT * 3;
        assert_eq!(broker.check(late), None, "lines wait unread");
        let first = broker.next_line().await.expect("the stop's line");
        assert!(matches!(first.event, Ok(ref e) if e.kind.name() == "hard_kill"));
        assert_eq!(broker.check(late), None, "the pong waits unread");
        let pong = broker.next_line().await.expect("the pong");
        assert!(matches!(pong.event, Ok(ref e) if e.kind == EventKind::Pong));
        assert_eq!(broker.check(late), None, "answered in time");
        broker.kill_stand_in();
    }

    /// What the broker wrote before the deadline was found passed is read, and only that:
    /// with no pong in it, the stop is unanswered.
    #[tokio::test]
    async fn a_deadline_is_acted_on_once_what_was_waiting_is_read() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let mut broker = broker_answering(&[stop_line()], &dir.path().join("w")).await;
        let late = Instant::now() + ACK_TIMEOUT * 3;
        assert_eq!(broker.check(late), None, "a line waits unread");
        broker.next_line().await.expect("the stop's line");
        assert_eq!(broker.check(late), Some(Due::End(End::StopUnanswered)));
        broker.kill_stand_in();
    }
}
