//! Command cgroup names: `tether.<session>.<command>.<broker pid>-<broker start ticks>`.
//!
//! The session and command make a cgroup recognisable in `systemd-cgls` or a `ls`; the
//! broker's pid and start time say whose it is, so a later tether can tell a stale one (its
//! broker dead) from a live one, even when the pid has been reused.

use tether_protocol::protocol::BrokerIdentity;
/// Every command cgroup's name starts with this and a dot.
pub const PREFIX: &str = "tether";

/// The longest a session or command part may be: a cgroup name is a file name (255 bytes).
const PART_MAX: usize = 80;

/// `part` as a piece of a cgroup name: ASCII letters, digits, `-` and `_` kept, anything
/// else (dots, which separate the pieces, slashes, spaces, control and non-ASCII
/// characters) as `_`, cut to [`PART_MAX`]; never empty.
pub fn sanitize(part: &str) -> String {
    let clean: String = part
        .chars()
        .take(PART_MAX)
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if clean.is_empty() { "_".into() } else { clean }
}

/// The cgroup name of one command run by `broker`.
pub fn command_cgroup_name(session: &str, command: &str, broker: &BrokerIdentity) -> String {
    format!(
        "{PREFIX}.{}.{}.{}",
        sanitize(session),
        sanitize(command),
        broker.label()
    )
}

/// The broker that owns a cgroup named by [`command_cgroup_name`]; `None` for any other name.
pub fn owner(name: &str) -> Option<BrokerIdentity> {
    let rest = name.strip_prefix(PREFIX)?.strip_prefix('.')?;
    let mut parts = rest.split('.');
    let (_session, _command, broker) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    BrokerIdentity::from_label(broker)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn broker(pid: i32, start_ticks: u64) -> BrokerIdentity {
        BrokerIdentity { pid, start_ticks }
    }

    #[test]
    fn names_hold_only_what_a_cgroup_name_may() {
        assert_eq!(sanitize("20261130-140600-ab12"), "20261130-140600-ab12");
        assert_eq!(sanitize("03-build.release"), "03-build_release");
        assert_eq!(sanitize("../../etc"), "______etc");
        assert_eq!(sanitize("a b\n/c\u{202e}é"), "a_b__c__");
        assert_eq!(sanitize(""), "_");
        assert_eq!(sanitize(&"x".repeat(500)).len(), PART_MAX);
        let name = command_cgroup_name("s 1", "01-sleep", &broker(4242, 99));
        assert_eq!(name, "tether.s_1.01-sleep.4242-99");
        assert!(
            command_cgroup_name(
                &"é".repeat(300),
                &"x".repeat(300),
                &broker(i32::MAX, u64::MAX)
            )
            .len()
                <= 255
        );
    }

    #[test]
    fn the_owner_is_read_back_from_the_name() {
        let name = command_cgroup_name("sess.ion", "01-a.b", &broker(4242, 99));
        assert_eq!(owner(&name), Some(broker(4242, 99)));
        for other in [
            "tether",
            "tether.a.b",
            "tether.a.b.c",
            "tether.a.b.12",
            "tether.a.b.12-x",
            "tether.a.b.c.12-3",
            "tetherx.a.b.12-3",
            "user.slice",
        ] {
            assert_eq!(owner(other), None, "{other}");
        }
    }
}
