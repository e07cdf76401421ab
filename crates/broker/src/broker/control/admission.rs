//! Who gets a control connection. The socket is reachable from inside the command (it may
//! read `command.json`), so the command must not be able to fill it and keep the operator's
//! `tether stop` out: the command's own processes share one small quota, every other peer
//! has a cap of its own, and a few slots past the general limit are kept for a peer's first
//! connection, which is what a `tether stop`, `kill` or `signal` is.

use tether_os::procfs;

/// Connections at once in the general pool.
pub(super) const MAX_CLIENTS: usize = 32;
/// Connections all of the command's own processes may hold together.
pub(super) const COMMAND_CLIENTS: usize = 4;
/// Connections one other peer (by pid) may hold.
pub(super) const CLIENTS_PER_PEER: usize = 8;
/// Slots past [`MAX_CLIENTS`] for a peer outside the command that holds none yet.
pub(super) const RESERVED_CLIENTS: usize = 8;
/// Parents followed up from a peer before giving up on finding the broker.
const ANCESTRY_LIMIT: usize = 4096;

/// Whose share a connection counts against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Quota {
    /// The command's tree: a descendant of the broker, or a peer that cannot be shown not
    /// to be one (gone already, or in a PID namespace the broker cannot see: pid 0).
    Command,
    /// Any other process of the user, by pid.
    Peer(i32),
}

impl Quota {
    /// The quota of the process `pid` for the broker `broker`, from /proc.
    pub(super) fn of(pid: i32, broker: i32) -> Quota {
        Quota::by_ancestry(pid, broker, |p| procfs::read_stat(p).map(|s| s.ppid))
    }

    /// Follows `parent_of` up from `pid`. The broker is a child subreaper, so every process
    /// the command starts stays its descendant, however it forks or daemonizes.
    fn by_ancestry(pid: i32, broker: i32, parent_of: impl Fn(i32) -> Option<i32>) -> Quota {
        if pid <= 0 {
            return Quota::Command;
        }
        let mut at = pid;
        for _ in 0..ANCESTRY_LIMIT {
            // A peer already gone may have handed its connection on: it counts as the
            // command's, the stricter share.
            let Some(parent) = parent_of(at) else {
                return Quota::Command;
            };
            if parent == broker {
                return Quota::Command;
            }
            if parent <= 1 {
                return Quota::Peer(pid);
            }
            at = parent;
        }
        Quota::Command
    }
}

/// Why a connection is refused: the message the peer is sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Full(pub(super) String);

/// Whether a connection of quota `new` may join `held` (the quotas of the connections
/// there now).
pub(super) fn admit(held: impl Iterator<Item = Quota>, new: Quota) -> Result<(), Full> {
    let (mut total, mut same) = (0, 0);
    for quota in held {
        total += 1;
        same += usize::from(quota == new);
    }
    match new {
        Quota::Command if same >= COMMAND_CLIENTS => {
            return Err(Full(format!(
                "the command's own processes already hold {COMMAND_CLIENTS} control connections, all they may; close one first"
            )));
        }
        Quota::Peer(pid) if same >= CLIENTS_PER_PEER => {
            return Err(Full(format!(
                "pid {pid} already holds {CLIENTS_PER_PEER} control connections, all one process may; close one first"
            )));
        }
        _ => {}
    }
    let reserved = matches!(new, Quota::Peer(_)) && same == 0;
    if total < MAX_CLIENTS || (reserved && total < MAX_CLIENTS + RESERVED_CLIENTS) {
        Ok(())
    } else {
        Err(Full(format!(
            "this broker already has {total} control clients; try again when one has gone"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 1 ← 50 (front end) ← 100 (broker) ← 200 ← 300; 60 is another process of the user.
    fn parent_of(pid: i32) -> Option<i32> {
        match pid {
            300 => Some(200),
            200 => Some(100),
            100 => Some(50),
            50 | 60 => Some(1),
            _ => None,
        }
    }

    #[test]
    fn descendants_of_the_broker_and_unknown_peers_are_the_commands() {
        let quota = |pid| Quota::by_ancestry(pid, 100, parent_of);
        assert_eq!(quota(300), Quota::Command);
        assert_eq!(quota(200), Quota::Command);
        assert_eq!(
            quota(50),
            Quota::Peer(50),
            "the front end is not the command"
        );
        assert_eq!(quota(60), Quota::Peer(60));
        assert_eq!(quota(999), Quota::Command, "a peer already gone");
        assert_eq!(quota(0), Quota::Command, "a peer in an unseen namespace");
    }

    #[test]
    fn the_command_cannot_take_more_than_its_share_nor_keep_an_operator_out() {
        let command = [Quota::Command; COMMAND_CLIENTS];
        assert!(admit(command.iter().copied(), Quota::Command).is_err());
        assert_eq!(admit(command.iter().copied(), Quota::Peer(7)), Ok(()));

        let one_peer = [Quota::Peer(7); CLIENTS_PER_PEER];
        assert!(admit(one_peer.iter().copied(), Quota::Peer(7)).is_err());
        assert_eq!(admit(one_peer.iter().copied(), Quota::Peer(8)), Ok(()));

        // The general pool full of other peers: a newcomer's first connection still gets
        // in, its second does not, nor does the command's.
        let full: Vec<Quota> = (0..MAX_CLIENTS as i32)
            .map(|i| Quota::Peer(i / 4))
            .collect();
        assert_eq!(admit(full.iter().copied(), Quota::Peer(1000)), Ok(()));
        let mut more = full.clone();
        more.push(Quota::Peer(1000));
        assert!(admit(more.iter().copied(), Quota::Peer(1000)).is_err());
        assert!(admit(full.iter().copied(), Quota::Command).is_err());
        let brim: Vec<Quota> = (0..(MAX_CLIENTS + RESERVED_CLIENTS) as i32)
            .map(Quota::Peer)
            .collect();
        assert!(admit(brim.iter().copied(), Quota::Peer(5000)).is_err());
    }
}
