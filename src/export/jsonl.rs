//! `--format jsonl`: every event of every command, merged in time order, one JSON object a
//! line: the journal's line with `session` and `command` (the command directory's name)
//! added. A journal cut short adds one line of kind `journal_cut_short` after its last
//! event, with what is missing in `damage`. A command the launcher never started is one line
//! of kind `not_started` at its launcher's last word, with `name`, `command_line`, `plan` and
//! `words` (`not started: migrate: exit 1`) and no `command`. Each word of the launcher
//! (`launcher.jsonl`) is a line of kind `plan` at its time: `name`, `command` (the run it is
//! about, when it names one), `plan` (`null` once a run began) and `words` (`restarting in
//! 2s (run 3)`, `gave up after 3 restarts`).
//!
//! Only the order is held for the whole session (24 bytes an event); each line is made when
//! it is written.

use serde_json::{Value, json};

use super::session::SessionExport;

/// The place that stands for a command's `journal_cut_short` line, after its last event.
const CUT_SHORT: usize = usize::MAX;

/// The lines, each ending in a newline.
pub fn lines(session: &SessionExport) -> Vec<u8> {
    // (time, command, place in its journal): a stable merge of already ordered journals.
    let mut order: Vec<(u64, usize, usize)> = Vec::new();
    for (c, command) in session.commands.iter().enumerate() {
        order.extend(
            command
                .events
                .iter()
                .enumerate()
                .map(|(n, e)| (e.ts_ms, c, n)),
        );
        // A cut journal stops at its last event, or the session's end without one.
        if command.cut_short {
            let last = command.events.last().map_or(session.ended_ms, |e| e.ts_ms);
            order.push((last, c, CUT_SHORT));
        }
    }
    let runs = session.commands.len();
    order.extend(
        (session.not_started.iter().enumerate()).map(|(i, never)| (never.since_ms, runs + i, 0)),
    );
    // The launcher's words after them.
    let plans = runs + session.not_started.len();
    order.extend((session.launcher.iter().enumerate()).map(|(i, line)| (line.ts_ms, plans + i, 0)));
    order.sort_unstable();
    let mut out = Vec::new();
    let mut push = |value: &Value| {
        // Serializing a `Value` cannot fail.
        if let Ok(line) = crate::model::output::json::to_vec(value, false) {
            out.extend_from_slice(&line);
            out.push(b'\n');
        }
    };
    for (ts_ms, c, n) in order {
        if let Some(line) = c.checked_sub(plans).and_then(|i| session.launcher.get(i)) {
            // `null` words for a plan of `null` (a run began, or a wait was called off) or one
            // this tether cannot read; the plan as journaled either way.
            let plan = serde_json::from_value::<Option<crate::model::Plan>>(line.plan.clone())
                .ok()
                .flatten();
            let mut value = json!({
                "ts_ms": ts_ms,
                "kind": "plan",
                "session": session.id,
                "name": line.command,
                "plan": line.plan,
                "words": plan.map(|p| p.label(ts_ms)),
            });
            if let Some(dir) = &line.dir {
                value["command"] = json!(dir);
            }
            push(&value);
            continue;
        }
        let Some(command) = session.commands.get(c) else {
            let never = &session.not_started[c - runs];
            push(&json!({
                "ts_ms": ts_ms,
                "kind": "not_started",
                "session": session.id,
                "name": never.name(),
                "command_line": never.state.command_line(),
                "plan": never.state.plan,
                "words": never.words(),
            }));
            continue;
        };
        let damage = &command.damage;
        let value = match command.events.get(n) {
            Some(event) => serde_json::to_value(event),
            None => Ok(json!({ "ts_ms": ts_ms, "kind": "journal_cut_short", "damage": damage })),
        };
        let Ok(Value::Object(mut object)) = value else {
            continue;
        };
        object.insert("session".into(), Value::String(session.id.clone()));
        object.insert("command".into(), Value::String(command.id.dir_name()));
        push(&Value::Object(object));
    }
    out
}
