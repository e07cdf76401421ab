//! The broker's interpreter: it owns the descriptors, the files and the kernel, and drives
//! the broker's state machine (`state`) with them. One `select!` over the parent's pipe, the
//! command's pipes, SIGCHLD, the parent's pidfd, signals, the control socket and the
//! broker's next deadline turns each happening into an [`Input`]; each output the broker
//! then asks for is carried out at once ([`Outlets::apply`], in `outlets.rs`).

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::time::Duration;

use std::time::Instant;

use tokio::time::sleep_until;

use super::BROKER_TOKEN_ENV;
use super::containment;
use super::control::ControlServer;
use super::final_drain;
use super::mirror::{MIRROR_FDS, Mirror, take_inherited};
use super::outlets::{JournalFiles, Outlets, now};
use super::parent::{CustodianWatch, ParentLink, ParentWatch};
use super::pty;
use super::signals::{self, PDEATH_SIGNAL, STOP_SIGNALS};
use super::spawn::{CgroupEntry, spawn};
use super::state::{Broker, CommandNames, CopyProgress, Host, Input, Sender};
use super::terminal::Terminals;
use super::tree::{TreeRecorder, tree_budget};
use crate::attention::notify::Notifier;
use crate::attention::rate_file::RateFile;
use tether_core::process::CgroupId;
use tether_os::cgroup::EventsWatch;
use tether_os::clock::now_ms;
use tether_os::fdio::{AsyncPipe, ReadyOrder};
use tether_os::journal::JournalDir;
use tether_os::journal::writer::{COMMAND_FILE, EventLog, StreamLog};
use tether_protocol::protocol::{
    BrokerIdentity, CommandFile, Custodian, CustodianRole, Event, EventKind, Frame, LaunchRequest,
    LeftoversEnd, MAX_LINE, PROTOCOL_VERSION, ParentLossCause, Refusal, Request, Stage,
    StdinSource, Stream, Transport,
};

const READ_CHUNK: usize = 256 * 1024;
/// Reads taken from one pipe per wake-up before the loop looks at everything else again.
const READS_PER_WAKE: usize = 8;

/// The descriptors a front end hands a broker, taken (and made close-on-exec) before
/// anything else in the process opens one: their numbers are fixed.
pub struct Inherited {
    journal: io::Result<OwnedFd>,
    mirrors: [Option<OwnedFd>; 2],
    /// The front end's stdin, for the command; the broker never reads it.
    stdin: Option<OwnedFd>,
}

impl Inherited {
    pub fn take() -> Inherited {
        Inherited {
            journal: take_journal_fd(),
            mirrors: MIRROR_FDS.map(take_inherited),
            stdin: take_inherited(super::STDIN_FD),
        }
    }
}

pub async fn run(inherited: Inherited) -> i32 {
    let start = Instant::now();
    match run_inner(start, inherited).await {
        Ok(code) => code,
        Err(err) => {
            eprintln!("tether broker: {err}");
            1
        }
    }
}

/// Sends an event straight to the parent, before a journal exists.
async fn tell_parent(link: &ParentLink, start: Instant, kind: EventKind) {
    let event = Event {
        ts_ms: now_ms(),
        mono_us: start.elapsed().as_micros() as u64,
        kind,
    };
    let _ = link.output.write_all(&event.to_line()).await;
}

/// Tells the parent why the broker cannot go on, before a journal exists.
async fn tell_failure(
    link: &ParentLink,
    start: Instant,
    stage: Stage,
    code: &str,
    message: String,
) {
    let code = code.into();
    tell_parent(
        link,
        start,
        EventKind::BrokerFailure {
            stage,
            code,
            message,
        },
    )
    .await;
}

/// Waits for the launch request, answering pings meanwhile. Returns it with the frames that
/// arrived after it in the same read, to be handled once the command runs (a `stop` sent
/// right after the launch must not be lost). Other lines are refused and skipped, but a line
/// too long to be read is taken for a launch request and ends the broker.
async fn await_launch(
    link: &mut ParentLink,
    start: Instant,
) -> Option<(LaunchRequest, Vec<Frame>)> {
    loop {
        let input = link.input.as_ref()?;
        let n = match input.read(&mut link.buf).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => n,
        };
        let mut frames = link.lines.push(&link.buf[..n]).into_iter();
        while let Some(frame) = frames.next() {
            let failure = match Request::parse(frame, Transport::Pipe) {
                Ok(Request::Launch(request)) if request.v == PROTOCOL_VERSION => {
                    return Some((*request, frames.collect()));
                }
                Ok(Request::Launch(request)) => Refusal {
                    code: "version_mismatch",
                    message: format!(
                        "launch request speaks protocol v{}, this broker v{PROTOCOL_VERSION}; use the same tether binary for both",
                        request.v
                    ),
                },
                Ok(Request::Ping) => {
                    tell_parent(link, start, EventKind::Pong).await;
                    continue;
                }
                Ok(_) => Refusal {
                    code: "not_launched",
                    message: "no command is launched yet; the first request must be `launch`"
                        .into(),
                },
                // Only a launch request is that long: without an end, the front end would
                // show its command `starting` for ever.
                Err(Refusal {
                    code: "line_too_long",
                    ..
                }) => {
                    let message = format!(
                        "the launch request exceeds the {} MiB limit; shorten the command line or its environment",
                        MAX_LINE >> 20
                    );
                    tell_failure(link, start, Stage::Protocol, "launch_too_long", message).await;
                    return None;
                }
                Err(failure) => failure,
            };
            tell_failure(link, start, Stage::Protocol, failure.code, failure.message).await;
        }
    }
}

async fn run_inner(start: Instant, inherited: Inherited) -> io::Result<i32> {
    // Handlers first: the death signal must never find its default action (termination).
    let mut signals = signals::install()?;
    nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::try_from(PDEATH_SIGNAL)?)?;

    let Inherited {
        journal,
        mirrors: mirror_fds,
        stdin,
    } = inherited;
    let mut link = ParentLink::take_stdio()?;
    // Its intervals were cut to `protocol::MAX_INTERVAL` as it was read.
    let Some((request, early)) = await_launch(&mut link, start).await else {
        // The parent went away before saying what to run: nothing was started.
        return Ok(1);
    };
    // The front end checked the pattern; a request from elsewhere may carry any. Refused
    // before anything is created or started; compiled once, here, for the broker.
    let final_line = match request
        .drain_on
        .as_deref()
        .map(final_drain::compile)
        .transpose()
    {
        Ok(regex) => regex,
        Err(err) => {
            let message = err.to_string();
            tell_failure(&link, start, Stage::Protocol, "invalid_drain_on", message).await;
            return Ok(1);
        }
    };

    // The same for the readiness probe's: a `ready_log` pattern, an `http` URL or a `tcp`
    // host the broker cannot use is refused before anything starts.
    let ready_line = match super::probes::check(&request) {
        Ok(regex) => regex,
        Err(message) => {
            tell_failure(&link, start, Stage::Protocol, "invalid_ready", message).await;
            return Ok(1);
        }
    };

    // The socket exists before `command.json` names it, so whoever reads the name finds it.
    let identity = broker_identity();
    let control = ControlServer::listen(&identity, start.into());
    let command_file = CommandFile {
        request: request.clone(),
        broker: Some(identity),
        broker_token: std::env::var(BROKER_TOKEN_ENV).ok(),
        control_socket: control.as_ref().ok().map(|c| c.path().to_path_buf()),
        broker_pid_ns: tether_os::socket_dir::own_pid_namespace(),
    };
    let logs = journal.and_then(|dir| {
        let dir =
            JournalDir::from_fd(dir, request.journal_dir.clone()).map_err(io::Error::other)?;
        dir.write_json_once(COMMAND_FILE, &command_file)?;
        // After `command.json`, which a later tether reads to know whose journal it is.
        let _ = tether_os::journal_link::create(&identity, Path::new(&request.journal_dir));
        let events = EventLog::create(&dir)?;
        let streams = [
            StreamLog::create(&dir, Stream::Stdout)?,
            StreamLog::create(&dir, Stream::Stderr)?,
        ];
        Ok(JournalFiles {
            dir,
            events: Some(events),
            streams,
        })
    });
    let journal = match logs {
        Ok(journal) => journal,
        Err(err) => {
            let message = format!(
                "cannot create the journal in {}: {err}; choose a writable --state-dir",
                request.journal_dir.display()
            );
            tell_failure(&link, start, Stage::Internal, "journal_create", message).await;
            return Ok(1);
        }
    };

    let parent = ParentWatch::open(request.parent_pid);
    let mut broker = Broker::new(
        host(request.parent_pid),
        start,
        super::outlets::now(),
        request.clone(),
        CommandNames {
            id: (request.session.as_ref()).map(|s| s.command.clone()),
            text: tether_config::naming::command_text(&request.command),
        },
        final_line,
        ready_line,
    );
    let control_failed = control
        .as_ref()
        .err()
        .map(|err| EventKind::ControlUnavailable {
            code: err.code().into(),
            message: format!(
                "no control socket: {err}; `tether stop` falls back to signalling the broker"
            ),
        });
    let mut out = Outlets {
        journal,
        tree: TreeRecorder::new(tree_budget(request.max_output)),
        link,
        control: control.ok(),
        for_subscribers: Vec::new(),
        subscribed: false,
        let_go: false,
        give_up_copy: false,
        notify: request
            .attention
            .notify
            .as_deref()
            .filter(|_| request.attention.enabled)
            .and_then(|argv| Notifier::new(argv, notify_rate(&request))),
        cgroup: None,
        probes: super::probes::Probes::new(&request),
        exit: None,
        cpu_used: std::time::Duration::ZERO,
        cpu_measured_at: None,
    };
    out.feed(
        &mut broker,
        Input::Happened(EventKind::BrokerStarted {
            v: PROTOCOL_VERSION,
            broker_pid: std::process::id() as i32,
            control_socket: command_file.control_socket.clone(),
        }),
    );
    // A sandbox may forbid sockets: the command runs all the same, stopped through the
    // broker's pid instead.
    if let Some(kind) = control_failed {
        out.feed(&mut broker, Input::Happened(kind));
    }
    if let Some(reason) = &request.trace_ignored {
        let kind = EventKind::TraceContextIgnored {
            reason: reason.clone(),
        };
        out.feed(&mut broker, Input::Happened(kind));
    }
    let mut custodians = watch_custodians(&mut broker, &mut out, &request);
    let mut parent = match parent {
        Ok(watch) => Some(watch),
        Err(cause) => {
            // Running a command nobody owns would orphan it by design: refuse.
            out.feed(&mut broker, Input::ParentLost(cause));
            None
        }
    };

    let mut mirrors: [Option<Mirror>; 2] = [None, None];
    if request.mirror {
        for (slot, fd) in mirrors.iter_mut().zip(mirror_fds) {
            *slot = fd.map(Mirror::new).transpose()?;
        }
    }
    let mut pipes: [Option<AsyncPipe>; 2] = [None, None];
    // The command's output is read in the order its pipes became readable; without an epoll
    // set (the kernel refused one), each pipe as it can be read.
    let mut order = ReadyOrder::new().ok();
    let mut terminals = Terminals::default();
    let mut cgroup_watch = None;
    if parent.is_some() {
        let contained = containment::establish(&request, &identity);
        for event in contained.events {
            out.feed(&mut broker, Input::Happened(event));
        }
        // Descriptors of their own: the cgroup itself goes to the broker's state first.
        let entry = contained.cgroup.as_ref().and_then(|c| {
            Some(CgroupEntry {
                dir: c.dir().try_clone_to_owned().ok()?,
                procs: c.procs_for_child().ok(),
            })
        });
        cgroup_watch = contained
            .cgroup
            .as_ref()
            .and_then(|c| EventsWatch::new(c.path()).ok());
        out.cgroup = contained.cgroup.clone();
        let named = (contained.cgroup.as_deref()).map(|c| CgroupId {
            name: c.name().to_string(),
            path: c.path().to_path_buf(),
        });
        out.feed(&mut broker, Input::Contained(named));
        // Closed here once the command has its copy (or never used: the request says null).
        let stdin = stdin.filter(|_| request.stdin == StdinSource::Inherit);
        // The command's start is stamped before the fork, as a shell's `time` counts it: a
        // quick command has often ended before `spawn` returns and its pid is looked up, and
        // its run then read shorter than the CPU it used.
        let spawning = now();
        match spawn(&request, stdin, entry, order.as_mut()) {
            Ok(child) => {
                let merged = child.stderr.is_none();
                pipes = [
                    Some(AsyncPipe::new(child.stdout)?),
                    child.stderr.map(AsyncPipe::new).transpose()?,
                ];
                if let Some(failure) = child.terminal_unavailable {
                    let kind = EventKind::TerminalUnavailable {
                        code: failure.code.into(),
                        message: format!("{}; the command runs with pipes", failure.message),
                    };
                    out.feed_at(&mut broker, Input::Happened(kind), spawning);
                }
                // Whether it entered its cgroup, then whether it has ended: in this order, as a
                // process that ends leaves the cgroup's list.
                let in_cgroup = out
                    .cgroup
                    .as_ref()
                    .is_some_and(|c| c.members().is_ok_and(|m| m.contains(&child.pid)));
                // Unreaped, the pid is the command's: its start time is read now, for the journal.
                let stat = tether_os::procfs::read_stat(child.pid);
                let spawned = Input::Spawned {
                    pid: child.pid,
                    start_ticks: stat.map(|s| s.start_ticks),
                    argv: child.argv,
                    inputs: child.inputs,
                    in_cgroup,
                    ended: stat.is_none_or(|s| s.is_zombie()),
                };
                out.feed_at(&mut broker, spawned, spawning);
                if let Some(streams) = child.terminal {
                    out.feed(
                        &mut broker,
                        Input::Happened(EventKind::Terminal { streams }),
                    );
                }
                if merged {
                    // Nothing is ever read from stderr: stdout carries it.
                    out.feed(&mut broker, Input::Happened(EventKind::StreamsMerged {}));
                    out.feed(
                        &mut broker,
                        Input::Closed {
                            stream: Stream::Stderr,
                        },
                    );
                }
                terminals = Terminals::new(child.terminal, request.stdin == StdinSource::Terminal);
            }
            Err(failure) => {
                let failed = Input::SpawnFailed {
                    code: failure.code,
                    message: failure.message,
                };
                out.feed(&mut broker, failed);
            }
        }
        containment::remove_stale();
    } else {
        let failed = Input::SpawnFailed {
            code: "parent_lost".into(),
            message: "the process that launched this command was gone before it could start".into(),
        };
        out.feed(&mut broker, failed);
    }

    for frame in early {
        if let Some(input) = parent_frame(frame, &mut terminals, &pipes) {
            out.feed(&mut broker, input);
        }
    }
    let mut bufs = [vec![0u8; READ_CHUNK], vec![0u8; READ_CHUNK]];
    // A child that ended before the handler was in place.
    out.reap(&mut broker);
    while !broker.is_done() {
        let deadline = broker
            .poll_timeout()
            .unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
        let parent_alive = broker.parent_attached();
        let behind = mirrors
            .each_ref()
            .map(|m| m.as_ref().is_some_and(Mirror::is_behind));
        // A stream is read while its copy keeps up.
        if let Some(set) = order.as_mut()
            && (pipes.iter().enumerate()).any(|(slot, pipe)| {
                set.watch(slot, pipe.as_ref().map(AsFd::as_fd), !behind[slot])
                    .is_err()
            })
        {
            order = None;
        }
        let [out_buf, err_buf] = &mut bufs;
        let [out_mirror, err_mirror] = &mut mirrors;
        // Where waiting input goes, as the terminal takes it.
        let input_pipe = terminals
            .input_waiting()
            .and_then(|stream| pipes[stream as usize].as_ref());
        tokio::select! {
            arrived = signals.recv() => {
                // What ended is reaped below, before the tick, as after every wake-up.
                if arrived.has(libc::SIGCHLD) {
                    notice_exited_custodians(&mut broker, &mut out, &mut custodians);
                }
                if arrived.has(PDEATH_SIGNAL)
                    && parent.as_ref().is_none_or(|p| !p.confirm_alive())
                {
                    out.feed(&mut broker, Input::ParentLost(ParentLossCause::Pdeathsig));
                }
                // SIGTERM, SIGINT or SIGHUP to the broker.
                if arrived.first_of(&STOP_SIGNALS).is_some() {
                    notice_exited_custodians(&mut broker, &mut out, &mut custodians);
                    // The sender of the last stop signal, taken (`None`: the kernel's own, or
                    // none kept).
                    let sender = tether_os::signal_pipe::take_sender();
                    out.feed(&mut broker, Input::Shutdown { sender });
                }
            }
            ready = or_pending(order.as_ref().map(ReadyOrder::ready)), if order.as_ref().is_some_and(ReadyOrder::watching) => {
                // The set failed: each pipe as it can be read from now on.
                if ready.is_err() {
                    order = None;
                }
                // First ready, first read: what the command wrote first is journaled and
                // copied first, whichever stream it went to.
                for slot in ready.unwrap_or_default() {
                    let (stream, mirror, buf) = match slot {
                        0 => (Stream::Stdout, &mut *out_mirror, &mut *out_buf),
                        _ => (Stream::Stderr, &mut *err_mirror, &mut *err_buf),
                    };
                    let Some(first) = pipes[slot].as_ref().map(|p| p.try_read(buf)) else {
                        continue;
                    };
                    on_read(&mut broker, &mut out, &mut pipes[slot], mirror, stream, first, buf);
                }
                if let Some(set) = &order {
                    set.settle();
                }
            }
            r = or_pending(pipes[0].as_ref().map(|p| p.read(out_buf))), if order.is_none() && !behind[0] => {
                on_read(&mut broker, &mut out, &mut pipes[0], out_mirror, Stream::Stdout, r, out_buf);
            }
            r = or_pending(pipes[1].as_ref().map(|p| p.read(err_buf))), if order.is_none() && !behind[1] => {
                on_read(&mut broker, &mut out, &mut pipes[1], err_mirror, Stream::Stderr, r, err_buf);
            }
            r = or_pending(out_mirror.as_mut().map(Mirror::write_some)), if behind[0] => {
                if r.is_err() {
                    *out_mirror = None;
                }
            }
            r = or_pending(err_mirror.as_mut().map(Mirror::write_some)), if behind[1] => {
                if r.is_err() {
                    *err_mirror = None;
                }
            }
            r = or_pending(out.link.input.as_ref().map(|p| p.read(&mut out.link.buf))), if parent_alive => match r {
                Ok(0) | Err(_) => {
                    out.link.input = None;
                    out.feed(&mut broker, Input::ParentLost(ParentLossCause::StdinEof));
                }
                Ok(n) => {
                    let frames = out.link.lines.push(&out.link.buf[..n]);
                    for frame in frames {
                        if let Some(input) = parent_frame(frame, &mut terminals, &pipes) {
                            out.feed(&mut broker, input);
                        }
                    }
                }
            },
            r = or_pending(input_pipe.map(|pipe| terminals.write_some(pipe))), if input_pipe.is_some() => {
                if r.is_err() {
                    let dropped = terminals.forget_pending();
                    out.feed(&mut broker, Input::TypedDropped(dropped));
                }
            }
            custodian = custodians.exited(), if !custodians.is_empty() => {
                out.feed(&mut broker, custodian_exited(custodian));
            }
            _ = or_pending(parent.as_ref().map(ParentWatch::exited)), if parent_alive => {
                out.feed(&mut broker, Input::ParentLost(ParentLossCause::Pidfd));
            }
            r = out.link.queue.write_some(&out.link.output), if parent_alive && !out.link.queue.is_empty() => {
                if r.is_err() {
                    out.feed(&mut broker, Input::ParentLost(ParentLossCause::Epipe));
                }
            }
            changed = or_pending(cgroup_watch.as_ref().map(EventsWatch::changed)) => {
                notice_exited_custodians(&mut broker, &mut out, &mut custodians);
                if changed.is_err() {
                    cgroup_watch = None;
                }
                let state = out.cgroup_state();
                out.feed(&mut broker, Input::CgroupChanged(state));
            }
            input = or_pending(out.control.as_mut().map(ControlServer::next)) => out.feed(&mut broker, input),
            (attempt, outcome) = out.probes.answer() => {
                out.feed(&mut broker, Input::ReadyTried { attempt, outcome });
            }
            _ = sleep_until(deadline.into()) => {}
        }
        let dropped = terminals.settle(&pipes);
        if dropped > 0 {
            out.feed(&mut broker, Input::TypedDropped(dropped));
        }
        // A child that ended but whose SIGCHLD is not handled yet must not count as left.
        out.reap(&mut broker);
        let tick = Input::Tick {
            copy: copy_progress(&mirrors),
        };
        out.feed(&mut broker, tick);
        if std::mem::take(&mut out.give_up_copy) {
            give_up_copy(&mut broker, &mut out, &mut mirrors);
        }
        // The probing is over (the broker's state says): a try still going is given up.
        if !broker.ready_probing() {
            out.probes.give_up();
        }
        out.broadcast();
        if !broker.parent_attached() {
            out.link.queue.clear();
        } else if out.link.queue.write_now(&out.link.output).is_err() {
            out.feed(&mut broker, Input::ParentLost(ParentLossCause::Epipe));
        }
        if std::mem::take(&mut out.let_go) {
            let_front_end_go(&mut broker, &mut out, &mut mirrors, &mut parent).await;
        }
        out.feed(&mut broker, Input::ParentBacklog(out.link.queue.len()));
    }
    // The broker is done only once no copy is behind (taken, or given up and journaled):
    // closing the pipes ends the front end's copies while the result is written.
    drop(mirrors);
    out.reap(&mut broker);
    out.feed(&mut broker, Input::Finish);
    let code = out.exit.unwrap_or(1);
    let attached = broker.parent_attached();
    if !attached {
        out.link.queue.clear();
    }
    let Outlets {
        mut link,
        mut control,
        for_subscribers,
        ..
    } = out;
    // What is left once `close` is sent is our own exit, which the front end waits for (to
    // reap us) before it returns. So before it: nobody new connects to a broker that is done,
    // no later tether finds a link to it, and nothing of the front end's caller is held open
    // here (our stderr, inherited, is its pipe: an agent reads it to end of file). The front
    // end's exit is expected now; its death signal would mean nothing.
    if let Some(server) = control.as_mut() {
        server.remove_socket();
    }
    tether_os::journal_link::remove(&identity);
    let _ = nix::sys::prctl::set_pdeathsig(None);
    let _ = detach_stderr();
    let parent_drain = async {
        if attached {
            link.drain(Duration::from_secs(1)).await;
        }
    };
    // The socket goes first (nobody new connects to a broker that is done); subscribers get
    // the last events (`close`) if they take them soon.
    let control_drain = async {
        if let Some(server) = control.as_mut() {
            server.broadcast(&for_subscribers);
            server.close(CONTROL_DRAIN).await;
        }
    };
    tokio::join!(parent_drain, control_drain);
    // Done: our front end waits for this exit to reap us, and dropping what is open here
    // (a deregistration and a close for each descriptor) would only keep it waiting. The
    // kernel closes them.
    tether_os::sys::exit_now(code)
}

/// One request line from the parent, as the broker takes it: input and sizes go to the
/// terminals this loop holds first.
fn parent_frame(
    frame: Frame,
    terminals: &mut Terminals,
    pipes: &[Option<AsyncPipe>; 2],
) -> Option<Input<'static>> {
    Some(match Request::parse(frame, Transport::Pipe) {
        Ok(Request::Input { data }) => Input::Typed(terminals.input(&data, pipes)),
        Ok(Request::Resize { size }) => Input::Resized(terminals.resize(size, pipes)?),
        request => Input::Request {
            from: Sender::Parent,
            request,
        },
    })
}

/// Watches the custodians of the command's leftovers, when the rule keeps them; one that
/// cannot be watched (or none at all) means they are stopped at once. The session's owner is
/// watched whatever the rule: its exit ends the session, and a command still running with it.
fn watch_custodians(
    broker: &mut Broker,
    out: &mut Outlets,
    request: &LaunchRequest,
) -> CustodianWatch {
    let rule = &request.leftovers;
    let watched: Vec<Custodian> = rule
        .custodians
        .iter()
        .filter(|c| rule.keep || c.role == CustodianRole::SessionOwner)
        .copied()
        .collect();
    let (watch, unwatched) = CustodianWatch::open(&watched);
    let (reason, pid) = match unwatched.first() {
        Some(gone) => (LeftoversEnd::custodian_unwatched(gone.role), Some(gone.pid)),
        None if rule.keep && watch.is_empty() => (LeftoversEnd::CallerGone, None),
        None => return watch,
    };
    out.feed(broker, Input::CustodianUnwatched { reason, pid });
    watch
}

/// Says first which custodians have exited already, before a child's exit, a cgroup change
/// or a stop signal is handled: the agent's own broker stops what is left of the agent's
/// tree (its leftovers, this broker) a moment after the agent exited and its pidfd here
/// fired, and the agent exiting, not that teardown, is why they went.
fn notice_exited_custodians(
    broker: &mut Broker,
    out: &mut Outlets,
    custodians: &mut CustodianWatch,
) {
    while let Some(custodian) = custodians.exited_now() {
        out.feed(broker, custodian_exited(custodian));
    }
}

fn custodian_exited(custodian: Custodian) -> Input<'static> {
    Input::CustodianExited {
        reason: LeftoversEnd::custodian_exited(custodian.role),
        pid: Some(custodian.pid),
    }
}

/// How long the front end is given to take its last output and events when custody begins.
const LET_GO_WAIT: Duration = Duration::from_secs(1);

/// Custody began: the front end returns now, as the shell would once its command exited. It
/// gets the rest of its copy of the output and then end of file on it (the mirrors close),
/// and its events up to `leftovers_kept`; then nothing more. The broker keeps nothing of
/// the front end's caller open either: its stderr, inherited, would hold the caller's pipe
/// (an agent reading it would wait for end of file for as long as the leftovers run).
async fn let_front_end_go(
    broker: &mut Broker,
    out: &mut Outlets,
    mirrors: &mut [Option<Mirror>; 2],
    parent: &mut Option<ParentWatch>,
) {
    for mirror in mirrors.iter_mut().flatten() {
        let _ = tokio::time::timeout(LET_GO_WAIT, mirror.flush()).await;
    }
    *mirrors = [None, None];
    if broker.parent_attached() {
        out.link.drain(LET_GO_WAIT).await;
    }
    out.link.input = None;
    out.link.queue.clear();
    *parent = None;
    // The front end's exit is expected now; its death signal would only be confirmed away.
    let _ = nix::sys::prctl::set_pdeathsig(None);
    let stderr = detach_stderr();
    out.feed(broker, Input::FrontEndLetGo { stderr });
}

/// How the front end's copy of the output stands.
fn copy_progress(mirrors: &[Option<Mirror>; 2]) -> CopyProgress {
    let live = mirrors.iter().flatten();
    CopyProgress {
        behind: live.clone().any(Mirror::is_behind),
        taken: live.map(Mirror::taken).sum(),
    }
}

/// The broker gave up the copy (the command has ended and its caller takes no more, or a
/// stop was asked): each stream's copy that is behind ends here, and what it never
/// delivered goes back to the broker, for the journal. The stream is then read to its end
/// without waiting for anyone.
fn give_up_copy(broker: &mut Broker, out: &mut Outlets, mirrors: &mut [Option<Mirror>; 2]) {
    let undelivered = mirrors.each_mut().map(|slot| match slot {
        Some(mirror) if mirror.is_behind() => {
            let lost = mirror.undelivered();
            *slot = None;
            lost
        }
        _ => 0,
    });
    out.feed(broker, Input::CopyGivenUp { undelivered });
}

/// Points descriptor 2 at /dev/null.
fn detach_stderr() -> io::Result<()> {
    let null = std::fs::OpenOptions::new().write(true).open("/dev/null")?;
    nix::unistd::dup2_stderr(&null)?;
    Ok(())
}

/// Where the user's notify rate is kept: the state directory the front end named (absent
/// when its path is not UTF-8: this broker's own limit only, then).
fn notify_rate(request: &LaunchRequest) -> Option<RateFile> {
    let state_dir = request.session.as_ref()?.state_dir.as_deref()?;
    Some(RateFile::in_state_dir(state_dir))
}

/// What the broker's state machine is told of this process and machine at the start.
fn host(parent_pid: i32) -> Host {
    Host {
        pid: std::process::id() as i32,
        uid: nix::unistd::getuid().as_raw(),
        parent_program: tether_os::procfs::program_label(parent_pid),
        ticks_per_second: tether_os::procfs::clock_ticks_per_second(),
        page_size: tether_os::procfs::page_size(),
    }
}

/// How long control clients get, once the broker is done, to take their last events.
const CONTROL_DRAIN: Duration = Duration::from_millis(500);

/// This broker's pid and start time, as `command.json` records them for front ends to
/// check a pid against.
fn broker_identity() -> BrokerIdentity {
    let pid = std::process::id() as i32;
    BrokerIdentity {
        pid,
        start_ticks: tether_os::procfs::read_stat(pid).map_or(0, |s| s.start_ticks),
    }
}

/// The command's journal directory, which the front end opened (after checking the state
/// directory) and handed over as [`super::JOURNAL_FD`]: the broker never resolves a journal
/// path itself, so no link planted in one can redirect what it writes.
fn take_journal_fd() -> io::Result<OwnedFd> {
    let fd = super::JOURNAL_FD;
    take_inherited(fd).ok_or_else(|| {
        io::Error::other(format!(
            "no journal directory was handed over as descriptor {fd}; brokers are started by tether itself"
        ))
    })
}

/// Awaits `future`; never resolves without one (a closed pipe, no socket, nothing to write).
async fn or_pending<T>(future: Option<impl Future<Output = T>>) -> T {
    match future {
        Some(future) => future.await,
        None => std::future::pending().await,
    }
}

/// Stores what a read returned, then keeps reading while the pipe has more, a few times, and
/// while the front end's copy keeps up.
fn on_read(
    broker: &mut Broker,
    out: &mut Outlets,
    pipe: &mut Option<AsyncPipe>,
    mirror: &mut Option<Mirror>,
    stream: Stream,
    first: io::Result<usize>,
    buf: &mut [u8],
) {
    let mut result = first;
    for reads in 1.. {
        match result {
            Ok(0) => {
                *pipe = None;
                out.feed(broker, Input::Closed { stream });
                return;
            }
            Ok(n) => {
                let chunk = &buf[..n];
                broker.handle(
                    Input::Read {
                        stream,
                        bytes: chunk,
                    },
                    super::outlets::now(),
                );
                out.apply(broker, chunk);
                if let Some(copy) = mirror.as_mut() {
                    // The front end closed its end: the journal goes on alone.
                    if copy.push(chunk).is_err() {
                        *mirror = None;
                    }
                }
            }
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => return,
            // A terminal's master once every holder of its slave side closed it.
            Err(err) if pty::is_hangup(&err) => {
                *pipe = None;
                out.feed(broker, Input::Closed { stream });
                return;
            }
            Err(error) => {
                out.feed(broker, Input::ReadFailed { stream, error });
                *pipe = None;
                return;
            }
        }
        // Every read taken is stored above; stop taking more after a few so the loop can
        // look at everything else.
        if reads == READS_PER_WAKE || mirror.as_ref().is_some_and(Mirror::is_behind) {
            return;
        }
        let Some(open) = pipe.as_ref() else { return };
        result = open.try_read(buf);
    }
}
