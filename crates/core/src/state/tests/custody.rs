//! Leftovers: stopped after the command's exit as stragglers, or kept in custody under the
//! leftovers rule until a custodian exits, the rule's longest custody is over, a stop is
//! asked for, or they exit on their own.

use super::*;
use crate::protocol::{LeftoversEnd, LeftoversRule, Origin, ParentLossCause, Request};

fn keeping(max: Option<Duration>) -> LaunchRequest {
    LaunchRequest {
        leftovers: LeftoversRule {
            keep: true,
            max,
            ..LeftoversRule::default()
        },
        ..request()
    }
}

/// The command exits and leaves process 101 running, its pipes closed.
fn exits_leaving_one(request: LaunchRequest) -> Rig {
    let mut rig = Rig::running(request, OnTerm::Exit);
    rig.world.borrow_mut().spawn(101, OnTerm::Exit);
    rig.command_ends(exited(0));
    rig.close_pipes();
    rig.tick();
    rig
}

fn stopped_reason(rig: &Rig) -> Option<(LeftoversEnd, Option<i32>)> {
    rig.journal().find_map(|e| match e.kind {
        EventKind::LeftoversStopped { reason, pid } => Some((reason, pid)),
        _ => None,
    })
}

fn stop_origin(rig: &Rig) -> Option<Origin> {
    rig.journal().find_map(|e| match e.kind {
        EventKind::StopStarted { origin, .. } => Some(origin),
        _ => None,
    })
}

#[test]
fn without_the_rule_stragglers_are_stopped_when_the_command_exits() {
    let mut rig = exits_leaving_one(request());
    assert_eq!(stop_origin(&rig), Some(Origin::Leftovers));
    assert_eq!(rig.signals()[0], ("TERM".into(), vec![101]));
    assert_eq!(rig.count("leftovers_kept"), 0);
    assert_eq!(rig.finish(), 0);
    assert_eq!(rig.result().stopped_by, Some(Origin::Leftovers));
    assert_eq!(rig.result().orphans_reaped, 1);
}

#[test]
fn kept_leftovers_let_the_front_end_go_and_are_not_signalled() {
    let mut rig = exits_leaving_one(keeping(None));
    let kept = rig.journal().find_map(|e| match &e.kind {
        EventKind::LeftoversKept { pids } => Some(pids.clone()),
        _ => None,
    });
    assert_eq!(kept, Some(vec![101]));
    assert_eq!(rig.let_go, 1, "the front end returns, as the shell would");
    assert!(!rig.broker.parent_attached());
    assert!(rig.world.borrow().sent.is_empty());
    // Nothing more goes to the front end, yet everything is journaled.
    let kept_at = rig
        .lines
        .iter()
        .position(|l| l.event.kind.name() == "leftovers_kept")
        .unwrap();
    rig.feed(Input::Happened(EventKind::ParentUnresponsive {
        silent_ms: 0,
    }));
    assert!(
        rig.lines[kept_at + 1..]
            .iter()
            .all(|l| !l.parent && l.journal)
    );
    rig.run_until(ms(60_000));
    assert!(
        !rig.broker.is_done(),
        "kept for as long as nobody stops them"
    );
}

#[test]
fn a_custodians_exit_ends_the_custody_with_a_stop() {
    let mut rig = exits_leaving_one(keeping(None));
    rig.feed(Input::CustodianExited {
        reason: LeftoversEnd::CallerExited,
        pid: Some(PARENT),
    });
    assert_eq!(
        stopped_reason(&rig),
        Some((LeftoversEnd::CallerExited, Some(PARENT)))
    );
    assert_eq!(stop_origin(&rig), Some(Origin::Leftovers));
    assert_eq!(
        rig.finish(),
        0,
        "the front end was let go: its going is no loss"
    );
    let record = rig.result().leftovers.clone().expect("a leftovers record");
    assert_eq!(
        (record.kept, record.stopped),
        (vec![101], Some(LeftoversEnd::CallerExited))
    );
}

#[test]
fn the_longest_custody_ends_it_with_a_watchdog_stop() {
    let mut rig = exits_leaving_one(keeping(Some(Duration::from_millis(500))));
    let kept_at = rig.now;
    rig.run_until(rig.now - rig.t0 + ms(499));
    assert_eq!(stopped_reason(&rig), None);
    rig.run_until(kept_at - rig.t0 + ms(500));
    assert_eq!(
        stopped_reason(&rig),
        Some((LeftoversEnd::MaxDuration, None))
    );
    assert_eq!(stop_origin(&rig), Some(Origin::Watchdog));
    rig.finish();
    assert_eq!(rig.result().leftovers.as_ref().unwrap().kept_ms, 500);
}

#[test]
fn a_stop_asked_for_in_custody_ends_it() {
    let mut rig = exits_leaving_one(keeping(None));
    rig.feed(from_parent(Request::Stop { origin: None }));
    assert_eq!(stopped_reason(&rig), Some((LeftoversEnd::Operator, None)));
    assert_eq!(stop_origin(&rig), Some(Origin::Operator));
    assert_eq!(rig.signals()[0], ("TERM".into(), vec![101]));
}

#[test]
fn a_shutdown_in_custody_ends_it() {
    let mut rig = exits_leaving_one(keeping(None));
    rig.feed(Input::Shutdown { sender: None });
    assert_eq!(stopped_reason(&rig), Some((LeftoversEnd::Shutdown, None)));
    assert_eq!(stop_origin(&rig), Some(Origin::Shutdown));
}

#[test]
fn leftovers_that_exit_on_their_own_end_the_custody_without_a_signal() {
    let mut rig = exits_leaving_one(keeping(None));
    rig.world.borrow_mut().end(101, exited(0));
    rig.reap();
    rig.tick();
    assert_eq!(stopped_reason(&rig), Some((LeftoversEnd::Exited, None)));
    assert_eq!(stop_origin(&rig), None);
    assert_eq!(rig.finish(), 0);
    assert!(rig.world.borrow().sent.is_empty());
}

#[test]
fn a_custodian_gone_before_the_exit_means_leftovers_are_stopped_at_once() {
    let mut rig = Rig::running(keeping(None), OnTerm::Exit);
    rig.feed(Input::CustodianUnwatched {
        reason: LeftoversEnd::CallerGone,
        pid: None,
    });
    rig.world.borrow_mut().spawn(101, OnTerm::Exit);
    rig.command_ends(exited(0));
    rig.close_pipes();
    rig.tick();
    assert_eq!(stopped_reason(&rig), Some((LeftoversEnd::CallerGone, None)));
    assert_eq!(rig.count("leftovers_kept"), 0);
    assert_eq!(stop_origin(&rig), Some(Origin::Leftovers));
    assert_eq!(rig.let_go, 0);
}

#[test]
fn a_custodian_exit_while_the_command_runs_is_remembered_for_later() {
    let mut rig = Rig::running(keeping(None), OnTerm::Exit);
    rig.feed(Input::CustodianExited {
        reason: LeftoversEnd::CallerExited,
        pid: Some(PARENT),
    });
    assert_eq!(stop_origin(&rig), None, "the command itself runs on");
    rig.world.borrow_mut().spawn(101, OnTerm::Exit);
    rig.command_ends(exited(0));
    rig.close_pipes();
    rig.tick();
    assert_eq!(
        stopped_reason(&rig),
        Some((LeftoversEnd::CallerExited, Some(PARENT)))
    );
}

#[test]
fn the_session_owners_exit_stops_a_command_still_running() {
    let mut rig = Rig::running(request(), OnTerm::Exit);
    rig.feed(Input::CustodianExited {
        reason: LeftoversEnd::SessionOwnerExited,
        pid: Some(1),
    });
    assert_eq!(stop_origin(&rig), Some(Origin::ParentLost));
}

#[test]
fn the_front_end_going_in_custody_is_no_loss() {
    let mut rig = exits_leaving_one(keeping(None));
    rig.feed(Input::ParentLost(ParentLossCause::Pidfd));
    assert_eq!(rig.count("parent_lost"), 0);
    assert_eq!(stop_origin(&rig), None);
    rig.feed(Input::Shutdown { sender: None });
    rig.reap();
    assert_eq!(rig.finish(), 0);
    assert!(!rig.result().parent_lost);
}

/// What is left is listed by the interpreter once, when the pipes are done, and only when
/// the rule may keep it: without the rule the stop needs no list.
#[test]
fn the_leftovers_are_listed_once_and_only_under_the_rule() {
    let rig = exits_leaving_one(keeping(None));
    assert_eq!(rig.world.borrow().listings, 1);
    assert_eq!(rig.count("leftovers_kept"), 1);
    let rig = exits_leaving_one(request());
    assert_eq!(rig.world.borrow().listings, 0);
    assert_eq!(rig.count("stop_started"), 1);
}

/// A listing that finds nothing left (it ended between the reaping and the list) keeps
/// nothing, and what the reaping still counted is stopped as without the rule.
#[test]
fn a_listing_that_finds_nothing_keeps_nothing() {
    let mut rig = Rig::running(keeping(None), OnTerm::Exit);
    rig.world.borrow_mut().spawn(101, OnTerm::Exit);
    rig.command_ends(exited(0));
    rig.close_pipes();
    // 101 is gone by the time the interpreter lists, not yet reaped.
    rig.world.borrow_mut().alive.retain(|(p, _)| p.pid != 101);
    rig.feed(Input::Tick {
        copy: CopyProgress::default(),
    });
    assert_eq!(rig.world.borrow().listings, 1);
    assert_eq!(rig.count("leftovers_kept"), 0);
    assert_eq!(stop_origin(&rig), Some(Origin::Leftovers));
    assert_eq!(rig.finish(), 0);
}
