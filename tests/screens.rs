//! Every screen of the TUI, drawn into a fixed-size TestBackend and compared with an insta
//! snapshot. The model is built from events, with fixed pids and times, so snapshots are
//! stable.

use ratatui::Terminal;
use ratatui::backend::TestBackend;

use tether::app::keymap::bindings;
use tether::app::view::{Dialog, FrameContent, Pane, PaneLines, ViewState};
use tether::config::CommandConfig;
use tether::model::output::render_line;
use tether::model::{CommandState, Model};
use tether::protocol::{CommandSpec, Event, EventKind, ExitStatus, Origin, Scope, Stream};
use tether::sampler::{ProcessInfo, TreeRow};

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
                2,
                EventKind::Spawned {
                    pid: 101,
                    pgid: 101,
                    argv: vec!["sh".into(), "-c".into(), "make".into()],
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
                3,
                EventKind::Spawned {
                    pid: 201,
                    pgid: 201,
                    argv: vec![],
                },
            ),
            ev(
                4_000,
                EventKind::SignalSent {
                    signal: "TERM".into(),
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
                    signal: "KILL".into(),
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
                },
            ),
            ev(5_000, EventKind::ResponseTimeout { silent_ms: 5_000 }),
            ev(
                5_001,
                EventKind::SignalSent {
                    signal: "TERM".into(),
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
        recorded: false,
        controllable: false,
    }
}

fn process(pid: i32, ppid: i32, argv: &str, cpu: f32) -> ProcessInfo {
    ProcessInfo {
        pid,
        ppid,
        pgid: 101,
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
    };
    let escaped = ProcessInfo {
        pgid: 150,
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
        ..FrameContent::default()
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
    terminal
        .draw(|frame| tether::ui::draw(frame, model, view, content, &keys))
        .unwrap();
    let buffer = terminal.backend().buffer();
    let mut out = String::new();
    for y in 0..buffer.area.height {
        for x in 0..buffer.area.width {
            out.push_str(buffer[(x, y)].symbol());
        }
        out.push('\n');
    }
    out
}

#[test]
fn main_view() {
    insta::assert_snapshot!(draw(120, 36, &ViewState::default()));
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
