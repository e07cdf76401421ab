//! The `output` tool: a page of a command's stdout or stderr by byte offset, read from its
//! journal, optionally only the lines that match a regex.

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::ToolError;
use super::budget::{REPLY_BUDGET, reply_size};
use super::commands::{Commands, Tracked};
use super::fit::fit_page;
use super::run::MAX_WAIT_MS;
use super::text::{not_journaled, read_range, stored_len};
use crate::protocol::Stream;

pub const DEFAULT_PAGE: u64 = 16 * 1024;
pub const MAX_PAGE: u64 = 64 * 1024;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OutputParams {
    /// The command's id, as `run` or `list` gave it.
    pub id: String,
    /// `stdout` (default) or `stderr`.
    #[serde(default)]
    pub stream: Option<StreamName>,
    /// Byte offset to read from (default 0); pass the last page's `next_offset`.
    #[serde(default)]
    pub offset: Option<u64>,
    /// The most bytes of the stream to read (default 16384, at most 65536). A page also
    /// ends, at a line's end where it can, where its text would take the reply past 40,000
    /// bytes of JSON: `next_offset` says where it ended.
    #[serde(default)]
    pub max_bytes: Option<u64>,
    /// With nothing new at `offset` yet, wait this long (ms, at most 60000) for more output
    /// or the command's end.
    #[serde(default)]
    pub wait_ms: Option<u64>,
    /// A regex: only the lines of the page that match it are returned.
    #[serde(default)]
    pub grep: Option<String>,
}

#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum StreamName {
    Stdout,
    Stderr,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct OutputPage {
    pub id: String,
    pub stream: String,
    pub offset: u64,
    /// Where the next page starts.
    pub next_offset: u64,
    /// The page's text, escape sequences removed, a tab shown as the spaces to the next
    /// multiple of 8 (with `grep`: the matching lines only).
    pub text: String,
    /// More bytes are stored past `next_offset`.
    pub cut: bool,
    /// Bytes of the stream stored so far.
    pub stored_bytes: u64,
    /// The command's state (see `run`); `finished` means no more output will come.
    pub state: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub matched_lines: Option<usize>,
    /// The journal did not keep the whole stream (the command's bound on journaled output):
    /// only its first `stored_bytes` can be read, and this many bytes after them were
    /// dropped. Absent when every byte was kept.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_journaled_bytes: Option<u64>,
}

pub async fn output(
    commands: &Commands,
    params: OutputParams,
    cancelled: CancellationToken,
) -> Result<OutputPage, ToolError> {
    let max = params.max_bytes.unwrap_or(DEFAULT_PAGE);
    if max == 0 || max > MAX_PAGE {
        return Err(ToolError::new(format!(
            "max_bytes {max} is out of range: 1 to {MAX_PAGE}"
        )));
    }
    let wait_ms = params.wait_ms.unwrap_or(0);
    if wait_ms > MAX_WAIT_MS {
        return Err(ToolError::new(format!(
            "wait_ms {wait_ms} is over the limit of {MAX_WAIT_MS}"
        )));
    }
    let grep = params
        .grep
        .as_deref()
        .map(regex::Regex::new)
        .transpose()
        .map_err(|err| ToolError::new(format!("grep is not a valid regex: {err}")))?;
    let tracked = commands.find(&commands.command_id(&params.id)?)?;
    let stream = match params.stream.unwrap_or(StreamName::Stdout) {
        StreamName::Stdout => Stream::Stdout,
        StreamName::Stderr => Stream::Stderr,
    };
    let offset = params.offset.unwrap_or(0);
    let deadline = Instant::now() + Duration::from_millis(wait_ms);
    let has_news = || {
        stored_len(&tracked.journal, stream) > offset
            || commands.lookup(&tracked.id).is_none_or(|t| t.is_done())
    };
    tokio::select! {
        _ = commands.wait_until_polling(deadline, has_news) => {}
        _ = cancelled.cancelled() => return Err(ToolError::new("cancelled")),
    }
    let state = commands
        .lookup(&tracked.id)
        .map_or("finished", |t| t.state())
        .to_string();
    page(&tracked, stream, offset, max as usize, grep.as_ref(), state)
}

/// The page of `stream` from `offset`: at most `max` bytes of it, and no more than keeps
/// the reply within [`REPLY_BUDGET`].
pub fn page(
    tracked: &Tracked,
    stream: Stream,
    offset: u64,
    max: usize,
    grep: Option<&regex::Regex>,
    state: String,
) -> Result<OutputPage, ToolError> {
    let bytes = read_range(&tracked.journal, stream, offset, max).map_err(|err| {
        ToolError::new(format!(
            "cannot read {} of {}: {err}",
            stream.file_name(),
            tracked.id.dir_name()
        ))
    })?;
    let end = offset + bytes.len() as u64;
    // Looked at after the read: what it read is stored, and more may be.
    let stored = stored_len(&tracked.journal, stream).max(end);
    // Weighed with no text and every other field at its longest (`false` is longer than
    // `true`): the text may take the rest.
    let mut page = OutputPage {
        id: tracked.id.dir_name(),
        stream: stream.name().to_string(),
        offset,
        next_offset: end,
        text: String::new(),
        cut: false,
        stored_bytes: stored,
        state,
        matched_lines: grep.map(|_| bytes.len()),
        not_journaled_bytes: not_journaled(&tracked.journal, stream),
    };
    let room = REPLY_BUDGET.saturating_sub(reply_size(&page));
    let fitted = fit_page(&bytes, end < stored, grep, room);
    page.next_offset = offset + fitted.taken as u64;
    page.text = fitted.text;
    page.cut = page.next_offset < stored;
    page.matched_lines = grep.map(|_| fitted.matched);
    Ok(page)
}
