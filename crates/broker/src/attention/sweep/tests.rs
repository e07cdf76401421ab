//! The sweep on both listers, in a forked stand-in for the keeper (the test harness has
//! children of other tests; only a process of our own may have all its children killed).

use super::*;

/// Reads exactly `buf.len()` bytes from `fd`: false at end of file or on an error.
unsafe fn read_exact(fd: i32, buf: &mut [u8]) -> bool {
    let mut at = 0;
    while at < buf.len() {
        // SAFETY: read writes only into the rest of `buf`.
        let n = unsafe { libc::read(fd, buf[at..].as_mut_ptr().cast(), buf.len() - at) };
        if n > 0 {
            at += n as usize;
        } else if n < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
            continue;
        } else {
            return false;
        }
    }
    true
}

/// Writes its own pid to `fd`, then waits for a signal for good. Raw system calls only.
unsafe fn report_and_pause(fd: i32) -> ! {
    // SAFETY: raw system calls in a forked child.
    unsafe {
        let pid = libc::getpid().to_ne_bytes();
        libc::write(fd, pid.as_ptr().cast(), pid.len());
        loop {
            libc::pause();
        }
    }
}

/// A tree like a notify run's leftovers under a subreaper stand-in, swept with `lister`:
/// a child that pauses, and two of its own, one in a session of its own (`setsid`), which
/// come to the stand-in only once their parent is killed. Returns whether the sweep said it
/// swept, and the three pids.
fn sweep_a_tree(lister: ChildLister) -> (bool, [i32; 3]) {
    let mut ready = [0i32; 2];
    let mut result = [0i32; 2];
    // SAFETY: pipe2 writes two descriptors into each array.
    unsafe {
        assert_eq!(libc::pipe2(ready.as_mut_ptr(), libc::O_CLOEXEC), 0);
        assert_eq!(libc::pipe2(result.as_mut_ptr(), libc::O_CLOEXEC), 0);
    }
    // SAFETY: the child runs raw system calls only (the harness has other threads), on
    // buffers of its own frame, and ends in _exit.
    let stand_in = unsafe { libc::fork() };
    assert!(stand_in >= 0, "fork: {}", std::io::Error::last_os_error());
    if stand_in == 0 {
        // SAFETY: as above.
        unsafe {
            libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
            if libc::fork() == 0 {
                if libc::fork() == 0 {
                    libc::setsid();
                    report_and_pause(ready[1]);
                }
                if libc::fork() == 0 {
                    report_and_pause(ready[1]);
                }
                report_and_pause(ready[1]);
            }
            let mut pids = [0u8; 12];
            if !read_exact(ready[0], &mut pids) {
                libc::_exit(2);
            }
            let swept = sweep_descendants(lister);
            let mut out = [0u8; 13];
            out[0] = u8::from(swept);
            out[1..].copy_from_slice(&pids);
            libc::write(result[1], out.as_ptr().cast(), out.len());
            libc::_exit(0);
        }
    }
    // SAFETY: closing our copies of the ends the stand-in writes.
    unsafe {
        libc::close(ready[1]);
        libc::close(result[1]);
    }
    let mut out = [0u8; 13];
    // SAFETY: reads into `out`.
    let complete = unsafe { read_exact(result[0], &mut out) };
    let mut status = 0;
    // SAFETY: waits for our own child.
    unsafe {
        libc::waitpid(stand_in, &mut status, 0);
        libc::close(ready[0]);
        libc::close(result[0]);
    }
    assert!(
        complete,
        "the stand-in ended without a result: status {status}"
    );
    let pid_at = |i: usize| i32::from_ne_bytes(out[1 + 4 * i..5 + 4 * i].try_into().unwrap());
    (out[0] == 1, [pid_at(0), pid_at(1), pid_at(2)])
}

/// Whether `pid` is gone (or a zombie nobody reaps).
fn gone(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => StatFields::split(&stat)
            .and_then(|fields| fields.state())
            .is_some_and(|state| matches!(state, b'Z' | b'X')),
    }
}

#[test]
fn the_proc_scan_sweeps_a_whole_tree_a_setsid_escapee_too() {
    let (swept, pids) = sweep_a_tree(ChildLister::ProcScan);
    assert!(swept, "the sweep gave up");
    for pid in pids {
        assert!(gone(pid), "pid {pid} outlived the sweep");
    }
}

#[test]
fn the_children_file_sweeps_the_same_tree() {
    let (swept, pids) = sweep_a_tree(ChildLister::ChildrenFile);
    assert!(swept, "the sweep gave up");
    for pid in pids {
        assert!(gone(pid), "pid {pid} outlived the sweep");
    }
}

#[test]
fn a_stat_line_names_a_child_and_whether_it_ended() {
    let line = |state: &str, ppid: i32, threads: u32| {
        // Fields 3 (the state) to 20 (the thread count).
        let mut fields = vec!["0"; 18];
        fields[0] = state;
        let ppid = ppid.to_string();
        fields[1] = &ppid;
        let threads = threads.to_string();
        fields[17] = &threads;
        format!("42 (a) name) {}", fields.join(" ")).into_bytes()
    };
    assert_eq!(found_in_stat(&line("S", 7, 1), 7), Some(Found::Running));
    assert_eq!(found_in_stat(&line("S", 8, 1), 7), None);
    assert_eq!(found_in_stat(&line("Z", 7, 1), 7), Some(Found::Ended));
    // A zombie leader whose other threads still run has not ended.
    assert_eq!(found_in_stat(&line("Z", 7, 3), 7), Some(Found::Running));
    // A name that is not UTF-8 does not hide the parent.
    let mut odd = b"42 (\xff\xfe) ".to_vec();
    odd.extend_from_slice(&line("S", 7, 1)[b"42 (a) name) ".len()..]);
    assert_eq!(found_in_stat(&odd, 7), Some(Found::Running));
}

#[test]
fn dirents_are_read_by_their_record_length() {
    let mut records = Vec::new();
    for name in [&b"123"[..], b"self"] {
        let mut record = vec![0u8; 19];
        record.extend_from_slice(name);
        record.push(0);
        while !record.len().is_multiple_of(8) {
            record.push(0);
        }
        let len = record.len() as u16;
        record[16..18].copy_from_slice(&len.to_ne_bytes());
        records.extend_from_slice(&record);
    }
    let (first, len) = first_dirent(&records).unwrap();
    assert_eq!((first, pid_named(first)), (&b"123"[..], Some(123)));
    let (second, _) = first_dirent(&records[len..]).unwrap();
    assert_eq!((second, pid_named(second)), (&b"self"[..], None));
    assert_eq!(first_dirent(&records[..10]), None);
}
