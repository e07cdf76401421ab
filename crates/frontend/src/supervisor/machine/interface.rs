//! What goes into the conversation's machine and what comes out: the words of its
//! exchange with its driver, with no behaviour beyond what a transport carries.

use std::path::PathBuf;
use std::time::Duration;

use super::super::ending::End;
use super::super::liveness::Seen;
/// How the conversation reaches its broker: what it takes, and what it answers itself.
pub use tether_protocol::protocol::Transport;
use tether_protocol::protocol::{EventKind, ProcessSignal, Request};

#[cfg(doc)]
use super::ConversationMachine;
#[cfg(doc)]
use crate::supervisor::intervals::{ACK_TIMEOUT, STOP_SLACK};

/// What happened, for [`ConversationMachine::handle`].
#[derive(Debug, Clone, Copy)]
pub enum Input<'a> {
    /// A line from the broker: its event, `None` if it did not parse.
    Line(Option<&'a EventKind>),
    /// The broker closed its end: it exited (or, attached, closed the connection).
    Exited,
    /// A deadline (or any wake-up): see what is due.
    Timer,
    /// The front end posts a message whose delivery needs no proof (keys, sizes).
    Post(&'a Request),
    /// The front end asks for a message whose delivery needs proof (a group signal, a
    /// stop): if its answer does not come within [`ACK_TIMEOUT`], the machine falls back.
    Request(&'a Request),
    /// The front end posts a stop (or the KILL of a second one) with a deadline: the
    /// broker is given up on [`STOP_SLACK`] past the grace period counted from the first.
    Stop(&'a Request),
    /// The front end asks for a message and waits for its own answer (see
    /// [`Asked::Answered`]); a group signal or a stop falls back as for [`Input::Request`].
    Ask(&'a Request),
    /// A write failed: the broker's end is gone, and nothing more can be written.
    Unwritable,
    /// The answer to [`Action::Ping`]: a ping was queued.
    Pinged,
    /// The answer to [`Action::Look`]: what the kernel shows of the broker (stopped, or
    /// at work: in an uninterruptible wait, its CPU time).
    Looked(Seen),
    /// The answer to [`Action::CountUnread`]: how many lines wait unread.
    Unread(usize),
}

/// What to do, from [`ConversationMachine::poll_action`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Write this message to the broker; say [`Input::Unwritable`] if it cannot be.
    Write(Request),
    /// Ping the broker, unless requests still wait to be written (the broker answers
    /// those first anyway); say [`Input::Pinged`] if one was queued.
    Ping,
    /// Look at the broker in /proc; say [`Input::Looked`].
    Look,
    /// Read what the broker wrote and was not read yet; say [`Input::Unread`].
    CountUnread,
    /// The command's group began, led by `pgid`: note who leads it, while it is that.
    FindLeader { pgid: i32 },
    /// The command exited: its group has no leader to signal any more.
    ForgetLeader,
    /// The broker did not acknowledge a group signal: send it to the command's group and
    /// the broker's descendants (attached: once its pid is proved to be the broker).
    SignalItself(ProcessSignal),
    /// The broker did not acknowledge a group signal and the front end may not send it
    /// itself, as the text says.
    NotSignalled(String),
    /// The broker must be given up on (see [`ConversationMachine::ending`]).
    GiveUp(End),
    /// What became of what [`Input::Ask`] asked, short of a fallback (a request with a
    /// fallback says what became of it instead: [`Action::SignalItself`],
    /// [`Action::NotSignalled`], [`Action::GiveUp`]).
    Asked(Asked),
}

/// What became of what [`Input::Ask`] asked, short of a fallback: what
/// [`BrokerConversation::answer`](crate::supervisor::BrokerConversation::answer) waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Asked {
    /// The line just taken in is its answer.
    Answered,
    /// It was not answered within [`ACK_TIMEOUT`].
    Unanswered,
    /// It could not be posted at all.
    NotPosted,
}

/// What the driver does at the end, from [`ConversationMachine::ending`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    /// Not this front end's broker (attached): only let go. A stop it did not answer is
    /// asked of its proved pid by SIGTERM, if the front end wants ([`stop_by_pid`]).
    ///
    /// [`stop_by_pid`]: crate::supervisor::BrokerConversation::stop_by_pid
    LetGo,
    /// A launched broker: killed first if `kill`, then reaped; what it left is stopped with
    /// the broker's own sequence if `cleanup` says so.
    Launched {
        kill: bool,
        cleanup: Option<Cleanup>,
    },
}

/// How the front end stops what a lost broker left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cleanup {
    pub why: &'static str,
    /// What is left of the grace period before KILL.
    pub grace: Duration,
    /// How long KILL is repeated to what will not die.
    pub patience: Duration,
}

/// The command's cgroup as a front end knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommandCgroup {
    /// Before the broker's `containment` event: the name it will have, where the front end
    /// finds a hierarchy (looked for only if the broker is lost).
    Expected(Option<String>),
    /// As the broker's `containment` event named it (`None`: no cgroup).
    Named(Option<PathBuf>),
}
