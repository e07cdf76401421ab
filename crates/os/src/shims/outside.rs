//! What tether runs on the operator's behalf (the `[notify] command`) runs outside the
//! shims: with every shims directory taken off `PATH` (whoever put it there: `tether agent`,
//! or the user by hand) and none of tether's `TETHER_*` variables, so that its `sh` is the
//! real shell and nothing it runs is brokered into a session, or notifies in its turn. A
//! shims directory is known by what it holds (a link named like a shell that leads to a
//! tether binary, as `tether shims` makes), not by its name.
//!
//! And, should a shim be called in such a run all the same (by its full path), it runs the
//! real shell unbrokered: it finds that its session's leader is a notify run's keeper
//! ([`inside_notify_run`]).

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use super::Shell;
use super::links::{Found, inspect};

/// The prefix of every variable tether sets or reads.
const TETHER_PREFIX: &[u8] = b"TETHER_";

/// `environment` as a run outside the shims gets it: no `TETHER_*` variable, and `PATH`
/// without the directories `is_shims` says are shims directories.
pub fn environment_outside(
    environment: impl IntoIterator<Item = (OsString, OsString)>,
    is_shims: impl Fn(&Path) -> bool,
) -> Vec<(OsString, OsString)> {
    environment
        .into_iter()
        .filter(|(key, _)| !key.as_bytes().starts_with(TETHER_PREFIX))
        .map(|(key, value)| {
            let value = match key == "PATH" {
                true => path_without(&value, &is_shims),
                false => value,
            };
            (key, value)
        })
        .collect()
}

/// `path` (a `PATH` value) without the entries `is_shims` says are shims directories; the
/// other entries as they were, in order (an empty one, the current directory, too).
fn path_without(path: &OsStr, is_shims: impl Fn(&Path) -> bool) -> OsString {
    let kept: Vec<&[u8]> = path
        .as_bytes()
        .split(|b| *b == b':')
        .filter(|entry| !is_shims(Path::new(OsStr::from_bytes(entry))))
        .collect();
    OsStr::from_bytes(&kept.join(&b':')).to_os_string()
}

/// Whether `dir` is a shims directory: a link named like a shell in it leads to this tether
/// binary (`exe`, canonical) or to another tether build.
pub fn is_shims_dir(dir: &Path, exe: &Path) -> bool {
    Shell::ALL.iter().any(|shell| {
        matches!(
            inspect(&dir.join(shell.name()), exe),
            Found::Ours | Found::OtherTether
        )
    })
}

/// This process's environment as a run outside the shims gets it (see
/// [`environment_outside`]).
pub fn this_environment_outside() -> Vec<(OsString, OsString)> {
    let exe = std::env::current_exe().and_then(|p| p.canonicalize()).ok();
    environment_outside(std::env::vars_os(), |dir| {
        exe.as_deref().is_some_and(|exe| is_shims_dir(dir, exe))
    })
}

/// Whether this process runs inside a notify run: its session's leader is a keeper (named
/// `tether-notify`, see the broker crate's `attention::notify`) that runs this very program, as a keeper
/// (a fork of its broker, which never execs) does. The name alone would let a command run its
/// shell calls unjournaled by naming a session leader so. One `getsid`, a small read and two
/// `stat`s.
pub fn inside_notify_run() -> bool {
    nix::unistd::getsid(None).is_ok_and(|sid| {
        crate::procfs::runs_this_program_as(sid.as_raw(), tether_protocol::names::KEEPER_COMM)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        pairs
            .iter()
            .map(|(k, v)| (OsString::from(k), OsString::from(v)))
            .collect()
    }

    #[test]
    fn no_tether_variable_and_no_shims_directory_on_path() {
        let given = env(&[
            ("TETHER_SESSION", "s"),
            ("TETHER_BROKER_ID", "b"),
            ("TETHER_STATE_DIR", "/st"),
            ("HOME", "/home/u"),
            ("PATH", "/agent/shims:/usr/bin::/by-hand/shims:/bin"),
            ("MY_TETHER_NOTE", "kept"),
        ]);
        let shims = |dir: &Path| dir.ends_with("shims");
        assert_eq!(
            environment_outside(given, shims),
            env(&[
                ("HOME", "/home/u"),
                ("PATH", "/usr/bin::/bin"),
                ("MY_TETHER_NOTE", "kept"),
            ])
        );
    }

    #[test]
    fn a_shims_directory_is_known_by_its_links_not_its_name() {
        let tmp = crate::testing::private_tempdir();
        let exe = tmp.path().join("bin/tether");
        crate::testing::private_dir(exe.parent().unwrap());
        crate::testing::write_private(&exe, "");
        let exe = exe.canonicalize().unwrap();
        let by_hand = tmp.path().join("anything");
        crate::testing::private_dir(&by_hand);
        std::os::unix::fs::symlink(&exe, by_hand.join("bash")).unwrap();
        let other_build = tmp.path().join("other");
        crate::testing::private_dir(&other_build);
        std::os::unix::fs::symlink("/old/target/release/tether", other_build.join("sh")).unwrap();
        let named_shims = tmp.path().join("shims");
        crate::testing::private_dir(&named_shims);
        std::os::unix::fs::symlink("/bin/dash", named_shims.join("sh")).unwrap();
        assert!(is_shims_dir(&by_hand, &exe));
        assert!(is_shims_dir(&other_build, &exe));
        assert!(!is_shims_dir(&named_shims, &exe), "a name is not enough");
        assert!(!is_shims_dir(Path::new("/nonexistent"), &exe));
    }

    #[test]
    fn a_test_process_is_no_notify_run() {
        assert!(!inside_notify_run());
    }
}
