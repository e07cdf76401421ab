//! Desktop notifications over D-Bus: a `Notify` call to `org.freedesktop.Notifications` on
//! the session bus (`$DBUS_SESSION_BUS_ADDRESS`), through zbus on the front end's own tokio
//! runtime: each call is a task of its own with a timeout, never in the event loop's way.
//! Without a bus there is nothing to send to, and nothing is said unless the user config
//! asked for them (`[notify] desktop = true`): then once, in the status line. A build
//! without the cargo feature `desktop-notify` (and so without zbus) has nothing to send
//! with: `auto` is then off, and `true` says so the same way.

#[cfg(feature = "desktop-notify")]
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use thiserror::Error;
use tokio::sync::mpsc::UnboundedSender;
#[cfg(feature = "desktop-notify")]
use zbus::zvariant::Value;

use super::Notice;
use tether_config::notify::DesktopNotify;

#[cfg(feature = "desktop-notify")]
const SERVICE: &str = "org.freedesktop.Notifications";
#[cfg(feature = "desktop-notify")]
const PATH: &str = "/org/freedesktop/Notifications";
/// How long a notification may take to be handed over: connecting, authenticating, the call.
pub const SEND_TIMEOUT: Duration = Duration::from_secs(3);

#[derive(Debug, Error)]
pub enum DesktopError {
    #[error(
        "not in this build: tether was built without the cargo feature `desktop-notify` \
         (D-Bus); the terminal's own notification (`[notify] terminal`) still works"
    )]
    NotBuilt,
    #[error("no session bus: DBUS_SESSION_BUS_ADDRESS is not set")]
    NoBus,
    #[cfg(feature = "desktop-notify")]
    #[error("cannot reach the session bus at {address}: {source}")]
    Connect {
        address: String,
        source: zbus::Error,
    },
    #[cfg(feature = "desktop-notify")]
    #[error("the notification server refused the notification: {0}")]
    Notify(zbus::Error),
    #[error("the session bus did not answer within {}s", SEND_TIMEOUT.as_secs())]
    Timeout,
}

/// Hands `notice` to the notification server on the bus at `address`; its id on success.
#[cfg(feature = "desktop-notify")]
pub async fn send(address: &str, notice: &Notice) -> Result<u32, DesktopError> {
    let call = async {
        let connect = |source| DesktopError::Connect {
            address: address.to_string(),
            source,
        };
        let connection = zbus::connection::Builder::address(address)
            .map_err(connect)?
            .build()
            .await
            .map_err(connect)?;
        // Normal urgency: critical ones stay on screen until dismissed.
        let hints: HashMap<&str, Value<'_>> = HashMap::from([("urgency", Value::U8(1))]);
        let body = (
            "tether",
            0u32,
            "utilities-terminal",
            notice.title.as_str(),
            notice.body.as_str(),
            Vec::<&str>::new(),
            hints,
            -1i32,
        );
        let reply = connection
            .call_method(Some(SERVICE), PATH, Some(SERVICE), "Notify", &body)
            .await
            .map_err(DesktopError::Notify)?;
        reply
            .body()
            .deserialize::<u32>()
            .map_err(DesktopError::Notify)
    };
    tokio::time::timeout(SEND_TIMEOUT, call)
        .await
        .map_err(|_| DesktopError::Timeout)?
}

/// Without zbus there is nothing to send with.
#[cfg(not(feature = "desktop-notify"))]
pub async fn send(_address: &str, _notice: &Notice) -> Result<u32, DesktopError> {
    Err(DesktopError::NotBuilt)
}

/// A front end's desktop notifications, as `[notify] desktop` says.
pub struct DesktopNotifier {
    setting: DesktopNotify,
    address: Option<String>,
    /// Where a failure is said (the status line), once.
    replies: UnboundedSender<String>,
    said: Arc<AtomicBool>,
}

impl DesktopNotifier {
    /// `address`: the session bus's, `None` without one (see [`session_bus`]).
    pub fn new(
        setting: DesktopNotify,
        address: Option<String>,
        replies: UnboundedSender<String>,
    ) -> DesktopNotifier {
        DesktopNotifier {
            setting,
            address,
            replies,
            said: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Sends `notice` in a task of its own; needs a tokio runtime.
    pub fn notify(&self, notice: &Notice) {
        if self.setting == DesktopNotify::Off {
            return;
        }
        let tell = (self.setting == DesktopNotify::On).then(|| self.replies.clone());
        let said = self.said.clone();
        let failed = move |err: DesktopError| {
            if let Some(replies) = tell
                && !said.swap(true, Ordering::Relaxed)
            {
                let _ = replies.send(format!("desktop notifications: {err}"));
            }
        };
        if cfg!(not(feature = "desktop-notify")) {
            failed(DesktopError::NotBuilt);
            return;
        }
        let Some(address) = self.address.clone() else {
            failed(DesktopError::NoBus);
            return;
        };
        let notice = notice.clone();
        tokio::spawn(async move {
            if let Err(err) = send(&address, &notice).await {
                failed(err);
            }
        });
    }
}

/// The session bus's address, from the environment; `None` without one.
pub fn session_bus() -> Option<String> {
    std::env::var("DBUS_SESSION_BUS_ADDRESS")
        .ok()
        .filter(|a| !a.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(feature = "desktop-notify")]
    #[tokio::test]
    async fn without_a_bus_nothing_is_sent_and_true_says_so_once() {
        let notice = Notice {
            title: "s/01 failed".into(),
            body: "exit 1".into(),
        };
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let auto = DesktopNotifier::new(DesktopNotify::Auto, None, tx.clone());
        auto.notify(&notice);
        assert!(rx.try_recv().is_err(), "auto stays silent");
        let on = DesktopNotifier::new(DesktopNotify::On, None, tx);
        on.notify(&notice);
        on.notify(&notice);
        let said = rx.try_recv().expect("said once");
        assert!(said.contains("no session bus"), "{said}");
        assert!(rx.try_recv().is_err(), "and only once");
    }

    #[cfg(not(feature = "desktop-notify"))]
    #[tokio::test]
    async fn without_the_feature_auto_is_off_and_true_says_why_once() {
        let notice = Notice {
            title: "s/01 failed".into(),
            body: "exit 1".into(),
        };
        let bus = Some("unix:path=/nonexistent".to_string());
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let auto = DesktopNotifier::new(DesktopNotify::Auto, bus.clone(), tx.clone());
        auto.notify(&notice);
        assert!(rx.try_recv().is_err(), "auto stays silent");
        let on = DesktopNotifier::new(DesktopNotify::On, bus, tx);
        on.notify(&notice);
        on.notify(&notice);
        let said = rx.try_recv().expect("said once");
        assert!(said.contains("`desktop-notify`"), "{said}");
        assert!(rx.try_recv().is_err(), "and only once");
    }

    #[cfg(feature = "desktop-notify")]
    #[tokio::test]
    async fn a_bus_that_is_not_there_is_an_error_not_a_hang() {
        let dir = tether_os::testing::private_tempdir();
        let address = format!("unix:path={}", dir.path().join("none").display());
        let notice = Notice {
            title: "t".into(),
            body: "b".into(),
        };
        let err = send(&address, &notice).await.unwrap_err();
        // A connection refused, not the timeout a hang would have ended in.
        assert!(matches!(err, DesktopError::Connect { .. }), "{err}");
    }
}
