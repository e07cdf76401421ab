//! Attention in the machine: `failed` and `finished` as a command ends, a silence watchdog's
//! stop as a failure, and nothing for a short command that ends well. (What a process waits
//! on is read from /proc: the detector's own tests in `crate::attention` cover `needs_input`,
//! `quiet` and `runaway` with fake samples.)

use super::*;
use crate::protocol::{AttentionKind, AttentionRequest};

fn with_attention() -> LaunchRequest {
    LaunchRequest {
        attention: AttentionRequest::default(),
        ..request()
    }
}

/// The `attention` events journaled, as kind and detail.
fn attention(rig: &Rig) -> Vec<(AttentionKind, String)> {
    rig.journal()
        .filter_map(|e| match &e.kind {
            EventKind::Attention { attention, detail } => Some((*attention, detail.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn a_short_command_that_ends_well_needs_nobody() {
    let mut rig = Rig::running(with_attention(), OnTerm::Exit);
    rig.advance(Duration::from_secs(2));
    rig.command_ends(exited(0));
    rig.finish();
    assert_eq!(attention(&rig), []);
}

#[test]
fn a_failure_is_told_once_with_its_exit_code() {
    let mut rig = Rig::running(with_attention(), OnTerm::Exit);
    rig.advance(Duration::from_millis(5));
    rig.command_ends(exited(3));
    rig.finish();
    let told = attention(&rig);
    assert_eq!(told.len(), 1, "{told:?}");
    assert_eq!(told[0].0, AttentionKind::Failed);
    assert!(told[0].1.contains('3'), "{told:?}");
    let kinds = rig.kinds();
    let exit = kinds.iter().position(|k| *k == "exit").expect("an exit");
    let told_at = kinds
        .iter()
        .position(|k| *k == "attention")
        .expect("attention");
    assert!(told_at > exit, "told after the exit it is about: {kinds:?}");
}

#[test]
fn a_long_command_that_ends_well_is_told_finished() {
    let mut rig = Rig::running(with_attention(), OnTerm::Exit);
    rig.advance(Duration::from_secs(11));
    rig.command_ends(exited(0));
    rig.finish();
    let told = attention(&rig);
    assert_eq!(
        told.iter().map(|t| t.0).collect::<Vec<_>>(),
        [AttentionKind::Finished]
    );
}

#[test]
fn attention_off_tells_nothing_even_of_a_failure() {
    let mut rig = Rig::running(request(), OnTerm::Exit);
    rig.advance(Duration::from_secs(11));
    rig.command_ends(exited(1));
    rig.finish();
    assert_eq!(attention(&rig), []);
}

#[test]
fn a_command_stopped_by_the_silence_watchdog_is_a_failure() {
    let request = LaunchRequest {
        no_output_timeout_ms: Some(1000),
        ..with_attention()
    };
    let mut rig = Rig::running(request, OnTerm::Exit);
    rig.run_until(Duration::from_secs(30));
    rig.finish();
    let told = attention(&rig);
    assert_eq!(
        told.iter().map(|t| t.0).collect::<Vec<_>>(),
        [AttentionKind::Failed],
        "{told:?}"
    );
}
