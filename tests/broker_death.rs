//! `tether exec` when its broker cannot do its work: killed or stopped by the command itself,
//! or wedged while exec is told to stop. exec is a subreaper, so whatever the broker leaves
//! comes to exec, which stops it with the broker's own sequence.

use crate::common;

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::Stdio;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use common::journal::{events_now, signals_sent, spawned_pid};
use common::procs::{self, signal};
use common::{TestEnv, wait_for_text, wait_until};

/// The broker of a running `tether exec`: its one child.
fn broker_of(env: &TestEnv, exec: i32) -> i32 {
    let mut broker = None;
    wait_until(env, "the broker to start", || {
        broker = tether::procfs::all_processes()
            .into_iter()
            .find(|p| p.ppid == exec)
            .map(|p| p.pid);
        broker.is_some()
    });
    broker.unwrap_or_default()
}

/// N of `broker lost; cleaned up N processes` on exec's stderr.
fn cleaned_up(stderr: &str) -> usize {
    let Some(at) = stderr.find("broker lost; cleaned up ") else {
        panic!("no `broker lost; cleaned up` in: {stderr}");
    };
    let rest = &stderr[at + "broker lost; cleaned up ".len()..];
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits
        .parse()
        .unwrap_or_else(|_| panic!("no count in: {stderr}"))
}

/// Item 3 of issue 6, as written: the command SIGKILLs its broker after starting a `setsid`
/// escapee. exec stops everything the broker left, the escapee too.
#[test]
fn a_broker_killed_by_its_command_leaves_nothing_behind() {
    let env = TestEnv::new("broker_sigkilled");
    let run = env.exec(
        &[],
        &["sh", "-c", "setsid -f sleep 91; kill -9 $PPID; sleep 90"],
    );
    assert_eq!(run.code(), 125, "stderr: {}", run.stderr_text());
    let stderr = run.stderr_text();
    // The escapee at least: sh dies of its death signal with the broker, often before the
    // front end gets to it (then it is not counted), and `sleep 90` may not have started.
    let cleaned = cleaned_up(&stderr);
    assert!(cleaned >= 1, "{stderr}");
    // It did not wait for `sleep 90`: `env.exec` fails past its DEADLINE, well short of it.
    env.finish();
}

/// The same with TERM ignored everywhere: the leftovers get the whole sequence, KILL after
/// the grace period.
#[test]
fn a_dead_brokers_term_ignoring_leftovers_are_killed_after_grace() {
    let env = TestEnv::new("broker_sigkilled_stubborn");
    let script = r#"trap '' TERM
setsid -f sh -c 'trap "" TERM; sleep 91'
sh -c 'trap "" TERM; sleep 92' &
sleep 0.2
kill -9 $PPID
sleep 90"#;
    let run = env.exec(&["--grace", "500ms"], &["sh", "-c", script]);
    assert_eq!(run.code(), 125, "stderr: {}", run.stderr_text());
    assert!(
        run.stderr_text().contains("broker lost; cleaned up"),
        "{}",
        run.stderr_text()
    );
    assert!(
        run.elapsed >= Duration::from_millis(500),
        "KILL came before the grace period ended: {:?}",
        run.elapsed
    );
    env.finish();
}

/// Item 4 of issue 6, as written: the command stops its broker. exec notices that the broker
/// no longer answers, kills it, and stops the tree; nothing is left, the broker included.
#[test]
fn a_broker_stopped_by_its_command_is_killed_and_the_tree_stopped() {
    let env = TestEnv::new("broker_sigstopped");
    let running = env.spawn_exec(
        &["--no-output-timeout", "1s"],
        &["sh", "-c", "kill -STOP $PPID; sleep 100"],
    );
    let broker = broker_of(&env, running.pid());
    let run = running.wait_within(&env, Duration::from_secs(20));
    assert_eq!(run.code(), 125, "stderr: {}", run.stderr_text());
    let stderr = run.stderr_text();
    assert!(
        stderr.contains("the broker stopped answering and was killed; broker lost; cleaned up"),
        "{stderr}"
    );
    // How many looks it takes is the conversation's machine test (on a fake clock); here,
    // that the kernel's `T` is seen, the broker killed and the tree stopped.
    assert!(procs::is_gone(broker), "the stopped broker was left behind");
    env.finish();
}

/// SIGTERM to exec ends it, even when the broker cannot act on it: the broker is killed
/// and the TERM-ignoring tree KILLed by exec. That exec gives up grace + STOP_SLACK after
/// the stop is the conversation's machine test, on a fake clock.
#[test]
fn sigterm_ends_exec_despite_a_stopped_broker() {
    let env = TestEnv::new("broker_stopped_sigterm");
    let running = env.spawn_exec(
        &["--grace", "1s"],
        &[
            "sh",
            "-c",
            "trap '' TERM; setsid -f sh -c 'trap \"\" TERM; sleep 91'; sleep 100",
        ],
    );
    let broker = broker_of(&env, running.pid());
    let dir = env.wait_command_dir();
    wait_until(&env, "the command to run", || {
        events_now(&dir)
            .iter()
            .any(|e| matches!(e.kind, tether::protocol::EventKind::Spawned { .. }))
    });
    signal(broker, Signal::SIGSTOP);
    wait_until(&env, "the broker to stop", || {
        procs::state(broker) == Some(b'T')
    });
    signal(running.pid(), Signal::SIGTERM);
    let run = running.wait(&env);
    assert_eq!(run.code(), 125, "stderr: {}", run.stderr_text());
    assert!(
        run.stderr_text().contains("broker lost; cleaned up"),
        "{}",
        run.stderr_text()
    );
    assert!(procs::is_gone(broker));
    env.finish();
}

/// Ctrl-Z on exec pauses the command (through the broker, journaled) and stops exec, as a
/// shell expects of a job; SIGCONT resumes both.
#[test]
fn ctrl_z_pauses_the_command_and_sigcont_resumes_it() {
    let env = TestEnv::new("exec_ctrl_z");
    // A job of its own under the test, as a shell would start it: its group is not orphaned,
    // so it may stop (exec ignores TSTP in an orphaned group, as the kernel would).
    let stderr_path = env.path("ctrl-z.stderr");
    let child = env
        .exec_command(
            &["--grace", "5s"],
            &["sh", "-c", "echo ready; while :; do sleep 0.05; done"],
        )
        .process_group(0)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&stderr_path).expect("create the stderr capture"))
        .spawn()
        .expect("start tether exec");
    let running = common::RunningExec {
        child,
        started: Instant::now(),
        stdout_path: env.path("ctrl-z.stdout"),
        stderr_path,
    };
    let dir = env.wait_command_dir();
    wait_for_text(&env, &dir.join("stdout.log"), "ready");
    let command = spawned_pid(&events_now(&dir));
    let exec = running.pid();

    // What each was, and what the journal had, if they never get there.
    let tell = || {
        let state = |pid| procs::state(pid).map_or('-', char::from);
        let events: Vec<String> = (events_now(&dir).iter())
            .map(|e| format!("{:?}", e.kind))
            .filter(|e| !e.starts_with("Output") && !e.starts_with("Tree"))
            .collect();
        let (exec, command) = (state(exec), state(command));
        format!("exec {exec}, the command {command}; journal: {events:?}")
    };
    signal(exec, Signal::SIGTSTP);
    common::wait_until_telling(&env, "exec and the command to stop", tell, || {
        procs::state(exec) == Some(b'T') && procs::state(command) == Some(b'T')
    });
    signal(exec, Signal::SIGCONT);
    common::wait_until_telling(&env, "exec and the command to go on", tell, || {
        ![procs::state(exec), procs::state(command)].contains(&Some(b'T'))
    });
    signal(exec, Signal::SIGTERM);
    let run = running.wait(&env);
    assert_eq!(run.code(), 143, "stderr: {}", run.stderr_text());
    let sent: Vec<String> = signals_sent(&events_now(&dir))
        .into_iter()
        .map(|s| s.signal)
        .collect();
    assert_eq!(sent[..2], ["TSTP", "CONT"], "{sent:?}");
    env.finish();
}

/// exec blocked writing output nobody reads must not take its broker for dead, nor lose
/// what it was copying. That time spent blocked adds at most one unanswered ping, and the
/// lines waiting are read before a deadline is acted on, is the conversation's machine test
/// (on a fake clock); here, a real exec blocked on a real pipe while its command ends.
#[test]
fn exec_blocked_on_its_own_output_does_not_give_up_on_its_broker() {
    let env = TestEnv::new("exec_blocked");
    let stderr_path = env.path("blocked.stderr");
    let mut child = env
        .exec_command(&[], &["sh", "-c", "head -c 2000000 /dev/zero; echo done"])
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&stderr_path).expect("create the stderr capture"))
        .spawn()
        .expect("start tether exec");
    let mut stdout = child.stdout.take().expect("exec's stdout");
    // Nobody reads exec's output: it blocks writing it (2 MB, a pipe holds 64 KiB), sends
    // no pings, and the command ends meanwhile.
    let dir = env.wait_command_dir();
    wait_until(&env, "the command's exit, exec blocked", || {
        events_now(&dir)
            .iter()
            .any(|e| matches!(e.kind, tether::protocol::EventKind::Exit { .. }))
    });
    let mut output = Vec::new();
    stdout.read_to_end(&mut output).expect("read exec's stdout");
    let status = child.wait().expect("wait for tether exec");
    let stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
    assert_eq!(status.code(), Some(0), "stderr: {stderr}");
    assert!(!stderr.contains("broker lost"), "{stderr}");
    assert_eq!(output.len(), 2_000_005);
    env.finish();
}

/// exec's output is a socket nobody reads (an agent started by Node reads a socketpair):
/// its copy waits on the socket, the broker's tee fills, and the command waits on its own
/// pipe. The broker must still answer. When exec spliced the pipe into the socket, the
/// splice held the pipe's lock while the socket was full, and the broker's next write to the
/// pipe slept on that lock, uninterruptibly: `tether stop` got no answer and its SIGTERM to
/// the broker did nothing for as long as the reader read nothing.
#[test]
fn a_stop_is_answered_while_execs_socket_is_not_read() {
    let env = TestEnv::new("exec_socket_unread");
    let (ours, theirs) = std::os::unix::net::UnixStream::pair().expect("a socket pair");
    let mut command = env.exec_command(
        &["--session", "unread"],
        &["head", "-c", "8000000", "/dev/zero"],
    );
    let stderr_path = env.path("unread.stderr");
    let mut child = command
        .stdout(Stdio::from(std::os::fd::OwnedFd::from(theirs)))
        .stderr(std::fs::File::create(&stderr_path).expect("create the stderr capture"))
        .spawn()
        .expect("start tether exec");
    // Our copy of exec's end goes, or the socket would never reach its end.
    drop(command);
    let dir = env.wait_command_dir();
    wait_until(&env, "the spawned event", || {
        events_now(&dir)
            .iter()
            .any(|e| matches!(e.kind, tether::protocol::EventKind::Spawned { .. }))
    });
    let head = spawned_pid(&events_now(&dir));
    // Where the kernel hides wait channels (`0`), asleep is all there is to see.
    wait_until(&env, "the command to wait on its full pipe", || {
        procs::state(head) == Some(b'S')
            && std::fs::read_to_string(format!("/proc/{head}/wchan"))
                .map_or(true, |w| w.contains("pipe_write") || w.trim() == "0")
    });
    let stop = common::run_to_end(&env, env.tether(&["stop", "unread/1"]), "tether stop");
    let said = String::from_utf8_lossy(&[stop.stdout, stop.stderr].concat()).into_owned();
    assert!(stop.status.success(), "{said}");
    assert!(said.contains("stopped: SIGTERM"), "{said}");
    // exec ends without waiting for a reader that takes nothing, and only then is the
    // socket read: what exec passed on is what the socket holds.
    let mut status = None;
    wait_until(&env, "tether exec to end", || {
        status = child.try_wait().expect("wait for tether exec");
        status.is_some()
    });
    let mut read = Vec::new();
    ours.set_read_timeout(Some(common::DEADLINE))
        .expect("a deadline for the read");
    (&ours).read_to_end(&mut read).expect("read exec's output");
    let stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
    assert_eq!(status.and_then(|s| s.code()), Some(143), "stderr: {stderr}");
    // Not a byte lost: what the reader got and what exec says it did not deliver make up
    // what the command wrote, which the journal holds.
    let written = std::fs::metadata(dir.join("stdout.log")).map_or(0, |m| m.len());
    assert!(read.iter().all(|&b| b == 0));
    assert_eq!(
        read.len() as u64 + undelivered(&stderr),
        written,
        "{stderr}"
    );
    env.finish();
}

/// N of exec's `N bytes of the command's stdout were not delivered`, or 0.
fn undelivered(stderr: &str) -> u64 {
    stderr
        .find(" bytes of the command's stdout were not delivered")
        .map_or(0, |end| {
            let digits: String = stderr[..end]
                .chars()
                .rev()
                .take_while(char::is_ascii_digit)
                .collect();
            digits
                .chars()
                .rev()
                .collect::<String>()
                .parse()
                .unwrap_or(0)
        })
}

/// The pid of the one live tagged process whose command line is `cmdline`, once it runs.
fn tagged_pid(env: &TestEnv, cmdline: &str) -> i32 {
    let mut pid = None;
    wait_until(env, cmdline, || {
        pid = procs::tagged(&env.tag)
            .into_iter()
            .find(|p| p.cmdline == cmdline)
            .map(|p| p.pid);
        pid.is_some()
    });
    pid.unwrap_or_default()
}

/// `tether exec` and its broker SIGKILLed at the same instant: nobody is left to stop the
/// command's tree. The command's main process dies with its broker (PDEATHSIG); what it
/// forked runs on until a later tether (here `tether ps`) stops it, journals that, and writes
/// `result.json`. On the cgroup path the cgroup is removed too (`env.finish` checks).
fn killed_with_its_front_end_then_reclaimed(name: &str, cgroup: bool) {
    let env = TestEnv::new(name);
    if cgroup && common::cgroups::hierarchy().is_err() {
        eprintln!("no cgroup hierarchy here: the /proc path's test covers the rest");
        return;
    }
    let mut command = env.exec_command(&["--grace", "2s"], &["sh", "-c", "sleep 1000 & wait"]);
    if !cgroup {
        command.env(tether::cgroup::CGROUP_ENV, "off");
    }
    let running = env.spawn_captured(command);
    let exec = running.pid();
    let broker = broker_of(&env, exec);
    let dir = env.wait_command_dir();
    let sleep = tagged_pid(&env, "sleep 1000");
    // Journaled (the broker flushes per batch): what a later tether knows the command by.
    wait_until(&env, "the spawned event", || {
        events_now(&dir)
            .iter()
            .any(|e| matches!(e.kind, tether::protocol::EventKind::Spawned { .. }))
    });
    // Stopped first, so that neither acts on the other's death in the moment between the
    // two kills: as if both were killed at once.
    signal(broker, Signal::SIGSTOP);
    signal(exec, Signal::SIGSTOP);
    wait_until(&env, "exec and its broker to stop", || {
        procs::state(exec) == Some(b'T') && procs::state(broker) == Some(b'T')
    });
    signal(exec, Signal::SIGKILL);
    signal(broker, Signal::SIGKILL);
    let _ = running.wait(&env);

    let ps = common::run_to_end(&env, env.tether(&["ps"]), "tether ps");
    assert!(
        ps.status.success(),
        "{}",
        String::from_utf8_lossy(&ps.stderr)
    );
    // Another test's tether may have taken the command first and been killed before it was
    // done: each later tether takes it up again.
    wait_until(&env, "a later tether to finish the command", || {
        dir.join("result.json").exists()
            || common::run_to_end(&env, env.tether(&["ps"]), "tether ps")
                .status
                .success()
                && dir.join("result.json").exists()
    });
    let left = procs::wait_gone(&[sleep], common::DEADLINE);
    assert!(left.is_empty(), "the command's child runs on: {left:?}");
    let reclaimed: Vec<_> = signals_sent(&events_now(&dir))
        .into_iter()
        .filter(|s| s.origin == tether::protocol::Origin::Reclaim)
        .collect();
    assert!(
        reclaimed.iter().any(|s| s.targets.contains(&sleep)),
        "no reclaim signal_sent reached {sleep}: {reclaimed:?}; events: {}",
        String::from_utf8_lossy(&common::journal::read(&dir, "events.jsonl"))
    );
    let result = common::journal::read(&dir, "result.json");
    let result: tether::protocol::CommandResult =
        serde_json::from_slice(&result).expect("a result");
    assert_eq!(result.stopped_by, Some(tether::protocol::Origin::Reclaim));
    env.finish();
}

#[test]
fn a_command_killed_with_its_front_end_is_reclaimed_from_its_cgroup() {
    killed_with_its_front_end_then_reclaimed("reclaim_cgroup", true);
}

#[test]
fn a_command_killed_with_its_front_end_is_reclaimed_from_proc() {
    killed_with_its_front_end_then_reclaimed("reclaim_procfs", false);
}

/// The command dies the moment its broker does, with nobody to stop it: exec, which would
/// clean up, is stopped (and holds the journal, so no later tether takes it over either).
#[test]
fn the_command_dies_with_its_broker() {
    let env = TestEnv::new("pdeathsig");
    let running = env.spawn_exec(&[], &["sleep", "1000"]);
    let exec = running.pid();
    let broker = broker_of(&env, exec);
    let sleep = tagged_pid(&env, "sleep 1000");
    signal(exec, Signal::SIGSTOP);
    wait_until(&env, "exec to stop", || procs::state(exec) == Some(b'T'));
    signal(broker, Signal::SIGKILL);
    let left = procs::wait_gone(&[sleep], common::DEADLINE);
    signal(exec, Signal::SIGCONT);
    assert!(left.is_empty(), "the command outlived its broker");
    let run = running.wait(&env);
    assert_eq!(run.code(), 125, "stderr: {}", run.stderr_text());
    env.finish();
}
