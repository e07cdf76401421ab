use super::*;
use tether_config::CommandConfig;
use tether_model::Mode;
use tether_model::Status;
use tether_protocol::protocol::{CommandSpec, ExitStatus};

fn command(dir: &str, status: Status, cpu: Option<f32>) -> CommandState {
    let name = dir.rsplit('/').next().unwrap_or(dir);
    let mut c = CommandState::new(CommandConfig::new(name, CommandSpec::Shell("true".into())));
    c.begin_run(PathBuf::from(dir), 1_000);
    c.status = status;
    c.cpu_percent = cpu;
    c
}

fn exited(code: i32) -> Status {
    Status::Exited(ExitStatus {
        code: Some(code),
        signal: None,
        core_dumped: false,
    })
}

/// Two sessions: `a` with a running, a failed and an ok command; `b` with one failed.
fn model() -> Model {
    Model {
        session_id: "every session".into(),
        session_dir: "/s".into(),
        started_ms: 0,
        commands: vec![
            command("/s/a/01-run", Status::Running, Some(5.0)),
            command("/s/a/02-bad", exited(1), None),
            command("/s/a/03-ok", exited(0), None),
            command("/s/b/01-hot", Status::Running, Some(99.0)),
            command("/s/b/02-bad", exited(2), None),
        ],
        mode: Mode::Watched,
    }
}

fn rows(list: &ListRows) -> Vec<String> {
    list.rows
        .iter()
        .map(|row| match *row {
            ListRow::Session(at) => format!("[{}]", list.sessions[at].name),
            ListRow::Command(id) => id.to_string(),
            ListRow::Setup(at) => format!("({} set-up)", list.sessions[at].setup_folded),
        })
        .collect()
}

#[test]
fn sessions_are_headers_with_their_counts() {
    let list = ListRows::build(&model(), &ListView::default());
    assert_eq!(rows(&list), ["[a]", "0", "1", "2", "[b]", "3", "4"]);
    let a = &list.sessions[0];
    assert_eq!(
        (a.counts.running, a.counts.failed, a.counts.total),
        (1, 1, 3)
    );
    assert_eq!(list.counts.total, 5);
    assert_eq!(list.counts.failed, 2);
    assert_eq!(list.number_width, 2, "#1 to #3");
}

#[test]
fn the_filter_and_the_sort_choose_and_order_the_rows() {
    let model = model();
    let mut view = ListView {
        filter: ListFilter::Failed,
        ..ListView::default()
    };
    assert_eq!(
        rows(&ListRows::build(&model, &view)),
        ["[a]", "1", "[b]", "4"]
    );
    view.filter = ListFilter::Running;
    assert_eq!(
        rows(&ListRows::build(&model, &view)),
        ["[a]", "0", "[b]", "3"]
    );
    view.filter = ListFilter::All;
    view.sort = ListSort::Cpu;
    let list = ListRows::build(&model, &view);
    assert_eq!(list.rows[5], ListRow::Command(3), "the hot one first in b");
}

#[test]
fn a_folded_session_keeps_its_header_which_the_selection_can_rest_on() {
    let model = model();
    let mut view = ListView::default();
    view.folded.insert("/s/a".into());
    let list = ListRows::build(&model, &view);
    assert_eq!(rows(&list), ["[a]", "[b]", "3", "4"]);
    // The selected command, folded away, shows as its header.
    assert_eq!(list.cursor_row(1), Some(0));
    // Down from the folded header, onto b's first command (b's header only labels it).
    assert_eq!(list.moved(1, 1), Some(3));
    assert_eq!(
        list.moved(3, -1),
        Some(0),
        "up onto a's header: a's first command"
    );
    assert_eq!(list.moved(3, i64::MAX / 2), Some(4));
    assert_eq!(list.moved(4, i64::MIN / 2), Some(0));
}

#[test]
fn one_session_has_no_header_and_nothing_folds() {
    // `tether open` of one session: the model's own.
    let mut model = model();
    model.commands.truncate(3);
    model.session_dir = "/s/a".into();
    let mut view = ListView::default();
    view.folded.insert("/s/a".into());
    let list = ListRows::build(&model, &view);
    assert!(!list.has_headers());
    assert_eq!(rows(&list), ["0", "1", "2"]);
}

#[test]
fn a_watch_names_even_one_session_by_its_header() {
    let mut model = model();
    model.commands.truncate(3);
    let list = ListRows::build(&model, &ListView::default());
    assert!(list.has_headers());
    assert_eq!(rows(&list), ["[a]", "0", "1", "2"]);
}

#[test]
fn rows_are_rebuilt_only_when_what_they_show_changed() {
    let mut model = model();
    let view = ListView::default();
    let list = ListRows::build(&model, &view);
    assert!(list.is_current(&model, &view));
    model.commands[0].cpu_percent = Some(50.0);
    assert!(list.is_current(&model, &view), "CPU orders nothing here");
    model.commands[0].status = exited(0);
    assert!(!list.is_current(&model, &view), "a command ended");
    // What a command left running: paused is wider in the state column (`paused 10`).
    let left = |paused| Status::LeftRunning {
        exit: ExitStatus {
            code: Some(0),
            signal: None,
            core_dumped: false,
        },
        processes: 10,
        paused,
    };
    model.commands[0].status = left(false);
    let list = ListRows::build(&model, &view);
    model.commands[0].status = left(true);
    assert!(!list.is_current(&model, &view), "what it left was paused");
    let by_cpu = ListView {
        sort: ListSort::Cpu,
        ..ListView::default()
    };
    assert!(!list.is_current(&model, &by_cpu));
}

#[test]
fn a_hidden_selection_goes_to_the_nearest_listed_command() {
    let view = ListView {
        filter: ListFilter::Failed,
        ..ListView::default()
    };
    let list = ListRows::build(&model(), &view);
    assert_eq!(list.nearest(2), Some(1));
    assert_eq!(list.nearest(4), Some(4));
}

#[test]
fn an_agents_set_up_shells_fold_into_one_row_unless_they_need_the_operator() {
    let setup = |dir: &str, status: Status, script: &str| {
        let mut c = command(dir, status, None);
        c.config.command = CommandSpec::Argv(vec!["/bin/bash".into(), "-c".into(), script.into()]);
        c
    };
    let snapshot = "SNAPSHOT_FILE=/h/.claude/shell-snapshots/snapshot-bash-1-x.sh\necho";
    let mut model = Model {
        session_id: "agent".into(),
        session_dir: "/s/a".into(),
        started_ms: 0,
        commands: vec![
            command("/s/a/01-claude", Status::Running, None),
            setup("/s/a/02-env", exited(0), "env"),
            setup("/s/a/03-echo", exited(0), snapshot),
            command("/s/a/04-ls", exited(0), None),
        ],
        mode: Mode::Watched,
    };
    let list = ListRows::build(&model, &ListView::default());
    assert_eq!(rows(&list), ["0", "(2 set-up)", "3"]);
    assert_eq!(list.counts.total, 4, "counted all the same");
    assert_eq!(list.cursor_row(1), None, "a folded one is not on a row");
    assert_eq!(list.moved(0, 1), Some(3), "moving skips the folded row");
    let shown = ListView {
        show_setup: true,
        ..ListView::default()
    };
    assert_eq!(rows(&ListRows::build(&model, &shown)), ["0", "1", "2", "3"]);
    // One that failed is never folded away.
    model.commands[2].status = exited(1);
    let list = ListRows::build(&model, &ListView::default());
    assert_eq!(rows(&list), ["0", "(1 set-up)", "2", "3"]);
}

/// A command the launcher will not start (a dependency failed) is failed, as the status bar
/// tells it: the failed filter lists it and the title counts it. One that waits is not.
#[test]
fn a_blocked_command_is_among_the_failed() {
    let plan_only = |name: &str, plan: tether_model::Plan| {
        let config = CommandConfig::new(name, CommandSpec::Shell("true".into()));
        let mut c = CommandState::new(config);
        c.plan = Some(plan);
        c
    };
    let model = Model {
        session_id: "s".into(),
        session_dir: "/s/a".into(),
        started_ms: 0,
        commands: vec![
            command("/s/a/01-migrate", exited(1), None),
            plan_only("web", tether_model::Plan::Blocked("migrate: exit 1".into())),
            plan_only(
                "api",
                tether_model::Plan::Waiting {
                    on: "db".into(),
                    not_started: false,
                },
            ),
        ],
        mode: Mode::Live,
    };
    let view = ListView {
        filter: ListFilter::Failed,
        ..ListView::default()
    };
    let list = ListRows::build(&model, &view);
    assert_eq!(rows(&list), ["0", "1"]);
    assert_eq!(list.counts.failed, 2);
}

/// A session's offsets count from its own start (`session.json`), as `tether sessions` and
/// the exports count them, not from its first command's; without one, from that command's.
#[test]
fn a_sessions_offsets_count_from_its_start() {
    let mut model = model();
    for c in &mut model.commands[..3] {
        c.started_ms = Some(1_460);
        c.session_started_ms = Some(1_000);
    }
    model.commands[0].started_ms = Some(1_004);
    let list = ListRows::build(&model, &ListView::default());
    assert_eq!(list.sessions[0].started_ms, 1_000, "session a's start");
    assert_eq!(list.sessions[1].started_ms, 1_000, "b has no session.json");
    model.commands[3].started_ms = Some(2_000);
    model.commands[4].started_ms = Some(2_500);
    let list = ListRows::build(&model, &ListView::default());
    assert_eq!(list.sessions[1].started_ms, 2_000, "b's first command");
}

/// At the time cursor, what had not begun is not listed or counted, and the rows are built
/// again once it begins.
#[test]
fn what_had_not_begun_at_the_cursor_is_left_out() {
    let mut model = model();
    model.commands[4].config.name = "the-widest-name-of-all".into();
    let all = ListRows::build(&model, &ListView::default());
    model.commands[1].not_yet = true;
    model.commands[4].not_yet = true;
    let list = ListRows::build(&model, &ListView::default());
    assert_eq!(rows(&list), ["[a]", "0", "2", "[b]", "3"]);
    assert_eq!((list.counts.total, list.counts.failed), (3, 0));
    assert_eq!(
        list.nearest(1),
        Some(0),
        "the selection moves to a listed one"
    );
    // A session none of whose commands had begun has no header; the columns stay as wide
    // as the whole session's.
    model.commands[3].not_yet = true;
    let hidden = ListRows::build(&model, &ListView::default());
    assert_eq!(rows(&hidden), ["[a]", "0", "2"]);
    assert_eq!(hidden.name_width, all.name_width);
    assert_eq!(hidden.name_width, "the-widest-name-of-all".len());
    model.commands[3].not_yet = false;
    model.commands[4].not_yet = false;
    assert!(!list.is_current(&model, &ListView::default()));
}
