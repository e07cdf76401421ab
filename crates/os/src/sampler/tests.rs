//! Sampling real processes: each test starts its own children, samples with the test
//! process as the "broker", and kills and reaps everything it started.

use std::process::{Child, Command};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid as NixPid;
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::sync::mpsc::error::TryRecvError;

use super::*;

/// How long a test waits for what must come: what a loaded machine (parallel builds and
/// tests) meets, as the integration tests' `DEADLINE`. The sleeps the tests start outlive
/// it, and are killed at the end.
const DEADLINE: Duration = Duration::from_secs(30);

fn me() -> i32 {
    std::process::id() as i32
}

/// Samples until `found` accepts the test process's tree, for up to [`DEADLINE`].
fn sample_until(sampler: &mut Sampler, found: impl Fn(&[ProcessInfo]) -> bool) -> Vec<ProcessInfo> {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let snapshot = sampler.sample(&[me()]);
        let tree = snapshot.trees.get(&me()).cloned().unwrap_or_default();
        if found(&tree) {
            return tree;
        }
        assert!(
            Instant::now() < deadline,
            "never matched; last tree: {tree:#?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn children_of(tree: &[ProcessInfo], ppid: i32) -> Vec<&ProcessInfo> {
    tree.iter().filter(|p| p.ppid == ppid).collect()
}

/// SIGKILLs `descendants` by pid, lets `child` (their parent shell) reap them and exit, or
/// kills it too, reaps it, and checks that nothing started by the test is left.
fn kill_and_reap(mut child: Child, descendants: &[(i32, u64)]) {
    for &(pid, _) in descendants {
        let _ = kill(NixPid::from_raw(pid), Signal::SIGKILL);
    }
    let deadline = Instant::now() + Duration::from_secs(2);
    while child.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = child.kill();
    child.wait().expect("the test's child can be reaped");
    let deadline = Instant::now() + DEADLINE;
    for &(pid, start_ms) in descendants {
        while still_running(pid, start_ms) {
            assert!(Instant::now() < deadline, "pid {pid} outlived the test");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// The process `pid` that started at `start_ms` still runs (a zombie does not count; a
/// reused pid belongs to another process).
fn still_running(pid: i32, start_ms: u64) -> bool {
    crate::procfs::read_stat(pid).is_some_and(|s| {
        !s.is_zombie() && crate::procfs::start_time_ms(&s).abs_diff(start_ms) < 1000
    })
}

#[test]
fn finds_a_shell_and_its_two_sleeps() {
    let started = crate::clock::now_ms();
    let child = Command::new("sh")
        .args(["-c", "sleep 60 & sleep 60 & wait"])
        .spawn()
        .expect("sh runs");
    let sh = child.id() as i32;
    let mut sampler = Sampler::new();
    let tree = sample_until(&mut sampler, |tree| {
        let sleeps = children_of(tree, sh);
        // Right after exec a process can show no resident memory yet: wait until it has.
        sleeps.len() == 2
            && sleeps
                .iter()
                .all(|p| p.argv == ["sleep", "60"] && p.rss_bytes > 0)
    });

    assert_eq!(tree[0].pid, me(), "the broker comes first");
    let shell = tree
        .iter()
        .find(|p| p.pid == sh)
        .expect("sh is in the tree");
    let sleeps = children_of(&tree, sh);
    let my_group = nix::unistd::getpgrp().as_raw();
    assert_eq!(shell.ppid, me());
    assert_eq!(shell.pgid, my_group);
    assert_eq!(shell.argv, ["sh", "-c", "sleep 60 & sleep 60 & wait"]);
    for p in std::iter::once(shell).chain(sleeps.iter().copied()) {
        assert!(matches!(p.state, 'S' | 'R'), "{p:?}");
        assert!(p.rss_bytes > 0 && p.rss_bytes < 1 << 30, "{p:?}");
        assert!(
            p.cpu_percent.is_finite() && (0.0..=5.0).contains(&p.cpu_percent),
            "{p:?}"
        );
        assert!(
            p.start_ms + 2_000 >= started && p.start_ms <= crate::clock::now_ms(),
            "{p:?}"
        );
        assert_eq!(p.pgid, my_group);
    }
    // A second sample gives the same processes the same start times.
    let again = sampler.sample(&[me()]);
    let again_sh = again.trees[&me()].iter().find(|p| p.pid == sh).unwrap();
    assert_eq!(again_sh.start_ms, shell.start_ms);

    let sleeps: Vec<(i32, u64)> = sleeps.iter().map(|p| (p.pid, p.start_ms)).collect();
    kill_and_reap(child, &sleeps);
    assert!(!still_running(sh, shell.start_ms));
    let pids: Vec<i32> = sleeps.iter().map(|&(pid, _)| pid).chain([sh]).collect();
    let after = sampler.sample(&[me()]);
    assert!(
        after.trees[&me()].iter().all(|p| !pids.contains(&p.pid)),
        "killed processes are no longer sampled"
    );
}

#[test]
fn measures_cpu_per_core() {
    let child = Command::new("sh")
        .args(["-c", "while :; do :; done"])
        .spawn()
        .expect("sh runs");
    let pid = child.id() as i32;
    let mut sampler = Sampler::new();
    let first = sample_until(&mut sampler, |tree| tree.iter().any(|p| p.pid == pid));
    let start_ms = first.iter().find(|p| p.pid == pid).unwrap().start_ms;
    std::thread::sleep(Duration::from_millis(500));
    let snapshot = sampler.sample(&[me()]);
    let busy = snapshot.trees[&me()].iter().find(|p| p.pid == pid).cloned();
    kill_and_reap(child, &[(pid, start_ms)]);
    let busy = busy.expect("the busy loop is sampled");
    // One spinning process is at most about one core, however many cores there are; on a
    // machine busy with other work it gets only its share of one, so the floor only says
    // that its time was counted at all.
    assert!(
        busy.cpu_percent > 2.0 && busy.cpu_percent <= 110.0,
        "{busy:?}"
    );
}

#[test]
fn includes_zombies() {
    let mut child = Command::new("true").spawn().expect("true runs");
    let pid = child.id() as i32;
    let mut sampler = Sampler::new();
    let tree = sample_until(&mut sampler, |tree| {
        tree.iter().any(|p| p.pid == pid && p.state == 'Z')
    });
    let zombie = tree.iter().find(|p| p.pid == pid).unwrap();
    assert!(!zombie.argv.is_empty(), "{zombie:?}");
    child.wait().expect("the zombie can be reaped");
}

#[test]
fn argv_follows_an_exec() {
    // The shell waits for a line on stdin before it execs, so the first sample sees it as
    // a shell however loaded the machine is.
    let mut child = Command::new("sh")
        .args(["-c", "read go; exec sleep 60"])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .expect("sh runs");
    let pid = child.id() as i32;
    let mut sampler = Sampler::new();
    let before = sample_until(&mut sampler, |tree| {
        tree.iter().any(|p| p.pid == pid && p.argv[0] == "sh")
    });
    let start_ms = before.iter().find(|p| p.pid == pid).unwrap().start_ms;
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().expect("piped stdin");
        stdin.write_all(b"go\n").expect("the shell reads its line");
    }
    sample_until(&mut sampler, |tree| {
        tree.iter()
            .any(|p| p.pid == pid && p.argv == ["sleep", "60"])
    });
    kill_and_reap(child, &[(pid, start_ms)]);
}

#[test]
fn a_huge_argv_is_cut_as_the_journal_cuts_it() {
    let big = "z".repeat(100_000);
    // `; :` keeps the shell from exec'ing its sleep, so it keeps its own argv.
    let child = Command::new("sh")
        .args(["-c", "sleep 60; :", "sh", &big])
        .spawn()
        .expect("sh runs");
    let pid = child.id() as i32;
    let mut sampler = Sampler::new();
    // Its sleep too, so that it is killed by pid rather than left behind.
    let tree = sample_until(&mut sampler, |tree| {
        tree.iter().any(|p| p.pid == pid && p.argv[0] == "sh") && children_of(tree, pid).len() == 1
    });
    let shell = tree.iter().find(|p| p.pid == pid).unwrap().clone();
    let sleeps: Vec<(i32, u64)> = children_of(&tree, pid)
        .iter()
        .map(|p| (p.pid, p.start_ms))
        .collect();
    kill_and_reap(child, &sleeps);
    let expected = tether_protocol::protocol::capped_argv(
        ["sh", "-c", "sleep 60; :", "sh", &big]
            .map(String::from)
            .to_vec(),
    );
    assert_eq!(shell.argv, expected);
}

#[test]
fn absent_brokers_have_no_tree() {
    let mut sampler = Sampler::new();
    // Pid 0 is never a process in /proc.
    let snapshot = sampler.sample(&[0, me(), me()]);
    assert!(!snapshot.trees.contains_key(&0));
    assert_eq!(snapshot.trees[&me()][0].pid, me());
}

#[test]
fn thread_samples_on_request_and_stops_on_drop() {
    let (handle, mut snapshots) = spawn_sampler(Duration::from_millis(50));
    let next = |snapshots: &mut UnboundedReceiver<Snapshot>| {
        let deadline = Instant::now() + DEADLINE;
        loop {
            match snapshots.try_recv() {
                Ok(snapshot) => return snapshot,
                Err(e) => assert!(
                    Instant::now() < deadline && e == TryRecvError::Empty,
                    "no snapshot: {e:?}"
                ),
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    };
    handle.set_brokers(vec![me()]);
    assert!(next(&mut snapshots).trees.contains_key(&me()));
    // Periodic samples keep coming while something is watched.
    assert!(next(&mut snapshots).trees.contains_key(&me()));

    handle.set_brokers(Vec::new());
    let deadline = Instant::now() + DEADLINE;
    while !next(&mut snapshots).trees.is_empty() {
        assert!(Instant::now() < deadline);
    }
    // Idle: nothing is sampled until asked.
    std::thread::sleep(Duration::from_millis(200));
    assert!(snapshots.try_recv().is_err());
    handle.sample_now();
    assert!(next(&mut snapshots).trees.is_empty());

    drop(handle);
    while let Ok(_late) = snapshots.try_recv() {}
    assert_eq!(
        snapshots.try_recv().unwrap_err(),
        TryRecvError::Disconnected
    );
}

#[test]
fn cpu_is_measured_between_samples_per_core() {
    let t0 = Instant::now();
    let mut known = Known {
        comm: String::new(),
        argv: Vec::new(),
        start_ms: 10_000,
        cpu_baseline: None,
        cpu_percent: 0.0,
    };
    // First sight, 2 s after start with 500 ms of CPU: 25 % on average.
    known.measure_cpu(500, t0, 12_000);
    assert_eq!(known.cpu_percent, 25.0);
    // Two threads busy for a whole second: 200 %.
    known.measure_cpu(2_500, t0 + Duration::from_secs(1), 13_000);
    assert_eq!(known.cpu_percent, 200.0);
    // 50 ms later is too soon to tell: the figure and baseline stand...
    known.measure_cpu(2_550, t0 + Duration::from_millis(1_050), 13_050);
    assert_eq!(known.cpu_percent, 200.0);
    // ...so the next figure spans the whole second since the last one.
    known.measure_cpu(2_600, t0 + Duration::from_secs(2), 14_000);
    assert_eq!(known.cpu_percent, 10.0);
    // A process seen within 100 ms of its start shows 0 until there is a real span.
    let mut young = Known {
        start_ms: 10_000,
        cpu_baseline: None,
        cpu_percent: 0.0,
        comm: String::new(),
        argv: Vec::new(),
    };
    young.measure_cpu(10, t0, 10_050);
    assert_eq!(young.cpu_percent, 0.0);
    young.measure_cpu(210, t0 + Duration::from_millis(200), 10_250);
    assert_eq!(young.cpu_percent, 100.0);
}

#[test]
fn a_listed_broker_below_another_has_its_own_tree_not_a_part_of_the_others() {
    // The test process stands for an agent's broker; the shell, for the broker of one of the
    // agent's shell calls below it; the sleep, for that call's command.
    let child = Command::new("sh")
        .args(["-c", "sleep 60 & wait"])
        .spawn()
        .expect("sh runs");
    let sh = child.id() as i32;
    let mut sampler = Sampler::new();
    let deadline = Instant::now() + DEADLINE;
    let snapshot = loop {
        let snapshot = sampler.sample(&[me(), sh]);
        if snapshot
            .trees
            .get(&sh)
            .is_some_and(|tree| tree.iter().any(|p| p.argv == ["sleep", "60"]))
        {
            break snapshot;
        }
        assert!(Instant::now() < deadline, "the sleep never showed");
        std::thread::sleep(Duration::from_millis(20));
    };
    let outer: Vec<i32> = snapshot.trees[&me()].iter().map(|p| p.pid).collect();
    let inner = &snapshot.trees[&sh];
    assert_eq!(inner[0].pid, sh, "the inner broker heads its own tree");
    let sleep = inner.iter().find(|p| p.argv == ["sleep", "60"]).unwrap();
    assert!(
        !outer.contains(&sh) && !outer.contains(&sleep.pid),
        "the outer tree holds the inner broker's: {outer:?}"
    );
    kill_and_reap(child, &[(sleep.pid, sleep.start_ms)]);
}

#[test]
fn a_child_that_only_takes_a_keepers_name_is_in_the_tree() {
    // A copy of sleep under the keeper's name: its comm is the keeper's, but it runs another
    // program than the broker's, so it is the command's (a way to hide a CPU hog, else).
    let dir = crate::testing::private_tempdir();
    let keeper_name = KEEPER_COMM.to_str().expect("an ASCII name");
    let keeper_path = dir.path().join(keeper_name);
    // Copied by a child process: a descriptor of ours open for writing, handed to a child
    // another test forks meanwhile, would make it busy (ETXTBSY) until that child execs.
    let copied = Command::new("cp")
        .arg("/usr/bin/sleep")
        .arg(&keeper_path)
        .status()
        .expect("run cp");
    assert!(copied.success(), "copy sleep");
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&keeper_path, std::fs::Permissions::from_mode(0o700))
            .expect("make it the owner's alone");
    }
    let mut impostor = Command::new(&keeper_path)
        .arg("61")
        .spawn()
        .expect("the impostor runs");
    let impostor_pid = impostor.id() as i32;
    let mut sampler = Sampler::new();
    let tree = sample_until(&mut sampler, |tree| {
        tree.iter().any(|p| {
            p.pid == impostor_pid && p.argv.first().is_some_and(|a| a.ends_with(keeper_name))
        })
    });
    assert!(tree.iter().any(|p| p.pid == impostor_pid));
    let _ = impostor.kill();
    let _ = impostor.wait();
}

#[test]
fn a_brokers_keeper_is_not_in_the_tree() {
    // A keeper is a fork of its broker that names itself and never execs: here, a fork of the
    // test process, beside a plain sleep.
    // SAFETY: the child only calls async-signal-safe functions (prctl, pause, _exit).
    let keeper_pid = match unsafe { libc::fork() } {
        -1 => panic!("fork: {}", std::io::Error::last_os_error()),
        0 => unsafe {
            libc::prctl(libc::PR_SET_NAME, KEEPER_COMM.as_ptr(), 0, 0, 0);
            loop {
                libc::pause();
            }
        },
        pid => pid,
    };
    let mut plain = Command::new("sleep").arg("62").spawn().expect("sleep runs");
    let plain_pid = plain.id() as i32;
    let keeper_name = KEEPER_COMM.to_str().expect("an ASCII name");
    // The keeper must have named itself before the sample means anything.
    let deadline = Instant::now() + DEADLINE;
    while std::fs::read_to_string(format!("/proc/{keeper_pid}/comm"))
        .map_or(true, |c| c.trim_end() != keeper_name)
    {
        assert!(Instant::now() < deadline, "the keeper never named itself");
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut sampler = Sampler::new();
    let tree = sample_until(&mut sampler, |tree| tree.iter().any(|p| p.pid == plain_pid));
    let _ = kill(NixPid::from_raw(keeper_pid), Signal::SIGKILL);
    let _ = nix::sys::wait::waitpid(NixPid::from_raw(keeper_pid), None);
    let _ = plain.kill();
    let _ = plain.wait();
    assert!(
        !tree.iter().any(|p| p.pid == keeper_pid),
        "the keeper is no part of the command's tree: {tree:#?}"
    );
}
