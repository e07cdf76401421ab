//! The cgroup path with a fake kernel: the machine is told whether the command entered its
//! cgroup, how the cgroup stands after each reaping and each change, and asks for it to be
//! given up or released; it never reads it.

use super::*;
use crate::process::CgroupId;
use crate::protocol::{ContainmentMode, Request};

/// The command cgroup the machine is given: its name (the fake kernel answers for it).
fn cgroup_handle() -> CgroupId {
    CgroupId {
        name: "tether.s.c.10-1".into(),
        path: "/sys/fs/cgroup/tether/tether.s.c.10-1".into(),
    }
}

/// A broker whose command is contained by `cgroup`, then started.
fn contained(request: LaunchRequest, cgroup: FakeCgroup, on_term: OnTerm) -> Rig {
    let mut rig = Rig::new(request);
    rig.world.borrow_mut().cgroup = Some(cgroup);
    rig.feed(Input::Contained(Some(cgroup_handle())));
    rig.launched(on_term)
}

fn removals(rig: &Rig) -> Vec<bool> {
    let world = rig.world.borrow();
    world.cgroup.as_ref().map(|c| c.removals.clone()).unwrap()
}

/// The `containment` events that hand the tree to the /proc walk, by their reason.
fn fallbacks(rig: &Rig) -> Vec<String> {
    rig.journal()
        .filter_map(|e| match &e.kind {
            EventKind::Containment {
                mode: ContainmentMode::Procfs,
                reason,
                ..
            } => reason.clone(),
            _ => None,
        })
        .collect()
}

#[test]
fn a_command_in_its_cgroup_has_it_released_at_the_end_with_its_figures() {
    let cgroup = FakeCgroup {
        cpu_usec: Some(7_000_000),
        memory_peak: Some(3 << 20),
        ..FakeCgroup::default()
    };
    let mut rig = contained(request(), cgroup, OnTerm::Exit);
    assert!(rig.broker.walk().in_cgroup);
    rig.command_ends(exited(0));
    assert_eq!(rig.finish(), 0);
    assert_eq!(fallbacks(&rig), Vec::<String>::new());
    assert_eq!(removals(&rig), [true], "released once, at the end");
    assert_eq!(rig.result().cgroup_cpu_usec, Some(7_000_000));
    assert_eq!(rig.result().cpu_ms, Some(7_000));
    assert_eq!(rig.result().peak_rss_bytes, Some(3 << 20));
    assert_eq!(rig.count("broker_failure"), 0);
}

#[test]
fn a_command_that_did_not_enter_its_cgroup_leaves_the_tree_to_the_proc_walk() {
    let cgroup = FakeCgroup {
        outside: vec![CMD],
        ..FakeCgroup::default()
    };
    let mut rig = contained(request(), cgroup, OnTerm::Exit);
    let reasons = fallbacks(&rig);
    assert_eq!(reasons.len(), 1, "{:?}", rig.kinds());
    assert!(reasons[0].starts_with("the command could not enter its cgroup"));
    assert_eq!(removals(&rig), [false], "given up at once");
    assert!(!rig.broker.walk().in_cgroup);
    rig.command_ends(exited(0));
    rig.finish();
    // Nothing left to release, nor its figures to take.
    assert_eq!(removals(&rig), [false]);
    assert_eq!(rig.result().cgroup_cpu_usec, None);
}

#[test]
fn a_command_that_ended_before_its_cgroup_was_read_keeps_it() {
    let mut rig = Rig::new(request());
    rig.world.borrow_mut().cgroup = Some(FakeCgroup::default());
    rig.feed(Input::Contained(Some(cgroup_handle())));
    rig.feed(Input::Spawned {
        pid: CMD,
        start_ticks: Some(CMD as u64),
        argv: vec!["cmd".into()],
        inputs: Vec::new(),
        in_cgroup: false,
        ended: true,
    });
    // It cannot have forked outside the cgroup: the cgroup stays the containment.
    assert_eq!(fallbacks(&rig), Vec::<String>::new());
    assert!(rig.broker.walk().in_cgroup);
}

/// A process left in the cgroup that is no child of the broker (nothing reaps it here):
/// the cgroup's `populated` alone says when it is gone.
#[test]
fn a_stop_ends_when_the_cgroup_empties_without_a_reaping() {
    let cgroup = FakeCgroup {
        strangers: vec![300],
        ..FakeCgroup::default()
    };
    let mut rig = contained(request(), cgroup, OnTerm::Exit);
    rig.feed(from_parent(Request::Stop { origin: None }));
    // TERM ended the command, reaped: the cgroup still holds the stranger.
    rig.reap();
    assert!(rig.broker.child_reaped());
    assert!(!rig.broker.stop_done, "the cgroup still holds a process");
    // The stranger goes: `cgroup.events` says so, and nothing is reaped.
    rig.world
        .borrow_mut()
        .cgroup
        .as_mut()
        .unwrap()
        .strangers
        .clear();
    let state = rig.world.borrow().cgroup_state();
    rig.feed(Input::CgroupChanged(state));
    assert!(rig.broker.stop_done, "{:?}", rig.kinds());
    rig.finish();
    assert_eq!(
        rig.result().stopped_by,
        Some(crate::protocol::Origin::Operator)
    );
}

#[test]
fn a_stop_ends_when_the_reaping_of_the_last_child_finds_the_cgroup_empty() {
    let mut rig = contained(request(), FakeCgroup::default(), OnTerm::Exit);
    rig.feed(from_parent(Request::Stop { origin: None }));
    assert!(!rig.broker.stop_done);
    // TERM ended the command; its reaping says the cgroup is empty too.
    let reaped = rig.reaped();
    let Input::Reaped { cgroup, .. } = &reaped else {
        unreachable!()
    };
    assert_eq!(*cgroup, Some(CgroupState::Empty));
    rig.feed(reaped);
    assert!(rig.broker.stop_done);
}

#[test]
fn a_reaping_that_finds_the_cgroup_still_populated_keeps_the_stop_going() {
    let mut rig = contained(request(), FakeCgroup::default(), OnTerm::Exit);
    rig.feed(from_parent(Request::Stop { origin: None }));
    rig.feed(Input::Reaped {
        children: vec![Reaped {
            pid: CMD,
            status: killed_by(ProcessSignal::TERM),
            place: None,
            tether_cgroup: None,
        }],
        children_left: false,
        cgroup: Some(CgroupState::Populated),
    });
    assert!(
        !rig.broker.stop_done,
        "the cgroup's word: a process is left"
    );
}

#[test]
fn a_cgroup_that_disappears_hands_the_tree_to_the_proc_walk_once() {
    let mut rig = contained(request(), FakeCgroup::default(), OnTerm::Exit);
    rig.world.borrow_mut().cgroup.as_mut().unwrap().gone = true;
    rig.feed(Input::CgroupChanged(Some(CgroupState::Gone)));
    let reasons = fallbacks(&rig);
    assert_eq!(reasons.len(), 1);
    assert!(reasons[0].ends_with("disappeared"), "{reasons:?}");
    assert!(!rig.broker.walk().in_cgroup);
    // Later reapings still say it is gone: nothing more is journaled or asked.
    rig.run_until(ms(5_000));
    assert_eq!(fallbacks(&rig).len(), 1);
    rig.command_ends(exited(0));
    rig.finish();
    assert_eq!(removals(&rig), [false]);
    assert_eq!(rig.result().cgroup_cpu_usec, None);
}

#[test]
fn a_cgroup_found_gone_at_a_reaping_is_given_up_before_the_next_walk() {
    let mut rig = contained(request(), FakeCgroup::default(), OnTerm::Exit);
    rig.world.borrow_mut().cgroup.as_mut().unwrap().gone = true;
    // The next walk of the tree, on its schedule, finds it gone first.
    rig.run_until(ms(5_000));
    assert_eq!(fallbacks(&rig).len(), 1, "{:?}", rig.kinds());
    assert_eq!(removals(&rig), [false]);
}

#[test]
fn a_removal_the_kernel_refuses_is_journaled_and_the_result_still_written() {
    let cgroup = FakeCgroup {
        cpu_usec: Some(1_000),
        remove_fails: Some(std::io::ErrorKind::ResourceBusy),
        ..FakeCgroup::default()
    };
    let mut rig = contained(request(), cgroup, OnTerm::Exit);
    rig.command_ends(exited(0));
    assert_eq!(rig.finish(), 0);
    let failure = rig.journal().find_map(|e| match &e.kind {
        EventKind::BrokerFailure { code, message, .. } => Some((code.clone(), message.clone())),
        _ => None,
    });
    let (code, message) = failure.expect("the refusal is journaled");
    assert_eq!(code, "cgroup_remove");
    assert!(message.contains("tether.s.c.10-1"), "{message}");
    assert!(message.contains("a later tether removes it"), "{message}");
    // Before the tree's last record and the result: the end goes on.
    let kinds = rig.kinds();
    let failed = kinds.iter().position(|k| *k == "broker_failure").unwrap();
    assert_eq!(kinds.last(), Some(&"close"));
    assert!(failed < kinds.len() - 1);
    assert_eq!(rig.result().cgroup_cpu_usec, Some(1_000));
}
