//! What a build without a default cargo feature does (README: Install). The default build
//! checks the help's listing; `cargo test --no-default-features --test suite features::` also
//! checks the refusal, as `.ci/run` does.

use crate::common;

use common::{TestEnv, run_to_end};

/// `tether mcp` is in the help of every build: where it is not built in, its line says so.
#[test]
fn mcp_is_listed_in_every_build() {
    let env = TestEnv::new("features-help");
    let out = run_to_end(&env, env.tether(&["--help"]), "tether --help");
    assert!(out.status.success(), "{out:?}");
    let help = String::from_utf8_lossy(&out.stdout);
    let line = help
        .lines()
        .find(|l| l.trim_start().starts_with("mcp "))
        .unwrap_or_else(|| panic!("no `mcp` line in the help:\n{help}"));
    assert_eq!(
        line.contains("not in this build"),
        cfg!(not(feature = "mcp")),
        "{line}"
    );
    env.finish();
}

/// Without the feature, `tether mcp` says why and exits 2, writing nothing to stdout (an MCP
/// client reads protocol there, and logs stderr).
#[cfg(not(feature = "mcp"))]
#[test]
fn without_mcp_the_subcommand_says_why_and_exits_2() {
    let env = TestEnv::new("features-mcp");
    let out = run_to_end(&env, env.tether(&["mcp"]), "tether mcp");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(out.stdout.is_empty(), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("cargo feature `mcp`"), "{stderr}");
    env.finish();
}
