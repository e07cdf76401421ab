//! The `list` tool: the commands of this server's session, whoever started them, a page at
//! a time.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::ToolError;
use super::budget::{COMMAND_CAP, REPLY_BUDGET, capped, element_cost, reply_size};
use super::commands::{Commands, Tracked};
use super::run::CommandStatus;
use crate::journal::CommandId;
use crate::journal::reader::read_result;

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListParams {
    /// Where to go on from: the `next_cursor` of the page before.
    #[serde(default)]
    pub cursor: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ListResult {
    pub session: String,
    /// Oldest first, as many as fit 40,000 bytes of JSON.
    pub commands: Vec<ListedCommand>,
    /// More commands follow: pass this as `cursor` for the next page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ListedCommand {
    #[serde(flatten)]
    pub status: CommandStatus,
    /// The command line as given (past 1,024 bytes cut, marked `…[N more bytes]`).
    pub command: String,
    /// CPU time of the command and its descendants, once it has finished.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_ms: Option<u64>,
    /// Started by this server; false for another front end's in the same session.
    pub started_here: bool,
    /// One of an agent's own set-up shells (Claude Code's `env` probe and shell snapshot),
    /// not a command it was asked to run.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub setup: bool,
}

impl ListedCommand {
    pub fn of(tracked: &Tracked, cpu_ms: Option<u64>) -> ListedCommand {
        ListedCommand {
            status: CommandStatus::of(tracked),
            command: capped(&tracked.command, COMMAND_CAP),
            cpu_ms,
            started_here: tracked.mine,
            setup: tracked.setup,
        }
    }
}

pub fn list(commands: &Commands, params: ListParams) -> Result<ListResult, ToolError> {
    let from = params
        .cursor
        .as_deref()
        .map(|given| {
            // A command id (its directory's name), ordered as the session's directories are.
            CommandId::parse(&commands.session_id, given).ok_or_else(|| {
                ToolError::new(format!(
                    "cursor {given} is not one `list` gave: pass a page's next_cursor, or none for the first page"
                ))
            })
        })
        .transpose()?;
    let listed = commands.session_commands(from).map(|tracked| {
        let cpu_ms = tracked
            .is_done()
            .then(|| read_result(&tracked.journal))
            .flatten()
            .and_then(|r| r.cpu_ms);
        ListedCommand::of(&tracked, cpu_ms)
    });
    Ok(page_of(commands.session_id.clone(), listed))
}

/// The commands of `listed` that fit a reply, and the cursor of the first that did not.
/// `listed` is read no further than that one, so a page costs what it shows.
pub fn page_of(session: String, listed: impl Iterator<Item = ListedCommand>) -> ListResult {
    // Weighed with a cursor of a command id's usual longest (a number, `-`, 40 characters):
    // each command adds its own weight.
    let mut page = ListResult {
        session,
        commands: Vec::new(),
        next_cursor: Some("0".repeat(64)),
    };
    let mut size = reply_size(&page);
    page.next_cursor = None;
    for command in listed {
        let cost = element_cost(&command);
        if size + cost > REPLY_BUDGET && !page.commands.is_empty() {
            page.next_cursor = Some(command.status.id);
            break;
        }
        size += cost;
        page.commands.push(command);
    }
    // An id longer than reckoned with can tip the page over: the last command waits for
    // the next one.
    while reply_size(&page) > REPLY_BUDGET && page.commands.len() > 1 {
        let last = page.commands.pop().map(|c| c.status.id);
        page.next_cursor = last;
    }
    page
}
