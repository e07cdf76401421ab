//! The launcher end to end: a `tether.toml` whose commands wait for each other and restart,
//! run by the real TUI in tmux; the journals' times prove the order (a `ready` before the
//! `spawned` of what waits for it, an `exit` before the `spawned` of what needs it to
//! succeed), and the runs of a restarting command are each a command directory.

use crate::common;

use std::path::{Path, PathBuf};

use common::agents::free_port;
use common::journal::command_dirs;
use common::otlp_receiver::{ReceivedSpan, Receiver, attr_int, attr_text};
use common::tmux::Tmux;
use common::{BIN, TestEnv};
use tether::journal::CommandRecord;
use tether::protocol::{Event, EventKind, Origin};

/// The issue's start-up: a database stand-in that listens after a second, a migration, a
/// web server that needs both, a worker that fails and restarts.
fn stack(port: u16, migrate_exit: u8) -> String {
    format!(
        r#"
[[command]]
name = "db"
shell = '''sleep 1; exec python3 -c 'import socket, time; s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("127.0.0.1", {port})); s.listen(); print("listening on", {port}, flush=True); time.sleep(600)' '''
ready_tcp = {port}

[[command]]
name = "migrate"
shell = "sleep 0.5; echo migrated; exit {migrate_exit}"

[[command]]
name = "web"
shell = "echo serving; exec sleep 600"
depends_on = {{ db = "ready", migrate = "succeeded" }}

[[command]]
name = "worker"
shell = "echo working; exit 1"
restart = "on-failure"
max_restarts = 3
restart_backoff = "100ms"
"#
    )
}

/// The journal directories of `name`'s runs, in order.
fn runs_of(env: &TestEnv, name: &str) -> Vec<PathBuf> {
    let suffix = format!("-{name}");
    command_dirs(&env.state_dir())
        .into_iter()
        .filter(|d| d.to_string_lossy().ends_with(&suffix))
        .collect()
}

fn events(dir: &Path) -> Vec<Event> {
    CommandRecord::load(dir).events
}

/// When the first event of `kind` was journaled.
fn at(dir: &Path, kind: &str) -> u64 {
    let events = events(dir);
    let found = events.iter().find(|e| e.kind.name() == kind);
    found.map(|e| e.ts_ms).unwrap_or_else(|| {
        let kinds: Vec<_> = events.iter().map(|e| e.kind.name()).collect();
        panic!("no `{kind}` in {}: {kinds:?}", dir.display())
    })
}

fn has(dir: &Path, kind: &str) -> bool {
    events(dir).iter().any(|e| e.kind.name() == kind)
}

/// Runs `toml` in the TUI in tmux; the caller waits on it, then [`quit`].
fn start(env: &TestEnv, toml: &str) -> Tmux {
    let file = env.path("tether.toml");
    std::fs::write(&file, toml).expect("write tether.toml");
    let tmux = Tmux::start(env, 200, 50);
    let line = format!(
        "exec {BIN} --state-dir {} -f {}",
        env.state_dir().display(),
        file.display()
    );
    tmux.type_line(env, &line);
    tmux.wait_screen(env, "the TUI", |s| s.contains("Commands"));
    tmux
}

/// Quits (confirming while commands run) and waits for the TUI to be gone.
fn quit(env: &TestEnv, tmux: Tmux) {
    tmux.keys(env, &["q"]);
    let screen = tmux.wait_screen(env, "the quit question or the end", |s| {
        s.contains("still running.") || !s.contains("Commands")
    });
    if screen.contains("still running.") {
        tmux.keys(env, &["y"]);
    }
    tmux.wait_screen(env, "the TUI gone", |s| !s.contains("Commands"));
    drop(tmux);
}

#[test]
fn dependencies_start_in_order_and_a_failing_worker_gives_up_after_three_restarts() {
    let env = TestEnv::new("launcher-order");
    let tmux = start(&env, &stack(free_port(), 0));
    common::wait_until(&env, "web spawned", || {
        runs_of(&env, "web")
            .first()
            .is_some_and(|d| has(d, "spawned"))
    });
    let (db, migrate, web) = (
        runs_of(&env, "db").remove(0),
        runs_of(&env, "migrate").remove(0),
        runs_of(&env, "web").remove(0),
    );
    let web_spawned = at(&web, "spawned");
    assert!(
        at(&db, "ready") <= web_spawned,
        "web started before db was ready"
    );
    assert!(
        at(&migrate, "exit") <= web_spawned,
        "web started before migrate succeeded"
    );
    assert!(at(&db, "spawned") <= at(&db, "ready"));

    // The worker: its first run and three restarts, each run a command directory of its own
    // with its number in the request, then no more.
    tmux.wait_screen(&env, "the worker given up", |s| s.contains("gave up"));
    let runs = runs_of(&env, "worker");
    let numbers: Vec<u32> = (runs.iter())
        .map(|d| CommandRecord::load(d).request.map_or(0, |r| r.run))
        .collect();
    assert_eq!(numbers, [1, 2, 3, 4], "{runs:?}");
    for run in &runs {
        let exit = events(run).into_iter().find_map(|e| match e.kind {
            EventKind::Exit { status, .. } => Some(status.code),
            _ => None,
        });
        assert_eq!(exit, Some(Some(1)), "{}", run.display());
    }
    // Each restart waited for the run before it to end.
    for pair in runs.windows(2) {
        assert!(at(&pair[0], "exit") <= at(&pair[1], "spawned"));
    }
    quit(&env, tmux);
    assert_eq!(runs_of(&env, "worker").len(), 4);
    env.finish();
}

#[test]
fn a_failed_dependency_is_reported_and_its_dependent_never_starts() {
    let env = TestEnv::new("launcher-failed");
    let tmux = start(&env, &stack(free_port(), 1));
    tmux.wait_screen(&env, "web blocked", |s| {
        s.lines()
            .any(|l| l.contains(" web ") && l.contains("blocked"))
    });
    // The status line names web's reason only until the worker's restarts replace it; web's
    // own plan line, shown while web is selected, keeps it.
    tmux.keys(&env, &["Down", "Down"]);
    tmux.wait_screen(&env, "web's reason", |s| {
        s.contains("not started: migrate: exit 1")
    });
    assert!(runs_of(&env, "web").is_empty(), "web was started");
    tmux.wait_screen(&env, "the worker given up", |s| s.contains("gave up"));
    // A watch from another terminal (a tmux server of its own) shows what the launcher said
    // too, from its journal: in the session's header, then web's row and the worker's.
    let viewer = TestEnv::new("launcher-failed-watch");
    let watch = Tmux::start(&viewer, 120, 40);
    watch.type_line(
        &viewer,
        &format!("exec {BIN} --state-dir {} watch", env.state_dir().display()),
    );
    watch.wait_screen(
        &viewer,
        "web blocked and the worker given up, watched",
        |s| {
            s.contains("▾ ")
                && s.lines()
                    .any(|l| l.contains(" web ") && l.contains("blocked"))
                && s.lines()
                    .any(|l| l.contains(" worker") && l.contains("gave up"))
        },
    );
    watch.keys(&viewer, &["q"]);
    watch.wait_screen(&viewer, "the watch gone", |s| !s.contains("Commands"));
    drop(watch);
    viewer.finish();
    quit(&env, tmux);
    assert!(runs_of(&env, "web").is_empty(), "web was started");

    // The post-mortem shows what the launcher said: web, which never ran, blocked and why;
    // the worker's last run given up.
    let sessions: Vec<_> = std::fs::read_dir(env.state_dir().join("sessions"))
        .expect("the sessions")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    let tmux = Tmux::start(&env, 200, 50);
    tmux.type_line(
        &env,
        &format!(
            "exec {BIN} --state-dir {} open {}",
            env.state_dir().display(),
            sessions[0]
        ),
    );
    let screen = tmux.wait_screen(&env, "the recorded session", |s| {
        s.lines()
            .any(|l| l.contains(" web ") && l.contains("blocked"))
            && s.lines()
                .any(|l| l.contains(" worker ") && l.contains("gave up"))
    });
    let web = screen
        .lines()
        .find(|l| l.contains(" web "))
        .unwrap_or_default();
    assert!(
        web.contains("- ") && !web.contains('#'),
        "web has no number: {web}"
    );
    tmux.keys(&env, &["q"]);
    tmux.wait_screen(&env, "open gone", |s| !s.contains("Commands"));
    drop(tmux);
    // `tether sessions` says it too: counted as blocked, and listed with why.
    let listing = |args: &[&str]| {
        let mut sessions = env.tether(args);
        sessions.env("COLUMNS", "200");
        let out = common::run_to_end(&env, sessions, "tether sessions");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert!(listing(&["sessions"]).contains("1 blocked"));
    let long = listing(&["sessions", &sessions[0]]);
    let web = long
        .lines()
        .find(|l| l.starts_with("  web "))
        .unwrap_or_default();
    assert!(web.contains("not started: migrate: exit 1"), "{long}");

    // So do the exports: web is in each, the worker's last run says it was given up on.
    let export = |format: &str| listing(&["export", &sessions[0], "--format", format]);
    let text = export("text");
    // The summary table's last row of each: `web`, `07-worker`.
    let row = |name: &str| {
        (text.lines())
            .rfind(|l| (l.split(' ').next()).is_some_and(|cell| cell.ends_with(name)))
            .unwrap_or_default()
            .to_string()
    };
    assert!(
        row("web").contains("not started: migrate: exit 1"),
        "{text}"
    );
    assert!(row("-worker").contains("gave up after"), "{text}");
    assert!(text.contains("== web (never ran): "), "{text}");
    let lines: Vec<serde_json::Value> = (export("jsonl").lines())
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    let web = (lines.iter())
        .find(|l| l["kind"] == "not_started")
        .expect("web's line");
    assert_eq!(web["name"], "web");
    assert_eq!(web["plan"]["blocked"], "migrate: exit 1");
    // Every word of the launcher, the worker's give-up among them, on the run it ended.
    let gave_up = (lines.iter())
        .find(|l| l["kind"] == "plan" && l["plan"]["gave_up"].is_object())
        .expect("the worker's give-up");
    assert_eq!(gave_up["name"], "worker");
    assert!(
        gave_up["command"]
            .as_str()
            .is_some_and(|c| c.ends_with("-worker"))
    );
    assert!(
        gave_up["words"]
            .as_str()
            .is_some_and(|w| w.starts_with("gave up after"))
    );
    let trace = export("chrome-trace");
    assert!(trace.contains("web (never ran)"), "{trace}");
    assert!(trace.contains("not started: migrate: exit 1"), "{trace}");
    let otlp = export("otlp");
    assert!(otlp.contains(r#""name":"not_started""#), "{otlp}");
    assert!(otlp.contains("tether.launcher.plan"), "{otlp}");
    assert!(otlp.contains("tether.commands.blocked"), "{otlp}");
    let json: serde_json::Value =
        serde_json::from_str(&listing(&["sessions", "--json"])).expect("sessions --json");
    let session = &json["sessions"][0];
    assert_eq!(session["not_started"][0]["name"], "web", "{session}");
    assert_eq!(
        session["not_started"][0]["words"],
        "not started: migrate: exit 1"
    );
    let worker = (session["commands"].as_array().expect("commands").iter())
        .rfind(|c| c["name"] == "worker")
        .expect("the worker");
    assert!(worker["plan"]["gave_up"].is_object(), "{worker}");
    // A restart says which run it is, in each export that lists runs.
    let run = worker["run"].as_u64().expect("a restart's run");
    assert!(run > 1, "{worker}");
    assert!(
        text.contains(&format!("-worker (worker, run {run}): ")),
        "{text}"
    );
    assert!(otlp.contains("tether.command.run"), "{otlp}");

    // And the live exporter: web on the session's root span, counted as blocked, and the
    // worker's last run given up on.
    common::follower::write_config(&env, "");
    let receiver = Receiver::start();
    let root = |spans: &[ReceivedSpan]| {
        (spans.iter())
            .find(|s| s.span.parent_span_id.is_empty() && s.span.name.starts_with("session "))
            .cloned()
    };
    common::wait_until(&env, "the session's root span", || {
        let out = common::follower::follow_once(&env, &receiver.endpoint(), &["--once"]);
        assert!(out.status.success(), "{out:?}");
        root(&receiver.spans()).is_some()
    });
    let spans = receiver.spans();
    let root = root(&spans).expect("the root");
    assert_eq!(
        attr_int(&root.span.attributes, "tether.commands.blocked"),
        Some(1)
    );
    let web = (root.span.events.iter())
        .find(|e| e.name == "not_started")
        .expect("web's event");
    assert_eq!(
        attr_text(&web.attributes, "tether.command.name").as_deref(),
        Some("web")
    );
    assert_eq!(
        attr_text(&web.attributes, "tether.description").as_deref(),
        Some("not started: migrate: exit 1")
    );
    let gave_up = (spans.iter())
        .filter(|s| s.span.name == "worker")
        .filter_map(|s| attr_text(&s.span.attributes, "tether.launcher.plan"))
        .collect::<Vec<_>>();
    assert!(
        matches!(&gave_up[..], [words] if words.starts_with("gave up after")),
        "{gave_up:?}"
    );
    env.finish();
}

/// A project whose command `server` (`shell`, and the keys in `extra`) restarts when a file
/// under `src/` changes: started in the TUI, its first run spawned, then a source file
/// written.
fn change_a_watched_server(env: &TestEnv, shell: &str, extra: &str) -> Tmux {
    let dir = env.path("project");
    std::fs::create_dir_all(dir.join("src")).expect("create the project");
    let toml = format!(
        r#"
[[command]]
name = "server"
cwd = "{}"
shell = "{shell}"
restart_on_change = ["src/**/*.rs"]
{extra}
"#,
        dir.display()
    );
    let tmux = start(env, &toml);
    common::wait_until(env, "the first run spawned", || {
        runs_of(env, "server")
            .first()
            .is_some_and(|d| has(d, "spawned"))
    });
    std::fs::write(dir.join("src/main.rs"), "fn main() {}\n").expect("write a source file");
    tmux
}

/// The origins of the stops a run journaled, in order.
fn stop_origins(dir: &Path) -> Vec<Origin> {
    (events(dir).iter())
        .filter_map(|e| match &e.kind {
            EventKind::StopStarted { origin, .. } => Some(*origin),
            _ => None,
        })
        .collect()
}

/// `restart_on_change`: a change to a matching file stops the command and starts it again as
/// its next run; a file that does not match changes nothing.
#[test]
fn a_changed_file_restarts_its_command_as_a_new_run() {
    let env = TestEnv::new("launcher-change");
    let tmux = change_a_watched_server(&env, "echo serving; exec sleep 600", "");
    common::wait_until(&env, "the second run spawned", || {
        runs_of(&env, "server")
            .get(1)
            .is_some_and(|d| has(d, "spawned"))
    });
    let runs = runs_of(&env, "server");
    assert_eq!(
        CommandRecord::load(&runs[1]).request.map(|r| r.run),
        Some(2)
    );
    // The first run was stopped (not a failure to restart from) before the second began.
    assert!(has(&runs[0], "stop_started"), "{}", runs[0].display());
    assert!(at(&runs[0], "exit") <= at(&runs[1], "spawned"));
    // And reads as restarted for the change, not as stopped by the operator.
    assert_eq!(stop_origins(&runs[0]), [Origin::FileChanged]);
    let first = CommandRecord::load(&runs[0]);
    assert_eq!(
        tether::model::replay::command_from_record(&first).state_words(),
        "restarted (file changed)"
    );
    quit(&env, tmux);
    assert_eq!(runs_of(&env, "server").len(), 2);
    env.finish();
}

/// The operator's stop while a changed file's restart is stopping the command: the run ends
/// as stopped by the operator, not as restarted, and no second run starts.
#[test]
fn an_operator_stop_during_a_change_restart_ends_the_command() {
    let env = TestEnv::new("launcher-change-stop");
    // It ignores TERM (as its `sleep`s do), so the change's stop lasts its grace.
    let shell = "trap '' TERM; echo serving; while :; do sleep 0.2; done";
    let tmux = change_a_watched_server(&env, shell, "grace = \"60s\"");
    common::wait_until(&env, "the change's stop", || {
        has(&runs_of(&env, "server")[0], "stop_started")
    });
    tmux.keys(&env, &["s"]);
    common::wait_until(&env, "the operator's stop journaled", || {
        stop_origins(&runs_of(&env, "server")[0]).len() == 2
    });
    let first = runs_of(&env, "server")[0].clone();
    assert_eq!(
        stop_origins(&first),
        [Origin::FileChanged, Origin::Operator]
    );
    // Its grace is the change's; KILL ends it sooner, by the operator's hand too.
    tmux.keys(&env, &["K"]);
    tmux.wait_screen(&env, "the kill's question", |s| s.contains("SIGKILL"));
    tmux.keys(&env, &["y"]);
    tmux.wait_screen(&env, "the server stopped", |s| {
        s.lines()
            .any(|l| l.contains("server") && l.contains("stopped"))
    });
    // The screen says so at the exit; result.json comes as the broker closes.
    common::wait_until(&env, "the first run's result.json", || {
        CommandRecord::load(&first).result.is_some()
    });
    let record = CommandRecord::load(&first);
    assert_eq!(
        tether::model::replay::command_from_record(&record).state_words(),
        "stopped (SIGKILL)"
    );
    assert_eq!(
        record.result.and_then(|r| r.stopped_by),
        Some(Origin::Operator)
    );
    quit(&env, tmux);
    assert_eq!(runs_of(&env, "server").len(), 1, "no run after the stop");
    env.finish();
}

/// `ordered_shutdown`: quitting stops web, then api once web has ended, then db.
#[test]
fn an_ordered_shutdown_stops_dependents_first() {
    let env = TestEnv::new("launcher-ordered");
    let server = "trap 'exit 0' TERM; while :; do sleep 0.1; done";
    let toml = format!(
        r#"
ordered_shutdown = true

[[command]]
name = "db"
shell = "{server}"

[[command]]
name = "api"
shell = "{server}"
depends_on = {{ db = "started" }}

[[command]]
name = "web"
shell = "{server}"
depends_on = {{ api = "started" }}
"#
    );
    let tmux = start(&env, &toml);
    common::wait_until(&env, "web spawned", || {
        runs_of(&env, "web")
            .first()
            .is_some_and(|d| has(d, "spawned"))
    });
    quit(&env, tmux);
    let [db, api, web] = ["db", "api", "web"].map(|name| runs_of(&env, name).remove(0));
    assert!(at(&web, "exit") <= at(&api, "stop_started"));
    assert!(at(&api, "exit") <= at(&db, "stop_started"));
    env.finish();
}
