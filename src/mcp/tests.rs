//! Every reply within its budget: property tests over what a command can print and a
//! client can send (tabs, 0xFF, control bytes, base64, quotes, long lines, long names,
//! hundreds of commands), each reply weighed as it is sent, and paging checked to return
//! every byte and every command once.

use std::path::{Path, PathBuf};

use proptest::prelude::*;
use regex::Regex;

use super::budget::{COMMAND_CAP, NAME_CAP, REPLY_BUDGET, reply_size};
use super::commands::Tracked;
use super::list::{ListedCommand, page_of};
use super::output::page;
use super::run::{CommandStatus, result_of};
use super::signal::{SentSignal, SignalResult};
use super::text::sanitize;
use crate::journal::CommandId;
use crate::protocol::{ExitStatus, Stream};
use crate::testing::write_private;

/// A run of one costly kind of byte, or of plain text.
fn piece() -> impl Strategy<Value = Vec<u8>> {
    let run = |bytes: &'static [u8]| {
        (0usize..20_000).prop_map(move |n| bytes.iter().copied().cycle().take(n).collect())
    };
    prop_oneof![
        run(b"\t"),
        run(b"\xff"),
        run(b"\x01\x02\x1f\x7f"),
        run(b"\"\\"),
        run("é😀\u{fffd}".as_bytes()),
        run(b"\x1b[31m\x1b]0;title\x07"),
        run(b"QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo0NTY3ODkrLw=="),
        run(b"\t\n"),
        "[ -~]{0,200}\n".prop_map(String::into_bytes),
        Just(b"\n".to_vec()),
    ]
}

fn output() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(piece(), 0..8).prop_map(|pieces| pieces.concat())
}

/// A name, command line or message as a client or a journal may give it.
fn text(max: usize) -> impl Strategy<Value = String> {
    let costly = prop::sample::select(vec!["\u{1}", "\"", "\\", "\t", "é", "😀", "x", "\u{fffd}"]);
    prop_oneof![
        "[a-z0-9 ./-]{0,30}",
        (costly, 0..max).prop_map(|(s, n)| s.repeat(n)),
    ]
}

fn tracked(journal: &Path, id: &CommandId, name: &str, command: &str) -> Tracked {
    Tracked::new(
        id.clone(),
        name.to_string(),
        command.to_string(),
        journal.to_path_buf(),
        true,
    )
}

fn within_budget<T: serde::Serialize>(reply: &T) -> Result<(), TestCaseError> {
    let size = reply_size(reply);
    prop_assert!(size <= REPLY_BUDGET, "a reply of {size} bytes");
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 32,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// `output` pages through any stream within the budget, each page the text of exactly
    /// the bytes it covers, every byte covered once.
    #[test]
    fn output_pages_fit_and_return_every_byte_once(
        stream in output(),
        max in prop_oneof![Just(65_536usize), Just(16_384), 1usize..70_000],
        grep in prop::option::of(prop::sample::select(vec!["x", "^$", "é", "[0-9]"])),
    ) {
        let journal = tether_os::testing::private_tempdir();
        write_private(journal.path().join(Stream::Stdout.file_name()), &stream);
        let command = tracked(journal.path(), &CommandId::new("s", 1, "out"), "out", "out");
        let grep = grep.map(|g| Regex::new(g).expect("a regex"));
        let mut offset = 0u64;
        loop {
            let page = page(&command, Stream::Stdout, offset, max, grep.as_ref(), "finished".into())
                .expect("a page");
            within_budget(&page)?;
            let covered = &stream[offset as usize..page.next_offset as usize];
            prop_assert!(covered.len() <= max);
            if grep.is_none() {
                prop_assert_eq!(&page.text, &sanitize(covered));
            }
            if offset as usize == stream.len() {
                prop_assert_eq!(page.next_offset, offset);
                prop_assert!(!page.cut);
                break;
            }
            prop_assert!(page.next_offset > offset, "no progress at {}", offset);
            prop_assert_eq!(page.cut, (page.next_offset as usize) < stream.len());
            offset = page.next_offset;
        }
    }

    /// `run`'s and `signal`'s results fit whatever the command printed and whatever its
    /// name, command line and error.
    #[test]
    fn run_and_signal_results_fit(
        stdout in output(),
        stderr in output(),
        name in text(3_000),
        command in text(50_000),
        error in prop::option::of(text(5_000)),
        left in 0usize..3_000,
    ) {
        let journal = tether_os::testing::private_tempdir();
        write_private(journal.path().join(Stream::Stdout.file_name()), &stdout);
        write_private(journal.path().join(Stream::Stderr.file_name()), &stderr);
        let mut command = tracked(journal.path(), &CommandId::new("s", 1, "name"), &name, &command);
        command.failure = error;
        command.exit = Some(ExitStatus { code: Some(1), signal: None, core_dumped: false });
        command.left_running = (1..=left as i32).collect();
        let result = result_of(&command);
        within_budget(&result)?;
        prop_assert_eq!(result.status.left_running.len() + result.status.left_running_more.unwrap_or(0), left);
        within_budget(&SignalResult {
            sent: vec![SentSignal { signal: "TERM".into(), processes: left }],
            confirmed: true,
            status: CommandStatus::of(&command),
        })?;
    }

    /// `list` pages through a session of any size within the budget, every command once
    /// and in order.
    #[test]
    fn list_pages_fit_and_return_every_command_once(
        // Names and command lines to four times their caps: what is past a cap is cut,
        // so longer ones cost the test, not the reply.
        commands in prop::collection::vec((text(4 * NAME_CAP), text(4 * COMMAND_CAP)), 0..500),
    ) {
        let journal = PathBuf::from("/nonexistent/journal");
        let listed: Vec<(CommandId, Tracked)> = commands
            .iter()
            .enumerate()
            .map(|(n, (name, command))| {
                let place = CommandId::new("s", n as u64 + 1, "cmd");
                (place.clone(), tracked(&journal, &place, name, command))
            })
            .collect();
        let mut seen = Vec::new();
        let mut at: Option<CommandId> = None;
        loop {
            let from = at.clone();
            let rest = listed
                .iter()
                .filter(|(place, _)| from.as_ref().is_none_or(|from| place >= from))
                .map(|(_, tracked)| ListedCommand::of(tracked, Some(1)));
            let page = page_of("mcp-session".into(), rest);
            within_budget(&page)?;
            prop_assert!(!page.commands.is_empty() || listed.is_empty());
            seen.extend(page.commands.iter().map(|c| c.status.id.clone()));
            match page.next_cursor {
                Some(next) => at = Some(CommandId::parse("s", &next).expect("a cursor")),
                None => break,
            }
        }
        let all: Vec<String> = listed.iter().map(|(_, t)| t.id.dir_name()).collect();
        prop_assert_eq!(seen, all);
    }
}

/// Every field a status echoes at once at its cap, in the costliest character JSON has,
/// with an odd journal path and thousands of pids: the caps leave room.
#[test]
fn a_status_with_every_field_at_its_worst_fits() {
    let worst = "\u{1}".repeat(100_000);
    let journal = PathBuf::from(format!("/{}", "\u{1}".repeat(5_000)));
    // Longer than any id tether makes (a name is at most 40 file-safe characters).
    let id = CommandId {
        session: "s".into(),
        number: 7,
        name: "\u{1}".repeat(200),
    };
    let mut command = tracked(&journal, &id, &worst, &worst);
    command.failure = Some(worst.clone());
    command.left_running = (4_000_000..4_010_000).collect();
    command.exit = Some(ExitStatus {
        code: Some(-2_000_000_000),
        signal: None,
        core_dumped: true,
    });
    let result = result_of(&command);
    assert!(
        reply_size(&result) <= REPLY_BUDGET,
        "{}",
        reply_size(&result)
    );
    let listed = page_of(
        "s".repeat(64),
        std::iter::repeat_with(|| ListedCommand::of(&command, Some(u64::MAX))).take(3),
    );
    assert_eq!(listed.commands.len(), 1);
    assert!(
        reply_size(&listed) <= REPLY_BUDGET,
        "{}",
        reply_size(&listed)
    );
}
