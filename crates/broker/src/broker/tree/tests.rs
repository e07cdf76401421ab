use super::*;
use tether_protocol::protocol::{ARGV_CAP, ARGV_CUT_MARK};

/// A process in group 100 (the command's), started at `ticks`.
fn proc(pid: i32, ppid: i32, ticks: u64) -> ProcStat {
    ProcStat {
        pid,
        ppid,
        pgid: 100,
        sid: 100,
        state: b'S',
        start_ticks: ticks,
        ..ProcStat::default()
    }
}

/// Process details as /proc would give them: argv `[name, pid]`, started at `ticks * 10` ms.
fn details(p: &ProcStat) -> (Vec<String>, u64) {
    (
        vec![format!("prog{}", p.pid), p.pid.to_string()],
        p.start_ticks * 10,
    )
}

fn processes(kind: Option<EventKind>) -> Vec<ProcessEntry> {
    match kind {
        Some(EventKind::Tree { processes }) => processes,
        other => panic!("expected a tree event, got {other:?}"),
    }
}

fn argv_of(entries: &[ProcessEntry], pid: i32) -> &[String] {
    &entries.iter().find(|p| p.pid == pid).expect("listed").argv
}

#[test]
fn records_each_command_line_once() {
    let mut recorder = TreeRecorder::new(MAX_TREE_BUDGET);
    let mut reads = Vec::new();
    let mut read = |p: &ProcStat| {
        reads.push(p.pid);
        details(p)
    };
    let sh = proc(100, 1, 5);
    let first = processes(recorder.update(&[sh], 100, &mut read));
    assert_eq!(argv_of(&first, 100), ["prog100", "100"]);
    assert_eq!(first[0].start_ms, 50);

    let second = processes(recorder.update(&[sh, proc(101, 100, 7)], 100, &mut read));
    assert_eq!(argv_of(&second, 100), [] as [String; 0], "already recorded");
    assert_eq!(argv_of(&second, 101), ["prog101", "101"]);
    assert_eq!(second[0].start_ms, 50, "the same identity as before");

    // The same set again is no event at all.
    assert_eq!(
        recorder.update(&[proc(101, 100, 7), sh], 100, &mut read),
        None
    );

    // The sleep is replaced by another: only the new one carries its argv.
    let third = processes(recorder.update(&[sh, proc(102, 100, 9)], 100, &mut read));
    assert_eq!(argv_of(&third, 100), [] as [String; 0]);
    assert_eq!(argv_of(&third, 102), ["prog102", "102"]);
    assert_eq!(reads, [100, 101, 102], "/proc is read once per process");
}

#[test]
fn a_reused_pid_is_a_new_process() {
    let mut recorder = TreeRecorder::new(MAX_TREE_BUDGET);
    processes(recorder.update(&[proc(100, 1, 5), proc(101, 100, 6)], 100, details));
    processes(recorder.update(&[proc(100, 1, 5)], 100, details));
    let reused = processes(recorder.update(&[proc(100, 1, 5), proc(101, 100, 8)], 100, details));
    assert_eq!(argv_of(&reused, 101), ["prog101", "101"]);
    assert_eq!(reused[1].start_ms, 80);
}

#[test]
fn marks_escapees() {
    let mut recorder = TreeRecorder::new(MAX_TREE_BUDGET);
    // The command (100) leads its own session, as with a terminal.
    let mut job = proc(101, 100, 6);
    job.pgid = 101;
    let mut setsid = proc(102, 100, 7);
    (setsid.pgid, setsid.sid) = (102, 102);
    let entries = processes(recorder.update(&[proc(100, 1, 5), job, setsid], 100, details));
    assert_eq!(
        entries.iter().map(|p| p.escaped).collect::<Vec<_>>(),
        [false, false, true],
        "a job in the command's own session is not an escapee; a new session is"
    );
    // With pipes the command is in the broker's session (1): leaving the group is escaping.
    let mut recorder = TreeRecorder::new(MAX_TREE_BUDGET);
    let piped = |pid, pgid| ProcStat {
        pgid,
        sid: 1,
        ..proc(pid, 100, 5)
    };
    let entries = processes(recorder.update(&[piped(100, 100), piped(101, 101)], 100, details));
    assert_eq!(
        entries.iter().map(|p| p.escaped).collect::<Vec<_>>(),
        [false, true]
    );
}

#[test]
fn a_huge_command_line_is_cut_with_a_mark() {
    let mut recorder = TreeRecorder::new(MAX_TREE_BUDGET);
    let huge = |_: &ProcStat| {
        let mut argv = vec![
            "sh".to_string(),
            "-c".into(),
            "while :; do sleep 0.3; done".into(),
        ];
        argv.extend(std::iter::repeat_n("x".repeat(100_000), 10));
        (argv, 0)
    };
    let entries = processes(recorder.update(&[proc(100, 1, 5)], 100, huge));
    let argv = &entries[0].argv;
    let (mark, kept) = argv.split_last().expect("an argv");
    assert_eq!(kept[..3], ["sh", "-c", "while :; do sleep 0.3; done"]);
    assert_eq!(kept.iter().map(String::len).sum::<usize>(), ARGV_CAP);
    assert!(mark.starts_with(ARGV_CUT_MARK), "{mark}");
    assert!(mark.contains("of 1000031 in 13 arguments"), "{mark}");
}

#[test]
fn past_the_budget_one_events_capped_and_no_more_trees() {
    let budget = MIN_TREE_BUDGET;
    let mut recorder = TreeRecorder::new(budget);
    let big = |p: &ProcStat| (vec!["x".repeat(3000), p.pid.to_string()], 0);
    let sh = proc(100, 1, 5);
    let mut recorded = 0u64;
    let mut capped = Vec::new();
    for i in 0..200 {
        let sleep = proc(1000 + i, 100, 10 + i as u64);
        match recorder.update(&[sh, sleep], 100, big) {
            Some(tree @ EventKind::Tree { .. }) => {
                assert!(capped.is_empty(), "a tree event after events_capped");
                recorded += serde_json::to_vec(&tree).unwrap().len() as u64 + LINE_OVERHEAD;
            }
            Some(other) => capped.push((i, other)),
            None => {}
        }
    }
    assert_eq!(capped.len(), 1, "{capped:?}");
    let (at, event) = &capped[0];
    assert!(*at > 10, "a few trees fit the budget first: capped at {at}");
    assert!(recorded <= budget, "{recorded} > {budget}");
    match event {
        EventKind::EventsCapped {
            kind_capped,
            budget: said,
            message,
        } => {
            assert_eq!(*kind_capped, CappedKind::Tree);
            assert_eq!(*said, budget);
            assert!(message.contains("--max-output"), "{message}");
            assert!(message.contains("64.0 KiB"), "{message}");
        }
        other => panic!("not events_capped: {other:?}"),
    }
    // Nothing more, not even the empty tree at the end.
    assert_eq!(recorder.close(), None);
}

#[test]
fn the_empty_tree_at_the_end() {
    let mut recorder = TreeRecorder::new(MAX_TREE_BUDGET);
    assert_eq!(recorder.close(), None, "nothing recorded, nothing to close");
    processes(recorder.update(&[proc(100, 1, 5)], 100, details));
    assert_eq!(processes(recorder.close()), []);
}

#[test]
fn the_budget_follows_max_output_within_bounds() {
    assert_eq!(tree_budget(1024), MIN_TREE_BUDGET);
    assert_eq!(tree_budget(10 << 20), 10 << 20);
    assert_eq!(
        tree_budget(tether_protocol::protocol::DEFAULT_MAX_OUTPUT),
        MAX_TREE_BUDGET
    );
    assert!(capped_message(MAX_TREE_BUDGET).contains("the most tether records"));
}

#[test]
fn command_lines_within_the_cap_are_whole() {
    let argv = vec!["a".repeat(ARGV_CAP - 1), "b".into()];
    assert_eq!(capped_argv(argv.clone()), argv);
    assert_eq!(capped_argv(Vec::new()), [] as [String; 0]);
}

#[test]
fn a_cut_falls_on_a_character_boundary_and_drops_what_is_empty() {
    // 2-byte characters: the cap falls in the middle of one, which is left out whole.
    let argv = vec!["x".repeat(ARGV_CAP - 1), "éé".into(), "rest".into()];
    let cut = capped_argv(argv);
    assert_eq!(cut.len(), 2, "{cut:?}");
    assert_eq!(cut[0].len(), ARGV_CAP - 1);
    assert!(cut[1].starts_with(ARGV_CUT_MARK), "{cut:?}");
    assert!(cut[1].contains(" 8 more bytes"), "{cut:?}");
}

#[test]
fn a_command_line_not_read_is_read_again_in_the_next_tree() {
    let mut recorder = TreeRecorder::new(MAX_TREE_BUDGET);
    // The walk's deadline passed before the child's command line was read (or it was a
    // zombie's, which reads empty): nothing of it is in the first tree.
    let mut unread = |p: &ProcStat| {
        if p.pid == 101 {
            (Vec::new(), p.start_ticks * 10)
        } else {
            details(p)
        }
    };
    let (sh, child) = (proc(100, 1, 5), proc(101, 100, 7));
    let first = processes(recorder.update(&[sh, child], 100, &mut unread));
    assert_eq!(argv_of(&first, 101), [] as [String; 0]);

    let second = processes(recorder.update(&[sh, child, proc(102, 100, 9)], 100, &mut details));
    assert_eq!(argv_of(&second, 101), ["prog101", "101"], "read again");
    assert_eq!(argv_of(&second, 100), [] as [String; 0], "already recorded");
    assert_eq!(second[1].start_ms, 70, "the same identity as before");

    let third = processes(recorder.update(&[sh, child], 100, &mut details));
    assert_eq!(
        argv_of(&third, 101),
        [] as [String; 0],
        "recorded once read"
    );
}

/// `process` once it has exec'd `comm`: same pid and start time, another name and address
/// space.
fn execed(process: ProcStat, comm: &str, code_start: u64) -> ProcStat {
    ProcStat {
        image: ProcessImage::new(comm.as_bytes(), code_start, code_start + 1),
        ..process
    }
}

/// Process details with the command line `argv`, counted in `reads`.
fn command_line<'a>(
    argv: &'a [&str],
    reads: &'a std::cell::Cell<usize>,
) -> impl FnMut(&ProcStat) -> (Vec<String>, u64) + 'a {
    move |p| {
        reads.set(reads.get() + 1);
        (
            argv.iter().map(|a| a.to_string()).collect(),
            p.start_ticks * 10,
        )
    }
}

#[test]
fn a_process_that_execs_is_recorded_again_with_its_new_command_line() {
    let mut recorder = TreeRecorder::new(MAX_TREE_BUDGET);
    let reads = std::cell::Cell::new(0);
    let pyenv = command_line(
        &["bash", "/root/.pyenv/libexec/pyenv-exec", "python3"],
        &reads,
    );
    let sh = execed(proc(100, 1, 5), "pyenv-exec", 1);
    let first = processes(recorder.update(&[sh], 100, pyenv));
    assert_eq!(argv_of(&first, 100)[1], "/root/.pyenv/libexec/pyenv-exec");

    // Looked at again while it still runs the same program: nothing new, nothing read.
    let python = [
        "/root/.pyenv/versions/3.11.7/bin/python3",
        "-m",
        "http.server",
    ];
    assert_eq!(
        recorder.update(&[sh], 100, command_line(&python, &reads)),
        None
    );
    assert_eq!(
        reads.get(),
        1,
        "a known program's command line is not read again"
    );

    // It execs python3: the tree lists it again with the new command line, once.
    let server = execed(sh, "python3", 2);
    let second = processes(recorder.update(&[server], 100, command_line(&python, &reads)));
    assert_eq!(argv_of(&second, 100), python);
    assert_eq!(second[0].start_ms, 50, "the same identity as before");
    let looked = recorder.update(&[server], 100, command_line(&python, &reads));
    assert_eq!(looked, None);

    // The same name again (a shim named python3 that execs python3): a new address space.
    let again = execed(sh, "python3", 3);
    let port = ["python3", "-m", "http.server", "8000"];
    let third = processes(recorder.update(&[again], 100, command_line(&port, &reads)));
    assert_eq!(argv_of(&third, 100), port);
}

#[test]
fn a_new_image_with_the_same_command_line_or_none_read_records_nothing() {
    let mut recorder = TreeRecorder::new(MAX_TREE_BUDGET);
    let worker = execed(proc(100, 1, 5), "worker", 1);
    processes(recorder.update(&[worker], 100, details));
    // It renamed itself (prctl): its command line reads as before.
    let renamed = execed(worker, "worker: idle", 1);
    assert_eq!(recorder.update(&[renamed], 100, details), None);
    // It exec'd, but its command line could not be read: nothing now, read at the next tree.
    let other = execed(worker, "other", 2);
    let unread = |p: &ProcStat| (Vec::new(), p.start_ticks * 10);
    assert_eq!(recorder.update(&[other], 100, unread), None);
    let new_argv = |p: &ProcStat| (vec!["other".to_string()], p.start_ticks * 10);
    let tree = processes(recorder.update(&[other], 100, new_argv));
    assert_eq!(argv_of(&tree, 100), ["other"]);
    // A zombie's image is empty: that is no exec.
    let zombie = ProcStat {
        state: b'Z',
        image: ProcessImage::default(),
        ..other
    };
    assert_eq!(recorder.update(&[zombie], 100, new_argv), None);
}
