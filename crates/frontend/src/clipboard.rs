//! Copying text out of the TUI (`y`): to the operator's clipboard through OSC 52, which tether
//! writes to its own terminal, and to a file whose path the status line shows.
//!
//! The file is always written too: no terminal answers whether it took an OSC 52 (tmux drops
//! it with `set-clipboard off`, many terminals ignore it, some cap its size), so a copy that
//! may have gone nowhere must land somewhere the operator can find. It lives next to the
//! control sockets, in the socket directory (`$XDG_RUNTIME_DIR/tether/`, see `socket_dir`),
//! which is ours and closed to others (checked as for the sockets), created 0600 and replaced
//! whole: what was copied is output of the operator's own commands, which only they may read.

use std::io;
use std::path::{Path, PathBuf};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

use crate::control::socket_dir;
use tether_os::journal::JournalDir;
use tether_protocol::units::format_size;

/// The most text sent through OSC 52: 100,000 bytes once base64-encoded, under what the
/// common terminals take (xterm, tmux and kitty accept at least this much; hterm stops at
/// about 100 KB). Larger copies go to the file only; a clipboard that silently held the
/// first part would be worse than none.
pub const OSC52_MAX_TEXT: usize = 75_000;

/// The most text copied at all (the file's size limit); a selection beyond it is cut there.
pub const COPY_MAX_TEXT: usize = 16 << 20;

pub const FILE_NAME: &str = "clipboard.txt";

/// The OSC 52 sequence that puts `text` on the clipboard, or `None` when it is over
/// [`OSC52_MAX_TEXT`]. The payload is base64, so nothing of the text reaches the terminal as
/// anything but letters, digits, `+`, `/` and `=`.
pub fn osc52(text: &str) -> Option<String> {
    if text.len() > OSC52_MAX_TEXT {
        return None;
    }
    Some(format!("\x1b]52;c;{}\x1b\\", STANDARD.encode(text)))
}

/// Writes `text` to `dir/clipboard.txt`, 0600, replacing what was there (a temporary file
/// made with `O_EXCL | O_NOFOLLOW`, then renamed over it: a planted file or link is never
/// written through). `dir` is made 0700 if missing, and must be ours and closed to others.
pub fn write_file(dir: &Path, text: &str) -> io::Result<PathBuf> {
    let dirfd = socket_dir::prepare(dir).map_err(io::Error::other)?;
    // The same private, link-proof replacement as a journal's result.
    let private = JournalDir::from_fd(dirfd, dir.to_path_buf()).map_err(io::Error::other)?;
    private
        .write_atomic(FILE_NAME, text.as_bytes())
        .map_err(|err| {
            io::Error::new(
                err.kind(),
                format!("cannot write {}: {err}", dir.join(FILE_NAME).display()),
            )
        })?;
    Ok(dir.join(FILE_NAME))
}

/// The outcome of one copy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Copy {
    /// Bytes for tether to write to its own terminal, if the text fits OSC 52.
    pub terminal: Option<String>,
    /// One line for the status bar: what was copied, and where to.
    pub message: String,
}

/// Copies `text`, described as `what` ("line 12", "3 lines", "the screen"), through OSC 52 and
/// to the file in `dir`. `cut` says the text was cut at [`COPY_MAX_TEXT`].
pub fn copy(text: &str, what: &str, cut: bool, dir: &Path) -> Copy {
    let terminal = osc52(text);
    let file = write_file(dir, text);
    let size = format_size(text.len() as u64);
    let cut = if cut {
        format!(" (cut at {})", format_size(COPY_MAX_TEXT as u64))
    } else {
        String::new()
    };
    let message = match (&terminal, file) {
        (Some(_), Ok(path)) => format!(
            "copied {what} ({size}){cut} to the clipboard (OSC 52) and to {}",
            path.display()
        ),
        (Some(_), Err(err)) => {
            format!("copied {what} ({size}){cut} to the clipboard (OSC 52); no file copy: {err}")
        }
        (None, Ok(path)) => format!(
            "copied {what} ({size}){cut} to {}: over the {} a terminal clipboard takes",
            path.display(),
            format_size(OSC52_MAX_TEXT as u64)
        ),
        (None, Err(err)) => format!(
            "nothing copied: {what} ({size}) is over the {} a terminal clipboard takes, and {err}",
            format_size(OSC52_MAX_TEXT as u64)
        ),
    };
    Copy { terminal, message }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn osc52_is_base64_between_the_introducer_and_st() {
        assert_eq!(osc52("").unwrap(), "\x1b]52;c;\x1b\\");
        assert_eq!(osc52("hello").unwrap(), "\x1b]52;c;aGVsbG8=\x1b\\");
        assert_eq!(osc52("é\n\x1b").unwrap(), "\x1b]52;c;w6kKGw==\x1b\\");
        // RFC 4648's test vectors.
        for (plain, encoded) in [
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(osc52(plain).unwrap(), format!("\x1b]52;c;{encoded}\x1b\\"));
        }
    }

    #[test]
    fn osc52_has_a_size_limit() {
        let most = "x".repeat(OSC52_MAX_TEXT);
        let sequence = osc52(&most).expect("at the limit");
        assert_eq!(sequence.len(), 7 + 100_000 + 2);
        assert!(
            sequence[7..sequence.len() - 2]
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"+/=".contains(&b))
        );
        assert_eq!(osc52(&format!("{most}x")), None);
    }

    #[test]
    fn the_file_is_private_and_replaced_whole() {
        let dir = tether_os::testing::private_tempdir();
        let clip = dir.path().join("tether");
        let path = write_file(&clip, "first, longer text").unwrap();
        assert_eq!(path, clip.join(FILE_NAME));
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&clip), 0o700);
        assert_eq!(mode(&path), 0o600);
        write_file(&clip, "second").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "second");
        assert_eq!(
            std::fs::read_dir(&clip).unwrap().count(),
            1,
            "a temporary left"
        );
    }

    /// A clipboard directory `tether` in `parent`, made beforehand with `mode`.
    fn clip_dir(parent: &Path, mode: u32) -> PathBuf {
        let clip = parent.join("tether");
        tether_os::testing::private_dir(&clip);
        tether_os::testing::loosen(&clip, mode);
        clip
    }

    #[test]
    fn a_link_in_place_of_the_file_is_replaced_not_followed() {
        let dir = tether_os::testing::private_tempdir();
        let clip = clip_dir(dir.path(), 0o700);
        let target = dir.path().join("target");
        tether_os::testing::write_private(&target, "untouched");
        std::os::unix::fs::symlink(&target, clip.join(FILE_NAME)).unwrap();
        write_file(&clip, "copied").unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "untouched");
        assert_eq!(
            std::fs::read_to_string(clip.join(FILE_NAME)).unwrap(),
            "copied"
        );
    }

    #[test]
    fn a_directory_open_to_others_is_refused() {
        let dir = tether_os::testing::private_tempdir();
        let clip = clip_dir(dir.path(), 0o755);
        let err = write_file(&clip, "secret").unwrap_err();
        assert!(err.to_string().contains("chmod 700"), "{err}");
        assert!(!clip.join(FILE_NAME).exists());
    }

    #[test]
    fn messages_say_where_the_text_went() {
        let dir = tether_os::testing::private_tempdir();
        let clip = dir.path().join("tether");
        let small = copy("one line", "line 3", false, &clip);
        assert_eq!(small.terminal.as_deref(), osc52("one line").as_deref());
        assert!(
            small
                .message
                .starts_with("copied line 3 (8 B) to the clipboard (OSC 52) and to "),
            "{}",
            small.message
        );
        let big = copy(&"y".repeat(OSC52_MAX_TEXT + 1), "2 lines", true, &clip);
        assert_eq!(big.terminal, None);
        assert!(big.message.contains("over the"), "{}", big.message);
        assert!(big.message.contains("cut at"), "{}", big.message);
        assert_eq!(
            std::fs::metadata(clip.join(FILE_NAME)).unwrap().len(),
            OSC52_MAX_TEXT as u64 + 1
        );
    }
}
