//! One pass over every `/proc/PID/stat`: the fields `procfs` parses (the CPU time and
//! resident size among them), plus the command name (it changes on exec, which tells the
//! argv cache when to read again), so that a sample reads each process's `stat` exactly once.
//!
//! It runs over every process on the machine once a second, through `procfs`'s one reader
//! (one `read` into a reused buffer).

use crate::procfs::{self, ProcStat};

pub(super) struct ScannedProcess {
    pub stat: ProcStat,
    /// `comm`: at most 15 bytes of the executable's name.
    pub comm: String,
}

pub(super) fn all_processes() -> Vec<ScannedProcess> {
    let mut buffer = vec![0u8; 4096];
    procfs::pids()
        .into_iter()
        .filter_map(|pid| parse(&procfs::read_stat_text(pid, &mut buffer)?))
        .collect()
}

fn parse(text: &str) -> Option<ScannedProcess> {
    let fields = procfs::StatFields::split(text)?;
    Some(ScannedProcess {
        stat: fields.to_stat()?,
        comm: fields.comm.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_names_with_spaces_and_parens_and_the_usage_fields() {
        let line = "4242 (evil) (name) S 1 4242 4242 0 -1 4194560 100 0 0 0 17 25 0 0 20 0 1 0 987654 1000 50 18446744073709551615";
        let p = parse(line).unwrap();
        assert_eq!(p.comm, "evil) (name");
        assert_eq!((p.stat.pid, p.stat.start_ticks), (4242, 987654));
        assert_eq!((p.stat.cpu_ticks, p.stat.rss_pages), (42, 50));
        assert!(parse("garbage").is_none());
        assert!(
            parse("1 (x) S 0 1 1 0 -1 0 0 0 0 0 1").is_none(),
            "truncated"
        );
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
        assert!(mine.stat.rss_pages > 0);
    }
}
