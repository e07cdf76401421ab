//! The commands of this server's session. Those it started, as their brokers' events tell
//! it: one [`Fleet`] carries the brokers, one task folds its events into [`Tracked`]
//! records, and every change bumps a counter that waiting tool calls watch. The others (a
//! TUI's, a shim's, another MCP server's in the same `$TETHER_SESSION`) as their journals
//! tell ([`super::journaled`]).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use crate::clock::now_ms;
use crate::journal::{CommandId, command_dirs};
use crate::protocol::{
    Event, EventKind, LaunchRequest, LeftoversRule, Origin, ProcessSignal, Request,
};
use crate::supervisor::Session;
use crate::supervisor::fleet::{Fleet, FleetEvent, RunId};

/// One command of this session, as far as its broker has told.
#[derive(Debug, Clone)]
pub struct Tracked {
    pub id: CommandId,
    pub name: String,
    pub command: String,
    pub journal: PathBuf,
    /// This server started it, and hears from its broker (until custody begins).
    pub mine: bool,
    /// ms since the Unix epoch.
    pub started_ms: u64,
    pub pid: Option<i32>,
    pub exit: Option<crate::protocol::ExitStatus>,
    pub exited_ms: Option<u64>,
    /// The broker said `close`: both streams read to the end, nothing left running.
    pub closed: bool,
    /// The broker process has ended (closed, died or never started).
    pub ended: bool,
    pub failure: Option<String>,
    /// Processes the command left running in the broker's custody.
    pub left_running: Vec<i32>,
    /// Every signal the broker sent: what, on whose behalf, and to how many.
    pub signals: Vec<(ProcessSignal, Origin, usize)>,
    /// What tether did itself where the broker could not.
    pub notes: Vec<String>,
    /// One of an agent's own set-up shells, not a command it was asked to run
    /// (`config::naming::is_agent_setup`).
    pub setup: bool,
}

impl Tracked {
    /// Command `id` of the session, journaled in `journal`, of which nothing is known yet
    /// beyond what started it.
    pub fn new(id: CommandId, name: String, command: String, journal: PathBuf, mine: bool) -> Self {
        Tracked {
            id,
            name,
            command,
            journal,
            mine,
            started_ms: 0,
            pid: None,
            exit: None,
            exited_ms: None,
            closed: false,
            ended: false,
            failure: None,
            left_running: Vec::new(),
            signals: Vec::new(),
            notes: Vec::new(),
            setup: false,
        }
    }

    /// `starting`, `running`, `exited` (its main process has, the broker is finishing),
    /// `left_running` (its main process has, what it started runs on in the broker's
    /// custody), `finished`, or `failed`.
    pub fn state(&self) -> &'static str {
        if self.failure.is_some() && self.exit.is_none() {
            "failed"
        } else if self.closed || (self.ended && self.exit.is_some()) {
            "finished"
        } else if self.in_custody() {
            "left_running"
        } else if self.exit.is_some() {
            "exited"
        } else if self.ended {
            "failed"
        } else if self.pid.is_some() {
            "running"
        } else {
            "starting"
        }
    }

    /// Nothing more will happen to it.
    pub fn is_done(&self) -> bool {
        self.closed || self.ended
    }

    /// Its main process exited and its broker keeps what it left running.
    pub fn in_custody(&self) -> bool {
        !self.is_done() && self.exit.is_some() && !self.left_running.is_empty()
    }

    /// Nothing more happens to it unless someone acts: done, or in custody.
    pub fn is_settled(&self) -> bool {
        self.is_done() || self.in_custody()
    }

    pub fn runtime_ms(&self) -> u64 {
        let end = self.exited_ms.unwrap_or_else(now_ms);
        end.saturating_sub(self.started_ms)
    }

    /// What its broker said, taken in.
    pub(super) fn apply(&mut self, event: Event) {
        match event.kind {
            EventKind::Spawned { pid, .. } => self.pid = Some(pid),
            EventKind::SpawnError { message, .. } => self.failure = Some(message),
            EventKind::BrokerFailure { message, .. } => self.failure = Some(message),
            EventKind::Exit { status, .. } => {
                self.exit = Some(status);
                self.exited_ms = Some(event.ts_ms);
            }
            EventKind::LeftoversKept { pids } => self.left_running = pids,
            EventKind::LeftoversStopped { .. } => self.left_running.clear(),
            EventKind::SignalSent {
                signal,
                origin,
                targets,
                ..
            } => self.signals.push((signal, origin, targets.len())),
            EventKind::Close { .. } => {
                self.closed = true;
                self.left_running.clear();
            }
            _ => {}
        }
    }
}

struct Inner {
    fleet: Fleet,
    session: Session,
    /// By fleet index, which is also the order they were started in.
    commands: BTreeMap<usize, Tracked>,
}

/// The session's commands, shared by every tool call.
#[derive(Clone)]
pub struct Commands {
    inner: Arc<Mutex<Inner>>,
    changed: watch::Sender<u64>,
    pub session_id: String,
    session_dir: PathBuf,
    /// What becomes of what a command leaves running: kept, with this server as custodian.
    pub leftovers: LeftoversRule,
}

impl Commands {
    /// Must be called inside the tokio runtime: it starts the task that reads the fleet.
    pub fn new(session: Session, leftovers: LeftoversRule) -> Commands {
        let (fleet, mut events) = Fleet::new();
        let (changed, _) = watch::channel(0);
        let commands = Commands {
            session_id: session.id.clone(),
            session_dir: session.path().to_path_buf(),
            leftovers,
            inner: Arc::new(Mutex::new(Inner {
                fleet,
                session,
                commands: BTreeMap::new(),
            })),
            changed,
        };
        let pump = commands.clone();
        tokio::spawn(async move {
            while let Some(event) = events.recv().await {
                pump.apply(event);
            }
        });
        commands
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic in another call must not take the whole server with it.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Creates the command's journal directory and starts its broker. `build` makes the
    /// launch request from the journal directory and the session reference.
    pub fn launch(
        &self,
        name: &str,
        command_text: String,
        build: impl FnOnce(PathBuf, crate::protocol::SessionRef) -> LaunchRequest,
    ) -> Result<Tracked, String> {
        let mut inner = self.lock();
        let (id, journal) = inner.session.next_command_dir(name).map_err(|err| {
            format!(
                "cannot create the command's journal directory in {}: {err}",
                inner.session.path().display()
            )
        })?;
        let path = journal.path().to_path_buf();
        let reference = inner.session.reference(&id);
        let request = build(path.clone(), reference);
        let index = inner.commands.keys().next_back().map_or(0, |last| last + 1);
        let tracked = Tracked {
            started_ms: now_ms(),
            ..Tracked::new(id, request.name.clone(), command_text, path, true)
        };
        inner.commands.insert(index, tracked.clone());
        inner.fleet.launch(
            RunId {
                command: index,
                run: 0,
            },
            request,
            journal,
        );
        Ok(tracked)
    }

    /// The command of this session that a tool call's `id` names (`03-build`, as `run` and
    /// `list` gave it), or why that is no command id.
    pub fn command_id(&self, given: &str) -> Result<CommandId, super::ToolError> {
        CommandId::from_dir_name(&self.session_id, given).map_err(|err| {
            super::ToolError::new(format!("{err}; pass an id that `run` or `list` gave"))
        })
    }

    /// A command this server started.
    pub fn get(&self, id: &CommandId) -> Option<Tracked> {
        self.lock().commands.values().find(|t| t.id == *id).cloned()
    }

    /// Command `id` of the session: this server's own as it heard, any other as its
    /// journal says now.
    pub fn lookup(&self, id: &CommandId) -> Option<Tracked> {
        if let Some(tracked) = self.get(id) {
            return Some(tracked);
        }
        let dir = self.session_dir.join(id.dir_name());
        super::journaled::snapshot(id.clone(), &dir)
    }

    /// The command `id` of this session, or an error that says why there is none.
    pub fn find(&self, id: &CommandId) -> Result<Tracked, super::ToolError> {
        if let Some(tracked) = self.lookup(id) {
            return Ok(tracked);
        }
        let dir_name = id.dir_name();
        let elsewhere = self.session_dir.parent().is_some_and(|sessions| {
            std::fs::read_dir(sessions)
                .is_ok_and(|dirs| dirs.flatten().any(|d| d.path().join(&dir_name).is_dir()))
        });
        let why = if elsewhere {
            format!(
                "command {dir_name} belongs to another session; this server reaches only the commands of session {}",
                self.session_id
            )
        } else {
            format!(
                "no command {dir_name} in session {}; `list` shows the session's commands",
                self.session_id
            )
        };
        Err(super::ToolError::new(why))
    }

    /// The commands of the session from `from` on (all with none), in the order they were
    /// numbered; each read from its journal only as the iterator reaches it.
    pub fn session_commands(
        &self,
        from: Option<CommandId>,
    ) -> impl Iterator<Item = Tracked> + use<> {
        let mine: BTreeMap<CommandId, Tracked> =
            self.all().into_iter().map(|t| (t.id.clone(), t)).collect();
        let session = self.session_id.clone();
        command_dirs(&self.session_dir)
            .unwrap_or_default()
            .into_iter()
            .filter_map(move |dir| {
                let name = dir.file_name()?.to_string_lossy().into_owned();
                let id = CommandId::parse(&session, &name)?;
                if from.as_ref().is_some_and(|from| id < *from) {
                    return None;
                }
                match mine.get(&id) {
                    Some(tracked) => Some(tracked.clone()),
                    None => super::journaled::snapshot(id, &dir),
                }
            })
    }

    /// [`Self::wait_until`], also looking every 100 ms: for what no event announces (the
    /// stream files grow between `output` events).
    pub async fn wait_until_polling(
        &self,
        deadline: Instant,
        mut done: impl FnMut() -> bool,
    ) -> bool {
        loop {
            let step = (Instant::now() + Duration::from_millis(100)).min(deadline);
            if self.wait_until(step, &mut done).await {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
        }
    }

    pub fn all(&self) -> Vec<Tracked> {
        self.lock().commands.values().cloned().collect()
    }

    /// Sends a request to the broker of command `id`. False if it has none any more.
    pub fn send(&self, id: &CommandId, message: Request) -> bool {
        let inner = self.lock();
        let Some((&index, _)) = inner.commands.iter().find(|(_, t)| t.id == *id) else {
            return false;
        };
        inner.fleet.send(index, message)
    }

    /// The client is gone: every command still running is stopped on its behalf (origin
    /// `caller`: an agent that exits ends what it started, as Codex does through its shell),
    /// waited for up to `patience`, and then whatever is left is killed.
    pub async fn stop_all(&self, patience: Duration) {
        {
            let inner = self.lock();
            let stop = Request::Stop {
                origin: Some(Origin::Caller),
            };
            // One in custody stops when this process exits: it is the custodian.
            for (index, _) in inner.commands.iter().filter(|(_, t)| !t.is_settled()) {
                inner.fleet.send(*index, stop.clone());
            }
        }
        let deadline = Instant::now() + patience;
        let settled = || self.all().iter().all(Tracked::is_settled);
        let _ = self.wait_until(deadline, settled).await;
        let active = {
            let inner = self.lock();
            inner.fleet.abort_all();
            inner.fleet.active()
        };
        if active > 0 {
            let gone = || self.all().iter().all(|t| t.ended || t.in_custody());
            let _ = self
                .wait_until(Instant::now() + Duration::from_secs(2), gone)
                .await;
        }
    }

    /// Waits until `done()` holds or `deadline` passes; true if it holds.
    pub async fn wait_until(&self, deadline: Instant, mut done: impl FnMut() -> bool) -> bool {
        let mut changes = self.changed.subscribe();
        loop {
            if done() {
                return true;
            }
            tokio::select! {
                changed = changes.changed() => if changed.is_err() { return done() },
                _ = tokio::time::sleep_until(deadline) => return done(),
            }
        }
    }

    fn apply(&self, event: FleetEvent) {
        let mut inner = self.lock();
        let (FleetEvent::Event(id, _)
        | FleetEvent::Fallback(id, _)
        | FleetEvent::SpawnFailed(id, _)
        | FleetEvent::Ended(id)) = event;
        if matches!(event, FleetEvent::Ended(_)) {
            inner.fleet.ended(id);
        }
        if let Some(tracked) = inner.commands.get_mut(&id.command) {
            match event {
                FleetEvent::Event(_, event) => tracked.apply(event),
                FleetEvent::Fallback(_, text) => tracked.notes.push(text),
                FleetEvent::SpawnFailed(_, text) => tracked.failure = Some(text),
                FleetEvent::Ended(_) => {
                    tracked.ended = true;
                    tracked.left_running.clear();
                    tracked.exited_ms.get_or_insert_with(now_ms);
                }
            }
        }
        drop(inner);
        // Wakes every waiting call (`wait_until`).
        self.changed.send_modify(|n| *n += 1);
    }
}
