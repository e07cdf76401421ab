//! TUI benchmarks: `cargo bench --bench tui` (needs tmux; installs nothing itself — run
//! `bash scripts/bench-tui.sh` to install the peer, mprocs, first). Prints figures; asserts
//! nothing.
//!
//! 1. `seq 1 2000000` in a 200×50 tmux pane: time until the command is shown as exited,
//!    TUI CPU time and TUI peak RSS; tether and mprocs side by side.
//! 2. Idle: five sleeping commands for 10 s: TUI CPU.
//! 3. Keypress to screen change while a flood runs: median over 20 presses.
//! 4. A 1,000-process tree under one command, sampled at 1 Hz: TUI CPU over 10 s.
//! 5. `tether watch`: from starting a `tether exec` elsewhere to its row on the watch's
//!    screen, median over 15 runs; and the watch's CPU while idle.
//! 6. A fleet: 100, then 500 `sleep` commands in one TUI. The CPU the TUI and its brokers
//!    use over 20 s (from the kernel's per-thread run time, and in clock ticks), once after
//!    start-up and once at rest; then the TUI is SIGKILLed: time until every process of
//!    every command is gone.

use std::process::Command;
use std::time::{Duration, Instant};

const TETHER: &str = env!("CARGO_BIN_EXE_tether");

fn main() {
    let filter: Option<String> = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let wanted = |name: &str| filter.as_deref().is_none_or(|f| name.contains(f));
    if Command::new("tmux").arg("-V").output().is_err() {
        println!("tmux is not installed: the TUI benchmarks need it (apt-get install tmux)");
        return;
    }
    let state = tempfile::tempdir().expect("temporary directory");
    let state = state.path().display().to_string();
    if wanted("seq") {
        seq_flood(&state);
    }
    if wanted("idle") {
        idle(&state);
    }
    if wanted("keypress") {
        keypress(&state);
    }
    if wanted("tree") {
        big_tree(&state);
    }
    if wanted("watch") {
        watch(&state);
    }
    if wanted("fleet") {
        for count in [100, 500] {
            fleet(&state, count);
        }
    }
}

/// A tmux server with one 200×50 window running `command` in place of a shell.
struct Pane {
    socket: String,
}

impl Pane {
    fn start(name: &str, command: &str) -> Pane {
        let pane = Pane {
            socket: format!("tether-bench-{name}-{}", std::process::id()),
        };
        let ok = Command::new("tmux")
            .args([
                "-L",
                &pane.socket,
                "new-session",
                "-d",
                "-x",
                "200",
                "-y",
                "50",
            ])
            .arg(command)
            .env("TERM", "xterm-256color")
            .env_remove("TMUX")
            .status()
            .expect("tmux runs")
            .success();
        assert!(ok, "tmux could not start `{command}`");
        pane
    }

    fn tmux(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .args(["-L", &self.socket])
            .args(args)
            .output()
            .expect("tmux runs");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn screen(&self) -> String {
        self.tmux(&["capture-pane", "-p", "-t", "0"])
    }

    fn pid(&self) -> i32 {
        self.tmux(&["display-message", "-p", "-t", "0", "#{pane_pid}"])
            .trim()
            .parse()
            .expect("pane pid")
    }

    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "0"];
        args.extend_from_slice(keys);
        self.tmux(&args);
    }

    /// Polls the screen until `done`; returns when it became true, or None after `limit`.
    fn wait(&self, limit: Duration, done: impl Fn(&str) -> bool) -> Option<Instant> {
        let start = Instant::now();
        while start.elapsed() < limit {
            if done(&self.screen()) {
                return Some(Instant::now());
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        None
    }
}

impl Drop for Pane {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .stderr(std::process::Stdio::null())
            .status();
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// CPU seconds (user + system) a process has used so far.
fn cpu_seconds(pid: i32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let Some(after) = stat.rfind(')').map(|i| &stat[i + 2..]) else {
        return 0.0;
    };
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks: f64 = fields.get(11).and_then(|v| v.parse().ok()).unwrap_or(0.0)
        + fields.get(12).and_then(|v| v.parse().ok()).unwrap_or(0.0);
    // SAFETY: sysconf has no preconditions.
    ticks / unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64
}

fn peak_rss_mib(pid: i32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kib| kib / 1024.0)
}

fn mprocs() -> Option<String> {
    let home = std::env::var("HOME").unwrap_or_default();
    [format!("{home}/.cargo/bin/mprocs"), "mprocs".to_string()]
        .into_iter()
        .find(|p| {
            Command::new(p)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
}

fn seq_flood(state: &str) {
    println!(
        "== seq 1 2000000 in a 200x50 pane: time until the exit and the last line are on screen, TUI CPU, TUI peak RSS"
    );
    let tether = format!("{TETHER} --state-dir {state} run -c 'seq 1 2000000'");
    let figures = flood_run("tether", &tether, |s| {
        s.contains("exit 0") && s.contains("│2000000 ")
    });
    report("tether", figures);
    match mprocs() {
        Some(bin) => {
            let figures = flood_run("mprocs", &format!("{bin} 'seq 1 2000000'"), |s| {
                s.contains("DOWN (0)") && s.contains("│2000000 ")
            });
            report("mprocs", figures);
        }
        None => println!("mprocs: not installed (run scripts/bench-tui.sh); skipped"),
    }
}

fn flood_run(name: &str, command: &str, exited: impl Fn(&str) -> bool) -> Option<(f64, f64, f64)> {
    let start = Instant::now();
    let pane = Pane::start(name, command);
    let pid = pane.pid();
    let mut last_cpu = 0.0;
    let mut last_rss = 0.0;
    let deadline = Duration::from_secs(300);
    while start.elapsed() < deadline {
        last_cpu = cpu_seconds(pid).max(last_cpu);
        last_rss = peak_rss_mib(pid).max(last_rss);
        if exited(&pane.screen()) {
            return Some((start.elapsed().as_secs_f64(), last_cpu, last_rss));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

fn report(name: &str, figures: Option<(f64, f64, f64)>) {
    match figures {
        Some((secs, cpu, rss)) => println!(
            "{name:<7} time to exit {secs:6.2} s   TUI CPU {cpu:6.2} s   TUI peak RSS {rss:6.1} MiB"
        ),
        None => println!("{name:<7} did not show the command as exited within 300 s"),
    }
}

fn idle(state: &str) {
    println!("== idle: five sleeping commands for 10 s");
    let command = format!(
        "{TETHER} --state-dir {state} run -c 'sleep 600' -c 'sleep 600' -c 'sleep 600' -c 'sleep 600' -c 'sleep 600'"
    );
    let pane = Pane::start("idle", &command);
    let pid = pane.pid();
    report_cpu_over(pid, Duration::from_secs(10));
}

/// Lets the TUI settle, then prints the CPU it uses over `span`.
fn report_cpu_over(pid: i32, span: Duration) {
    std::thread::sleep(Duration::from_secs(3));
    let (cpu0, t0) = (cpu_seconds(pid), Instant::now());
    std::thread::sleep(span);
    let cpu = cpu_seconds(pid) - cpu0;
    let secs = t0.elapsed().as_secs_f64();
    println!(
        "tether  TUI CPU {cpu:.3} s over {secs:.1} s = {:.2} % of a core",
        100.0 * cpu / secs
    );
}

fn keypress(state: &str) {
    println!("== keypress to screen change while `yes` floods (20 presses, median)");
    let command = format!("{TETHER} --state-dir {state} run -c 'yes flood'");
    let pane = Pane::start("keys", &command);
    pane.wait(Duration::from_secs(10), |s| s.contains("flood"));
    std::thread::sleep(Duration::from_secs(1));
    let mut latencies = Vec::new();
    for _ in 0..20 {
        let sent = Instant::now();
        pane.keys(&["?"]);
        if let Some(at) = pane.wait(Duration::from_secs(5), |s| s.contains("closes this help")) {
            latencies.push((at - sent).as_secs_f64() * 1000.0);
        }
        pane.keys(&["Escape"]);
        pane.wait(Duration::from_secs(5), |s| !s.contains("closes this help"));
    }
    latencies.sort_by(f64::total_cmp);
    if latencies.is_empty() {
        println!("tether  no keypress showed on screen");
        return;
    }
    println!(
        "tether  median {:.1} ms, min {:.1} ms, max {:.1} ms ({} presses; includes tmux capture time)",
        latencies[latencies.len() / 2],
        latencies[0],
        latencies[latencies.len() - 1],
        latencies.len()
    );
}

fn big_tree(state: &str) {
    println!("== a 1,000-process tree under one command, sampled at 1 Hz, 10 s");
    let command = format!(
        "{TETHER} --state-dir {state} run -c 'i=0; while [ $i -lt 1000 ]; do sleep 600 & i=$((i+1)); done; wait'"
    );
    let pane = Pane::start("tree", &command);
    let pid = pane.pid();
    let shown = pane.wait(Duration::from_secs(60), |s| {
        s.matches("sleep 600").count() >= 10
    });
    if shown.is_none() {
        println!("tether  the tree did not show");
        return;
    }
    report_cpu_over(pid, Duration::from_secs(10));
}

fn watch(state: &str) {
    println!(
        "== tether watch: `tether exec` started elsewhere -> its row on screen (15 runs, median)"
    );
    let pane = Pane::start("watch", &format!("{TETHER} --state-dir {state} watch"));
    pane.wait(Duration::from_secs(10), |s| s.contains("Commands"));
    let mut latencies = Vec::new();
    let mut execs = Vec::new();
    for i in 0..15 {
        let name = format!("job-{i:02}");
        let started = Instant::now();
        let child = Command::new(TETHER)
            .args([
                "exec",
                "--state-dir",
                state,
                "--session",
                "bench",
                "--name",
                &name,
            ])
            .args(["--", "sleep", "30"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start tether exec");
        execs.push(child);
        if let Some(at) = pane.wait(Duration::from_secs(10), |s| s.contains(&name)) {
            latencies.push((at - started).as_secs_f64() * 1000.0);
        }
    }
    latencies.sort_by(f64::total_cmp);
    if let (Some(min), Some(max)) = (latencies.first(), latencies.last()) {
        println!(
            "tether  median {:.0} ms, min {min:.0} ms, max {max:.0} ms ({} runs; includes tmux capture time)",
            latencies[latencies.len() / 2],
            latencies.len()
        );
    }
    println!("== tether watch over those 15 sleeping commands, 10 s");
    report_cpu_over(pane.pid(), Duration::from_secs(10));
    // Stop them all through their sockets, as an operator would.
    let _ = Command::new(TETHER)
        .args(["stop", "--state-dir", state, "bench"])
        .output();
    for mut child in execs {
        let _ = child.wait();
    }
}

/// CPU time (ns) every thread of `pid` has run so far, from `/proc/PID/task/*/schedstat`:
/// exact, where clock ticks only sample who runs at each tick.
fn run_ns(pid: i32) -> u64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .filter_map(|t| t.ok())
        .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

fn fleet(state: &str, count: usize) {
    println!("== {count} sleeping commands in one TUI (`tether run -c 'sleep 600'` x {count})");
    let commands = " -c 'sleep 600'".repeat(count);
    let pane = Pane::start(
        &format!("fleet{count}"),
        &format!("{TETHER} --state-dir {state} run{commands}"),
    );
    let tui = pane.pid();
    let children = |pid: i32| -> Vec<i32> {
        tether::procfs::all_processes()
            .iter()
            .filter(|p| p.ppid == pid)
            .map(|p| p.pid)
            .collect()
    };
    let deadline = Instant::now() + Duration::from_secs(120);
    let (brokers, commands) = loop {
        let brokers = children(tui);
        let all = tether::procfs::all_processes();
        let commands: Vec<i32> = brokers
            .iter()
            .flat_map(|&b| tether::procfs::descendants_in(&all, b))
            .map(|p| p.pid)
            .collect();
        if brokers.len() >= count && commands.len() >= count {
            break (brokers, commands);
        }
        if Instant::now() > deadline {
            println!(
                "only {} of {count} commands started in 120 s; skipped",
                commands.len()
            );
            return;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let started = Instant::now();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let measure = |label: &str| {
        let ns = |pids: &[i32]| pids.iter().map(|&p| run_ns(p)).sum::<u64>();
        let ticks = |pids: &[i32]| pids.iter().map(|&p| cpu_seconds(p)).sum::<f64>() * hz;
        let (t0, b0, k0) = (run_ns(tui), ns(&brokers), ticks(&brokers) + ticks(&[tui]));
        let window = Duration::from_secs(20);
        std::thread::sleep(window);
        let (t1, b1, k1) = (run_ns(tui), ns(&brokers), ticks(&brokers) + ticks(&[tui]));
        let share = |ns: u64| ns as f64 / 1e9 / window.as_secs_f64() * 100.0;
        println!(
            "{label}: TUI {:.2} % + {count} brokers {:.2} % = {:.2} % of one core ({:.0} ticks in {} s)",
            share(t1 - t0),
            share(b1 - b0),
            share(t1 - t0 + b1 - b0),
            k1 - k0,
            window.as_secs()
        );
    };
    std::thread::sleep(Duration::from_secs(3));
    measure("after start-up (from 3 s)");
    // At rest: once every backoff has reached its longest interval.
    std::thread::sleep(Duration::from_secs(35).saturating_sub(started.elapsed()));
    measure("at rest (from 35 s)");

    let start = Instant::now();
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(tui),
        nix::sys::signal::Signal::SIGKILL,
    );
    let mut left = commands.clone();
    while !left.is_empty() && start.elapsed() < Duration::from_secs(30) {
        left.retain(|&pid| !tether::procfs::is_gone(pid));
        std::thread::sleep(Duration::from_millis(1));
    }
    println!(
        "SIGKILL of the TUI: all {} command processes gone after {:.0} ms ({} left)",
        commands.len(),
        start.elapsed().as_secs_f64() * 1000.0,
        left.len()
    );
    // Let the brokers finish their journals before tmux and the state directory go.
    let deadline = Instant::now() + Duration::from_secs(20);
    while brokers.iter().any(|&b| !tether::procfs::is_gone(b)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
}
