//! `tether export --follow` as a command: its usage errors, the endpoint it needs, its
//! `--status` with no follower running. (Sending is tested in the library with a fake sink,
//! and against a real receiver where the OTLP sender is built in.)

use crate::common;

use std::process::{Command, Output};

use common::{TestEnv, run_to_end};

fn follow(env: &TestEnv, args: &[&str], endpoint: Option<&str>) -> Output {
    let mut command: Command = env.tether(args);
    for name in [
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    ] {
        command.env_remove(name);
    }
    if let Some(endpoint) = endpoint {
        command.env("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint);
    }
    run_to_end(env, command, &format!("tether {args:?}"))
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn follow_with_a_session_format_or_output_is_a_usage_error() {
    let env = TestEnv::new("follow-usage");
    for args in [
        &["export", "--follow", "some-session"][..],
        &["export", "--follow", "--format", "jsonl"],
        &["export", "--follow", "-o", "out.json"],
        &["export", "--once"],
        &["export", "--follow", "--once", "--status"],
    ] {
        let output = follow(&env, args, Some("http://127.0.0.1:9"));
        assert_eq!(
            output.status.code(),
            Some(2),
            "{args:?}: {}",
            stderr(&output)
        );
        assert!(
            stderr(&output).contains("Usage"),
            "{args:?}: {}",
            stderr(&output)
        );
    }
    env.finish();
}

#[test]
fn follow_without_an_endpoint_says_where_to_give_one() {
    let env = TestEnv::new("follow-no-endpoint");
    let output = follow(&env, &["export", "--follow", "--once"], None);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains(
            "no endpoint: give --endpoint URL, set OTEL_EXPORTER_OTLP_ENDPOINT or [export.otlp] endpoint"
        ),
        "{}",
        stderr(&output)
    );
    env.finish();
}

#[test]
fn status_without_a_follower_says_none_ran() {
    let env = TestEnv::new("follow-status");
    let output = follow(
        &env,
        &[
            "export",
            "--follow",
            "--status",
            "--endpoint",
            "http://127.0.0.1:9",
        ],
        None,
    );
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        String::from_utf8_lossy(&output.stdout)
            .contains("no follower has sent to http://127.0.0.1:9/v1/traces"),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );
    env.finish();
}
