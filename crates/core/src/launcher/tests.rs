//! The launcher on a fake clock: `t(ms)` is a moment after the start.

use std::time::{Duration, Instant};

use super::*;

struct World {
    launcher: Launcher,
    start: Instant,
}

fn plan(name: &str, depends_on: &[(usize, Condition)]) -> CommandPlan {
    CommandPlan {
        depends_on: depends_on.to_vec(),
        ..CommandPlan::new(name)
    }
}

impl World {
    fn new(plans: Vec<CommandPlan>, ordered: bool) -> World {
        let mut world = World {
            launcher: Launcher::new(plans, ordered),
            start: Instant::now(),
        };
        world.at(0, Input::Begin);
        world
    }

    fn t(&self, ms: u64) -> Instant {
        self.start + Duration::from_millis(ms)
    }

    fn at(&mut self, ms: u64, input: Input) -> Vec<Action> {
        let now = self.t(ms);
        self.launcher.handle(input, now);
        std::iter::from_fn(|| self.launcher.poll_action()).collect()
    }

    fn exit(&mut self, ms: u64, command: usize, code: i32) -> Vec<Action> {
        self.at(
            ms,
            Input::Ended {
                command,
                how: exit(code),
            },
        )
    }
}

/// An exit with `code`, named as the driver names it.
fn exit(code: i32) -> Ending {
    Ending::Exited {
        done: code == 0,
        by_operator: false,
        words: format!("exit {code}"),
    }
}

/// The end of a run the operator stopped (by the launcher's stop, `t` or `k`).
fn stopped(words: &str) -> Ending {
    Ending::Exited {
        done: false,
        by_operator: true,
        words: words.into(),
    }
}

/// The end of a run the launcher stopped for a changed file, as the driver names it.
fn restarted() -> Ending {
    Ending::Exited {
        done: false,
        by_operator: false,
        words: "restarted (file changed)".into(),
    }
}

fn launch(command: usize, run: u32) -> Action {
    Action::Launch { command, run }
}

fn fail(command: usize, reason: &str) -> Action {
    Action::Fail {
        command,
        reason: reason.into(),
    }
}

#[test]
fn commands_without_dependencies_start_at_once_in_order() {
    let mut launcher = Launcher::new(vec![plan("a", &[]), plan("b", &[])], false);
    launcher.handle(Input::Begin, Instant::now());
    let actions: Vec<_> = std::iter::from_fn(|| launcher.poll_action()).collect();
    assert_eq!(actions, [launch(0, 1), launch(1, 1)]);
}

#[test]
fn each_condition_waits_for_its_own_event() {
    use Condition::*;
    let mut w = World::new(
        vec![
            plan("db", &[]),
            plan("migrate", &[]),
            plan("web", &[(0, Ready), (1, Succeeded)]),
            plan("tail", &[(0, Started)]),
        ],
        false,
    );
    assert_eq!(
        w.launcher.state(2),
        State::Waiting {
            on: "db",
            not_started: false
        }
    );
    assert_eq!(
        w.launcher.state(3),
        State::Waiting {
            on: "db",
            not_started: false
        }
    );
    assert_eq!(w.at(10, Input::Spawned(0)), [launch(3, 1)]);
    assert_eq!(w.at(10, Input::Spawned(1)), []);
    assert_eq!(w.at(900, Input::Ready(0)), []);
    assert_eq!(
        w.launcher.state(2),
        State::Waiting {
            on: "migrate",
            not_started: false
        }
    );
    assert_eq!(w.exit(1000, 1, 0), [launch(2, 1)]);
}

#[test]
fn the_order_of_the_conditions_does_not_matter() {
    use Condition::*;
    let mut w = World::new(
        vec![
            plan("db", &[]),
            plan("migrate", &[]),
            plan("web", &[(0, Ready), (1, Succeeded)]),
        ],
        false,
    );
    assert_eq!(w.exit(100, 1, 0), []);
    assert_eq!(w.at(200, Input::Spawned(0)), []);
    assert_eq!(w.at(300, Input::Ready(0)), [launch(2, 1)]);
}

#[test]
fn a_failed_dependency_fails_its_waiters_with_the_reason() {
    use Condition::*;
    let cases: Vec<(Condition, Input, &str)> = vec![
        (
            Succeeded,
            Input::Ended {
                command: 0,
                how: exit(1),
            },
            "dep: exit 1",
        ),
        (
            Ready,
            Input::Ended {
                command: 0,
                how: exit(0),
            },
            "dep: exit 0 before it was ready",
        ),
        (
            Ready,
            Input::NotReady {
                command: 0,
                after: Duration::from_secs(30),
            },
            "dep was not ready within 30s",
        ),
        (
            Started,
            Input::Ended {
                command: 0,
                how: Ending::FailedToStart,
            },
            "dep failed to start",
        ),
        (
            Succeeded,
            Input::Ended {
                command: 0,
                how: Ending::Exited {
                    done: false,
                    by_operator: false,
                    words: "killed (SIGKILL)".into(),
                },
            },
            "dep: killed (SIGKILL)",
        ),
    ];
    for (condition, input, reason) in cases {
        let mut w = World::new(
            vec![plan("dep", &[]), plan("web", &[(0, condition)])],
            false,
        );
        assert_eq!(w.at(50, input), [fail(1, reason)], "{condition:?}");
        assert_eq!(w.launcher.state(1), State::Blocked(reason));
    }
}

#[test]
fn a_failure_travels_down_a_chain_of_waiters() {
    use Condition::*;
    let mut w = World::new(
        vec![
            plan("a", &[]),
            plan("b", &[(0, Succeeded)]),
            plan("c", &[(1, Started)]),
        ],
        false,
    );
    assert_eq!(
        w.exit(10, 0, 2),
        [fail(1, "a: exit 2"), fail(2, "b did not start: a: exit 2")]
    );
}

#[test]
fn a_waiter_outlives_a_dependency_that_restarts() {
    use Condition::*;
    let mut db = plan("db", &[]);
    db.restart = Restart::OnFailure;
    let mut w = World::new(vec![db, plan("web", &[(0, Ready)])], false);
    w.at(10, Input::Spawned(0));
    // Exits before it was ready: a restart comes, the waiter waits on.
    let actions = w.exit(500, 0, 1);
    assert!(
        matches!(&actions[..], [Action::Report { command: 0, text }] if text == "db: exit 1; restarting in 1s (run 2)")
    );
    assert_eq!(
        w.launcher.state(1),
        State::Waiting {
            on: "db",
            not_started: false
        }
    );
    assert_eq!(w.at(1500, Input::Wake), [launch(0, 2)]);
    w.at(1510, Input::Spawned(0));
    assert_eq!(w.at(2000, Input::Ready(0)), [launch(1, 1)]);
}

#[test]
fn a_dependency_not_ready_fails_its_waiters_though_it_may_restart() {
    use Condition::*;
    let mut db = plan("db", &[]);
    db.restart = Restart::Always;
    let mut w = World::new(vec![db, plan("web", &[(0, Ready)])], false);
    w.at(10, Input::Spawned(0));
    // It runs on, not ready: no restart will come of that.
    let not_ready = Input::NotReady {
        command: 0,
        after: Duration::from_secs(30),
    };
    assert_eq!(
        w.at(30_010, not_ready),
        [fail(1, "db was not ready within 30s")]
    );
    assert_eq!(
        w.launcher.state(1),
        State::Blocked("db was not ready within 30s")
    );
    // Once it ends and a restart is to come, its waiter waits again.
    assert_eq!(w.exit(40_000, 0, 1).len(), 1);
    assert_eq!(
        w.launcher.state(1),
        State::Waiting {
            on: "db",
            not_started: false
        }
    );
    assert_eq!(w.at(41_000, Input::Wake), [launch(0, 2)]);
    assert_eq!(w.at(41_500, Input::Ready(0)), [launch(1, 1)]);
}

#[test]
fn a_blocked_waiter_waits_again_when_its_dependency_is_started_again() {
    use Condition::*;
    let mut w = World::new(
        vec![
            plan("a", &[]),
            plan("b", &[(0, Succeeded)]),
            plan("c", &[(1, Started)]),
        ],
        false,
    );
    assert_eq!(w.exit(10, 0, 1).len(), 2);
    assert_eq!(w.at(20, Input::Start(0)), [launch(0, 2)]);
    for i in [1, 2] {
        assert!(matches!(w.launcher.state(i), State::Waiting { .. }));
    }
    assert_eq!(w.exit(30, 0, 0), [launch(1, 1)]);
    assert_eq!(w.at(40, Input::Spawned(1)), [launch(2, 1)]);
}

#[test]
fn a_dependency_not_autostarted_keeps_its_dependent_waiting_until_started() {
    let mut db = plan("db", &[]);
    db.autostart = false;
    let mut w = World::new(vec![db, plan("web", &[(0, Condition::Started)])], false);
    assert_eq!(
        w.launcher.state(1),
        State::Waiting {
            on: "db",
            not_started: true
        }
    );
    assert_eq!(w.at(10, Input::Start(0)), [launch(0, 1)]);
    assert_eq!(w.at(20, Input::Spawned(0)), [launch(1, 1)]);
}

fn worker(restart: Restart, max_restarts: u32) -> CommandPlan {
    CommandPlan {
        restart,
        max_restarts,
        ..CommandPlan::new("worker")
    }
}

#[test]
fn on_failure_gives_up_after_max_restarts_with_backoff_doubling() {
    let mut w = World::new(vec![worker(Restart::OnFailure, 3)], false);
    let mut now = 0;
    let mut waits = Vec::new();
    for run in 2..=4 {
        now += 100;
        w.exit(now, 0, 1);
        let State::Restarting { at, run: next } = w.launcher.state(0) else {
            panic!("not restarting: {:?}", w.launcher.state(0));
        };
        assert_eq!(next, run);
        assert_eq!(Some(at), w.launcher.poll_timeout());
        waits.push(at - w.t(now));
        now = (at - w.start).as_millis() as u64;
        assert_eq!(w.at(now, Input::Wake), [launch(0, run)]);
    }
    assert_eq!(waits, [1, 2, 4].map(Duration::from_secs));
    assert_eq!(
        w.exit(now + 100, 0, 1),
        [fail(0, "gave up after 3 restarts (worker: exit 1)")]
    );
    assert_eq!(w.launcher.state(0), State::GaveUp { restarts: 3 });
    assert_eq!(w.launcher.poll_timeout(), None);
}

#[test]
fn the_backoff_is_capped_and_a_long_run_resets_it() {
    let mut plan = worker(Restart::Always, 100);
    plan.backoff = Duration::from_secs(4);
    let mut w = World::new(vec![plan], false);
    let mut now = 0;
    let mut waits = Vec::new();
    for _ in 0..5 {
        now += 10;
        w.exit(now, 0, 0);
        let at = w.launcher.poll_timeout().unwrap();
        waits.push((at - w.t(now)).as_secs());
        now = (at - w.start).as_millis() as u64;
        w.at(now, Input::Wake);
    }
    assert_eq!(waits, [4, 8, 16, 30, 30]);
    // A run of RESET_AFTER: the first wait again.
    now += RESET_AFTER.as_millis() as u64;
    w.exit(now, 0, 0);
    assert_eq!(w.launcher.poll_timeout(), Some(w.t(now + 4000)));
}

#[test]
fn the_policies_cover_their_endings() {
    let cases = [
        (Restart::No, 1, false),
        (Restart::OnFailure, 0, false),
        (Restart::OnFailure, 1, true),
        (Restart::Always, 0, true),
    ];
    for (policy, code, restarts) in cases {
        let mut w = World::new(vec![worker(policy, 3)], false);
        w.exit(10, 0, code);
        let restarting = matches!(w.launcher.state(0), State::Restarting { .. });
        assert_eq!(restarting, restarts, "{policy:?} after exit {code}");
    }
}

#[test]
fn an_operator_stop_never_restarts() {
    // By `s` (the launcher sent the stop) or by `t`/`k` (the ending says so).
    let mut w = World::new(vec![worker(Restart::Always, 3)], false);
    assert_eq!(w.at(10, Input::Stop(0)), [Action::Stop { command: 0 }]);
    assert_eq!(w.exit(20, 0, 143), []);
    assert_eq!(w.launcher.state(0), State::Ended);

    let mut w = World::new(vec![worker(Restart::Always, 3)], false);
    let how = stopped("stopped (SIGTERM)");
    assert_eq!(w.at(20, Input::Ended { command: 0, how }), []);
    assert_eq!(w.launcher.state(0), State::Ended);
    assert_eq!(w.launcher.poll_timeout(), None);
}

#[test]
fn a_stop_during_the_backoff_cancels_the_restart() {
    let mut w = World::new(vec![worker(Restart::Always, 3)], false);
    w.exit(10, 0, 1);
    assert_eq!(w.at(20, Input::Stop(0)), []);
    assert_eq!(w.launcher.poll_timeout(), None);
    assert_eq!(w.at(5000, Input::Wake), []);
}

#[test]
fn quitting_restarts_nothing_and_starts_no_waiter() {
    let mut w = World::new(
        vec![
            worker(Restart::Always, 3),
            plan("web", &[(0, Condition::Succeeded)]),
        ],
        false,
    );
    assert_eq!(w.at(10, Input::Quit), [Action::Stop { command: 0 }]);
    assert_eq!(w.exit(20, 0, 0), []);
    assert_eq!(w.launcher.state(1), State::Idle);
}

#[test]
fn changes_are_debounced_into_one_restart() {
    let mut w = World::new(vec![worker(Restart::No, 3)], false);
    for ms in [100, 200, 350] {
        assert_eq!(w.at(ms, Input::FileChanged(0)), []);
    }
    assert_eq!(w.launcher.poll_timeout(), Some(w.t(650)));
    assert_eq!(w.at(649, Input::Wake), []);
    assert_eq!(w.at(650, Input::Wake), [Action::Restart { command: 0 }]);
    // The stop's exit starts the next run at once, whatever the policy.
    assert_eq!(w.exit(700, 0, 143), [launch(0, 2)]);
    // A change after the command ended starts it again too.
    w.exit(800, 0, 0);
    w.at(900, Input::FileChanged(0));
    assert_eq!(w.at(1200, Input::Wake), [launch(0, 3)]);
}

/// A change's stop is a restart, not the operator's stop (which would hold the command) nor
/// a crash (which the policy would count, or give up on): the next run starts at once and
/// nothing is said of the one that ended.
#[test]
fn a_change_restart_is_neither_a_stop_nor_a_crash() {
    let mut w = World::new(vec![worker(Restart::OnFailure, 0)], false);
    w.at(10, Input::Spawned(0));
    w.at(20, Input::FileChanged(0));
    assert_eq!(w.at(320, Input::Wake), [Action::Restart { command: 0 }]);
    assert_eq!(w.launcher.state(0), State::Running);
    let how = restarted();
    assert_eq!(w.at(400, Input::Ended { command: 0, how }), [launch(0, 2)]);
    // And again: no count of restarts in a row to give up on.
    w.at(410, Input::Spawned(0));
    w.at(420, Input::FileChanged(0));
    assert_eq!(w.at(720, Input::Wake), [Action::Restart { command: 0 }]);
    let how = restarted();
    assert_eq!(w.at(800, Input::Ended { command: 0, how }), [launch(0, 3)]);
}

#[test]
fn an_operator_stop_during_a_change_restart_wins() {
    let mut w = World::new(vec![worker(Restart::No, 3)], false);
    w.at(10, Input::FileChanged(0));
    assert_eq!(w.at(310, Input::Wake), [Action::Restart { command: 0 }]);
    // The change's stop is under way: the operator's is sent too (the broker lets it take
    // over, so that the run ends as stopped), and no restart follows.
    assert_eq!(w.at(320, Input::Stop(0)), [Action::Stop { command: 0 }]);
    let how = stopped("stopped (SIGTERM)");
    assert_eq!(w.at(400, Input::Ended { command: 0, how }), []);
    assert_eq!(w.launcher.state(0), State::Ended);
    assert_eq!(w.launcher.poll_timeout(), None);
}

#[test]
fn an_ordered_stop_is_not_undone_by_a_change() {
    use Condition::*;
    // A change restart under way on a dependency when the operator stops it in order.
    let plans = vec![plan("db", &[]), plan("api", &[(0, Started)])];
    let mut w = World::new(plans.clone(), true);
    w.at(10, Input::Spawned(0));
    w.at(20, Input::FileChanged(0));
    assert_eq!(w.at(320, Input::Wake), [Action::Restart { command: 0 }]);
    // db is stopping already, for its change: the operator's stop goes to it at once (to
    // take that stop over), beside api's.
    let mut sent = w.at(330, Input::Stop(0));
    sent.sort_by_key(|a| format!("{a:?}"));
    assert_eq!(
        sent,
        [Action::Stop { command: 0 }, Action::Stop { command: 1 }]
    );
    let how = stopped("stopped (SIGTERM)");
    assert_eq!(w.at(400, Input::Ended { command: 0, how }), []);
    assert_eq!(w.launcher.state(0), State::Ended);
    assert_eq!(w.exit(500, 1, 143), []);
    assert_eq!(w.launcher.state(1), State::Ended);

    // A change while the dependency waits its turn to stop.
    let mut w = World::new(plans, true);
    w.at(10, Input::Spawned(0));
    assert_eq!(w.at(100, Input::Stop(0)), [Action::Stop { command: 1 }]);
    assert_eq!(w.at(110, Input::FileChanged(0)), []);
    assert_eq!(w.at(410, Input::Wake), []);
    assert_eq!(w.exit(500, 1, 143), [Action::Stop { command: 0 }]);
    let how = stopped("stopped (SIGTERM)");
    assert_eq!(w.at(600, Input::Ended { command: 0, how }), []);
    assert_eq!(w.launcher.state(0), State::Ended);
    assert_eq!(w.launcher.poll_timeout(), None);
}

/// A run whose change's stop was taken over by a stop from elsewhere (`tether stop` through
/// the broker's socket: the launcher hears nothing of it) ends as the operator's: held, not
/// restarted.
#[test]
fn a_change_restart_stopped_from_elsewhere_is_not_restarted() {
    let mut w = World::new(vec![worker(Restart::No, 3)], false);
    w.at(10, Input::FileChanged(0));
    assert_eq!(w.at(310, Input::Wake), [Action::Restart { command: 0 }]);
    let how = stopped("stopped (SIGTERM)");
    assert_eq!(w.at(400, Input::Ended { command: 0, how }), []);
    assert_eq!(w.launcher.state(0), State::Ended);
    assert_eq!(w.at(1000, Input::Wake), []);
    assert_eq!(w.at(1010, Input::FileChanged(0)), [], "held, as after `s`");
    assert_eq!(w.at(2000, Input::Wake), []);
}

/// Quitting while a change's stop runs sends the quit's own stop, which takes it over: the
/// run reads stopped, and nothing restarts it.
#[test]
fn a_quit_during_a_change_restart_stops_the_run() {
    for ordered in [false, true] {
        let mut w = World::new(vec![worker(Restart::No, 3)], ordered);
        w.at(10, Input::FileChanged(0));
        assert_eq!(w.at(310, Input::Wake), [Action::Restart { command: 0 }]);
        assert_eq!(
            w.at(320, Input::Quit),
            [Action::Stop { command: 0 }],
            "{ordered}"
        );
        let how = stopped("stopped (SIGTERM)");
        assert_eq!(w.at(400, Input::Ended { command: 0, how }), []);
        assert_eq!(w.launcher.state(0), State::Ended);
    }
}

#[test]
fn a_change_does_not_bring_back_what_the_operator_stopped() {
    let mut w = World::new(vec![worker(Restart::No, 3)], false);
    assert_eq!(w.at(10, Input::Stop(0)), [Action::Stop { command: 0 }]);
    let how = stopped("stopped (SIGTERM)");
    assert_eq!(w.at(20, Input::Ended { command: 0, how }), []);
    assert_eq!(w.at(30, Input::FileChanged(0)), []);
    assert_eq!(w.launcher.poll_timeout(), None);
    assert_eq!(w.at(1000, Input::Wake), []);
    // Started again by the operator, it follows its changes again.
    assert_eq!(w.at(2000, Input::Start(0)), [launch(0, 2)]);
    w.at(2010, Input::FileChanged(0));
    assert_eq!(w.at(2310, Input::Wake), [Action::Restart { command: 0 }]);
}

#[test]
fn a_change_restart_waits_for_the_dependencies() {
    use Condition::*;
    let mut db = worker(Restart::Always, 3);
    db.name = "db".into();
    let mut w = World::new(vec![db, plan("web", &[(0, Ready)])], false);
    w.at(10, Input::Spawned(0));
    assert_eq!(w.at(20, Input::Ready(0)), [launch(1, 1)]);
    // db restarts (due at 1100) when web's change stops it.
    assert_eq!(w.exit(100, 0, 1).len(), 1);
    w.at(110, Input::FileChanged(1));
    assert_eq!(w.at(410, Input::Wake), [Action::Restart { command: 1 }]);
    let how = restarted();
    assert_eq!(w.at(500, Input::Ended { command: 1, how }), []);
    assert_eq!(
        w.launcher.state(1),
        State::Waiting {
            on: "db",
            not_started: false
        }
    );
    assert_eq!(w.at(1100, Input::Wake), [launch(0, 2)]);
    assert_eq!(w.at(1200, Input::Ready(0)), [launch(1, 2)]);
}

#[test]
fn a_restart_waits_for_a_dependency_that_restarts() {
    use Condition::*;
    let mut db = worker(Restart::Always, 3);
    db.name = "db".into();
    let mut web = worker(Restart::Always, 3);
    web.name = "web".into();
    web.depends_on = vec![(0, Ready)];
    web.backoff = Duration::from_millis(500);
    let mut w = World::new(vec![db, web], false);
    w.at(10, Input::Spawned(0));
    assert_eq!(w.at(20, Input::Ready(0)), [launch(1, 1)]);
    assert_eq!(w.exit(100, 0, 1).len(), 1); // db due at 1100
    assert_eq!(w.exit(100, 1, 1).len(), 1); // web due at 600
    assert_eq!(w.at(600, Input::Wake), []);
    assert_eq!(
        w.launcher.state(1),
        State::Waiting {
            on: "db",
            not_started: false
        }
    );
    assert_eq!(w.at(1100, Input::Wake), [launch(0, 2)]);
    assert_eq!(w.at(1200, Input::Ready(0)), [launch(1, 2)]);
}

#[test]
fn a_restart_does_not_start_on_a_dependency_the_operator_stopped() {
    use Condition::*;
    let plans = || {
        let mut web = worker(Restart::Always, 3);
        web.name = "web".into();
        web.depends_on = vec![(0, Ready)];
        vec![plan("db", &[]), web]
    };
    let mut w = World::new(plans(), false);
    w.at(10, Input::Spawned(0));
    assert_eq!(w.at(20, Input::Ready(0)), [launch(1, 1)]);
    assert_eq!(w.exit(100, 1, 1).len(), 1); // web due at 1100
    assert_eq!(w.at(200, Input::Stop(0)), [Action::Stop { command: 0 }]);
    let how = stopped("stopped (SIGTERM)");
    assert_eq!(w.at(300, Input::Ended { command: 0, how }), []);
    assert_eq!(
        w.at(1100, Input::Wake),
        [fail(1, "db: stopped (SIGTERM) after it was ready")]
    );

    // In order, the operator's stop of db calls off web's restart to come.
    let mut w = World::new(plans(), true);
    w.at(10, Input::Spawned(0));
    assert_eq!(w.at(20, Input::Ready(0)), [launch(1, 1)]);
    assert_eq!(w.exit(100, 1, 1).len(), 1);
    assert_eq!(w.at(200, Input::Stop(0)), [Action::Stop { command: 0 }]);
    assert_eq!(w.launcher.state(1), State::Ended);
    let how = stopped("stopped (SIGTERM)");
    assert_eq!(w.at(300, Input::Ended { command: 0, how }), []);
    assert_eq!(w.launcher.poll_timeout(), None);
}

#[test]
fn an_operator_stopped_run_has_not_succeeded() {
    use Condition::*;
    // Stopped by the operator, even with exit 0 (`trap 'exit 0' TERM`).
    let mut w = World::new(
        vec![plan("migrate", &[]), plan("web", &[(0, Succeeded)])],
        false,
    );
    assert_eq!(w.at(10, Input::Stop(0)), [Action::Stop { command: 0 }]);
    let how = Ending::Exited {
        done: true,
        by_operator: true,
        words: "stopped (exit 0)".into(),
    };
    assert_eq!(
        w.at(20, Input::Ended { command: 0, how }),
        [fail(1, "migrate: stopped (exit 0)")]
    );
}

#[test]
fn succeeded_holds_while_a_restart_is_to_come() {
    use Condition::*;
    // Exit 0 with a restart to come (`always`): its waiter starts.
    let mut migrate = worker(Restart::Always, 3);
    migrate.name = "migrate".into();
    let mut w = World::new(vec![migrate, plan("web", &[(0, Succeeded)])], false);
    let actions = w.exit(20, 0, 0);
    assert!(
        matches!(&actions[..], [Action::Report { command: 0, .. }, a] if *a == launch(1, 1)),
        "{actions:?}"
    );
}

#[test]
fn an_ordered_stop_stops_dependents_first_in_reverse_order() {
    use Condition::*;
    let plans = vec![
        plan("db", &[]),
        plan("api", &[(0, Started)]),
        plan("web", &[(1, Started)]),
        plan("other", &[]),
    ];
    let mut w = World::new(plans, true);
    w.at(10, Input::Spawned(0));
    w.at(20, Input::Spawned(1));
    w.at(30, Input::Spawned(3));
    assert_eq!(w.at(100, Input::Stop(0)), [Action::Stop { command: 2 }]);
    assert_eq!(w.exit(200, 2, 143), [Action::Stop { command: 1 }]);
    assert_eq!(w.exit(300, 1, 143), [Action::Stop { command: 0 }]);
    assert_eq!(w.exit(400, 0, 143), []);
    assert!(
        [0, 1, 2]
            .iter()
            .all(|&i| w.launcher.state(i) == State::Ended)
    );
    assert_eq!(w.launcher.state(3), State::Running);
}

#[test]
fn quitting_in_order_stops_leaves_first() {
    use Condition::*;
    let plans = vec![
        plan("db", &[]),
        plan("api", &[(0, Started)]),
        plan("cron", &[]),
    ];
    let mut w = World::new(plans, true);
    w.at(10, Input::Spawned(0));
    assert_eq!(
        w.at(100, Input::Quit),
        [Action::Stop { command: 1 }, Action::Stop { command: 2 }]
    );
    assert_eq!(w.exit(200, 1, 0), [Action::Stop { command: 0 }]);
}

#[test]
fn unordered_stops_stop_only_the_one() {
    use Condition::*;
    let mut w = World::new(vec![plan("db", &[]), plan("api", &[(0, Started)])], false);
    w.at(10, Input::Spawned(0));
    assert_eq!(w.at(100, Input::Stop(0)), [Action::Stop { command: 0 }]);
}

#[test]
fn cycles_are_named_along_their_path() {
    assert_eq!(
        find_cycle(&[vec![1], vec![2], vec![0]]),
        Some(vec![0, 1, 2, 0])
    );
    assert_eq!(find_cycle(&[vec![], vec![1]]), Some(vec![1, 1]));
    assert_eq!(find_cycle(&[vec![], vec![0], vec![0, 1]]), None);
}

#[test]
fn config_words_read_as_written_and_nothing_else() {
    assert_eq!(Condition::parse("started"), Some(Condition::Started));
    assert_eq!(Condition::parse("ready"), Some(Condition::Ready));
    assert_eq!(Condition::parse("succeeded"), Some(Condition::Succeeded));
    assert_eq!(Restart::parse("no"), Some(Restart::No));
    assert_eq!(Restart::parse("on-failure"), Some(Restart::OnFailure));
    assert_eq!(Restart::parse("always"), Some(Restart::Always));
    for word in ["Ready", "on_failure", "On-Failure", "", "yes"] {
        assert_eq!(Condition::parse(word), None, "{word}");
        assert_eq!(Restart::parse(word), None, "{word}");
    }
}
