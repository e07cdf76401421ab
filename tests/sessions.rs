//! Named sessions that many processes join (`--session`, `TETHER_SESSION`), what every
//! broker exports to its command, and exec's stdin passed through.

use crate::common;

use std::fs::{self, File};
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use common::journal::{exit_status, load_complete, read};
use common::{BIN, TAG_VAR, TestEnv};
use tether::journal::{CommandId, SessionInfo};

/// `tether exec` as the tests start it, without whatever session the test runner itself
/// may run in.
fn exec_command(env: &TestEnv, options: &[&str], argv: &[&str]) -> Command {
    let mut command = env.exec_command(options, argv);
    command
        .env_remove("TETHER_SESSION")
        .env_remove("TETHER_BROKER_ID");
    command
}

fn session_dirs(env: &TestEnv) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = fs::read_dir(env.state_dir().join("sessions"))
        .map(|entries| entries.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    dirs.sort();
    dirs
}

fn command_dirs_in(session: &std::path::Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = fs::read_dir(session)
        .unwrap()
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .collect();
    dirs.sort();
    dirs
}

fn name_of(path: &std::path::Path) -> String {
    path.file_name().unwrap().to_string_lossy().into_owned()
}

/// What each command prints: the variables its broker gave it, and whether the internal
/// broker marker leaked.
const PRINT_ENV: &str =
    "sleep 0.2; echo \"$TETHER_SESSION|$TETHER_BROKER_ID|${TETHER_BROKER-unset}\"";

#[test]
fn concurrent_execs_join_one_session() {
    const EACH: usize = 3;
    let env = TestEnv::new("join_session");
    let mut runs = Vec::new();
    for _ in 0..EACH {
        // By the flag...
        let command = exec_command(&env, &["--session", "team:a-1"], &["sh", "-c", PRINT_ENV]);
        runs.push(env.spawn_captured(command));
        // ...and by the environment, all at the same time.
        let mut command = exec_command(&env, &[], &["sh", "-c", PRINT_ENV]);
        command.env("TETHER_SESSION", "team:a-1");
        runs.push(env.spawn_captured(command));
    }
    let runs: Vec<_> = runs.into_iter().map(|r| r.wait(&env)).collect();
    for run in &runs {
        assert_eq!(run.code(), 0, "stderr: {}", run.stderr_text());
        assert_eq!(run.stderr_text(), "", "tether says nothing on success");
    }
    let sessions = session_dirs(&env);
    assert_eq!(sessions.len(), 1, "one session directory: {sessions:?}");
    assert_eq!(name_of(&sessions[0]), "team:a-1");
    let info: SessionInfo =
        serde_json::from_slice(&fs::read(sessions[0].join("session.json")).unwrap()).unwrap();
    assert_eq!(info.id, "team:a-1");

    let commands = command_dirs_in(&sessions[0]);
    let mut numbers: Vec<u64> = commands
        .iter()
        .map(|d| CommandId::number_of(&name_of(d)).unwrap())
        .collect();
    numbers.sort();
    assert_eq!(numbers, (1..=2 * EACH as u64).collect::<Vec<_>>());
    // Each command saw its own directory as its broker id, and no broker marker.
    let mut printed: Vec<String> = runs
        .iter()
        .map(|r| String::from_utf8(r.stdout()).unwrap())
        .collect();
    printed.sort();
    let mut expected: Vec<String> = commands
        .iter()
        .map(|d| format!("team:a-1|team:a-1/{}|unset\n", name_of(d)))
        .collect();
    expected.sort();
    assert_eq!(printed, expected);
    for dir in &commands {
        let record = load_complete(dir);
        assert_eq!(exit_status(&record.events).code, Some(0));
        let request = record.request.unwrap();
        let session = request.session.expect("the request names the session");
        assert_eq!(
            (session.command.session.as_str(), session.command.dir_name()),
            ("team:a-1", name_of(dir))
        );
        assert!(String::from_utf8_lossy(&read(dir, "stdout.log")).starts_with("team:a-1|"));
    }
    env.finish();
}

#[test]
fn a_nested_exec_joins_its_parents_session() {
    let env = TestEnv::new("nested_exec");
    // The inner tether is given no state dir and no session: it learns both from its broker.
    let inner = format!("{BIN} exec -- sh -c '{PRINT_ENV}'");
    let command = exec_command(&env, &[], &["sh", "-c", &inner]);
    let run = env.spawn_captured(command).wait(&env);
    assert_eq!(run.code(), 0, "stderr: {}", run.stderr_text());
    let sessions = session_dirs(&env);
    assert_eq!(sessions.len(), 1, "one session: {sessions:?}");
    let id = name_of(&sessions[0]);
    let commands = command_dirs_in(&sessions[0]);
    let names: Vec<String> = commands.iter().map(|d| name_of(d)).collect();
    // Each named by the first program its `sh -c` runs.
    assert_eq!(names, ["01-tether", "02-sleep"]);
    assert_eq!(
        String::from_utf8(run.stdout()).unwrap(),
        format!("{id}|{id}/02-sleep|unset\n")
    );
    for dir in &commands {
        load_complete(dir);
    }
    env.finish();
}

#[test]
fn bad_session_names_are_refused_with_the_rule() {
    let env = TestEnv::new("bad_session");
    let long = "x".repeat(65);
    for (flag, var) in [
        (Some("a/b"), None),
        (Some(".."), None),
        (Some(long.as_str()), None),
        (Some(""), None),
        (None, Some("bad name")),
        (None, Some(".")),
        (Some(".hidden"), None),
        (None, Some(".pruning-x-1")),
    ] {
        let options: Vec<&str> = flag.map_or(vec![], |f| vec!["--session", f]);
        let mut command = exec_command(&env, &options, &["true"]);
        if let Some(var) = var {
            command.env("TETHER_SESSION", var);
        }
        let run = env.spawn_captured(command).wait(&env);
        let stderr = run.stderr_text();
        assert_eq!(run.code(), 2, "{flag:?} {var:?}: {stderr}");
        assert!(
            stderr.contains("1 to 64 characters of A-Z a-z 0-9 . _ : -, not starting with `.`"),
            "{stderr}"
        );
        let source = if flag.is_some() {
            "--session"
        } else {
            "TETHER_SESSION"
        };
        assert!(
            stderr.starts_with(&format!("tether: {source}: ")),
            "{stderr}"
        );
    }
    assert!(session_dirs(&env).is_empty(), "nothing was created");
    env.finish();
}

#[test]
fn named_sessions_list_by_start_time_and_open_by_name() {
    let env = TestEnv::new("list_named");
    for options in [
        &["--session", "0-late"][..],
        &[],
        &["--session", "0-late-2"],
    ] {
        let run = env
            .spawn_captured(exec_command(&env, options, &["true"]))
            .wait(&env);
        assert_eq!(run.code(), 0, "{}", run.stderr_text());
        // Start times a millisecond apart at least.
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let listed = Command::new(BIN)
        .args(["sessions", "--state-dir"])
        .arg(env.state_dir())
        .env(TAG_VAR, &env.tag)
        .output()
        .unwrap();
    let text = String::from_utf8(listed.stdout).unwrap();
    let ids: Vec<&str> = text
        .lines()
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(ids.len(), 3, "{text}");
    assert_eq!((ids[0], ids[2]), ("0-late", "0-late-2"), "{text}");
    // A whole name picks its session even when it is a prefix of another.
    let state = env.state_dir();
    let open = |id: &str| tether::postmortem::resolve(Some(&state), Some(id));
    assert_eq!(open("0-late").unwrap(), state.join("sessions/0-late"));
    assert_eq!(open("0-late-").unwrap(), state.join("sessions/0-late-2"));
    assert!(open("0-").unwrap_err().contains("names 2 sessions"));
    // The latest is the last started, whatever its name.
    assert_eq!(
        tether::postmortem::resolve(Some(&state), None).unwrap(),
        state.join("sessions/0-late-2")
    );
    env.finish();
}

#[test]
fn piped_stdin_reaches_the_command() {
    let env = TestEnv::new("stdin_piped");
    let mut command = exec_command(&env, &[], &["cat"]);
    command.stdin(Stdio::piped());
    let mut running = env.spawn_captured(command);
    let mut stdin = running.child.stdin.take().unwrap();
    stdin.write_all(b"piped\n").unwrap();
    drop(stdin);
    let run = running.wait(&env);
    assert_eq!(run.code(), 0, "stderr: {}", run.stderr_text());
    assert_eq!(run.stdout(), b"piped\n");
    let record = load_complete(&env.command_dir());
    assert_eq!(
        record.request.unwrap().stdin,
        tether::protocol::StdinSource::Inherit
    );
    env.finish();
}

#[test]
fn a_large_stdin_passes_byte_for_byte() {
    let env = TestEnv::new("stdin_large");
    // 8 MiB of every byte value, far more than any pipe holds.
    let input: Vec<u8> = (0..8u32 << 20)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let mut command = exec_command(&env, &[], &["cat"]);
    command.stdin(Stdio::piped());
    let mut running = env.spawn_captured(command);
    let mut stdin = running.child.stdin.take().unwrap();
    let writer = {
        let input = input.clone();
        std::thread::spawn(move || stdin.write_all(&input))
    };
    let run = running.wait(&env);
    writer.join().unwrap().expect("tether took all of stdin");
    assert_eq!(run.code(), 0, "stderr: {}", run.stderr_text());
    let out = run.stdout();
    assert!(
        out == input,
        "stdout differs: {} of {} bytes",
        out.len(),
        input.len()
    );
    assert!(
        read(&env.command_dir(), "stdout.log") == input,
        "stdout.log differs"
    );
    env.finish();
}

#[test]
fn stdin_from_a_file_and_from_dev_null() {
    let env = TestEnv::new("stdin_file");
    let file = env.path("input");
    fs::write(&file, b"one\ntwo\n").unwrap();
    let mut command = exec_command(&env, &[], &["wc", "-l"]);
    command.stdin(File::open(&file).unwrap());
    let run = env.spawn_captured(command).wait(&env);
    assert_eq!(String::from_utf8(run.stdout()).unwrap().trim(), "2");
    // The common helper gives /dev/null: the command reads end of file at once.
    let command = exec_command(&env, &[], &["cat"]);
    let run = env.spawn_captured(command).wait(&env);
    assert_eq!((run.code(), run.stdout()), (0, Vec::new()));
    env.finish();
}
