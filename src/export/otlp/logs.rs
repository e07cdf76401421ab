//! A command's output as OTLP log records, bounded: per stream the first and the last half of
//! the budget of its stored log, a line a record, and between them one record saying how many
//! bytes were left out. Each record carries the command span's ids, `INFO` for stdout and
//! `WARN` for stderr, and `tether.stream`; its time is that of the output event that wrote
//! the line's first byte. Output can hold secrets: this runs only when logs are asked for.

use std::io::{self, Read, Seek, SeekFrom};
use std::path::Path;

use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::logs::v1::{LogRecord, SeverityNumber};
use opentelemetry_proto::tonic::trace::v1::Span;

use super::nanos;
use super::span::{attribute, int, string};
use crate::export::session::CommandExport;
use crate::journal::WriteTimes;
use crate::journal::secure::open_regular;
use crate::protocol::Stream;

/// How much of each stream's log goes out, head and tail together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogBudget {
    pub bytes: u64,
}

/// A stream's log cut to a budget: the head, the bytes left out, the tail (starting at the
/// offset `tail_at`).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Cut {
    pub head: Vec<u8>,
    pub left_out: u64,
    pub tail_at: u64,
    pub tail: Vec<u8>,
}

/// The log records of both streams of `command`, under `span`'s ids. A log that cannot be
/// read is one record saying so.
pub fn records(command: &CommandExport, span: &Span, budget: LogBudget) -> Vec<LogRecord> {
    let mut records = Vec::new();
    for stream in Stream::BOTH {
        let times = WriteTimes::of(&command.events, stream);
        // Bytes before the first write the journal times (a cut head) get that write's
        // time; a stream no event times, the command's end or start.
        let fallback = (times.first())
            .or(command.ended_ms())
            .or(command.started_ms())
            .unwrap_or_default();
        let record = |offset: u64, body: String, extra: Vec<KeyValue>| {
            let time = nanos(times.at(offset).unwrap_or(fallback));
            let (severity, text) = match stream {
                Stream::Stdout => (SeverityNumber::Info, "INFO"),
                Stream::Stderr => (SeverityNumber::Warn, "WARN"),
            };
            let mut attributes = vec![attribute("tether.stream", string(stream.name()))];
            attributes.extend(extra);
            LogRecord {
                time_unix_nano: time,
                observed_time_unix_nano: time,
                severity_number: severity as i32,
                severity_text: text.into(),
                body: Some(string(&body)),
                attributes,
                trace_id: span.trace_id.clone(),
                span_id: span.span_id.clone(),
                ..Default::default()
            }
        };
        let cut = match cut(&command.dir, stream, budget.bytes) {
            Ok(cut) => cut,
            Err(err) => {
                let why = format!("cannot read {}: {err}", stream.file_name());
                records.push(record(0, why, Vec::new()));
                continue;
            }
        };
        for (offset, line) in lines(&cut.head, 0) {
            records.push(record(offset, line, Vec::new()));
        }
        if cut.left_out > 0 {
            let mark = format!("… {} bytes left out …", cut.left_out);
            let extra = vec![attribute("tether.left_out_bytes", int(cut.left_out as i64))];
            records.push(record(cut.head.len() as u64, mark, extra));
        }
        for (offset, line) in lines(&cut.tail, cut.tail_at) {
            records.push(record(offset, line, Vec::new()));
        }
    }
    records
}

/// The head and tail of the command's `stream` log within `budget` bytes: the whole log when
/// it fits, else the first half cut at its last line end and the last half from its first
/// line start (a line longer than half the budget is cut inside). Read through the journal's
/// safe open (no link followed, no FIFO waited on) on one descriptor; no log is empty.
pub fn cut(dir: &Path, stream: Stream, budget: u64) -> io::Result<Cut> {
    let mut file = match open_regular(&dir.join(stream.file_name())) {
        Ok(file) => file,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(Cut::default()),
        Err(err) => return Err(err),
    };
    let size = file.metadata()?.len();
    let mut read = |from: u64, len: u64| -> io::Result<Vec<u8>> {
        file.seek(SeekFrom::Start(from))?;
        let mut bytes = Vec::new();
        (&mut file).take(len).read_to_end(&mut bytes)?;
        Ok(bytes)
    };
    if size <= budget {
        return Ok(Cut {
            head: read(0, size)?,
            ..Cut::default()
        });
    }
    let half = budget / 2;
    let mut head = read(0, half)?;
    if let Some(end) = memchr::memrchr(b'\n', &head) {
        head.truncate(end + 1);
    }
    // One byte before the tail too: a tail that starts a line keeps that line.
    let from = size - half - 1;
    let mut tail = read(from, half + 1)?;
    let start = match memchr::memchr(b'\n', &tail) {
        Some(i) if i + 1 < tail.len() => i + 1,
        _ => 1,
    };
    tail.drain(..start);
    let tail_at = from + start as u64;
    Ok(Cut {
        left_out: tail_at.saturating_sub(head.len() as u64),
        head,
        tail_at,
        tail,
    })
}

/// `bytes` (which start at `offset` in the log) as lines without their ends, each with its
/// offset; invalid UTF-8 replaced.
fn lines(bytes: &[u8], offset: u64) -> Vec<(u64, String)> {
    let mut out = Vec::new();
    let mut at = 0;
    for line in bytes.split_inclusive(|&b| b == b'\n') {
        let text = line.strip_suffix(b"\n").unwrap_or(line);
        let text = text.strip_suffix(b"\r").unwrap_or(text);
        out.push((offset + at, String::from_utf8_lossy(text).into_owned()));
        at += line.len() as u64;
    }
    out
}
