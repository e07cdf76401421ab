//! A session read back from its journal: the same model the live TUI fills from brokers,
//! filled from `events.jsonl` instead, so a post-mortem looks as the session looked live.

use crate::Mode;
use std::path::{Path, PathBuf};
use tether_config::CommandConfig;
use tether_config::attention::AttentionSettings;
use tether_os::journal::{CommandRecord, Damage, SessionRecord};

use tether_protocol::protocol::{BrokerIdentity, CommandSpec, Event, EventKind};

use super::{CommandState, Model, Status};

/// Rebuilds a command from its journal. A run whose broker is gone without a result is
/// marked lost; what the journal lacks is said in its notice.
pub fn command_from_record(record: &CommandRecord) -> CommandState {
    let mut command = command_so_far(record);
    if let Some(result) = &record.result {
        command.apply_result(result);
    }
    let started = record.events.first().map_or(0, |e| e.ts_ms);
    let closed = record
        .events
        .iter()
        .any(|e| matches!(e.kind, EventKind::Close { .. }));
    // A run whose broker has not journaled `broker_started` yet (a loaded machine may take a
    // while) but runs, as `command.json` names it (pid and start time), is starting, not
    // failed.
    let starting = command.broker_pid.is_none()
        && record.result.is_none()
        && record
            .broker_here()
            .is_some_and(|b| tether_os::procfs::broker_alive(&b));
    if !closed && !starting && !broker_alive(&command) {
        let last = record.events.last().map_or(started, |e| e.ts_ms);
        command.broker_gone(last);
    }
    let damage: Vec<String> = record
        .damage
        .iter()
        .filter(|d| !(closed && **d == Damage::MissingResult))
        .map(ToString::to_string)
        .collect();
    if !damage.is_empty() && command.status != Status::Running {
        command.notice = Some(damage.join("; "));
    }
    command
}

/// A command as its journal tells it so far, for a run that may still go: its events,
/// which run of its command it is and who asked for it (what links an agent's shell call
/// to the command it asked for); [`command_from_record`] adds how it ended.
pub fn command_so_far(record: &CommandRecord) -> CommandState {
    let mut command = replay(config_of(record), record.dir.clone(), &record.events);
    // As this process sees it: a broker in a PID namespace of its own journals the pid it
    // has there (looked up only while the run may go on).
    if let Some(broker) = (record.broker).filter(|b| command.broker_pid == Some(b.pid)) {
        let here = match record.result {
            None => record.broker_here().unwrap_or(broker),
            Some(_) => broker,
        };
        command.broker_pid = Some(here.pid);
        command.broker_start_ticks = Some(here.start_ticks);
    }
    command.run = run_of(record);
    command.caller_pid = caller_of(record);
    command
}

/// The process that asked for the command (`command.json`'s `parent_pid`).
pub fn caller_of(record: &CommandRecord) -> Option<i32> {
    record.request.as_ref().map(|r| r.parent_pid)
}

/// Rebuilds `command` from its journal again, keeping the name it is shown under (made
/// unique among the session's commands, which the journal's own name may not be).
pub fn reload_from_record(command: &mut CommandState, record: &CommandRecord) {
    let name = std::mem::take(&mut command.config.name);
    let session_started_ms = command.session_started_ms;
    *command = command_from_record(record);
    command.config.name = name;
    command.session_started_ms = session_started_ms;
}

/// Whether the run's broker still runs (the session is live in another tether): its pid
/// with the start time `command.json` gave, or, without one, a live broker's name. (Pids
/// come round again: a dead broker's may be another broker's by now.)
pub fn broker_alive(command: &CommandState) -> bool {
    match (command.broker_pid, command.broker_start_ticks) {
        (Some(pid), Some(start_ticks)) => {
            tether_os::procfs::broker_alive(&BrokerIdentity { pid, start_ticks })
        }
        (pid, _) => pid.is_some_and(broker_pid_alive),
    }
}

/// Whether `pid` is a live broker: a broker names itself; one an older tether exec'd is
/// `tether broker`.
pub fn broker_pid_alive(pid: i32) -> bool {
    let named = || {
        std::fs::read(format!("/proc/{pid}/comm")).is_ok_and(|comm| {
            comm.strip_suffix(b"\n") == Some(tether_protocol::names::BROKER_COMM.to_bytes())
        })
    };
    !tether_os::procfs::is_gone(pid)
        && (named()
            || tether_os::procfs::cmdline(pid)
                .iter()
                .any(|a| a == "broker"))
}

/// Which start of its command the run was: 1, or a restart's number (`run` of its request).
pub fn run_of(record: &CommandRecord) -> u32 {
    record.request.as_ref().map_or(1, |r| r.run.max(1))
}

/// The command as its launch request configured it (as far as the journal says).
pub fn config_of(record: &CommandRecord) -> CommandConfig {
    match &record.request {
        Some(request) => CommandConfig {
            name: request.name.clone(),
            command: request.command.clone(),
            cwd: request.cwd.clone(),
            env: request.env.clone(),
            grace: Some(request.grace),
            no_output_timeout: request.no_output_timeout,
            autostart: false,
            pty: request.terminal.is_some(),
            limits: request.limits,
            drain_on: request.drain_on.clone(),
            drain: request.drain,
            ready: request.ready.clone().map(Box::new),
            attention: Box::new(AttentionSettings::from_request(&request.attention)),
            // Each as it ran (none included), whatever the defaults are now.
            budgets: tether_config::budgets::BudgetSettings {
                max_time: Some(request.budgets.max_time),
                max_cpu: Some(request.budgets.max_cpu),
                max_output: Some(request.budgets.max_output),
            },
            // What the launcher decided is in the journal's runs, not in one request.
            ..CommandConfig::default()
        },
        None => CommandConfig {
            autostart: false,
            pty: false,
            ..CommandConfig::new(record.id.dir_name(), CommandSpec::Argv(Vec::new()))
        },
    }
}

/// A run as these events (in journal order) leave it: the one derivation of a command's
/// state from its journal, for the whole journal and for the time cursor's prefix of it.
pub fn replay(config: CommandConfig, dir: PathBuf, events: &[Event]) -> CommandState {
    let mut command = CommandState::new(config);
    let started = events.first().map_or(0, |e| e.ts_ms);
    command.begin_run(dir, started);
    for event in events {
        command.apply(event);
    }
    command
}

pub fn model_from_session(record: &SessionRecord) -> Model {
    let mut commands: Vec<CommandState> = record.commands.iter().map(command_from_record).collect();
    let unstarted = super::plan::unstarted(&record.launcher, &super::plan::runs_of(&commands));
    commands.extend(unstarted);
    super::plan::apply(&mut commands, &record.launcher, None);
    let started_ms = record
        .info
        .as_ref()
        .map(|i| i.started_ms)
        .or_else(|| commands.iter().filter_map(|c| c.started_ms).min())
        .unwrap_or(0);
    Model {
        session_id: record
            .info
            .as_ref()
            .map(|i| i.id.clone())
            .unwrap_or_else(|| dir_name(&record.dir)),
        session_dir: record.dir.clone(),
        started_ms,
        commands,
        mode: Mode::Recorded(None),
    }
}

/// A directory's own name (a session's id, a command's `03-build`).
pub fn dir_name(dir: &Path) -> String {
    dir.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The moment a recorded session's screens are drawn at: the last end (of a run, or of the
/// custody of what it left running), or now while a command in it still runs.
pub fn frozen_at(model: &Model, now_ms: u64) -> u64 {
    if model.running() > 0 {
        return now_ms;
    }
    let end = |c: &CommandState| c.custody(now_ms).map(|(_, until)| until);
    (model.commands.iter())
        .filter_map(|c| end(c).or(c.ended_ms).or(c.started_ms))
        .max()
        .unwrap_or(now_ms)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use tether_protocol::protocol::ExitStatus;
    use tether_protocol::protocol::fixtures::{event, spawned};

    fn line(ms: u64, kind: EventKind) -> String {
        serde_json::to_string(&event(ms, kind)).unwrap()
    }

    /// A broker of protocol v1 began the journal at 10 ms.
    fn broker_started() -> String {
        line(
            10,
            EventKind::BrokerStarted {
                v: 1,
                broker_pid: 0,
                control_socket: None,
            },
        )
    }

    #[test]
    fn a_finished_run_reads_back_as_it_ended() {
        let dir = tether_os::testing::private_tempdir();
        let mut events = tether_os::testing::create_private(dir.path().join("events.jsonl"));
        let status = ExitStatus {
            code: Some(2),
            signal: None,
            core_dumped: false,
        };
        for l in [
            broker_started(),
            line(11, spawned(5)),
            line(500, EventKind::Exit { pid: 5, status }),
            line(
                501,
                EventKind::Close {
                    stdout_bytes: 0,
                    stderr_bytes: 0,
                },
            ),
        ] {
            writeln!(events, "{l}").unwrap();
        }
        let command = command_from_record(&CommandRecord::load(dir.path()));
        assert_eq!(command.status, Status::Exited(status));
        assert_eq!(command.runtime_ms(10_000), Some(489));
        // No result.json, but the log says the run closed: nothing to report.
        assert_eq!(command.notice, None);
    }

    /// A journal its broker (`pid`, started at `start_ticks`) has not begun yet: its
    /// `command.json` only.
    fn named_broker(pid: i32, start_ticks: u64) -> tempfile::TempDir {
        let dir = tether_os::testing::private_tempdir();
        let fixture = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/fixtures/every-kind/01-ok/command.json"
        );
        let mut request: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(fixture).unwrap()).unwrap();
        request["broker"] = serde_json::json!({ "pid": pid, "start_ticks": start_ticks });
        tether_os::testing::write_private(dir.path().join("command.json"), request.to_string());
        tether_os::testing::write_private(dir.path().join("events.jsonl"), "");
        dir
    }

    #[test]
    fn a_run_whose_broker_has_not_begun_its_journal_is_starting_while_that_broker_runs() {
        // This process stands for the broker.
        let me = std::process::id() as i32;
        let ticks = tether_os::procfs::read_stat(me)
            .expect("our stat")
            .start_ticks;
        let dir = named_broker(me, ticks);
        let command = command_from_record(&CommandRecord::load(dir.path()));
        assert_eq!(command.status, Status::Starting);
        // That pid, but another process (another start time), or no such pid: the broker
        // died before it began the journal.
        for (pid, start_ticks) in [(me, ticks + 1), (i32::MAX, ticks)] {
            let dir = named_broker(pid, start_ticks);
            let command = command_from_record(&CommandRecord::load(dir.path()));
            assert_eq!(command.status, Status::FailedToStart, "{pid} {start_ticks}");
        }
    }

    #[test]
    fn a_journal_cut_short_is_a_lost_run_that_says_why() {
        let dir = tether_os::testing::private_tempdir();
        let spawned = line(11, spawned(5));
        tether_os::testing::write_private(
            dir.path().join("events.jsonl"),
            format!("{}\n{spawned}\n{{\"ts_ms\":12,", broker_started()),
        );
        let command = command_from_record(&CommandRecord::load(dir.path()));
        assert_eq!(command.status, Status::Lost);
        let notice = command.notice.expect("a notice");
        assert!(notice.contains("partial line"), "{notice}");
        assert!(notice.contains("no result.json"), "{notice}");
    }

    /// A running command's broker is its pid with the start time `command.json` gave: a
    /// process that took the pid since (another broker, on a machine whose pids wrap) is
    /// not it, and the run reads lost.
    #[test]
    fn a_broker_is_its_pid_and_start_time_not_whoever_has_the_pid_now() {
        // A process that is no broker by any name (the test binary's argv may hold a filter
        // that reads `broker`).
        struct Ended(std::process::Child);
        impl Drop for Ended {
            fn drop(&mut self) {
                let _ = self.0.kill();
                let _ = self.0.wait();
            }
        }
        let sleep = Ended(
            std::process::Command::new("sleep")
                .arg("30")
                .spawn()
                .expect("run sleep"),
        );
        let me = sleep.0.id() as i32;
        let ticks = tether_os::procfs::read_stat(me).unwrap().start_ticks;
        let config = CommandConfig::new("t", CommandSpec::Shell("true".into()));
        let mut command = CommandState::new(config);
        command.broker_pid = Some(me);
        command.broker_start_ticks = Some(ticks);
        assert!(broker_alive(&command), "the process that started then");
        command.broker_start_ticks = Some(ticks + 1);
        assert!(!broker_alive(&command), "another process with its pid");
        // Without the start time (an older journal), only a broker's name passes.
        command.broker_start_ticks = None;
        assert!(!broker_alive(&command), "a sleep is no broker");
        // From the journal: command.json's identity is taken when it names the same pid.
        let dir = tether_os::testing::private_tempdir();
        let started = format!(
            r#"{{"ts_ms":10,"mono_us":0,"kind":"broker_started","v":4,"broker_pid":{me}}}"#
        );
        tether_os::testing::write_private(dir.path().join("events.jsonl"), started + "\n");
        let mut record = CommandRecord::load(dir.path());
        record.broker = Some(BrokerIdentity {
            pid: me,
            start_ticks: ticks + 1,
        });
        let command = command_from_record(&record);
        assert_eq!(command.broker_start_ticks, Some(ticks + 1));
        assert_eq!(command.status, Status::Lost, "{:?}", command.status);
        record.broker = Some(BrokerIdentity {
            pid: me,
            start_ticks: ticks,
        });
        let status = command_from_record(&record).status;
        drop(sleep);
        assert!(status.is_active(), "{status:?}");
    }

    /// A run of `sh` that started two `sleep`s one after the other, as the broker journals
    /// it: `argv_again` says whether a process's argv is repeated in every tree event (the
    /// old format, protocol v1) or only in the first that lists it (the current one, v2).
    fn tree_journal(argv_again: bool) -> String {
        let sh = r#""pid":5,"ppid":1,"pgid":5,"start_ms":11"#;
        let sh_argv = r#","argv":["sh","-c","while :; do sleep 0.3; done"]"#;
        let sleep = |pid: u64, start: u64| {
            format!(
                r#"{{"pid":{pid},"ppid":5,"pgid":5,"argv":["sleep","0.3"],"start_ms":{start}}}"#
            )
        };
        let again = if argv_again { sh_argv } else { "" };
        [
            format!(
                r#"{{"ts_ms":10,"mono_us":0,"kind":"broker_started","v":{},"broker_pid":0}}"#,
                if argv_again { 1 } else { 2 }
            ),
            r#"{"ts_ms":11,"mono_us":0,"kind":"spawned","pid":5,"pgid":5,"argv":["sh"]}"#.into(),
            format!(
                r#"{{"ts_ms":12,"mono_us":0,"kind":"tree","processes":[{{{sh}{sh_argv}}},{}]}}"#,
                sleep(6, 12)
            ),
            format!(
                r#"{{"ts_ms":1012,"mono_us":0,"kind":"tree","processes":[{{{sh}{again}}},{}]}}"#,
                sleep(7, 900)
            ),
            r#"{"ts_ms":1500,"mono_us":0,"kind":"exit","pid":5,"status":{"signal":15}}"#.into(),
            r#"{"ts_ms":1501,"mono_us":0,"kind":"tree","processes":[]}"#.into(),
            r#"{"ts_ms":1502,"mono_us":0,"kind":"close","stdout_bytes":0,"stderr_bytes":0}"#.into(),
        ]
        .join("\n")
            + "\n"
    }

    #[test]
    fn old_and_new_journals_give_every_process_its_whole_argv() {
        let mut seen = Vec::new();
        for argv_again in [true, false] {
            let dir = tether_os::testing::private_tempdir();
            tether_os::testing::write_private(
                dir.path().join("events.jsonl"),
                tree_journal(argv_again),
            );
            let command = command_from_record(&CommandRecord::load(dir.path()));
            let argvs: Vec<(i32, String)> = command
                .seen
                .iter()
                .map(|p| (p.pid, p.argv.join(" ")))
                .collect();
            assert_eq!(
                argvs,
                [
                    (5, "sh -c while :; do sleep 0.3; done".to_string()),
                    (6, "sleep 0.3".into()),
                    (7, "sleep 0.3".into()),
                ],
                "argv repeated: {argv_again}"
            );
            seen.push(command.seen);
        }
        assert_eq!(seen[0], seen[1]);
    }

    /// The journal of a user trial's `server` (`sleep 1; python3 -m http.server`, python3 a
    /// pyenv shim that execs bash scripts and at last python3), stopped by the operator's
    /// TERM: the shim's process is first recorded as `pyenv-exec`, and again (the event at
    /// 3000 ms) once it exec'd python3.
    fn exec_journal() -> String {
        let sh = r#"{"pid":88,"ppid":86,"pgid":88,"start_ms":412"#;
        let server = r#"{"pid":922,"ppid":88,"pgid":88,"start_ms":1422"#;
        [
            r#"{"ts_ms":10,"mono_us":0,"kind":"broker_started","v":4,"broker_pid":86}"#.into(),
            r#"{"ts_ms":11,"mono_us":0,"kind":"spawned","pid":88,"pgid":88,"argv":["/bin/sh"]}"#
                .into(),
            format!(
                r#"{{"ts_ms":470,"mono_us":0,"kind":"tree","processes":[{sh},"argv":["/bin/sh","-c","sleep 1; python3 -m http.server"]}},{{"pid":893,"ppid":88,"pgid":88,"argv":["sleep","1"],"start_ms":422}}]}}"#
            ),
            format!(
                r#"{{"ts_ms":1474,"mono_us":0,"kind":"tree","processes":[{sh}}},{server},"argv":["bash","/root/.pyenv/libexec/pyenv-exec","python3","-m","http.server"]}},{{"pid":930,"ppid":922,"pgid":88,"argv":["bash","/root/.pyenv/libexec/pyenv-version-name","-f"],"start_ms":1452}}]}}"#
            ),
            format!(r#"{{"ts_ms":2476,"mono_us":0,"kind":"tree","processes":[{sh}}},{server}}}]}}"#),
            format!(
                r#"{{"ts_ms":3000,"mono_us":0,"kind":"tree","processes":[{sh}}},{server},"argv":["/root/.pyenv/versions/3.11.7/bin/python3","-m","http.server"]}}]}}"#
            ),
            format!(r#"{{"ts_ms":4000,"mono_us":0,"kind":"tree","processes":[{sh}}},{server}}}]}}"#),
            r#"{"ts_ms":55804,"mono_us":0,"kind":"signal_sent","signal":"TERM","scope":"group","origin":"operator","targets":[88,922]}"#.into(),
            r#"{"ts_ms":55804,"mono_us":0,"kind":"exit","pid":88,"status":{"signal":15}}"#.into(),
            r#"{"ts_ms":55806,"mono_us":0,"kind":"orphan_reaped","pid":922,"status":{"signal":15},"escaped":false}"#.into(),
            r#"{"ts_ms":55806,"mono_us":0,"kind":"tree","processes":[]}"#.into(),
            r#"{"ts_ms":55806,"mono_us":0,"kind":"close","stdout_bytes":0,"stderr_bytes":0}"#.into(),
        ]
        .join("\n")
            + "\n"
    }

    fn argvs(processes: &[tether_protocol::protocol::ProcessEntry]) -> Vec<(i32, String)> {
        processes
            .iter()
            .map(|p| (p.pid, p.argv.join(" ")))
            .collect()
    }

    #[test]
    fn every_process_seen_live_is_what_the_journal_replays_with_each_latest_command_line() {
        let dir = tether_os::testing::private_tempdir();
        tether_os::testing::write_private(dir.path().join("events.jsonl"), exec_journal());
        let record = CommandRecord::load(dir.path());
        let replayed = command_from_record(&record);
        // Live: the events one by one, as the TUI applies its broker's lines, looked at after
        // each.
        let mut live = CommandState::new(config_of(&record));
        live.begin_run(record.dir.clone(), 0);
        for (i, event) in record.events.iter().enumerate() {
            live.apply(event);
            let so_far = replay(config_of(&record), dir.path().into(), &record.events[..=i]);
            assert_eq!(argvs(&live.seen), argvs(&so_far.seen), "after event {i}");
        }
        assert_eq!(live.seen, replayed.seen);
        assert_eq!(
            argvs(&replayed.seen),
            [
                (88, "/bin/sh -c sleep 1; python3 -m http.server".to_string()),
                (893, "sleep 1".into()),
                // The server reads as what it became, not as the shim's script it began as.
                (
                    922,
                    "/root/.pyenv/versions/3.11.7/bin/python3 -m http.server".into()
                ),
                (
                    930,
                    "bash /root/.pyenv/libexec/pyenv-version-name -f".into()
                ),
            ]
        );
        // Before its exec was recorded, it was the shim's script.
        let at_2s = replay(config_of(&record), dir.path().into(), &record.events[..5]);
        assert_eq!(
            argvs(&at_2s.tree)[1].1,
            "bash /root/.pyenv/libexec/pyenv-exec python3 -m http.server"
        );
        // A tree leaving the argv out after the exec keeps the new one.
        let at_4s = replay(config_of(&record), dir.path().into(), &record.events[..7]);
        assert_eq!(argvs(&at_4s.tree)[1].1, argvs(&replayed.seen)[2].1);
    }
}
