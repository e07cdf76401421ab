//! What the live OTLP export costs (issue 27), against the test receiver
//! (`tests/common/otlp_receiver.rs`, in this process):
//!
//! - a backlog of 10,000 ended commands (one session's journal written straight to disk:
//!   copies of the `every-kind` fixture's `01-ok`) sent by `tether export --follow --once`:
//!   its wall time and peak resident set (goals: at most 5 s and 64 MiB; `VmHWM` polled
//!   every 5 ms, see [`watch_peak`]);
//! - the follower at rest over 300 finished sessions: the CPU ticks (utime + stime) it uses
//!   in 20 s once its first scan has sent everything (goal: 0).
//!
//! `cargo bench --bench otlp_follow`; `TETHER_BENCH_QUICK=1` runs a tenth of each (1,000
//! commands, 30 sessions, 5 s). `TETHER_BENCH_BIN` measures another tether binary. The state
//! directory is in `TMPDIR` (a disk, not tmpfs, unless told otherwise: each line says which),
//! and each figure comes with the load average.

#[path = "../tests/common/otlp_receiver.rs"]
#[allow(dead_code)]
mod otlp_receiver;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use otlp_receiver::Receiver;

/// A scratch directory with a state dir and a config dir, on `TMPDIR`'s file system.
struct Scratch {
    dir: tempfile::TempDir,
}

impl Scratch {
    fn new() -> Scratch {
        let dir = tempfile::Builder::new()
            .prefix("tether-bench-otlp-")
            .tempdir()
            .expect("create a temp dir");
        fs::create_dir_all(dir.path().join("state/sessions")).expect("create the state dir");
        Scratch { dir }
    }

    fn state(&self) -> PathBuf {
        self.dir.path().join("state")
    }

    /// `tether --state-dir STATE export --follow --endpoint URL ARGS`, with a config dir of
    /// its own and none of the runner's OpenTelemetry variables.
    fn follower(&self, bin: &Path, endpoint: &str, args: &[&str]) -> Command {
        let mut command = Command::new(bin);
        command
            .arg("--state-dir")
            .arg(self.state())
            .args(["export", "--follow", "--endpoint", endpoint])
            .args(args)
            .env("XDG_CONFIG_HOME", self.dir.path().join("config"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        for (name, _) in std::env::vars_os() {
            if name.to_string_lossy().starts_with("OTEL_") {
                command.env_remove(name);
            }
        }
        command
    }

    /// A finished session `id` of `commands` copies of the fixture's commands `templates`, in
    /// turn, each `command.json` naming its own place.
    fn write_session(&self, id: &str, templates: &[&str], commands: usize) {
        let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/every-kind");
        let dir = self.state().join("sessions").join(id);
        fs::create_dir_all(&dir).expect("create a session dir");
        let mut info: Value =
            serde_json::from_slice(&fs::read(fixture.join("session.json")).unwrap()).unwrap();
        info["id"] = Value::from(id);
        fs::write(dir.join("session.json"), serde_json::to_vec(&info).unwrap()).unwrap();
        let templates: Vec<Template> = templates
            .iter()
            .map(|name| {
                let from = fixture.join(name);
                let request: Value =
                    serde_json::from_slice(&fs::read(from.join("command.json")).unwrap()).unwrap();
                let files = fs::read_dir(&from)
                    .unwrap()
                    .map(|e| e.unwrap().path())
                    .filter(|p| p.file_name().is_some_and(|n| n != "command.json"))
                    .map(|p| (PathBuf::from(p.file_name().unwrap()), fs::read(&p).unwrap()))
                    .collect();
                let short = name.split_once('-').map_or(*name, |(_, n)| n).to_owned();
                Template {
                    short,
                    request,
                    files,
                }
            })
            .collect();
        for n in 1..=commands {
            let Template {
                short,
                request,
                files,
            } = &templates[(n - 1) % templates.len()];
            let name = format!("{n:02}-{short}");
            let at = dir.join(&name);
            fs::create_dir(&at).expect("create a command dir");
            let mut request = request.clone();
            request["journal_dir"] = Value::from(at.to_string_lossy().as_ref());
            request["session"]["id"] = Value::from(id);
            request["session"]["command"] = Value::from(name.as_str());
            request["session"]["state_dir"] = Value::from(self.state().to_string_lossy().as_ref());
            fs::write(
                at.join("command.json"),
                serde_json::to_vec(&request).unwrap(),
            )
            .unwrap();
            for (file, bytes) in files {
                fs::write(at.join(file), bytes).unwrap();
            }
        }
    }
}

/// A fixture command to copy: its short name, its request, its other files.
struct Template {
    short: String,
    request: Value,
    files: Vec<(PathBuf, Vec<u8>)>,
}

/// The file system type as `stat -f` names it, and the load average: where a figure was
/// measured.
fn place(path: &Path) -> String {
    let fs_type = Command::new("stat")
        .args(["-f", "-c", "%T"])
        .arg(path)
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_else(|| "?".into());
    format!("state dir on {fs_type}, load {}", load())
}

fn load() -> String {
    fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

/// Polls the peak resident set (`VmHWM`) of the running child `pid` every 5 ms until it is
/// gone; the largest seen, in bytes. Read from /proc, not from `wait4`'s `ru_maxrss`: the
/// kernel folds the memory of the process that exec'd into that figure, and a child spawned
/// with vfork (as `Command` does) execs on the parent's memory, so it would report this
/// benchmark's own resident set (the receiver's decoded spans) when that is larger. Only
/// readings after the exec (its /proc `exe` is the tether binary) count, for the same reason.
fn watch_peak(pid: u32, bin: &Path) -> std::thread::JoinHandle<u64> {
    let bin = bin.canonicalize().unwrap_or_else(|_| bin.to_path_buf());
    std::thread::spawn(move || {
        let mut peak = 0;
        loop {
            let Ok(status) = fs::read_to_string(format!("/proc/{pid}/status")) else {
                return peak;
            };
            let exe = fs::read_link(format!("/proc/{pid}/exe")).ok();
            let hwm = status
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok());
            match hwm {
                Some(kib) if exe.as_deref() == Some(bin.as_path()) => peak = peak.max(kib * 1024),
                Some(_) => {}
                // A zombie has no memory left to read.
                None => return peak,
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    })
}

/// Waits for `child` and gives its wait status.
fn wait_status(child: &mut Child) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    child.wait().expect("wait for the follower").into_raw()
}

/// utime + stime of `pid`, in clock ticks (/proc/PID/stat fields 14 and 15).
fn cpu_ticks(pid: u32) -> u64 {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).expect("read the follower's stat");
    // The command name may hold spaces; the fields after it are plain.
    let rest = &stat[stat.rfind(')').expect("a stat line") + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3 (state): utime is field 14, stime 15.
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

fn wait_for(what: &str, patience: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + patience;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn backlog(bin: &Path, commands: usize) {
    let scratch = Scratch::new();
    scratch.write_session("bench-backlog", &["01-ok"], commands);
    let receiver = Receiver::start();
    let started = Instant::now();
    let mut child = scratch
        .follower(bin, &receiver.endpoint(), &["--once"])
        .spawn()
        .expect("start tether export --follow --once");
    let stderr = child.stderr.take();
    let peak = watch_peak(child.id(), bin);
    let status = wait_status(&mut child);
    let peak = peak.join().expect("the peak's watcher");
    let took = started.elapsed();
    let mut said = String::new();
    if let Some(mut stderr) = stderr {
        use std::io::Read;
        let _ = stderr.read_to_string(&mut said);
    }
    assert_eq!(status, 0, "--once did not exit 0: {said}");
    let spans = receiver.distinct_spans();
    let doubled = receiver.duplicates().len();
    let requests = receiver.received().requests.len();
    assert!(
        spans > commands,
        "{spans} spans arrived of {commands} commands and the root"
    );
    println!(
        "backlog of {commands} commands: sent in {:.2} s (goal <= 5 s), peak RSS {:.1} MiB \
         (goal <= 64 MiB); {spans} spans in {requests} requests, {doubled} doubled; {}",
        took.as_secs_f64(),
        peak as f64 / (1024.0 * 1024.0),
        place(&scratch.state())
    );
}

fn at_rest(bin: &Path, sessions: usize, over: Duration) {
    let scratch = Scratch::new();
    for i in 0..sessions {
        scratch.write_session(&format!("bench-rest-{i:03}"), &["01-ok", "02-fail"], 2);
    }
    let receiver = Receiver::start();
    let mut child = scratch
        .follower(bin, &receiver.endpoint(), &[])
        .stderr(Stdio::null())
        .spawn()
        .expect("start tether export --follow");
    let peak = watch_peak(child.id(), bin);
    // Its first scan is over when every command and every session's root has arrived.
    let expected = sessions * 3;
    let scan = Instant::now();
    wait_for("the first scan's spans", Duration::from_secs(300), || {
        receiver.distinct_spans() >= expected
    });
    let scanned = scan.elapsed();
    // The cursors of the last batch are written just after its answer.
    std::thread::sleep(Duration::from_secs(1));
    let before = cpu_ticks(child.id());
    std::thread::sleep(over);
    let after = cpu_ticks(child.id());
    let sent_again = receiver.distinct_spans() - expected + receiver.duplicates().len();
    // SAFETY: signalling our own child, not yet reaped.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    let status = wait_status(&mut child);
    let peak = peak.join().expect("the peak's watcher");
    println!(
        "at rest over {sessions} finished sessions: {} CPU ticks in {} s (goal 0), after a \
         first scan of {:.2} s; {sent_again} spans sent again or new; peak RSS {:.1} MiB; \
         exit status {status:#x} on SIGTERM; {}",
        after - before,
        over.as_secs(),
        scanned.as_secs_f64(),
        peak as f64 / (1024.0 * 1024.0),
        place(&scratch.state())
    );
}

fn main() {
    let bin = std::env::var_os("TETHER_BENCH_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_tether")));
    let quick = std::env::var_os("TETHER_BENCH_QUICK").is_some();
    let (commands, sessions, over) = if quick {
        (1_000, 30, Duration::from_secs(5))
    } else {
        (10_000, 300, Duration::from_secs(20))
    };
    println!("tether {}", bin.display());
    backlog(&bin, commands);
    at_rest(&bin, sessions, over);
}
