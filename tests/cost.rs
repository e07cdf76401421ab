//! What a command cost, end to end: a real command that burns CPU in a grandchild, on both
//! containment paths, has its CPU time and peak memory in `result.json`, in `sessions
//! --json`, in the text export's table, on the OTLP span and on the chrome-trace run.

use crate::common;

use serde_json::Value;

use common::journal::{events_now, load_complete};
use common::{TestEnv, run_to_end, wait_until};
use tether::protocol::{CommandResult, ContainmentMode, EventKind};

/// A busy loop in a shell below the command's shell: its CPU time is a grandchild's, which
/// the broker reaps nothing of directly. Then the command waits for `$GO`: a process that
/// ends before the tree's first sample, without a cgroup's memory figure and below the
/// broker's own RSS, has no peak anyone measured (`tether_core::cost`), and the first sample
/// comes when a loaded machine lets it.
const BUSY: &str = "sh -c 'i=0; while [ $i -lt 150000 ]; do i=$((i+1)); done'; \
    while [ ! -e \"$GO\" ]; do sleep 0.05; done; echo done";

/// The least CPU time the loop takes anywhere (it takes hundreds of ms).
const AT_LEAST_MS: u64 = 20;

fn tether_json(env: &TestEnv, args: &[&str]) -> Value {
    let output = run_to_end(env, env.tether(args), &format!("tether {args:?}"));
    assert!(
        output.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

fn tether_text(env: &TestEnv, args: &[&str]) -> String {
    let output = run_to_end(env, env.tether(args), &format!("tether {args:?}"));
    assert!(output.status.success(), "{args:?}");
    String::from_utf8(output.stdout).unwrap()
}

/// Runs [`BUSY`] with `TETHER_CGROUP` as given and checks every place its cost shows.
fn cost_everywhere(name: &str, cgroup: Option<&str>, expected: ContainmentMode) {
    let env = TestEnv::new(name);
    let mut command = env.exec_command(&["-n", "busy"], &["sh", "-c", BUSY]);
    command.env("GO", env.path("go"));
    match cgroup {
        Some(value) => command.env(tether::cgroup::CGROUP_ENV, value),
        None => command.env_remove(tether::cgroup::CGROUP_ENV),
    };
    let running = env.spawn_captured(command);
    let dir = env.wait_command_dir();
    wait_until(&env, "a sample of the command's tree", || {
        events_now(&dir).iter().any(|e| match &e.kind {
            EventKind::Tree { processes } => !processes.is_empty(),
            _ => false,
        })
    });
    std::fs::write(env.path("go"), "").unwrap();
    let run = running.wait(&env);
    assert_eq!(run.code(), 0, "{}", run.stderr_text());
    let record = load_complete(&env.command_dir());
    let mode = record.events.iter().find_map(|e| match &e.kind {
        EventKind::Containment { mode, .. } => Some(*mode),
        _ => None,
    });
    assert_eq!(mode, Some(expected), "the path this test means to take");
    let result: CommandResult = record.result.expect("result.json");
    let cpu_ms = result.cpu_ms.expect("cpu_ms in result.json");
    let peak = result
        .peak_rss_bytes
        .expect("peak_rss_bytes in result.json");
    assert!(cpu_ms >= AT_LEAST_MS, "cpu_ms {cpu_ms}");
    assert!(
        cpu_ms <= result.duration_ms * 2 + 50,
        "cpu_ms {cpu_ms} for a run of {} ms",
        result.duration_ms
    );
    // A shell's resident memory: more than a page, less than a GiB.
    assert!((64 << 10..1 << 30).contains(&peak), "peak {peak}");
    if expected == ContainmentMode::Cgroup {
        assert_eq!(Some(cpu_ms), result.cgroup_cpu_usec.map(|u| u / 1000));
    }

    let sessions = tether_json(&env, &["sessions", "--json"]);
    let summary = &sessions["sessions"][0]["commands"][0];
    assert_eq!(summary["cpu_ms"], Value::from(cpu_ms), "{summary}");
    assert_eq!(summary["peak_rss_bytes"], Value::from(peak), "{summary}");

    let text = tether_text(&env, &["export", "--format", "text"]);
    let header = text
        .lines()
        .find(|l| l.starts_with("COMMAND"))
        .expect("the summary table");
    assert!(
        header.contains("  CPU  ") && header.contains("PEAK RSS"),
        "{header}"
    );
    let row = text
        .lines()
        .find(|l| l.starts_with("01-busy"))
        .expect("the command's row");
    assert!(
        row.contains(&tether::units::duration_ms(cpu_ms)),
        "{row} (cpu {cpu_ms} ms)"
    );
    assert!(row.contains(&tether::units::format_size(peak)), "{row}");

    let otlp = tether_json(&env, &["export", "--format", "otlp"]);
    let spans = &otlp["resourceSpans"][0]["scopeSpans"][0]["spans"];
    let span = spans
        .as_array()
        .unwrap()
        .iter()
        .find(|s| {
            s["attributes"]
                .as_array()
                .unwrap()
                .iter()
                .any(|a| a["key"] == "tether.command.id")
        })
        .expect("the command's span");
    let attribute = |key: &str| {
        span["attributes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["key"] == key)
            .map(|a| a["value"]["intValue"].clone())
    };
    assert_eq!(attribute("tether.cpu_ms"), Some(cpu_ms.to_string().into()));
    assert_eq!(
        attribute("tether.peak_rss_bytes"),
        Some(peak.to_string().into())
    );

    let chrome = tether_json(&env, &["export", "--format", "chrome-trace"]);
    let events = chrome
        .get("traceEvents")
        .unwrap_or(&chrome)
        .as_array()
        .unwrap()
        .clone();
    let run = events
        .iter()
        .find(|e| e["cat"] == "run" && e["ph"] == "X")
        .expect("the run");
    assert_eq!(run["args"]["cpu_ms"], Value::from(cpu_ms), "{run}");
    assert_eq!(run["args"]["peak_rss_bytes"], Value::from(peak), "{run}");
    env.finish();
}

#[test]
fn cost_on_the_proc_path() {
    cost_everywhere("cost_procfs", Some("off"), ContainmentMode::Procfs);
}

#[test]
fn cost_on_the_cgroup_path() {
    if let Err(reason) = common::cgroups::hierarchy() {
        common::skip(format!(
            "cost_on_the_cgroup_path: no usable cgroup v2 here ({reason})"
        ));
        return;
    }
    cost_everywhere("cost_cgroup", None, ContainmentMode::Cgroup);
}

/// A command's run is timed from before its fork to its reaping, as a shell's `time` is: a
/// quick one ends before the broker has its pid, and its run, timed from then, read shorter
/// than the CPU its one thread used (a trial's `uname`: `0ms` run, `2ms` CPU). One thread's
/// CPU time cannot exceed the time it lived, on any machine under any load.
#[test]
fn a_quick_commands_run_is_no_shorter_than_its_cpu_time() {
    if let Err(reason) = common::cgroups::hierarchy() {
        common::skip(format!(
            "a_quick_commands_run_is_no_shorter_than_its_cpu_time: no usable cgroup v2 here \
             ({reason})"
        ));
        return;
    }
    let env = TestEnv::new("cost_quick");
    for _ in 0..5 {
        let run = env.exec(&["--session", "quick"], &["uname", "-r"]);
        assert_eq!(run.code(), 0, "{}", run.stderr_text());
    }
    let session = env.state_dir().join("sessions").join("quick");
    let mut dirs: Vec<_> = std::fs::read_dir(&session)
        .unwrap()
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.is_dir())
        .collect();
    dirs.sort();
    assert_eq!(dirs.len(), 5, "{dirs:?}");
    for dir in dirs {
        let record = load_complete(&dir);
        let at = |wanted: fn(&EventKind) -> bool| {
            (record.events.iter())
                .find(|e| wanted(&e.kind))
                .map(|e| e.mono_us)
                .unwrap_or_else(|| panic!("{}: {:?}", dir.display(), record.events))
        };
        let lived_us = at(|k| matches!(k, EventKind::Exit { .. }))
            - at(|k| matches!(k, EventKind::Spawned { .. }));
        let result: CommandResult = record.result.expect("result.json");
        let cpu_us = result.cgroup_cpu_usec.expect("the cgroup's CPU time");
        assert!(
            lived_us >= cpu_us,
            "{}: a run of {lived_us} µs used {cpu_us} µs of CPU",
            dir.display()
        );
    }
    env.finish();
}
