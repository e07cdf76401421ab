//! Every interval of a front end's conversation with a broker, each defined once, with why it
//! has its value. The broker's own (its stop sequence, its watchdogs) are in the request.

use std::time::Duration;

use tether_protocol::protocol::{DEFAULT_GRACE, millis};

/// The grace period of a stop: the one asked for, cut to the longest a broker honours
/// ([`MAX_INTERVAL`]), or the default ([`DEFAULT_GRACE`]).
pub fn grace(asked: Option<Duration>) -> Duration {
    asked.map_or(DEFAULT_GRACE, millis::bounded)
}

/// How a front end keeps watch on its broker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pace {
    /// How often the front end looks at its broker (its state in /proc, its pings).
    pub look: Duration,
    /// How often it pings a broker that runs normally and has answered every ping. The
    /// broker is told this as its heartbeat (`heartbeat_ms`) and journals a front end that
    /// stopped pinging (`parent_unresponsive`, after three of them). While the broker is
    /// stopped, a ping is unanswered or a stop waits, every look pings.
    pub quiet_ping: Duration,
    /// Whether a broker that stops answering pings (stopped, wedged) is given up on: killed,
    /// and what it left stopped from the front end.
    pub give_up_when_silent: bool,
}

impl Pace {
    /// `tether exec`: it looks every second, so that a stopped or wedged broker is given up
    /// on within seconds (its caller waits for the exit status); it pings every five, since a
    /// ping wakes the broker, and a hundred idle execs pinging every second kept a hundred
    /// brokers waking.
    pub const EXEC: Pace = Pace {
        look: Duration::from_secs(1),
        quiet_ping: Duration::from_secs(5),
        give_up_when_silent: true,
    };
    /// The TUI and the MCP server, with many brokers: a request is followed by a ping of its
    /// own (its pong is the acknowledgement), so the heartbeat only lets the broker journal a
    /// front end that stopped answering. With a hundred brokers a ping a second would be a
    /// hundred wake-ups a second of an idle fleet. The operator sees a wedged broker, and a
    /// stop it does not acknowledge falls back ([`ACK_TIMEOUT`]). Also the pace of a broker
    /// attached through its control socket (the watch, `tether stop`, the MCP server's
    /// journaled commands): every request is answered, and the broker is another front
    /// end's, not this one's to give up on for silence.
    pub const FLEET: Pace = Pace {
        look: Duration::from_secs(10),
        quiet_ping: Duration::from_secs(10),
        give_up_when_silent: false,
    };
}

/// How long a broker may take to acknowledge a signal or stop before the front end acts,
/// on its stdin or its control socket. A broker answers a ping within milliseconds; a
/// second is far beyond any busy broker and short enough that an operator's KILL still
/// lands at once. A stop, whose fallback kills the broker, waits longer for a broker the
/// kernel shows at work ([`BUSY_STOP_PATIENCE`]).
pub const ACK_TIMEOUT: Duration = Duration::from_secs(1);

/// Asked to stop, how long past the grace period the broker may take before it is killed
/// and the leftovers KILLed (which then may take as long again): `tether exec` ends within
/// grace + 1 s, unless the broker is at work ([`BUSY_STOP_PATIENCE`]).
pub const STOP_SLACK: Duration = Duration::from_millis(450);

/// The most past the grace period a broker still at work on the stop is given before it is
/// killed all the same: its lines keep coming (a fork storm on the /proc path), or the
/// kernel shows it running, waiting for a core or in an uninterruptible wait when it is
/// looked at before being given up on (two loaded cores). Each sign buys [`STOP_SLACK`].
pub const BUSY_STOP_PATIENCE: Duration = Duration::from_secs(5);

/// How long KILL is repeated to something that will not die before the front end gives up:
/// a process in uninterruptible sleep (a hung NFS read) can take seconds to die.
pub const KILL_PATIENCE: Duration = Duration::from_secs(5);

/// When quitting cannot wait any longer, how long KILL is repeated to leftovers: the
/// operator asked twice, and a front end that hangs on a D-state process is worse.
pub const ABORT_PATIENCE: Duration = Duration::from_secs(1);

/// How long `tether stop` waits past the command's grace period for its broker to finish:
/// the operator's terminal is not ours to hold forever, but a tree of thousands takes a
/// while to walk and KILL.
pub const REMOTE_STOP_WAIT: Duration = Duration::from_secs(10);

/// How long past the grace period an MCP `signal` call with `stop` waits before it answers
/// without the command's end: an agent's tool call should not block much past the stop.
pub const TOOL_STOP_WAIT: Duration = Duration::from_secs(3);

#[cfg(test)]
mod tests {
    use super::*;
    use tether_protocol::protocol::MAX_INTERVAL;

    #[test]
    fn grace_defaults_and_is_bounded() {
        assert_eq!(grace(None), DEFAULT_GRACE);
        assert_eq!(grace(Some(Duration::ZERO)), Duration::ZERO);
        assert_eq!(grace(Some(Duration::from_secs(u64::MAX / 2))), MAX_INTERVAL);
    }

    #[test]
    fn exec_ends_within_grace_and_a_second() {
        // The broker is killed STOP_SLACK past the grace, its leftovers KILLed for as long.
        assert!(STOP_SLACK * 2 < Duration::from_secs(1));
    }
}
