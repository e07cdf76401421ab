//! `--format jsonl`: every event of every command, merged in time order, one JSON object a
//! line: the journal's line with `session` and `command` (the command directory's name)
//! added. A journal cut short adds one line of kind `journal_cut_short` after its last
//! event, with what is missing in `damage`.

use serde_json::{Map, Value};

use super::session::SessionExport;

/// The lines, each ending in a newline.
pub fn lines(session: &SessionExport) -> Vec<u8> {
    // (time, command, place in its journal): a stable merge of already ordered journals.
    let mut keyed: Vec<(u64, usize, usize, Value)> = Vec::new();
    for (c, command) in session.commands.iter().enumerate() {
        let tag = |mut object: Map<String, Value>| {
            object.insert("session".into(), Value::String(session.id.clone()));
            object.insert("command".into(), Value::String(command.id.clone()));
            Value::Object(object)
        };
        for (n, event) in command.events.iter().enumerate() {
            if let Ok(Value::Object(object)) = serde_json::to_value(event) {
                keyed.push((event.ts_ms, c, n, tag(object)));
            }
        }
        if command.cut_short {
            let last = command.events.last().map_or(session.ended_ms, |e| e.ts_ms);
            let mut object = Map::new();
            object.insert("ts_ms".into(), last.into());
            object.insert("kind".into(), "journal_cut_short".into());
            object.insert("damage".into(), command.damage.clone().into());
            keyed.push((last, c, usize::MAX, tag(object)));
        }
    }
    keyed.sort_by_key(|(ts, c, n, _)| (*ts, *c, *n));
    let mut out = Vec::new();
    for (_, _, _, value) in keyed {
        // Serializing a `Value` cannot fail.
        if let Ok(line) = crate::model::output::json::to_vec(&value, false) {
            out.extend_from_slice(&line);
            out.push(b'\n');
        }
    }
    out
}
