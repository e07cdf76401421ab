//! The conversation's second beginning: attaching to a broker that another front end
//! launched (`tether exec`, an agent's tether, another TUI), through its control socket, as
//! `tether watch`, `tether stop|kill|signal` and the MCP server's journaled commands do.
//!
//! The requests, acknowledgements, liveness and intervals are the launched conversation's;
//! only the transport differs (the socket answers every request itself, so no ping follows
//! one) and the fallback: the broker is not this front end's child, so its pid is proved to
//! be that broker before anything goes by it ([`crate::control::verify`]). A group signal it
//! does not acknowledge is sent by the front end to the command's group and the broker's
//! descendants; a stop it does not acknowledge is asked of it by SIGTERM, which runs its own
//! stop sequence ([`BrokerConversation::stop_by_pid`]).

use tokio::time::{Instant, sleep_until};

use super::conversation::{BrokerConversation, Due, Link};
use super::intervals::Pace;
use super::machine::{Asked, CommandCgroup};
use crate::control::discover::LiveCommand;
use crate::control::fallback::stop_through_pid;
use crate::control::{Ack, ControlClient, ControlError};
use tether_protocol::protocol::{EventKind, Request};

/// What became of a request asked of a broker with [`BrokerConversation::answer`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// The broker carried it out (`control_ack`, or `pong` to a ping).
    Done(Ack),
    /// The broker read it and said no (`control_error`): `too_many_clients` means it never
    /// got as far as reading it.
    Refused { code: String, message: String },
    /// A group signal not acknowledged in time, sent by the front end itself.
    SignalledDirectly(String),
    /// A group signal not acknowledged in time that the front end could not send either.
    NotSignalled(String),
    /// No answer within [`ACK_TIMEOUT`](super::intervals::ACK_TIMEOUT); nothing was done in
    /// its place (for a stop, see
    /// [`BrokerConversation::stop_by_pid`]).
    Unanswered,
    /// The broker ended the conversation (or could not be written to) before it answered.
    Closed,
}

impl Answer {
    /// The answer `kind` gives, if it is one.
    fn of(kind: &EventKind) -> Option<Answer> {
        match kind {
            EventKind::ControlAck {
                journal_offset,
                targets,
                message,
                ..
            } => Some(Answer::Done(Ack {
                journal_offset: *journal_offset,
                targets: targets.clone(),
                message: message.clone(),
            })),
            EventKind::Pong => Some(Answer::Done(Ack::default())),
            EventKind::ControlError { code, message } => Some(Answer::Refused {
                code: code.clone(),
                message: message.clone(),
            }),
            _ => None,
        }
    }

    /// What the front end's fallback made of a request, when [`BrokerConversation::check`]
    /// found one due.
    fn fell_back(due: Due) -> Answer {
        match due {
            Due::SignalledDirectly(told) => Answer::SignalledDirectly(told),
            Due::NotSignalled(err) => Answer::NotSignalled(err),
            Due::End(_) => Answer::Unanswered,
        }
    }
}

impl BrokerConversation {
    /// Attaches to the broker of `command` through its control socket, which must be ours
    /// and be accepted by that very broker ([`ControlClient::connect_to`]). It is kept
    /// watch on at the fleet's pace: it is not given up on for silence, since it is not this
    /// front end's to kill; a request it does not acknowledge falls back.
    pub async fn attach(command: &LiveCommand) -> Result<BrokerConversation, ControlError> {
        let client = ControlClient::connect_to(command).await?;
        Ok(BrokerConversation::attached(client, command))
    }

    fn attached(client: ControlClient, command: &LiveCommand) -> BrokerConversation {
        let link = Link::Attached {
            client,
            command: Box::new(command.clone()),
        };
        BrokerConversation::over(
            link,
            Pace::FLEET,
            command.grace,
            CommandCgroup::Named(command.cgroup.clone()),
        )
    }

    /// Asks `message` of the broker ([`Self::request`]) and waits for its answer, or for
    /// [`ACK_TIMEOUT`](super::intervals::ACK_TIMEOUT) to pass without one; a group signal
    /// not answered in time is sent by the front end itself ([`Self::check`]). Lines that come meanwhile are kept for
    /// [`Self::next_line`]. When the answer is due is the machine's to say.
    pub async fn answer(&mut self, message: &Request) -> Answer {
        self.asked = None;
        self.ask(message);
        if self.asked.take() == Some(Asked::NotPosted) {
            return self
                .check(Instant::now())
                .map_or(Answer::Closed, Answer::fell_back);
        }
        loop {
            let deadline = self.deadline();
            tokio::select! {
                // Lines first: a front end kept from running wakes past the deadline with
                // the answer waiting (see `check`).
                biased;
                line = self.read_line() => {
                    let Some(line) = line else { return Answer::Closed };
                    if self.asked == Some(Asked::Answered)
                        && let Ok(event) = &line.event
                        && let Some(answer) = Answer::of(&event.kind)
                    {
                        self.asked = None;
                        return answer;
                    }
                    self.kept.push_back(line);
                }
                _ = sleep_until(deadline) => {}
            }
            match self.check(Instant::now()) {
                Some(due) => return Answer::fell_back(due),
                None if self.asked.take() == Some(Asked::Unanswered) => return Answer::Unanswered,
                None => {}
            }
        }
    }

    /// The fallback for a stop an attached broker did not answer: SIGTERM to the broker,
    /// proved to be it, which runs its own stop sequence; then its end, waited for up to the
    /// grace period and [`REMOTE_STOP_WAIT`](super::intervals::REMOTE_STOP_WAIT). `why`
    /// says why the socket was not used. A launched broker is stopped by
    /// [`Self::end`] instead.
    pub async fn stop_by_pid(&self, why: &str) -> Result<String, String> {
        match &self.link {
            Link::Attached { command, .. } => stop_through_pid(command, why).await,
            Link::Launched { .. } => Err(format!(
                "{why}; a broker this front end launched is stopped by ending its conversation"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::os::fd::OwnedFd;
    use std::path::PathBuf;
    use std::time::Duration;

    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    use tokio::net::UnixStream;

    use super::*;
    use crate::supervisor::intervals::ACK_TIMEOUT;
    use tether_protocol::protocol::{BrokerIdentity, Event, ProcessSignal, Scope};

    /// A command whose broker's pid no process can have: no fallback signals anything.
    fn command() -> LiveCommand {
        LiveCommand {
            id: tether_os::journal::CommandId::new("s", 1, "sleep"),
            name: "sleep".into(),
            dir: PathBuf::from("/nonexistent/01-sleep"),
            broker: BrokerIdentity {
                pid: i32::MAX,
                start_ticks: 1,
            },
            broker_token: None,
            pid: None,
            started_ms: 0,
            state: "running".into(),
            left_running: false,
            grace: Duration::from_secs(2),
            control_socket: None,
            containment: None,
            cgroup: None,
        }
    }

    /// A conversation attached over one end of a socket pair; the other end plays the
    /// broker, reading requests a line at a time.
    fn attached() -> (BrokerConversation, BufReader<UnixStream>) {
        let (ours, broker) = std::os::unix::net::UnixStream::pair().expect("a socket pair");
        broker.set_nonblocking(true).expect("non-blocking");
        let client = ControlClient::over(OwnedFd::from(ours)).expect("client");
        let broker = BufReader::new(UnixStream::from_std(broker).expect("tokio socket"));
        (BrokerConversation::attached(client, &command()), broker)
    }

    async fn read_request(broker: &mut BufReader<UnixStream>) -> Request {
        let mut line = String::new();
        broker.read_line(&mut line).await.expect("a request");
        let frame = tether_protocol::protocol::Frame::Line(line.trim_end().as_bytes().to_vec());
        Request::parse(frame, tether_protocol::protocol::Transport::Socket)
            .expect("a control request")
    }

    async fn say(broker: &mut BufReader<UnixStream>, kind: EventKind) {
        let event = Event {
            ts_ms: 0,
            mono_us: 0,
            kind,
        };
        broker
            .get_mut()
            .write_all(&event.to_line())
            .await
            .expect("write");
    }

    fn ack(request: &str, message: Option<&str>) -> EventKind {
        EventKind::ControlAck {
            request: request.into(),
            journal_offset: None,
            targets: Vec::new(),
            message: message.map(str::to_string),
        }
    }

    #[tokio::test]
    async fn each_answer_is_matched_to_its_request() {
        let (mut conversation, mut broker) = attached();
        assert!(conversation.subscribe());
        let fake = tokio::spawn(async move {
            assert_eq!(read_request(&mut broker).await, Request::Subscribe);
            assert_eq!(
                read_request(&mut broker).await,
                Request::Stop { origin: None }
            );
            let subscribed = EventKind::ControlAck {
                request: "subscribe".into(),
                journal_offset: Some(42),
                targets: Vec::new(),
                message: None,
            };
            say(&mut broker, subscribed).await;
            // What the stop caused reaches a subscriber before the stop's answer.
            let stopping = EventKind::StopStarted {
                origin: tether_protocol::protocol::Origin::Operator,
                grace: Duration::from_secs(2),
            };
            say(&mut broker, stopping).await;
            say(&mut broker, ack("stop", Some("already running"))).await;
            broker
        });
        let answer = conversation.answer(&Request::Stop { origin: None }).await;
        assert_eq!(
            answer,
            Answer::Done(Ack {
                journal_offset: None,
                targets: Vec::new(),
                message: Some("already running".into()),
            })
        );
        // The subscription's answer and the event before the stop's are kept, in order.
        let mut kinds = Vec::new();
        for _ in 0..2 {
            let kept = conversation.next_line().await.expect("kept");
            kinds.push(kept.event.expect("an event").kind);
        }
        assert!(
            matches!(
                &kinds[0],
                EventKind::ControlAck {
                    journal_offset: Some(42),
                    ..
                }
            ),
            "{kinds:?}"
        );
        assert!(
            matches!(&kinds[1], EventKind::StopStarted { .. }),
            "{kinds:?}"
        );
        // Acknowledged: nothing falls back later.
        assert_eq!(conversation.check(Instant::now() + ACK_TIMEOUT * 2), None);

        // A refusal answers its request too.
        let mut broker = fake.await.expect("the fake broker");
        let fake = tokio::spawn(async move {
            read_request(&mut broker).await;
            let refused = EventKind::ControlError {
                code: "not_in_tree".into(),
                message: "pid 1 is not in the command's tree".into(),
            };
            say(&mut broker, refused).await;
            broker
        });
        let signal = Request::Signal {
            signal: ProcessSignal::TERM,
            scope: Scope::Pid,
            pid: Some(1),
            origin: None,
        };
        let answer = conversation.answer(&signal).await;
        assert!(
            matches!(&answer, Answer::Refused { code, .. } if code == "not_in_tree"),
            "{answer:?}"
        );
        drop(fake.await.expect("the fake broker"));
        assert_eq!(conversation.answer(&Request::Ping).await, Answer::Closed);
    }

    #[tokio::test]
    async fn a_wedged_broker_is_given_up_on_after_the_ack_timeout() {
        let (mut conversation, mut broker) = attached();
        // The broker reads nothing and answers nothing: a stop is not acknowledged.
        let asked = Instant::now();
        let answer = conversation.answer(&Request::Stop { origin: None }).await;
        assert_eq!(answer, Answer::Unanswered);
        let waited = asked.elapsed();
        assert!(waited >= ACK_TIMEOUT, "{waited:?}");
        assert!(waited < ACK_TIMEOUT * 30, "{waited:?}");
        // An answer to an earlier request does not acknowledge a later one: the group
        // signal falls back by the broker's pid, which cannot be proved to be a broker's.
        let early = tokio::spawn(async move {
            read_request(&mut broker).await;
            say(&mut broker, ack("stop", None)).await;
            broker
        });
        let signal = Request::Signal {
            signal: ProcessSignal::TERM,
            scope: Scope::Group,
            pid: None,
            origin: None,
        };
        let answer = conversation.answer(&signal).await;
        assert!(
            matches!(&answer, Answer::NotSignalled(err) if err.starts_with("the broker did not answer")),
            "{answer:?}"
        );
        drop(early.await.expect("the fake broker"));
    }

    /// A slow broker may still deliver what it did not answer in time: a signal that does
    /// harm the second time is not sent in its place, and the answer says why.
    #[tokio::test]
    async fn a_signal_that_harms_twice_is_not_sent_around_a_silent_broker() {
        let (mut conversation, broker) = attached();
        let hup = Request::Signal {
            signal: ProcessSignal::parse("HUP").expect("HUP"),
            scope: Scope::Group,
            pid: None,
            origin: None,
        };
        let answer = conversation.answer(&hup).await;
        assert!(
            matches!(&answer, Answer::NotSignalled(err)
                if err.contains("SIGHUP was not sent by tether")),
            "{answer:?}"
        );
        drop(broker);
    }
}
