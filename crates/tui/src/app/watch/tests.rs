//! The watch over journals as they are made, half-made and in the thousands: each listed as
//! far as it can be, nothing read twice, no watch kept on an ended command.

use std::fs;
use std::io::Write;
use std::path::Path;
use std::time::Duration;
use tether_model::Mode;

use super::Watch;
use crate::app::App;
use tether_model::{CommandState, Model, Status};

const RESULT: &str =
    include_str!("../../../../../tests/fixtures/every-kind/05-interrupted/result.json");

impl Watch {
    /// Reads the whole backlog: these tests look at the list once it is complete.
    fn catch_up(&mut self, app: &mut App) {
        while self.pending() {
            self.step(app);
        }
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn app() -> App {
    App::new(Model {
        session_id: "every session".into(),
        session_dir: "/nonexistent".into(),
        started_ms: 0,
        commands: Vec::new(),
        mode: Mode::Watched,
    })
}

fn watch(state: &Path) -> Watch {
    let (replies, _) = tokio::sync::mpsc::unbounded_channel();
    Watch::new(state.to_path_buf(), None, &[], replies)
}

/// Waits for the watcher's next events and applies them.
/// A watch of `state` without inotify (as when it cannot be had, or its watches ran out),
/// started and caught up.
fn polling(state: &Path) -> (App, Watch) {
    let mut app = app();
    let mut watch = watch(state);
    watch.watcher = None;
    watch.start(&mut app);
    watch.catch_up(&mut app);
    (app, watch)
}

async fn next_events(watch: &mut Watch, app: &mut App) {
    let readiness = watch.readiness().expect("inotify");
    tokio::time::timeout(Duration::from_secs(5), readiness.wait())
        .await
        .expect("an inotify event");
    watch.on_events(app);
    watch.catch_up(app);
}

fn write_result(dir: &Path) {
    tether_os::testing::write_private(dir.join(".result.json.1.tmp"), RESULT);
    fs::rename(dir.join(".result.json.1.tmp"), dir.join("result.json")).unwrap();
}

#[test]
fn half_made_journals_are_listed_and_completed_as_they_grow() {
    let state = tether_os::testing::private_tempdir();
    let me = std::process::id();
    runtime().block_on(async {
        // A session without session.json, a command without command.json, an event log
        // that ends in the middle of a line.
        let command = state.path().join("sessions/agent/01-sh");
        tether_os::testing::private_dir(&command);
        let spawned = r#"{"ts_ms":1000,"mono_us":2,"kind":"spawned","pid":42,"pgid":42,"argv":["sh"]}"#;
        let mut events = tether_os::testing::create_private(command.join("events.jsonl"));
        write!(
            events,
            "{{\"ts_ms\":999,\"mono_us\":1,\"kind\":\"broker_started\",\"v\":3,\"broker_pid\":{me}}}\n{}",
            &spawned[..30]
        )
        .unwrap();
        let mut app = app();
        let mut watch = watch(state.path());
        watch.start(&mut app);
        watch.catch_up(&mut app);
        assert_eq!(app.model.commands.len(), 1);
        assert_eq!(app.model.commands[0].config.name, "sh");
        assert_eq!(app.model.commands[0].status, Status::Starting);

        writeln!(events, "{}", &spawned[30..]).unwrap();
        next_events(&mut watch, &mut app).await;
        assert_eq!(app.model.commands[0].status, Status::Running);
        assert_eq!(app.model.commands[0].pid, Some(42));

        let watched = watch.watcher.as_ref().unwrap().watching();
        write_result(&command);
        next_events(&mut watch, &mut app).await;
        assert!(matches!(app.model.commands[0].status, Status::Exited(_)));
        assert_eq!(
            watch.watcher.as_ref().unwrap().watching(),
            watched - 1,
            "an ended command keeps no watch"
        );

        // A session that appears while watching, then a command in it.
        let late = state.path().join("sessions/late");
        tether_os::testing::private_dir(&late);
        next_events(&mut watch, &mut app).await;
        tether_os::testing::private_dir(late.join("01-ls"));
        next_events(&mut watch, &mut app).await;
        assert_eq!(app.model.commands.len(), 2);
        assert_eq!(app.model.commands[1].config.name, "ls");
    });
}

#[test]
fn ten_thousand_ended_commands_cost_no_watch_each() {
    let state = crate::memory_tempdir();
    let session = state.path().join("sessions/big");
    for n in 1..=10_000 {
        let dir = session.join(format!("{n:02}-echo"));
        tether_os::testing::private_dir(&dir);
        tether_os::testing::write_private(dir.join("result.json"), RESULT);
    }
    runtime().block_on(async {
        let mut app = app();
        let mut watch = watch(state.path());
        watch.start(&mut app);
        watch.catch_up(&mut app);
        assert_eq!(app.model.commands.len(), 10_000);
        assert_eq!(app.model.commands[9_999].config.name, "echo");
        // sessions/ and the session itself.
        assert_eq!(watch.watcher.as_ref().unwrap().watching(), 2);
        assert!(watch.open.is_empty());
    });
}

#[test]
fn a_missing_state_dir_is_made_private() {
    let parent = tether_os::testing::private_tempdir();
    let state = parent.path().join("not/yet");
    runtime().block_on(async {
        let mut app = app();
        let mut watch = watch(&state);
        watch.start(&mut app);
        watch.catch_up(&mut app);
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &fs::metadata(state.join("sessions")).unwrap().permissions(),
        );
        assert_eq!(mode & 0o777, 0o700);
        tether_os::testing::private_dir(state.join("sessions/s1/01-true"));
        next_events(&mut watch, &mut app).await;
        // The session, then (its watch set when it was seen) its command.
        if app.model.commands.is_empty() {
            next_events(&mut watch, &mut app).await;
        }
        assert_eq!(app.model.commands.len(), 1);
    });
}

#[test]
fn without_inotify_the_clock_finds_what_changed() {
    let state = tether_os::testing::private_tempdir();
    runtime().block_on(async {
        let (mut app, mut watch) = polling(state.path());
        assert!(watch.polling());
        let command = state.path().join("sessions/agent/01-true");
        tether_os::testing::private_dir(&command);
        watch.tick(&mut app);
        watch.catch_up(&mut app);
        assert_eq!(app.model.commands.len(), 1);
        assert_eq!(app.model.commands[0].status, Status::Starting);
        write_result(&command);
        watch.tick(&mut app);
        watch.catch_up(&mut app);
        assert!(matches!(app.model.commands[0].status, Status::Exited(_)));
        assert!(watch.open.is_empty());
    });
}

/// `sessions/NAME/01-echo`, ended, in a session that started at `started_ms` and whose
/// directory last changed `age` ago.
fn ended_session(state: &Path, name: &str, started_ms: u64, age: Duration) {
    let session = state.join("sessions").join(name);
    let command = session.join("01-echo");
    tether_os::testing::private_dir(&command);
    tether_os::testing::write_private(command.join("result.json"), RESULT);
    tether_os::testing::write_private(
        session.join("session.json"),
        format!(
            r#"{{"id":"{name}","started_ms":{started_ms},"cwd":"/","user":"u","host":"h","pid":1,"tether_version":"0","argv":[]}}"#
        ),
    );
    let changed = std::time::SystemTime::now() - age;
    fs::File::open(&session)
        .unwrap()
        .set_modified(changed)
        .unwrap();
}

fn sessions_listed(app: &App) -> Vec<String> {
    app.model
        .commands
        .iter()
        .filter_map(|c| c.journal_dir.as_deref()?.parent()?.file_name())
        .map(|n| n.to_string_lossy().into_owned())
        .collect()
}

#[test]
fn the_first_frame_waits_for_no_journal_and_the_newest_are_read_first() {
    let state = tether_os::testing::private_tempdir();
    for n in 0..100u64 {
        // s099 started last and changed last.
        ended_session(
            state.path(),
            &format!("s{n:03}"),
            1_000 + n,
            Duration::from_secs(1_000 - n),
        );
    }
    runtime().block_on(async {
        let mut app = app();
        let mut watch = watch(state.path());
        watch.start(&mut app);
        // Listed, not read: what the first frame waits for is a directory listing.
        assert!(app.model.commands.is_empty());
        assert!(watch.pending());

        assert!(watch.step(&mut app));
        let first = sessions_listed(&app);
        assert!(!first.is_empty() && first.len() <= super::backlog::STEP_BUDGET);
        assert!(first.contains(&"s099".to_string()), "{first:?}");
        let newest: Vec<String> = (100 - first.len()..100)
            .map(|n| format!("s{n:03}"))
            .collect();
        assert_eq!(
            first, newest,
            "the most recent sessions first, in start order"
        );

        watch.catch_up(&mut app);
        let all: Vec<String> = (0..100).map(|n| format!("s{n:03}")).collect();
        assert_eq!(sessions_listed(&app), all);
        assert!(!watch.pending());
    });
}

#[test]
fn rows_of_a_removed_session_go() {
    let state = tether_os::testing::private_tempdir();
    for (n, name) in ["a", "b", "c"].into_iter().enumerate() {
        ended_session(state.path(), name, 1_000 + n as u64, Duration::ZERO);
    }
    let sessions = state.path().join("sessions");
    runtime().block_on(async {
        let mut app = app();
        let mut watch = watch(state.path());
        watch.start(&mut app);
        watch.catch_up(&mut app);
        assert_eq!(sessions_listed(&app), ["a", "b", "c"]);
        app.view.selected = 2;

        fs::remove_dir_all(sessions.join("b")).unwrap();
        while sessions_listed(&app).len() == 3 {
            next_events(&mut watch, &mut app).await;
        }
        assert_eq!(sessions_listed(&app), ["a", "c"]);
        // Still on its command.
        assert_eq!(app.view.selected, 1);
        // Renamed away, as a prune does before it removes a session.
        fs::rename(sessions.join("c"), sessions.join(".pruning-c-1")).unwrap();
        while sessions_listed(&app).len() == 2 {
            next_events(&mut watch, &mut app).await;
        }
        assert_eq!(sessions_listed(&app), ["a"]);
        assert_eq!(watch.known.len(), 1);
        // Put back: listed again.
        fs::rename(sessions.join(".pruning-c-1"), sessions.join("c")).unwrap();
        while sessions_listed(&app).len() == 1 {
            next_events(&mut watch, &mut app).await;
        }
        assert_eq!(sessions_listed(&app), ["a", "c"]);
    });
}

#[test]
fn without_inotify_rows_of_a_removed_session_go_at_the_next_look() {
    let state = tether_os::testing::private_tempdir();
    for (n, name) in ["a", "b"].into_iter().enumerate() {
        ended_session(state.path(), name, 1_000 + n as u64, Duration::ZERO);
    }
    runtime().block_on(async {
        let (mut app, mut watch) = polling(state.path());
        assert_eq!(sessions_listed(&app), ["a", "b"]);
        fs::remove_dir_all(state.path().join("sessions/a")).unwrap();
        watch.tick(&mut app);
        watch.catch_up(&mut app);
        assert_eq!(sessions_listed(&app), ["b"]);
    });
}

#[test]
fn a_full_look_asked_for_while_one_is_under_way_lists_the_sessions_again_after_it() {
    let state = tether_os::testing::private_tempdir();
    ended_session(state.path(), "a", 1_000, Duration::ZERO);
    runtime().block_on(async {
        let mut app = app();
        let mut watch = watch(state.path());
        watch.start(&mut app);
        // Made after the listing, its events dropped (a queue overflow asks for a rescan).
        ended_session(state.path(), "b", 2_000, Duration::ZERO);
        watch.rescan(&mut app);
        watch.catch_up(&mut app);
        assert_eq!(sessions_listed(&app), ["a", "b"]);
    });
}

#[test]
fn a_signal_carried_out_counts_its_processes_in_english() {
    use tether_frontend::control::Ack;
    use tether_protocol::protocol::{ProcessSignal, Request};
    let ack = |targets: Vec<i32>| Ack {
        journal_offset: None,
        targets,
        message: None,
    };
    let term = Request::group_signal(ProcessSignal::TERM);
    assert_eq!(
        super::done_words(&term, ack(vec![42])),
        "SIGTERM sent to 1 process"
    );
    assert_eq!(
        super::done_words(&term, ack(vec![42, 43])),
        "SIGTERM sent to 2 processes"
    );
}

/// A line of `launcher.jsonl`: at `ts_ms`, the launcher's word `plan` on `command`, about its
/// run in `dir`.
fn plan_line(ts_ms: u64, command: &str, dir: Option<&str>, plan: &str) -> String {
    let dir = dir.map_or(String::new(), |d| format!(r#","dir":"{d}""#));
    format!(r#"{{"ts_ms":{ts_ms},"command":"{command}"{dir},"plan":{plan}}}"#) + "\n"
}

/// A session run by a launcher, watched live: a command it has not started is a row of its
/// own in its session, with the launcher's word; once it starts, its run takes the row's
/// place; a run the launcher gave up on says so. The file is followed as it grows, through
/// inotify and by the clock alike.
#[test]
fn the_launchers_word_is_followed_as_it_grows() {
    use tether_model::Plan;
    use tether_os::testing::{private_dir, write_private};
    let state = tether_os::testing::private_tempdir();
    let session = state.path().join("sessions/stack");
    let migrate = session.join("01-migrate");
    private_dir(&migrate);
    write_private(migrate.join("result.json"), RESULT);
    // Another session with a command of the same directory name: its row is not this one's.
    let other = state.path().join("sessions/other/01-migrate");
    private_dir(&other);
    write_private(other.join("result.json"), RESULT);
    let launcher = session.join("launcher.jsonl");
    let blocked = r#"{"blocked":"migrate: exit 1"}"#;
    write_private(
        &launcher,
        plan_line(
            10,
            "web",
            None,
            r#"{"waiting":{"on":"migrate","not_started":false}}"#,
        ) + &plan_line(
            20,
            "migrate",
            Some("01-migrate"),
            r#"{"gave_up":{"restarts":0}}"#,
        ) + &plan_line(30, "web", None, blocked),
    );
    let rows_of = |app: &App| -> Vec<(String, Option<Plan>, bool)> {
        (app.model.commands.iter())
            .map(|c| {
                let at = c.journal_dir.as_deref().or(c.unstarted_in.as_deref());
                let at = at.map(|d| d.strip_prefix(state.path()).unwrap().display().to_string());
                (
                    at.unwrap_or_default(),
                    c.plan.clone(),
                    c.journal_dir.is_none(),
                )
            })
            .collect()
    };
    let append = |line: String| {
        let mut file = fs::OpenOptions::new().append(true).open(&launcher).unwrap();
        file.write_all(line.as_bytes()).unwrap();
    };
    runtime().block_on(async {
        let mut app = app();
        let mut watch = watch(state.path());
        watch.start(&mut app);
        watch.catch_up(&mut app);
        let rows = rows_of(&app);
        let gave_up = Some(Plan::GaveUp { restarts: 0 });
        let web_blocked = Some(Plan::Blocked("migrate: exit 1".into()));
        assert!(
            rows.contains(&("sessions/other/01-migrate".into(), None, false)),
            "{rows:?}"
        );
        assert!(rows.contains(&("sessions/stack/01-migrate".into(), gave_up.clone(), false)));
        assert!(
            rows.contains(&("sessions/stack".into(), web_blocked.clone(), true)),
            "{rows:?}"
        );
        assert_eq!(rows.len(), 3);
        // In its session's place: right after its run.
        let web = rows.iter().position(|r| r.2).unwrap();
        assert_eq!(rows[web - 1].0, "sessions/stack/01-migrate", "{rows:?}");

        // The launcher changes its mind (restarted by hand): web waits again, then starts.
        append(plan_line(40, "web", None, "null"));
        next_events(&mut watch, &mut app).await;
        assert!(rows_of(&app).contains(&("sessions/stack".into(), None, true)));
        let web_run = session.join("02-web");
        private_dir(&web_run);
        append(plan_line(50, "web", Some("02-web"), "null"));
        next_events(&mut watch, &mut app).await;
        if app.model.commands.iter().any(|c| c.journal_dir.is_none()) {
            next_events(&mut watch, &mut app).await;
        }
        let rows = rows_of(&app);
        assert!(!rows.iter().any(|r| r.2), "web started: {rows:?}");
        assert!(
            rows.contains(&("sessions/stack/02-web".into(), None, false)),
            "{rows:?}"
        );
    });

    // By the clock where inotify is not had: the same word.
    runtime().block_on(async {
        let (mut app, mut watch) = polling(state.path());
        append(plan_line(
            60,
            "web",
            Some("02-web"),
            r#"{"gave_up":{"restarts":2}}"#,
        ));
        watch.tick(&mut app);
        watch.catch_up(&mut app);
        let rows = rows_of(&app);
        let gave_up = Some(Plan::GaveUp { restarts: 2 });
        assert!(
            rows.contains(&("sessions/stack/02-web".into(), gave_up.clone(), false)),
            "{rows:?}"
        );

        // The file cannot be read any more (a directory in its place): said once, and what
        // was shown from it stays.
        let break_it = |app: &mut App, watch: &mut Watch| {
            fs::remove_file(&launcher).unwrap();
            private_dir(&launcher);
            app.view.message = None;
            watch.tick(app);
            watch.catch_up(app);
            app.view.message.take().unwrap_or_default()
        };
        let said = break_it(&mut app, &mut watch);
        assert!(said.contains("cannot read launcher.jsonl"), "{said}");
        let rows = rows_of(&app);
        assert!(
            rows.contains(&("sessions/stack/02-web".into(), gave_up, false)),
            "{rows:?}"
        );
        watch.tick(&mut app);
        watch.catch_up(&mut app);
        assert_eq!(app.view.message, None, "said once");
        // Readable again, then not: said again.
        fs::remove_dir(&launcher).unwrap();
        write_private(&launcher, plan_line(70, "web", Some("02-web"), "null"));
        watch.tick(&mut app);
        watch.catch_up(&mut app);
        let said = break_it(&mut app, &mut watch);
        assert!(said.contains("cannot read launcher.jsonl"), "{said}");
    });
}

/// Rows come and go under a kill waiting to be confirmed (a watch's backlog, a launcher's
/// unstarted commands): the confirmation follows its command, and goes with it.
#[test]
fn a_kill_to_confirm_follows_its_command_as_rows_move() {
    use crate::app::view::Dialog;
    let row = |name: &str| {
        let mut c = CommandState::new(tether_config::CommandConfig::new(
            name,
            tether_protocol::protocol::CommandSpec::Shell("true".into()),
        ));
        c.journal_dir = Some(format!("/s/sessions/a/{name}").into());
        c
    };
    let mut app = app();
    app.insert_commands(0, vec![row("01-a"), row("02-b"), row("03-c")]);
    app.view.dialog = Some(Dialog::ConfirmKill { command: 2 });
    app.insert_commands(1, vec![row("00-new")]);
    assert_eq!(app.view.dialog, Some(Dialog::ConfirmKill { command: 3 }));
    assert_eq!(app.model.commands[3].config.name, "03-c");
    app.remove_commands(|i, _| i == 0);
    assert_eq!(app.view.dialog, Some(Dialog::ConfirmKill { command: 2 }));
    assert_eq!(app.model.commands[2].config.name, "03-c");
    app.remove_commands(|_, c| c.config.name == "03-c");
    assert_eq!(app.view.dialog, None);
}

/// A restart's run read while it runs is named as it will be once it ended, `(run 3)`,
/// and knows its caller.
#[test]
fn a_restarts_run_is_numbered_while_it_runs() {
    use tether_os::testing::{private_dir, write_private};
    let state = tether_os::testing::private_tempdir();
    let dir = state.path().join("sessions/stack/03-worker");
    private_dir(&dir);
    let mut request: serde_json::Value = serde_json::from_str(include_str!(
        "../../../../../tests/fixtures/every-kind/05-interrupted/command.json"
    ))
    .unwrap();
    // Its broker this process, alive: the row is read as running.
    let me = std::process::id();
    let ticks = tether_os::procfs::read_stat(me as i32).unwrap().start_ticks;
    request["broker"] = serde_json::json!({ "pid": me, "start_ticks": ticks });
    request["run"] = 3.into();
    write_private(
        dir.join("command.json"),
        serde_json::to_vec(&request).unwrap(),
    );
    write_private(
        dir.join("events.jsonl"),
        format!(
            "{{\"ts_ms\":999,\"mono_us\":1,\"kind\":\"broker_started\",\"v\":3,\"broker_pid\":{me}}}\n"
        ),
    );
    runtime().block_on(async {
        let mut app = app();
        let mut watch = watch(state.path());
        watch.start(&mut app);
        watch.catch_up(&mut app);
        let row = &app.model.commands[0];
        assert!(row.status.is_active(), "{:?}", row.status);
        assert_eq!(row.title(), "interrupted (run 3)");
        // Who asked for it, as once it ended: an agent's tree shows the call as the command.
        assert_eq!(
            row.caller_pid,
            request["parent_pid"].as_i64().map(|p| p as i32)
        );
        assert!(row.caller_pid.is_some());
    });
}
