//! One pass over every `/proc/PID/stat`, keeping the command name as well as the fields
//! `procfs` parses: the name is what tells the sampler that a process has exec'd.
//!
//! This is `procfs::all_processes` plus the name, with one reusable buffer and no metadata
//! calls, since it runs over every process on the machine once a second.

use std::fs::File;
use std::io::Read;

use crate::procfs::{self, ProcStat};

pub(super) struct ScannedProcess {
    pub stat: ProcStat,
    /// `comm`: at most 15 bytes of the executable's name.
    pub comm: String,
}

pub(super) fn all_processes() -> Vec<ScannedProcess> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut buffer = Vec::with_capacity(1024);
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| read(pid, &mut buffer))
        .collect()
}

fn read(pid: i32, buffer: &mut Vec<u8>) -> Option<ScannedProcess> {
    let mut file = File::open(format!("/proc/{pid}/stat")).ok()?;
    buffer.clear();
    let mut chunk = [0u8; 1024];
    loop {
        match file.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => buffer.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            // The process exited between listing and reading.
            Err(_) => return None,
        }
    }
    let text = String::from_utf8_lossy(buffer);
    parse(&text)
}

fn parse(text: &str) -> Option<ScannedProcess> {
    let stat = procfs::parse_stat(text)?;
    let comm = text.get(text.find('(')? + 1..text.rfind(')')?)?.to_string();
    Some(ScannedProcess { stat, comm })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_names_with_spaces_and_parens() {
        let line = "4242 (evil) (name) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 50";
        let p = parse(line).unwrap();
        assert_eq!(p.comm, "evil) (name");
        assert_eq!((p.stat.pid, p.stat.start_ticks), (4242, 987654));
        assert!(parse("garbage").is_none());
    }

    #[test]
    fn finds_this_process() {
        let me = std::process::id() as i32;
        let all = all_processes();
        let mine = all.iter().find(|p| p.stat.pid == me).unwrap();
        let fresh = procfs::read_stat(me).unwrap();
        assert_eq!(
            (mine.stat.ppid, mine.stat.pgid, mine.stat.start_ticks),
            (fresh.ppid, fresh.pgid, fresh.start_ticks)
        );
        assert!(!mine.comm.is_empty());
    }
}
