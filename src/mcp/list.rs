//! The `list` tool: the commands this server started in its session.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::commands::Commands;
use super::run::CommandStatus;
use crate::journal::CommandRecord;

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
    /// Processes it left running that its broker still holds.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub left_running: Vec<i32>,
}

pub fn list(commands: &Commands) -> ListResult {
    let listed = commands
        .all()
        .iter()
        .map(|tracked| ListedCommand {
            status: CommandStatus::of(tracked),
            command: tracked.command.clone(),
            cpu_ms: tracked
                .is_done()
                .then(|| CommandRecord::load(&tracked.journal).result)
                .flatten()
                .and_then(|r| r.cpu_ms),
            left_running: tracked.left_running.clone(),
        })
        .collect();
    ListResult {
        session: commands.session_id.clone(),
        commands: listed,
    }
}
