use super::*;
use tether_config::CommandConfig;
use tether_model::Status;
use tether_protocol::protocol::{AttentionKind, CommandSpec};

fn command(dir: &str, status: Status) -> CommandState {
    let mut c = CommandState::new(CommandConfig::new(
        "build",
        CommandSpec::Shell("make".into()),
    ));
    c.journal_dir = Some(dir.into());
    c.status = status;
    c
}

fn model(commands: Vec<CommandState>) -> Model {
    Model {
        session_id: "s".into(),
        session_dir: "/state/sessions/s".into(),
        started_ms: 0,
        commands,
        mode: tether_model::Mode::Live,
    }
}

fn mark(c: &mut CommandState, kind: AttentionKind, at_ms: u64, detail: &str) {
    c.mark_attention(AttentionMark {
        kind,
        detail: detail.into(),
        at_ms,
        active: true,
    });
}

#[test]
fn a_notice_names_the_command_as_tether_stop_takes_it() {
    let mut c = command("/state/sessions/20260102-abcd/07-build", Status::Running);
    mark(
        &mut c,
        AttentionKind::NeedsInput,
        10,
        "read(0) blocked\x1b]0;x\x07",
    );
    let notice = Notice::of(&c, c.needs_you().unwrap());
    assert_eq!(notice.title, "20260102-abcd/07 needs input");
    assert_eq!(
        notice.body,
        "build: read(0) blocked\u{fffd}]0;x\u{fffd}; tether stop 20260102-abcd/07"
    );
    // A failure has ended: nothing to stop.
    let mut ended = command("/state/sessions/s/03-test", Status::FailedToStart);
    mark(&mut ended, AttentionKind::Failed, 10, "exit 2");
    let notice = Notice::of(&ended, ended.needs_you().unwrap());
    assert_eq!(
        (notice.title.as_str(), notice.body.as_str()),
        ("s/03 failed", "build: exit 2")
    );
}

#[test]
fn only_marks_made_while_open_are_news_and_each_once() {
    let mut old = command("/state/sessions/s/01-old", Status::FailedToStart);
    mark(&mut old, AttentionKind::Failed, 50, "exit 1");
    let mut news = AttentionNews::new(100);
    let mut m = model(vec![
        old,
        command("/state/sessions/s/02-new", Status::Running),
    ]);
    assert_eq!(news.look(&m, 100), None, "from before the front end opened");
    mark(
        &mut m.commands[1],
        AttentionKind::Runaway,
        150,
        "99% CPU for 60s",
    );
    let told = news.look(&m, 150).expect("news");
    assert_eq!(told.title, "s/02 runaway");
    assert_eq!(news.look(&m, 10_000), None, "told once");
    // The episode cleared: nothing; a new one later is news again.
    m.commands[1].attention[0].active = false;
    assert_eq!(news.look(&m, 10_001), None);
    mark(
        &mut m.commands[1],
        AttentionKind::Quiet,
        10_002,
        "no output for 30s",
    );
    assert_eq!(news.look(&m, 10_002).unwrap().title, "s/02 quiet");
}

/// Each mark is news as it comes, though a more pressing one stands beside it; once told,
/// it is not told again when the pressing one clears.
#[test]
fn a_mark_beside_a_more_pressing_one_is_told_as_it_comes() {
    let mut news = AttentionNews::new(0);
    let mut m = model(vec![command("/state/sessions/s/03-ask", Status::Running)]);
    mark(
        &mut m.commands[0],
        AttentionKind::NeedsInput,
        3_000,
        "read(0)",
    );
    assert_eq!(news.look(&m, 3_000).unwrap().title, "s/03 needs input");
    mark(&mut m.commands[0], AttentionKind::Quiet, 4_100, "no output");
    assert_eq!(
        m.commands[0].needs_you().unwrap().kind,
        AttentionKind::NeedsInput
    );
    assert_eq!(news.look(&m, 60_000).unwrap().title, "s/03 quiet");
    // The input typed: its mark cleared.
    for a in &mut m.commands[0].attention {
        a.active &= a.kind != AttentionKind::NeedsInput;
    }
    assert_eq!(news.look(&m, 120_000), None, "told when it came");
}

#[test]
fn news_within_the_gap_waits_and_goes_together() {
    let mut news = AttentionNews::new(0);
    let dirs = ["/s/x/01-a", "/s/x/02-b", "/s/x/03-c"];
    let mut m = model(dirs.iter().map(|d| command(d, Status::Running)).collect());
    mark(&mut m.commands[0], AttentionKind::NeedsInput, 10, "");
    assert_eq!(news.look(&m, 10).unwrap().title, "x/01 needs input");
    mark(&mut m.commands[2], AttentionKind::Runaway, 30, "");
    mark(&mut m.commands[1], AttentionKind::Quiet, 20, "");
    assert_eq!(news.look(&m, 500), None, "under the gap");
    assert_eq!(news.due_ms(), Some(10 + MIN_GAP_MS));
    let told = news.look(&m, 10 + MIN_GAP_MS).expect("due");
    assert_eq!(
        told.title, "x/03 runaway (+1 more)",
        "the latest, and a count"
    );
    assert_eq!(news.due_ms(), None);
}

#[test]
fn a_window_looked_at_tells_nothing_and_keeps_nothing_for_later() {
    let mut news = AttentionNews::new(0);
    assert!(!news.focused, "no focus report yet");
    let mut m = model(vec![command("/s/x/01-a", Status::Running)]);
    news.set_focus(true);
    mark(&mut m.commands[0], AttentionKind::NeedsInput, 10, "");
    assert_eq!(news.look(&m, 10), None);
    news.set_focus(false);
    assert_eq!(news.look(&m, 20), None, "seen on screen already");
    mark(&mut m.commands[0], AttentionKind::Failed, 30, "exit 1");
    m.commands[0].status = Status::FailedToStart;
    assert_eq!(news.look(&m, 30).unwrap().title, "x/01 failed");
}

#[test]
fn clean_cuts_long_text_on_a_character() {
    let text = "é".repeat(500);
    let cut = clean(&text);
    assert_eq!(cut.chars().count(), MAX_CHARS + 1);
    assert!(cut.ends_with('…'));
}

/// A look over a session of 10,000 commands, every one with a mark told already (the most a
/// look pays: a map lookup each), says nothing new, look after look. Its cost is
/// `cargo bench --bench attention news`'s.
#[test]
fn a_look_over_ten_thousand_told_marks_says_nothing() {
    let mut commands: Vec<CommandState> = (0..10_000)
        .map(|i| command(&format!("/s/x/{i:05}-c"), Status::FailedToStart))
        .collect();
    for (i, c) in commands.iter_mut().enumerate() {
        mark(c, AttentionKind::Failed, 10 + i as u64, "exit 1");
    }
    let m = model(commands);
    let mut news = AttentionNews::new(0);
    assert!(news.look(&m, 100_000).is_some(), "every mark is news once");
    for _ in 0..20 {
        assert_eq!(news.look(&m, 200_000), None);
    }
}
