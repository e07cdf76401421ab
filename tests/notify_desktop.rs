//! A desktop notification reaches `org.freedesktop.Notifications` on a session bus: a
//! private `dbus-daemon` (skipped, saying so, where none is installed; CI installs it) and a
//! small notification server in the test that records the `Notify` call.

// zbus is in the build with the cargo feature `desktop-notify` (a default one) only.
#![cfg(feature = "desktop-notify")]

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use tether::config::notify::DesktopNotify;
use tether::notify::Notice;
use tether::notify::desktop::{DesktopNotifier, send};
use tokio::sync::mpsc::{UnboundedSender, unbounded_channel};

/// What the server was told: application, summary, body, expiry.
type Seen = (String, String, String, i32);

struct NotificationServer {
    seen: UnboundedSender<Seen>,
}

#[zbus::interface(name = "org.freedesktop.Notifications")]
impl NotificationServer {
    #[allow(clippy::too_many_arguments)]
    fn notify(
        &self,
        app_name: String,
        _replaces_id: u32,
        _app_icon: String,
        summary: String,
        body: String,
        _actions: Vec<String>,
        _hints: HashMap<String, zbus::zvariant::OwnedValue>,
        expire_timeout: i32,
    ) -> u32 {
        let _ = self.seen.send((app_name, summary, body, expire_timeout));
        42
    }
}

/// A private session bus, ended (and reaped) when dropped.
struct Bus {
    daemon: Child,
    address: String,
    _dir: tempfile::TempDir,
}

impl Drop for Bus {
    fn drop(&mut self) {
        let _ = self.daemon.kill();
        let _ = self.daemon.wait();
    }
}

fn private_bus() -> Option<Bus> {
    let dir = tempfile::tempdir().unwrap();
    let listen = format!("unix:path={}", dir.path().join("bus").display());
    let daemon = Command::new("dbus-daemon")
        .args(["--session", "--nofork", "--nopidfile", "--print-address=1"])
        .arg(format!("--address={listen}"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn();
    let mut daemon = match daemon {
        Ok(daemon) => daemon,
        Err(err) => {
            tether::testing::skip(format!(
                "cannot run dbus-daemon ({err}); `apt-get install dbus` to run it"
            ));
            return None;
        }
    };
    // The address is printed once the bus listens.
    let mut line = String::new();
    let stdout = daemon.stdout.take().expect("piped");
    BufReader::new(stdout).read_line(&mut line).unwrap();
    assert!(line.starts_with("unix:"), "dbus-daemon said {line:?}");
    Some(Bus {
        daemon,
        address: line.trim().to_string(),
        _dir: dir,
    })
}

async fn serve(address: &str) -> (zbus::Connection, tokio::sync::mpsc::UnboundedReceiver<Seen>) {
    let (seen, calls) = unbounded_channel();
    let server = zbus::connection::Builder::address(address)
        .unwrap()
        .name("org.freedesktop.Notifications")
        .unwrap()
        .serve_at(
            "/org/freedesktop/Notifications",
            NotificationServer { seen },
        )
        .unwrap()
        .build()
        .await
        .expect("the test's notification server is on the bus");
    (server, calls)
}

#[tokio::test]
async fn a_notify_call_reaches_the_notification_server() {
    let Some(bus) = private_bus() else { return };
    let (_server, mut calls) = serve(&bus.address).await;
    let notice = Notice {
        title: "every-kind/02 needs input".into(),
        body: "fail: read(0) blocked; tether stop every-kind/02".into(),
    };
    let id = send(&bus.address, &notice).await.expect("sent");
    assert_eq!(id, 42, "the server's id comes back");
    let (app, summary, body, expiry) = calls.recv().await.expect("a call");
    assert_eq!(app, "tether");
    assert_eq!(summary, notice.title);
    assert_eq!(body, notice.body);
    assert_eq!(expiry, -1, "the server's own default");

    // Through the notifier, off the caller's way: the call is a task of its own.
    let (replies, mut said) = unbounded_channel();
    let notifier = DesktopNotifier::new(DesktopNotify::On, Some(bus.address.clone()), replies);
    notifier.notify(&notice);
    let call = tokio::time::timeout(Duration::from_secs(5), calls.recv()).await;
    assert!(call.expect("within 5 s").is_some());
    // Once the notifier and its tasks are done the channel closes: nothing was said.
    drop(notifier);
    let told = tokio::time::timeout(Duration::from_secs(5), said.recv())
        .await
        .expect("the channel closes within 5 s");
    assert_eq!(told, None, "nothing to say when it works");
}

#[tokio::test]
async fn a_bus_without_a_notification_server_is_said_once_when_asked_for() {
    let Some(bus) = private_bus() else { return };
    let notice = Notice {
        title: "t".into(),
        body: "b".into(),
    };
    let err = send(&bus.address, &notice).await.unwrap_err();
    assert!(err.to_string().contains("refused"), "{err}");
    let (replies, mut said) = unbounded_channel();
    let notifier = DesktopNotifier::new(DesktopNotify::On, Some(bus.address.clone()), replies);
    notifier.notify(&notice);
    notifier.notify(&notice);
    let first = tokio::time::timeout(Duration::from_secs(5), said.recv())
        .await
        .expect("said within 5 s")
        .expect("a message");
    assert!(first.starts_with("desktop notifications:"), "{first}");
    drop(notifier);
    let second = tokio::time::timeout(Duration::from_secs(5), said.recv())
        .await
        .expect("the channel closes within 5 s");
    assert_eq!(second, None, "said once");
}
