//! The follower on simulated time: scans in, outcomes in, actions out.

use std::path::PathBuf;
use std::time::Duration;

use super::*;

const T0: u64 = 1_000_000;

fn command(number: u64, ended: bool, last_ms: u64) -> CommandScan {
    CommandScan {
        number,
        dir: PathBuf::from(format!("/s/{number:02}-c")),
        ended,
        failed: false,
        agent: false,
        last_ms,
    }
}

fn session(id: &str, commands: Vec<CommandScan>) -> SessionScan {
    SessionScan {
        id: id.into(),
        started_ms: T0,
        commands,
    }
}

fn follower(limits: Limits) -> Follower {
    Follower::new(limits)
}

fn follow(f: &mut Follower, scan: SessionScan, cursor: Cursor) {
    f.handle_cursor(&scan.id.clone(), cursor);
    f.handle_session(scan);
}

/// Every action due at `now`: the batch sent (if one was), the cursors written, what was said.
#[derive(Debug, Default)]
struct Step {
    sent: Option<Vec<Planned>>,
    cursors: Vec<(String, Cursor)>,
    said: Vec<String>,
}

fn step(f: &mut Follower, now: u64) -> Step {
    let mut out = Step::default();
    while let Some(action) = f.poll_action(now) {
        match action {
            Action::Send(batch) => {
                assert!(out.sent.is_none(), "two batches in flight");
                out.sent = Some(batch);
            }
            Action::WriteCursor { session, cursor } => out.cursors.push((session, cursor)),
            Action::Say(text) => out.said.push(text),
        }
    }
    out
}

/// The batch sent once the gather delay that starts at `now` is over.
fn gathered(f: &mut Follower, now: u64) -> Vec<Planned> {
    assert!(
        step(f, now).sent.is_none(),
        "a batch before the gather delay"
    );
    step(f, now + 200)
        .sent
        .expect("a batch after the gather delay")
}

fn numbers(batch: &[Planned]) -> Vec<u64> {
    batch
        .iter()
        .filter_map(|p| match p {
            Planned::Command { number, .. } => Some(*number),
            Planned::Session { .. } => None,
        })
        .collect()
}

fn accepted() -> Sent {
    Sent::Accepted {
        rejected: 0,
        message: None,
    }
}

fn retry(after: Option<Duration>) -> Sent {
    Sent::Retry {
        after,
        why: "connection refused".into(),
    }
}

#[test]
fn a_burst_is_one_batch_after_the_gather_delay() {
    let mut f = follower(Limits::default());
    follow(
        &mut f,
        session("s", vec![command(1, true, T0)]),
        Cursor::default(),
    );
    assert!(
        step(&mut f, T0).sent.is_none(),
        "the first waits for others"
    );
    assert_eq!(f.poll_timeout(), Some(T0 + 200));
    for n in 2..=40 {
        f.handle_command("s", command(n, true, T0 + n));
        assert!(step(&mut f, T0 + n).sent.is_none());
    }
    let sent = step(&mut f, T0 + 200).sent.unwrap();
    assert_eq!(numbers(&sent), (1..=40).collect::<Vec<_>>());
    assert_eq!(
        f.poll_timeout(),
        None,
        "nothing is waited for while a batch is out"
    );
}

#[test]
fn a_full_batch_goes_at_once_and_the_rest_follows() {
    let mut f = follower(Limits::default());
    let commands = (1..=200).map(|n| command(n, true, T0)).collect();
    follow(&mut f, session("s", commands), Cursor::default());
    let first = step(&mut f, T0).sent.unwrap();
    assert_eq!(first.len(), 128);
    f.handle_sent(T0 + 5, accepted());
    let step2 = step(&mut f, T0 + 5);
    assert_eq!(step2.cursors[0].1.sent_below, 129);
    // 72 left: less than a batch, gathered as any other.
    assert!(step2.sent.is_none());
    let second = step(&mut f, T0 + 205).sent.unwrap();
    assert_eq!(second.len(), 72);
    f.handle_sent(T0 + 210, accepted());
    assert_eq!(step(&mut f, T0 + 210).cursors[0].1.sent_below, 201);
    assert_eq!(f.backlog(T0 + 210), 0);
}

#[test]
fn retries_back_off_doubling_to_the_cap_and_honour_retry_after() {
    let limits = Limits {
        max_backoff: Duration::from_secs(4),
        ..Limits::default()
    };
    let mut f = follower(limits);
    follow(
        &mut f,
        session("s", vec![command(1, true, T0)]),
        Cursor::default(),
    );
    let batch = gathered(&mut f, T0);
    let mut now = T0 + 200;
    let mut waits = Vec::new();
    for _ in 0..5 {
        f.handle_sent(now, retry(None));
        let said = step(&mut f, now);
        assert!(said.sent.is_none() && said.cursors.is_empty());
        let at = f.poll_timeout().unwrap();
        assert!(
            step(&mut f, at - 1).sent.is_none(),
            "nothing before the backoff ends"
        );
        waits.push(at - now);
        now = at;
        assert_eq!(
            step(&mut f, now).sent.as_ref(),
            Some(&batch),
            "the same batch again"
        );
    }
    assert_eq!(waits, [500, 1000, 2000, 4000, 4000]);
    // Retry-After is honoured, up to the cap.
    f.handle_sent(now, retry(Some(Duration::from_secs(3))));
    step(&mut f, now);
    assert_eq!(f.poll_timeout(), Some(now + 3000));
    now += 3000;
    step(&mut f, now).sent.unwrap();
    f.handle_sent(now, retry(Some(Duration::from_secs(600))));
    step(&mut f, now);
    assert_eq!(f.poll_timeout(), Some(now + 4000));
    assert_eq!(f.counts().retries, 7);
    assert!(f.counts().last_error.is_some());
    assert!(f.cursor("s").unwrap().sent.is_empty() && f.cursor("s").unwrap().sent_below == 1);
}

#[test]
fn the_cursor_moves_only_when_the_endpoint_accepts() {
    let mut f = follower(Limits::default());
    follow(
        &mut f,
        session("s", vec![command(1, true, T0)]),
        Cursor::default(),
    );
    gathered(&mut f, T0);
    f.handle_sent(T0 + 300, retry(None));
    assert!(step(&mut f, T0 + 300).cursors.is_empty());
    step(&mut f, T0 + 800).sent.unwrap();
    f.handle_sent(T0 + 900, accepted());
    let done = step(&mut f, T0 + 900);
    assert_eq!(done.cursors.len(), 1);
    assert!(done.cursors[0].1.has(1));
    assert_eq!(f.counts().failing, 0);
}

#[test]
fn a_refused_batch_is_skipped_after_three_retries_and_counted() {
    let mut f = follower(Limits::default());
    follow(
        &mut f,
        session("s", vec![command(1, true, T0)]),
        Cursor::default(),
    );
    step(&mut f, T0);
    let mut now = T0 + 200;
    for try_ in 1..=4 {
        assert!(step(&mut f, now).sent.is_some(), "try {try_}");
        f.handle_sent(
            now,
            Sent::Refused {
                why: "400 Bad Request".into(),
            },
        );
        if try_ < 4 {
            assert!(step(&mut f, now).cursors.is_empty());
            now = f.poll_timeout().unwrap();
        }
    }
    let skipped = step(&mut f, now);
    assert!(
        skipped.said.iter().any(|s| s.contains("skipped")),
        "{:?}",
        skipped.said
    );
    assert!(
        skipped.cursors[0].1.has(1),
        "a skipped batch is not sent again"
    );
    assert_eq!(f.counts().spans_refused, 1);
    assert_eq!(f.counts().spans_sent, 0);
    assert!(f.idle(now));
}

#[test]
fn a_restart_from_cursors_sends_only_the_rest() {
    let mut cursor = Cursor::default();
    for n in [1, 2, 3, 5] {
        cursor.mark(n);
    }
    let mut f = follower(Limits::default());
    let commands = (1..=6).map(|n| command(n, true, T0)).collect();
    follow(&mut f, session("s", commands), cursor);
    assert_eq!(f.backlog(T0), 2);
    assert_eq!(numbers(&gathered(&mut f, T0)), [4, 6]);
}

#[test]
fn running_commands_wait_for_their_end() {
    let mut f = follower(Limits::default());
    follow(
        &mut f,
        session("s", vec![command(1, false, T0), command(2, true, T0)]),
        Cursor::default(),
    );
    assert_eq!(f.running(), 1);
    assert_eq!(numbers(&gathered(&mut f, T0)), [2]);
    f.handle_sent(T0 + 210, accepted());
    step(&mut f, T0 + 210);
    assert!(f.idle(T0 + 210));
    assert_eq!(f.poll_timeout(), None, "no timer while nothing is due");
}

#[test]
fn a_plain_session_is_sent_once_quiet_for_session_quiet() {
    let mut f = follower(Limits::default());
    let mut failed = command(2, true, T0 + 1000);
    failed.failed = true;
    follow(
        &mut f,
        session("s", vec![command(1, true, T0), failed]),
        Cursor::default(),
    );
    gathered(&mut f, T0 + 800);
    f.handle_sent(T0 + 1000, accepted());
    step(&mut f, T0 + 1000);
    let quiet_at = T0 + 1000 + 60_000;
    assert_eq!(f.poll_timeout(), Some(quiet_at));
    assert!(step(&mut f, quiet_at - 1).sent.is_none());
    // A command starting meanwhile puts it off.
    f.handle_command("s", command(3, false, quiet_at - 1));
    assert_eq!(f.poll_timeout(), None);
    f.handle_command("s", command(3, true, quiet_at + 10));
    step(&mut f, quiet_at + 10);
    let sent = step(&mut f, quiet_at + 210).sent.unwrap();
    assert_eq!(numbers(&sent), [3], "its root not before it is quiet");
    f.handle_sent(quiet_at + 210, accepted());
    step(&mut f, quiet_at + 210);
    let later = quiet_at + 10 + 60_000;
    step(&mut f, later);
    let sent = step(&mut f, later + 200).sent.unwrap();
    assert!(matches!(
        &sent[..],
        [Planned::Session { root: SessionRoot { commands: 3, failed: 1, ended_ms, .. }, .. }] if *ended_ms == quiet_at + 10
    ));
    f.handle_sent(later + 200, accepted());
    let written = step(&mut f, later + 200);
    assert!(written.cursors[0].1.session_sent);
    assert_eq!(f.poll_timeout(), None);
}

#[test]
fn an_agent_session_is_rooted_in_its_agent_once_it_ended_and_nothing_runs() {
    let mut f = follower(Limits::default());
    let mut agent = command(1, false, T0);
    agent.agent = true;
    follow(
        &mut f,
        session("a", vec![agent.clone(), command(2, true, T0 + 5)]),
        Cursor::default(),
    );
    assert_eq!(numbers(&gathered(&mut f, T0)), [2]);
    f.handle_sent(T0 + 200, accepted());
    step(&mut f, T0 + 200);
    agent.ended = true;
    agent.last_ms = T0 + 900;
    f.handle_command("a", agent);
    // A shell command still runs: the root waits for it.
    f.handle_command("a", command(3, false, T0 + 800));
    assert!(step(&mut f, T0 + 2000).sent.is_none());
    f.handle_command("a", command(3, true, T0 + 950));
    step(&mut f, T0 + 2000);
    let sent = step(&mut f, T0 + 2200).sent.unwrap();
    assert!(matches!(
        &sent[..],
        [
            Planned::Command {
                number: 1,
                root: true,
                ..
            },
            Planned::Command {
                number: 3,
                root: false,
                ..
            }
        ]
    ));
    f.handle_sent(T0 + 2200, accepted());
    let cursor = &step(&mut f, T0 + 2200).cursors[0].1;
    assert!(cursor.session_sent && cursor.sent_below == 4);
    assert!(f.idle(T0 + 100_000));
}

#[test]
fn a_complete_session_is_forgotten_but_its_cursor_kept() {
    let mut cursor = Cursor::default();
    cursor.mark(1);
    cursor.session_sent = true;
    let mut f = follower(Limits::default());
    follow(&mut f, session("s", vec![command(1, true, T0)]), cursor);
    assert_eq!(f.running() + f.backlog(T0), 0);
    // A command arriving later is sent; the root is not sent twice.
    f.handle_command("s", command(2, true, T0 + 5));
    step(&mut f, T0 + 5);
    assert_eq!(numbers(&step(&mut f, T0 + 205).sent.unwrap()), [2]);
    f.handle_sent(T0 + 205, accepted());
    step(&mut f, T0 + 205);
    assert!(f.idle(T0 + 1_000_000));
}

#[test]
fn an_agent_sent_before_it_was_known_as_one_sets_no_timer() {
    let mut cursor = Cursor::default();
    cursor.mark(1);
    let mut agent = command(1, true, T0);
    agent.agent = true;
    let mut f = follower(Limits::default());
    follow(&mut f, session("a", vec![agent]), cursor);
    assert!(step(&mut f, T0 + 100_000).sent.is_none());
    assert_eq!(
        f.poll_timeout(),
        None,
        "a due time that nothing answers would spin"
    );
    assert!(f.idle(T0 + 100_000));
}

#[test]
fn a_bare_number_made_after_its_final_name_does_not_replace_it() {
    // 07 reserved, then 07-c: the final name replaces the reservation.
    let mut reserved = command(7, false, T0);
    reserved.dir = PathBuf::from("/s/07");
    let mut f = follower(Limits::default());
    follow(
        &mut f,
        session("s", vec![reserved.clone()]),
        Cursor::default(),
    );
    f.handle_command("s", command(7, true, T0 + 10));
    assert!(step(&mut f, T0 + 10).sent.is_none(), "the gather delay");
    // Another shim's 07, made after the rename and removed again: not the command.
    f.handle_command("s", reserved);
    let sent = step(&mut f, T0 + 210).sent.expect("07-c is sent");
    assert_eq!(numbers(&sent), [7]);
    // A listing that holds both keeps the final name too.
    let mut bare = command(8, false, T0);
    bare.dir = PathBuf::from("/s/08");
    let mut g = follower(Limits::default());
    follow(
        &mut g,
        session("s", vec![command(8, true, T0), bare]),
        Cursor::default(),
    );
    assert_eq!(numbers(&gathered(&mut g, T0)), [8]);
}
