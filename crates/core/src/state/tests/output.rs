//! The command's output: stored and journaled as coalesced `output` events, capped, failing;
//! the event log failing; the parent falling behind; the tree's record and its cap.

use super::*;
use crate::protocol::{CapReason, CappedKind, Stream};

fn read(rig: &mut Rig, stream: Stream, bytes: &[u8]) {
    rig.feed(Input::Read { stream, bytes });
}

/// Every `output` event: stream, offset, length.
fn outputs(rig: &Rig) -> Vec<(Stream, u64, u64)> {
    rig.journal()
        .filter_map(|e| match e.kind {
            EventKind::Output {
                stream,
                offset,
                len,
            } => Some((stream, offset, len)),
            _ => None,
        })
        .collect()
}

#[test]
fn chunks_of_one_stream_within_the_window_are_one_output_event() {
    let mut rig = Rig::running(request(), OnTerm::Exit);
    read(&mut rig, Stream::Stdout, b"abc");
    rig.advance(ms(3));
    read(&mut rig, Stream::Stdout, b"defg");
    assert!(outputs(&rig).is_empty(), "still gathering");
    rig.run_until(ms(10));
    assert_eq!(outputs(&rig), [(Stream::Stdout, 0, 7)]);
    assert_eq!(rig.stored, [(Stream::Stdout, 3), (Stream::Stdout, 4)]);
}

#[test]
fn streams_that_interleave_are_events_of_their_own_at_their_own_offsets() {
    let mut rig = Rig::running(request(), OnTerm::Exit);
    read(&mut rig, Stream::Stdout, b"one\n");
    read(&mut rig, Stream::Stderr, b"two\n");
    read(&mut rig, Stream::Stdout, b"three\n");
    rig.run_until(ms(20));
    assert_eq!(
        outputs(&rig),
        [
            (Stream::Stdout, 0, 4),
            (Stream::Stderr, 0, 4),
            (Stream::Stdout, 4, 6)
        ]
    );
}

#[test]
fn any_other_event_first_closes_the_output_gathered_before_it() {
    let mut rig = Rig::running(request(), OnTerm::Exit);
    read(&mut rig, Stream::Stdout, b"last words");
    rig.command_ends(exited(0));
    assert_eq!(&rig.kinds()[1..], ["output", "exit"]);
}

#[test]
fn events_reach_the_disk_before_the_bytes_that_follow_them() {
    let mut rig = Rig::running(request(), OnTerm::Exit);
    let flushes = rig.flushes;
    read(&mut rig, Stream::Stdout, b"x");
    assert_eq!(
        rig.flushes,
        flushes + 1,
        "`spawned` was flushed before the bytes"
    );
    read(&mut rig, Stream::Stdout, b"y");
    assert_eq!(rig.flushes, flushes + 1, "nothing new to flush: no flush");
}

#[test]
fn output_past_the_cap_is_counted_not_stored_and_the_cap_said_once() {
    let mut rig = Rig::running(
        LaunchRequest {
            max_output: 10,
            ..request()
        },
        OnTerm::Exit,
    );
    read(&mut rig, Stream::Stdout, b"12345678");
    read(&mut rig, Stream::Stdout, b"abcdef");
    read(&mut rig, Stream::Stdout, b"more");
    assert_eq!(rig.stored, [(Stream::Stdout, 8), (Stream::Stdout, 2)]);
    let kinds = rig.kinds();
    assert_eq!(
        &kinds[1..],
        ["output", "output_capped"],
        "the bytes' event first"
    );
    let capped = rig.journal().find_map(|e| match &e.kind {
        EventKind::OutputCapped { reason, stored, .. } => Some((*reason, *stored)),
        _ => None,
    });
    assert_eq!(capped, Some((CapReason::Limit, 10)));
    read(&mut rig, Stream::Stderr, b"err");
    assert_eq!(
        rig.stored.last(),
        Some(&(Stream::Stdout, 2)),
        "one bound for the command: stderr gets nothing more either"
    );
    assert_eq!(rig.count("output_capped"), 2);
    rig.command_ends(exited(0));
    rig.finish();
    let stdout = rig.result().stdout;
    assert_eq!((stdout.bytes, stdout.stored), (18, 10));
    assert_eq!(
        truncated(&rig),
        [(Stream::Stdout, 10, 8), (Stream::Stderr, 0, 3)]
    );
}

/// Every `output_truncated`: stream, kept, dropped.
fn truncated(rig: &Rig) -> Vec<(Stream, u64, u64)> {
    rig.journal()
        .filter_map(|e| match e.kind {
            EventKind::OutputTruncated {
                stream,
                kept,
                dropped,
            } => Some((stream, kept, dropped)),
            _ => None,
        })
        .collect()
}

/// The bound is the command's, not each stream's: a command that floods both streams
/// journals no more than it (issue 23, item 14: 1.7 GB in 3 s from one command); the end
/// says what of each was kept and dropped, before `close`.
#[test]
fn both_streams_share_the_commands_bound() {
    let mut rig = Rig::running(
        LaunchRequest {
            max_output: 10,
            ..request()
        },
        OnTerm::Exit,
    );
    read(&mut rig, Stream::Stdout, b"123456");
    read(&mut rig, Stream::Stderr, b"abcdef");
    read(&mut rig, Stream::Stdout, b"789");
    read(&mut rig, Stream::Stderr, b"ghi");
    assert_eq!(rig.stored, [(Stream::Stdout, 6), (Stream::Stderr, 4)]);
    rig.command_ends(exited(0));
    rig.finish();
    let (out, err) = (rig.result().stdout, rig.result().stderr);
    assert_eq!((out.bytes, out.stored, err.bytes, err.stored), (9, 6, 9, 4));
    assert_eq!(
        truncated(&rig),
        [(Stream::Stdout, 6, 3), (Stream::Stderr, 4, 5)]
    );
    let kinds = rig.kinds();
    let at = |kind: &str| kinds.iter().rposition(|k| *k == kind);
    assert!(at("output_truncated") < at("close"), "{kinds:?}");
}

/// Nothing dropped, nothing said.
#[test]
fn output_within_the_bound_is_not_marked() {
    let mut rig = Rig::running(request(), OnTerm::Exit);
    read(&mut rig, Stream::Stdout, b"all of it");
    rig.command_ends(exited(0));
    rig.finish();
    assert!(truncated(&rig).is_empty());
}

#[test]
fn a_stream_the_disk_refuses_stops_being_stored_and_says_why() {
    let mut rig = Rig::running(request(), OnTerm::Exit);
    read(&mut rig, Stream::Stdout, b"0123456789");
    rig.feed(Input::StoreFailed {
        stream: Stream::Stdout,
        reason: CapReason::DiskFull,
        message: "stdout.log is no longer stored: the disk is full".into(),
        stored: 4,
    });
    read(&mut rig, Stream::Stdout, b"after");
    assert_eq!(rig.stored.len(), 1, "nothing more is stored");
    assert_eq!(rig.count("output_capped"), 1);
    // Counted still, and at their place in the stream; the cap's event closed the first.
    rig.run_until(ms(50));
    assert_eq!(
        outputs(&rig),
        [(Stream::Stdout, 0, 10), (Stream::Stdout, 10, 5)]
    );
    rig.command_ends(exited(0));
    rig.finish();
    assert_eq!(
        (rig.result().stdout.bytes, rig.result().stdout.stored),
        (15, 4)
    );
}

#[test]
fn an_event_log_that_fails_is_said_live_and_written_to_no_more() {
    let mut rig = Rig::running(request(), OnTerm::Exit);
    let journaled = rig.broker.journal_len();
    rig.feed(Input::Happened(EventKind::ParentUnresponsive {
        silent_ms: 1,
    }));
    let unwritten = rig.lines.last().unwrap().event.to_line().len() as u64;
    rig.feed(Input::JournalFailed {
        error: std::io::Error::from_raw_os_error(ENOSPC),
        unwritten,
    });
    let failure = rig.lines.last().unwrap();
    assert!(
        matches!(&failure.event.kind, EventKind::BrokerFailure { code, .. } if code == "journal_write")
    );
    assert!(failure.parent && failure.subscribers && !failure.journal);
    assert_eq!(
        rig.broker.journal_len(),
        journaled,
        "the lost line is not counted"
    );
    let flushes = rig.flushes;
    rig.command_ends(exited(0));
    let exit = rig.lines.last().unwrap();
    assert!(
        exit.parent && !exit.journal,
        "the command's end still goes live"
    );
    rig.tick();
    assert_eq!(rig.flushes, flushes, "a dead log is not flushed");
    // Said once.
    rig.feed(Input::JournalFailed {
        error: std::io::Error::from_raw_os_error(EIO),
        unwritten: 0,
    });
    assert_eq!(rig.count("broker_failure"), 0);
    let failures = rig
        .lines
        .iter()
        .filter(|l| l.event.kind.name() == "broker_failure")
        .count();
    assert_eq!(failures, 1);
}

#[test]
fn a_parent_far_behind_gets_no_more_output_events_but_every_other_event() {
    let mut rig = Rig::running(request(), OnTerm::Exit);
    rig.feed(Input::ParentBacklog(9 << 20));
    read(&mut rig, Stream::Stdout, b"flood");
    rig.run_until(ms(20));
    let output = rig
        .lines
        .iter()
        .find(|l| l.event.kind.name() == "output")
        .unwrap();
    assert!(output.journal && !output.parent, "journaled only");
    rig.command_ends(exited(0));
    assert_eq!(rig.to_parent().last(), Some(&"exit"));
    // Caught up: output goes to it again.
    rig.feed(Input::ParentBacklog(0));
    read(&mut rig, Stream::Stdout, b"again");
    rig.run_until(ms(40));
    assert_eq!(rig.to_parent().last(), Some(&"output"));
}

#[test]
fn the_tree_is_walked_soon_after_the_spawn_and_recorded_when_it_changed() {
    let mut rig = Rig::running(request(), OnTerm::Exit);
    rig.world
        .borrow_mut()
        .trees
        .push_back(EventKind::Tree { processes: vec![] });
    rig.run_until(ms(49));
    assert_eq!(rig.world.borrow().walks, 0);
    let flushes = rig.flushes;
    rig.run_until(ms(50));
    assert_eq!(rig.world.borrow().walks, 1);
    assert_eq!(rig.count("tree"), 1);
    assert!(
        rig.flushes > flushes,
        "the record is flushed in the turn that walked"
    );
    assert!(!rig.broker.unflushed, "nothing waits for the next wake-up");
    // Quiet: the next walk backs off; output brings it within a second.
    rig.run_until(ms(900));
    let walks = rig.world.borrow().walks;
    read(&mut rig, Stream::Stdout, b"busy");
    rig.run_until(ms(2000));
    assert!(rig.world.borrow().walks > walks);
}

#[test]
fn the_trees_cap_is_journaled_and_listed_in_the_result() {
    let mut rig = Rig::running(request(), OnTerm::Exit);
    rig.world
        .borrow_mut()
        .trees
        .push_back(EventKind::EventsCapped {
            kind_capped: CappedKind::Tree,
            budget: 100,
            message: "tree events stop here".into(),
        });
    rig.run_until(ms(50));
    assert_eq!(rig.count("events_capped"), 1);
    rig.command_ends(exited(0));
    rig.finish();
    assert_eq!(rig.result().events_capped, [CappedKind::Tree]);
}
