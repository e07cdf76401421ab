//! What `tether exec` prints never depends on the journal, and a copy it could not make is
//! never reported as success (issue: hardening, item 6).

mod common;

use std::fs::{self, File};
use std::process::{Command, Stdio};

use common::disk::SmallDisk;
use common::{BIN, TAG_VAR, TestEnv};

fn expected_seq(n: u32) -> Vec<u8> {
    (1..=n)
        .flat_map(|i| format!("{i}\n").into_bytes())
        .collect()
}

#[test]
fn a_failed_write_to_our_stdout_is_an_error_not_success() {
    let env = TestEnv::new("dev_full");
    let full = File::options()
        .write(true)
        .open("/dev/full")
        .expect("open /dev/full");
    let run = env
        .exec_command(&[], &["seq", "1", "100000"])
        .stdout(full)
        .stderr(Stdio::piped())
        .output()
        .expect("run tether exec");
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(125), "{stderr}");
    assert!(
        stderr.contains("writing the command's stdout failed"),
        "{stderr}"
    );
    assert!(stderr.contains("not copied"), "{stderr}");
    // The journal has it all.
    let dir = env.command_dir();
    assert_eq!(
        fs::read(dir.join("stdout.log")).unwrap(),
        expected_seq(100000)
    );
    env.finish();
}

#[test]
fn a_full_journal_disk_caps_the_journal_not_the_copy() {
    let env = TestEnv::new("full_disk");
    let Some(disk) = SmallDisk::mount(&env, "128k") else {
        return;
    };
    let run = Command::new(BIN)
        .args(["exec", "--state-dir"])
        .arg(disk.path().join("state"))
        .args(["--", "sh", "-c", "seq 1 200000; echo last-words >&2"])
        .env(TAG_VAR, &env.tag)
        .stdin(Stdio::null())
        .output()
        .expect("run tether exec");
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(0), "{stderr}");
    assert_eq!(run.stdout.len(), expected_seq(200000).len(), "{stderr}");
    assert!(
        run.stdout == expected_seq(200000),
        "the copy is byte for byte"
    );
    assert!(stderr.contains("last-words\n"), "{stderr}");
    assert!(stderr.contains("the disk is full"), "says so: {stderr}");
    drop(disk);
    env.finish();
}

#[test]
fn stdin_is_passed_on_unless_no_stdin() {
    let env = TestEnv::new("no_stdin");
    for (options, expected) in [(&[][..], &b"piped\n"[..]), (&["--no-stdin"][..], &b""[..])] {
        let mut child = env
            .exec_command(options, &["cat"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start tether exec");
        use std::io::Write;
        let mut stdin = child.stdin.take().expect("piped stdin");
        // With --no-stdin the command never reads it: a closed pipe is fine either way.
        let _ = stdin.write_all(b"piped\n");
        drop(stdin);
        let out = child.wait_with_output().expect("wait for tether exec");
        assert!(out.status.success(), "{out:?}");
        assert_eq!(out.stdout, expected, "{options:?}");
    }
    env.finish();
}
