//! A `tether broker` started directly by the test, which plays the front end: it writes
//! request lines to the broker's stdin and reads its events from stdout.

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use tether::protocol::{Event, EventKind, PROTOCOL_VERSION};

use super::{BIN, DEADLINE, TAG_VAR, TestEnv, journal, procs};

pub struct DirectBroker {
    pub child: Child,
    /// Kept open for the broker's whole life: end of file on it means "parent lost".
    stdin: Option<ChildStdin>,
    events: Receiver<Result<Event, String>>,
    /// Every event read so far, in order.
    pub seen: Vec<Event>,
    pub journal_dir: PathBuf,
    tag: String,
}

impl DirectBroker {
    /// Starts `tether broker` as a child of the calling thread. `id` names its journal
    /// directory, `sessions/direct/<id>/`.
    pub fn spawn(env: &TestEnv, id: &str) -> DirectBroker {
        DirectBroker::spawn_with_env(env, id, &[])
    }

    /// [`DirectBroker::spawn`] with these variables in the broker's environment.
    pub fn spawn_with_env(env: &TestEnv, id: &str, vars: &[(&str, &str)]) -> DirectBroker {
        let stderr = File::create(env.path(&format!("broker-{id}.stderr")))
            .expect("create the broker's stderr capture");
        // The front end's part: the journal directory is made private and handed over as
        // descriptor 3.
        let journal_dir = env.state_dir().join("sessions/direct").join(id);
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&journal_dir)
            .expect("create the journal directory");
        for dir in ["", "sessions", "sessions/direct"] {
            let path = env.state_dir().join(dir);
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700))
                .expect("make the state directory private");
        }
        let dir = File::open(&journal_dir).expect("open the journal directory");
        let mut command = Command::new(BIN);
        command
            .arg("broker")
            .env("TETHER_BROKER", "1")
            .env(TAG_VAR, &env.tag)
            .envs(vars.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr);
        // SAFETY: dup2 and fcntl are async-signal-safe; `dir` stays open until spawn returns.
        unsafe {
            command.pre_exec(move || {
                // dup2 onto itself would keep close-on-exec: clear it instead.
                let done = if dir.as_raw_fd() == 3 {
                    libc::fcntl(3, libc::F_SETFD, 0)
                } else {
                    libc::dup2(dir.as_raw_fd(), 3)
                };
                if done < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let mut child = command.spawn().expect("start tether broker");
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("the broker's stdout is piped");
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            let mut line = Vec::new();
            loop {
                line.clear();
                match reader.read_until(b'\n', &mut line) {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {}
                }
                let parsed = serde_json::from_slice::<Event>(&line)
                    .map_err(|err| format!("{err}: {}", String::from_utf8_lossy(&line).trim_end()));
                if tx.send(parsed).is_err() {
                    return;
                }
            }
        });
        DirectBroker {
            child,
            stdin,
            events: rx,
            seen: Vec::new(),
            journal_dir,
            tag: env.tag.clone(),
        }
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// A launch request for `argv`, owned by this test process; fields can be added.
    pub fn launch_request(&self, name: &str, argv: &[&str], grace_ms: u64) -> serde_json::Value {
        serde_json::json!({
            "type": "launch",
            "v": PROTOCOL_VERSION,
            "name": name,
            "command": { "argv": argv },
            "journal_dir": self.journal_dir,
            "parent_pid": std::process::id(),
            "grace_ms": grace_ms,
        })
    }

    /// [`DirectBroker::launch_request`] as a line.
    pub fn launch_line(&self, name: &str, argv: &[&str], grace_ms: u64) -> String {
        self.launch_request(name, argv, grace_ms).to_string()
    }

    /// Closes the broker's stdin, as a front end that went away would.
    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// Writes raw bytes to the broker's stdin.
    pub fn send_raw(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("the broker's stdin is open");
        stdin.write_all(bytes).expect("write to the broker");
        stdin.flush().expect("flush to the broker");
    }

    /// Writes one request line (a newline is added).
    pub fn send(&mut self, line: &str) {
        self.send_raw(format!("{line}\n").as_bytes());
    }

    /// The next event, or `None` when the broker closed its stdout. Fails past `DEADLINE`.
    fn next(&mut self, deadline: Instant, what: &str) -> Option<Event> {
        let left = deadline.saturating_duration_since(Instant::now());
        match self.events.recv_timeout(left) {
            Ok(Ok(event)) => {
                self.seen.push(event.clone());
                Some(event)
            }
            Ok(Err(line)) => self.fail(&format!(
                "the broker sent a line that is not an event: {line}"
            )),
            Err(RecvTimeoutError::Disconnected) => None,
            Err(RecvTimeoutError::Timeout) => {
                self.fail(&format!("timed out after {DEADLINE:?} waiting for {what}"))
            }
        }
    }

    /// Reads events until one matches `wanted`, and returns it.
    pub fn wait_for(&mut self, what: &str, mut wanted: impl FnMut(&EventKind) -> bool) -> Event {
        let deadline = Instant::now() + DEADLINE;
        loop {
            match self.next(deadline, what) {
                Some(event) if wanted(&event.kind) => return event,
                Some(_) => {}
                None => self.fail(&format!("the broker closed its output before {what}")),
            }
        }
    }

    /// Reads events until `close`, then until end of output; returns every event seen.
    pub fn wait_close(&mut self) -> Vec<Event> {
        self.wait_for("close", |k| matches!(k, EventKind::Close { .. }));
        let deadline = Instant::now() + DEADLINE;
        while self
            .next(deadline, "the end of the broker's output")
            .is_some()
        {}
        self.seen.clone()
    }

    /// Waits for the broker to exit (within `DEADLINE`) and returns its exit code.
    pub fn wait_exit(&mut self) -> i32 {
        let deadline = Instant::now() + DEADLINE;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                self.stdin = None;
                return status.code().unwrap_or(-1);
            }
            if Instant::now() >= deadline {
                self.fail("the broker to exit");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Failure with cleanup: the broker and everything tagged are killed by pid.
    fn fail(&mut self, why: &str) -> ! {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let killed = procs::kill_tagged(&self.tag);
        let failures: Vec<String> = self
            .seen
            .iter()
            .filter_map(|e| match &e.kind {
                EventKind::BrokerFailure { code, message, .. } => {
                    Some(format!("{code}: {message}"))
                }
                _ => None,
            })
            .collect();
        panic!(
            "{why}\nevents so far: {:?}\nbroker failures: {failures:?}\nkilled: {killed:?}",
            journal::kinds(&self.seen)
        );
    }
}

impl Drop for DirectBroker {
    fn drop(&mut self) {
        if !matches!(self.child.try_wait(), Ok(Some(_))) {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}
