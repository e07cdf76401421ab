//! A process that execs another program keeps its pid and start time; the recorded tree
//! follows it: the journal records its command line again, once, and what reads the journal
//! back (`tether open`'s replay, the exports) names it by what it became, on both
//! containment paths.

use crate::common;

use serde_json::Value;

use common::journal::{events_now, load_complete, session_of, spawned_pid, tree_entries};
use common::{TestEnv, copy_program, run_to_end, wait_until, write_script};
use tether::model::replay::command_from_record;
use tether::protocol::ContainmentMode;

/// Runs a script that waits on a FIFO until the journal has recorded it as it began, then
/// execs a copy of `sleep` named `served`, until the journal has recorded what it became;
/// then stops it and reads it back.
fn exec_recorded_again(name: &str, cgroup: Option<&str>, expected: ContainmentMode) {
    let env = TestEnv::new(name);
    let served = env.path("served");
    copy_program("/bin/sleep", &served);
    let go = env.path("go");
    nix::unistd::mkfifo(&go, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let script = env.path("serve.sh");
    write_script(
        &script,
        &format!(
            "#!/bin/sh\nread -r _ < {}\nexec {} 30\n",
            go.display(),
            served.display()
        ),
    );
    let script = script.to_string_lossy().into_owned();
    let mut command = env.exec_command(&["-n", "server"], &[&script]);
    match cgroup {
        Some(value) => command.env(tether::cgroup::CGROUP_ENV, value),
        None => command.env_remove(tether::cgroup::CGROUP_ENV),
    };
    let exec = env.spawn_captured(command);
    let dir = env.wait_command_dir();
    let served_argv = vec![served.to_string_lossy().into_owned(), "30".to_string()];
    // The script's process as the journal lists it with a command line, in order.
    let recorded = |events: &[tether::protocol::Event]| -> Vec<Vec<String>> {
        let Some(server) = events.iter().find_map(|e| match e.kind {
            tether::protocol::EventKind::Spawned { pid, .. } => Some(pid),
            _ => None,
        }) else {
            return Vec::new();
        };
        tree_entries(events)
            .into_iter()
            .filter(|p| p.pid == server && !p.argv.is_empty())
            .map(|p| p.argv)
            .collect()
    };
    let began = vec!["/bin/sh".to_string(), script.clone()];
    wait_until(&env, "the script recorded as it began", || {
        recorded(&events_now(&dir)).first() == Some(&began)
    });
    // Its line lets it go on, written once the script has the FIFO open for reading (an
    // open that would wait for a reader fails at once instead: ENXIO).
    wait_until(&env, "the script to read its FIFO", || {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits())
            .open(&go)
            .and_then(|mut fifo| fifo.write_all(b"go\n"))
            .is_ok()
    });
    wait_until(&env, "the exec recorded", || {
        recorded(&events_now(&dir)).last() == Some(&served_argv)
    });
    let stop = run_to_end(
        &env,
        env.tether(&["stop", &format!("{}/1", session_of(&dir))]),
        "tether stop",
    );
    assert!(
        stop.status.success(),
        "{}",
        String::from_utf8_lossy(&stop.stderr)
    );
    assert_eq!(exec.wait(&env).code(), 143);

    let record = load_complete(&dir);
    let mode = record.events.iter().find_map(|e| match &e.kind {
        tether::protocol::EventKind::Containment { mode, .. } => Some(*mode),
        _ => None,
    });
    assert_eq!(mode, Some(expected));
    // Before: the first command line only, `/bin/sh serve.sh`, for the whole run.
    assert_eq!(
        recorded(&record.events),
        [began, served_argv.clone()],
        "recorded as it began, and once again after its exec"
    );

    // Read back (`tether open`), the process is what it became.
    let server = spawned_pid(&record.events);
    let command = command_from_record(&record);
    let seen = command.seen_process(server).expect("the server was seen");
    assert_eq!(seen.argv, served_argv);
    assert_eq!(command.seen.iter().filter(|p| p.pid == server).count(), 1);

    // So do the exports.
    let session = session_of(&dir);
    let output = run_to_end(
        &env,
        env.tether(&["export", &session, "--format", "chrome-trace"]),
        "tether export",
    );
    assert!(output.status.success());
    let chrome: Value = serde_json::from_slice(&output.stdout).expect("chrome trace JSON");
    let events = chrome
        .get("traceEvents")
        .unwrap_or(&chrome)
        .as_array()
        .expect("trace events")
        .clone();
    let span = events
        .iter()
        .find(|e| e["cat"] == "process" && e["args"]["pid"] == server)
        .expect("the server's span");
    assert_eq!(span["args"]["argv"], Value::from(served_argv.clone()));
    env.finish();
}

#[test]
fn a_process_that_execs_is_recorded_again_in_a_cgroup() {
    if let Err(reason) = common::cgroups::hierarchy() {
        common::skip(format!("no usable cgroup v2 here ({reason})"));
        return;
    }
    exec_recorded_again("exec_cgroup", None, ContainmentMode::Cgroup);
}

#[test]
fn a_process_that_execs_is_recorded_again_on_the_proc_walk() {
    exec_recorded_again("exec_procfs", Some("off"), ContainmentMode::Procfs);
}
