//! The broker process: `tether broker` started in its own session with the descriptors it
//! takes, requests written to its stdin, events read from its stdout. Only
//! [`super::conversation`] talks to it.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};

use nix::sys::signal::Signal;
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;

use tether_broker::broker::{BROKER_ENV, BROKER_TOKEN_ENV, JOURNAL_FD};
use tether_os::fdio::{AsyncPipe, LineReader, Outbox};
use tether_os::journal::JournalDir;
use tether_protocol::protocol::{Event, Frame, LaunchRequest, MAX_LINE, Request, encode_line};

/// A fresh broker token: 128 bits from the kernel's random source, in hex.
fn broker_token() -> io::Result<String> {
    let mut bits = [0u8; 16];
    tether_os::sys::random_bytes(&mut bits)?;
    Ok(bits.iter().map(|b| format!("{b:02x}")).collect())
}

/// The broker as this front end's unreaped child, however it was started (`tether broker`
/// exec'd, or a fork of this process: see [`fork`]). Unreaped, its pid cannot name another
/// process; once reaped here, nothing is sent to that pid again.
pub struct BrokerChild {
    pub(super) pid: i32,
    reaped: bool,
}

impl BrokerChild {
    fn new(pid: i32) -> BrokerChild {
        BrokerChild { pid, reaped: false }
    }

    /// SIGKILL, unless it was reaped already.
    pub fn kill(&mut self) -> io::Result<()> {
        if self.reaped {
            return Ok(());
        }
        nix::sys::signal::kill(Pid::from_raw(self.pid), Signal::SIGKILL).map_err(io::Error::from)
    }

    /// Reaps it if it has exited: `Some` once it has (now or before).
    pub fn try_wait(&mut self) -> io::Result<Option<()>> {
        self.reap(Some(WaitPidFlag::WNOHANG))
    }

    pub fn wait(&mut self) -> io::Result<()> {
        self.reap(None).map(|_| ())
    }

    fn reap(&mut self, flags: Option<WaitPidFlag>) -> io::Result<Option<()>> {
        while !self.reaped {
            match waitpid(Pid::from_raw(self.pid), flags) {
                Ok(WaitStatus::StillAlive) => return Ok(None),
                Ok(WaitStatus::Exited(..) | WaitStatus::Signaled(..)) => self.reaped = true,
                // Stopped or continued (not asked for): still there.
                Ok(_) => return Ok(None),
                Err(nix::errno::Errno::EINTR) => continue,
                Err(err) => return Err(err.into()),
            }
        }
        Ok(Some(()))
    }
}

/// A running broker: requests go to its stdin, events come from its stdout.
pub struct BrokerProcess {
    pub child: BrokerChild,
    pub wire: Wire,
    /// The name of the cgroup the broker will put the command in, where there is a
    /// hierarchy: what to kill and remove if the broker dies before its `containment` event
    /// comes (see [`containment::expected_cgroup`](tether_broker::broker::containment::expected_cgroup)).
    pub expected_cgroup: Option<String>,
    /// The command's journal directory, locked (`flock`) while this front end looks after
    /// the command, its leftovers included: a later tether never takes over a command whose
    /// front end lives. The broker holds the same open directory (and so the lock) as its
    /// journal descriptor, for as long as it runs.
    _custody: Option<OwnedFd>,
}

/// One line from a broker: the event, and the exact bytes it came as.
pub struct BrokerLine {
    pub raw: Vec<u8>,
    pub event: Result<Event, String>,
}

impl BrokerProcess {
    /// Starts `tether broker` (this very binary) in its own session and sends it `request`.
    /// Must be called inside a tokio runtime.
    /// `journal` is the command's journal directory, created by the front end; the broker
    /// receives it as descriptor [`JOURNAL_FD`] and writes only below it. `handover` holds
    /// the other descriptors the request asks the broker to take (see [`Handover`]).
    pub async fn spawn(
        request: &LaunchRequest,
        journal: &JournalDir,
        handover: Handover,
        stderr: Stdio,
    ) -> io::Result<BrokerProcess> {
        let launch = launch_line(request)?;
        let (journal_fd, custody) = journal_fds(journal)?;
        let exe = std::env::current_exe()?;
        let mut command = Command::new(exe);
        command
            .arg("broker")
            .env(BROKER_ENV, "1")
            .env(BROKER_TOKEN_ENV, broker_token()?)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr);
        // SAFETY: setsid, dup2 and fcntl are async-signal-safe and touch no memory of the
        // parent; `journal_fd` and `handover` stay open in the parent until spawn returns.
        unsafe {
            command.pre_exec(move || {
                nix::unistd::setsid()?;
                pass_fds(handover.with_journal(&journal_fd), JOURNAL_FD)
            });
        }
        let child = command.spawn()?;
        let mut broker = BrokerProcess::talking_to(child, None, Some(custody))?;
        // The request first: the broker waits for it, and what follows does not.
        broker.wire.requests.write_all(&launch).await?;
        broker.expected_cgroup = Some(expected_cgroup(request, broker.pid()));
        Ok(broker)
    }

    /// Talks to the broker [`fork`] started. Must be called inside a tokio runtime.
    pub fn forked(f: ForkedBroker) -> io::Result<BrokerProcess> {
        Ok(BrokerProcess {
            child: f.child,
            wire: Wire::new(f.requests, Some(f.events), 256 * 1024)?,
            expected_cgroup: f.expected_cgroup,
            _custody: f.custody,
        })
    }

    /// Talks to `child` through its piped stdin and stdout.
    pub(super) fn talking_to(
        mut child: Child,
        expected_cgroup: Option<String>,
        custody: Option<OwnedFd>,
    ) -> io::Result<BrokerProcess> {
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(io::Error::other("the broker's pipes were not created"));
        };
        // Dropping a `Child` neither kills nor reaps it: the pid is ours to reap.
        BrokerProcess::forked(ForkedBroker {
            child: BrokerChild::new(child.id() as i32),
            requests: OwnedFd::from(stdin),
            events: OwnedFd::from(stdout),
            custody,
            expected_cgroup,
        })
    }

    pub fn pid(&self) -> i32 {
        self.child.pid
    }
}

/// One peer's lines: requests out, and lines (events, answers) back, over a broker's stdin
/// and stdout, or both ways over its control socket ([`ControlClient`](crate::control::ControlClient)).
pub struct Wire {
    requests: AsyncPipe,
    /// Where the lines come from, when not from `requests` (a socket carries both ways).
    events: Option<AsyncPipe>,
    reader: LineReader,
    /// Request lines the peer has not taken yet.
    pub(crate) outbox: Outbox,
}

impl Wire {
    /// A wire over `requests` and `events` (or `requests` both ways), lines up to `max_line`
    /// bytes. Must be called inside a tokio runtime.
    pub(crate) fn new(
        requests: OwnedFd,
        events: Option<OwnedFd>,
        max_line: usize,
    ) -> io::Result<Wire> {
        Ok(Wire {
            requests: AsyncPipe::new(requests)?,
            events: events.map(AsyncPipe::new).transpose()?,
            reader: LineReader::new(max_line),
            outbox: Outbox::default(),
        })
    }

    /// Queues a request and writes what the peer takes now, never waiting: a stopped
    /// broker must not stall its front end. Its answer, if the transport has one for it,
    /// comes among the lines. `Err` means the peer is gone.
    pub fn post(&mut self, request: &Request) -> io::Result<()> {
        self.outbox.push(&request.to_line());
        self.outbox.write_now(&self.requests)
    }

    /// A ping, unless earlier requests still wait, which are written as far as the peer
    /// takes them (the broker answers those first anyway). Returns whether it was queued.
    pub fn ping(&mut self) -> io::Result<bool> {
        if self.outbox.is_empty() {
            self.post(&Request::Ping).map(|()| true)
        } else {
            self.outbox.write_now(&self.requests).map(|()| false)
        }
    }

    /// The next line from the peer; `None` once it has closed its end. While it waits,
    /// requests that a post could not write (a paste bigger than the pipe, a broker that
    /// is behind) go as the peer takes them, not only with the next post.
    /// Cancel-safe: a line is only taken in the poll that returns it, and bytes leave the
    /// queue only in the poll that writes them.
    pub async fn next_line(&mut self) -> Option<BrokerLine> {
        let events = self.events.as_ref().unwrap_or(&self.requests);
        let frame = self
            .reader
            .next(events, &mut self.outbox, &self.requests)
            .await?;
        Some(BrokerLine::from_frame(frame))
    }

    /// Reads, without waiting, what the peer has written and was not read yet, and returns
    /// how many lines then wait for [`Self::next_line`]: all it wrote before this call (the
    /// buffer holds more than a pipe; a pipe raised past it to the 1-MiB ceiling, or a
    /// subscription's backlog, takes a few reads). End of file and errors are left for
    /// `next_line` to meet.
    pub fn read_waiting(&mut self) -> usize {
        let events = self.events.as_ref().unwrap_or(&self.requests);
        self.reader.read_waiting(events)
    }
}

/// The launch request as the line the broker reads first.
fn launch_line(request: &LaunchRequest) -> io::Result<Vec<u8>> {
    let launch =
        encode_line(&Request::Launch(Box::new(request.clone()))).map_err(io::Error::other)?;
    if launch.len() > MAX_LINE {
        return Err(io::Error::other(format!(
            "the launch request is {} bytes, over the {}-MiB limit; shorten the command line or its environment",
            launch.len(),
            MAX_LINE >> 20
        )));
    }
    Ok(launch)
}

/// The journal directory twice: the broker's [`JOURNAL_FD`], and the front end's custody of
/// it, locked (`flock`).
fn journal_fds(journal: &JournalDir) -> io::Result<(OwnedFd, OwnedFd)> {
    let journal_fd = journal.try_clone_fd()?;
    let custody = journal.try_clone_fd()?;
    // A fresh directory nobody else holds: the lock is ours at once. Without it (a file
    // system without locks) a later tether may only find the command once we are gone.
    // rustix's flock: nix's is deprecated for a `Flock` that takes the descriptor over.
    let _ = rustix::fs::flock(
        &custody,
        rustix::fs::FlockOperation::NonBlockingLockExclusive,
    );
    Ok((journal_fd, custody))
}

/// The name of the cgroup the broker `pid` (our unreaped child, whose start time it names
/// its command's cgroup with) will make for `request`.
fn expected_cgroup(request: &LaunchRequest, pid: i32) -> String {
    let identity = tether_protocol::protocol::BrokerIdentity {
        pid,
        start_ticks: tether_os::procfs::read_stat(pid).map_or(0, |s| s.start_ticks),
    };
    tether_broker::broker::containment::cgroup_name(request, &identity)
}

/// Set to `off` in a front end's environment: its broker is always `tether broker` exec'd,
/// never a fork of the front end (for tests of that path).
pub const BROKER_FORK_ENV: &str = "TETHER_BROKER_FORK";

/// A broker [`fork`] started: our unreaped child, its launch request in its stdin already.
pub struct ForkedBroker {
    child: BrokerChild,
    requests: OwnedFd,
    events: OwnedFd,
    custody: Option<OwnedFd>,
    expected_cgroup: Option<String>,
}

impl ForkedBroker {
    pub fn pid(&self) -> i32 {
        self.child.pid
    }
}

/// Starts the broker for `request` as a fork of this process rather than an exec of
/// `tether broker`: the same code, already loaded, so a brokered command skips a second
/// `execve`, the loader's relocations of a large binary and a runtime's start (about a
/// third of what the shell shim cost beyond the shell). The child takes the descriptors the
/// exec'd broker takes, at the same numbers, closes every other one, marks itself a broker
/// (`TETHER_BROKER`, its token) and runs [`tether_broker::broker::main`]; what it holds and what it
/// journals are the exec'd broker's. Its `/proc/PID/environ` is its front end's, so the
/// token that proves it to `control::verify` is the name of a memfd it holds (as every
/// broker does).
///
/// [`Fork::Declined`] (the handover given back) when this process may not fork one, and
/// the caller execs one as before:
/// `TETHER_BROKER_FORK=off`, more than one thread (a fork has only the forking thread, and
/// another's locks would stay held in the copy for ever), or a launch request too long to
/// wait in the pipe. Call it before any runtime or signal handler is made: the child makes
/// its own, and must share neither. `child_mask` is the signal mask the broker runs with
/// (the caller may block signals across the fork until its own handlers are in place).
pub fn fork(
    request: &LaunchRequest,
    journal: &JournalDir,
    handover: Handover,
    child_mask: &nix::sys::signal::SigSet,
) -> io::Result<Fork> {
    if std::env::var_os(BROKER_FORK_ENV).is_some_and(|v| v == "off") || !single_threaded() {
        return Ok(Fork::Declined(handover));
    }
    let launch = launch_line(request)?;
    let (requests_read, requests_write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
    // Written before the fork, so that no child exists when it cannot be: it must fit.
    if !written_at_once(&requests_write, &launch)? {
        return Ok(Fork::Declined(handover));
    }
    let (events_read, events_write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
    let (journal_fd, custody) = journal_fds(journal)?;
    let token = broker_token()?;
    {
        use std::io::Write;
        // Nothing buffered of ours may be written twice, by the copy too.
        let _ = std::io::stdout().flush();
        let _ = std::io::stderr().flush();
    }
    // SAFETY: this process has a single thread (checked above), so the child's copy holds
    // no lock another thread took; it never returns into the caller's code (it exits).
    match unsafe { nix::unistd::fork() }? {
        nix::unistd::ForkResult::Child => {
            let code = become_broker(
                [requests_read, events_write],
                journal_fd,
                handover,
                &token,
                child_mask,
            );
            std::process::exit(code)
        }
        nix::unistd::ForkResult::Parent { child } => {
            drop((requests_read, events_write, journal_fd, handover));
            let pid = child.as_raw();
            Ok(Fork::Started(ForkedBroker {
                child: BrokerChild::new(pid),
                requests: requests_write,
                events: events_read,
                custody: Some(custody),
                expected_cgroup: Some(expected_cgroup(request, pid)),
            }))
        }
    }
}

/// How [`fork`] went, short of an error.
pub enum Fork {
    Started(ForkedBroker),
    /// Not forked (see [`fork`]): the handover back, for an exec'd broker.
    Declined(Handover),
}

/// Whether this process runs a single thread (`num_threads`, field 20 of its `stat`).
fn single_threaded() -> bool {
    let pid = std::process::id() as i32;
    tether_os::procfs::read_stat_text(pid, &mut vec![0u8; 1024])
        .and_then(|stat| tether_os::procfs::parse_activity(&stat, ""))
        .is_some_and(|activity| activity.threads == 1)
}

/// Writes `line` whole into the empty pipe `to` without waiting, raising the pipe's size
/// if it must; false (nothing written) when it cannot hold it.
fn written_at_once(to: &OwnedFd, line: &[u8]) -> io::Result<bool> {
    use nix::fcntl::{FcntlArg, fcntl};
    let size = fcntl(to, FcntlArg::F_GETPIPE_SZ)? as usize;
    if line.len() > size && fcntl(to, FcntlArg::F_SETPIPE_SZ(line.len() as i32)).is_err() {
        return Ok(false);
    }
    // An empty pipe of at least `line.len()` bytes takes it in one write.
    let written = nix::unistd::write(to, line)?;
    Ok(written == line.len())
}

/// The forked child, from fork to the broker's exit: what the exec'd broker's `pre_exec`
/// and exec gave it (its own session, the pipes as stdin and stdout, the handed-over
/// descriptors at their numbers, nothing else open, the broker's marks), then the broker.
fn become_broker(
    [requests, events]: [OwnedFd; 2],
    journal_fd: OwnedFd,
    handover: Handover,
    token: &str,
    mask: &nix::sys::signal::SigSet,
) -> i32 {
    let placed = (|| -> io::Result<()> {
        nix::unistd::setsid()?;
        for (fd, target) in [(&requests, 0), (&events, 1)] {
            // 0 and 1 are this copy's to give a new meaning.
            dup_to(fd, target)?;
        }
        let handed = handover.with_journal(&journal_fd);
        let missing: Vec<RawFd> = (JOURNAL_FD..)
            .zip(&handed)
            .filter(|(_, fd)| fd.is_none())
            .map(|(target, _)| target)
            .collect();
        pass_fds(handed, JOURNAL_FD)?;
        // A number not handed over holds nothing: the broker would take a descriptor of the
        // front end's found there for one handed over.
        for target in missing {
            let _ = nix::unistd::close(target);
        }
        // What exec and close-on-exec would have closed: every other descriptor of the
        // front end's (its copies of these, its session's directory, its custody lock).
        // libc: nix has no close_range.
        // SAFETY: closes descriptors only; the ones above are forgotten, never used again.
        let closed = unsafe {
            libc::syscall(
                libc::SYS_close_range,
                tether_broker::broker::STDIN_FD + 1,
                u32::MAX,
                0,
            )
        };
        std::mem::forget((requests, events, journal_fd, handover));
        if closed < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    })();
    if let Err(err) = placed {
        eprintln!("tether broker: cannot take the descriptors its front end handed over: {err}");
        return 1;
    }
    // SAFETY: this process has one thread (the fork's), so nothing reads the environment
    // while it is changed.
    unsafe {
        std::env::set_var(BROKER_ENV, "1");
        std::env::set_var(BROKER_TOKEN_ENV, token);
    }
    let _ =
        nix::sys::signal::sigprocmask(nix::sys::signal::SigmaskHow::SIG_SETMASK, Some(mask), None);
    name_in_argv_area();
    tether_broker::broker::main()
}

/// What `ps`, `top` and `pstree` show of the forked broker: `tether broker`, as of an exec'd
/// one, rather than its front end's command line (`bash -c CMD`, read as a second copy of
/// the command). The kernel reads `/proc/PID/cmdline` from the argv area of the process's
/// memory ([`arg_start`, `arg_end`) of `/proc/self/stat`), which the name overwrites, the
/// rest zeroed, as setproctitle(3) does; an area too short to hold it is left as it is.
/// Nothing of the broker's reads its arguments after this.
fn name_in_argv_area() {
    const NAME: &[u8] = b"tether\0broker\0";
    let Some((start, end)) = argv_area() else {
        return;
    };
    let Some(len) = end.checked_sub(start).filter(|&len| len >= NAME.len()) else {
        return;
    };
    // SAFETY: [start, end) is this process's own argv area, as the kernel reports it: mapped
    // and writable (the initial stack), read afterwards only by the kernel, for cmdline.
    unsafe {
        let area = std::slice::from_raw_parts_mut(start as *mut u8, len);
        area.fill(0);
        area[..NAME.len()].copy_from_slice(NAME);
    }
}

/// `arg_start` and `arg_end` (fields 48 and 49) of `/proc/self/stat`.
fn argv_area() -> Option<(usize, usize)> {
    let pid = std::process::id() as i32;
    let mut buffer = vec![0u8; 1024];
    let stat = tether_os::procfs::read_stat_text(pid, &mut buffer)?;
    // After the command name's closing parenthesis: field 3 (the state) onwards.
    let mut fields = stat.rsplit_once(')')?.1.split_whitespace().skip(48 - 3);
    let start = fields.next()?.parse().ok()?;
    let end = fields.next()?.parse().ok()?;
    Some((start, end))
}

/// Descriptors a broker takes at fixed numbers, besides its journal directory.
#[derive(Default)]
pub struct Handover {
    /// The write ends of the copy pipes, stdout's then stderr's ([`MIRROR_FDS`](tether_broker::broker::mirror::MIRROR_FDS)), when the
    /// request asks for a mirror.
    pub mirror: Option<[OwnedFd; 2]>,
    /// The front end's stdin ([`STDIN_FD`](tether_broker::broker::STDIN_FD)), when the request says `stdin: inherit`.
    pub stdin: Option<OwnedFd>,
}

impl Handover {
    /// What the broker takes at [`JOURNAL_FD`] onwards: `journal`, then these.
    fn with_journal<'a>(&'a self, journal: &'a OwnedFd) -> [Option<&'a OwnedFd>; 4] {
        let [out, err] = self
            .mirror
            .as_ref()
            .map_or([None, None], |[o, e]| [Some(o), Some(e)]);
        [Some(journal), out, err, self.stdin.as_ref()]
    }
}

/// In a child between fork and exec: makes each given descriptor available at its target
/// number (3, 4, 5, 6), inherited by exec. Each is first copied above every target, so no
/// source is overwritten by an earlier target. No allocation: this runs after fork. rustix,
/// whose `F_DUPFD_CLOEXEC` hands back an owned descriptor (nix's a bare number).
fn pass_fds(fds: [Option<&OwnedFd>; 4], first_target: RawFd) -> io::Result<()> {
    let mut high: [Option<OwnedFd>; 4] = [None, None, None, None];
    for (slot, fd) in high.iter_mut().zip(fds) {
        if let Some(fd) = fd {
            *slot = Some(rustix::io::fcntl_dupfd_cloexec(fd, first_target + 16)?);
        }
    }
    for (i, fd) in high.iter().enumerate() {
        if let Some(fd) = fd {
            dup_to(fd, first_target + i as RawFd)?;
        }
    }
    Ok(())
}

/// In a child after fork: makes `target` a copy of `fd` (dup2, which clears close-on-exec
/// on it), never closing it.
fn dup_to(fd: &OwnedFd, target: RawFd) -> io::Result<()> {
    // SAFETY: the target is a descriptor number this child gives a new meaning to; it is
    // never closed here (forgotten below).
    let mut target = unsafe { OwnedFd::from_raw_fd(target) };
    let result = rustix::io::dup2(fd, &mut target);
    std::mem::forget(target);
    Ok(result?)
}

impl BrokerLine {
    /// A line as it was framed, read from the broker's stdout or its control socket.
    pub(crate) fn from_frame(frame: Frame) -> BrokerLine {
        match frame {
            Frame::Line(raw) => {
                let event = serde_json::from_slice(&raw).map_err(|e| e.to_string());
                BrokerLine { raw, event }
            }
            Frame::TooLong { len } => BrokerLine {
                raw: Vec::new(),
                event: Err(format!(
                    "a {len}-byte line from the broker exceeds the limit"
                )),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_128_random_bits_in_hex_and_never_repeat() {
        let tokens: std::collections::HashSet<String> =
            (0..64).map(|_| broker_token().expect("a token")).collect();
        assert_eq!(tokens.len(), 64);
        for token in &tokens {
            assert_eq!(token.len(), 32, "{token}");
            assert!(token.bytes().all(|b| b.is_ascii_hexdigit()), "{token}");
        }
    }

    /// More requests than a pipe holds, posted to a reader that starts late: what the
    /// posts could not write goes while the front end waits for a line, with no request
    /// after them to carry it.
    #[tokio::test]
    async fn posted_requests_that_did_not_fit_go_while_waiting_for_a_line() {
        let input = Request::Input {
            data: vec![b'x'; tether_protocol::protocol::MAX_INPUT_CHUNK],
        };
        let line_len = encode_line(&input).expect("a request").len();
        let requests = 64;
        let total = requests * line_len;
        let child = Command::new("sh")
            .args(["-c", &format!("sleep 0.2; head -c {total} | wc -c")])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("run sh");
        let mut reader = BrokerProcess::talking_to(child, None, None).expect("the pipes");
        for _ in 0..requests {
            reader.wire.post(&input).expect("post");
        }
        assert!(
            !reader.wire.outbox.is_empty(),
            "{total} bytes fill the pipe"
        );
        let line =
            tokio::time::timeout(std::time::Duration::from_secs(30), reader.wire.next_line())
                .await
                .expect("every request reaches the reader")
                .expect("its count");
        assert_eq!(String::from_utf8_lossy(&line.raw).trim(), total.to_string());
        let _ = reader.child.wait();
    }
}
