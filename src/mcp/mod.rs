//! `tether mcp`: a Model Context Protocol server on stdio, so that an agent runs its
//! commands through tether's brokers by tool call (`run`, `output`, `signal`, `list`).
//! Only protocol goes to stdout; diagnostics go to stderr.

mod budget;
mod commands;
mod fit;
mod journaled;
mod list;
mod output;
mod run;
mod server;
mod signal;
#[cfg(test)]
mod tests;
mod text;
mod transport;
mod untyped;

use std::path::PathBuf;
use std::time::Duration;

use rmcp::ServiceExt;

use crate::exec::LeftoversChoice;
use crate::journal::paths::chosen_session;
use crate::journal::{SessionName, new_session_id, state_dir};
use crate::protocol::{Custodian, CustodianRole, LeftoversRule};
use crate::supervisor::{Session, become_subreaper};

/// What a tool call reports as its failure: a result with `isError`, the text saying what
/// was wrong and what to do.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ToolError(String);

impl ToolError {
    pub fn new(text: impl Into<String>) -> ToolError {
        ToolError(text.into())
    }
}

impl rmcp::handler::server::tool::IntoCallToolResult for ToolError {
    fn into_call_tool_result(self) -> Result<rmcp::model::CallToolResponse, rmcp::ErrorData> {
        // It may quote what the client sent (a regex, an id, a path): cut to stay within
        // the reply's budget.
        let text = budget::capped(&self.0, budget::TOOL_ERROR_CAP);
        Ok(rmcp::model::CallToolResult::error(vec![rmcp::model::ContentBlock::text(text)]).into())
    }
}

fn parse_duration(field: &str, text: &str) -> Result<Duration, ToolError> {
    crate::units::parse_duration(text)
        .map_err(|err| ToolError::new(format!("{field}: {err} (write it as 500ms, 30s, 5m)")))
}

/// How long the commands still running when the client goes get to stop.
const STOP_PATIENCE: Duration = Duration::from_secs(10);

pub fn main(state: Option<PathBuf>) -> i32 {
    let served = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|err| anyhow::anyhow!("cannot start the event loop: {err}"))
        .and_then(|runtime| {
            let served = runtime.block_on(serve(state));
            // Brokers holding leftovers are waited for by tasks that end only when they do,
            // and they end only once this process, their custodian, has exited.
            runtime.shutdown_background();
            served
        });
    match served {
        Ok(()) => 0,
        Err(err) => {
            eprintln!("tether mcp: {err:#}");
            1
        }
    }
}

/// Processes a command leaves running (`&`, a daemon) are kept, in their broker's custody,
/// for as long as this server runs: it is their custodian (with the session's owner, under
/// `tether agent`). `TETHER_LEFTOVERS=stop` and `TETHER_LEFTOVERS_MAX` apply as for the shim.
fn leftovers_rule() -> anyhow::Result<LeftoversRule> {
    let choice = LeftoversChoice::for_shim()?;
    let pid = std::process::id() as i32;
    let me = crate::procfs::read_stat(pid).map(|stat| Custodian {
        pid,
        start_ticks: stat.start_ticks,
        role: CustodianRole::Caller,
    });
    Ok(LeftoversRule {
        keep: choice.keep,
        max: choice.max,
        custodians: choice.owner.into_iter().chain(me).collect(),
    })
}

async fn serve(state: Option<PathBuf>) -> anyhow::Result<()> {
    let state = state_dir(state.as_deref())?;
    let leftovers = leftovers_rule()?;
    let name = match chosen_session(None).map_err(anyhow::Error::msg)? {
        Some(name) => name,
        None => SessionName::parse(&format!(
            "mcp-{}",
            new_session_id(crate::clock::now_ms(), std::process::id())
        ))?,
    };
    let session = Session::create(&state, Some(&name))?;
    // What a broker leaves if it dies is re-parented here, to be stopped with the rest.
    become_subreaper().map_err(|err| anyhow::anyhow!("cannot become a child subreaper: {err}"))?;
    eprintln!("tether mcp: session {}", session.id);
    let commands = commands::Commands::new(session, leftovers);
    let server = server::TetherServer::new(commands.clone());
    let (stdin, stdout) = rmcp::transport::stdio_pipes();
    let (writer, writing) = transport::Writer::start(stdout);
    match server
        .serve(transport::LineTransport::new(stdin, writer))
        .await
    {
        Ok(running) => {
            let _ = running.waiting().await;
        }
        Err(err) => eprintln!("tether mcp: the client went before the session began: {err}"),
    }
    // What was answered last reaches the client, if it still reads.
    let _ = tokio::time::timeout(Duration::from_secs(1), writing).await;
    // The client has gone (stdin closed): nothing it started may outlive it.
    commands.stop_all(STOP_PATIENCE).await;
    Ok(())
}
