//! The follower's I/O around its [`Follower`]: the lock, the journals read as inotify says
//! they change (`journals`), batches handed to the [`Sink`] on a blocking thread (the
//! watcher's queue keeps draining meanwhile), cursors and the status written, signals.
//!
//! At rest nothing wakes it: no timer runs unless something is pending (a batch gathering,
//! a backoff, a session going quiet) or a command runs, whose broker may die without a
//! result (looked at every [`LIVENESS`]).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::signal::unix::{SignalKind, signal};
use tokio::task::JoinHandle;

use super::cursor::{CursorDir, endpoint_key};
use super::lock::{self, Locked};
use super::machine::{Action, Follower, Limits, Planned};
use super::status::{self, Status};
use super::{Item, Sent, Sink};
use crate::clock::now_ms;
use crate::exit::{EXIT_FAILED, EXIT_USAGE, OrExit, exit_code};
use crate::export::CommandExport;
use crate::export::session::NotStarted;
use crate::journal::LauncherLine;
use crate::journal::reader::{read_launcher, read_request};
use crate::journal::watcher::JournalWatcher;
use crate::journal::{CommandId, command_dirs};
use crate::model::Plan;
use crate::model::plan::apply_to;

/// How often commands that run are looked at for a broker that died without a result.
pub(super) const LIVENESS: Duration = Duration::from_secs(10);
/// How often the journals are listed where inotify is unavailable.
const POLL: Duration = Duration::from_millis(500);

/// What `tether export --follow` was asked.
#[derive(Debug, Clone)]
pub struct FollowOptions {
    pub state: PathBuf,
    /// The traces URL: names the endpoint's cursors and lock.
    pub endpoint: String,
    /// Send what is due, then exit.
    pub once: bool,
    pub limits: Limits,
}

/// Runs the follower until SIGINT or SIGTERM (or, with `once`, until nothing is due); the
/// exit code.
pub fn follow(options: FollowOptions, sink: Box<dyn Sink>) -> i32 {
    follow_until(options, sink, std::future::pending())
}

/// [`follow`], stopped as by SIGTERM when `stop` resolves too (for tests in this process).
pub(crate) fn follow_until(
    options: FollowOptions,
    sink: Box<dyn Sink>,
    stop: impl std::future::Future<Output = ()>,
) -> i32 {
    exit_code(|| {
        let dir = CursorDir::open(&options.state, &endpoint_key(&options.endpoint))
            .or_exit(EXIT_FAILED)?;
        let lock = match lock::take(&dir).or_exit(EXIT_FAILED)? {
            Locked::Ours(lock) => lock,
            Locked::Held(pid) => {
                let pid = pid.map_or("another process".into(), |pid| format!("pid {pid}"));
                return Err((
                    EXIT_USAGE,
                    format!(
                        "a follower ({pid}) sends to {} already; `tether export --follow --status` shows it",
                        options.endpoint
                    ),
                ));
            }
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|err| format!("cannot start: {err}"))
            .or_exit(EXIT_FAILED)?;
        let code = runtime.block_on(Follow::new(options, dir, sink).run(stop));
        drop(lock);
        Ok(code)
    })
}

/// `tether export --follow --status`: the follower's last state for `endpoint`, and whether
/// it runs.
pub fn print_status(state: &Path, endpoint: &str) -> i32 {
    exit_code(|| {
        let dir = CursorDir::open(state, &endpoint_key(endpoint)).or_exit(EXIT_FAILED)?;
        let runs = lock::holder(&dir).or_exit(EXIT_FAILED)?;
        let status = status::read(&dir)
            .map_err(|err| {
                let path = dir.path().join(status::STATUS_FILE);
                format!("cannot read {}: {err}", path.display())
            })
            .or_exit(EXIT_FAILED)?;
        match (status, runs) {
            (Some(status), _) => print!("{}", status.text(runs)),
            (None, Some(pid)) => println!("follower running (pid {pid}), no status written yet"),
            (None, None) => {
                println!("no follower has sent to {endpoint} from this state directory")
            }
        }
        Ok(0)
    })
}

pub(super) struct Follow {
    pub(super) options: FollowOptions,
    pub(super) dir: CursorDir,
    pub(super) machine: Follower,
    /// `None`: inotify is unavailable, the journals are listed every [`POLL`].
    pub(super) watcher: Option<JournalWatcher>,
    pub(super) sessions_dir: PathBuf,
    /// Commands that run, by directory: their session and number.
    pub(super) running: HashMap<PathBuf, (String, u64)>,
    /// `None` while a batch is in flight (the sink is on the blocking thread).
    pub(super) sink: Option<Box<dyn Sink>>,
    pub(super) since_ms: u64,
    /// Sessions whose `launcher.jsonl` could not be read whole, said once each.
    launcher_damage_said: Arc<Mutex<HashSet<PathBuf>>>,
}

impl Follow {
    fn new(options: FollowOptions, dir: CursorDir, sink: Box<dyn Sink>) -> Follow {
        let mut limits = options.limits;
        if options.once {
            // Nothing more is coming: no reason to wait for it.
            limits.gather = Duration::ZERO;
        }
        Follow {
            sessions_dir: crate::journal::sessions_dir(&options.state),
            options,
            dir,
            machine: Follower::new(limits),
            watcher: None,
            running: HashMap::new(),
            sink: Some(sink),
            launcher_damage_said: Arc::default(),
            since_ms: now_ms(),
        }
    }

    async fn run(mut self, stop: impl std::future::Future<Output = ()>) -> i32 {
        let mut stop = std::pin::pin!(stop);
        // SIGINT and SIGTERM stop it, SIGUSR1 asks for its status.
        let kinds = [
            SignalKind::interrupt(),
            SignalKind::terminate(),
            SignalKind::user_defined1(),
        ];
        let started = match kinds.map(signal) {
            [Ok(interrupt), Ok(terminate), Ok(usr1)] => {
                self.start().map(|()| (interrupt, terminate, usr1))
            }
            [Err(err), _, _] | [_, Err(err), _] | [_, _, Err(err)] => {
                Err(format!("cannot handle signals: {err}"))
            }
        };
        let (mut interrupt, mut terminate, mut usr1) = match started {
            Ok(signals) => signals,
            Err(err) => {
                eprintln!("tether: {err}");
                return EXIT_FAILED;
            }
        };
        let mut in_flight: Option<JoinHandle<(Box<dyn Sink>, Sent)>> = None;
        let mut stopping = false;
        let mut liveness_at = tokio::time::Instant::now() + LIVENESS;
        self.write_status();
        loop {
            let now = now_ms();
            if self.options.once
                && in_flight.is_none()
                && let Some(code) = self.once_failed(now)
            {
                self.write_status();
                return code;
            }
            while let Some(action) = self.machine.poll_action(now) {
                match action {
                    // Stopping: what was not sent stays in the journal for the next run.
                    Action::Send(_) if stopping => {}
                    Action::Send(batch) => in_flight = Some(self.send(batch)),
                    Action::WriteCursor { session, cursor } => {
                        if let Err(err) = self.dir.write(&session, &cursor) {
                            eprintln!(
                                "tether: cannot write the cursor of {session} in {}: {err}; its spans may be sent again",
                                self.dir.path().display()
                            );
                        }
                    }
                    Action::Say(text) => eprintln!("tether: {text}"),
                }
            }
            if in_flight.is_none() {
                if stopping {
                    self.write_status();
                    return 0;
                }
                if self.options.once
                    && let Some(code) = self.once_done(now)
                {
                    self.write_status();
                    return code;
                }
            }
            let wake = self.wake_at(now, liveness_at);
            let readiness = self.watcher.as_ref().map(JournalWatcher::readiness);
            tokio::select! {
                _ = interrupt.recv() => stopping = true,
                _ = terminate.recv() => stopping = true,
                () = &mut stop, if !stopping => stopping = true,
                _ = usr1.recv() => {
                    let status = Status::of(&self.machine, &self.options.endpoint, self.since_ms, now_ms());
                    eprint!("{}", status.text(Some(std::process::id())));
                }
                done = async { in_flight.as_mut().expect("guarded").await }, if in_flight.is_some() => {
                    in_flight = None;
                    match done {
                        Ok((sink, sent)) => {
                            self.sink = Some(sink);
                            self.machine.handle_sent(now_ms(), sent);
                            self.write_status();
                        }
                        Err(err) => {
                            eprintln!("tether: the sender failed: {err}");
                            return EXIT_FAILED;
                        }
                    }
                }
                _ = async { readiness.as_ref().expect("guarded").wait().await }, if readiness.is_some() && !self.options.once => {
                    self.on_changes();
                }
                _ = async { tokio::time::sleep_until(wake.expect("guarded")).await }, if wake.is_some() => {
                    if self.watcher.is_none() && !self.options.once {
                        self.scan_all();
                    }
                    if tokio::time::Instant::now() >= liveness_at {
                        self.check_running();
                        liveness_at = tokio::time::Instant::now() + LIVENESS;
                    }
                }
            }
        }
    }

    /// With `--once`: exit 1 once a batch failed [`Limits::refused_retries`] times more
    /// than once (the endpoint is down or refuses what it is given).
    fn once_failed(&self, now: u64) -> Option<i32> {
        let counts = self.machine.counts();
        if counts.failing <= Limits::default().refused_retries {
            return None;
        }
        let why = counts.last_error.as_ref().map_or("", |(_, why)| why);
        eprintln!(
            "tether: {} spans could not be sent ({why}); they stay in the journal for the next run",
            self.machine.backlog(now)
        );
        Some(EXIT_FAILED)
    }

    /// With `--once`: the exit code once nothing more is due.
    fn once_done(&self, now: u64) -> Option<i32> {
        let counts = self.machine.counts();
        if !self.machine.idle(now) {
            return None;
        }
        if counts.spans_refused > 0 {
            eprintln!(
                "tether: {} spans were refused by the endpoint and skipped",
                counts.spans_refused
            );
            return Some(EXIT_FAILED);
        }
        Some(0)
    }

    /// When the loop must wake though nothing happens: the machine's time, the next look at
    /// running commands, the next listing while polling. `None`: not before something does.
    fn wake_at(&self, now: u64, liveness_at: tokio::time::Instant) -> Option<tokio::time::Instant> {
        let base = tokio::time::Instant::now();
        let machine = self
            .machine
            .poll_timeout()
            .map(|at| base + Duration::from_millis(at.saturating_sub(now)));
        let liveness = (!self.running.is_empty() && !self.options.once).then_some(liveness_at);
        let poll = (self.watcher.is_none() && !self.options.once).then_some(base + POLL);
        [machine, liveness, poll].into_iter().flatten().min()
    }

    /// Hands `batch` to the sink on a blocking thread; the commands are read there too.
    fn send(&mut self, batch: Vec<Planned>) -> JoinHandle<(Box<dyn Sink>, Sent)> {
        let mut sink = self.sink.take().expect("one batch in flight at a time");
        let said = self.launcher_damage_said.clone();
        tokio::task::spawn_blocking(move || {
            let items = items_of(batch, &said);
            let sent = sink.send(&items);
            (sink, sent)
        })
    }

    fn write_status(&self) {
        let status = Status::of(
            &self.machine,
            &self.options.endpoint,
            self.since_ms,
            now_ms(),
        );
        if let Err(err) = status::write(&self.dir, &status) {
            eprintln!(
                "tether: cannot write {}: {err}",
                self.dir.path().join(status::STATUS_FILE).display()
            );
        }
    }
}

/// What the sink is given for each planned span: a command is read from its journal now,
/// with the launcher's give-up if it gave up on that run; a session's root with what its
/// launcher never started. `launcher.jsonl` is read as it is now, once a batch for each
/// session; what cannot be read of it is said once (`said`: the sessions said so far).
pub(super) fn items_of(batch: Vec<Planned>, said: &Mutex<HashSet<PathBuf>>) -> Vec<Item> {
    let mut launchers = Launchers {
        read: HashMap::new(),
        said,
    };
    (batch.into_iter())
        .map(|planned| item_of(planned, &mut launchers))
        .collect()
}

/// The launcher journals of a batch's sessions, each read once.
struct Launchers<'a> {
    read: HashMap<PathBuf, Vec<LauncherLine>>,
    said: &'a Mutex<HashSet<PathBuf>>,
}

impl Launchers<'_> {
    fn of(&mut self, dir: &Path) -> &[LauncherLine] {
        let said = self.said;
        self.read.entry(dir.to_path_buf()).or_insert_with(|| {
            let mut damage = Vec::new();
            let lines = read_launcher(dir, &mut damage);
            if let Some(damage) = damage.first()
                && said
                    .lock()
                    .is_ok_and(|mut said| said.insert(dir.to_path_buf()))
            {
                eprintln!(
                    "tether: {}: {damage}; the launcher's word may be missing from its spans",
                    dir.display()
                );
            }
            lines
        })
    }
}

fn item_of(planned: Planned, launchers: &mut Launchers) -> Item {
    match planned {
        Planned::Command {
            session, dir, root, ..
        } => {
            let mut command = CommandExport::load(&dir);
            if let Some(session_dir) = dir.parent() {
                apply_to(&mut [&mut command.state], launchers.of(session_dir), None);
                // Only the run's end: a restart planned or a wait is the command's word of
                // the moment the span happens to go out.
                if !matches!(command.state.plan, Some(Plan::GaveUp { .. })) {
                    command.state.plan = None;
                }
            }
            Item::Command {
                session,
                command: Box::new(command),
                root,
            }
        }
        Planned::Session { mut root, dir } => {
            let lines = launchers.of(&dir);
            if !lines.is_empty() {
                let runs = runs_in(&dir);
                let runs: Vec<(&str, Option<u64>)> = (runs.iter())
                    .map(|(name, at)| (name.as_str(), *at))
                    .collect();
                root.never_ran = NotStarted::from_launcher(lines, &runs)
                    .iter()
                    .map(NotStarted::never_ran)
                    .collect();
            }
            Item::Session(root)
        }
    }
}

/// Each run of the session in `dir`: its name and its broker's start, as its journal has
/// them (what [`NotStarted::from_launcher`] weighs the launcher's word against).
fn runs_in(dir: &Path) -> Vec<(String, Option<u64>)> {
    (command_dirs(dir).unwrap_or_default().iter())
        .map(|run| {
            let name = read_request(run).map_or_else(
                || CommandId::of_dir(run).map_or_else(String::new, |id| id.name),
                |request| request.name,
            );
            (name, super::scan::started_ms(run))
        })
        .collect()
}
