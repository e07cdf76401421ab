//! Tries run for real (a socket) on a current-thread runtime, as the
//! broker's loop runs them.

use std::time::Duration;

use super::*;

/// What the tries here are given: far more than a loaded machine needs.
const DEADLINE: Duration = Duration::from_secs(30);

fn probes(cwd: Option<&str>) -> Probes {
    let tag = format!("probes-unit-{}", std::process::id());
    Probes {
        going: None,
        keeper: None,
        shell: exec::Shell::for_tests(cwd, &[("TEST_TAG_TETHER", &tag)]),
    }
}

#[tokio::test(flavor = "current_thread")]
async fn localhost_reaches_a_server_that_listens_on_ipv6_loopback_only() {
    let listener = std::net::TcpListener::bind("[::1]:0").expect("this machine has ::1");
    let port = listener.local_addr().expect("its address").port();
    let mut probes = probes(None);
    let probe = ReadyProbe::Tcp {
        host: "localhost".into(),
        port,
    };
    probes.start(1, &probe, DEADLINE);
    let answer = tokio::time::timeout(DEADLINE, probes.answer()).await;
    assert_eq!(
        answer.expect("an answer"),
        (1, Ok(format!("connected to [::1]:{port}")))
    );
    drop(listener);
}
