//! Whose doing a command's end was: a person's (the operator with a key, `tether
//! stop|kill|signal` or by quitting the TUI; an agent passing a signal on through the shell
//! shim) or the command's own. One rule for the broker, which tells no `failed` of an end that
//! was theirs, and for every view, which words that end `stopped` and counts it so.

use crate::protocol::{ExitStatus, Origin, ProcessSignal};

/// A stop or signal asked for by a person: the operator (a key, `tether stop`, quitting the
/// TUI, which stops everything with origin `shutdown`), or the agent through the shim.
pub fn by_hand(origin: Origin) -> bool {
    matches!(origin, Origin::Operator | Origin::Caller | Origin::Shutdown)
}

/// The signals that end a process (TERM, KILL, INT, HUP, QUIT) a person sent a command
/// before it ended, and whether its end was therefore theirs.
///
/// One sent to the command (its group, or its main process) makes any end theirs: a main
/// process that traps TERM and exits 1 was still stopped. One sent to another process of
/// the tree makes it theirs only when the end carries it: the main process died of that
/// signal, or exited 128 + its number, as a shell does when the child it waits for died of
/// it (`x` on a server's python under `sh -c`: exit 143). A HUP that reloads a worker, and a
/// failure of the command long after, stays the command's own.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SignalsByHand {
    to_command: bool,
    /// Sent to other processes of the tree, each once.
    to_others: Vec<ProcessSignal>,
}

impl SignalsByHand {
    /// `signal`, from `origin`, reached the command (`to_command`: its group or its main
    /// process) or another process of its tree, before the command ended.
    pub fn sent(&mut self, origin: Origin, signal: ProcessSignal, to_command: bool) {
        if !by_hand(origin) || !signal.ends_by_hand() {
            return;
        }
        if to_command {
            self.to_command = true;
        } else if !self.to_others.contains(&signal) {
            self.to_others.push(signal);
        }
    }

    /// Whether the main process's end, with `status`, was the doing of whoever sent them.
    pub fn ended_it(&self, status: ExitStatus) -> bool {
        self.to_command
            || self.to_others.iter().any(|signal| {
                let n = signal.number();
                status.signal == Some(n) || status.code == Some(128 + n)
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exit(code: Option<i32>, signal: Option<i32>) -> ExitStatus {
        ExitStatus {
            code,
            signal,
            core_dumped: false,
        }
    }

    #[test]
    fn a_signal_to_the_command_makes_any_end_theirs() {
        let mut sent = SignalsByHand::default();
        assert!(!sent.ended_it(exit(Some(1), None)));
        sent.sent(Origin::Operator, ProcessSignal::TERM, true);
        for status in [
            exit(Some(1), None),
            exit(Some(0), None),
            exit(None, Some(15)),
        ] {
            assert!(sent.ended_it(status), "{status:?}");
        }
    }

    #[test]
    fn a_signal_to_a_worker_makes_the_end_theirs_only_when_the_end_carries_it() {
        let mut sent = SignalsByHand::default();
        sent.sent(Origin::Operator, ProcessSignal::TERM, false);
        // The shell that waited for it says how its child died; or it died of it itself.
        assert!(sent.ended_it(exit(Some(143), None)));
        assert!(sent.ended_it(exit(None, Some(15))));
        // A command that went on and failed later failed on its own.
        assert!(!sent.ended_it(exit(Some(1), None)));
        assert!(!sent.ended_it(exit(Some(137), None)));
        let mut reload = SignalsByHand::default();
        reload.sent(Origin::Caller, ProcessSignal::HUP, false);
        assert!(!reload.ended_it(exit(Some(2), None)));
        assert!(reload.ended_it(exit(Some(129), None)));
    }

    #[test]
    fn only_a_persons_signal_that_ends_a_process_counts() {
        let mut sent = SignalsByHand::default();
        sent.sent(Origin::Watchdog, ProcessSignal::TERM, true);
        sent.sent(Origin::Budget, ProcessSignal::KILL, true);
        sent.sent(Origin::Operator, ProcessSignal::CONT, true);
        let usr1 = ProcessSignal::parse("USR1").expect("USR1");
        sent.sent(Origin::Operator, usr1, true);
        assert!(!sent.ended_it(exit(None, Some(15))));
        assert!(!sent.ended_it(exit(None, Some(usr1.number()))));
    }
}
