//! `tether exec` end to end: output is kept raw, per stream, byte for byte, in the journal
//! and in what tether prints.

use crate::common;

use std::fs::File;
use std::io::Read;
use std::path::Path;

use sha2::{Digest, Sha256};

use common::TestEnv;
use common::journal::{exit_status, kinds, load_complete, read};
use tether::protocol::{CapReason, Event, EventKind, Stream};

/// The bytes each stream received according to the `output` events, checking that every
/// stream's events are contiguous from offset 0.
fn output_totals(events: &[Event]) -> [u64; 2] {
    let mut totals = [0u64; 2];
    for event in events {
        if let EventKind::Output {
            stream,
            offset,
            len,
        } = event.kind
        {
            let total = &mut totals[stream as usize];
            assert_eq!(
                offset, *total,
                "{stream:?} output events are not contiguous"
            );
            *total += len;
        }
    }
    totals
}

#[test]
fn stdout_and_stderr_stay_apart_byte_for_byte() {
    let env = TestEnv::new("streams_apart");
    let script = r#"
import os
for i in range(200):
    os.write(1, b"out %d\n" % i)
    os.write(2, b"err %d\x00\xff\r\n" % i)
os.write(1, b"no newline at the end")
"#;
    let run = env.exec(&[], &["python3", "-c", script]);
    assert_eq!(run.code(), 0, "stderr: {}", run.stderr_text());
    let mut out = Vec::new();
    let mut err = Vec::new();
    for i in 0..200 {
        out.extend_from_slice(format!("out {i}\n").as_bytes());
        err.extend_from_slice(format!("err {i}").as_bytes());
        err.extend_from_slice(b"\x00\xff\r\n");
    }
    out.extend_from_slice(b"no newline at the end");
    let dir = env.command_dir();
    assert!(read(&dir, "stdout.log") == out, "stdout.log differs");
    assert!(read(&dir, "stderr.log") == err, "stderr.log differs");
    assert!(run.stdout() == out, "tether exec's stdout differs");
    assert!(
        run.stderr() == err,
        "tether exec's stderr differs: {:?}",
        run.stderr_text()
    );
    let record = load_complete(&dir);
    assert_eq!(
        output_totals(&record.events),
        [out.len() as u64, err.len() as u64]
    );
    let result = record.result.expect("result.json");
    assert_eq!(
        (result.stdout.bytes, result.stdout.stored),
        (out.len() as u64, out.len() as u64)
    );
    assert_eq!(
        (result.stderr.bytes, result.stderr.stored),
        (err.len() as u64, err.len() as u64)
    );
    env.finish();
}

/// Writes `argv[2]` bytes of deterministic, varied data, in chunks of 1 B to 128 KiB that
/// land on stdout or stderr in an irregular order, and records in `argv[1]` the SHA-256 and
/// length of what went to each stream.
const FLOOD: &str = r#"
import hashlib, os, sys
pattern = b"".join(hashlib.sha256(i.to_bytes(4, "little")).digest() for i in range(32768))
view = memoryview(pattern)
total = int(sys.argv[2])
digests = {1: hashlib.sha256(), 2: hashlib.sha256()}
counts = {1: 0, 2: 0}
written = i = 0
while written < total:
    n = min(1 + (i * 7919) % 131072, total - written)
    off = (i * 104729) % (len(pattern) - n + 1)
    fd = 2 if ((i * 2654435761) >> 7) % 5 < 2 else 1
    chunk = view[off:off + n]
    digests[fd].update(chunk)
    counts[fd] += n
    while chunk:
        chunk = chunk[os.write(fd, chunk):]
    written += n
    i += 1
with open(sys.argv[1], "w") as f:
    for fd in (1, 2):
        f.write("%s %d\n" % (digests[fd].hexdigest(), counts[fd]))
"#;

fn sha256_file(path: &Path) -> String {
    let mut file = File::open(path).unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf).expect("read a file to hash");
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Fails unless the two files hold the same bytes (compared a megabyte at a time).
fn assert_same_bytes(a: &Path, b: &Path) {
    let open = |p: &Path| File::open(p).unwrap_or_else(|e| panic!("open {}: {e}", p.display()));
    let (mut fa, mut fb) = (open(a), open(b));
    let (la, lb) = (fa.metadata().unwrap().len(), fb.metadata().unwrap().len());
    assert_eq!(
        la,
        lb,
        "{} and {} differ in length",
        a.display(),
        b.display()
    );
    let (mut ba, mut bb) = (vec![0u8; 1 << 20], vec![0u8; 1 << 20]);
    let mut offset = 0u64;
    while offset < la {
        let n = (la - offset).min(1 << 20) as usize;
        fa.read_exact(&mut ba[..n]).expect("read");
        fb.read_exact(&mut bb[..n]).expect("read");
        if ba[..n] != bb[..n] {
            let at = offset
                + ba[..n]
                    .iter()
                    .zip(&bb[..n])
                    .position(|(x, y)| x != y)
                    .unwrap() as u64;
            panic!("{} and {} differ at byte {at}", a.display(), b.display());
        }
        offset += n as u64;
    }
}

#[test]
fn two_hundred_megabyte_flood_is_kept_exactly() {
    const TOTAL: u64 = 200 << 20;
    let env = TestEnv::new("flood");
    let generator = env.path("flood.py");
    std::fs::write(&generator, FLOOD).unwrap();
    let produced = env.path("produced.txt");
    let run = env.exec(
        &[],
        &[
            "python3",
            generator.to_str().unwrap(),
            produced.to_str().unwrap(),
            &TOTAL.to_string(),
        ],
    );
    assert_eq!(
        run.code(),
        0,
        "stderr (first 2 KiB): {:.2048}",
        run.stderr_text()
    );

    let produced = std::fs::read_to_string(&produced).expect("the generator's digests");
    let expected: Vec<(String, u64)> = produced
        .lines()
        .map(|line| {
            let (hash, len) = line.split_once(' ').expect("`HASH LEN`");
            (hash.to_string(), len.parse().expect("a length"))
        })
        .collect();
    assert_eq!(expected.len(), 2);
    assert_eq!(expected[0].1 + expected[1].1, TOTAL);
    assert!(
        expected[0].1 > TOTAL / 4 && expected[1].1 > TOTAL / 4,
        "both streams flooded"
    );

    let dir = env.command_dir();
    let record = load_complete(&dir);
    let result = record.result.as_ref().expect("result.json");
    assert_eq!(exit_status(&record.events).code, Some(0));
    for (totals, (_, len)) in [result.stdout, result.stderr].iter().zip(&expected) {
        assert_eq!((totals.bytes, totals.stored), (*len, *len));
    }
    assert_eq!(
        output_totals(&record.events),
        [expected[0].1, expected[1].1]
    );

    // The journal's logs hash to what the generator wrote (one thread per log)...
    let logs = [Stream::Stdout, Stream::Stderr].map(|s| dir.join(s.file_name()));
    let hashes: Vec<String> = std::thread::scope(|scope| {
        let handles: Vec<_> = logs
            .iter()
            .map(|path| scope.spawn(move || sha256_file(path)))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for ((path, hash), (produced, _)) in logs.iter().zip(&hashes).zip(&expected) {
        assert_eq!(
            hash,
            produced,
            "{} does not hash to what the generator wrote",
            path.display()
        );
    }
    // ...and what tether exec printed is those logs, byte for byte, so it hashes equal too.
    assert_same_bytes(&run.stdout_path, &logs[0]);
    assert_same_bytes(&run.stderr_path, &logs[1]);
    env.finish();
}

#[test]
fn raw_bytes_are_stored_untouched() {
    let env = TestEnv::new("raw_bytes");
    // Invalid UTF-8, a euro sign split across two writes 300 ms apart, and escape sequences
    // (clear screen, OSC 52 clipboard write, colours).
    let script = r#"
import os, time
os.write(1, b"bad:\xff\xfe\xc3(\xed\xa0\x80\n")
os.write(1, b"euro:\xe2\x82")
time.sleep(0.3)
os.write(1, b"\xac\n")
os.write(1, b"\x1b[2J\x1b]52;c;aGk=\x07\x1b[31mred\x1b[0m\r\n\x00end")
"#;
    let run = env.exec(&[], &["python3", "-c", script]);
    assert_eq!(run.code(), 0, "stderr: {}", run.stderr_text());
    let before_split: &[u8] = b"bad:\xff\xfe\xc3(\xed\xa0\x80\neuro:\xe2\x82";
    let mut expected = before_split.to_vec();
    expected.extend_from_slice(b"\xac\n\x1b[2J\x1b]52;c;aGk=\x07\x1b[31mred\x1b[0m\r\n\x00end");

    let dir = env.command_dir();
    assert_eq!(read(&dir, "stdout.log"), expected);
    assert_eq!(run.stdout(), expected, "tether exec's stdout");
    let record = load_complete(&dir);
    // The split write is journaled as two chunks, the first ending mid-character.
    let ends: Vec<u64> = record
        .events
        .iter()
        .filter_map(|e| match e.kind {
            EventKind::Output {
                stream: Stream::Stdout,
                offset,
                len,
            } => Some(offset + len),
            _ => None,
        })
        .collect();
    assert!(
        ends.contains(&(before_split.len() as u64)),
        "no output event ends inside the split character: {ends:?}"
    );
    assert_eq!(output_totals(&record.events), [expected.len() as u64, 0]);
    env.finish();
}

#[test]
fn closed_stdout_does_not_stop_stderr() {
    let env = TestEnv::new("closed_stdout");
    let run = env.exec(&[], &["sh", "-c", "exec 1>&-; sleep 0.5; echo late >&2"]);
    assert_eq!(run.code(), 0, "stderr: {}", run.stderr_text());
    assert_eq!(run.stderr(), b"late\n");
    assert!(run.stdout().is_empty());
    let dir = env.command_dir();
    assert_eq!(read(&dir, "stderr.log"), b"late\n");
    assert!(read(&dir, "stdout.log").is_empty());
    let record = load_complete(&dir);
    assert_eq!(exit_status(&record.events).code, Some(0));
    let result = record.result.expect("result.json");
    assert_eq!((result.stdout.bytes, result.stderr.bytes), (0, 5));
    env.finish();
}

#[test]
fn max_output_caps_storage_but_counts_everything() {
    let env = TestEnv::new("max_output");
    let script = "import os\ndata = bytes(range(256)) * 40\nwhile data:\n    data = data[os.write(1, data):]\n";
    let run = env.exec(&["--max-output", "1K"], &["python3", "-c", script]);
    assert_eq!(run.code(), 0, "stderr: {}", run.stderr_text());
    let all: Vec<u8> = (0..40).flat_map(|_| 0..=255u8).collect();
    assert_eq!(all.len(), 10240);

    let dir = env.command_dir();
    assert_eq!(read(&dir, "stdout.log"), &all[..1024]);
    assert_eq!(
        run.stdout(),
        all,
        "the cap limits what is stored, never what tether exec prints"
    );
    let stderr = run.stderr_text();
    assert!(
        stderr.contains("cap") && stderr.contains("1024"),
        "tether exec should warn about the cap: {stderr:?}"
    );
    let record = load_complete(&dir);
    let capped: Vec<(Stream, CapReason, u64)> = record
        .events
        .iter()
        .filter_map(|e| match e.kind {
            EventKind::OutputCapped {
                stream,
                reason,
                stored,
                ..
            } => Some((stream, reason, stored)),
            _ => None,
        })
        .collect();
    assert_eq!(
        capped,
        [(Stream::Stdout, CapReason::Limit, 1024)],
        "events: {:?}",
        kinds(&record.events)
    );
    assert_eq!(output_totals(&record.events), [10240, 0]);
    let result = record.result.expect("result.json");
    assert_eq!((result.stdout.bytes, result.stdout.stored), (10240, 1024));
    env.finish();
}

/// The caller gives one file for both streams (as Claude Code does, `2>&1`): the command
/// gets one pipe for both, so the file holds what it wrote in the order it wrote it, as
/// bash would have left it; the journal keeps it in stdout's log and says so.
#[test]
fn one_file_for_both_streams_keeps_the_order_written() {
    let env = TestEnv::new("streams_merged");
    let both = env.path("both.txt");
    let file = File::create(&both).unwrap();
    let mut command = env.exec_command(
        &[],
        &[
            "sh",
            "-c",
            "for i in $(seq 1 20); do echo out$i; echo err$i >&2; done",
        ],
    );
    command.stdout(file.try_clone().unwrap()).stderr(file);
    let mut child = command.spawn().unwrap();
    let mut status = None;
    common::wait_until(&env, "tether exec to end", || {
        status = child.try_wait().unwrap();
        status.is_some()
    });
    assert_eq!(status.unwrap().code(), Some(0));
    let expected: String = (1..=20).map(|i| format!("out{i}\nerr{i}\n")).collect();
    assert_eq!(std::fs::read_to_string(&both).unwrap(), expected);
    let dir = env.command_dir();
    let record = load_complete(&dir);
    assert!(
        kinds(&record.events).contains(&"streams_merged"),
        "{:?}",
        kinds(&record.events)
    );
    assert_eq!(
        String::from_utf8(read(&dir, "stdout.log")).unwrap(),
        expected
    );
    assert!(read(&dir, "stderr.log").is_empty());
    env.finish();
}

/// A command that writes stderr and then stdout within a fraction of a millisecond (curl's
/// error line, a byte a write, then its `-w` output) is journaled in that order, every
/// time: the broker reads its two pipes in the order they became readable, where it once
/// took either first when both waited at one wake-up.
#[test]
fn stderr_written_just_before_stdout_is_journaled_first() {
    let env = TestEnv::new("streams_order");
    let script = "for c in c u r l : ' ' e r r o r; do printf %s \"$c\" >&2; done; echo; echo 000";
    let mut seen: Vec<std::path::PathBuf> = Vec::new();
    for run in 1..=20 {
        let exec = env.exec(&[], &["sh", "-c", script]);
        assert_eq!(exec.code(), 0, "stderr: {}", exec.stderr_text());
        assert_eq!(exec.stdout(), b"\n000\n");
        assert_eq!(exec.stderr(), b"curl: error");
        let dirs = env.command_dirs();
        let new: Vec<&std::path::PathBuf> = dirs.iter().filter(|d| !seen.contains(*d)).collect();
        assert_eq!(new.len(), 1, "run {run}: {new:?}");
        let streams: Vec<Stream> = (load_complete(new[0]).events.iter())
            .filter_map(|e| match e.kind {
                EventKind::Output { stream, .. } => Some(stream),
                _ => None,
            })
            .collect();
        let first_out = streams.iter().position(|s| *s == Stream::Stdout);
        assert!(
            first_out.is_some_and(|at| streams[at..].iter().all(|s| *s == Stream::Stdout)),
            "run {run}: stderr journaled after stdout: {streams:?}"
        );
        seen = dirs;
    }
    env.finish();
}
