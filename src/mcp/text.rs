//! A command's output as a model reads it: bytes from the journal's stream files, escape
//! sequences and control characters taken out by the same sanitizer the TUI draws with.

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use crate::journal::reader::stream_tail;
use crate::journal::secure::open_regular;
use crate::model::output::{plain_text, render_line};
use crate::protocol::Stream;

/// The bytes of `stream` stored so far (0 if the file is not there yet).
pub fn stored_len(journal: &Path, stream: Stream) -> u64 {
    std::fs::symlink_metadata(journal.join(stream.file_name())).map_or(0, |m| m.len())
}

/// The bytes of `stream` past the journal's bound, never stored; `None` when every byte was.
pub fn not_journaled(journal: &Path, stream: Stream) -> Option<u64> {
    crate::journal::cut::stream_cut(journal, stream).map(|(_, dropped)| dropped)
}

/// Up to `max` bytes of `stream` from `offset`.
pub fn read_range(
    journal: &Path,
    stream: Stream,
    offset: u64,
    max: usize,
) -> std::io::Result<Vec<u8>> {
    let path = journal.join(stream.file_name());
    let mut file = match open_regular(&path) {
        Ok(file) => file,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(err) => return Err(err),
    };
    file.seek(SeekFrom::Start(offset))?;
    let mut bytes = Vec::with_capacity(max.min(1 << 20));
    file.take(max as u64).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Text for a model: each line through the sanitizer, line ends kept.
pub fn sanitize(bytes: &[u8]) -> String {
    bytes
        .split_inclusive(|&b| b == b'\n')
        .map(sanitize_line)
        .collect()
}

/// One line (with its `\n`, if it has one) through the sanitizer.
pub fn sanitize_line(line: &[u8]) -> String {
    let (body, newline) = match line.strip_suffix(b"\n") {
        Some(body) => (body, true),
        None => (line, false),
    };
    let body = body.strip_suffix(b"\r").unwrap_or(body);
    let mut text = plain_text(&render_line(body));
    if newline {
        text.push('\n');
    }
    text
}

/// The last `max` bytes of a stream, sanitized, starting at a line where one starts in
/// them; and whether earlier bytes were left out.
pub fn tail(journal: &Path, stream: Stream, max: usize) -> (String, bool) {
    match stream_tail(journal, stream, max as u64) {
        Ok((bytes, cut)) => (sanitize(&bytes), cut),
        Err(_) => (String::new(), false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_are_stripped_and_lines_kept() {
        assert_eq!(
            sanitize(b"\x1b[31mred\x1b[0m\r\nplain\n\x07bell"),
            "red\nplain\nbell"
        );
    }
}
