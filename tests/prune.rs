//! `tether prune` and `[retention]` over sessions made by real `tether exec` runs: each rule,
//! a live session kept whatever the rules, links never followed out of the state directory,
//! a mount point inside a session never emptied, and retention applied when an exec ends.

use crate::common;

use std::fs::{self, File};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, SystemTime};

use common::mounts::Mounted;
use common::{BIN, RunningExec, TestEnv, run_to_end, wait_until};

const DAY: Duration = Duration::from_secs(86_400);

fn config_home(env: &TestEnv) -> PathBuf {
    env.path("config")
}

fn run(env: &TestEnv, args: &[&str]) -> Output {
    run_to_end(env, env.tether(args), &format!("tether {args:?}"))
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Runs `sh -c script` through `tether exec` to its end; returns the new session's id.
fn exec_session(env: &TestEnv, script: &str) -> String {
    let before = session_ids(env);
    let out = run(env, &["exec", "--no-pty", "--", "sh", "-c", script]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    let after = session_ids(env);
    let new: Vec<&String> = after.iter().filter(|s| !before.contains(s)).collect();
    assert_eq!(new.len(), 1, "one new session: {after:?}");
    new[0].clone()
}

fn session_ids(env: &TestEnv) -> Vec<String> {
    let mut ids: Vec<String> = fs::read_dir(env.state_dir().join("sessions"))
        .map(|entries| {
            entries
                .flatten()
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    ids.sort();
    ids
}

fn session_path(env: &TestEnv, id: &str) -> PathBuf {
    env.state_dir().join("sessions").join(id)
}

/// Sets the modification time of everything in the session (links aside) to `age` ago: as
/// if it had ended then.
fn age_session(env: &TestEnv, id: &str, age: Duration) {
    let when = SystemTime::now() - age;
    fn walk(path: &Path, when: SystemTime) {
        let meta = fs::symlink_metadata(path).unwrap();
        if meta.file_type().is_symlink() {
            return;
        }
        if meta.is_dir() {
            for entry in fs::read_dir(path).unwrap().flatten() {
                walk(&entry.path(), when);
            }
        }
        File::open(path).unwrap().set_modified(when).unwrap();
    }
    walk(&session_path(env, id), when);
}

/// Bytes on disk, as prune counts them (allocated blocks).
fn disk_usage(path: &Path) -> u64 {
    let meta = fs::symlink_metadata(path).unwrap();
    let mut total = meta.blocks() * 512;
    if meta.is_dir() {
        for entry in fs::read_dir(path).unwrap().flatten() {
            total += disk_usage(&entry.path());
        }
    }
    total
}

/// Starts a `tether exec` of a long sleep and waits until its broker is recorded.
fn start_live(env: &TestEnv) -> (RunningExec, String) {
    let mut command = env.tether(&["exec", "--no-pty", "--", "sleep", "120"]);
    command
        .env(common::TAG_VAR, &env.tag)
        .stdin(std::process::Stdio::null());
    let live = env.spawn_captured(command);
    wait_until(env, "the live command's broker recorded", || {
        common::journal::command_dirs(&env.state_dir())
            .iter()
            .any(|d| fs::read_to_string(d.join("command.json")).is_ok_and(|t| t.contains("broker")))
    });
    let id = session_ids(env).pop().expect("the live session");
    (live, id)
}

/// Stops the live exec (SIGTERM: its stop sequence) and waits for it.
fn stop_live(env: &TestEnv, live: RunningExec) {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(live.pid()),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    live.wait(env);
}

#[test]
fn each_rule_removes_the_oldest_and_a_live_session_stays_whatever_the_rules() {
    let env = TestEnv::new("prune_rules");
    // The live session is the oldest: first in line for every rule.
    let (live, live_id) = start_live(&env);
    let ids: Vec<String> = (0..4)
        .map(|i| exec_session(&env, &format!("echo session {i}")))
        .collect();
    age_session(&env, &live_id, 40 * DAY);
    for (id, days) in ids.iter().zip([10, 5, 1, 0]) {
        age_session(&env, id, days * DAY);
    }

    // With no rule and no [retention]: the flags are named, nothing is removed.
    let out = run(&env, &["prune"]);
    assert_eq!(out.status.code(), Some(2));
    let said = text(&out.stderr);
    for flag in [
        "--older-than",
        "--keep",
        "--max-size",
        "--dry-run",
        "[retention]",
    ] {
        assert!(said.contains(flag), "{said}");
    }

    // A dry run says everything it would do and does none of it.
    let out = run(&env, &["prune", "--keep", "0", "--dry-run"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let said = text(&out.stdout);
    for id in &ids {
        assert!(
            said.contains(&format!("would remove  {id}  ended ")),
            "{said}"
        );
    }
    assert!(said.contains(&format!("kept  {live_id}  live: ")), "{said}");
    assert!(said.contains("would free "), "{said}");
    assert_eq!(session_ids(&env).len(), 5, "a dry run removes nothing");

    // --older-than: the two that ended 10 and 5 days ago; the live one (40 days) stays.
    let out = run(&env, &["prune", "--older-than", "3d"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let said = text(&out.stdout);
    assert!(
        said.contains(&format!("removed  {}  ended 10d00h ago", ids[0])),
        "{said}"
    );
    assert!(
        said.contains(&format!("removed  {}  ended 5d00h ago", ids[1])),
        "{said}"
    );
    assert!(said.contains("freed "), "{said}");
    let mut expected = vec![live_id.clone(), ids[2].clone(), ids[3].clone()];
    expected.sort();
    assert_eq!(session_ids(&env), expected);

    // --keep 2: the live one counts and stays, so the oldest finished one goes.
    let out = run(&env, &["prune", "--keep", "2"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let mut expected = vec![live_id.clone(), ids[3].clone()];
    expected.sort();
    assert_eq!(session_ids(&env), expected);

    // Every rule at its harshest: only the live session is left, and prune says why.
    let out = run(
        &env,
        &[
            "prune",
            "--keep",
            "0",
            "--older-than",
            "0",
            "--max-size",
            "0",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(session_ids(&env), std::slice::from_ref(&live_id));
    assert!(text(&out.stdout).contains(&format!("kept  {live_id}  live: ")));
    assert!(
        text(&out.stderr).contains("not met: keep 0"),
        "{}",
        text(&out.stderr)
    );

    stop_live(&env, live);
    // Ended now: it goes like any other.
    let out = run(&env, &["prune", "--keep", "0"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(session_ids(&env).is_empty());
    env.finish();
}

#[test]
fn max_size_removes_the_oldest_until_the_rest_fits() {
    let env = TestEnv::new("prune_size");
    let big = "head -c 1048576 /dev/zero | tr '\\0' x";
    let ids: Vec<String> = vec![
        exec_session(&env, big),
        exec_session(&env, big),
        exec_session(&env, "echo small"),
    ];
    let sizes: Vec<u64> = ids
        .iter()
        .map(|id| disk_usage(&session_path(&env, id)))
        .collect();
    assert!(sizes[0] > 1 << 20, "{sizes:?}");
    // Room for everything but the oldest.
    let max = (sizes[1] + sizes[2]).to_string();
    let out = run(&env, &["prune", "--max-size", &max]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(session_ids(&env), ids[1..].to_vec());
    let said = text(&out.stdout);
    assert!(said.contains(&format!("removed  {}", ids[0])), "{said}");
    assert!(
        said.contains("freed 1.0 MiB in 1 session; 2 sessions left"),
        "{said}"
    );
    // Already within: nothing more goes.
    let out = run(&env, &["prune", "--max-size", "2M"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(session_ids(&env).len(), 2);
    env.finish();
}

#[test]
fn links_inside_a_session_are_removed_as_links_and_their_targets_survive() {
    let env = TestEnv::new("prune_links");
    let id = exec_session(&env, "echo hello");
    let outside = env.path("outside");
    fs::create_dir(&outside).unwrap();
    fs::write(outside.join("precious"), "keep me").unwrap();
    let session = session_path(&env, &id);
    let command = common::journal::command_dirs(&env.state_dir())[0].clone();
    std::os::unix::fs::symlink(&outside, command.join("escape")).unwrap();
    std::os::unix::fs::symlink(outside.join("precious"), session.join("precious.log")).unwrap();
    std::os::unix::fs::symlink(&outside, session.join("99-dir-link")).unwrap();
    // A link in sessions/ itself is not a session: never followed, never removed.
    let planted = env.state_dir().join("sessions/planted");
    std::os::unix::fs::symlink(&outside, &planted).unwrap();

    let out = run(&env, &["prune", "--keep", "0"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(!session.exists(), "the session is gone");
    assert_eq!(
        fs::read_to_string(outside.join("precious")).unwrap(),
        "keep me"
    );
    assert_eq!(
        fs::read_dir(&outside).unwrap().count(),
        1,
        "nothing removed outside"
    );
    assert!(planted.is_symlink(), "the planted link is left as it was");
    env.finish();
}

#[test]
fn retention_runs_when_an_exec_ends_and_never_removes_that_session() {
    let env = TestEnv::new("prune_retention");
    let config = config_home(&env).join("tether");
    fs::create_dir_all(&config).unwrap();
    fs::write(config.join("config.toml"), "[retention]\nkeep = 2\n").unwrap();
    let ids: Vec<String> = (0..4)
        .map(|i| {
            let before = session_ids(&env);
            let out = run(&env, &["exec", "--no-pty", "--", "echo", &i.to_string()]);
            assert_eq!(out.status.code(), Some(0));
            assert_eq!(
                text(&out.stderr),
                "",
                "retention says nothing when it works"
            );
            let after = session_ids(&env);
            assert!(after.len() <= 2, "{after:?}");
            after
                .into_iter()
                .find(|s| !before.contains(s))
                .expect("a new session")
        })
        .collect();
    assert_eq!(session_ids(&env), ids[2..].to_vec());

    // keep = 0: everything goes but the session that just ended.
    fs::write(config.join("config.toml"), "[retention]\nkeep = 0\n").unwrap();
    let last = exec_session(&env, "echo last");
    assert_eq!(session_ids(&env), std::slice::from_ref(&last));

    // `tether prune` without flags applies the same section.
    let out = run(&env, &["prune", "--dry-run"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("applying [retention] from "));
    assert!(text(&out.stdout).contains(&format!("would remove  {last}")));

    // A malformed config: the exec works all the same, and one line says what is wrong.
    fs::write(config.join("config.toml"), "[retention]\nkeep = \"many\"\n").unwrap();
    let out = run(&env, &["exec", "--no-pty", "--", "echo", "fine"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(text(&out.stdout), "fine\n");
    let said = text(&out.stderr);
    assert_eq!(said.lines().count(), 1, "{said}");
    assert!(said.contains("config.toml:2:8: retention.keep"), "{said}");
    assert_eq!(session_ids(&env).len(), 2, "nothing removed");
    let out = run(&env, &["prune"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("retention.keep"),
        "{}",
        text(&out.stderr)
    );
    env.finish();
}

#[test]
fn retention_runs_when_the_tui_quits() {
    let env = TestEnv::new("prune_tui");
    let old: Vec<String> = (0..2)
        .map(|i| exec_session(&env, &format!("echo {i}")))
        .collect();
    let config = config_home(&env).join("tether");
    fs::create_dir_all(&config).unwrap();
    fs::write(config.join("config.toml"), "[retention]\nkeep = 1\n").unwrap();

    let tmux = common::tmux::Tmux::start(&env, 160, 40);
    tmux.type_line(
        &env,
        &format!(
            "XDG_CONFIG_HOME={} exec {BIN} --state-dir {} run -n hello -- echo hello-from-tui",
            config_home(&env).display(),
            env.state_dir().display()
        ),
    );
    tmux.wait_screen(&env, "the command's end", |s| {
        s.contains("hello-from-tui") && s.contains("exit 0")
    });
    // While the TUI runs, its session is live: the old ones go, never it.
    assert_eq!(session_ids(&env).len(), 3);
    let tui = tmux.pane_pid(&env);
    tmux.keys(&env, &["q"]);
    assert!(
        common::procs::wait_gone(&[tui], Duration::from_secs(10)).is_empty(),
        "the TUI did not quit"
    );
    let left = session_ids(&env);
    assert_eq!(left.len(), 1, "{left:?}");
    assert!(
        !old.contains(&left[0]),
        "the TUI's own session is the one kept: {left:?}"
    );
    drop(tmux);
    env.finish();
}

/// Runs `tether prune --keep 0` over the one session `id`, which holds a mount point, and
/// checks that the prune says so, fails, and leaves the session whole under its name.
fn prune_refuses_the_mount(env: &TestEnv, id: &str, kept: &[&Path]) {
    let out = run(env, &["prune", "--keep", "0"]);
    let said = text(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(1),
        "stdout: {}\nstderr: {said}",
        text(&out.stdout)
    );
    assert!(
        said.contains(&format!("cannot remove session {id}")),
        "{said}"
    );
    assert!(said.contains("is a mount point"), "{said}");
    assert_eq!(
        session_ids(env),
        [id],
        "left under its name, no tomb beside it"
    );
    for path in kept {
        assert!(path.exists(), "{} was removed: {said}", path.display());
    }
}

#[test]
fn a_bind_mount_inside_a_session_is_never_emptied_and_the_session_is_left_whole() {
    let env = TestEnv::new("prune_bind");
    let id = exec_session(&env, "echo hello");
    let command = common::journal::command_dirs(&env.state_dir())[0].clone();
    let journal = command.join("command.json");
    // On the state directory's own file system: the same device, seen at a second place.
    let outside = env.path("outside");
    fs::create_dir(&outside).unwrap();
    let precious = outside.join("precious");
    fs::write(&precious, "keep me").unwrap();

    let mount_point = command.join("sub");
    fs::create_dir(&mount_point).unwrap();
    {
        let Some(_mounted) = Mounted::bind(&outside, &mount_point) else {
            env.finish();
            return;
        };
        prune_refuses_the_mount(&env, &id, &[&precious, &journal]);
        assert_eq!(fs::read_to_string(&precious).unwrap(), "keep me");
    }

    // A file bind-mounted onto a file of the session: neither it nor the session goes.
    let file_point = command.join("extra.log");
    fs::write(&file_point, "").unwrap();
    {
        let Some(_mounted) = Mounted::bind(&precious, &file_point) else {
            env.finish();
            return;
        };
        prune_refuses_the_mount(&env, &id, &[&precious, &journal]);
        assert_eq!(fs::read_to_string(&file_point).unwrap(), "keep me");
    }
    assert_eq!(fs::read_to_string(&precious).unwrap(), "keep me");

    // Unmounted: an ordinary session again, and it goes.
    let out = run(&env, &["prune", "--keep", "0"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(session_ids(&env).is_empty());
    assert_eq!(fs::read_to_string(&precious).unwrap(), "keep me");
    env.finish();
}

#[test]
fn a_session_left_aside_by_an_interrupted_prune_is_put_back_listed_and_counted() {
    let env = TestEnv::new("prune_tomb");
    let id = exec_session(&env, "echo hello");
    // The pid of a prune killed half-way: a process that has ended (reaped).
    let mut gone = std::process::Command::new("true").spawn().unwrap();
    let pid = gone.id();
    gone.wait().unwrap();
    let sessions = env.state_dir().join("sessions");
    let set_aside = || {
        fs::rename(
            session_path(&env, &id),
            sessions.join(format!(".pruning-{id}-{pid}")),
        )
        .unwrap()
    };

    set_aside();
    let out = run(&env, &["sessions"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).starts_with(&format!("{id}  ")),
        "{}",
        text(&out.stdout)
    );
    assert_eq!(session_ids(&env), [id.as_str()], "put back under its name");

    set_aside();
    let out = run(&env, &["prune", "--max-size", "0"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let said = text(&out.stdout);
    assert!(said.contains(&format!("removed  {id}  ")), "{said}");
    assert!(said.contains("in 1 session; 0 sessions left"), "{said}");
    assert!(session_ids(&env).is_empty(), "{:?}", session_ids(&env));
    env.finish();
}
