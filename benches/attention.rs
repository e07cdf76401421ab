//! Attention benchmarks: `cargo bench --bench attention`. Prints figures; asserts nothing.
//!
//! 1. `idle`: 100 idle `tether exec -- sleep 120` (each given a pipe as stdin, so that the
//!    probe looks at what every sleeping process waits in) with attention on (the defaults)
//!    and then off (`[attention] enabled = false`): their brokers' CPU ticks at rest, over
//!    20 s from 32 s after start (once the tree walks have backed off), as % of one core.
//! 2. `sample`: the detection's cost per sample of a 1,000-process tree, the walk's own cost
//!    beside it: every process blocked reading the command's input, then every process
//!    asleep elsewhere (`sleep`: the worst case, each one's system call is read and none is
//!    the one waiting). Median of 20 samples each.
//! 3. `news`: what the TUI pays each time it looks for attention marks to notify about, over
//!    a session of 10,000 commands, every one with a mark already told. Median of 20 looks.
//!
//! `TETHER_CGROUP=off cargo bench --bench attention idle` measures the /proc path.

use std::os::fd::AsFd;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tether::attention::detector::{Detector, Sample};
use tether::attention::probe;
use tether::procfs;
use tether::protocol::AttentionRequest;

const TETHER: &str = env!("CARGO_BIN_EXE_tether");

fn main() {
    let filter: Option<String> = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let wanted = |name: &str| filter.as_deref().is_none_or(|f| name.contains(f));
    if wanted("sample") {
        sample_cost(1000);
    }
    if wanted("news") {
        news_cost(10_000);
    }
    if wanted("idle") {
        for on in [true, false] {
            let state = tempfile::tempdir().expect("temporary directory");
            idle(state.path(), 100, on);
        }
    }
}

fn news_cost(count: usize) {
    use tether::config::CommandConfig;
    use tether::model::command::AttentionMark;
    use tether::model::{CommandState, Mode, Model, Status};
    use tether::notify::AttentionNews;
    use tether::protocol::{AttentionKind, CommandSpec};
    let commands = (0..count)
        .map(|i| {
            let config = CommandConfig::new("build", CommandSpec::Shell("make".into()));
            let mut command = CommandState::new(config);
            command.journal_dir = Some(format!("/s/x/{i:05}-c").into());
            command.status = Status::FailedToStart;
            command.mark_attention(AttentionMark {
                kind: AttentionKind::Failed,
                detail: "exit 1".into(),
                at_ms: 10 + i as u64,
                active: true,
            });
            command
        })
        .collect();
    let model = Model {
        session_id: "s".into(),
        session_dir: "/state/sessions/s".into(),
        started_ms: 0,
        commands,
        mode: Mode::Live,
    };
    let mut news = AttentionNews::new(0);
    assert!(
        news.look(&model, 100_000).is_some(),
        "every mark is news once"
    );
    let looks: Vec<f64> = (0..20)
        .map(|_| {
            let started = Instant::now();
            assert!(news.look(&model, 200_000).is_none());
            started.elapsed().as_secs_f64() * 1000.0
        })
        .collect();
    println!(
        "== a look over {count} commands with told marks: median {:.2} ms",
        median(looks)
    );
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn cpu_ticks(pid: i32) -> u64 {
    procfs::read_stat(pid).map_or(0, |s| s.cpu_ticks)
}

fn idle(state: &Path, count: usize, attention: bool) {
    let config = state.join("config");
    std::fs::create_dir_all(config.join("tether")).expect("config dir");
    let text = if attention {
        ""
    } else {
        "[attention]\nenabled = false\n"
    };
    std::fs::write(config.join("tether/config.toml"), text).expect("config");
    println!(
        "== {count} idle commands, attention {}",
        if attention { "on" } else { "off" }
    );
    let mut execs: Vec<Child> = (0..count)
        .map(|_| {
            Command::new(TETHER)
                .args(["exec", "--state-dir"])
                .arg(state.join("state"))
                .args(["--", "sleep", "120"])
                .env("XDG_CONFIG_HOME", &config)
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("run tether exec")
        })
        .collect();
    let exec_pids: Vec<i32> = execs.iter().map(|c| c.id() as i32).collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    let brokers = loop {
        let procs = procfs::all_processes();
        let brokers: Vec<i32> = procs
            .iter()
            .filter(|p| exec_pids.contains(&p.ppid))
            .map(|p| p.pid)
            .collect();
        let sleeps = procs.iter().filter(|p| brokers.contains(&p.ppid)).count();
        if sleeps >= count {
            break brokers;
        }
        assert!(Instant::now() < deadline, "the commands did not start");
        std::thread::sleep(Duration::from_millis(50));
    };
    let total = |pids: &[i32]| pids.iter().map(|&p| cpu_ticks(p)).sum::<u64>();
    std::thread::sleep(Duration::from_secs(32));
    let b0 = total(&brokers);
    let window = Duration::from_secs(20);
    std::thread::sleep(window);
    let b1 = total(&brokers);
    let hz = procfs::clock_ticks_per_second().max(1) as f64;
    println!(
        "at rest (from 32 s): brokers {} ticks in {}s = {:.2} % of one core",
        b1 - b0,
        window.as_secs(),
        (b1 - b0) as f64 / hz / window.as_secs_f64() * 100.0
    );
    for exec in &mut execs {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(exec.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
    }
    for exec in &mut execs {
        let _ = exec.wait();
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while brokers.iter().any(|&b| !procfs::is_gone(b)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Starts `count` children of one `sh`, each running `program` on `fd 3` as its stdin.
fn tree(count: usize, program: &str, input: impl AsFd) -> Child {
    let script = format!(
        "exec 0<&3; i=0; while [ $i -lt {count} ]; do {program} <&3 & i=$((i+1)); done; wait"
    );
    let fd = input.as_fd().try_clone_to_owned().expect("dup the input");
    let mut command = Command::new("sh");
    command.args(["-c", &script]).stdin(Stdio::null());
    let raw = std::os::fd::AsRawFd::as_raw_fd(&fd);
    // SAFETY: dup2 in the child onto descriptor 3, before exec; no allocation.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut command, move || {
            if libc::dup2(raw, 3) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = command.spawn().expect("start the tree");
    drop(fd);
    child
}

fn sample_cost(count: usize) {
    let (read, write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).expect("pipe");
    let input = probe::input_file(&read).expect("the pipe");
    for (label, program) in [
        ("blocked reading the command's input", "cat"),
        ("asleep elsewhere", "sleep 600"),
    ] {
        let mut root = tree(count, program, &read);
        let root_pid = root.id() as i32;
        let deadline = Instant::now() + Duration::from_secs(60);
        while procfs::descendants_in(&procfs::all_processes(), root_pid).len() < count {
            assert!(Instant::now() < deadline, "the tree did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        std::thread::sleep(Duration::from_millis(500));
        let thresholds = AttentionRequest::default();
        let mut detector =
            Detector::new(thresholds, procfs::clock_ticks_per_second(), Instant::now());
        let page = procfs::page_size();
        let (mut walks, mut probes, mut decides) = (Vec::new(), Vec::new(), Vec::new());
        let mut blocked = 0;
        for _ in 0..20 {
            let t = Instant::now();
            let procs = procfs::descendants_in(&procfs::all_processes(), root_pid);
            walks.push(t.elapsed().as_secs_f64() * 1000.0);
            let t = Instant::now();
            let looks = detector.wants();
            let sampled = probe::sample(&procs, &[input], looks, page);
            probes.push(t.elapsed().as_secs_f64() * 1000.0);
            blocked = sampled.iter().filter(|p| p.blocked.is_some()).count();
            let t = Instant::now();
            detector.sampled(Instant::now(), Sample::Fresh(sampled));
            decides.push(t.elapsed().as_secs_f64() * 1000.0);
            let _ = detector.take();
        }
        println!(
            "== {count} processes {label} ({blocked} seen blocked on the input): \
             walk {:.1} ms, probe {:.1} ms, detector {:.2} ms a sample (median of 20)",
            median(walks),
            median(probes),
            median(decides)
        );
        for p in procfs::descendants_in(&procfs::all_processes(), root_pid) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(p.pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        let _ = root.kill();
        let _ = root.wait();
    }
    // Held open to the end, so that every `cat` waited on it.
    drop(write);
}
