//! A front end's one conversation with one broker, the I/O around
//! [`ConversationMachine`](super::machine): it begins one of two ways, by launching the
//! broker ([`BrokerConversation::launch`]: requests on its stdin, lines from its stdout) or
//! by attaching to one that another front end launched
//! ([`BrokerConversation::attach`](super::attach): requests and lines over its control
//! socket). It owns the pipes or the socket, the broker's pid and the clock; the machine
//! decides. Either way it posts requests, reads the broker's lines, and when the machine
//! falls back does it: a signal the broker did not acknowledge is sent by the front end
//! itself; a launched broker that died, stopped answering, did not acknowledge or finish a
//! stop is killed and what it left stopped with the broker's own sequence (see
//! [`super::leftovers`]).
//!
//! A front end drives it from its own `select!`: [`BrokerConversation::next_line`] in one
//! branch, a sleep until [`BrokerConversation::deadline`] in another, and after whatever
//! woke it, [`BrokerConversation::check`]; then [`BrokerConversation::end`].

use std::collections::VecDeque;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use tokio::time::Instant;

use super::ending::{End, Remains};
use super::intervals::Pace;
use super::leftovers::{GroupLeader, LiveBrokers, Ticket, signal_directly};
use super::liveness;
use super::machine::{Action, Asked, CommandCgroup, ConversationMachine, Ending, Input, Transport};
use super::process::{BrokerChild, BrokerLine, BrokerProcess, ForkedBroker, Handover, Wire};
use crate::control::ControlClient;
use crate::control::discover::LiveCommand;
use crate::control::fallback::signal_through_pid;
use tether_os::journal::JournalDir;
use tether_protocol::protocol::{LaunchRequest, ProcessSignal, Request};

/// What [`BrokerConversation::check`] found due.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Due {
    /// The broker did not acknowledge a signal: the front end sent it itself, as the text says.
    SignalledDirectly(String),
    /// The broker did not acknowledge a signal, and the front end could not send it itself
    /// (an attached broker whose pid could not be proved to be it), as the text says.
    NotSignalled(String),
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
    fn wire(&mut self) -> &mut Wire {
        match self {
            Link::Launched { broker, .. } => &mut broker.wire,
            Link::Attached { client, .. } => client,
        }
    }
}

pub struct BrokerConversation {
    pub(super) link: Link,
    pub(super) machine: ConversationMachine,
    /// The command's group leader, while it runs: what to signal if the broker cannot.
    leader: Option<GroupLeader>,
    /// Lines read while waiting for an answer (see [`Self::answer`]), noted already, for
    /// [`Self::next_line`].
    pub(super) kept: VecDeque<BrokerLine>,
    /// What became of the request [`Self::answer`] waits for, once the machine says.
    pub(super) asked: Option<Asked>,
}

/// What the driver did of the machine's actions.
#[derive(Default)]
struct Acted {
    /// Writes asked for, and whether one failed.
    writes: usize,
    failed: bool,
    due: Option<Due>,
}

impl Acted {
    /// Something was written, and nothing failed.
    fn written(&self) -> bool {
        self.writes > 0 && !self.failed
    }
}

/// The machine's clock: tokio's, so that a test on paused time moves it too.
fn now() -> std::time::Instant {
    Instant::now().into_std()
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
        let link = Link::Launched {
            broker,
            live: live.clone(),
            ticket,
        };
        BrokerConversation::over(link, pace, request.grace, cgroup)
    }

    /// A conversation over `link` that has heard nothing yet.
    pub(super) fn over(
        link: Link,
        pace: Pace,
        grace: Duration,
        cgroup: CommandCgroup,
    ) -> BrokerConversation {
        let transport = match link {
            Link::Launched { .. } => Transport::Pipe,
            Link::Attached { .. } => Transport::Socket,
        };
        BrokerConversation {
            link,
            machine: ConversationMachine::new(transport, pace, grace, cgroup, now()),
            leader: None,
            kept: VecDeque::new(),
            asked: None,
        }
    }

    pub fn pid(&self) -> i32 {
        match &self.link {
            Link::Launched { broker, .. } => broker.pid(),
            Link::Attached { command, .. } => command.broker.pid,
        }
    }

    /// [`Input::Post`]. False if the broker is gone, or (attached) the control socket does
    /// not carry such a request.
    pub fn post(&mut self, message: &Request) -> bool {
        self.handle(Input::Post(message), now()).written()
    }

    /// [`Input::Request`]: [`Self::check`] does the fallback.
    pub fn request(&mut self, message: &Request) {
        self.handle(Input::Request(message), now());
    }

    /// Posts a request whose own answer [`Self::answer`] waits for.
    pub(super) fn ask(&mut self, message: &Request) {
        self.handle(Input::Ask(message), now());
    }

    /// [`Input::Stop`], unless the broker is still at work on it.
    pub fn post_stop(&mut self, message: &Request, now: Instant) {
        self.handle(Input::Stop(message), now.into_std());
    }

    /// Asks an attached broker for every event from now on; its answer (a `control_ack`
    /// whose `journal_offset` is the length of `events.jsonl` before the first of them)
    /// comes among the lines. False if it could not be written, or the broker was launched
    /// by this front end (whose stdout carries every event already).
    pub fn subscribe(&mut self) -> bool {
        self.post(&Request::Subscribe)
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
        let line = self.link.wire().next_line().await;
        let Some(line) = line else {
            // The caller learns it from the `None`: the machine's `End::Lost` is its too.
            self.handle(Input::Exited, now());
            return None;
        };
        self.handle(
            Input::Line(line.event.as_ref().ok().map(|e| &e.kind)),
            now(),
        );
        Some(line)
    }

    /// When [`Self::check`] next has something to do.
    pub fn deadline(&self) -> Instant {
        Instant::from_std(self.machine.poll_timeout())
    }

    /// Does what is due at `now` (see [`ConversationMachine`]). Called after whatever woke
    /// the front end, so that a flood of lines never starves a deadline.
    pub fn check(&mut self, now: Instant) -> Option<Due> {
        self.handle(Input::Timer, now.into_std()).due
    }

    fn handle(&mut self, input: Input, now: std::time::Instant) -> Acted {
        self.machine.handle(input, now);
        self.act(now)
    }

    /// Does what the machine asks, giving back what the world answers.
    fn act(&mut self, now: std::time::Instant) -> Acted {
        let mut acted = Acted::default();
        while let Some(action) = self.machine.poll_action() {
            match action {
                Action::Write(message) => {
                    acted.writes += 1;
                    if self.link.wire().post(&message).is_err() {
                        acted.failed = true;
                        self.machine.handle(Input::Unwritable, now);
                    }
                }
                Action::Ping => {
                    if let Ok(true) = self.link.wire().ping() {
                        self.machine.handle(Input::Pinged, now);
                    }
                }
                Action::Look => {
                    let seen = liveness::look(self.pid());
                    self.machine.handle(Input::Looked(seen), now);
                }
                Action::CountUnread => {
                    let unread = self.link.wire().read_waiting();
                    self.machine.handle(Input::Unread(unread), now);
                }
                Action::FindLeader { pgid } => {
                    // The leader is the broker's child, or ours if the broker is already gone.
                    let parents = [self.pid(), std::process::id() as i32];
                    self.leader = GroupLeader::find(pgid, &parents);
                }
                Action::ForgetLeader => self.leader = None,
                Action::SignalItself(signal) => acted.due = Some(self.signal_itself(signal)),
                Action::NotSignalled(text) => acted.due = Some(Due::NotSignalled(text)),
                Action::GiveUp(end) => acted.due = Some(Due::End(end)),
                Action::Asked(asked) => self.asked = Some(asked),
            }
        }
        acted
    }

    /// A group signal the broker did not acknowledge, sent by the front end: to a launched
    /// broker's group and descendants, or through an attached broker's pid once it is
    /// proved to be it.
    fn signal_itself(&self, signal: ProcessSignal) -> Due {
        let why = "the broker did not answer";
        match &self.link {
            Link::Launched { broker, .. } => {
                Due::SignalledDirectly(signal_directly(broker.pid(), self.leader, signal, why))
            }
            Link::Attached { command, .. } => match signal_through_pid(command, signal, why) {
                Ok(told) => Due::SignalledDirectly(told),
                Err(err) => Due::NotSignalled(err),
            },
        }
    }

    /// Ends the conversation with a launched broker: kills the broker unless it closed
    /// (through the unreaped child: its pid cannot have been reused) and reaps it, unless it
    /// keeps leftovers running and `reap_kept` is false. A broker that closed exits at once
    /// (it removed its socket and link and let go of everything of ours before `close`), and
    /// is reaped here: left to exit on its own, it would be re-parented to the nearest
    /// subreaper, an agent's broker, whose journal would show every shim call's broker as an
    /// escaped orphan. What it left, if the front end must stop it, is returned. An attached
    /// broker is not the front end's to kill: it is only let go (see
    /// [`Self::stop_by_pid`](super::attach) for a stop it did not answer).
    ///
    /// With `reap_kept`, a broker that keeps leftovers running is waited for as well (reaped
    /// once they are stopped): for a front end that stays, as the TUI and the MCP server do,
    /// and learns the end from it.
    pub async fn end(self, end: End, reap_kept: bool) -> Option<Remains> {
        let Ending::Launched { kill, cleanup } = self.machine.ending(end, now()) else {
            return None;
        };
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
            if kill {
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
        let cleanup = cleanup?;
        Some(Remains {
            why: cleanup.why,
            live,
            leader: self.leader,
            cgroup: cgroup_path(self.machine.cgroup()),
            grace: cleanup.grace,
            patience: cleanup.patience,
        })
    }
}

fn cgroup_path(cgroup: &CommandCgroup) -> Option<PathBuf> {
    match cgroup {
        CommandCgroup::Expected(name) => {
            tether_broker::broker::containment::expected_cgroup(name.as_ref()?)
        }
        CommandCgroup::Named(path) => path.clone(),
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
    let pidfd = rustix::process::Pid::from_raw(child.pid)
        .and_then(|pid| rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()).ok())
        .and_then(|fd| tether_os::fdio::register(fd, tokio::io::Interest::READABLE).ok());
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
    use tether_protocol::protocol::EventKind;

    /// A stand-in broker that reads the stop and its ping, writes `lines` (an event line
    /// each), says so by creating `written`, and waits.
    async fn broker_answering(
        lines: &[EventKind],
        written: &std::path::Path,
    ) -> BrokerConversation {
        let text: Vec<u8> = lines
            .iter()
            .flat_map(|kind| {
                let event = tether_protocol::protocol::Event {
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
        conversation.request(&Request::Stop { origin: None });
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
        let dir = tether_os::testing::private_tempdir();
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
        let dir = tether_os::testing::private_tempdir();
        let mut broker = broker_answering(&[stop_line()], &dir.path().join("w")).await;
        let late = Instant::now() + ACK_TIMEOUT * 3;
        assert_eq!(broker.check(late), None, "a line waits unread");
        broker.next_line().await.expect("the stop's line");
        assert_eq!(broker.check(late), Some(Due::End(End::StopUnanswered)));
        broker.kill_stand_in();
    }
}
