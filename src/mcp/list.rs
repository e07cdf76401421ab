//! The `list` tool: the commands of this server's session, whoever started them.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::commands::Commands;
use super::run::CommandStatus;
use crate::journal::reader::read_result;

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListParams {}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ListResult {
    pub session: String,
    pub commands: Vec<ListedCommand>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ListedCommand {
    #[serde(flatten)]
    pub status: CommandStatus,
    /// The command line as given.
    pub command: String,
    /// CPU time of the command and its descendants, once it has finished.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_ms: Option<u64>,
    /// Started by this server; false for another front end's in the same session.
    pub started_here: bool,
}

pub fn list(commands: &Commands) -> ListResult {
    let listed = commands
        .session_commands()
        .iter()
        .map(|tracked| ListedCommand {
            status: CommandStatus::of(tracked),
            command: tracked.command.clone(),
            cpu_ms: tracked
                .is_done()
                .then(|| read_result(&tracked.journal))
                .flatten()
                .and_then(|r| r.cpu_ms),
            started_here: tracked.mine,
        })
        .collect();
    ListResult {
        session: commands.session_id.clone(),
        commands: listed,
    }
}
