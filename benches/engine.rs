//! Engine benchmarks: `cargo bench --bench engine`. Prints figures; asserts nothing.
//!
//! 1. Throughput: `tether exec` on a 1 GiB stream with its output to /dev/null, against the
//!    same command redirected straight to a file, in the same run.
//! 2. The broker's peak RSS during that stream.
//! 3. Parent-death cleanup latency: a `tether exec` is SIGKILLed; time until every process
//!    of its command's TERM-obeying tree has exited. Median of 20 runs.
//! 4. Stop through the control socket: `tether stop SESSION` is started; time until every
//!    process of the command's TERM-obeying tree has exited, and until `tether stop` has
//!    returned (it waits for the broker's `close`). Median of 20 runs.
//! 5. Idle cost: 100 `tether exec -- sleep` side by side; the CPU ticks (utime + stime from
//!    `/proc/<pid>/stat`) their brokers, and separately their `tether exec` front ends, use
//!    over 20 s, as % of one core.
//! 6. Mass teardown: the 100 `tether exec` front ends are SIGKILLed at once; time until every
//!    `sleep` is gone (a zombie counts as gone).
//! 7. Fork storm: a TERM-ignoring command spawning TERM-ignoring `setsid` children as fast as
//!    it can runs 500 ms, then its `tether exec --grace 300ms` gets SIGTERM; time until no
//!    process of it is alive, and how many survived, on each containment path (its own cgroup,
//!    and `TETHER_CGROUP=off`). Median and worst of 5 runs each.
//!
//! Benchmarks 5 and 6 run on whatever containment this machine gives (the cgroup path where
//! cgroup v2 is writable); `TETHER_CGROUP=off cargo bench --bench engine idle` measures the
//! /proc path.

use std::os::fd::OwnedFd;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec, poll};
use rustix::process::{Pid, PidfdFlags, pidfd_open};
use tether::procfs;

const TETHER: &str = env!("CARGO_BIN_EXE_tether");
const GIB: u64 = 1 << 30;
const PRODUCER: &str = "head -c 1073741824 /dev/zero";

fn main() {
    // `cargo bench` passes `--bench`; a filter argument selects one benchmark.
    let filter: Option<String> = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let wanted = |name: &str| filter.as_deref().is_none_or(|f| name.contains(f));
    let state = tempfile::tempdir().expect("temporary directory");
    if wanted("throughput") {
        throughput(state.path());
    }
    if wanted("parent_death") {
        parent_death(state.path());
    }
    if wanted("socket_stop") {
        socket_stop(state.path());
    }
    if wanted("fork_storm") {
        fork_storm(state.path());
    }
    if wanted("idle") || wanted("teardown") {
        idle_and_teardown(state.path(), 100);
    }
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn throughput(state: &Path) {
    println!("== 1 GiB stream: tether exec > /dev/null vs. direct > file (3 runs each, median)");
    let mut direct = Vec::new();
    let mut tether = Vec::new();
    let mut broker_peak_kib = 0u64;
    for run in 0..3 {
        let target = state.join(format!("direct-{run}.out"));
        let start = Instant::now();
        let status = Command::new("sh")
            .arg("-c")
            .arg(format!("{PRODUCER} > '{}'", target.display()))
            .status()
            .expect("run the producer");
        assert!(status.success());
        direct.push(start.elapsed().as_secs_f64());
        let _ = std::fs::remove_file(&target);

        let start = Instant::now();
        let mut child = Command::new(TETHER)
            .args(["exec", "--state-dir"])
            .arg(state)
            .args(["--", "sh", "-c", PRODUCER])
            .stdout(Stdio::null())
            .spawn()
            .expect("run tether exec");
        let exec_pid = child.id() as i32;
        let mut peak = 0;
        while child.try_wait().expect("wait").is_none() {
            if let Some(kib) = broker_of(exec_pid).and_then(vm_hwm_kib) {
                peak = peak.max(kib);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        tether.push(start.elapsed().as_secs_f64());
        broker_peak_kib = broker_peak_kib.max(peak);
        let _ = std::fs::remove_dir_all(state.join("sessions"));
    }
    let (d, t) = (median(direct), median(tether));
    let gib_s = |secs: f64| GIB as f64 / secs / GIB as f64;
    println!(
        "direct redirect to a file: {d:.3} s ({:.2} GiB/s)",
        gib_s(d)
    );
    println!(
        "tether exec > /dev/null:   {t:.3} s ({:.2} GiB/s)",
        gib_s(t)
    );
    println!("ratio tether/direct:       {:.2}", t / d);
    println!(
        "broker peak RSS (VmHWM):   {:.1} MiB",
        broker_peak_kib as f64 / 1024.0
    );
}

/// The broker started by a `tether exec` process.
fn broker_of(exec_pid: i32) -> Option<i32> {
    procfs::all_processes()
        .into_iter()
        .find(|p| p.ppid == exec_pid)
        .map(|p| p.pid)
}

fn vm_hwm_kib(pid: i32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}

fn parent_death(state: &Path) {
    println!("== parent-death cleanup: SIGKILL tether exec -> whole TERM-obeying tree exited");
    let mut latencies = Vec::new();
    for _ in 0..20 {
        let mut child = Command::new(TETHER)
            .args(["exec", "--state-dir"])
            .arg(state)
            .args([
                "--",
                "sh",
                "-c",
                "sleep 100 & sleep 100 & (sleep 100 & wait) & wait",
            ])
            .stdout(Stdio::null())
            .spawn()
            .expect("run tether exec");
        let exec_pid = child.id() as i32;
        // Wait for the whole tree: broker, sh, three sleeps and a subshell.
        let deadline = Instant::now() + Duration::from_secs(10);
        let tree = loop {
            let broker = broker_of(exec_pid);
            let tree: Vec<i32> = broker
                .map(|b| {
                    procfs::descendants_in(&procfs::all_processes(), b)
                        .iter()
                        .map(|p| p.pid)
                        .collect()
                })
                .unwrap_or_default();
            if tree.len() >= 5 {
                break tree;
            }
            assert!(Instant::now() < deadline, "the tree did not start");
            std::thread::sleep(Duration::from_millis(5));
        };
        let pidfds: Vec<OwnedFd> = tree
            .iter()
            .filter_map(|&pid| pidfd_open(Pid::from_raw(pid)?, PidfdFlags::empty()).ok())
            .collect();
        let start = Instant::now();
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(exec_pid),
            nix::sys::signal::Signal::SIGKILL,
        )
        .expect("kill tether exec");
        let _ = child.wait();
        wait_all_exited(&pidfds, Duration::from_secs(10));
        latencies.push(start.elapsed().as_secs_f64() * 1000.0);
        // Let the broker finish its journal before the next run.
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut sorted = latencies.clone();
    sorted.sort_by(f64::total_cmp);
    println!(
        "latency over 20 runs: median {:.2} ms, min {:.2} ms, max {:.2} ms",
        median(latencies),
        sorted[0],
        sorted[sorted.len() - 1]
    );
}

fn socket_stop(state: &Path) {
    println!("== stop through the control socket: `tether stop SESSION` -> whole tree exited");
    let runtime = state.join("run");
    std::fs::create_dir_all(&runtime).expect("runtime dir");
    std::fs::set_permissions(
        &runtime,
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .expect("chmod the runtime dir");
    let mut gone_ms = Vec::new();
    let mut returned_ms = Vec::new();
    for _ in 0..20 {
        let _ = std::fs::remove_dir_all(state.join("sessions"));
        let mut child = Command::new(TETHER)
            .args(["exec", "--state-dir"])
            .arg(state)
            .args([
                "--",
                "sh",
                "-c",
                "sleep 100 & sleep 100 & (sleep 100 & wait) & wait",
            ])
            .env("XDG_RUNTIME_DIR", &runtime)
            .stdout(Stdio::null())
            // It says `stopped by the operator` each time.
            .stderr(Stdio::null())
            .spawn()
            .expect("run tether exec");
        let exec_pid = child.id() as i32;
        let deadline = Instant::now() + Duration::from_secs(10);
        let (tree, session) = loop {
            let broker = broker_of(exec_pid);
            let tree: Vec<i32> = broker
                .map(|b| {
                    procfs::descendants_in(&procfs::all_processes(), b)
                        .iter()
                        .map(|p| p.pid)
                        .collect()
                })
                .unwrap_or_default();
            let session = std::fs::read_dir(state.join("sessions"))
                .ok()
                .and_then(|mut d| d.next())
                .and_then(Result::ok)
                .map(|e| e.file_name());
            if let (true, Some(session)) = (tree.len() >= 5, session) {
                break (tree, session);
            }
            assert!(Instant::now() < deadline, "the tree did not start");
            std::thread::sleep(Duration::from_millis(5));
        };
        let pidfds: Vec<OwnedFd> = tree
            .iter()
            .filter_map(|&pid| pidfd_open(Pid::from_raw(pid)?, PidfdFlags::empty()).ok())
            .collect();
        let start = Instant::now();
        let mut stop = Command::new(TETHER)
            .arg("stop")
            .arg(&session)
            .arg("--state-dir")
            .arg(state)
            .env("XDG_RUNTIME_DIR", &runtime)
            .stdout(Stdio::null())
            .spawn()
            .expect("run tether stop");
        wait_all_exited(&pidfds, Duration::from_secs(10));
        gone_ms.push(start.elapsed().as_secs_f64() * 1000.0);
        let status = stop.wait().expect("wait for tether stop");
        returned_ms.push(start.elapsed().as_secs_f64() * 1000.0);
        assert!(status.success(), "tether stop failed");
        let _ = child.wait();
    }
    let spread = |values: &[f64]| {
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        (median(values.to_vec()), sorted[0], sorted[sorted.len() - 1])
    };
    let (m, lo, hi) = spread(&gone_ms);
    println!("tree gone, over 20 runs: median {m:.2} ms, min {lo:.2} ms, max {hi:.2} ms");
    let (m, lo, hi) = spread(&returned_ms);
    println!("tether stop returned:    median {m:.2} ms, min {lo:.2} ms, max {hi:.2} ms");
}

/// utime + stime of `pid`, in clock ticks; 0 once it is gone.
fn cpu_ticks(pid: i32) -> u64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0;
    };
    let Some((_, rest)) = stat.rsplit_once(')') else {
        return 0;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // After the command name: state is field 3 of stat(5), utime 14 and stime 15.
    field(11) + field(12)
}

fn idle_and_teardown(state: &Path, count: usize) {
    println!("== {count} idle commands (`tether exec -- sleep 120` each)");
    let mut execs: Vec<std::process::Child> = (0..count)
        .map(|_| {
            Command::new(TETHER)
                .args(["exec", "--state-dir"])
                .arg(state)
                .args(["--", "sleep", "120"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("run tether exec")
        })
        .collect();
    let exec_pids: Vec<i32> = execs.iter().map(|c| c.id() as i32).collect();
    let deadline = Instant::now() + Duration::from_secs(30);
    let (brokers, sleeps) = loop {
        let procs = procfs::all_processes();
        let brokers: Vec<i32> = procs
            .iter()
            .filter(|p| exec_pids.contains(&p.ppid))
            .map(|p| p.pid)
            .collect();
        let sleeps: Vec<i32> = procs
            .iter()
            .filter(|p| brokers.contains(&p.ppid))
            .map(|p| p.pid)
            .collect();
        if sleeps.len() >= count {
            break (brokers, sleeps);
        }
        assert!(Instant::now() < deadline, "the commands did not start");
        std::thread::sleep(Duration::from_millis(50));
    };
    // Let start-up settle: what is measured is the idle cost.
    std::thread::sleep(Duration::from_secs(2));
    let total = |pids: &[i32]| pids.iter().map(|&p| cpu_ticks(p)).sum::<u64>();
    let (b0, e0) = (total(&brokers), total(&exec_pids));
    let window = Duration::from_secs(20);
    std::thread::sleep(window);
    let (b1, e1) = (total(&brokers), total(&exec_pids));
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let percent = |ticks: u64| ticks as f64 / hz / window.as_secs_f64() * 100.0;
    println!(
        "brokers: {} ticks in {}s = {:.2} % of one core; tether exec front ends: {} ticks = {:.2} %",
        b1 - b0,
        window.as_secs(),
        percent(b1 - b0),
        e1 - e0,
        percent(e1 - e0)
    );
    // At rest: once the walks have backed off to their longest interval (30 s after start).
    std::thread::sleep(Duration::from_secs(10));
    let (b2, e2) = (total(&brokers), total(&exec_pids));
    std::thread::sleep(window);
    let (b3, e3) = (total(&brokers), total(&exec_pids));
    println!(
        "at rest (from 32 s): brokers {} ticks in {}s = {:.2} % of one core; front ends {:.2} %",
        b3 - b2,
        window.as_secs(),
        percent(b3 - b2),
        percent(e3 - e2)
    );

    println!("== mass teardown: SIGKILL {count} tether exec front ends -> every command gone");
    let start = Instant::now();
    for &pid in &exec_pids {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    let deadline = start + Duration::from_secs(30);
    let mut left = sleeps.clone();
    while !left.is_empty() && Instant::now() < deadline {
        left.retain(|&pid| !procfs::is_gone(pid));
        std::thread::sleep(Duration::from_millis(1));
    }
    println!(
        "all {} commands gone after {:.1} ms ({} left)",
        sleeps.len(),
        start.elapsed().as_secs_f64() * 1000.0,
        left.len()
    );
    for exec in &mut execs {
        let _ = exec.wait();
    }
    // Let the brokers finish their journals before the temporary directory goes.
    let deadline = Instant::now() + Duration::from_secs(10);
    while brokers.iter().any(|&b| !procfs::is_gone(b)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until every pidfd reports its process exited.
fn wait_all_exited(pidfds: &[OwnedFd], limit: Duration) {
    let deadline = Instant::now() + limit;
    let mut open: Vec<&OwnedFd> = pidfds.iter().collect();
    while !open.is_empty() && Instant::now() < deadline {
        let mut fds: Vec<PollFd> = open
            .iter()
            .map(|fd| PollFd::new(*fd, PollFlags::IN))
            .collect();
        let timeout = Timespec {
            tv_sec: 1,
            tv_nsec: 0,
        };
        let _ = poll(&mut fds, Some(&timeout));
        let done: Vec<bool> = fds.iter().map(|f| !f.revents().is_empty()).collect();
        open = open
            .into_iter()
            .zip(done)
            .filter(|(_, d)| !d)
            .map(|(fd, _)| fd)
            .collect();
    }
}

/// The command of benchmark 7: it ignores TERM and forks `setsid` children, which ignore it
/// too, as fast as the shell can.
const STORM: &str =
    "trap '' TERM; while :; do setsid sh -c 'trap \"\" TERM; exec sleep 1000' & done";

/// The variable that marks every process of one storm, so that survivors are found by it.
const STORM_TAG: &str = "TETHER_BENCH_STORM";

/// Live (not zombie) processes whose environment holds `STORM_TAG=tag`.
fn storm_survivors(tag: &str) -> Vec<i32> {
    let needle = format!("{STORM_TAG}={tag}");
    procfs::pids()
        .into_iter()
        .filter(|&pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.split(|&b| b == 0).any(|v| v == needle.as_bytes()))
                && !procfs::is_gone(pid)
        })
        .collect()
}

fn fork_storm(state: &Path) {
    let grace = Duration::from_millis(300);
    for (label, cgroup) in [
        ("cgroup", None),
        ("procfs (TETHER_CGROUP=off)", Some("off")),
    ] {
        println!("== fork storm, {label}: SIGTERM to tether exec --grace 300ms -> no survivor");
        let mut times = Vec::new();
        let mut worst_survivors = 0;
        let mut sizes = Vec::new();
        for run in 0..5 {
            let tag = format!("{}-{run}-{}", std::process::id(), label.len());
            let mut command = Command::new(TETHER);
            command
                .args(["exec", "--state-dir"])
                .arg(state)
                .args(["--grace", "300ms", "--", "sh", "-c", STORM])
                .env(STORM_TAG, &tag)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            match cgroup {
                Some(value) => command.env("TETHER_CGROUP", value),
                None => command.env_remove("TETHER_CGROUP"),
            };
            let mut exec = command.spawn().expect("tether exec");
            std::thread::sleep(Duration::from_millis(500));
            sizes.push(storm_survivors(&tag).len());
            let start = Instant::now();
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(exec.id() as i32),
                nix::sys::signal::Signal::SIGTERM,
            );
            let deadline = start + Duration::from_secs(20);
            let left = loop {
                let left = storm_survivors(&tag);
                if left.is_empty() || Instant::now() >= deadline {
                    break left;
                }
                std::thread::sleep(Duration::from_millis(2));
            };
            times.push(start.elapsed().as_secs_f64() * 1000.0);
            worst_survivors = worst_survivors.max(left.len());
            let code = exec.wait().ok().and_then(|s| s.code());
            if code != Some(137) {
                println!(
                    "  run {run}: tether exec exited {code:?} (125: it stopped what its broker left)"
                );
            }
            for pid in left {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
            // The machine settles before the next storm.
            std::thread::sleep(Duration::from_millis(500));
        }
        let worst = times.iter().copied().fold(0.0, f64::max);
        println!(
            "storm of {}..{} processes at SIGTERM; gone after {:.0} ms median, {:.0} ms worst (grace {} ms; goal grace + {} ms); survivors: {}",
            sizes.iter().min().unwrap_or(&0),
            sizes.iter().max().unwrap_or(&0),
            median(times),
            worst,
            grace.as_millis(),
            if cgroup.is_none() { 200 } else { 700 },
            worst_survivors
        );
    }
}
