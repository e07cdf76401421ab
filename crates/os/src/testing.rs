//! For tests, the crate's own and the end-to-end ones: what a test does when it cannot run
//! here (no cgroup v2, not root, no dbus). It says so, and where tests must run (`CI`, or
//! `TETHER_TESTS_MUST_RUN`, which `.ci/run` sets) it fails: a test that did not run never
//! passes there.

/// The variable that makes a test that cannot run here fail (anything but `0`, `false` or
/// empty); `CI` does the same.
pub const MUST_RUN_VAR: &str = "TETHER_TESTS_MUST_RUN";

/// Whether a test that cannot run here must fail.
pub fn must_run() -> bool {
    [MUST_RUN_VAR, "CI"]
        .iter()
        .any(|var| std::env::var(var).is_ok_and(|v| !matches!(v.trim(), "" | "0" | "false")))
}

/// Says why a test cannot run here: a panic where tests must run, else a line on stderr.
/// The caller returns after it.
#[track_caller]
pub fn skip(reason: impl std::fmt::Display) {
    if must_run() {
        panic!("this test cannot run here: {reason} ({MUST_RUN_VAR} or CI is set: it must)");
    }
    eprintln!("skipped: {reason}");
}

/// A script at `path` with `mode`, written by a child process, never through a descriptor of
/// this process: a test on another thread that forks while one is open for writing hands it
/// to its child, and until that child execs, running the script fails with ETXTBSY ("text
/// file busy"). Made 0600 (`umask 077`), then given `mode`.
pub fn write_script(path: &std::path::Path, text: &str, mode: u32) {
    use std::io::Write;
    use std::os::unix::fs::PermissionsExt;
    let mut writer = std::process::Command::new("sh")
        .args(["-c", "umask 077; cat > \"$1\"", "sh"])
        .arg(path)
        .stdin(std::process::Stdio::piped())
        .spawn()
        .expect("start sh to write the script");
    let mut stdin = writer.stdin.take().expect("its stdin");
    stdin.write_all(text.as_bytes()).expect("write the script");
    drop(stdin);
    assert!(writer.wait().expect("sh ends").success(), "write {path:?}");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

/// Writes `bytes` to the file at `path` (created or emptied), 0600 whatever the umask: what a
/// test puts in a journal's place is kept as tether keeps journals.
pub fn write_private(path: impl AsRef<std::path::Path>, bytes: impl AsRef<[u8]>) {
    let path = path.as_ref();
    use std::io::Write;
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .expect("create a private file");
    file.write_all(bytes.as_ref())
        .expect("write a private file");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
}

/// A new file at `path` (or the one there, emptied), 0600 whatever the umask, open for
/// writing: a journal a test writes a piece at a time.
pub fn create_private(path: impl AsRef<std::path::Path>) -> std::fs::File {
    let path = path.as_ref();
    write_private(path, b"");
    std::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .expect("open a private file")
}

/// Creates the directory `path` and any parents missing, 0700 whatever the umask.
pub fn private_dir(path: impl AsRef<std::path::Path>) {
    let path = path.as_ref();
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)
        .expect("create a private directory");
}

/// Opens `path` to other users with `mode` (0755, 0644, 0777): a fixture of what tether
/// refuses or narrows, as an older tether or another user could have left it. Only below a
/// directory of this user's that no one else may enter (asserted: a scratch directory of
/// [`private_tempdir`]), so that nothing is open to anyone while the test runs.
pub fn loosen(path: impl AsRef<std::path::Path>, mode: u32) {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let path = path.as_ref();
    let uid = nix::unistd::geteuid().as_raw();
    let shut = (path.ancestors().skip(1)).any(|dir| {
        std::fs::metadata(dir).is_ok_and(|meta| meta.uid() == uid && meta.mode() & 0o077 == 0)
    });
    assert!(
        shut,
        "{} is not below a directory of ours closed to others: loosen only inside one",
        path.display()
    );
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

/// A new scratch directory in the temporary directory (`TMPDIR`), 0700 whatever the umask:
/// tempfile makes directories with the default mode, which the usual umask leaves readable
/// by every user. Removed when dropped.
pub fn private_tempdir() -> tempfile::TempDir {
    private_tempdir_in(std::env::temp_dir())
}

/// [`private_tempdir`] in `dir`.
pub fn private_tempdir_in(dir: impl AsRef<std::path::Path>) -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    tempfile::Builder::new()
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir_in(dir)
        .expect("create a private scratch directory")
}

/// Copies the directory tree `from` to `to` (a fixture session into a test's own space),
/// private as tether keeps journals: directories 0700, files 0600, whatever the umask and
/// the modes the fixture has in the checkout.
pub fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(to)
        .expect("create the copy");
    std::fs::set_permissions(to, std::fs::Permissions::from_mode(0o700)).expect("make it private");
    for entry in std::fs::read_dir(from).expect("read the tree to copy") {
        let entry = entry.expect("an entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("its type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy a file");
            std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o600))
                .expect("make it private");
        }
    }
}

/// Another process holding `flock`'s exclusive lock on a file, as another broker would:
/// `flock -o`, whose shell waits for a line, so that its release is real. A descriptor of
/// the test's own process would be copied into any child another test forks meanwhile, and
/// the lock, which its open file holds, would outlive our close until that child ends (a
/// keeper never execs). Let go when dropped.
pub struct LockHolder(std::process::Child);

impl LockHolder {
    /// Takes the lock on `path` (which must exist: flock would make it with the umask's
    /// mode), waiting for it.
    pub fn lock(path: &std::path::Path) -> LockHolder {
        use std::io::Read;
        let mut child = std::process::Command::new("flock")
            .args(["-x", "-o"])
            .arg(path)
            .args(["-c", "echo locked; read -r _"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("flock (util-linux)");
        let mut said = [0u8; 7];
        let mut stdout = child.stdout.take().expect("flock's stdout");
        stdout
            .read_exact(&mut said)
            .expect("flock says it holds the lock");
        assert_eq!(&said, b"locked\n");
        LockHolder(child)
    }
}

impl Drop for LockHolder {
    /// Its shell reads its line and ends, and flock with it: the lock is free once it is
    /// waited for.
    fn drop(&mut self) {
        use std::io::Write;
        if let Some(mut stdin) = self.0.stdin.take() {
            let _ = stdin.write_all(b"\n");
        }
        let _ = self.0.wait();
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_a_set_variable_makes_a_skip_a_failure() {
        // The variable's reading, not the process's environment, which tests share.
        let set = |v: &str| !matches!(v.trim(), "" | "0" | "false");
        assert!(set("1") && set("true") && set("yes"));
        assert!(!set("") && !set("0") && !set("false"));
    }

    /// The scratch directories every crate's tests make are their user's alone.
    #[test]
    fn a_private_tempdir_is_0700() {
        let dir = super::private_tempdir();
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.path()).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700, "{mode:o}");
    }

    /// A fixture opened to others is only ever opened below a directory closed to them.
    #[test]
    fn loosen_opens_only_below_a_private_directory() {
        use std::os::unix::fs::PermissionsExt;
        let dir = super::private_tempdir();
        let inner = dir.path().join("inner");
        super::private_dir(&inner);
        super::loosen(&inner, 0o755);
        let mode = std::fs::metadata(&inner).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o755);
        // Below `/` (0755) and nothing of ours: refused before any chmod.
        let outside = std::panic::catch_unwind(|| super::loosen("/no-such-tether-dir/x", 0o644));
        assert!(outside.is_err());
    }
}
