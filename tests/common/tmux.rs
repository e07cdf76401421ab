//! A tmux server of one test, for what only a real terminal shows: tmux runs tether,
//! `send-keys` types, `capture-pane` reads the screen, `resize-window` resizes it. Every
//! process in it carries the test's tag; dropping it kills the server and removes its socket.

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use super::{DEADLINE, TAG_VAR, TestEnv};

pub struct Tmux {
    socket: String,
    /// The socket's file (`/tmp/tmux-UID/tether-TAG`), which `kill-server` leaves behind.
    socket_path: Option<String>,
}

impl Tmux {
    /// Starts a server whose first window (`cols`×`rows`) runs `sh`.
    pub fn start(env: &TestEnv, cols: u16, rows: u16) -> Tmux {
        let mut tmux = Tmux {
            socket: format!("tether-{}", env.tag),
            socket_path: None,
        };
        let (x, y) = (cols.to_string(), rows.to_string());
        let out = tmux.cmd(&["new-session", "-d", "-x", &x, "-y", &y, "sh"], env);
        assert!(
            out.status.success(),
            "tmux failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let out = tmux.cmd(&["display-message", "-p", "#{socket_path}"], env);
        tmux.socket_path = Some(String::from_utf8_lossy(&out.stdout).trim().to_owned())
            .filter(|path| !path.is_empty());
        // OSC 52 from the TUI lands in tmux's buffers, where the copy tests read it.
        tmux.cmd(&["set-option", "-g", "set-clipboard", "on"], env);
        // What is typed before the shell reads its terminal is echoed by the terminal, then
        // the prompt comes after it and the command's first output on the prompt's line
        // (`# hi`): nothing is typed until the prompt shows, as a person would wait for it.
        tmux.wait_screen(env, "the shell's prompt", |s| !s.trim().is_empty());
        tmux
    }

    /// The pid of the first pane's process.
    pub fn pane_pid(&self, env: &TestEnv) -> i32 {
        let out = self.cmd(&["display-message", "-p", "-t", "0", "#{pane_pid}"], env);
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .expect("pane pid")
    }

    pub fn cmd(&self, args: &[&str], env: &TestEnv) -> Output {
        Command::new("tmux")
            .args(["-L", &self.socket])
            .args(args)
            .env(TAG_VAR, &env.tag)
            .env("TERM", "xterm-256color")
            .env_remove("TMUX")
            // No desktop notifications from the tests' TUIs on a developer's desktop.
            .env_remove("DBUS_SESSION_BUS_ADDRESS")
            .output()
            .expect("run tmux (is it installed? .ci/run installs it)")
    }

    /// Keys by tmux's names (`Enter`, `C-a`, `i`).
    pub fn keys(&self, env: &TestEnv, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "0"];
        args.extend_from_slice(keys);
        self.cmd(&args, env);
    }

    /// Text typed as it is, without a newline.
    pub fn text(&self, env: &TestEnv, text: &str) {
        self.cmd(&["send-keys", "-t", "0", "-l", text], env);
    }

    pub fn type_line(&self, env: &TestEnv, line: &str) {
        self.text(env, line);
        self.keys(env, &["Enter"]);
    }

    /// Pastes `text` as a terminal does (`load-buffer`, `paste-buffer`: line ends become
    /// `\r`), in bracketed-paste marks when `bracketed` (`-p`) and the program asked for them.
    pub fn paste(&self, env: &TestEnv, text: &str, bracketed: bool) {
        let file = env.path("tmux-paste");
        std::fs::write(&file, text).expect("write the text to paste");
        let file = file.to_string_lossy();
        let out = self.cmd(&["load-buffer", "-b", "paste", &file], env);
        assert!(out.status.success(), "tmux load-buffer failed: {out:?}");
        let mut args = vec!["paste-buffer", "-d", "-b", "paste", "-t", "0"];
        if bracketed {
            args.push("-p");
        }
        let out = self.cmd(&args, env);
        assert!(out.status.success(), "tmux paste-buffer failed: {out:?}");
    }

    pub fn resize(&self, env: &TestEnv, cols: u16, rows: u16) {
        let (x, y) = (cols.to_string(), rows.to_string());
        let out = self.cmd(&["resize-window", "-t", "0", "-x", &x, "-y", &y], env);
        assert!(
            out.status.success(),
            "tmux resize-window failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    pub fn screen(&self, env: &TestEnv) -> String {
        String::from_utf8_lossy(&self.cmd(&["capture-pane", "-p", "-t", "0"], env).stdout)
            .into_owned()
    }

    /// Waits until the screen satisfies `done`; fails with the screen otherwise.
    pub fn wait_screen(&self, env: &TestEnv, what: &str, done: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            let screen = self.screen(env);
            if done(&screen) {
                return screen;
            }
            assert!(
                start.elapsed() < DEADLINE,
                "timed out waiting for {what}; screen:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .output();
        if let Some(path) = &self.socket_path {
            let _ = std::fs::remove_file(path);
        }
    }
}
