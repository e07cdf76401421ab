//! The one reader of a journal's metadata files (`command.json`, `session.json`,
//! `result.json`), which are read whole. A command can reach its own journal: it may replace
//! its `command.json` by a FIFO, a link or a 3 GiB file, and every `tether ps`, `stop`,
//! `sessions`, `export`, `grep` and MCP listing reads it. So the file is opened as every
//! journal file is ([`super::secure::open_regular`]: no link followed, no FIFO waited on, a
//! regular file or nothing), its size is taken with `fstat` before any read, and no more than
//! [`METADATA_LIMIT`] is ever read or allocated. An oversized file is damage that says what
//! was skipped ([`Oversized`]); the reader goes on with the rest.

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::AsFd;
use std::path::Path;

use thiserror::Error;

use super::secure::{open_regular, open_regular_at};
use tether_protocol::protocol::MAX_LINE;
use tether_protocol::units::format_size;

/// The most a journal's metadata file may hold. The largest legitimate one is a
/// `command.json` whose command line is long and full of bytes JSON escapes (a control byte
/// takes six: `\u0001`): its request is refused at launch past the launch line's 8 MiB
/// ([`MAX_LINE`]), and written pretty it gains indentation, so twice that. (Measured:
/// `tether exec -- true` with eleven 120,000-byte arguments of `\x01` writes a 7.9 MB
/// `command.json`; a twelfth argument is refused at launch.) An environment is not journaled.
pub const METADATA_LIMIT: u64 = 2 * MAX_LINE as u64;

/// A metadata file over its bound: skipped unread.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error(
    "{file} is {}, over the {} a journal's metadata may be; skipped",
    format_size(*size),
    format_size(*limit)
)]
pub struct Oversized {
    /// The file's name (`command.json`).
    pub file: String,
    /// Its size when it was found over the bound (at least `limit + 1`).
    pub size: u64,
    pub limit: u64,
}

/// Reads the metadata file at `path`, at most [`METADATA_LIMIT`] bytes. An oversized file
/// is an error of kind `FileTooLarge` carrying [`Oversized`] (see [`oversized`]).
pub fn read_metadata(path: &Path) -> io::Result<Vec<u8>> {
    let name = path
        .file_name()
        .map_or_else(|| path.to_string_lossy(), |n| n.to_string_lossy());
    read_bounded(open_regular(path)?, &name, METADATA_LIMIT)
}

/// [`read_metadata`] of the file `name` in the opened directory `dir`.
pub fn read_metadata_at(dir: &impl AsFd, name: &str) -> io::Result<Vec<u8>> {
    read_bounded(open_regular_at(dir, name)?, name, METADATA_LIMIT)
}

/// Reads `file` whole if it holds at most `limit` bytes, allocating no more than its size
/// (and never more than `limit`): its size is taken before any read, and a file that grows
/// while it is read is cut at `limit + 1` bytes and refused.
pub fn read_bounded(file: File, name: &str, limit: u64) -> io::Result<Vec<u8>> {
    let size = file.metadata()?.len();
    if size > limit {
        return Err(too_large(name, size, limit));
    }
    // `size` fits: it is at most `limit`, which the caller could allocate.
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    file.take(limit + 1).read_to_end(&mut bytes)?;
    let read = bytes.len() as u64;
    if read > limit {
        return Err(too_large(name, read, limit));
    }
    Ok(bytes)
}

/// The [`Oversized`] an error of [`read_metadata`] carries, if that is why it failed.
pub fn oversized(err: &io::Error) -> Option<&Oversized> {
    err.get_ref()?.downcast_ref::<Oversized>()
}

fn too_large(name: &str, size: u64, limit: u64) -> io::Error {
    io::Error::new(
        io::ErrorKind::FileTooLarge,
        Oversized {
            file: name.to_string(),
            size,
            limit,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_oversized_file_is_refused_by_its_size_without_reading_it() {
        let dir = crate::testing::private_tempdir();
        let path = dir.path().join("command.json");
        // Sparse: 3 GiB that take no disk and would take 3 GiB of memory to read.
        crate::testing::create_private(&path)
            .set_len(3 << 30)
            .unwrap();
        let err = read_metadata(&path).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::FileTooLarge);
        assert_eq!(
            err.to_string(),
            "command.json is 3.0 GiB, over the 16.0 MiB a journal's metadata may be; skipped"
        );
        assert_eq!(
            oversized(&err),
            Some(&Oversized {
                file: "command.json".into(),
                size: 3 << 30,
                limit: METADATA_LIMIT,
            })
        );
        let opened = crate::journal::secure::open_dir_nofollow(dir.path()).unwrap();
        let err = read_metadata_at(&opened, "command.json").unwrap_err();
        assert!(oversized(&err).is_some(), "{err}");
    }

    #[test]
    fn a_file_at_the_bound_is_read_and_one_past_it_is_not() {
        let dir = crate::testing::private_tempdir();
        let path = dir.path().join("result.json");
        crate::testing::write_private(&path, b"0123456789");
        let open = || open_regular(&path).unwrap();
        assert_eq!(
            read_bounded(open(), "result.json", 10).unwrap(),
            b"0123456789"
        );
        let err = read_bounded(open(), "result.json", 9).unwrap_err();
        assert_eq!(oversized(&err).map(|o| o.size), Some(10));
    }

    #[test]
    fn a_fifo_or_a_link_is_refused_without_blocking() {
        let dir = crate::testing::private_tempdir();
        let fifo = dir.path().join("session.json");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        assert!(read_metadata(&fifo).is_err());
        let link = dir.path().join("command.json");
        std::os::unix::fs::symlink("/etc/passwd", &link).unwrap();
        assert!(read_metadata(&link).is_err());
    }
}
