//! Reading a journal takes memory for what is shown, not for the journal's size: a 200 MB
//! event log (a 100 MB line, 100 MB of garbage lines, real events around them) is listed and
//! exported in a few MiB, the damage said once, the events after it still seen.

use crate::common;

use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::path::Path;

use common::{TestEnv, copy_dir, run_measured};
use tether::export::SessionsDocument;

/// Loose: the real figure is a few MiB (see the report's benchmark); a debug build and the
/// allocator's slack must fit.
const PEAK_LIMIT: u64 = 128 << 20;

const MIB: usize = 1 << 20;

/// Writes `01-ok/events.jsonl` of a copy of the fixture session again: its first events, a
/// 100 MB line, 100 MB of short garbage lines, then its remaining events (the exit among
/// them). Streamed: never held in memory here either.
fn damage_journal(command: &Path) {
    let path = command.join("events.jsonl");
    let original = fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = original.lines().collect();
    let (before, after) = lines.split_at(4);
    let mut out = BufWriter::new(File::create(&path).unwrap());
    for line in before {
        writeln!(out, "{line}").unwrap();
    }
    let block = vec![b'x'; MIB];
    for _ in 0..100 {
        out.write_all(&block).unwrap();
    }
    out.write_all(b"\n").unwrap();
    let garbage = format!("{}\n", "not an event ".repeat(7));
    for _ in 0..(100 * MIB / garbage.len()) {
        out.write_all(garbage.as_bytes()).unwrap();
    }
    for line in after {
        writeln!(out, "{line}").unwrap();
    }
    out.flush().unwrap();
}

#[test]
fn a_huge_damaged_journal_is_listed_and_exported_in_bounded_memory() {
    let env = TestEnv::new("journal-memory");
    let state = env.state_dir();
    let session = state.join("sessions/huge");
    copy_dir(&common::every_kind_fixture(), &session);
    for dir in [&state, &state.join("sessions"), &session] {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700)).unwrap();
    }
    damage_journal(&session.join("01-ok"));
    assert!(
        fs::metadata(session.join("01-ok/events.jsonl"))
            .unwrap()
            .len()
            > 200_000_000
    );

    let runs: [&[&str]; 6] = [
        &["sessions"],
        &["sessions", "--json"],
        &["export", "huge", "--format", "otlp"],
        &["export", "huge", "--format", "jsonl"],
        &["export", "huge", "--format", "chrome-trace"],
        &["export", "huge", "--format", "text"],
    ];
    for args in runs {
        let (output, peak) = run_measured(&env, env.tether(args), &format!("tether {args:?}"));
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        eprintln!("tether {args:?}: peak {} MiB", peak >> 20);
        assert!(output.status.success(), "{args:?}: {stderr}");
        assert!(
            peak <= PEAK_LIMIT,
            "tether {args:?} peaked at {} MiB",
            peak >> 20
        );
        // Bounded output too: the damage is said once, not once a garbage line.
        assert!(
            stdout.len() + stderr.len() < 2 * MIB,
            "{args:?}: {} bytes out",
            stdout.len() + stderr.len()
        );
        let said = format!("{stdout}{stderr}");
        if args == ["sessions"] {
            // One line a session: `01-ok` counts as ok only by the exit journaled after the
            // damage (the fixture's other three are before it).
            assert!(said.contains(" 4 ok,"), "{said}");
            assert!(said.contains("cut short"), "{said}");
            continue;
        }
        if args[0] == "sessions" {
            assert_eq!(said.matches("longer than any event").count(), 1, "{said}");
            let document: SessionsDocument = serde_json::from_slice(&output.stdout).unwrap();
            let ok = &document.sessions[0].commands[0];
            assert_eq!((ok.state.as_str(), ok.exit_code), ("exited", Some(0)));
        } else {
            // Said once on stderr, beside the export that holds what the journal has.
            assert_eq!(
                stderr.matches("longer than any event").count(),
                1,
                "{stderr}"
            );
            assert!(
                stderr.contains("every-kind/01-ok: journal cut short"),
                "{stderr}"
            );
            // The `close` journaled after the damage is exported.
            let close = match args[3] {
                "jsonl" => r#""command":"01-ok","kind":"close""#,
                _ => "stdout 39 B, stderr 44 B",
            };
            assert!(stdout.contains(close), "{args:?}");
        }
    }
    env.finish();
}

/// A command can reach its own journal's metadata: `truncate -s 3G command.json` (or
/// `session.json`, `result.json`) made every reader allocate 3 GiB. Each is skipped by its
/// size, said once as damage, and the rest is still read.
#[test]
fn oversized_metadata_files_are_skipped_by_their_size() {
    let env = TestEnv::new("journal-memory-metadata");
    let state = env.state_dir();
    let huge = state.join("sessions/huge");
    let fine = state.join("sessions/fine");
    copy_dir(&common::every_kind_fixture(), &huge);
    copy_dir(&common::every_kind_fixture(), &fine);
    for dir in [&state, &state.join("sessions"), &huge, &fine] {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700)).unwrap();
    }
    // Sparse: 3 GiB each that take no disk.
    let oversized = [
        "session.json",
        "01-ok/command.json",
        "02-fail/result.json",
        // No result.json: the live listing (ps, stop) reads its command.json.
        "10-crashed/command.json",
    ];
    for file in oversized {
        File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(huge.join(file))
            .unwrap()
            .set_len(3 << 30)
            .unwrap();
    }

    let runs: [&[&str]; 6] = [
        &["ps"],
        &["stop", "huge/nothing-of-that-name"],
        &["sessions"],
        &["sessions", "--json"],
        &["export", "huge", "--format", "jsonl"],
        &["grep", "never-printed-by-the-fixture"],
    ];
    for args in runs {
        let (output, peak) = run_measured(&env, env.tether(args), &format!("tether {args:?}"));
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        eprintln!("tether {args:?}: peak {} MiB", peak >> 20);
        assert!(
            peak <= PEAK_LIMIT,
            "tether {args:?} peaked at {} MiB",
            peak >> 20
        );
        if matches!(args[0], "ps" | "stop") {
            // The command it hides cannot be listed, but it is said.
            assert!(
                said.contains(
                    "tether: huge/10-crashed: command.json is 3.0 GiB, over the 16.0 MiB"
                ),
                "{said}"
            );
        }
        if args == ["sessions", "--json"] {
            let document: SessionsDocument = serde_json::from_slice(&output.stdout).unwrap();
            // Both sessions, the damaged one whole but for what it could not read.
            assert_eq!(document.sessions.len(), 2, "{said}");
            let commands: usize = document.sessions.iter().map(|s| s.commands.len()).sum();
            assert_eq!(commands, 22, "{said}");
        }
        if args[0] == "export" {
            assert!(output.status.success(), "{said}");
            assert!(
                said.contains(
                    "command.json is 3.0 GiB, over the 16.0 MiB a journal's metadata may be; skipped"
                ),
                "{said}"
            );
            assert!(said.contains("result.json is 3.0 GiB"), "{said}");
            // The commands around the damage are exported.
            assert!(said.contains(r#""command":"03-tree""#), "{said}");
        }
    }
    env.finish();
}
