//! Per-process sampling: tether's own /proc reader against sysinfo's process refresh, for
//! the same tree of processes. `cargo bench --bench sysinfo_vs_proc [-- COUNT]` (default
//! 1,000 processes). Prints figures; asserts nothing.
//!
//! Both read every process on the machine once per sample (a tree is found from the whole
//! table); each is given a warm-up round, then the median of 10 rounds is printed. The
//! sysinfo refresh asks for what the tree pane shows: CPU, memory and the command line
//! (read once). This is why `Sampler` reads /proc itself and sysinfo only reads the
//! machine's totals (src/sampler/machine.rs). The open-files limit is printed around the
//! sysinfo refresh too: it raises the soft limit to the hard one, which the TUI must not
//! pass on to the commands it launches.

use std::os::unix::process::CommandExt;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use sysinfo::{ProcessRefreshKind, ProcessesToUpdate, System, UpdateKind};
use tether::sampler::Sampler;
use tether::sampler::machine::open_files_limit;

fn main() {
    let count: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(1000);
    let mut tree = spawn_tree(count);
    let root = tree.id() as i32;
    let mut sampler = Sampler::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut seen = 0;
    while Instant::now() < deadline {
        seen = sampler.sample(&[root]).trees.get(&root).map_or(0, Vec::len);
        if seen > count {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    println!(
        "== per-process sampling: a tree of {seen} processes, {} on the machine (median of 10)",
        sampler.processes()
    );

    let proc_ms = median_ms(|| {
        let snapshot = sampler.sample(&[root]);
        std::hint::black_box(snapshot);
    });
    println!("tether /proc reader (Sampler::sample): {proc_ms:.1} ms");

    // A soft limit below the hard one, as on most desktops, so that a raise shows.
    if let Some((soft, hard)) = open_files_limit() {
        use nix::sys::resource::{Resource, setrlimit};
        // Lowering the soft limit is always allowed.
        let _ = setrlimit(Resource::RLIMIT_NOFILE, soft.min(1024), hard);
    }
    let before = open_files_limit();
    let mut system = System::new();
    let what = ProcessRefreshKind::nothing()
        .with_cpu()
        .with_memory()
        .with_cmd(UpdateKind::OnlyIfNotSet);
    let sysinfo_ms = median_ms(|| {
        system.refresh_processes_specifics(ProcessesToUpdate::All, true, what);
        std::hint::black_box(system.processes().len());
    });
    println!("sysinfo refresh_processes_specifics(cpu, memory, cmd): {sysinfo_ms:.1} ms");
    println!(
        "open-files limit (soft, hard) before sysinfo's process refresh: {before:?}, after: {:?}",
        open_files_limit()
    );

    // The whole group: the shell and every sleep.
    let _ = nix::sys::signal::killpg(
        nix::unistd::Pid::from_raw(root),
        nix::sys::signal::Signal::SIGKILL,
    );
    let _ = tree.wait();
}

/// A shell in its own process group with `count` sleeping children.
fn spawn_tree(count: usize) -> Child {
    Command::new("sh")
        .arg("-c")
        .arg(format!(
            "i=0; while [ $i -lt {count} ]; do sleep 600 & i=$((i+1)); done; wait"
        ))
        .process_group(0)
        .spawn()
        .expect("start sh")
}

fn median_ms(mut round: impl FnMut()) -> f64 {
    round();
    let mut times: Vec<f64> = (0..10)
        .map(|_| {
            let start = Instant::now();
            round();
            start.elapsed().as_secs_f64() * 1000.0
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}
