//! tether-os: everything tether asks of the kernel and the disk. Processes read from /proc
//! (`procfs`) and sampled on their own thread (`sampler`), cgroup v2 containment (`cgroup`),
//! non-blocking pipe ends under tokio (`fdio`), the calls several parts share: random bytes,
//! signals, leaving at once (`sys`), the wall clock as the journal records it (`clock`), and
//! the journal's files: written, read back, watched (`journal`). In the state directory also:
//! the brokers' private socket directory (`socket_dir`) and their links to their journals
//! (`journal_link`); a shims directory made and recognised (`shims`). And for the tests of
//! every crate: what a test does when it cannot run here (`testing`).
//!
//! The layer above tether-core and the protocol, below the config, the model, the broker and
//! the front ends: it may depend on tether-protocol (the messages and units it reads and
//! writes), tether-core (the data it fills: `ProcStat`), nix, rustix, libc, tokio, serde and
//! thiserror; never on a crate above it (config, model, broker, front ends, the TUI, the
//! binary), nor on ratatui or crossterm. nix makes the system calls; rustix only those nix lacks (pidfds,
//! getrandom, a directory read through a borrowed descriptor); libc only what neither has.

pub mod cgroup;
pub mod clock;
pub mod fdio;
pub mod journal;
pub mod journal_link;
pub mod procfs;
pub mod sampler;
pub mod shims;
pub mod signal_pipe;
pub mod socket_dir;
pub mod sys;
pub mod testing;
