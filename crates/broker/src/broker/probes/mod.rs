//! The tries of a readiness probe, the interpreter's side of `state::ready`: the broker's
//! state asks for one ([`Output::TryReady`](super::state::Output::TryReady)), the loop
//! starts it here and polls it with everything else, and its answer goes back as
//! `Input::ReadyTried`. One try at a time, never blocking the loop:
//!
//! - `tcp`: a connection accepted (tokio's connect, no name lookup: see `target`).
//! - `http`: a minimal HTTP/1.1 GET over that connection; the status line decides (2xx).
//! - `exec`: `sh -c CMD` through a keeper (`exec.rs`), the notify command's: no child the
//!   broker's reaping, walk or stop ever takes for the command's.
//!
//! Each try is bounded by the timeout the state gives; a try still going when the probing
//! ends is given up ([`Probes::give_up`]): an `exec` try's keeper ends its shell at once and
//! is reaped when it has ended, waited for with everything else (never in the loop's way),
//! its subtree left out of walks until then.

mod exec;
pub use tether_core::readiness::{log_pattern, target};

use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use tether_core::state::TryOutcome;
use tether_protocol::protocol::{LaunchRequest, ReadyProbe};

type Try = Pin<Box<dyn Future<Output = TryOutcome>>>;

/// The most of an HTTP answer read for its status line.
const STATUS_LINE_MAX: usize = 1024;

/// A try going: a connection's (`tcp`, `http`), or a shell's under its keeper (`exec`).
enum Going {
    Connect(Try),
    Exec(exec::Run),
}

/// The try going, if any, the keepers of `exec` tries given up and not reaped yet, and what
/// an `exec` try needs of the command.
pub struct Probes {
    going: Option<(u64, Going)>,
    dying: Vec<exec::Dying>,
    shell: exec::Shell,
}

impl Probes {
    pub fn new(request: &LaunchRequest) -> Probes {
        Probes {
            going: None,
            dying: Vec::new(),
            shell: exec::Shell::new(request),
        }
    }

    /// Starts try `attempt` of `probe`, bounded by `timeout`. Never waits: an `exec` try's
    /// shell starting (its chdir, its exec) is part of the try.
    pub fn start(&mut self, attempt: u64, probe: &ReadyProbe, timeout: Duration) {
        self.give_up();
        let going = match probe {
            ReadyProbe::Tcp { host, port } => match target::ips_of(host) {
                Ok(ips) => Going::Connect(Box::pin(bounded(timeout, tcp(ips, *port)))),
                Err(err) => Going::Connect(Box::pin(std::future::ready(Err(err.to_string())))),
            },
            ReadyProbe::Http { url } => match target::http_target(url) {
                Ok(target) => Going::Connect(Box::pin(bounded(timeout, http(target)))),
                Err(err) => Going::Connect(Box::pin(std::future::ready(Err(err.to_string())))),
            },
            ReadyProbe::Exec { shell } => match self.shell.start(shell, timeout) {
                Ok(run) => Going::Exec(run),
                Err(failure) => Going::Connect(Box::pin(std::future::ready(Err(failure)))),
            },
            // Watched in the broker's state, never tried.
            ReadyProbe::Log { .. } => return,
        };
        self.going = Some((attempt, going));
    }

    /// The answer of the try going: its attempt and outcome; never resolves without one.
    /// Reaps the keepers of tries given up as they end, meanwhile.
    pub async fn answer(&mut self) -> (u64, TryOutcome) {
        std::future::poll_fn(|cx| {
            self.dying
                .retain_mut(|dying| dying.poll_reaped(cx).is_pending());
            let Some((attempt, going)) = self.going.as_mut() else {
                return Poll::Pending;
            };
            let outcome = match going {
                Going::Connect(attempt_try) => attempt_try.as_mut().poll(cx),
                Going::Exec(run) => run.poll_outcome(cx),
            };
            let Poll::Ready(outcome) = outcome else {
                return Poll::Pending;
            };
            let attempt = *attempt;
            self.going = None;
            Poll::Ready((attempt, outcome))
        })
        .await
    }

    /// The probing ended (ready, given up, the command ended or is stopped): the try going
    /// is dropped; an `exec` try's keeper ends its shell and all it started, and is reaped
    /// by [`answer`](Probes::answer) once it has.
    pub fn give_up(&mut self) {
        if let Some((_, Going::Exec(run))) = self.going.take() {
            self.dying.extend(run.give_up());
        }
    }

    /// The keepers of `exec` tries, going or given up and not reaped yet: not the
    /// command's, never in its tree.
    pub fn keepers(&self) -> Vec<i32> {
        let going = match &self.going {
            Some((_, Going::Exec(run))) => Some(run.keeper()),
            _ => None,
        };
        going
            .into_iter()
            .chain(self.dying.iter().map(exec::Dying::keeper))
            .collect()
    }
}

#[cfg(test)]
mod tests;

/// The request's probe as the broker can use it: a `ready_log` pattern compiled, an `http`
/// URL or a `tcp` host read; a message saying what is wrong otherwise.
pub fn check(request: &LaunchRequest) -> Result<Option<regex::bytes::Regex>, String> {
    let Some(ready) = request.ready.as_ref() else {
        return Ok(None);
    };
    match &ready.probe {
        ReadyProbe::Log { pattern } => log_pattern(pattern)
            .map(Some)
            .map_err(|err| format!("ready_log: {err}")),
        ReadyProbe::Http { url } => target::http_target(url)
            .map(|_| None)
            .map_err(|err| format!("ready_http: {err}")),
        ReadyProbe::Tcp { host, .. } => target::ips_of(host)
            .map(|_| None)
            .map_err(|err| format!("ready_tcp: {err}")),
        ReadyProbe::Exec { .. } => Ok(None),
    }
}

async fn bounded(timeout: Duration, attempt: impl Future<Output = TryOutcome>) -> TryOutcome {
    tokio::time::timeout(timeout, attempt)
        .await
        .unwrap_or_else(|_| Err("timed out".into()))
}

/// A connection to `port` on the first of `ips` that accepts one (`localhost` is 127.0.0.1,
/// then ::1); else the first's failure.
async fn connect(ips: &[IpAddr], port: u16) -> Result<(TcpStream, SocketAddr), String> {
    let mut first = None;
    for &ip in ips {
        let address = SocketAddr::new(ip, port);
        match TcpStream::connect(address).await {
            Ok(stream) => return Ok((stream, address)),
            Err(err) => {
                first.get_or_insert(failure(err));
            }
        }
    }
    Err(first.unwrap_or_else(|| "no address to connect to".into()))
}

async fn tcp(ips: Vec<IpAddr>, port: u16) -> TryOutcome {
    let (_, address) = connect(&ips, port).await?;
    Ok(format!("connected to {address}"))
}

async fn http(target: target::HttpTarget) -> TryOutcome {
    let (mut stream, _) = connect(&target.ips, target.port).await?;
    let request = format!(
        "GET {} HTTP/1.1\r\nHost: {}\r\nUser-Agent: tether-ready\r\nAccept: */*\r\nConnection: close\r\n\r\n",
        target.path, target.authority
    );
    stream
        .write_all(request.as_bytes())
        .await
        .map_err(failure)?;
    let mut answer = Vec::with_capacity(256);
    let mut buf = [0u8; 256];
    let line = loop {
        if let Some(end) = memchr::memchr(b'\n', &answer) {
            break &answer[..end];
        }
        if answer.len() >= STATUS_LINE_MAX {
            return Err("no HTTP status line".into());
        }
        let n = stream.read(&mut buf).await.map_err(failure)?;
        if n == 0 {
            if answer.is_empty() {
                return Err("connection closed without an answer".into());
            }
            break &answer[..];
        }
        answer.extend_from_slice(&buf[..n]);
    };
    match tether_core::readiness::status_code(line) {
        Some(code) if (200..300).contains(&code) => Ok(format!("HTTP {code}")),
        Some(code) => Err(format!("HTTP {code}")),
        None => Err("no HTTP status line".into()),
    }
}

/// A failed connection in the words the journal gives: `connection refused`, not an errno.
fn failure(err: io::Error) -> String {
    match err.kind() {
        io::ErrorKind::ConnectionRefused => "connection refused".into(),
        io::ErrorKind::ConnectionReset => "connection reset".into(),
        io::ErrorKind::TimedOut => "timed out".into(),
        _ => err.to_string(),
    }
}
