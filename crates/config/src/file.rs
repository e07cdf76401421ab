//! Reading a file the operator named (`tether -f FILE`, `./tether.toml`, a Procfile and the
//! `.env` beside it, the user config) as the journal's readers read theirs: opened without
//! waiting, so that a FIFO in its place is refused at once instead of holding tether in
//! `open` until something writes to it, and read only if it is a regular file (a device such
//! as `/dev/zero` never ends).
//!
//! Unlike a journal's file, a link is followed: a config kept in a dotfiles repository and
//! linked into place is common, and the operator chose the path; what the link leads to must
//! be a regular file all the same.

use std::fs::{FileType, OpenOptions};
use std::io::Read as _;
use std::os::unix::fs::{FileTypeExt as _, OpenOptionsExt as _};
use std::path::Path;

use super::{ConfigError, FileKind};

/// The most bytes a config, Procfile or `.env` may hold: far beyond any written by hand.
const MAX_TEXT: u64 = 16 << 20;

/// The text of the file at `path`, which is to be `what`. A file that is not there is a
/// [`ConfigError::Read`] whose `io` is `NotFound`, which the readers of optional files (the
/// `.env`, the user config) take as none; anything but a regular file is
/// [`ConfigError::NotRegular`].
pub(crate) fn read_text(path: &Path, what: FileKind) -> Result<String, ConfigError> {
    read(path, what, true)
}

/// [`read_text`] of a file nobody named for this run (the user config, read by every `tether
/// exec` and shim call): a pipe is refused too, since one held open by a writer that never
/// writes would hold every command an agent runs.
pub(crate) fn read_regular_text(path: &Path, what: FileKind) -> Result<String, ConfigError> {
    read(path, what, false)
}

fn read(path: &Path, what: FileKind, pipes: bool) -> Result<String, ConfigError> {
    let failed = |io| ConfigError::Read {
        what,
        path: path.to_path_buf(),
        io,
    };
    // O_NONBLOCK: opening a FIFO for reading otherwise waits for a writer. It changes
    // nothing for a regular file ("no effect for regular files and block devices", open(2)),
    // so the file is read as it was opened. O_NOCTTY: a terminal named by mistake does not
    // become tether's controlling terminal.
    let mut file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(failed)?;
    let metadata = file.metadata().map_err(failed)?;
    let file_type = metadata.file_type();
    if file_type.is_file() && metadata.len() > MAX_TEXT {
        // A file named by mistake (a log, a disk image) is not read into memory whole.
        return Err(failed(std::io::Error::other(format!(
            "it is {} bytes, and a config, Procfile or .env is read whole up to {} MiB: give the right file",
            metadata.len(),
            MAX_TEXT >> 20
        ))));
    }
    if file_type.is_fifo() && pipes {
        return read_pipe(file, path, what);
    }
    if !file_type.is_file() {
        return Err(ConfigError::NotRegular {
            what,
            path: path.to_path_buf(),
            found: NotRegular::of(file_type),
        });
    }
    // Bounded as it is read too: a log growing past the size it had at the fstat.
    let mut text = String::new();
    (&mut file)
        .take(MAX_TEXT)
        .read_to_string(&mut text)
        .map_err(failed)?;
    Ok(text)
}

/// A pipe the operator named: `tether -f <(generate)`, `/dev/stdin`. With a writer it is read
/// to its end, as a shell reads a script from one; with none (a FIFO nothing writes to) it is
/// refused at once: the open did not wait, and one read without waiting tells the two apart.
fn read_pipe(mut file: std::fs::File, path: &Path, what: FileKind) -> Result<String, ConfigError> {
    let failed = |io| ConfigError::Read {
        what,
        path: path.to_path_buf(),
        io,
    };
    let mut bytes = Vec::new();
    let mut first = [0u8; 8192];
    match file.read(&mut first) {
        // No writer has it open: nothing will ever come.
        Ok(0) => {
            return Err(ConfigError::NotRegular {
                what,
                path: path.to_path_buf(),
                found: NotRegular::Fifo,
            });
        }
        Ok(n) => bytes.extend_from_slice(&first[..n]),
        Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => {}
        Err(err) => return Err(failed(err)),
    }
    // A writer is there: wait for the rest, to its end.
    let flags =
        nix::fcntl::fcntl(&file, nix::fcntl::FcntlArg::F_GETFL).map_err(|e| failed(e.into()))?;
    let blocking = nix::fcntl::OFlag::from_bits_truncate(flags) & !nix::fcntl::OFlag::O_NONBLOCK;
    nix::fcntl::fcntl(&file, nix::fcntl::FcntlArg::F_SETFL(blocking))
        .map_err(|e| failed(e.into()))?;
    (&mut file)
        .take(MAX_TEXT + 1)
        .read_to_end(&mut bytes)
        .map_err(failed)?;
    if bytes.len() as u64 > MAX_TEXT {
        return Err(failed(std::io::Error::other(format!(
            "it holds more than {} MiB, the most a config, Procfile or .env is read whole up to",
            MAX_TEXT >> 20
        ))));
    }
    String::from_utf8(bytes)
        .map_err(|err| failed(std::io::Error::new(std::io::ErrorKind::InvalidData, err)))
}

/// What was found where a file was to be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotRegular {
    Directory,
    Fifo,
    Socket,
    CharDevice,
    BlockDevice,
    Other,
}

impl NotRegular {
    fn of(file_type: FileType) -> NotRegular {
        if file_type.is_dir() {
            NotRegular::Directory
        } else if file_type.is_fifo() {
            NotRegular::Fifo
        } else if file_type.is_socket() {
            NotRegular::Socket
        } else if file_type.is_char_device() {
            NotRegular::CharDevice
        } else if file_type.is_block_device() {
            NotRegular::BlockDevice
        } else {
            NotRegular::Other
        }
    }

    /// What to do instead, for the error's end.
    pub fn advice(self) -> &'static str {
        match self {
            NotRegular::Directory => {
                "give the path of a regular file, or move the directory out of the way"
            }
            NotRegular::Fifo => {
                "write the text to a regular file and use that, or give a pipe with a writer \
                 (`tether -f <(generate)`)"
            }
            NotRegular::Socket | NotRegular::CharDevice => {
                "tether reads the whole file before it starts anything: write the text to a \
                 regular file and use that"
            }
            NotRegular::BlockDevice | NotRegular::Other => "give the path of a regular file",
        }
    }
}

impl std::fmt::Display for NotRegular {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            NotRegular::Directory => "a directory",
            NotRegular::Fifo => "a FIFO (named pipe) that nothing writes to",
            NotRegular::Socket => "a socket",
            NotRegular::CharDevice => "a character device",
            NotRegular::BlockDevice => "a block device",
            NotRegular::Other => "not a file",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;
    use std::os::unix::ffi::OsStrExt as _;

    /// A new file at `path`, 0600 whatever the umask, for writing.
    fn private_file(path: &Path) -> std::fs::File {
        use std::os::unix::fs::OpenOptionsExt as _;
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
            .unwrap()
    }

    fn mkfifo(path: &Path) {
        let name = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
        // SAFETY: `name` is a NUL-terminated path that outlives the call.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0, "mkfifo");
    }

    /// A FIFO with no writer is refused at once (opened as before, the read would wait for
    /// ever); so is a directory and a device, each said as what it is, with what to do.
    #[test]
    fn anything_but_a_regular_file_is_refused_without_waiting() {
        let dir = tether_os::testing::private_tempdir();
        let fifo = dir.path().join("fifo.toml");
        mkfifo(&fifo);
        let refused = read_text(&fifo, FileKind::Config).unwrap_err();
        assert!(
            matches!(
                refused,
                ConfigError::NotRegular {
                    found: NotRegular::Fifo,
                    ..
                }
            ),
            "{refused:?}"
        );
        let message = refused.to_string();
        assert!(
            message.starts_with(&format!(
                "cannot read config file {}: it is a FIFO (named pipe) that nothing writes to, not a regular file; ",
                fifo.display()
            )),
            "{message}"
        );
        assert!(
            message.contains("write the text to a regular file"),
            "{message}"
        );

        let refused = read_text(dir.path(), FileKind::Procfile).unwrap_err();
        assert!(
            refused
                .to_string()
                .contains("is a directory, not a regular file; give the path of a regular file, or move the directory out of the way"),
            "{refused}"
        );
        let refused = read_text(Path::new("/dev/null"), FileKind::Dotenv).unwrap_err();
        assert!(
            refused
                .to_string()
                .starts_with("cannot read .env file /dev/null: it is a character device"),
            "{refused}"
        );
    }

    /// A link to a regular file is read (a config linked from a dotfiles repository); one to
    /// a FIFO is refused as the FIFO is.
    #[test]
    fn a_link_is_followed_to_what_it_names() {
        let dir = tether_os::testing::private_tempdir();
        let real = dir.path().join("real.toml");
        private_file(&real)
            .write_all(b"ordered_shutdown = true\n")
            .unwrap();
        let link = dir.path().join("tether.toml");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        assert_eq!(
            read_text(&link, FileKind::Config).unwrap(),
            "ordered_shutdown = true\n"
        );
        let fifo = dir.path().join("fifo");
        mkfifo(&fifo);
        let to_fifo = dir.path().join("to-fifo.toml");
        std::os::unix::fs::symlink(&fifo, &to_fifo).unwrap();
        assert!(matches!(
            read_text(&to_fifo, FileKind::Config),
            Err(ConfigError::NotRegular {
                found: NotRegular::Fifo,
                ..
            })
        ));
        let missing = read_text(&dir.path().join("none"), FileKind::Config).unwrap_err();
        assert!(
            matches!(&missing, ConfigError::Read { io, .. } if io.kind() == std::io::ErrorKind::NotFound),
            "{missing:?}"
        );
    }

    /// A pipe with a writer (`tether -f <(generate)`, `/dev/stdin`) is read to its end,
    /// whether its text is there when it is opened or comes after.
    #[test]
    fn a_pipe_with_a_writer_is_read_to_its_end() {
        use std::os::fd::AsRawFd as _;
        // Written and closed before it is read.
        let (read, write) = nix::unistd::pipe().unwrap();
        std::fs::File::from(write).write_all(b"a = 1\n").unwrap();
        let path = std::path::PathBuf::from(format!("/proc/self/fd/{}", read.as_raw_fd()));
        assert_eq!(read_text(&path, FileKind::Config).unwrap(), "a = 1\n");
        drop(read);
        // Its writer still there, nothing written yet: the text comes after.
        let (read, write) = nix::unistd::pipe().unwrap();
        let path = std::path::PathBuf::from(format!("/proc/self/fd/{}", read.as_raw_fd()));
        let writer = std::thread::spawn(move || {
            let mut write = std::fs::File::from(write);
            write.write_all(b"b = 2\n").unwrap();
        });
        assert_eq!(read_text(&path, FileKind::Config).unwrap(), "b = 2\n");
        writer.join().unwrap();
    }

    /// A file far larger than any config written by hand (a log named by mistake) is
    /// refused by its size, not read into memory whole.
    #[test]
    fn a_file_too_large_for_a_config_is_refused_by_its_size() {
        let dir = tether_os::testing::private_tempdir();
        let big = dir.path().join("big.toml");
        private_file(&big).set_len(MAX_TEXT + 1).unwrap();
        let refused = read_text(&big, FileKind::Config).unwrap_err().to_string();
        assert!(
            refused.contains(&format!("it is {} bytes", MAX_TEXT + 1)),
            "{refused}"
        );
    }

    /// The user config, which every `tether exec` and shim call reads, is never a pipe, even
    /// one with a writer: a writer that never ends would hold every command an agent runs.
    #[test]
    fn the_user_config_is_never_read_from_a_pipe() {
        use std::os::fd::AsRawFd as _;
        let (read, write) = nix::unistd::pipe().unwrap();
        let mut write = std::fs::File::from(write);
        write.write_all(b"a = 1\n").unwrap();
        let path = std::path::PathBuf::from(format!("/proc/self/fd/{}", read.as_raw_fd()));
        assert!(matches!(
            read_regular_text(&path, FileKind::Config),
            Err(ConfigError::NotRegular {
                found: NotRegular::Fifo,
                ..
            })
        ));
        drop(write);
    }
}
