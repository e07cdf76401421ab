//! A process as the broker's decisions see it: the fields of its `/proc/PID/stat` (read by
//! the OS layer's `procfs`), and the key that names it for good.

/// The fields of `/proc/PID/stat` that tether uses.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProcStat {
    pub pid: i32,
    pub ppid: i32,
    pub pgid: i32,
    pub sid: i32,
    /// `R`, `S`, `D`, `Z`, `T`, ...
    pub state: u8,
    /// Start time in clock ticks after boot: with the pid, it names one process for good.
    pub start_ticks: u64,
    /// CPU time it used so far, user and system (`utime` + `stime`), in clock ticks.
    pub cpu_ticks: u64,
    /// CPU time of the children it waited for (`cutime` + `cstime`), in clock ticks: what
    /// the tree used in processes that ended below a live one.
    pub waited_cpu_ticks: u64,
    /// Resident memory now, in pages.
    pub rss_pages: u64,
    /// The program it runs, as far as its `stat` tells: an exec changes it, a fork does not.
    pub image: ProcessImage,
}

/// What a process's `stat` says of the program it runs: its name (`comm`, at most 15 bytes
/// of the executable's file name) and where its code and stack begin (`startcode`,
/// `startstack`). An `execve` keeps the pid and the start time but gives a new name (the new
/// file's), and a new address space: with address randomisation (the kernel's default),
/// even the same program again begins its stack elsewhere. So a process whose image changed
/// may run another command line, which is read again; nothing else makes the addresses
/// move, and a name changed by the program itself (`prctl(PR_SET_NAME)`), or an exec caught
/// half done (the name comes first, the code's address last), costs one read of a command
/// line found unchanged or not readable yet. A zombie has no address space (both read 0); a
/// process tether may not inspect shows 1 and 0, so only its name tells.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProcessImage {
    /// `comm`'s bytes, zero-padded.
    pub comm: [u8; 16],
    pub code_start: u64,
    pub stack_start: u64,
}

impl ProcessImage {
    /// The image of a process named `comm` (cut to 16 bytes), its code and stack at
    /// `code_start` and `stack_start`.
    pub fn new(comm: &[u8], code_start: u64, stack_start: u64) -> ProcessImage {
        let mut name = [0; 16];
        let len = comm.len().min(name.len());
        name[..len].copy_from_slice(&comm[..len]);
        ProcessImage {
            comm: name,
            code_start,
            stack_start,
        }
    }
}

impl ProcStat {
    pub fn is_zombie(&self) -> bool {
        self.state == b'Z' || self.state == b'X'
    }

    /// For tests: a sleeping process `pid`, child of `ppid`, leading its own group and
    /// session.
    pub fn leader(pid: i32, ppid: i32) -> ProcStat {
        ProcStat {
            pid,
            ppid,
            pgid: pid,
            sid: pid,
            state: b'S',
            ..ProcStat::default()
        }
    }
}

/// The identity of a process that outlives pid reuse: its pid and start time.
pub type ProcessKey = (i32, u64);

pub fn key(stat: &ProcStat) -> ProcessKey {
    (stat.pid, stat.start_ticks)
}

/// A command's cgroup as the broker's decisions know it: what names it. The OS layer holds
/// the handle (its open descriptors) and does what the decisions ask of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupId {
    /// Its directory's name (`tether.SESSION.NN-NAME.PID-N`).
    pub name: String,
    /// Its directory, for the journal's words.
    pub path: std::path::PathBuf,
}

/// Which processes a signal or a look at the tree reaches, as data: every descendant of
/// `root` but the subtrees rooted at `pruned`, or, `in_cgroup`, the members of the command's
/// cgroup (the OS layer's `signaller::Walk` takes it with the cgroup's handle).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeWalk {
    pub root: i32,
    pub pruned: Vec<i32>,
    pub in_cgroup: bool,
    /// What a recent walk found, taken instead of walking /proc again.
    pub known: Option<Vec<ProcStat>>,
}

impl TreeWalk {
    /// Every descendant of `root`.
    pub fn below(root: i32) -> TreeWalk {
        TreeWalk {
            root,
            pruned: Vec::new(),
            in_cgroup: false,
            known: None,
        }
    }
}

/// Whether a process in group `pgid` and session `sid` escaped the command whose group is
/// `group`: it left both (see [`is_escaped`] for why both). The one rule of the
/// journal's tree and the live tree pane.
pub fn escaped(pgid: i32, sid: i32, group: i32) -> bool {
    pgid != group && sid != group
}

/// Whether a process left the command's process group *and* its session. With a terminal
/// the command leads a session of its own (its id is the group's), and a process in another
/// group of that session is one of its jobs (an interactive shell's job control puts every
/// pipeline in a group of its own), not an escapee: it still hangs up with the terminal, and
/// the stop's walk reaches it anyway. With pipes the command shares the broker's session, so
/// leaving the group is escaping, as before.
pub fn is_escaped(process: &ProcStat, group: i32) -> bool {
    escaped(process.pgid, process.sid, group)
}
