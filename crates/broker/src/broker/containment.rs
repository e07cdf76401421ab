//! Choosing what holds the command's tree, before it is spawned: a cgroup of its own below
//! ours where cgroup v2 lets us, else the walk of /proc (the subreaper's descendants). Either
//! way the journal says which, in one line; a cgroup problem never fails the command.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use tether_os::cgroup::{self, CommandCgroup, Hierarchy, Limits, name};
use tether_protocol::protocol::{BrokerIdentity, ContainmentMode, EventKind, LaunchRequest};

/// What was decided: the cgroup (if any) and the events that say so.
pub struct Established {
    pub cgroup: Option<Arc<CommandCgroup>>,
    pub events: Vec<EventKind>,
}

/// The cgroup's name: session and command directory (or the command's name), and the
/// broker's pid and start time. Known before the broker says so, for a broker that dies or
/// is stopped before its `containment` event reaches the front end (see
/// [`expected_cgroup`]).
pub fn cgroup_name(request: &LaunchRequest, broker: &BrokerIdentity) -> String {
    match &request.session {
        Some(s) => name::command_cgroup_name(&s.command.session, &s.command.dir_name(), broker),
        None => name::command_cgroup_name("none", &request.name, broker),
    }
}

/// Where the cgroup named `name` (see [`cgroup_name`]) is, if this process (the
/// broker's front end, in the same cgroup) finds a hierarchy. Looked for only when it is
/// needed: finding the hierarchy reads the whole mount table, on every shim call otherwise.
pub fn expected_cgroup(name: &str) -> Option<PathBuf> {
    let hierarchy = Hierarchy::find().ok()?;
    let beside = hierarchy.path().join(name);
    // A broker that could not leave the command cgroup it started in made its own there.
    match hierarchy.inside().map(|inside| inside.join(name)) {
        Some(nested) if !beside.exists() && nested.exists() => Some(nested),
        _ => Some(beside),
    }
}

/// The hierarchy [`establish`] made the command's cgroup in, for [`remove_stale`]: finding it
/// again would read the whole mount table a second time on every command's way.
static ESTABLISHED_IN: OnceLock<Hierarchy> = OnceLock::new();

pub fn establish(request: &LaunchRequest, broker: &BrokerIdentity) -> Established {
    // A broker started inside a command's cgroup leaves it first (see `Hierarchy::enter`).
    let made = Hierarchy::find()
        .and_then(Hierarchy::enter)
        .and_then(|hierarchy| {
            let cgroup = CommandCgroup::create(&hierarchy, &cgroup_name(request, broker))?;
            let _ = ESTABLISHED_IN.set(hierarchy);
            Ok(cgroup)
        });
    let (cgroup, reason) = match made {
        Ok(cgroup) => (Some(cgroup), None),
        Err(reason) => (None, Some(reason.to_string())),
    };
    let problems = match &cgroup {
        Some(cgroup) => cgroup::limits::apply(cgroup, &request.limits),
        None => without_cgroup(&request.limits),
    };
    let containment = EventKind::Containment {
        mode: match cgroup {
            Some(_) => ContainmentMode::Cgroup,
            None => ContainmentMode::Procfs,
        },
        path: cgroup.as_ref().map(|c| c.path().to_path_buf()),
        reason,
    };
    let events = std::iter::once(containment)
        .chain(problems.into_iter().map(limit_unavailable))
        .collect();
    Established {
        cgroup: cgroup.map(Arc::new),
        events,
    }
}

/// Removes whatever killed brokers left in the hierarchy, empty (never a cgroup whose broker
/// runs). Called once the command has started: each other command's cgroup costs a few reads
/// of cgroupfs, which took milliseconds on a busy machine, and nothing about the command
/// waits for it.
pub fn remove_stale() {
    if let Some(hierarchy) = ESTABLISHED_IN.get() {
        cgroup::stale::remove_stale(hierarchy);
    } else if let Ok(hierarchy) = Hierarchy::find() {
        cgroup::stale::remove_stale(&hierarchy);
    }
}

fn limit_unavailable(message: String) -> EventKind {
    let limit = message.split(' ').next().unwrap_or_default().to_string();
    EventKind::LimitUnavailable { limit, message }
}

/// Limits asked of a command that has no cgroup: each said, once.
fn without_cgroup(limits: &Limits) -> Vec<String> {
    let asked = [
        ("max_procs", limits.max_procs.is_some()),
        ("max_memory", limits.max_memory.is_some()),
    ];
    (asked.into_iter().filter(|(_, asked)| *asked))
        .map(|(limit, _)| {
            format!("{limit} not applied: the command has no cgroup (see containment); it runs without it")
        })
        .collect()
}
