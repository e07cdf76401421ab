//! `tether init`: a commented example `tether.toml` in the current directory, to edit.

use std::fs::OpenOptions;
use std::io::Write as _;
use std::os::unix::fs::{FileTypeExt as _, OpenOptionsExt as _};
use std::path::Path;

use tether::config::example::EXAMPLE_TOML;

const FILE: &str = "tether.toml";

/// Writes the example as ./tether.toml; an existing file is kept unless `force`. Exit code 0
/// written, 2 kept, 1 the write failed.
pub fn main(force: bool) -> i32 {
    let mut options = OpenOptions::new();
    // A link named tether.toml is not followed to overwrite whatever it points at.
    // 0600 whatever the umask: a tether.toml gathers commands' environments, tokens included.
    // O_NONBLOCK: a FIFO named tether.toml is not waited on for a reader (`--force`).
    options
        .write(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
    if force {
        options.create(true).truncate(true);
    } else {
        // Made only if absent, in one step: nothing written between a check and the write
        // can be lost.
        options.create_new(true);
    }
    let written = options
        .open(Path::new(FILE))
        .map_err(|err| match err.raw_os_error() {
            // What cannot be opened for writing without a reader: a FIFO, or a socket.
            Some(libc::ENXIO) => std::io::Error::other(
                match std::fs::symlink_metadata(FILE).map(|m| m.file_type()) {
                    Ok(kind) if kind.is_socket() => {
                        "it is a socket; remove it or run `tether init` elsewhere"
                    }
                    _ => "it is a FIFO (named pipe) nothing reads; remove it or run `tether init` elsewhere",
                },
            ),
            _ => err,
        })
        .and_then(|file| match file.metadata() {
            Ok(meta) if !meta.is_file() => Err(std::io::Error::other(
                "it is not a regular file; remove it or run `tether init` elsewhere",
            )),
            _ => Ok(file),
        })
        .and_then(|mut file| file.write_all(EXAMPLE_TOML.as_bytes()));
    match written {
        Ok(()) => {
            println!(
                "tether: wrote ./{FILE}: four example commands (db, migrate, web, worker) to \
                 replace with yours; run `tether` in this directory to start them"
            );
            0
        }
        Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => {
            eprintln!(
                "tether: ./{FILE} already exists; left as it is (`tether init --force` \
                 replaces it)"
            );
            2
        }
        Err(err) => {
            eprintln!("tether: cannot write ./{FILE}: {err}");
            1
        }
    }
}
