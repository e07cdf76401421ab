//! Time cursor benchmarks: `cargo bench --bench time_cursor`. Prints figures; asserts nothing.
//!
//! 1. The state at a moment: a session of 10 commands with 20,000 events each (output every
//!    5 ms, a 20-process tree snapshot every second); reading it into a `Recording`, then
//!    `commands_at` the middle and the end, median of 20.
//! 2. A step back over a 256 MiB stdout (an `output` event per 64 KiB): the frames `tether
//!    open` draws from the keypress until the pane shows the moment, and their time (moving
//!    back re-reads the stream's log from its start up to the moment).
//! 3. `list`: a session of 10,000 short commands (one in ten failed), as `tether open` reads
//!    it: from loading the journal to the first frame drawn (200×50); a keypress to its frame
//!    drawn for `j`, `G`/`g` and `F` (the filter), median and p99; the peak RSS of the process
//!    (run this one alone, `cargo bench --bench time_cursor list`, for the figure to be its own).

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::layout::Rect;
use tether::app::App;
use tether::app::action::Action;
use tether::journal::SessionRecord;
use tether::model::Mode;
use tether::model::recording::{CommandRecording, Recording};
use tether::model::replay::{frozen_at, model_from_session};
use tether::protocol::{Event, EventKind, ProcessEntry, Stream};

const T0: u64 = 1_767_323_045_000;

fn main() {
    let filter: Option<String> = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let wanted = |name: &str| filter.as_deref().is_none_or(|f| name.contains(f));
    if wanted("state") {
        state_at_a_moment();
    }
    if wanted("step_back") {
        step_back_over_a_big_stream();
    }
    if wanted("list") {
        a_list_of_ten_thousand();
    }
}

fn event(ts_ms: u64, kind: EventKind) -> Event {
    Event {
        ts_ms,
        mono_us: 0,
        kind,
    }
}

fn busy_command(i: usize) -> CommandRecording {
    let mut events = Vec::with_capacity(20_000);
    let mut offset = 0;
    for n in 0..20_000u64 {
        let ts = T0 + n * 5;
        if n % 200 == 0 {
            let processes = (0..20)
                .map(|p| ProcessEntry {
                    pid: 1000 + p,
                    ppid: 999,
                    pgid: 1000,
                    argv: if n == 0 {
                        vec!["worker".into(), p.to_string()]
                    } else {
                        Vec::new()
                    },
                    start_ms: T0,
                    escaped: false,
                })
                .collect();
            events.push(event(ts, EventKind::Tree { processes }));
        } else {
            events.push(event(
                ts,
                EventKind::Output {
                    stream: Stream::Stdout,
                    offset,
                    len: 100,
                },
            ));
            offset += 100;
        }
    }
    CommandRecording {
        config: tether::config::CommandConfig::new(
            format!("busy-{i}"),
            tether::protocol::CommandSpec::Shell("true".into()),
        ),
        dir: "/nonexistent".into(),
        run: 1,
        caller_pid: None,
        events,
    }
}

fn median(mut runs: Vec<Duration>) -> Duration {
    runs.sort();
    runs[runs.len() / 2]
}

fn state_at_a_moment() {
    let commands: Vec<CommandRecording> = (0..10).map(busy_command).collect();
    let started = Instant::now();
    let recording = Recording::new(commands);
    let built = started.elapsed();
    let (first, last) = (
        recording.first().unwrap_or(0),
        recording.last().unwrap_or(0),
    );
    for (name, at) in [("middle", first + (last - first) / 2), ("end", last)] {
        let runs = (0..20)
            .map(|_| {
                let started = Instant::now();
                std::hint::black_box(recording.commands_at(at));
                started.elapsed()
            })
            .collect();
        println!(
            "state at the {name} of 10 × 20,000 events: {:.1} ms (median of 20)",
            median(runs).as_secs_f64() * 1000.0
        );
    }
    println!(
        "reading them into a Recording: {:.1} ms",
        built.as_secs_f64() * 1000.0
    );
}

fn step_back_over_a_big_stream() {
    const SIZE: u64 = 256 << 20;
    const CHUNK: u64 = 64 << 10;
    let dir = tempfile::tempdir().expect("temporary directory");
    let session = dir.path().join("big");
    let command = session.join("01-big");
    std::fs::create_dir_all(&command).expect("session directory");
    std::fs::write(
        session.join("session.json"),
        format!(r#"{{"id":"big","started_ms":{T0}}}"#),
    )
    .expect("session.json");
    let line = b"a line of output that is about sixty-four bytes long, give or take\n";
    let mut log = Vec::with_capacity(SIZE as usize);
    while (log.len() as u64) < SIZE {
        log.extend_from_slice(line);
    }
    log.truncate(SIZE as usize);
    std::fs::write(command.join("stdout.log"), &log).expect("stdout.log");
    let mut events = String::new();
    for (n, offset) in (0..SIZE).step_by(CHUNK as usize).enumerate() {
        let output = event(
            T0 + n as u64,
            EventKind::Output {
                stream: Stream::Stdout,
                offset,
                len: CHUNK,
            },
        );
        events.push_str(&serde_json::to_string(&output).expect("json"));
        events.push('\n');
    }
    std::fs::write(command.join("events.jsonl"), events).expect("events.jsonl");

    let (mut app, end) = open(&session);
    let size = Rect::new(0, 0, 200, 50);
    // The end, indexed whole (as many frames as that takes).
    let mut frames = 0;
    loop {
        app.prepare(size, end);
        frames += 1;
        if !app.behind {
            break;
        }
    }
    println!("open: the end of 256 MiB indexed in {frames} frames");
    // `[` twice: the event before the last, 64 KiB short of the end, so the whole stream
    // but its last 64 KiB is read again (the worst case of a step back).
    app.handle(Action::TimePrevEvent);
    app.handle(Action::TimePrevEvent);
    let started = Instant::now();
    let mut frames = 0;
    loop {
        app.prepare(size, end);
        frames += 1;
        if !app.behind {
            break;
        }
    }
    println!(
        "`[` back from the end of 256 MiB: {frames} frames, {:.0} ms until the pane shows the moment",
        started.elapsed().as_secs_f64() * 1000.0
    );
    let started = Instant::now();
    app.handle(Action::TimeNextEvent);
    app.prepare(size, end);
    println!(
        "`]` on by one event (64 KiB): {:.2} ms",
        started.elapsed().as_secs_f64() * 1000.0
    );
}

fn open(session: &Path) -> (App, u64) {
    let record = SessionRecord::load(session).expect("the session loads");
    let mut model = model_from_session(&record);
    model.mode = Mode::Recorded(Some(Box::new(Recording::from_session(record))));
    let end = frozen_at(&model, 0);
    (App::new(model), end)
}

/// Writes a session of `count` commands of a few milliseconds each: `echo`, `git status`,
/// a failing `grep` every tenth.
fn write_many_commands(session: &Path, count: usize) {
    std::fs::create_dir_all(session).expect("session directory");
    std::fs::write(
        session.join("session.json"),
        format!(r#"{{"id":"many","started_ms":{T0}}}"#),
    )
    .expect("session.json");
    for i in 0..count {
        let name = ["echo", "git", "grep"][i % 3];
        let dir = session.join(format!("{:05}-{name}", i + 1));
        std::fs::create_dir(&dir).expect("command directory");
        let script = match name {
            "echo" => format!("echo step {i}"),
            "git" => "git status --short".into(),
            _ => format!("grep -rn needle{i} src"),
        };
        let request = serde_json::json!({
            "v": 3, "name": name, "command": {"argv": ["sh", "-c", script]},
            "journal_dir": dir, "parent_pid": 1, "grace_ms": 2000,
            "max_output": 1u64 << 30, "heartbeat_ms": 1000, "mirror": false,
        });
        std::fs::write(dir.join("command.json"), request.to_string()).expect("command.json");
        let start = T0 + i as u64 * 50;
        let code = if i % 10 == 9 { 1 } else { 0 };
        let pid = 10_000 + i as i32;
        let status = tether::protocol::ExitStatus {
            code: Some(code),
            signal: None,
            core_dumped: false,
        };
        let events = [
            event(
                start,
                EventKind::BrokerStarted {
                    v: 1,
                    broker_pid: pid - 1,
                    control_socket: None,
                },
            ),
            event(
                start + 1,
                EventKind::Spawned {
                    pid,
                    pgid: pid,
                    argv: vec!["sh".into(), "-c".into(), script],
                    start_ticks: None,
                },
            ),
            event(
                start + 3,
                EventKind::Output {
                    stream: Stream::Stdout,
                    offset: 0,
                    len: 12,
                },
            ),
            event(start + 4, EventKind::Exit { pid, status }),
            event(
                start + 5,
                EventKind::Close {
                    stdout_bytes: 12,
                    stderr_bytes: 0,
                },
            ),
        ];
        let mut file = std::fs::File::create(dir.join("events.jsonl")).expect("events.jsonl");
        for e in &events {
            let line = serde_json::to_string(e).expect("json");
            writeln!(file, "{line}").expect("events.jsonl");
        }
        std::fs::write(dir.join("stdout.log"), "step output\n").expect("stdout.log");
        let result = serde_json::json!({
            "pid": pid, "exit": {"code": code},
            "stdout": {"bytes": 12, "stored": 12}, "stderr": {"bytes": 0, "stored": 0},
            "started_ms": start + 1, "ended_ms": start + 4, "duration_ms": 3,
            "orphans_reaped": 0, "parent_lost": false, "response_timeout": false,
            "hard_killed": false, "cgroup_cpu_usec": 2_500,
        });
        std::fs::write(dir.join("result.json"), result.to_string()).expect("result.json");
    }
}

fn a_list_of_ten_thousand() {
    const COUNT: usize = 10_000;
    let dir = tempfile::tempdir().expect("temporary directory");
    let session = dir.path().join("many");
    write_many_commands(&session, COUNT);
    let size = Rect::new(0, 0, 200, 50);
    let mut terminal = Terminal::new(TestBackend::new(size.width, size.height)).expect("terminal");
    let mut frame = |app: &mut App, end: u64| {
        app.prepare(size, end);
        terminal
            .draw(|f| tether::ui::draw(f, app.shown(), &app.view, &app.content, &app.bindings))
            .expect("draw");
    };
    let started = Instant::now();
    let (mut app, end) = open(&session);
    frame(&mut app, end);
    println!(
        "open of {COUNT} commands → first frame: {:.0} ms",
        started.elapsed().as_secs_f64() * 1000.0
    );
    let mut press = |app: &mut App, action: Action| {
        let started = Instant::now();
        app.handle(action);
        frame(app, end);
        started.elapsed()
    };
    let j: Vec<Duration> = (0..300).map(|_| press(&mut app, Action::Down)).collect();
    let jumps: Vec<Duration> = (0..100)
        .map(|n| {
            press(
                &mut app,
                if n % 2 == 0 {
                    Action::Bottom
                } else {
                    Action::Top
                },
            )
        })
        .collect();
    let filter: Vec<Duration> = (0..99)
        .map(|_| press(&mut app, Action::CycleFilter))
        .collect();
    for (key, runs) in [("j", j), ("G/g", jumps), ("F (filter)", filter)] {
        let (median, p99) = median_and_p99(runs);
        println!(
            "keypress → frame, {key} over {COUNT} commands: median {:.2} ms, p99 {:.2} ms",
            median.as_secs_f64() * 1000.0,
            p99.as_secs_f64() * 1000.0
        );
    }
    if let Some(peak) = peak_rss_kib() {
        println!("peak RSS of the process: {:.1} MiB", peak as f64 / 1024.0);
    }
}

fn median_and_p99(mut runs: Vec<Duration>) -> (Duration, Duration) {
    runs.sort();
    let at = |q: f64| runs[((runs.len() - 1) as f64 * q).round() as usize];
    (at(0.5), at(0.99))
}

/// `VmHWM` of this process, in KiB.
fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}
