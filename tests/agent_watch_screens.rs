//! The watch over a real agent run, at the sizes operators use (200×50, 120×40, 80×24), as
//! insta snapshots of a TestBackend. The session is Claude Code 2.1.197's, recorded under
//! `tether agent` (tests/fixtures/README.md): the agent's row, its two set-up shells, a
//! server, a grep that failed, and `yes` flagged as a runaway. The model is the journal
//! replayed up to a moment of that run, as a watch would have shown it then; the figures a
//! sampler would add (CPU, memory, the tree's processes) are fixed here, so nothing depends
//! on the clock or the machine.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use ratatui::Terminal;
use ratatui::backend::TestBackend;

use tether::app::keymap::bindings;
use tether::app::list::{ListRows, ListView};
use tether::app::view::{FrameContent, Pane, PaneLines, ViewState};
use tether::journal::SessionRecord;
use tether::model::output::render_line;
use tether::model::recording::Recording;
use tether::model::{Mode, Model};
use tether::sampler::tree::build_tree;
use tether::sampler::{Machine, ProcessInfo};

/// 1m04.343s into the run: `yes` has been flagged a runaway (at 1m03.943s); the agent never
/// is, as its commands run in cgroups beside its own; the server runs, the grep failed a
/// minute ago.
const AT_MS: u64 = 1_796_517_990_620;

fn session_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/claude-code/sessions/claude-run")
}

/// What a sampler would have read of a running command's processes: CPU % and memory.
fn sampled(name: &str) -> (f32, u64) {
    match name {
        // Waiting on the model: its commands' CPU is theirs, not the agent's.
        "claude" => (2.0, 283 << 20),
        "python3" => (0.0, 18 << 20),
        "yes" => (99.2, 1536 << 10),
        _ => (0.0, 2 << 20),
    }
}

/// The watch of `tether watch --session claude-run` at [`AT_MS`]: the session as its header,
/// every command as the journal had it then.
fn model() -> Model {
    let dir = session_dir();
    let record = SessionRecord::load(&dir).expect("the fixture's journal");
    let started_ms = record.info.as_ref().expect("session.json").started_ms;
    let results: Vec<_> = record.commands.iter().map(|c| c.result.clone()).collect();
    let mut commands = Recording::from_session(record).commands_at(AT_MS);
    for (command, result) in commands.iter_mut().zip(results) {
        command.session_started_ms = Some(started_ms);
        // What a watch reads once a command has ended: its cost.
        let ended = !command.status.is_active() && command.ended_ms.is_some();
        if let Some(result) = result.filter(|_| ended) {
            command.apply_result(&result);
        }
        if command.status.is_active() {
            let (cpu, rss) = sampled(&command.config.name);
            command.observe_usage(cpu, rss);
        }
    }
    // A command whose journal starts later was not there yet for a watch to list.
    commands.retain(|c| c.status != tether::model::Status::Idle);
    Model {
        session_id: "claude-run".into(),
        session_dir: dir.parent().expect("sessions/").to_path_buf(),
        started_ms,
        commands,
        mode: Mode::Watched,
    }
}

/// What the frame reads for the selected command: its tree (the broker's record, with the
/// sampler's figures) and its stdout.
fn content(model: &Model, view: &ViewState) -> FrameContent {
    let list = Arc::new(ListRows::build(model, &view.list));
    let command = &model.commands[view.selected];
    let broker = command.broker_pid.expect("a broker");
    let started = command.started_ms.unwrap_or(AT_MS);
    let process = |pid, ppid, pgid, argv: &[String]| {
        let leaf = argv.first().map(|a| a.rsplit('/').next().unwrap_or(a));
        // An ended command's processes are the broker's record: no figures, state `-`.
        let live = command.status.is_active();
        let (cpu, rss) = if live {
            sampled(leaf.unwrap_or_default())
        } else {
            (0.0, 0)
        };
        ProcessInfo {
            pid,
            ppid,
            pgid,
            sid: command.pid.unwrap_or(0),
            state: match (live, cpu > 50.0) {
                (false, _) => '-',
                (true, true) => 'R',
                (true, false) => 'S',
            },
            cpu_percent: cpu,
            rss_bytes: rss,
            start_ms: started,
            argv: argv.to_vec(),
        }
    };
    // As the app shows it: the live tree while the command runs, then every process seen.
    let entries = if command.status.is_active() {
        &command.tree
    } else {
        &command.seen
    };
    let processes: Vec<ProcessInfo> = std::iter::once(process(
        broker,
        1,
        broker,
        &["tether".into(), "broker".into()],
    ))
    .chain(
        entries
            .iter()
            .map(|p| process(p.pid, p.ppid, p.pgid, &p.argv)),
    )
    .collect();
    let stdout = std::fs::read(session_dir_of(command).join("stdout.log")).unwrap_or_default();
    let lines: Vec<_> = stdout
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(render_line)
        .collect();
    let stdout = PaneLines {
        total: lines.len(),
        bytes: command.bytes[0],
        lines,
        written_as_one: command.merged_streams,
        ..PaneLines::default()
    };
    let stderr = PaneLines {
        written_as_one: command.merged_streams,
        ..PaneLines::default()
    };
    FrameContent {
        now_ms: AT_MS,
        outputs: [stdout, stderr],
        tree: build_tree(broker, &processes, command.pid),
        machine: Some(Machine {
            cpu_percent: Some(58.0),
            cores: vec![99.2, 17.0],
            memory_used: 1_400 << 20,
            memory_total: 23_500 << 20,
            swap_used: 0,
            swap_total: 0,
            load: [1.92, 1.31, 1.05],
            processes: 97,
        }),
        list,
        ..FrameContent::default()
    }
}

fn session_dir_of(command: &tether::model::CommandState) -> PathBuf {
    command.journal_dir.clone().expect("a journal directory")
}

/// The view a watch opens with, following the newest running command.
fn following(model: &Model) -> ViewState {
    let list = ListRows::build(model, &ListView::default());
    ViewState {
        selected: list.followed.expect("a command runs"),
        ..ViewState::default()
    }
}

fn draw(width: u16, height: u16, model: &Model, view: &ViewState) -> String {
    let content = content(model, view);
    let mut terminal = Terminal::new(TestBackend::new(width, height)).expect("a test terminal");
    let keys = bindings();
    terminal
        .draw(|frame| tether::ui::draw(frame, model, view, &content, &keys))
        .expect("a frame");
    tether::ui::buffer_text(terminal.backend().buffer())
}

fn rows_with<'s>(screen: &'s str, needle: &str) -> Vec<&'s str> {
    screen.lines().filter(|l| l.contains(needle)).collect()
}

/// What every size must show of this run: the asked commands' text (not Claude Code's
/// wrapper), the set-up shells folded, the runaway selected with its CPU.
fn check_common(screen: &str) {
    assert!(
        !screen.contains("shopt -u extglob"),
        "a wrapper shown:\n{screen}"
    );
    assert!(
        screen.contains("2 set-up shells"),
        "the set-up shells folded into one row:\n{screen}"
    );
    assert!(!screen.contains("SNAPSHOT_FILE"), "{screen}");
    let yes = rows_with(screen, "▶ ");
    assert!(
        yes.iter()
            .any(|row| row.contains("yes") && row.contains("99.2%")),
        "the runaway selected, with its CPU:\n{screen}"
    );
}

#[test]
fn the_watch_of_a_claude_code_run_at_200_by_50() {
    let model = model();
    let screen = draw(200, 50, &model, &following(&model));
    check_common(&screen);
    assert!(screen.contains("grep -r no_such_pattern_xyz ."), "{screen}");
    assert!(screen.contains("python3 -m http.server 8765"), "{screen}");
    insta::assert_snapshot!(screen);
}

#[test]
fn the_watch_of_a_claude_code_run_at_120_by_40() {
    let model = model();
    let screen = draw(120, 40, &model, &following(&model));
    check_common(&screen);
    insta::assert_snapshot!(screen);
}

#[test]
fn the_watch_of_a_claude_code_run_at_80_by_24_lists_then_opens() {
    let model = model();
    let view = following(&model);
    let list = draw(80, 24, &model, &view);
    check_common(&list);
    assert!(list.contains("Enter  open"), "{list}");
    // Enter on the failed grep: its panes take the screen.
    let grep = model
        .commands
        .iter()
        .position(|c| c.config.name == "grep")
        .expect("the grep");
    let opened = ViewState {
        selected: grep,
        focus: Pane::Stdout,
        list_moved: true,
        ..view
    };
    let command = draw(80, 24, &model, &opened);
    assert!(command.contains("Process tree: grep"), "{command}");
    assert!(command.contains("Esc  list"), "{command}");
    assert!(command.contains("exit code 3"), "{command}");
    insta::assert_snapshot!(format!("{list}\n{command}"));
}
