//! `tether watch`: every command of the sessions it follows (those with a live command or
//! that ended within the hour, or the one it was given), whoever started them (`tether
//! exec`, an agent, another tether), read from their journals as they grow and signalled
//! through their brokers' control sockets. `tether open` of a session whose brokers are alive
//! uses the same, for that session alone.
//!
//! Nothing is polled: an inotify watcher says when a session or a command appears, an event
//! log grows, a result is written or a session's launcher says more (`launcher.jsonl`), and
//! only that is read again.

mod backlog;
mod listing;
mod plans;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use tokio::sync::mpsc::UnboundedSender;

use super::App;
use crate::ui::format::count;
use tether_frontend::control::{Ack, LiveCommand, discover};
use tether_frontend::supervisor::intervals::ACK_TIMEOUT;
use tether_frontend::supervisor::{Answer, BrokerConversation};
use tether_model::CommandState;
use tether_os::journal::EventTail;
use tether_os::journal::secure::JournalDir;
use tether_os::journal::watcher::Readiness;
use tether_os::journal::watcher::{Change, JournalFile, JournalWatcher, WatchError, Watched};
use tether_protocol::protocol::{Request, Scope};

/// How often the journals are looked at where inotify is unavailable.
pub const POLL: Duration = Duration::from_millis(500);
/// How often the followed sessions are listed again although inotify said nothing: a
/// safety net for a change the kernel's queue dropped, at a cost nobody measures.
const SAFETY_RESCAN: Duration = Duration::from_secs(60);

/// A session directory as the watch knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SessionSeen {
    /// Every command of it is listed.
    Followed,
    /// Ended over an hour ago, nothing live: not listed until it changes (its directory's
    /// modification time, last seen, moves when a command is added to it).
    Idle(Option<SystemTime>),
}

pub struct Watch {
    state_dir: PathBuf,
    /// Only this session's commands; all sessions when `None`.
    session: Option<String>,
    /// `None`: inotify is unavailable, the journals are looked at every [`POLL`].
    watcher: Option<JournalWatcher>,
    sessions: HashMap<PathBuf, SessionSeen>,
    /// What the launcher of each followed session journaled (`launcher.jsonl`), as last read.
    plans: HashMap<PathBuf, plans::Plans>,
    /// Sessions whose `launcher.jsonl` is to be read again, and those whose rows changed since
    /// their plans were shown ([`Watch::settle_plans`]).
    plans_unread: HashSet<PathBuf>,
    plans_stale: HashSet<PathBuf>,
    /// Sessions whose `launcher.jsonl` could not be read whole, said once each.
    plans_damage_said: HashSet<PathBuf>,
    /// Command directories listed already (or dismissed): discovery adds only new ones.
    known: HashSet<PathBuf>,
    /// The listed commands that have no result yet, and where reading their events left off.
    open: HashMap<PathBuf, EventTail>,
    /// What is listed but not read yet, the next at the end ([`Watch::step`]).
    backlog: Vec<backlog::Pending>,
    /// A full look was asked for while one was under way: the sessions are listed again
    /// once the backlog is read (what the kernel's dropped events hid is found then).
    relist: bool,
    last_rescan: Instant,
    /// Why the journals cannot be read, once said.
    unreadable: Option<String>,
    /// What became of a request, for the status line.
    replies: UnboundedSender<String>,
}

impl Watch {
    /// A watch of `state_dir` (created, private, if it does not exist yet); needs a tokio
    /// runtime. Nothing is listed before [`Watch::start`].
    pub fn new(
        state_dir: PathBuf,
        session: Option<String>,
        listed: &[CommandState],
        replies: UnboundedSender<String>,
    ) -> Watch {
        let mut watch = Watch {
            state_dir,
            session,
            watcher: None,
            sessions: HashMap::new(),
            known: listed
                .iter()
                .filter_map(|c| c.journal_dir.clone())
                .collect(),
            open: HashMap::new(),
            backlog: Vec::new(),
            relist: false,
            plans: HashMap::new(),
            plans_unread: HashSet::new(),
            plans_stale: HashSet::new(),
            plans_damage_said: HashSet::new(),
            last_rescan: Instant::now(),
            unreadable: None,
            replies,
        };
        let sessions = JournalDir::open_state(&watch.state_dir)
            .and_then(|state| state.open_or_create("sessions"))
            .map_err(|err| err.to_string());
        let watcher = JournalWatcher::new().map_err(|err| err.to_string());
        match (sessions, watcher) {
            (Err(err), _) => watch.say(err),
            (Ok(_), Err(err)) => watch.say(format!("{err}: looking for changes every 0.5 s")),
            (Ok(sessions), Ok(watcher)) => {
                watch.watcher = Some(watcher);
                watch.watch(Watched::Sessions(sessions.path().to_path_buf()));
            }
        }
        watch
    }

    /// Follows the commands already listed that have no result yet, and lists the sessions,
    /// whose commands are then read a step at a time ([`Watch::step`]): nothing here waits
    /// for the journals of every session.
    pub fn start(&mut self, app: &mut App) {
        for index in 0..app.model.commands.len() {
            let Some(dir) = app.model.commands[index].journal_dir.clone() else {
                continue;
            };
            if !dir.join(tether_os::journal::writer::RESULT_FILE).exists() {
                self.watch(Watched::Command(dir.clone()));
                self.reload(index, &dir, app);
            }
        }
        self.rescan(app);
    }

    /// Whether the journals are looked at every [`POLL`], inotify being unavailable.
    pub fn polling(&self) -> bool {
        self.watcher.is_none()
    }

    /// What to wait on for changes; `None` while polling.
    pub fn readiness(&self) -> Option<Readiness> {
        self.watcher.as_ref().map(JournalWatcher::readiness)
    }

    /// Reads again what the queued inotify events say changed. Returns whether a row did.
    pub fn on_events(&mut self, app: &mut App) -> bool {
        let changes = self
            .watcher
            .as_mut()
            .map(JournalWatcher::drain)
            .unwrap_or_default();
        let mut changed = false;
        // An event log that grew five times is read once.
        let mut grown = HashSet::new();
        // Sessions removed one after another (a prune) lose their rows in one pass; before
        // anything after them, which may bring one back (a prune that put it back).
        let mut gone = HashSet::new();
        for change in changes {
            if let Change::SessionGone(dir) = change {
                gone.insert(dir);
                continue;
            }
            changed |= self.drop_sessions(&std::mem::take(&mut gone), app);
            if let Change::Journal {
                dir,
                file: JournalFile::Events,
            } = &change
                && !grown.insert(dir.clone())
            {
                continue;
            }
            changed |= self.apply(change, app);
        }
        changed |= self.drop_sessions(&gone, app);
        changed | self.settle_plans(app)
    }

    /// The clock's part: brokers that died without a word, and a full look now and then
    /// (every time, while polling).
    pub fn tick(&mut self, app: &mut App) {
        if self.watcher.is_none() || self.last_rescan.elapsed() >= SAFETY_RESCAN {
            self.rescan(app);
        } else {
            self.check_open(app);
        }
        self.settle_plans(app);
    }

    fn say(&mut self, text: String) {
        if self.unreadable.as_ref() != Some(&text) {
            let _ = self.replies.send(text.clone());
            self.unreadable = Some(text);
        }
    }

    /// Watches a directory; on running out of watches, falls back to polling (said once).
    fn watch(&mut self, watched: Watched) {
        let Some(watcher) = self.watcher.as_mut() else {
            return;
        };
        match watcher.watch(watched) {
            Ok(()) => {}
            Err(err @ (WatchError::Exhausted | WatchError::Unavailable(_))) => {
                self.watcher = None;
                self.say(format!("{err}: looking for changes every 0.5 s"));
            }
            // Gone already: what it held is read as it is.
            Err(WatchError::Gone { .. }) => {}
        }
    }

    fn unwatch(&mut self, dir: &Path) {
        if let Some(watcher) = self.watcher.as_mut() {
            watcher.unwatch(dir);
        }
    }

    /// Sends a request to the broker of `command` through its control socket, off the event
    /// loop; what became of it comes back on the reply channel.
    pub fn send(&self, command: &CommandState, message: Request) {
        let name = command.config.name.clone();
        let Some(dir) = command.journal_dir.as_ref() else {
            // A command its launcher has not started: that launcher is another tether's.
            let _ = self.replies.send(format!(
                "{name} has not started: only the tether whose launcher it waits on can start or stop it"
            ));
            return;
        };
        let live = (command.id()).and_then(|id| discover::live_command(&id, dir));
        let Some(live) = live else {
            let _ = self
                .replies
                .send(format!("{name}: its broker is no longer running"));
            return;
        };
        let replies = self.replies.clone();
        tokio::spawn(async move {
            let text = match request(&live, message).await {
                Ok(done) => format!("{name}: {done}"),
                Err(err) => format!("{name}: {err}"),
            };
            let _ = replies.send(text);
        });
    }
}

/// Asks the broker of `live`, through the conversation attached to its socket, to do what
/// the TUI asked of it; a broker that does not answer is fallen back on as the conversation
/// does (a group signal sent by tether itself, a stop asked of the broker's pid).
///
/// What comes here is a group signal, a stop or a signal to a pid (`update`'s only
/// `Effect::Send`s): a socket takes each of them. Typing is refused before it is asked for
/// (`NO_TYPING`), and terminal sizes go only to the TUI's own brokers.
async fn request(live: &LiveCommand, message: Request) -> Result<String, String> {
    let mut broker = match BrokerConversation::attach(live).await {
        Ok(broker) => broker,
        // Attaching fails only before the broker heard anything (it has no socket: an
        // agent's sandbox): by its pid, as `tether stop` and `signal` go, once that pid is
        // proved to be the broker.
        Err(err) => return by_pid(live, &message, &err.to_string()).await,
    };
    let ack = match broker.answer(&message).await {
        Answer::Done(ack) => ack,
        Answer::Refused { message, .. } => return Err(format!("the broker refused: {message}")),
        Answer::SignalledDirectly(told) => return Ok(told),
        Answer::NotSignalled(err) => return Err(err),
        Answer::Unanswered if matches!(message, Request::Stop { .. }) => {
            return broker.stop_by_pid("the broker did not answer").await;
        }
        Answer::Unanswered => {
            return Err(format!("the broker did not answer within {ACK_TIMEOUT:?}"));
        }
        Answer::Closed => return Err("the broker closed the connection".into()),
    };
    Ok(done_words(&message, ack))
}

/// A stop or a group signal without the broker's socket: a stop is asked of its pid (SIGTERM
/// makes it run its stop sequence), a signal sent by tether itself.
async fn by_pid(live: &LiveCommand, message: &Request, why: &str) -> Result<String, String> {
    use tether_frontend::control::{cli::Action, fallback};
    let action = match message {
        Request::Stop { .. } => Action::Stop,
        Request::Signal {
            signal,
            scope: Scope::Group,
            ..
        } => Action::Signal(*signal),
        _ => return Err(why.to_string()),
    };
    fallback::by_pid(live, &action, why).await
}

/// What the status bar says of a request its broker carried out: `SIGTERM sent to 1
/// process`, `SIGKILL sent to pid 4242`, or the stop's own words.
fn done_words(message: &Request, ack: Ack) -> String {
    match message {
        Request::Stop { .. } => ack
            .message
            .unwrap_or_else(|| "stop sequence started: TERM, grace, KILL".into()),
        Request::Signal {
            signal,
            scope: Scope::Pid,
            pid: Some(pid),
            ..
        } => format!("SIG{signal} sent to pid {pid}"),
        Request::Signal { signal, .. } => format!(
            "SIG{signal} sent to {}",
            count(ack.targets.len(), "process", "processes")
        ),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests;
