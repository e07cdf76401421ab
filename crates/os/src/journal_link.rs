//! A broker's link to its journal in the socket directory: `<pid>-<start ticks>.journal`, a
//! symbolic link to the command's journal directory, made when the broker starts and removed
//! when it ends. A broker SIGKILLed leaves its link: the short list of brokers that may have
//! left something running, which a later tether reads without walking every session (see
//! `supervisor::abandoned`).

use std::path::{Path, PathBuf};

use crate::socket_dir;
use tether_protocol::protocol::BrokerIdentity;

const SUFFIX: &str = ".journal";

fn link_path(dir: &Path, broker: &BrokerIdentity) -> PathBuf {
    dir.join(format!("{}{SUFFIX}", broker.label()))
}

/// The broker `broker` journals in `journal`: links it from the socket directory (made and
/// checked as for sockets). A failure only means a later tether will not find this journal
/// if the broker is killed; the command runs all the same.
pub fn create(broker: &BrokerIdentity, journal: &Path) -> std::io::Result<()> {
    let dir = socket_dir::socket_dir();
    socket_dir::prepare(&dir).map_err(std::io::Error::other)?;
    let link = link_path(&dir, broker);
    // One left by a broker of the same pid and start time (another boot) is not ours now.
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(journal, link)
}

/// Removes the link of `broker`; its journal is complete (or someone took it over).
pub fn remove(broker: &BrokerIdentity) {
    let _ = std::fs::remove_file(link_path(&socket_dir::socket_dir(), broker));
}

/// The broker a link's file name names.
fn parse(name: &str) -> Option<BrokerIdentity> {
    BrokerIdentity::from_label(name.strip_suffix(SUFFIX)?)
}

/// Whether the socket directory's entry `names` (one listing, see
/// [`socket_dir::entry_names`]) hold any broker's link at all, dead or alive: no `/proc` read.
/// Without one there is nothing to reclaim, and no thread is started to look (the shim's
/// calls one after the other find it empty: each broker removes its link).
pub fn any_in(names: &[String]) -> bool {
    names.iter().any(|name| parse(name).is_some())
}

/// The links of brokers that no longer run, with the journal each names: one listing of the
/// socket directory (only if it is fit: ours, 0700) and one `/proc` read per link.
pub fn of_dead_brokers() -> Vec<(BrokerIdentity, PathBuf)> {
    let dir = socket_dir::socket_dir();
    if socket_dir::check(&dir).is_err() {
        return Vec::new();
    }
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let broker = parse(entry.file_name().to_str()?)?;
            if crate::procfs::broker_alive(&broker) {
                return None;
            }
            let journal = std::fs::read_link(entry.path()).ok()?;
            Some((broker, journal))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_names_its_broker() {
        let broker = BrokerIdentity {
            pid: 4242,
            start_ticks: 99,
        };
        let path = link_path(Path::new("/run/t"), &broker);
        assert_eq!(path, Path::new("/run/t/4242-99.journal"));
        assert_eq!(parse("4242-99.journal"), Some(broker));
        for other in [
            "4242-99.sock",
            "4242.journal",
            "x-1.journal",
            "4242-99.2.sock",
        ] {
            assert_eq!(parse(other), None, "{other}");
        }
    }
}
