//! Budgets end to end (issue 28, deliver 4): `max_cpu`, `max_time` and the output budget
//! stop a command through the stop sequence, the journal says which (`budget_exceeded`,
//! `result.json`'s `stopped_by: budget` and `budget`), and the caller sees what bash would
//! show for a command killed by SIGTERM (exit 143). The user config's `[budgets]` reach an
//! agent's shell calls through the shim. The decisions' timing is tested on a fake clock in
//! tether-core; here only what needs a real kernel: real CPU time, real signals.

use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::time::Duration;

use tether::protocol::{Budget, EventKind, Origin};

use crate::common::journal::{kinds, load_complete};
use crate::common::{self, BIN, TestEnv};

/// The one `budget_exceeded` of the journal in `dir`, with the result's word on it.
fn stopped_by_budget(dir: &Path) -> (Budget, u64, u64) {
    let record = load_complete(dir);
    let exceeded: Vec<(Budget, u64, u64)> = record
        .events
        .iter()
        .filter_map(|e| match e.kind {
            EventKind::BudgetExceeded {
                budget,
                limit,
                used,
            } => Some((budget, limit, used)),
            _ => None,
        })
        .collect();
    assert_eq!(exceeded.len(), 1, "{:?}", kinds(&record.events));
    let at = kinds(&record.events)
        .iter()
        .position(|k| *k == "budget_exceeded")
        .unwrap();
    // The stop sequence follows (after `leftovers_stopped` when leftovers were kept).
    let stop = record.events[at + 1..].iter().find_map(|e| match e.kind {
        EventKind::StopStarted { origin, .. } => Some(origin),
        _ => None,
    });
    assert_eq!(stop, Some(Origin::Budget), "{:?}", kinds(&record.events));
    let result = record.result.as_ref().expect("result.json");
    assert_eq!(result.stopped_by, Some(Origin::Budget));
    assert_eq!(result.budget, Some(exceeded[0].0));
    exceeded[0]
}

/// A user config in the test's config directory.
fn user_config(env: &TestEnv, text: &str) {
    let dir = env.path("config/tether");
    std::fs::create_dir_all(&dir).expect("the config dir");
    std::fs::write(dir.join("config.toml"), text).expect("the user config");
}

fn exec(env: &TestEnv, options: &[&str], argv: &[&str]) -> common::ExecRun {
    let mut exec = env.exec_command(options, argv);
    exec.env("XDG_CONFIG_HOME", env.path("config"))
        .env_remove("TETHER_MAX_TIME")
        .env_remove("TETHER_MAX_CPU")
        .env_remove("TETHER_OUTPUT_BUDGET");
    env.spawn_captured(exec).wait(env)
}

#[test]
fn a_forgotten_yes_is_stopped_by_its_cpu_budget() {
    let env = TestEnv::new("budget_cpu");
    let run = exec(&env, &["--max-cpu", "1s"], &["sh", "-c", "yes > /dev/null"]);
    assert_eq!(
        run.code(),
        143,
        "as bash shows SIGTERM: {}",
        run.stderr_text()
    );
    let dir = env.command_dir();
    let (budget, limit, used) = stopped_by_budget(&dir);
    assert_eq!((budget, limit), (Budget::Cpu, 1000));
    assert!(used >= 1000, "{used}");
    // The post-mortem says which budget ended it, not merely a signal.
    let session = common::journal::session_of(&dir);
    let listed = common::run_to_end(&env, env.tether(&["sessions", &session]), "sessions");
    let listed = String::from_utf8_lossy(&listed.stdout);
    assert!(listed.contains("over budget (max_cpu)"), "{listed}");
    env.finish();
}

/// Without a cgroup the tree's CPU time is its processes' in /proc plus what the broker
/// reaped: CPU spent in children that a live process waited for counts too.
#[test]
fn the_cpu_budget_counts_waited_for_children_without_a_cgroup() {
    let env = TestEnv::new("budget_cpu_procfs");
    let script = "while :; do timeout 0.3 yes > /dev/null; done";
    let mut exec = env.exec_command(&["--max-cpu", "1s"], &["bash", "-c", script]);
    exec.env("XDG_CONFIG_HOME", env.path("config"))
        .env("TETHER_CGROUP", "off");
    let run = env.spawn_captured(exec).wait(&env);
    assert_eq!(run.code(), 143, "{}", run.stderr_text());
    let (budget, _, used) = stopped_by_budget(&env.command_dir());
    assert_eq!(budget, Budget::Cpu);
    assert!(used >= 1000, "{used}");
    env.finish();
}

/// A readiness probe is not the command: on the /proc walk its keeper and what it runs are
/// left out of the tree's CPU time while they run, and so is their time once the broker has
/// reaped the keeper (which the kernel adds to the broker's `RUSAGE_CHILDREN`).
#[test]
fn an_exec_probe_that_burns_cpu_does_not_count_against_the_cpu_budget() {
    let env = TestEnv::new("budget_cpu_probe");
    let burned = env.path("burned");
    // 600 ms of CPU, twice the command's budget, counted by the process itself: on a loaded
    // machine a try gets its share of a core, not a core, and a try past its 8 s is ended.
    let probe = format!(
        "python3 -c 'import time\nwhile time.process_time() < 0.6: pass' && touch '{}'; exit 1",
        burned.display()
    );
    // The command itself uses next to none (a `sleep` every half second), and ends once
    // the probe has burned its time and the broker measured again after the keeper was
    // reaped.
    let script = format!(
        "while [ ! -e '{}' ]; do sleep 0.5; done; sleep 2",
        burned.display()
    );
    // The first try comes an interval after the spawn, and may take that interval
    // (docs/configuration.md): 8 s for its 600 ms of CPU, which a machine at load 20 on two
    // cores still gives.
    let options = [
        "--max-cpu",
        "300ms",
        "--ready-exec",
        &probe,
        "--ready-interval",
        "8s",
        "--ready-timeout",
        "120s",
    ];
    let mut exec = env.exec_command(&options, &["sh", "-c", &script]);
    exec.env("XDG_CONFIG_HOME", env.path("config"))
        .env("TETHER_CGROUP", "off");
    // The try's 8 s, its burn and the command's 2 s after it: more than the usual deadline
    // on a loaded machine.
    let run = env
        .spawn_captured(exec)
        .wait_within(&env, Duration::from_secs(90));
    let record = load_complete(&env.command_dir());
    assert_eq!(
        run.code(),
        0,
        "{}: {:?}",
        run.stderr_text(),
        kinds(&record.events)
    );
    assert!(burned.exists(), "the probe burned its CPU");
    let over = (record.events.iter()).any(|e| matches!(e.kind, EventKind::BudgetExceeded { .. }));
    assert!(!over, "{:?}", kinds(&record.events));
    env.finish();
}

#[test]
fn a_sleep_is_stopped_by_its_time_budget() {
    let env = TestEnv::new("budget_time");
    let run = exec(&env, &["--max-time", "1s"], &["sleep", "30"]);
    assert_eq!(run.code(), 143, "{}", run.stderr_text());
    // The caller is told who stopped it: 143 alone does not say.
    let said = run.stderr_text();
    assert!(
        said.contains("tether: stopped by its budget: max_time 1.0s reached"),
        "{said}"
    );
    let (budget, limit, used) = stopped_by_budget(&env.command_dir());
    assert_eq!((budget, limit), (Budget::Time, 1000));
    assert!(used >= 1000, "{used}");
    env.finish();
}

/// A command that ignores SIGTERM is killed when grace is over, as for any stop: 137.
#[test]
fn a_budget_then_kill_after_grace_for_a_command_that_ignores_term() {
    let env = TestEnv::new("budget_kill");
    let script = "trap '' TERM; while :; do sleep 0.1; done";
    let run = exec(
        &env,
        &["--max-time", "500ms", "--grace", "500ms"],
        &["bash", "-c", script],
    );
    assert_eq!(run.code(), 137, "{}", run.stderr_text());
    let (budget, ..) = stopped_by_budget(&env.command_dir());
    assert_eq!(budget, Budget::Time);
    let record = load_complete(&env.command_dir());
    assert!(record.result.as_ref().unwrap().hard_killed);
    env.finish();
}

#[test]
fn a_flood_is_stopped_by_its_output_budget_not_its_journal_cap() {
    let env = TestEnv::new("budget_output");
    let run = exec(
        &env,
        &["--output-budget", "64K", "--json"],
        &["sh", "-c", "yes"],
    );
    assert_eq!(run.code(), 143, "{}", run.stderr_text());
    let (budget, limit, used) = stopped_by_budget(&env.command_dir());
    assert_eq!((budget, limit), (Budget::Output, 64 << 10));
    assert!(used > limit, "{used}");
    // The journal cap is another thing: `--max-output` alone stops nothing.
    let run = exec(
        &env,
        &["--max-output", "1K", "--session", "cap"],
        &["sh", "-c", "seq 1 20000"],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr_text());
    env.finish();
}

/// An agent's shell call (the shim) gets the user's `[budgets]`: its forgotten `yes` is
/// stopped by CPU without a human, and dies by SIGTERM as bash would show its caller.
#[test]
fn the_user_configs_budgets_apply_to_a_shim_call() {
    let env = TestEnv::new("budget_shim");
    user_config(&env, "[budgets]\nmax_cpu = \"1s\"\n");
    let mut shim = env.shim(Path::new(BIN), &["sh", "-c", "yes > /dev/null"]);
    shim.env_remove("TETHER_MAX_CPU");
    let run = env.spawn_captured(shim).wait(&env);
    assert_eq!(
        (run.status.code(), run.status.signal()),
        (None, Some(15)),
        "{}",
        run.stderr_text()
    );
    let (budget, limit, _) = stopped_by_budget(&env.command_dir());
    assert_eq!((budget, limit), (Budget::Cpu, 1000));
    // A command's own setting wins over the default: `off` turns it off.
    let mut exec = env.exec_command(
        &["--max-cpu", "off", "--max-time", "1s", "--session", "own"],
        &["sh", "-c", "yes > /dev/null"],
    );
    exec.env("XDG_CONFIG_HOME", env.path("config"));
    let run = env.spawn_captured(exec).wait(&env);
    assert_eq!(run.code(), 143, "{}", run.stderr_text());
    let mut budgets: Vec<Option<Budget>> = env
        .command_dirs()
        .iter()
        .map(|dir| load_complete(dir).result.and_then(|r| r.budget))
        .collect();
    budgets.sort_by_key(|b| b.map(Budget::key));
    assert_eq!(budgets, [Some(Budget::Cpu), Some(Budget::Time)]);
    env.finish();
}

/// What a command left running, kept by `--keep-leftovers`, is still the command's: its
/// time budget, counted from the spawn, stops it there too.
#[test]
fn leftovers_kept_running_are_stopped_by_the_budget() {
    let env = TestEnv::new("budget_custody");
    let options = ["--keep-leftovers", "--max-time", "2s"];
    let run = exec(&env, &options, &["sh", "-c", "sleep 600 &"]);
    assert_eq!(
        run.code(),
        0,
        "the command itself ended well: {}",
        run.stderr_text()
    );
    let dir = env.command_dir();
    common::wait_until(&env, "result.json", || dir.join("result.json").exists());
    let record = load_complete(&dir);
    assert!(
        kinds(&record.events).contains(&"leftovers_kept"),
        "{:?}",
        kinds(&record.events)
    );
    let (budget, ..) = stopped_by_budget(&dir);
    assert_eq!(budget, Budget::Time);
    env.finish();
}
