//! What a brokered command costs against the shell it stands in for: `SHIM -c true` against
//! `/bin/bash -c true` (median and p90, on the cgroup path and on the /proc path), where the
//! shim's time goes (front end start → broker ready → command started → command exited →
//! close → shim returned, from the journal's events), and 1,000 agent-style commands through
//! the shim against bash.
//!
//! `cargo bench --bench shim`; `TETHER_BENCH_QUICK=1` runs fewer (10 runs, 100 commands).
//! `TETHER_BENCH_BIN` measures another tether binary; `TETHER_BENCH_AGAINST` names a second
//! one (a build from before a change), timed in the same runs, alternating with the first and
//! bash, since on a shared machine two runs minutes apart differ more than the change. The
//! load (`/proc/loadavg`) is printed with each figure.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

struct Scratch {
    dir: tempfile::TempDir,
    shim: PathBuf,
}

impl Scratch {
    fn new(bin: &Path) -> Scratch {
        let dir = tempfile::Builder::new()
            .prefix("tether-bench-shim-")
            .tempdir()
            .expect("create a temp dir");
        let shims = dir.path().join("shims");
        let made = Command::new(bin)
            .arg("shims")
            .arg(&shims)
            .stdout(Stdio::null())
            .status()
            .expect("run tether shims");
        assert!(made.success(), "tether shims failed");
        std::fs::create_dir(dir.path().join("state")).expect("create the state dir");
        std::fs::write(dir.path().join("data.txt"), "x\ny\nxx\n").expect("write a data file");
        Scratch {
            shim: shims.join("bash"),
            dir,
        }
    }

    fn state(&self) -> PathBuf {
        self.dir.path().join("state")
    }

    /// A shell call as an agent makes it: no terminal, output read through pipes.
    fn command(&self, program: &Path, script: &str, cgroup_off: bool) -> Command {
        let mut command = Command::new(program);
        command
            .args(["-c", script])
            .current_dir(self.dir.path())
            .env("TETHER_STATE_DIR", self.state())
            .env("XDG_CONFIG_HOME", self.dir.path().join("config"))
            .env_remove("TETHER_SESSION")
            .env_remove("TETHER_BROKER_ID")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if cgroup_off {
            command.env("TETHER_CGROUP", "off");
        }
        command
    }
}

/// Whether `path` is on tmpfs or on a disk: the shim's cost depends on it (a journal written
/// to memory or to a disk), and a figure must say which. `TMPDIR` picks the place.
fn filesystem(path: &Path) -> String {
    const TMPFS_MAGIC: i64 = 0x0102_1994;
    // `f_type` is i64 here, another width elsewhere.
    #[allow(clippy::unnecessary_cast)]
    match nix::sys::statfs::statfs(path) {
        Ok(fs) if fs.filesystem_type().0 as i64 == TMPFS_MAGIC => "tmpfs".into(),
        Ok(_) => "a disk, not tmpfs".into(),
        Err(err) => format!("filesystem unknown: {err}"),
    }
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

fn wall_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as i64)
}

/// Runs `command` to its end; returns the wall time in microseconds.
fn time_one(mut command: Command) -> (i64, i64, i64) {
    let start_wall = wall_us();
    let start = Instant::now();
    let out = command.output().expect("run the command");
    let took = start.elapsed().as_micros() as i64;
    assert!(out.status.success(), "{:?} failed: {out:?}", command);
    (start_wall, start_wall + took, took)
}

#[derive(Default, Clone, Copy)]
struct Split {
    /// Front end started → broker ready (`broker_started`).
    to_broker: i64,
    /// Broker ready → command started (`spawned`).
    to_spawned: i64,
    /// Command started → its exit seen (`exit`).
    running: i64,
    /// Exit seen → journal closed (`close`).
    to_close: i64,
    /// Journal closed → the shim returned to its caller.
    to_return: i64,
}

/// The wall-clock time (µs) of each event the split needs. `ts_ms` is wall time in whole
/// milliseconds, `mono_us` the broker's own clock from its start: together they pin the
/// broker's start to well under a millisecond.
fn event_times(events: &str) -> Option<[i64; 4]> {
    let mut parsed = Vec::new();
    for line in events.lines() {
        let value: serde_json::Value = serde_json::from_str(line).ok()?;
        let kind = value["kind"].as_str()?.to_string();
        let ts_ms = value["ts_ms"].as_i64()?;
        let mono_us = value["mono_us"].as_i64()?;
        parsed.push((kind, ts_ms, mono_us));
    }
    let low = parsed.iter().map(|(_, ts, mono)| ts * 1000 - mono).max()?;
    let high = parsed
        .iter()
        .map(|(_, ts, mono)| ts * 1000 + 999 - mono)
        .min()?;
    let origin = (low + high.max(low)) / 2;
    let at = |kind: &str| {
        parsed
            .iter()
            .find(|(k, _, _)| k == kind)
            .map(|(_, _, mono)| origin + mono)
    };
    Some([
        at("broker_started")?,
        at("spawned")?,
        at("exit")?,
        at("close")?,
    ])
}

fn newest_events(state: &Path) -> Option<String> {
    let sessions = state.join("sessions");
    let newest = std::fs::read_dir(&sessions)
        .ok()?
        .filter_map(Result::ok)
        .filter(|e| e.path().is_dir())
        .max_by_key(|e| e.metadata().and_then(|m| m.modified()).ok())?;
    let command = std::fs::read_dir(newest.path())
        .ok()?
        .filter_map(Result::ok)
        .find(|e| e.path().join("events.jsonl").exists())?;
    std::fs::read_to_string(command.path().join("events.jsonl")).ok()
}

fn percentile(values: &mut [i64], p: f64) -> i64 {
    values.sort_unstable();
    let index = ((values.len() as f64 - 1.0) * p).round() as usize;
    values[index.min(values.len() - 1)]
}

fn ms(us: i64) -> String {
    format!("{:.2} ms", us as f64 / 1000.0)
}

fn single_calls(scratch: &Scratch, against: Option<&Scratch>, runs: usize, cgroup_off: bool) {
    let path = if cgroup_off {
        "/proc path"
    } else {
        "cgroup path"
    };
    let bash = Path::new("/bin/bash");
    let mut bash_us = Vec::new();
    let mut shim_us = Vec::new();
    let mut against_us = Vec::new();
    let mut splits = Vec::new();
    // Interleaved, so that a change of load touches both alike.
    for _ in 0..runs {
        bash_us.push(time_one(scratch.command(bash, "true", cgroup_off)).2);
        if let Some(other) = against {
            against_us.push(time_one(other.command(&other.shim, "true", cgroup_off)).2);
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let (start, end, took) = time_one(scratch.command(&scratch.shim, "true", cgroup_off));
        shim_us.push(took);
        if let Some([ready, spawned, exited, closed]) =
            newest_events(&scratch.state()).and_then(|e| event_times(&e))
        {
            splits.push(Split {
                to_broker: ready - start,
                to_spawned: spawned - ready,
                running: exited - spawned,
                to_close: closed - exited,
                to_return: end - closed,
            });
        }
        // The shim's detached retention must not run into the next call's figure.
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let bash_median = percentile(&mut bash_us, 0.5);
    let shim_median = percentile(&mut shim_us, 0.5);
    println!("{path} ({runs} runs, load {})", load());
    println!(
        "  /bin/bash -c true   median {}  p90 {}",
        ms(bash_median),
        ms(percentile(&mut bash_us, 0.9))
    );
    println!(
        "  SHIM -c true        median {}  p90 {}  ({:.1}x bash)",
        ms(shim_median),
        ms(percentile(&mut shim_us, 0.9)),
        shim_median as f64 / bash_median.max(1) as f64
    );
    if !against_us.is_empty() {
        let median = percentile(&mut against_us, 0.5);
        println!(
            "  against: SHIM -c true median {}  p90 {}  ({:.1}x bash)",
            ms(median),
            ms(percentile(&mut against_us, 0.9)),
            median as f64 / bash_median.max(1) as f64
        );
    }
    if splits.is_empty() {
        println!("  (no journal events found for the split)");
        return;
    }
    let median_of = |pick: fn(&Split) -> i64| {
        let mut values: Vec<i64> = splits.iter().map(pick).collect();
        ms(percentile(&mut values, 0.5))
    };
    println!("  split (medians):");
    println!(
        "    front end start → broker ready   {}",
        median_of(|s| s.to_broker)
    );
    println!(
        "    broker ready → command started   {}",
        median_of(|s| s.to_spawned)
    );
    println!(
        "    command started → exited         {}",
        median_of(|s| s.running)
    );
    println!(
        "    exited → journal closed          {}",
        median_of(|s| s.to_close)
    );
    println!(
        "    journal closed → shim returned   {}",
        median_of(|s| s.to_return)
    );
}

const AGENT_COMMANDS: [&str; 4] = ["ls", "echo hello", "grep -c x data.txt", "true"];

fn agent_run(scratch: &Scratch, program: &Path, count: usize, cgroup_off: bool) -> i64 {
    let start = Instant::now();
    for i in 0..count {
        let script = AGENT_COMMANDS[i % AGENT_COMMANDS.len()];
        let out = scratch
            .command(program, script, cgroup_off)
            .output()
            .expect("run an agent command");
        assert!(out.status.success(), "`{script}` failed: {out:?}");
    }
    start.elapsed().as_micros() as i64
}

fn main() {
    let bin = std::env::var_os("TETHER_BENCH_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_tether")));
    let quick = std::env::var_os("TETHER_BENCH_QUICK").is_some();
    let (runs, commands) = if quick { (10, 100) } else { (40, 1000) };
    let scratch = Scratch::new(&bin);
    let against = std::env::var_os("TETHER_BENCH_AGAINST").map(|b| Scratch::new(Path::new(&b)));
    println!("tether {}", bin.display());
    println!(
        "state directory {} ({})",
        scratch.state().display(),
        filesystem(&scratch.state())
    );
    if let Some(other) = std::env::var_os("TETHER_BENCH_AGAINST") {
        println!("against {}", Path::new(&other).display());
    }
    single_calls(&scratch, against.as_ref(), runs, false);
    single_calls(&scratch, against.as_ref(), runs, true);
    for cgroup_off in [false, true] {
        let path = if cgroup_off {
            "/proc path"
        } else {
            "cgroup path"
        };
        let bash = agent_run(&scratch, Path::new("/bin/bash"), commands, cgroup_off);
        let shim = agent_run(&scratch, &scratch.shim, commands, cgroup_off);
        println!(
            "{commands} agent-style commands, {path} (load {}): bash {}  shim {}  ({:.1}x)",
            load(),
            ms(bash),
            ms(shim),
            shim as f64 / bash.max(1) as f64
        );
        if let Some(other) = &against {
            let shim = agent_run(other, &other.shim, commands, cgroup_off);
            let bash = agent_run(&scratch, Path::new("/bin/bash"), commands, cgroup_off);
            println!(
                "  against, then bash again (load {}): shim {}  bash {}  ({:.1}x)",
                load(),
                ms(shim),
                ms(bash),
                shim as f64 / bash.max(1) as f64
            );
        }
    }
}
