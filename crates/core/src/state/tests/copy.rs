//! The front end's copy once the command has ended: waited for while its caller takes
//! bytes, given up (and journaled) when it takes none, at once after a stop was asked.

use super::*;
use crate::protocol::{Request, Stream};
use crate::state::copy::COPY_PATIENCE;

fn stop() -> Input<'static> {
    from_parent(Request::Stop { origin: None })
}

/// Every `output_undelivered`: stream and bytes.
fn undelivered(rig: &Rig) -> Vec<(Stream, u64)> {
    rig.journal()
        .filter_map(|e| match e.kind {
            EventKind::OutputUndelivered { stream, bytes } => Some((stream, bytes)),
            _ => None,
        })
        .collect()
}

/// The command's copy is behind (its caller takes nothing) when it is stopped: once it is
/// gone the broker ends without waiting for the caller, and says what the caller never got.
#[test]
fn a_stopped_command_whose_caller_takes_nothing_ends_at_once() {
    let mut rig = Rig::running(request(), OnTerm::Exit);
    rig.copy = CopyProgress {
        behind: true,
        taken: 1 << 20,
    };
    rig.undelivered = [70_000, 0];
    rig.tick();
    rig.feed(stop());
    rig.reap();
    rig.tick();
    assert_eq!(rig.copies_given_up, 1, "{:?}", rig.kinds());
    // Nothing holds the stream unread any more: what its pipe still held is read (and never
    // reaches the caller either), then end of file, and the broker ends.
    rig.feed(Input::Read {
        stream: Stream::Stdout,
        bytes: &[b'y'; 4096],
    });
    rig.finish();
    assert_eq!(undelivered(&rig), [(Stream::Stdout, 74_096)]);
    assert_eq!(rig.result().stdout.undelivered, 74_096);
    let exit = rig.kinds().iter().position(|k| *k == "exit");
    let given_up = rig.kinds().iter().position(|k| *k == "output_undelivered");
    assert!(exit < given_up, "{:?}", rig.kinds());
}

/// A command a budget stopped, its caller taking nothing: once it is gone the copy is given
/// up at once, as after the watchdog's stop, not after the patience.
#[test]
fn a_command_a_budget_stopped_does_not_wait_for_a_caller_that_takes_nothing() {
    let request = LaunchRequest {
        budgets: crate::protocol::Budgets {
            max_time: Some(std::time::Duration::from_secs(5)),
            ..Default::default()
        },
        ..request()
    };
    let mut rig = Rig::running(request, OnTerm::Exit);
    rig.copy = CopyProgress {
        behind: true,
        taken: 1 << 20,
    };
    rig.undelivered = [70_000, 0];
    rig.run_until(ms(5000));
    assert!(
        rig.kinds().contains(&"budget_exceeded"),
        "{:?}",
        rig.kinds()
    );
    rig.reap();
    rig.tick();
    assert_eq!(rig.copies_given_up, 1, "{:?}", rig.kinds());
    rig.finish();
    assert_eq!(undelivered(&rig), [(Stream::Stdout, 70_000)]);
}

/// A command that ended on its own: its caller is waited for while it takes bytes, however
/// slowly; once it took nothing for the patience, the copy is given up.
#[test]
fn a_caller_that_takes_bytes_is_waited_for_and_one_that_stops_taking_is_not() {
    let mut rig = Rig::running(request(), OnTerm::Exit);
    rig.copy = CopyProgress {
        behind: true,
        taken: 0,
    };
    rig.undelivered = [0, 4096];
    rig.command_ends(exited(0));
    // Slow, but it moves: a little every few seconds, for a minute.
    for step in 1..=20 {
        rig.copy.taken = step * 512;
        rig.advance(COPY_PATIENCE - ms(1500));
    }
    assert_eq!(rig.copies_given_up, 0);
    assert!(!rig.broker.is_done());
    // Then it takes nothing.
    rig.run_until(ms(70_000) + COPY_PATIENCE * 2);
    assert_eq!(rig.copies_given_up, 1);
    rig.finish();
    assert_eq!(undelivered(&rig), [(Stream::Stderr, 4096)]);
    assert_eq!(rig.result().stderr.undelivered, 4096);
}

/// A copy that keeps up is never given up, stop or not.
#[test]
fn a_copy_that_keeps_up_is_left_alone() {
    let mut rig = Rig::running(request(), OnTerm::Exit);
    rig.feed(stop());
    rig.reap();
    rig.finish();
    assert_eq!(rig.copies_given_up, 0);
    assert!(undelivered(&rig).is_empty());
    assert_eq!(rig.result().stdout.undelivered, 0);
}

/// While the command runs, a copy behind is backpressure, as a full pipe is without tether:
/// never given up, however long.
#[test]
fn while_the_command_runs_the_copy_is_waited_for() {
    let mut rig = Rig::running(request(), OnTerm::Exit);
    rig.copy = CopyProgress {
        behind: true,
        taken: 0,
    };
    rig.advance(COPY_PATIENCE * 100);
    assert_eq!(rig.copies_given_up, 0);
}

/// A stop asked once the command had ended (the broker waiting on a slow caller) ends the
/// wait.
#[test]
fn a_stop_asked_while_waiting_for_the_caller_gives_the_copy_up() {
    let mut rig = Rig::running(request(), OnTerm::Exit);
    rig.copy = CopyProgress {
        behind: true,
        taken: 0,
    };
    rig.undelivered = [10, 0];
    rig.command_ends(exited(0));
    rig.advance(ms(1500));
    assert_eq!(rig.copies_given_up, 0);
    rig.feed(control_stop());
    rig.tick();
    assert_eq!(rig.copies_given_up, 1);
    rig.finish();
}

fn control_stop() -> Input<'static> {
    from_client(1, Request::Stop { origin: None })
}
