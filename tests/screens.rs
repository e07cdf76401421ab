//! Every screen of the TUI, drawn into a fixed-size TestBackend and compared with an insta
//! snapshot. The model is built from events, with fixed pids and times, so snapshots are
//! stable.

use std::sync::Arc;

use ratatui::Terminal;
use ratatui::backend::TestBackend;

use tether::app::keymap::bindings;
use tether::app::list::{ListFilter, ListRows, ListView};
use tether::app::view::{
    Dialog, FrameContent, LineSelection, Pane, PaneLines, ScreenContent, ViewState,
};
use tether::config::CommandConfig;
use tether::model::output::render_line;
use tether::model::screen::{FullScreenSigns, ReplayStart, ScreenEmulator};
use tether::model::{CommandState, Mode, Model};
use tether::protocol::{
    CommandSpec, ContainmentMode, Event, EventKind, ExitStatus, Origin, Scope, Stream,
};
use tether::sampler::{Machine, ProcessInfo, TreeRow};

const T0: u64 = 1_796_000_000_000;

fn config(name: &str, shell: &str) -> CommandConfig {
    CommandConfig::new(name, CommandSpec::Shell(shell.into()))
}

fn ev(ms: u64, kind: EventKind) -> Event {
    Event {
        ts_ms: T0 + ms,
        mono_us: ms * 1000,
        kind,
    }
}

fn run(command: &mut CommandState, events: Vec<Event>) {
    command.begin_run("/nonexistent".into(), T0);
    for e in &events {
        command.apply(e);
    }
}

fn model() -> Model {
    let mut build = CommandState::new(config("build", "make"));
    run(
        &mut build,
        vec![
            ev(
                0,
                EventKind::BrokerStarted {
                    v: 1,
                    broker_pid: 100,
                    control_socket: None,
                },
            ),
            ev(
                1,
                EventKind::Containment {
                    mode: ContainmentMode::Cgroup,
                    path: Some("/sys/fs/cgroup/tether.s.01-build.100-1".into()),
                    reason: None,
                },
            ),
            ev(
                2,
                EventKind::Spawned {
                    pid: 101,
                    pgid: 101,
                    argv: vec!["sh".into(), "-c".into(), "make".into()],
                    start_ticks: None,
                },
            ),
            ev(
                500,
                EventKind::Output {
                    stream: Stream::Stdout,
                    offset: 0,
                    len: 120,
                },
            ),
        ],
    );
    let mut runaway = CommandState::new(config("runaway", "trap '' TERM; yes"));
    run(
        &mut runaway,
        vec![
            ev(
                0,
                EventKind::BrokerStarted {
                    v: 1,
                    broker_pid: 200,
                    control_socket: None,
                },
            ),
            ev(
                1,
                EventKind::Containment {
                    mode: ContainmentMode::Procfs,
                    path: None,
                    reason: Some("TETHER_CGROUP=off".into()),
                },
            ),
            ev(
                3,
                EventKind::Spawned {
                    pid: 201,
                    pgid: 201,
                    argv: vec![],
                    start_ticks: None,
                },
            ),
            ev(
                4_000,
                EventKind::SignalSent {
                    signal: "TERM".parse().expect("a signal"),
                    scope: Scope::Group,
                    origin: Origin::Operator,
                    targets: vec![201],
                    client: None,
                },
            ),
            ev(6_000, EventKind::HardKill { after_ms: 2_000 }),
            ev(
                6_001,
                EventKind::SignalSent {
                    signal: "KILL".parse().expect("a signal"),
                    scope: Scope::Group,
                    origin: Origin::Operator,
                    targets: vec![201],
                    client: None,
                },
            ),
            ev(
                6_010,
                EventKind::Exit {
                    pid: 201,
                    status: ExitStatus {
                        code: None,
                        signal: Some(9),
                        core_dumped: false,
                    },
                },
            ),
            ev(
                6_020,
                EventKind::Close {
                    stdout_bytes: 10,
                    stderr_bytes: 0,
                },
            ),
        ],
    );
    let mut silent = CommandState::new(config("silent", "sleep 100"));
    run(
        &mut silent,
        vec![
            ev(
                0,
                EventKind::BrokerStarted {
                    v: 1,
                    broker_pid: 300,
                    control_socket: None,
                },
            ),
            ev(
                1,
                EventKind::Spawned {
                    pid: 301,
                    pgid: 301,
                    argv: vec![],
                    start_ticks: None,
                },
            ),
            ev(5_000, EventKind::ResponseTimeout { silent_ms: 5_000 }),
            ev(
                5_001,
                EventKind::SignalSent {
                    signal: "TERM".parse().expect("a signal"),
                    scope: Scope::Group,
                    origin: Origin::Watchdog,
                    targets: vec![301],
                    client: None,
                },
            ),
            ev(
                5_010,
                EventKind::Exit {
                    pid: 301,
                    status: ExitStatus {
                        code: None,
                        signal: Some(15),
                        core_dumped: false,
                    },
                },
            ),
        ],
    );
    let mut missing = CommandState::new(config("missing", "no-such-command"));
    run(
        &mut missing,
        vec![
            ev(
                0,
                EventKind::BrokerStarted {
                    v: 1,
                    broker_pid: 400,
                    control_socket: None,
                },
            ),
            ev(
                1,
                EventKind::SpawnError {
                    code: "enoent".into(),
                    message:
                        "cannot run `no-such-command`: no such file or directory; is it on PATH?"
                            .into(),
                },
            ),
        ],
    );
    Model {
        session_id: "20261130T000000Z-1".into(),
        session_dir: "/nonexistent".into(),
        started_ms: T0,
        commands: vec![build, runaway, silent, missing],
        mode: Mode::Live,
    }
}

fn process(pid: i32, ppid: i32, argv: &str, cpu: f32) -> ProcessInfo {
    ProcessInfo {
        pid,
        ppid,
        pgid: 101,
        sid: 1,
        state: 'S',
        cpu_percent: cpu,
        rss_bytes: 3 << 20,
        start_ms: T0,
        argv: argv.split(' ').map(String::from).collect(),
    }
}

fn content() -> FrameContent {
    let stdout: Vec<&[u8]> = vec![
        b"\x1b[1;32m   Compiling\x1b[0m tether v0.1.0",
        b"\x1b[33mwarning\x1b[0m: unused variable `x`",
        b"[#####     ] 50%\r[##########] 100%",
        b"bad utf-8: \xff\xfe done",
        b"\x1b]52;c;aGVsbG8=\x07\x1b[2Jclipboard and clear were dropped",
    ];
    let stderr: Vec<&[u8]> = vec![b"\x1b[31merror\x1b[0m: something failed"];
    let lines = |raw: &[&[u8]]| PaneLines {
        first: 0,
        lines: raw.iter().map(|l| render_line(l)).collect(),
        numbers: Vec::new(),
        total: raw.len(),
        bytes: raw.iter().map(|l| l.len() as u64 + 1).sum(),
        ..PaneLines::default()
    };
    let escaped = ProcessInfo {
        pgid: 150,
        sid: 150,
        ..process(150, 100, "sleep 1000", 0.0)
    };
    FrameContent {
        now_ms: T0 + 10_000,
        outputs: [lines(&stdout), lines(&stderr)],
        tree: vec![
            TreeRow {
                depth: 0,
                process: process(100, 1, "tether broker", 0.0),
                escaped: false,
            },
            TreeRow {
                depth: 1,
                process: process(101, 100, "sh -c make", 0.1),
                escaped: false,
            },
            TreeRow {
                depth: 2,
                process: ProcessInfo {
                    argv: vec!["cc".into(), "-O2\nmain.c\x1b]0;title\x07\x1b[2J".into()],
                    ..process(102, 101, "", 97.5)
                },
                escaped: false,
            },
            TreeRow {
                depth: 1,
                process: escaped,
                escaped: true,
            },
        ],
        machine: Some(machine()),
        ..FrameContent::default()
    }
}

const GIB: u64 = 1 << 30;

/// A 4-core machine with room to spare.
fn machine() -> Machine {
    Machine {
        cpu_percent: Some(27.4),
        cores: vec![12.0, 97.5, 0.0, 100.0],
        memory_used: 6 * GIB + GIB / 5,
        memory_total: 16 * GIB,
        swap_used: GIB / 4,
        swap_total: 4 * GIB,
        load: [1.87, 1.2, 0.95],
        processes: 412,
    }
}

fn draw(width: u16, height: u16, view: &ViewState) -> String {
    draw_with(width, height, &model(), &content(), view)
}

fn draw_with(
    width: u16,
    height: u16,
    model: &Model,
    content: &FrameContent,
    view: &ViewState,
) -> String {
    let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
    let keys = bindings();
    // The list's rows, as the app builds them before a frame.
    let content = FrameContent {
        list: Arc::new(ListRows::build(model, &view.list)),
        ..content.clone()
    };
    terminal
        .draw(|frame| tether::ui::draw(frame, model, view, &content, &keys))
        .unwrap();
    tether::ui::buffer_text(terminal.backend().buffer())
}

#[test]
fn main_view() {
    insta::assert_snapshot!(draw(120, 36, &ViewState::default()));
}

/// At 120 columns the list is 40 wide: `failed to start` gives COMMAND its 10 columns, cut
/// only as far as that takes, and every row still says what it runs.
#[test]
fn a_narrow_list_keeps_room_for_the_command_text() {
    let screen = draw(120, 36, &ViewState::default());
    for (name, state, command) in [
        ("build", "running ", "make"),
        ("runaway", "stopped ", "killed tr…"),
        ("missing", "failed to s…", "no-such-c…"),
    ] {
        let row = rows_with(&screen, &format!(" {name} "))[0];
        assert!(row.contains(state), "{state} in {row:?}");
        assert!(row.contains(command), "{command} in {row:?}");
    }
    assert!(rows_with(&screen, "  NAME ")[0].contains("COMMAND"));
}

#[test]
fn tree_focused_with_selection() {
    let view = ViewState {
        focus: Pane::Tree,
        tree_selected: 2,
        ..ViewState::default()
    };
    insta::assert_snapshot!(draw(120, 36, &view));
}

#[test]
fn timeline_of_a_killed_runaway() {
    let view = ViewState {
        selected: 1,
        focus: Pane::Timeline,
        ..ViewState::default()
    };
    insta::assert_snapshot!(draw(120, 36, &view));
}

#[test]
fn search_prompt_and_match() {
    let mut view = ViewState {
        focus: Pane::Stdout,
        ..ViewState::default()
    };
    view.outputs[0].search = Some("warning".into());
    view.outputs[0].matched = Some(1);
    view.outputs[0].follow = false;
    view.dialog = Some(Dialog::Search {
        stream: Stream::Stdout,
        input: "warn".into(),
    });
    insta::assert_snapshot!(draw(120, 36, &view));
}

#[test]
fn help_overlay() {
    let view = ViewState {
        dialog: Some(Dialog::Help),
        ..ViewState::default()
    };
    insta::assert_snapshot!(draw(120, 40, &view));
}

#[test]
fn confirm_kill_dialog() {
    let view = ViewState {
        dialog: Some(Dialog::ConfirmKill { command: 0 }),
        ..ViewState::default()
    };
    insta::assert_snapshot!(draw(120, 36, &view));
}

#[test]
fn confirm_quit_dialog() {
    let view = ViewState {
        dialog: Some(Dialog::ConfirmQuit { running: 1 }),
        ..ViewState::default()
    };
    insta::assert_snapshot!(draw(120, 36, &view));
}

#[test]
fn new_command_prompt() {
    let view = ViewState {
        dialog: Some(Dialog::NewCommand {
            input: "cargo test".into(),
        }),
        ..ViewState::default()
    };
    insta::assert_snapshot!(draw(120, 36, &view));
}

#[test]
fn zoomed_stdout() {
    let view = ViewState {
        focus: Pane::Stdout,
        zoom: true,
        ..ViewState::default()
    };
    insta::assert_snapshot!(draw(100, 30, &view));
}

#[test]
fn terminal_too_small() {
    insta::assert_snapshot!(draw(60, 16, &ViewState::default()));
}

#[test]
fn nothing_from_a_command_reaches_the_screen_raw() {
    let screen = draw(120, 36, &ViewState::default());
    let controls: Vec<char> = screen
        .chars()
        .filter(|&c| c != '\n' && tether::model::output::style::is_unsafe_on_screen(c))
        .collect();
    assert!(
        controls.is_empty(),
        "control characters on screen: {controls:?}"
    );
    assert_eq!(
        screen.lines().count(),
        36,
        "a line break from a command split a row"
    );
    assert!(screen.contains("cc -O2 main.c"));
    assert!(screen.contains("clipboard and clear were dropped"));
    assert!(screen.contains("[##########] 100%"));
    assert!(screen.contains('\u{fffd}'));
}

/// U+202E (RIGHT-TO-LEFT OVERRIDE) in a name, an argv and a message: each shows as one
/// placeholder column, and the strip of all commands stays aligned.
#[test]
fn bidi_controls_from_a_command_show_as_placeholders() {
    let mut model = model();
    model.commands[2].config.name = "ab\u{202e}cd".into();
    let mut content = content();
    content.tree[1].process.argv = vec!["sh".into(), "-c".into(), "make \u{2067}x\u{2069}".into()];
    let view = ViewState {
        selected: 2,
        focus: Pane::Timeline,
        message: Some("stopped `ab\u{202e}cd`".into()),
        ..ViewState::default()
    };
    let screen = draw_with(120, 36, &model, &content, &view);
    // Every bar of the strip starts in the column after its 10-column label and a space
    // (cells, not characters: a zero-width character would not take a column of its own).
    let rows: Vec<&str> = screen
        .lines()
        .skip_while(|l| !l.contains(" all commands "))
        .skip(1)
        .take(4)
        .collect();
    assert_eq!(rows.len(), 4, "no strip in\n{screen}");
    for row in rows {
        let cells: Vec<char> = row.chars().filter(|&c| !is_zero_width(c)).collect();
        assert!(
            cells[11] == ' ' && cells[12] != ' ',
            "a bar is out of line: {row:?}"
        );
    }
    assert!(screen.contains("┃ab\u{fffd}cd      ─"));
    let bidi: Vec<char> = screen
        .chars()
        .filter(|&c| tether::model::output::style::is_bidi_control(c))
        .collect();
    assert!(bidi.is_empty(), "bidi controls on screen: {bidi:?}");
    assert!(screen.contains("Process tree: ab\u{fffd}cd"));
    assert!(screen.contains("make \u{fffd}x\u{fffd}"));
    assert!(screen.contains(" stopped `ab\u{fffd}cd`"));
    insta::assert_snapshot!(screen);
}

fn is_zero_width(c: char) -> bool {
    tether::model::output::char_width(c) == 0
}

/// The `(escaped)` mark of a process whose command line is far wider than its column.
#[test]
fn escaped_mark_survives_a_long_command_line() {
    let mut content = content();
    content.tree[3].process.argv = std::iter::once("python3".to_string())
        .chain((0..40).map(|i| format!("--option-{i}=value")))
        .collect();
    let view = ViewState {
        focus: Pane::Tree,
        tree_selected: 3,
        ..ViewState::default()
    };
    let screen = draw_with(120, 36, &model(), &content, &view);
    let row = screen
        .lines()
        .find(|l| l.contains("150 "))
        .expect("the escaped process's row");
    assert!(
        row.contains("└ (escaped) python3 --option-0=value"),
        "mark cut off: {row:?}"
    );
    insta::assert_snapshot!(screen);
}

/// The rows of the screen that hold `needle`.
fn rows_with<'s>(screen: &'s str, needle: &str) -> Vec<&'s str> {
    screen.lines().filter(|l| l.contains(needle)).collect()
}

/// `tether open` of a finished session: the status bar and the help offer only what works
/// there (no add, TERM, KILL, stop, restart, signal).
#[test]
fn a_read_only_session_offers_only_the_keys_that_apply() {
    let mut model = model();
    model.mode = Mode::Recorded(None);
    let screen = draw_with(120, 36, &model, &content(), &ViewState::default());
    let status = screen.lines().last().unwrap();
    for refused in [
        " a  add",
        " t  TERM",
        " K  KILL",
        " s  stop",
        " r  restart",
        " d  dismiss",
    ] {
        assert!(!status.contains(refused), "{refused:?} offered: {status:?}");
    }
    assert!(
        status.contains(" q  quit") && status.contains(" [ ]  event") && status.contains("step 1s"),
        "{status:?}"
    );
    let help = ViewState {
        dialog: Some(Dialog::Help),
        ..ViewState::default()
    };
    let screen = draw_with(120, 40, &model, &content(), &help);
    for refused in [
        "SIGTERM the whole group",
        "launch a new command",
        "restart the",
        "signal the selected",
        "dismiss an ended",
        "type into it",
        "Home g",
    ] {
        assert!(!screen.contains(refused), "help offers {refused:?}");
    }
    for offered in [
        "[       time cursor: previous event",
        "Home    time cursor: first event",
        "g       go to the top",
    ] {
        assert!(screen.contains(offered), "help lacks {offered:?}");
    }
    assert!(screen.contains("nothing here launches or signals"));
    insta::assert_snapshot!(screen);
    // The whole help, time keys and all, fits the smallest terminal.
    let small = draw_with(80, 24, &model, &content(), &help);
    assert!(
        small.contains("Esc closes") && small.contains("End     time cursor off"),
        "{small}"
    );

    // A live session has no time cursor: Home goes to the top, and `[` is not offered.
    let live = draw_with(120, 40, &model_live(), &content(), &help);
    assert!(live.contains("Home g  go to the top"), "{live}");
    assert!(!live.contains("time cursor"), "{live}");
}

fn model_live() -> Model {
    model()
}

/// `tether watch` signals what others run but launches nothing; only there can an ended
/// command be dismissed.
#[test]
fn a_watch_offers_signals_and_dismiss_but_no_launch() {
    let mut model = model();
    model.mode = Mode::Watched;
    let screen = draw_with(120, 36, &model, &content(), &ViewState::default());
    let status = screen.lines().last().unwrap();
    assert!(
        status.contains(" t  TERM") && status.contains(" d  dismiss"),
        "{status:?}"
    );
    assert!(
        !status.contains(" a  add") && !status.contains(" r  restart"),
        "{status:?}"
    );
    let live = draw(120, 36, &ViewState::default());
    assert!(!live.lines().last().unwrap().contains("dismiss"));
    // Its help lists only the keys that work there, in words true there: no typing into a
    // command another tether started, no folding of the one session listed, no set-up
    // shells where there are none, and `q` quits at once.
    let help = ViewState {
        dialog: Some(Dialog::Help),
        ..ViewState::default()
    };
    let screen = draw_with(120, 40, &model, &content(), &help);
    for refused in [
        "type into it",
        "Space",
        "fold/unfold",
        "set-up shells",
        "asks if commands run",
        "launch a new command",
    ] {
        assert!(
            !screen.contains(refused),
            "help offers {refused:?}:\n{screen}"
        );
    }
    for offered in ["t       SIGTERM", "d       dismiss", "q       quit "] {
        assert!(
            screen.contains(offered),
            "help lacks {offered:?}:\n{screen}"
        );
    }
    // The tether that runs its commands types into them and asks before quitting.
    let live = draw_with(120, 40, &model_live(), &content(), &help);
    assert!(live.contains("type into it"), "{live}");
    assert!(live.contains("quit (asks if commands run)"), "{live}");
}

/// A finished run with nothing recorded: the title does not promise a list above "no
/// processes".
#[test]
fn an_empty_tree_of_a_finished_run_says_only_that() {
    let mut content = content();
    content.tree.clear();
    let view = ViewState {
        selected: 1,
        ..ViewState::default()
    };
    let screen = draw_with(120, 36, &model(), &content, &view);
    assert!(!screen.contains("every process seen"), "{screen}");
    assert!(screen.contains("no processes: the command is not running"));
    assert!(screen.contains("Process tree: runaway · procfs · trap '' TERM; yes "));
    insta::assert_snapshot!(screen);
}

/// No commands at all: the panes' titles are whole, not `Process tree:  ──`.
#[test]
fn an_empty_session_has_whole_titles() {
    let mut model = model();
    model.commands.clear();
    let screen = draw_with(
        120,
        36,
        &model,
        &FrameContent::default(),
        &ViewState::default(),
    );
    assert!(screen.contains("╭ Process tree ───"), "{screen}");
    assert!(!screen.contains("Process tree: "), "{screen}");
    insta::assert_snapshot!(screen);
}

/// A command whose own process is stopped (SIGSTOP) reads `paused`, not `running` (nor
/// `stopped`: how a run stopped by hand ended).
#[test]
fn a_stopped_command_reads_paused() {
    let mut model = model();
    model.commands[0].observe_state('T');
    let screen = draw_with(120, 36, &model, &content(), &ViewState::default());
    assert!(
        rows_with(&screen, "▶ build")[0].contains("paused"),
        "{screen}"
    );
}

/// Plurals and words said once: `1 line`, `exit code 0`, one running command is `it`.
#[test]
fn counts_and_exits_read_as_english() {
    let screen = draw(120, 36, &ViewState::default());
    assert!(screen.contains("stderr · 1 line · 33 B"), "{screen}");
    let mut model = model();
    let ok = ExitStatus {
        code: Some(0),
        signal: None,
        core_dumped: false,
    };
    model.commands[0].apply(&ev(
        9_000,
        EventKind::Exit {
            pid: 101,
            status: ok,
        },
    ));
    let timeline = ViewState {
        focus: Pane::Timeline,
        ..ViewState::default()
    };
    let screen = draw_with(120, 36, &model, &content(), &timeline);
    assert!(screen.contains("+0:09.000 exit code 0"), "{screen}");
    assert!(!screen.contains("exit exit"), "{screen}");
    let quit = ViewState {
        dialog: Some(Dialog::ConfirmQuit { running: 1 }),
        ..ViewState::default()
    };
    let screen = draw(120, 36, &quit);
    assert!(screen.contains("1 command is still running."), "{screen}");
    assert!(
        screen.contains("Stop it (TERM, grace, KILL) and quit?"),
        "{screen}"
    );
}

/// The watchdog's `T` and its signal next to the exit they caused, not under it.
#[test]
fn the_watchdog_mark_is_not_hidden_by_the_exit() {
    let screen = draw(120, 36, &ViewState::default());
    let silent = rows_with(&screen, "│silent ")[0];
    // Timed out is a failure: the exit is drawn as one, as the legend's `x`.
    assert!(silent.contains("!Tx"), "{silent:?}");
}

/// At the smallest size the layout takes, states and runtimes are whole.
#[test]
fn the_smallest_terminal_cuts_no_state() {
    let screen = draw(80, 24, &ViewState::default());
    // The list takes the screen there: every column has room.
    for (row, state) in [
        ("▶ #1 build", "running"),
        ("  #2 runaway", "stopped"),
        ("  #3 silent", "timed out"),
    ] {
        let line = rows_with(&screen, &format!("┃{row} "))[0];
        assert!(line.contains(&format!("{state} ")), "{line:?}");
    }
    assert!(rows_with(&screen, "┃▶ #1 build ")[0].contains("10.0s"));
    insta::assert_snapshot!(screen);
}

/// The model with what the sampler saw of the running build and what the runaway cost.
fn model_with_costs() -> Model {
    let mut model = model();
    model.commands[0].observe_usage(97.6, 6 << 20);
    model.commands[1].cpu_ms = Some(5_912);
    model.commands[1].peak_rss_bytes = Some(512 << 20);
    model
}

/// Every column of the list: number, name, state, runtime, CPU (live % or ended time),
/// memory (live or peak), start and command text with badges.
#[test]
fn the_list_with_every_column_at_200_columns() {
    let screen = draw_with(
        200,
        36,
        &model_with_costs(),
        &content(),
        &ViewState::default(),
    );
    let build = rows_with(&screen, "┃▶ #1 build")[0];
    for column in ["running", "10.0s", "97.6%", "6.0M", "+0:00.002", "make"] {
        assert!(build.contains(column), "{column} in {build:?}");
    }
    let runaway = rows_with(&screen, "#2 runaway")[0];
    assert!(
        runaway.contains("5.9s") && runaway.contains("512M"),
        "{runaway:?}"
    );
    insta::assert_snapshot!(screen);
}

/// On a small screen a command opened over the list keeps the way back, `Esc list`, on the
/// status bar, however long the message beside it and whatever needs the operator.
#[test]
fn an_opened_command_on_a_small_screen_keeps_the_way_back_beside_a_message() {
    let view = ViewState {
        focus: Pane::Stdout,
        message: Some(format!(
            "build: Tab the next pane · z zoom · {}",
            "x".repeat(200)
        )),
        ..ViewState::default()
    };
    let screen = draw_with(80, 24, &model_with_costs(), &content(), &view);
    let bar = screen.lines().last().unwrap_or_default();
    assert!(bar.starts_with(" Esc  list  build: Tab"), "{bar:?}");
    // A failure that needs the operator, with a long word of its own, comes after it.
    let mut model = model_with_costs();
    model.commands[0].mark_attention(tether::model::command::AttentionMark {
        kind: tether::protocol::AttentionKind::Failed,
        detail: "y".repeat(300),
        at_ms: 1,
        active: true,
    });
    let screen = draw_with(80, 24, &model, &content(), &view);
    let bar = screen.lines().last().unwrap_or_default();
    assert!(bar.starts_with(" Esc  list "), "{bar:?}");
    assert!(bar.contains("failed"), "what needs you follows: {bar:?}");
    assert!(
        bar.trim_end().ends_with('…'),
        "the message cut, not the way back: {bar:?}"
    );
}

/// At 80 columns the zoomed list still has room for every column, the command text cut.
#[test]
fn the_list_with_every_column_at_80_columns() {
    let view = ViewState {
        zoom: true,
        ..ViewState::default()
    };
    let screen = draw_with(80, 24, &model_with_costs(), &content(), &view);
    let header = rows_with(&screen, "NAME")[0];
    for title in ["#", "STATE", "TIME", "CPU", "RSS", "START", "COMMAND"] {
        assert!(header.contains(title), "{title} in {header:?}");
    }
    insta::assert_snapshot!(screen);
}

/// `tether watch` over two sessions: one folded under its header with its counts, and the
/// list showing the failed commands only.
#[test]
fn folded_session_headers_and_the_failed_filter() {
    let mut model = model_with_costs();
    model.mode = Mode::Watched;
    let sessions = ["20260101-0900-aaaa", "20260101-0930-bbbb"];
    for (i, command) in model.commands.iter_mut().enumerate() {
        let session = sessions[usize::from(i >= 2)];
        command.journal_dir = Some(
            format!(
                "/state/sessions/{session}/{:02}-{}",
                i + 1,
                command.config.name
            )
            .into(),
        );
    }
    let mut view = ViewState {
        zoom: true,
        ..ViewState::default()
    };
    let mut list = ListView::default();
    list.folded
        .insert(format!("/state/sessions/{}", sessions[0]).into());
    let screen = draw_with(
        100,
        24,
        &model,
        &content(),
        &ViewState {
            list,
            ..view.clone()
        },
    );
    assert!(
        screen.contains("▶ ▸ 20260101-0900-aaaa"),
        "the selection on the folded header: {screen}"
    );
    assert!(screen.contains("▾ 20260101-0930-bbbb"), "{screen}");
    view.list.filter = ListFilter::Failed;
    view.list.folded.clear();
    let filtered = draw_with(100, 24, &model, &content(), &view);
    // The runaway the operator stopped is no failure.
    assert!(filtered.contains("Commands: failed 2 of 4"), "{filtered}");
    assert!(
        !filtered.contains(" build "),
        "a running command is filtered out"
    );
    insta::assert_snapshot!(format!("{screen}\n{filtered}"));
}

/// The KILL question offers `y` and `n` only: Enter is not one of its answers.
#[test]
fn the_kill_question_offers_no_enter() {
    let view = ViewState {
        dialog: Some(Dialog::ConfirmKill { command: 0 }),
        ..ViewState::default()
    };
    let screen = draw(120, 36, &view);
    let answers = rows_with(&screen, " yes ")[0];
    assert!(!answers.contains("Enter"), "{answers:?}");
}

/// `tether watch` before anything runs: no `a` to press, since it launches nothing.
#[test]
fn an_empty_watch_does_not_offer_to_launch() {
    let mut model = model();
    model.commands.clear();
    model.mode = Mode::Watched;
    let screen = draw_with(
        120,
        36,
        &model,
        &FrameContent::default(),
        &ViewState::default(),
    );
    assert!(screen.contains("No live commands yet"), "{screen}");
    assert!(!screen.contains(" a  "), "{screen}");
    // Nor to signal or dismiss what is not there.
    for key in ["TERM", "KILL", "stop", "dismiss"] {
        assert!(!screen.contains(key), "{key}: {screen}");
    }
    // Where the list is narrower than the line, it goes on in the row below.
    let hint = rows_with(&screen, "No live commands yet")[0];
    assert!(
        hint.contains("No live commands yet: they show up as"),
        "{hint}"
    );
    assert!(!hint.contains('…'), "{hint}");
    assert!(rows_with(&screen, "they start.").len() == 1, "{screen}");
}

/// A pane's title longer than its frame ends in `…`, the frame's corner in its place.
#[test]
fn a_title_too_long_for_its_pane_ends_in_an_ellipsis() {
    let mut view = ViewState {
        focus: Pane::Stdout,
        ..ViewState::default()
    };
    view.outputs[0].search = Some("z".repeat(60));
    view.outputs[0].follow = false;
    let screen = draw(120, 36, &view);
    let title = rows_with(&screen, "┏ stdout")[0];
    assert!(title.contains("/zzz"), "{title}");
    assert!(title.contains("z… ┓"), "{title}");
}

/// `orphans:N` counts processes that escaped the command's group, not one re-parented to
/// the broker when the shell that started it ended; the timeline says which is which.
#[test]
fn the_orphans_badge_counts_escapees_and_the_timeline_names_them() {
    let mut model = model();
    let entry = |pid: i32, pgid: i32, argv: &str| tether::protocol::ProcessEntry {
        pid,
        ppid: 200,
        pgid,
        argv: argv.split(' ').map(String::from).collect(),
        start_ms: T0 + 10,
        escaped: pgid != 201,
    };
    let killed = ExitStatus {
        code: None,
        signal: Some(9),
        core_dumped: false,
    };
    let runaway = &mut model.commands[1];
    runaway.apply(&ev(
        20,
        EventKind::Tree {
            processes: vec![
                entry(201, 201, "sh -c trap"),
                entry(202, 201, "python3 -m http.server"),
                entry(203, 203, "setsid sleep 1000"),
            ],
        },
    ));
    for (pid, escaped) in [(202, Some(false)), (203, Some(true))] {
        runaway.apply(&ev(
            6_015,
            EventKind::OrphanReaped {
                pid,
                status: killed,
                escaped,
            },
        ));
    }
    let view = ViewState {
        selected: 1,
        focus: Pane::Timeline,
        zoom: true,
        ..ViewState::default()
    };
    let screen = draw_with(120, 30, &model, &content(), &view);
    assert!(
        screen.contains("orphan_reaped pid 203 escaped, SIGKILL: setsid sleep 1000"),
        "{screen}"
    );
    assert!(
        screen.contains("orphan_reaped pid 202 re-parented, SIGKILL: python3 -m http.server"),
        "{screen}"
    );
    insta::assert_snapshot!(screen);
    let zoomed_list = ViewState {
        zoom: true,
        ..ViewState::default()
    };
    let list = draw_with(120, 36, &model, &content(), &zoomed_list);
    let row = rows_with(&list, " runaway ")[0];
    assert!(row.contains("orphans:1 "), "{row:?}");
}

/// Emoji sequences are measured and cut by grapheme cluster, as the terminal draws them: a
/// skin tone stays with its thumb where a line wraps or a name is cut, a family of ZWJ
/// sequences and a flag each take one cell two columns wide.
#[test]
fn emoji_sequences_keep_their_modifiers() {
    let raw = format!("{}👍🏽 and 👨\u{200d}👩\u{200d}👧 and 🇺🇸", "x".repeat(76));
    let rows = tether::model::output::wrap(&render_line(raw.as_bytes()), 78);
    let mut content = content();
    content.outputs[0] = PaneLines {
        first: 0,
        numbers: vec![0; rows.len()],
        lines: rows,
        total: 1,
        bytes: raw.len() as u64 + 1,
        ..PaneLines::default()
    };
    let view = ViewState {
        focus: Pane::Stdout,
        zoom: true,
        wrap: true,
        ..ViewState::default()
    };
    let mut terminal = Terminal::new(TestBackend::new(80, 24)).unwrap();
    let keys = bindings();
    terminal
        .draw(|frame| tether::ui::draw(frame, &model(), &view, &content, &keys))
        .unwrap();
    let buffer = terminal.backend().buffer();
    // The thumb and its skin tone share the last two columns of the first row (below the
    // header and the border).
    assert_eq!(buffer[(77, 2)].symbol(), "👍🏽");
    let second: Vec<&str> = (1..12).map(|x| buffer[(x, 3)].symbol()).collect();
    assert_eq!(
        second,
        [
            " ",
            "a",
            "n",
            "d",
            " ",
            "👨\u{200d}👩\u{200d}👧",
            " ",
            " ",
            "a",
            "n",
            "d"
        ],
        "{second:?}"
    );
    assert_eq!(buffer[(13, 3)].symbol(), "🇺🇸");
    // A name cut to its column keeps its cluster whole, or drops it whole.
    let mut model = model();
    model.commands[0].config.name = "ok👍🏽👍🏽👍🏽".into();
    let screen = draw_with(120, 36, &model, &content, &ViewState::default());
    assert!(
        !screen.contains("👍\u{2026}") && !screen.contains("🏽🏽"),
        "{screen}"
    );
}

/// Wrap off, scrolled sideways: the lines from the column scrolled to, the match found off
/// to the right in sight and highlighted, and the title saying where the view starts.
#[test]
fn an_output_scrolled_sideways_shows_the_match_off_to_the_right() {
    let long = format!("{}needle at column 101{}", "x".repeat(100), "y".repeat(60));
    let raw: Vec<&[u8]> = vec![b"short line", long.as_bytes(), b"another short one"];
    let mut content = content();
    content.outputs[0] = PaneLines {
        first: 0,
        lines: raw.iter().map(|l| render_line(l)).collect(),
        numbers: Vec::new(),
        total: raw.len(),
        bytes: raw.iter().map(|l| l.len() as u64 + 1).sum(),
        ..PaneLines::default()
    };
    let mut view = ViewState {
        focus: Pane::Stdout,
        ..ViewState::default()
    };
    view.outputs[0].follow = false;
    view.outputs[0].search = Some("needle".into());
    view.outputs[0].matched = Some(1);
    view.outputs[0].left = 75;
    let screen = draw_with(120, 36, &model(), &content, &view);
    let row = rows_with(&screen, "needle at column 101")[0];
    assert!(row.contains("┃xxxxxxxxxxxxxxxxxxxxxxxxxneedle"), "{row:?}");
    assert!(
        screen.contains("stdout · 3 lines · 210 B · paused · from column 76"),
        "{screen}"
    );
    insta::assert_snapshot!(screen);
}

fn long_argv_content() -> FrameContent {
    let mut content = content();
    content.tree[3].process.argv = std::iter::once("python3".to_string())
        .chain((0..40).map(|i| format!("--option-{i}=value")))
        .collect();
    content
}

/// `w` wraps the tree's command lines and the timeline's entries too, not only output.
#[test]
fn wrap_applies_to_the_tree_and_the_timeline() {
    let view = ViewState {
        selected: 3,
        wrap: true,
        ..ViewState::default()
    };
    let screen = draw_with(120, 36, &model(), &long_argv_content(), &view);
    // The spawn error, wider than the timeline, goes on over the next rows, by words.
    assert!(
        screen.contains("│+0:00.001 spawn_error cannot run       │"),
        "{screen}"
    );
    assert!(
        screen.contains("│`no-such-command`: no such file or     │"),
        "{screen}"
    );
    assert!(
        screen.contains("│directory; is it on PATH?              │"),
        "{screen}"
    );
    // The long command line in the tree takes more than one row.
    assert!(
        screen.contains("└ (escaped) python3 --option-0=value     │"),
        "{screen}"
    );
    assert!(
        screen.contains("    --option-1=value --option-2=value "),
        "{screen}"
    );
    insta::assert_snapshot!(screen);
}

/// The zoomed tree shows the selected process's whole command line.
#[test]
fn the_zoomed_tree_shows_a_whole_command_line() {
    let view = ViewState {
        focus: Pane::Tree,
        zoom: true,
        tree_selected: 3,
        ..ViewState::default()
    };
    let screen = draw_with(120, 36, &model(), &long_argv_content(), &view);
    let flat: String = screen
        .replace('┃', " ")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        flat.contains("--option-38=value --option-39=value"),
        "{screen}"
    );
    insta::assert_snapshot!(screen);
}

/// Rows and columns inside the stdout pane's border, for an emulator sized as the TUI sizes it.
fn stdout_inner(width: u16, height: u16, zoom: bool) -> (u16, u16) {
    let size = ratatui::layout::Rect::new(0, 0, width, height);
    let areas = tether::app::layout::areas(size, Pane::Stdout, zoom).expect("a layout");
    (areas.stdout.height - 2, areas.stdout.width - 2)
}

/// The screen view of `bytes` in the stdout pane, as the TUI draws it.
fn screen_view(bytes: &[u8], width: u16, height: u16, zoom: bool) -> String {
    let (rows, cols) = stdout_inner(width, height, zoom);
    let mut emulator = ScreenEmulator::new(rows, cols);
    emulator.feed(bytes);
    let mut content = content();
    content.screens[0] = ScreenContent {
        grid: Some(emulator.grid()),
        start: Some(ReplayStart::Whole),
        signs: FullScreenSigns::default(),
        top: 0,
        left: 0,
    };
    content.outputs[0].bytes = bytes.len() as u64;
    let mut view = ViewState {
        focus: Pane::Stdout,
        zoom,
        ..ViewState::default()
    };
    view.outputs[0].screen = true;
    draw_with(width, height, &model(), &content, &view)
}

/// What `top -b -n 2` prints through a pipe: plain lines, one screenful after another. The
/// screen view shows the last screenful, as a terminal of the pane's size would.
#[test]
fn screen_view_of_a_top_batch_recording() {
    let mut bytes = Vec::new();
    for (n, load) in [(1, "0.52"), (2, "0.61")] {
        bytes.extend_from_slice(
            format!(
                "top - 06:4{n}:00 up 3 days,  2:01,  1 user,  load average: {load}, 0.40, 0.33\n\
                 Tasks: 112 total,   1 running, 111 sleeping,   0 stopped,   0 zombie\n\
                 %Cpu(s):  3.{n} us,  1.0 sy,  0.0 ni, 95.9 id,  0.0 wa,  0.0 hi,  0.0 si\n\
                 MiB Mem :  24000.0 total,  18000.0 free,   2000.0 used,   4000.0 buff/cache\n\
                 \n    PID USER      PR  NI    VIRT    RES    SHR S  %CPU  %MEM     TIME+ COMMAND\n"
            )
            .as_bytes(),
        );
        for (pid, cmd, cpu) in [(101, "cargo", 97.5), (102, "rustc", 12.0), (1, "init", 0.0)] {
            bytes.extend_from_slice(
                format!(
                    "{pid:>7} root      20   0  123456  45678   9012 S {cpu:>5.1}   0.2   0:0{n}.00 {cmd}\n"
                )
                .as_bytes(),
            );
        }
        bytes.push(b'\n');
    }
    let screen = screen_view(&bytes, 120, 36, false);
    assert!(screen.contains("stdout · screen 77×12"), "{screen}");
    assert!(screen.contains("load average: 0.61"));
    insta::assert_snapshot!(screen);
}

/// A full-screen program: the alternate screen, a clear, cursor moves and colours, a first
/// frame drawn over by a second, and writes that must reach nothing (OSC 52 clipboard, a
/// title, a cursor-position query, a bell).
#[test]
fn screen_view_of_an_alternate_screen_program() {
    let mut bytes = b"before the program\n".to_vec();
    bytes.extend_from_slice(
        b"\x1b[?1049h\x1b[2J\x1b[H\x1b[1;37;44m frame 1 \x1b[0m\x1b[5;10Hstale text",
    );
    bytes.extend_from_slice(b"\x1b]52;c;cHduZWQgY2xpcGJvYXJk\x07\x1b]0;PWNED-TITLE\x07\x1b[6n\x07");
    bytes.extend_from_slice(b"\x1b[H\x1b[2J\x1b[1;37;44m tether-test runner \x1b[0m");
    bytes.extend_from_slice(b"\x1b[3;3H\x1b[32m\xe2\x9c\x93\x1b[0m parses config");
    bytes.extend_from_slice(b"\x1b[4;3H\x1b[31m\xe2\x9c\x97\x1b[0m talks to broker");
    bytes.extend_from_slice(b"\x1b[6;1H\x1b[7m 2 tests, 1 failed \x1b[0m");
    bytes.extend_from_slice("\x1b[8;3H中文 and e\u{301} and \u{202e}rtl".as_bytes());
    let screen = screen_view(&bytes, 100, 30, true);
    assert!(screen.contains("alternate screen"), "{screen}");
    assert!(screen.contains("tether-test runner"));
    for gone in [
        "before the program",
        "frame 1",
        "stale",
        "PWNED",
        "cHduZWQ",
        "52;c",
    ] {
        assert!(!screen.contains(gone), "{gone:?} on screen:\n{screen}");
    }
    let unsafe_chars: Vec<char> = screen
        .chars()
        .filter(|&c| c != '\n' && tether::model::output::style::is_unsafe_on_screen(c))
        .collect();
    assert!(unsafe_chars.is_empty(), "{unsafe_chars:?}");
    insta::assert_snapshot!(screen);
}

/// The line log of a full-screen program points to the screen view; a selection says what
/// `y` will copy.
#[test]
fn line_log_hints_at_the_screen_view_and_shows_a_selection() {
    let mut content = content();
    content.screens[0].signs = FullScreenSigns {
        alternate: true,
        redraws: true,
    };
    let mut view = ViewState {
        focus: Pane::Stdout,
        zoom: true,
        ..ViewState::default()
    };
    view.outputs[0].follow = false;
    view.outputs[0].selection = Some(LineSelection {
        anchor: 1,
        cursor: 3,
    });
    let screen = draw_with(160, 30, &model(), &content, &view);
    // Below the header.
    let title = screen.lines().nth(1).unwrap();
    assert!(title.contains("V 3 lines: y copies, Esc drops"), "{title}");
    assert!(
        title.contains("full-screen program: v shows its screen"),
        "{title}"
    );
}

/// The header row as text, with `[` `]` around the cells drawn in the pressure style.
fn header_row(width: u16, content: &FrameContent, view: &ViewState) -> String {
    let mut terminal = Terminal::new(TestBackend::new(width, 24)).unwrap();
    let keys = bindings();
    terminal
        .draw(|frame| tether::ui::draw(frame, &model(), view, content, &keys))
        .unwrap();
    let buffer = terminal.backend().buffer();
    let mut out = String::new();
    let mut loud = false;
    for x in 0..buffer.area.width {
        let cell = &buffer[(x, 0)];
        let now = cell.bg == tether::ui::header::PRESSURE.bg.unwrap();
        if now != loud {
            out.push(if now { '[' } else { ']' });
            loud = now;
        }
        out.push_str(cell.symbol());
    }
    if loud {
        out.push(']');
    }
    out
}

#[test]
fn header_at_80_columns() {
    let screen = draw(80, 24, &ViewState::default());
    assert!(!screen.contains("too small"), "{screen}");
    insta::assert_snapshot!(screen);
    let row = header_row(80, &content(), &ViewState::default());
    assert!(!row.contains('['), "nothing near full: {row}");
}

#[test]
fn header_highlights_memory_and_swap_near_full() {
    let mut content = content();
    content.machine = Some(Machine {
        memory_used: 15 * GIB,
        swap_used: 4 * GIB - GIB / 8,
        ..machine()
    });
    insta::assert_snapshot!(header_row(80, &content, &ViewState::default()));
}

#[test]
fn header_per_core_and_before_any_reading() {
    let view = ViewState {
        cores: true,
        ..ViewState::default()
    };
    let mut many = content();
    many.machine = Some(Machine {
        cores: (0..32).map(|i| (i * 3) as f32).collect(),
        ..machine()
    });
    let none = FrameContent {
        machine: None,
        ..content()
    };
    insta::assert_snapshot!(
        [
            header_row(80, &content(), &view),
            header_row(80, &many, &view),
            header_row(80, &none, &ViewState::default()),
        ]
        .join("\n")
    );
}

/// The merged view with times: stdout and stderr lines in the order they were read, each
/// stamped with the time of the `output` event that wrote its first byte, stderr marked.
#[test]
fn merged_view_with_timestamps() {
    let rows: [(u64, Stream, &[u8]); 6] = [
        (
            500,
            Stream::Stdout,
            b"\x1b[1;32m   Compiling\x1b[0m tether v0.1.0",
        ),
        (
            500,
            Stream::Stdout,
            b"\x1b[1;32m   Compiling\x1b[0m ratatui v0.30.0",
        ),
        (
            1_250,
            Stream::Stderr,
            b"\x1b[33mwarning\x1b[0m: unused variable `x`",
        ),
        (61_004, Stream::Stdout, b"test result: ok. 12 passed"),
        (
            61_020,
            Stream::Stderr,
            b"\x1b[31merror\x1b[0m: \x1b]0;title\x07one test failed",
        ),
        (
            61_020,
            Stream::Stderr,
            b"a line too long for the pane is cut at the pane's right edge, as any line is",
        ),
    ];
    let mut content = content();
    content.outputs[0] = PaneLines {
        first: 0,
        lines: rows.iter().map(|(_, _, raw)| render_line(raw)).collect(),
        numbers: (0..rows.len()).collect(),
        total: rows.len(),
        bytes: 330,
        stamps: rows.iter().map(|(ms, _, _)| Some(T0 + ms)).collect(),
        marks: rows.iter().map(|(_, stream, _)| Some(*stream)).collect(),
        merged: true,
        ..PaneLines::default()
    };
    let view = ViewState {
        focus: Pane::Stdout,
        merged: true,
        stamps: true,
        ..ViewState::default()
    };
    let screen = draw_with(100, 30, &model(), &content, &view);
    assert!(!screen.contains('\u{1b}'));
    insta::assert_snapshot!(screen);
}

/// The end of a log shown before the index reaches it: the count is an estimate and the
/// title says how far indexing is.
#[test]
fn an_end_shown_while_indexing() {
    let mut content = content();
    content.outputs[0].total = 17_043_553;
    content.outputs[0].bytes = 1 << 30;
    content.outputs[0].estimated = true;
    content.outputs[0].indexing = Some(12);
    let screen = draw_with(120, 36, &model(), &content, &ViewState::default());
    let title = rows_with(&screen, "indexing");
    assert_eq!(title.len(), 1, "{screen}");
    assert!(
        title[0].contains("≈17043553 lines · 1.0 GiB · indexing 12%"),
        "{}",
        title[0]
    );
}

/// A command stopped after its final line: `drained` in the list, and on its timeline the
/// line that started the drain and the stop that ended it.
#[test]
fn a_drained_command_shows_its_badge_and_final_line() {
    let mut agent = CommandState::new(config("agent", "run-agent"));
    let term = |ms| {
        ev(
            ms,
            EventKind::SignalSent {
                signal: "TERM".parse().expect("a signal"),
                scope: Scope::Group,
                origin: Origin::FinalDrain,
                targets: vec![501],
                client: None,
            },
        )
    };
    run(
        &mut agent,
        vec![
            ev(
                0,
                EventKind::BrokerStarted {
                    v: 1,
                    broker_pid: 500,
                    control_socket: None,
                },
            ),
            ev(
                1,
                EventKind::Spawned {
                    pid: 501,
                    pgid: 501,
                    argv: vec![],
                    start_ticks: None,
                },
            ),
            ev(
                900,
                EventKind::FinalDrain {
                    pattern: "^RESULT".into(),
                    line: "RESULT ok".into(),
                    drain: std::time::Duration::from_secs(5),
                },
            ),
            term(5_900),
            ev(
                5_910,
                EventKind::Exit {
                    pid: 501,
                    status: ExitStatus {
                        code: None,
                        signal: Some(15),
                        core_dumped: false,
                    },
                },
            ),
        ],
    );
    let mut model = model();
    model.commands = vec![agent];
    let view = ViewState {
        focus: Pane::Timeline,
        ..ViewState::default()
    };
    let screen = draw_with(240, 36, &model, &content(), &view);
    let row = rows_with(&screen, "agent");
    assert!(row.iter().any(|r| r.contains("drained")), "{screen}");
    assert!(
        screen.contains("Commands 1 · 0 running · 0 failed"),
        "{screen}"
    );
    assert!(
        screen.contains("final_drain final line \"RESULT ok\"; 5.0s to exit"),
        "{screen}"
    );
    assert!(screen.contains("SIGTERM by final drain"), "{screen}");
}

/// The launcher's states: a command waiting for its dependency, one restarting (its third
/// run's title), one given up and one blocked by a failed dependency read in the list; the
/// selected one's whole word is under its timeline.
#[test]
fn the_launchers_states_read_in_the_list_and_under_the_timeline() {
    use tether::model::Plan;
    let mut model = model();
    let mut web = CommandState::new(config("web", "serve"));
    web.plan = Some(Plan::Waiting {
        on: "db".into(),
        not_started: false,
    });
    let mut worker = CommandState::new(config("worker", "work"));
    run(
        &mut worker,
        vec![ev(
            5,
            EventKind::Exit {
                pid: 300,
                status: ExitStatus {
                    code: Some(1),
                    signal: None,
                    core_dumped: false,
                },
            },
        )],
    );
    worker.run = 3;
    worker.plan = Some(Plan::Restarting {
        at_ms: T0 + 12_000,
        run: 4,
    });
    let mut cron = CommandState::new(config("cron", "tick"));
    cron.plan = Some(Plan::GaveUp { restarts: 3 });
    let mut api = CommandState::new(config("api", "api"));
    api.plan = Some(Plan::Blocked("migrate: exit 1".into()));
    let first_new = model.commands.len();
    model.commands.extend([web, worker, cron, api]);
    let row = |screen: &str, name: &str| rows_with(screen, name)[0].to_string();

    let screen = draw_with(120, 36, &model, &content(), &ViewState::default());
    assert!(row(&screen, " web ").contains("waiting"), "{screen}");
    // Its name cut where the list keeps COMMAND its room (`worker (…`).
    assert!(row(&screen, " worker ").contains("restart"), "{screen}");
    assert!(row(&screen, " cron ").contains("gave up"), "{screen}");
    assert!(row(&screen, " api ").contains("blocked"), "{screen}");

    let mut view = ViewState::default();
    view.select_command(first_new);
    let screen = draw_with(120, 36, &model, &content(), &view);
    assert!(screen.contains("· waiting for db"), "{screen}");
    view.select_command(first_new + 1);
    let screen = draw_with(120, 36, &model, &content(), &view);
    assert!(screen.contains("· restarting in 2s (run 4)"), "{screen}");
    insta::assert_snapshot!(screen);

    // A dependency the operator starts: `r` starts it where this front end launches, not
    // in a watch.
    model.commands[first_new].plan = Some(Plan::Waiting {
        on: "db".into(),
        not_started: true,
    });
    view.select_command(first_new);
    let screen = draw_with(120, 36, &model, &content(), &view);
    assert!(
        screen.contains("· waiting for db (not started: press r"),
        "{screen}"
    );
    model.mode = tether::model::Mode::Watched;
    let screen = draw_with(120, 36, &model, &content(), &view);
    assert!(
        screen.contains("· waiting for db (not started)"),
        "{screen}"
    );
    assert!(!screen.contains("press r"), "{screen}");
}

/// A message too long for the status bar ends in `…`, but the command it names for the
/// operator to type stays whole: the explanation before it is cut.
#[test]
fn the_status_bar_keeps_a_command_to_type_whole() {
    let view = ViewState {
        message: Some(
            "mywork/03 build: needs input (sh read(0) blocked on a pipe; no output for 3.0s) \
             · g: the next (2 in all) · from a shell: `tether stop mywork/03`"
                .into(),
        ),
        ..ViewState::default()
    };
    let screen = draw(100, 30, &view);
    let bar = screen.lines().last().unwrap_or_default();
    assert!(
        bar.starts_with(" mywork/03 build: needs input (sh"),
        "{bar}"
    );
    assert!(
        bar.contains("… · from a shell: `tether stop mywork/03`"),
        "{bar}"
    );
    let plain = ViewState {
        message: Some("select a process in the tree first (Tab, ↑ ↓)".into()),
        ..ViewState::default()
    };
    let bar = draw(100, 30, &plain);
    let bar = bar.lines().last().unwrap_or_default();
    assert_eq!(
        bar.trim_end(),
        " select a process in the tree first (Tab, ↑ ↓)"
    );
}
