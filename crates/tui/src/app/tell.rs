//! The front end's part in telling the operator: `[notify]` read from the user config, the
//! news looked for before each frame, a terminal notification handed back to be written
//! between frames, a desktop one sent off the loop, and the terminal's focus reports.

use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::sync::mpsc::UnboundedSender;

use super::list::ListRows;
use crate::notify::AttentionNews;
use crate::notify::desktop::{DesktopNotifier, session_bus};
use crate::notify::terminal::{TerminalKind, encode};
use tether_config::notify::{NotifySettings, TerminalNotify};
use tether_config::user::{load_user, user_config_path};
use tether_model::Model;

pub struct Teller {
    /// Also told by the runner when the terminal says its window gained or lost the
    /// focus.
    pub(super) news: AttentionNews,
    terminal: TerminalNotify,
    kind: TerminalKind,
    desktop: DesktopNotifier,
    /// The list's rows last looked at: built again whenever a mark changes (their
    /// fingerprint holds every mark), so rows that are still the same hold no news.
    looked_at: Weak<ListRows>,
}

impl Teller {
    /// For a front end opened at `now_ms`; a problem with the user config is said on
    /// `replies`, and the defaults apply.
    pub fn new(now_ms: u64, replies: UnboundedSender<String>) -> Teller {
        let settings = match user_config_path().map(|path| load_user(&path)) {
            Some(Ok(Some(config))) => config.notify,
            Some(Err(err)) => {
                let _ = replies.send(format!("{err} (notifications use their defaults)"));
                NotifySettings::default()
            }
            Some(Ok(None)) | None => NotifySettings::default(),
        };
        Teller {
            news: AttentionNews::new(now_ms),
            terminal: settings.terminal,
            kind: TerminalKind::from_env(),
            desktop: DesktopNotifier::new(settings.desktop, session_bus(), replies),
            looked_at: Weak::new(),
        }
    }

    /// What is news in `model` at `now_ms`: sent to the desktop here, and the bytes to write
    /// to the terminal returned (none when there is nothing to tell, or `terminal = "off"`).
    /// `rows` are the list's, as built for this frame: while they are the ones last looked at
    /// and no waiting news is due yet, the commands are not looked at again (a frame of
    /// 10,000 does not pay for them; the rows are rebuilt whenever a mark changes).
    pub fn look(&mut self, model: &Model, rows: &Arc<ListRows>, now_ms: u64) -> Option<String> {
        let same = Weak::ptr_eq(&self.looked_at, &Arc::downgrade(rows));
        if same && self.news.due_ms().is_none_or(|due| now_ms < due) {
            return None;
        }
        self.looked_at = Arc::downgrade(rows);
        let notice = self.news.look(model, now_ms)?;
        self.desktop.notify(&notice);
        Some(encode(self.terminal, self.kind, &notice)).filter(|bytes| !bytes.is_empty())
    }

    /// How long until news that waits may be told, if some waits.
    pub fn due_in(&self, now_ms: u64) -> Option<Duration> {
        let due = self.news.due_ms()?;
        Some(Duration::from_millis(due.saturating_sub(now_ms)))
    }
}
