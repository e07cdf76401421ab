//! What the command's tree cost: the figures are weighed in tether-core ([`command_cost`],
//! [`SampledCost`]); the broker's own `RUSAGE_CHILDREN` is read here.

pub use tether_core::cost::*;

/// The broker's `RUSAGE_CHILDREN`: (CPU milliseconds, largest RSS in bytes); zeros if the
/// call fails (it cannot, for this process).
pub fn children_usage() -> (u64, u64) {
    use nix::sys::resource::{UsageWho, getrusage};
    use nix::sys::time::TimeVal;
    let Ok(usage) = getrusage(UsageWho::RUSAGE_CHILDREN) else {
        return (0, 0);
    };
    let ms = |t: TimeVal| t.tv_sec() as u64 * 1000 + t.tv_usec() as u64 / 1000;
    (
        ms(usage.user_time()) + ms(usage.system_time()),
        // Kilobytes on Linux.
        usage.max_rss().max(0) as u64 * 1024,
    )
}
