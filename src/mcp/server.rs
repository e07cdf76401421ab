//! The MCP face of [`Commands`]: the four tools, their descriptions and annotations, and
//! the protocol revisions served.

use std::borrow::Cow;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::{Json, Parameters};
use rmcp::model::{
    CustomRequest, CustomResult, Implementation, ProtocolVersion, RequestMetaObject,
    ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, Peer, RoleServer, ServerHandler, tool, tool_handler, tool_router};

use super::ToolError;
use super::commands::Commands;
use super::list::{ListParams, ListResult, list};
use super::output::{OutputPage, OutputParams, output};
use super::run::{RunParams, RunResult, run};
use super::signal::{SignalParams, SignalResult, signal};
use super::untyped::refusal;

/// Revisions with structured tool results (2025-06-18 on): the `initialize` handshake of
/// 2025-06-18 and 2025-11-25, and 2026-07-28's discovery without one.
const SERVED: &[ProtocolVersion] = &[
    ProtocolVersion::V_2025_06_18,
    ProtocolVersion::V_2025_11_25,
    ProtocolVersion::V_2026_07_28,
];

#[derive(Clone)]
pub struct TetherServer {
    commands: Commands,
    tool_router: ToolRouter<TetherServer>,
}

impl TetherServer {
    pub fn new(commands: Commands) -> TetherServer {
        TetherServer {
            commands,
            tool_router: Self::tool_router(),
        }
    }
}

#[tool_router]
impl TetherServer {
    #[tool(
        description = "Run a shell command (/bin/sh -c) under a tether broker, which journals all its output and stops everything it starts when it is stopped. Waits up to wait_ms (default 10 s, max 60 s) for it to end and returns its state, exit code or signal, byte counts and the last lines of stdout and stderr (from their last 4 KiB). Every reply of this server fits 40,000 bytes of JSON (about 10,000 tokens): the tails shrink to fit (*_cut says so), and a name past 128 bytes or a command line past 1,024 is cut, marked `…[N more bytes]`. A command still running then keeps running (still_running: true): read more with `output`, check with `list`, end it with `signal`. Processes it leaves running (a server started with `&`) are kept (state left_running, their pids in left_running) until this MCP server exits or `signal` stops them.",
        annotations(
            title = "Run a command",
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = true
        )
    )]
    async fn run(
        &self,
        Parameters(params): Parameters<RunParams>,
        meta: RequestMetaObject,
        peer: Peer<RoleServer>,
        context: RequestContext<RoleServer>,
    ) -> Result<Json<RunResult>, ToolError> {
        let progress = meta.get_progress_token().map(|token| (peer, token));
        run(&self.commands, params, progress, context.ct)
            .await
            .map(Json)
    }

    #[tool(
        description = "Read a page of a command's stdout or stderr from its journal by byte offset (default 16 KiB, max 64 KiB), escape sequences removed. A page also ends, at a line's end where it can, where the reply would pass 40,000 bytes of JSON (about 10,000 tokens): pass next_offset back as offset for the next page; cut: true means more is stored; not_journaled_bytes, when present, counts what the command printed past its journal bound (never stored, not readable). grep keeps only lines matching a regex. With wait_ms, waits for new output or the command's end.",
        annotations(
            title = "Read command output",
            read_only_hint = true,
            open_world_hint = false
        )
    )]
    async fn output(
        &self,
        Parameters(params): Parameters<OutputParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<Json<OutputPage>, ToolError> {
        output(&self.commands, params, context.ct).await.map(Json)
    }

    #[tool(
        description = "Send TERM, INT, HUP or KILL to a command's whole process group and every process it started (escapees included), or `stop` to run the stop sequence (TERM, KILL after the grace period) and wait until all of it is gone. Returns what the broker sent and how many processes each reached.",
        annotations(
            title = "Signal or stop a command",
            read_only_hint = false,
            destructive_hint = true,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    async fn signal(
        &self,
        Parameters(params): Parameters<SignalParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<Json<SignalResult>, ToolError> {
        signal(&self.commands, params, context.ct).await.map(Json)
    }

    #[tool(
        description = "List the commands of this session, whoever started them (this server, or a TUI, shell shim or other agent sharing $TETHER_SESSION): id, name, command line, state, runtime, exit, CPU time and processes left running. Every id works with `output` and `signal`. Oldest first, as many as fit 40,000 bytes of JSON (about 10,000 tokens); with next_cursor in the reply, more follow: pass it back as cursor.",
        annotations(
            title = "List commands",
            read_only_hint = true,
            open_world_hint = false
        )
    )]
    async fn list(
        &self,
        Parameters(params): Parameters<ListParams>,
    ) -> Result<Json<ListResult>, ToolError> {
        list(&self.commands, params).map(Json)
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for TetherServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("tether", env!("CARGO_PKG_VERSION")))
            .with_instructions(format!(
                "Commands run through tether are journaled and visible to the operator in `tether watch` (session {}). Prefer `run` with a short wait_ms and poll long commands with `output`.",
                self.commands.session_id
            ))
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(SERVED)
    }

    async fn on_custom_request(
        &self,
        request: CustomRequest,
        _context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        Err(refusal(&request))
    }
}
