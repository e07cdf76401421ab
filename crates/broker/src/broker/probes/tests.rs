//! Tries run for real (a keeper, a shell, a socket) on a current-thread runtime, as the
//! broker's loop runs them.

use std::path::Path;
use std::time::{Duration, Instant};

use super::*;

/// What the tries here are given: far more than a loaded machine needs.
const DEADLINE: Duration = Duration::from_secs(30);

fn probes(cwd: Option<&str>) -> Probes {
    let tag = format!("probes-unit-{}", std::process::id());
    Probes {
        going: None,
        dying: Vec::new(),
        shell: exec::Shell::for_tests(cwd, &[("TEST_TAG_TETHER", &tag)]),
    }
}

fn exec(shell: &str) -> ReadyProbe {
    ReadyProbe::Exec {
        shell: shell.into(),
    }
}

fn running(pid: i32) -> bool {
    // A zombie is not running: its keeper has ended, reaped or not.
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with('Z'))
    })
}

fn exists(pid: i32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// Polls `answer` (as the loop does, among its other branches) until `done`.
async fn answer_until(probes: &mut Probes, what: &str, done: impl Fn(&Probes) -> bool) {
    let deadline = Instant::now() + DEADLINE;
    while !done(probes) {
        assert!(Instant::now() < deadline, "never: {what}");
        let _ = tokio::time::timeout(Duration::from_millis(50), probes.answer()).await;
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_try_given_up_is_left_out_of_walks_until_its_keeper_is_reaped_without_waiting() {
    let mut probes = probes(None);
    probes.start(1, &exec("exec sleep 30"), DEADLINE);
    let keepers = probes.keepers();
    assert_eq!(keepers.len(), 1, "the try's keeper");
    let keeper = keepers[0];
    probes.give_up();
    // Given up, not waited for: its keeper is still the broker's child, not the command's.
    assert_eq!(probes.keepers(), [keeper], "left out of walks until reaped");
    answer_until(&mut probes, "the keeper reaped", |p| p.keepers().is_empty()).await;
    assert!(!exists(keeper), "the keeper is reaped, not a zombie");
}

#[tokio::test(flavor = "current_thread")]
async fn an_exec_try_starts_without_waiting_for_its_shell_and_says_why_it_could_not() {
    // The directory is gone: the shell's chdir fails after the start, as part of the try.
    let mut probes = probes(Some("/nonexistent/tether-probe-cwd"));
    probes.start(7, &exec("true"), DEADLINE);
    let keepers = probes.keepers();
    assert_eq!(keepers.len(), 1, "started: the keeper runs the try");
    let (attempt, outcome) = tokio::time::timeout(DEADLINE, probes.answer())
        .await
        .expect("an answer");
    assert_eq!(attempt, 7);
    let failure = outcome.expect_err("no such directory");
    assert!(failure.starts_with("cannot run sh: "), "{failure}");
    assert!(probes.keepers().is_empty());
    assert!(!running(keepers[0]) && !exists(keepers[0]), "reaped");
}

#[tokio::test(flavor = "current_thread")]
async fn an_exec_try_passes_on_exit_0_and_fails_on_another() {
    let mut probes = probes(None);
    probes.start(1, &exec("exit 0"), DEADLINE);
    let answer = tokio::time::timeout(DEADLINE, probes.answer()).await;
    assert_eq!(answer.expect("an answer"), (1, Ok("exited 0".into())));
    probes.start(2, &exec("exit 3"), DEADLINE);
    let answer = tokio::time::timeout(DEADLINE, probes.answer()).await;
    assert_eq!(answer.expect("an answer"), (2, Err("exited 3".into())));
}

#[tokio::test(flavor = "current_thread")]
async fn localhost_reaches_a_server_that_listens_on_ipv6_loopback_only() {
    let listener = std::net::TcpListener::bind("[::1]:0").expect("this machine has ::1");
    let port = listener.local_addr().expect("its address").port();
    let mut probes = probes(None);
    let probe = ReadyProbe::Tcp {
        host: "localhost".into(),
        port,
    };
    probes.start(1, &probe, DEADLINE);
    let answer = tokio::time::timeout(DEADLINE, probes.answer()).await;
    assert_eq!(
        answer.expect("an answer"),
        (1, Ok(format!("connected to [::1]:{port}")))
    );
    drop(listener);
}
