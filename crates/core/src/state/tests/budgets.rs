//! Budgets: `max_time` from the spawn, `max_cpu` as the interpreter measures it, `max_output`
//! as the broker reads it; reaching one journals `budget_exceeded`, then the stop sequence
//! (origin `budget`), and `result.json` names it. Unset, none fires and nothing is measured.

use super::*;
use crate::protocol::{Budget, Budgets, LeftoversEnd, LeftoversRule, Origin, Stream};

fn with(budgets: Budgets) -> LaunchRequest {
    LaunchRequest {
        budgets,
        ..request()
    }
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// The `budget_exceeded` events journaled: budget, limit, used.
fn exceeded(rig: &Rig) -> Vec<(Budget, u64, u64)> {
    rig.journal()
        .filter_map(|e| match e.kind {
            EventKind::BudgetExceeded {
                budget,
                limit,
                used,
            } => Some((budget, limit, used)),
            _ => None,
        })
        .collect()
}

fn stop_origin(rig: &Rig) -> Option<Origin> {
    rig.journal().find_map(|e| match e.kind {
        EventKind::StopStarted { origin, .. } => Some(origin),
        _ => None,
    })
}

/// The journal's kinds from `budget_exceeded` on.
fn from_budget(rig: &Rig) -> Vec<&'static str> {
    let kinds = rig.kinds();
    let at = kinds
        .iter()
        .position(|k| *k == "budget_exceeded")
        .expect("budget_exceeded");
    kinds[at..].to_vec()
}

#[test]
fn the_time_budget_stops_the_command_at_its_deadline_from_the_spawn() {
    let budgets = Budgets {
        max_time: Some(secs(5)),
        ..Budgets::default()
    };
    let mut rig = Rig::running(with(budgets), OnTerm::Exit);
    rig.run_until(ms(4999));
    assert!(exceeded(&rig).is_empty(), "{:?}", rig.kinds());
    rig.run_until(secs(5));
    assert_eq!(exceeded(&rig), [(Budget::Time, 5000, 5000)]);
    assert_eq!(
        &from_budget(&rig)[..4],
        [
            "budget_exceeded",
            "stop_started",
            "signal_sent",
            "signal_sent"
        ]
    );
    assert_eq!(stop_origin(&rig), Some(Origin::Budget));
    assert_eq!(rig.signals()[0], ("TERM".into(), vec![CMD]));
    rig.reap();
    rig.finish();
    let result = rig.result();
    assert_eq!(result.stopped_by, Some(Origin::Budget));
    assert_eq!(result.budget, Some(Budget::Time));
    assert_eq!(result.exit.and_then(|s| s.signal), Some(15));
    assert!(!result.hard_killed);
    assert_eq!(
        rig.world.borrow().cpu_measures,
        0,
        "no CPU budget, no measurement"
    );
}

#[test]
fn the_cpu_budget_stops_the_command_once_a_measurement_crosses_it() {
    let budgets = Budgets {
        max_cpu: Some(secs(2)),
        ..Budgets::default()
    };
    let mut rig = Rig::running(with(budgets), OnTerm::Exit);
    rig.world.borrow_mut().cpu = ms(0);
    rig.run_until(secs(1));
    let early = rig.world.borrow().cpu_measures;
    assert!(early >= 2, "measured every half second at most: {early}");
    rig.world.borrow_mut().cpu = ms(1900);
    rig.run_until(secs(2));
    assert!(
        exceeded(&rig).is_empty(),
        "below the limit: {:?}",
        rig.kinds()
    );
    rig.world.borrow_mut().cpu = ms(2100);
    rig.run_until(ms(2600));
    assert_eq!(exceeded(&rig), [(Budget::Cpu, 2000, 2100)]);
    assert_eq!(stop_origin(&rig), Some(Origin::Budget));
    rig.reap();
    rig.finish();
    assert_eq!(rig.result().budget, Some(Budget::Cpu));
    assert_eq!(rig.result().stopped_by, Some(Origin::Budget));
}

#[test]
fn measurements_come_at_most_every_half_second_and_sooner_near_the_limit() {
    let budgets = Budgets {
        max_cpu: Some(secs(60)),
        ..Budgets::default()
    };
    let mut rig = Rig::running(with(budgets), OnTerm::Exit);
    rig.world.borrow_mut().cpu = ms(0);
    rig.run_until(secs(10));
    assert_eq!(rig.world.borrow().cpu_measures, 20);
    // 400 ms left: measured every 250 ms.
    rig.world.borrow_mut().cpu = ms(59_600);
    rig.run_until(ms(10_500));
    let before = rig.world.borrow().cpu_measures;
    rig.run_until(secs(11));
    assert_eq!(rig.world.borrow().cpu_measures - before, 2);
    assert!(exceeded(&rig).is_empty());
}

#[test]
fn the_output_budget_counts_bytes_read_on_both_streams() {
    let budgets = Budgets {
        max_output: Some(100),
        ..Budgets::default()
    };
    let mut rig = Rig::running(with(budgets), OnTerm::Exit);
    rig.feed(Input::Read {
        stream: Stream::Stdout,
        bytes: &[b'y'; 60],
    });
    rig.feed(Input::Read {
        stream: Stream::Stderr,
        bytes: &[b'n'; 40],
    });
    assert!(exceeded(&rig).is_empty(), "exactly the budget is allowed");
    rig.feed(Input::Read {
        stream: Stream::Stdout,
        bytes: &[b'y'; 20],
    });
    assert_eq!(exceeded(&rig), [(Budget::Output, 100, 120)]);
    // The bytes that crossed it are journaled before the event that says so.
    let kinds = rig.kinds();
    let at = kinds.iter().position(|k| *k == "budget_exceeded").unwrap();
    assert_eq!(kinds[at - 1], "output", "{kinds:?}");
    assert_eq!(kinds[at + 1], "stop_started");
    // More output during grace fires nothing more.
    rig.feed(Input::Read {
        stream: Stream::Stdout,
        bytes: &[b'y'; 20],
    });
    assert_eq!(exceeded(&rig).len(), 1);
    rig.reap();
    rig.finish();
    assert_eq!(rig.result().budget, Some(Budget::Output));
    assert_eq!(rig.result().stdout.bytes, 100);
}

#[test]
fn a_budget_then_term_ignored_then_kill_after_grace() {
    let budgets = Budgets {
        max_time: Some(secs(1)),
        ..Budgets::default()
    };
    let mut rig = Rig::running(with(budgets), OnTerm::Ignore);
    rig.run_until(ms(1999));
    assert_eq!(exceeded(&rig).len(), 1);
    assert_eq!(rig.count("hard_kill"), 0, "still in grace");
    rig.run_until(secs(2));
    assert_eq!(rig.count("hard_kill"), 1);
    rig.reap();
    rig.finish();
    let result = rig.result();
    assert!(result.hard_killed);
    assert_eq!(result.exit.and_then(|s| s.signal), Some(9));
    assert_eq!(
        (result.stopped_by, result.budget),
        (Some(Origin::Budget), Some(Budget::Time))
    );
}

#[test]
fn without_budgets_nothing_fires_and_nothing_is_measured() {
    let mut rig = Rig::running(request(), OnTerm::Exit);
    rig.world.borrow_mut().cpu = secs(3600);
    for _ in 0..10 {
        rig.feed(Input::Read {
            stream: Stream::Stdout,
            bytes: &[b'y'; 4096],
        });
    }
    rig.run_until(secs(3600));
    assert!(exceeded(&rig).is_empty());
    assert_eq!(rig.world.borrow().cpu_measures, 0);
    assert_eq!(rig.count("stop_started"), 0);
    assert_eq!(rig.broker.poll_timeout().map(|t| t > rig.now), Some(true));
}

#[test]
fn a_command_that_exits_in_time_is_not_stopped_and_no_longer_measured() {
    let budgets = Budgets {
        max_time: Some(secs(5)),
        max_cpu: Some(secs(5)),
        max_output: Some(10),
    };
    let mut rig = Rig::running(with(budgets), OnTerm::Exit);
    rig.world.borrow_mut().cpu = ms(10);
    rig.run_until(secs(1));
    rig.command_ends(exited(0));
    let measured = rig.world.borrow().cpu_measures;
    // Output read while the pipes drain counts, but fires nothing once the command exited.
    rig.feed(Input::Read {
        stream: Stream::Stdout,
        bytes: &[b'y'; 20],
    });
    rig.world.borrow_mut().cpu = secs(10);
    assert_eq!(rig.finish(), 0);
    assert!(exceeded(&rig).is_empty(), "{:?}", rig.kinds());
    assert_eq!(rig.world.borrow().cpu_measures, measured);
    assert_eq!(rig.result().budget, None);
    assert_eq!(rig.result().stopped_by, None);
}

#[test]
fn a_stop_already_running_leaves_the_budgets_out() {
    let budgets = Budgets {
        max_time: Some(secs(1)),
        ..Budgets::default()
    };
    let mut rig = Rig::running(with(budgets), OnTerm::Ignore);
    rig.feed(from_parent(crate::protocol::Request::Stop { origin: None }));
    rig.run_until(secs(3));
    assert!(exceeded(&rig).is_empty());
    rig.reap();
    rig.finish();
    assert_eq!(rig.result().stopped_by, Some(Origin::Operator));
    assert_eq!(rig.result().budget, None);
}

#[test]
fn leftovers_kept_in_custody_are_stopped_by_the_budget_too() {
    let request = LaunchRequest {
        leftovers: LeftoversRule {
            keep: true,
            ..LeftoversRule::default()
        },
        budgets: Budgets {
            max_time: Some(secs(10)),
            ..Budgets::default()
        },
        ..request()
    };
    let mut rig = Rig::running(request, OnTerm::Exit);
    rig.world.borrow_mut().spawn(101, OnTerm::Exit);
    rig.command_ends(exited(0));
    rig.close_pipes();
    rig.tick();
    assert_eq!(rig.count("leftovers_kept"), 1);
    rig.run_until(secs(10));
    assert_eq!(exceeded(&rig), [(Budget::Time, 10_000, 10_000)]);
    let stopped = rig.journal().find_map(|e| match e.kind {
        EventKind::LeftoversStopped { reason, .. } => Some(reason),
        _ => None,
    });
    assert_eq!(stopped, Some(LeftoversEnd::MaxDuration));
    assert_eq!(stop_origin(&rig), Some(Origin::Budget));
    assert_eq!(rig.signals()[0], ("TERM".into(), vec![101]));
    rig.reap();
    rig.finish();
    assert_eq!(rig.result().stopped_by, Some(Origin::Budget));
    assert_eq!(rig.result().budget, Some(Budget::Time));
}
