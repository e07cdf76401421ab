//! The follower's decisions, without I/O: what the journal holds comes in as scans, what an
//! endpoint answered as [`Sent`], the time as `now` (ms since the epoch, the journal's
//! clock); out come [`Action`]s (send a batch, write a cursor, say something) and the time
//! to be woken at ([`Follower::poll_timeout`]). As quinn-proto's `Connection`: the loop
//! (`run`) owns the files, the socket and the clock.
//!
//! Memory stays bounded whatever the backlog: a command is known by its number, its
//! directory and four facts; a batch names at most [`Limits::batch`] of them and the loop
//! reads them only to send them.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

mod messages;

pub use messages::{Action, CommandScan, Counts, Limits, Planned, SessionScan};

use super::cursor::Cursor;
use super::{Sent, SessionRoot};

/// A session as followed: its cursor and what is known of its commands. Once everything
/// in it is sent the commands are forgotten (a finished session costs its cursor alone).
#[derive(Debug, Default)]
struct Followed {
    cursor: Cursor,
    started_ms: u64,
    commands: BTreeMap<u64, CommandScan>,
}

impl Followed {
    /// The session's agent command: the first, if there are several.
    fn agent(&self) -> Option<&CommandScan> {
        self.commands.values().find(|c| c.agent)
    }

    /// When its root span is due, while it is still to send: when its commands say it is
    /// done, its agent ended and nothing runs; without one, `quiet` after the last command
    /// ended.
    fn root_due_at(&self, quiet: Duration) -> Option<u64> {
        let sent = self.cursor.session_sent
            // An agent command sent before it was known as one (its request unread then).
            || self.agent().is_some_and(|a| self.cursor.has(a.number));
        if sent || self.commands.values().any(|c| !c.ended) {
            return None;
        }
        // None without commands: nothing says it is done.
        let last = self.commands.values().map(|c| c.last_ms).max()?;
        let quiet = if self.agent().is_some() {
            Duration::ZERO
        } else {
            quiet
        };
        Some(last.saturating_add(quiet.as_millis() as u64))
    }

    /// Whether its root span is due by `now`, and still to send.
    fn root_due(&self, quiet: Duration, now: u64) -> bool {
        self.root_due_at(quiet).is_some_and(|at| at <= now)
    }

    fn complete(&self) -> bool {
        self.cursor.session_sent && self.commands.keys().all(|n| self.cursor.has(*n))
    }
}

#[derive(Debug, Default)]
pub struct Follower {
    limits: Limits,
    sessions: BTreeMap<String, Followed>,
    in_flight: Option<Vec<Planned>>,
    /// A batch that failed, sent again (alone) once `not_before` has passed.
    again: Option<Vec<Planned>>,
    refusals: u32,
    not_before: u64,
    /// Since when something has been pending, unsent.
    gathering_since: Option<u64>,
    out: VecDeque<Action>,
    counts: Counts,
}

impl Follower {
    pub fn new(limits: Limits) -> Follower {
        Follower {
            limits,
            ..Follower::default()
        }
    }

    /// Whether the session `id` is followed (its cursor given).
    pub fn knows(&self, id: &str) -> bool {
        self.sessions.contains_key(id)
    }

    /// The cursor of a followed session.
    pub fn cursor(&self, id: &str) -> Option<&Cursor> {
        self.sessions.get(id).map(|s| &s.cursor)
    }

    /// Starts following session `id` from `cursor` (read from disk, or the default).
    pub fn handle_cursor(&mut self, id: &str, cursor: Cursor) {
        self.sessions.entry(id.to_string()).or_insert(Followed {
            cursor,
            ..Followed::default()
        });
    }

    /// What a scan of a whole session found; commands it does not list are forgotten.
    pub fn handle_session(&mut self, scan: SessionScan) {
        let session = self.sessions.entry(scan.id.clone()).or_default();
        session.started_ms = scan.started_ms;
        session.commands.clear();
        for command in scan.commands {
            keep(&mut session.commands, command);
        }
        self.forget_if_complete(&scan.id);
    }

    /// What a look at one command of a followed session found.
    pub fn handle_command(&mut self, session: &str, command: CommandScan) {
        if let Some(followed) = self.sessions.get_mut(session) {
            keep(&mut followed.commands, command);
        }
        self.forget_if_complete(session);
    }

    /// The session's directory is gone (pruned): nothing more of it is sent.
    pub fn handle_session_gone(&mut self, id: &str) {
        self.sessions.remove(id);
    }

    /// How the endpoint took the batch in flight.
    pub fn handle_sent(&mut self, now: u64, sent: Sent) {
        let Some(batch) = self.in_flight.take() else {
            return;
        };
        match sent {
            Sent::Accepted { rejected, message } => {
                self.counts.spans_sent += batch.len() as u64;
                self.counts.spans_rejected += rejected;
                if self.counts.failing > 0 {
                    self.say(format!(
                        "sending works again after {} failed tries",
                        self.counts.failing
                    ));
                }
                self.counts.failing = 0;
                self.refusals = 0;
                if rejected > 0 {
                    let why = message.unwrap_or_default();
                    self.say(format!(
                        "the endpoint took the batch but dropped {rejected} of its {} spans {why}",
                        batch.len()
                    ));
                }
                self.record_sent(&batch);
            }
            Sent::Retry { after, why } => {
                self.counts.retries += 1;
                self.fail(now, batch, after, why);
            }
            Sent::Refused { why } => {
                self.refusals += 1;
                if self.refusals > self.limits.refused_retries {
                    self.refusals = 0;
                    self.counts.failing = 0;
                    self.counts.spans_refused += batch.len() as u64;
                    self.counts.last_error = Some((now, format!("refused: {why}")));
                    self.say(format!(
                        "the endpoint refused a batch of {} spans {} times ({why}); skipped, not sent again",
                        batch.len(),
                        self.limits.refused_retries + 1
                    ));
                    self.record_sent(&batch);
                } else {
                    self.counts.retries += 1;
                    self.fail(now, batch, None, format!("refused: {why}"));
                }
            }
        }
    }

    /// A failed try: the same batch again after the backoff (or the endpoint's Retry-After),
    /// never longer than [`Limits::max_backoff`].
    fn fail(&mut self, now: u64, batch: Vec<Planned>, after: Option<Duration>, why: String) {
        self.counts.failing = self.counts.failing.saturating_add(1);
        let doubled = self
            .limits
            .first_backoff
            .saturating_mul(1 << (self.counts.failing - 1).min(20));
        let wait = after.unwrap_or(doubled).min(self.limits.max_backoff);
        self.not_before = now.saturating_add(wait.as_millis() as u64);
        // Said when it starts or its reason changes, not at every retry of an outage.
        let repeated = self.counts.failing > 1
            && self
                .counts
                .last_error
                .as_ref()
                .is_some_and(|(_, last)| *last == why);
        if !repeated {
            self.say(format!(
                "sending failed ({why}); trying again in {:.1} s, backing off up to {} s",
                wait.as_secs_f64(),
                self.limits.max_backoff.as_secs()
            ));
        }
        self.counts.last_error = Some((now, why));
        self.again = Some(batch);
    }

    fn record_sent(&mut self, batch: &[Planned]) {
        let mut touched: Vec<String> = Vec::new();
        for item in batch {
            let Some(session) = self.sessions.get_mut(item.session()) else {
                continue;
            };
            match item {
                Planned::Command { number, root, .. } => {
                    session.cursor.mark(*number);
                    session.cursor.session_sent |= *root;
                }
                Planned::Session { .. } => session.cursor.session_sent = true,
            }
            if !touched.iter().any(|t| t == item.session()) {
                touched.push(item.session().to_string());
            }
        }
        for id in touched {
            if let Some(session) = self.sessions.get(&id) {
                self.out.push_back(Action::WriteCursor {
                    session: id.clone(),
                    cursor: session.cursor.clone(),
                });
            }
            self.forget_if_complete(&id);
        }
    }

    fn forget_if_complete(&mut self, id: &str) {
        if let Some(session) = self.sessions.get_mut(id)
            && session.complete()
        {
            session.commands.clear();
        }
    }

    fn say(&mut self, text: String) {
        self.out.push_back(Action::Say(text));
    }

    /// The next thing to do now, if any.
    pub fn poll_action(&mut self, now: u64) -> Option<Action> {
        if let Some(action) = self.out.pop_front() {
            return Some(action);
        }
        if self.in_flight.is_some() || now < self.not_before {
            return None;
        }
        if let Some(batch) = self.again.take() {
            self.in_flight = Some(batch.clone());
            return Some(Action::Send(batch));
        }
        let batch = self.pending(now, self.limits.batch);
        if batch.is_empty() {
            self.gathering_since = None;
            return None;
        }
        let since = *self.gathering_since.get_or_insert(now);
        if batch.len() < self.limits.batch && now < since + self.gather_ms() {
            return None;
        }
        self.gathering_since = None;
        self.in_flight = Some(batch.clone());
        Some(Action::Send(batch))
    }

    fn gather_ms(&self) -> u64 {
        self.limits.gather.as_millis() as u64
    }

    /// Up to `max` spans due now, oldest session first, in command order.
    fn pending(&self, now: u64, max: usize) -> Vec<Planned> {
        let mut batch = Vec::new();
        for (id, session) in &self.sessions {
            let done = session.root_due(self.limits.session_quiet, now);
            let root = session.agent().map(|a| a.number);
            for command in session.commands.values() {
                if batch.len() == max {
                    return batch;
                }
                let is_root = root == Some(command.number);
                if !command.ended || session.cursor.has(command.number) || (is_root && !done) {
                    continue;
                }
                batch.push(Planned::Command {
                    session: id.clone(),
                    number: command.number,
                    dir: command.dir.clone(),
                    root: is_root,
                });
            }
            // Done means it has commands: their directories' is the session's.
            let dir = (session.commands.values().next()).and_then(|c| c.dir.parent());
            if let (None, true, Some(dir)) = (root, done, dir)
                && batch.len() < max
            {
                let root = SessionRoot {
                    id: id.clone(),
                    started_ms: session.started_ms,
                    ended_ms: session
                        .commands
                        .values()
                        .map(|c| c.last_ms)
                        .max()
                        .unwrap_or(0),
                    commands: session.commands.len(),
                    failed: session.commands.values().filter(|c| c.failed).count(),
                    // Read by the loop, from `launcher.jsonl`, as it sends the span.
                    never_ran: Vec::new(),
                };
                let dir = dir.to_path_buf();
                batch.push(Planned::Session { root, dir });
            }
        }
        batch
    }

    /// When to be woken if nothing happens first: a batch gathering, a backoff ending, a
    /// session becoming quiet. `None`: nothing is waited for (no timer at rest).
    pub fn poll_timeout(&self) -> Option<u64> {
        if !self.out.is_empty() {
            return Some(0);
        }
        if self.in_flight.is_some() {
            return None;
        }
        if self.again.is_some() {
            return Some(self.not_before);
        }
        let gathering = self
            .gathering_since
            .map(|since| (since + self.gather_ms()).max(self.not_before));
        let quiet = self
            .sessions
            .values()
            .filter_map(|s| s.root_due_at(self.limits.session_quiet))
            .map(|at| at.max(self.not_before))
            .min();
        gathering.into_iter().chain(quiet).min()
    }

    /// Whether nothing is due now or in flight (what `--once` waits for).
    pub fn idle(&self, now: u64) -> bool {
        self.in_flight.is_none()
            && self.again.is_none()
            && self.out.is_empty()
            && self.pending(now, 1).is_empty()
    }

    /// Ended commands not sent yet, and sessions whose root span is due and unsent.
    pub fn backlog(&self, now: u64) -> usize {
        self.sessions
            .values()
            .map(|s| {
                let commands = s
                    .commands
                    .values()
                    .filter(|c| c.ended && !s.cursor.has(c.number))
                    .count();
                let root = s.agent().is_none() && s.root_due(self.limits.session_quiet, now);
                commands + usize::from(root)
            })
            .sum()
    }

    /// Commands known to run (their end is looked for).
    pub fn running(&self) -> usize {
        self.sessions
            .values()
            .flat_map(|s| s.commands.values())
            .filter(|c| !c.ended)
            .count()
    }

    pub fn sessions(&self) -> usize {
        self.sessions.len()
    }

    pub fn counts(&self) -> &Counts {
        &self.counts
    }
}

#[cfg(test)]
mod tests;

/// Records what a look at a command found, unless it is a bare `NN` and the number is known
/// under its final name `NN-name`. A number is reserved by making `NN`; a shim that makes it
/// after another's `NN` became `NN-name` finds the number taken and removes its `NN` again
/// (`next_command_dir`). Read in that moment it is an empty directory, "starting", and taken
/// as the command it would replace the ended `NN-name`: that number would wait for ever.
fn keep(commands: &mut BTreeMap<u64, CommandScan>, command: CommandScan) {
    let bare = |scan: &CommandScan| {
        scan.dir
            .file_name()
            .is_some_and(|name| !name.to_string_lossy().contains('-'))
    };
    if bare(&command)
        && commands
            .get(&command.number)
            .is_some_and(|known| known.dir != command.dir && !bare(known))
    {
        return;
    }
    commands.insert(command.number, command);
}
