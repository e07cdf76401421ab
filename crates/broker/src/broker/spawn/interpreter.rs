//! Why exec said "no such file or directory" about a file that is there: the kernel says
//! so when the interpreter that the file's `#!` line names is missing, which sends people
//! looking for the wrong file.

use std::ffi::OsStr;
use std::fs::File;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::SpawnFailure;

/// How much of a file the kernel reads for its `#!` line (BINPRM_BUF_SIZE).
const SHEBANG_BYTES: usize = 256;

/// A `bad_interpreter` failure when exec's ENOENT was about `program`'s `#!` interpreter,
/// not `program`; None when `program` is not found or not a `#!` script. `cwd` is where the
/// command would have run, `path` the PATH it would have been looked up on.
pub fn diagnose(program: &str, cwd: Option<&Path>, path: Option<&OsStr>) -> Option<SpawnFailure> {
    let file = locate(program, cwd, path)?;
    let interpreter = interpreter_of(&file)?;
    let shown = interpreter.escape_debug();
    let message = if interpreter.ends_with('\r') {
        format!(
            "cannot run `{program}`: its #! line ends in a carriage return (Windows line endings), \
             so its interpreter `{shown}` was not found; save the file with Unix line endings"
        )
    } else if resolve(Path::new(&interpreter), cwd).exists() {
        format!(
            "cannot run `{program}`: its interpreter `{shown}` (from its #! line) could not be \
             started (no such file or directory); check that `{shown}` runs on its own"
        )
    } else {
        format!(
            "cannot run `{program}`: its interpreter `{shown}` (from its #! line) was not \
             found; fix the #! line or install it"
        )
    };
    Some(SpawnFailure {
        code: "bad_interpreter".into(),
        message,
    })
}

/// The file exec would have run for `program`: the path itself when it holds a slash, else
/// the first executable file of that name in a directory of `path`. Relative paths are
/// taken from `cwd`, as the command's exec takes them.
fn locate(program: &str, cwd: Option<&Path>, path: Option<&OsStr>) -> Option<PathBuf> {
    if program.contains('/') {
        let file = resolve(Path::new(program), cwd);
        return is_executable_file(&file).then_some(file);
    }
    std::env::split_paths(path?)
        .map(|dir| resolve(&dir.join(program), cwd))
        .find(|file| is_executable_file(file))
}

/// `path` as exec takes it: a relative one from `cwd`, the command's directory.
pub(super) fn resolve(path: &Path, cwd: Option<&Path>) -> PathBuf {
    match cwd {
        Some(cwd) if path.is_relative() => cwd.join(path),
        _ => path.to_path_buf(),
    }
}

fn is_executable_file(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The interpreter named by the file's `#!` line, as the kernel reads it: after `#!` and
/// any blanks, up to the next blank or the end of the line. None without a `#!` line, or
/// if the file cannot be read.
fn interpreter_of(file: &Path) -> Option<String> {
    let mut head = Vec::with_capacity(SHEBANG_BYTES);
    File::open(file)
        .ok()?
        .take(SHEBANG_BYTES as u64)
        .read_to_end(&mut head)
        .ok()?;
    let line = head.strip_prefix(b"#!")?;
    let line = line.split(|&b| b == b'\n').next().unwrap_or_default();
    let interpreter = line
        .split(|&b| b == b' ' || b == b'\t')
        .find(|word| !word.is_empty())?;
    Some(String::from_utf8_lossy(interpreter).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn script(dir: &Path, name: &str, text: &str) -> PathBuf {
        let file = dir.join(name);
        tether_os::testing::write_private(&file, text);
        fs::set_permissions(&file, fs::Permissions::from_mode(0o700)).unwrap();
        file
    }

    #[test]
    fn reads_the_interpreter_as_the_kernel_does() {
        let dir = tether_os::testing::private_tempdir();
        let cases = [
            ("#!/nonexistent/interp\n", Some("/nonexistent/interp")),
            (
                "#! /usr/bin/env  python3 -u\nprint()\n",
                Some("/usr/bin/env"),
            ),
            ("#!\t/bin/sh", Some("/bin/sh")),
            ("#!/bin/sh\r\n", Some("/bin/sh\r")),
            ("#!\n", None),
            ("echo hi\n", None),
            ("", None),
        ];
        for (text, expected) in cases {
            let file = script(dir.path(), "x", text);
            assert_eq!(interpreter_of(&file).as_deref(), expected, "{text:?}");
        }
    }

    #[test]
    fn a_missing_interpreter_is_named() {
        let dir = tether_os::testing::private_tempdir();
        script(dir.path(), "x", "#!/nonexistent/interp\n");
        let failure = diagnose("./x", Some(dir.path()), None).expect("a diagnosis");
        assert_eq!(failure.code, "bad_interpreter");
        assert_eq!(
            failure.message,
            "cannot run `./x`: its interpreter `/nonexistent/interp` (from its #! line) was not \
             found; fix the #! line or install it"
        );
    }

    #[test]
    fn found_on_path_and_relative_to_the_commands_directory() {
        let dir = tether_os::testing::private_tempdir();
        let bin = dir.path().join("bin");
        tether_os::testing::private_dir(&bin);
        script(&bin, "tool", "#!/nonexistent/interp\n");
        // A file of that name earlier on PATH that is not executable is passed over.
        tether_os::testing::write_private(dir.path().join("tool"), "#!/elsewhere\n");
        let path = std::env::join_paths([dir.path(), &bin]).unwrap();
        let failure = diagnose("tool", None, Some(&path)).expect("found on PATH");
        assert!(
            failure.message.contains("`/nonexistent/interp`"),
            "{failure:?}"
        );
        // `bin/tool` from the command's working directory, not the broker's.
        assert!(diagnose("bin/tool", Some(dir.path()), None).is_some());
        assert!(diagnose("tool", None, None).is_none());
    }

    #[test]
    fn windows_line_endings_are_called_out() {
        let dir = tether_os::testing::private_tempdir();
        script(dir.path(), "x", "#!/bin/sh\r\necho hi\r\n");
        let failure = diagnose("./x", Some(dir.path()), None).expect("a diagnosis");
        assert!(
            failure.message.contains("carriage return") && failure.message.contains(r"`/bin/sh\r`"),
            "{failure:?}"
        );
        assert!(
            !failure.message.contains('\r'),
            "a raw CR would garble the message"
        );
    }

    #[test]
    fn no_diagnosis_for_missing_programs_or_other_files() {
        let dir = tether_os::testing::private_tempdir();
        assert!(diagnose("./missing", Some(dir.path()), None).is_none());
        script(dir.path(), "binary", "\x7fELF");
        assert!(diagnose("./binary", Some(dir.path()), None).is_none());
        let file = dir.path().join("not-executable");
        tether_os::testing::write_private(&file, "#!/nonexistent/interp\n");
        assert!(diagnose("./not-executable", Some(dir.path()), None).is_none());
    }

    #[test]
    fn an_interpreter_that_exists_but_does_not_start() {
        let dir = tether_os::testing::private_tempdir();
        let broken = script(dir.path(), "broken-interp", "#!/nonexistent/deeper\n");
        script(dir.path(), "x", &format!("#!{}\n", broken.display()));
        let failure = diagnose("./x", Some(dir.path()), None).expect("a diagnosis");
        assert_eq!(failure.code, "bad_interpreter");
        assert!(
            failure.message.contains("could not be started"),
            "{failure:?}"
        );
    }
}
