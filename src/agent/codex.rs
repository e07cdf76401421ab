//! Codex under `tether agent`: a `PreToolUse` hook given on Codex's command line, trusted for
//! that run only, that rewrites each shell command to run through the shell shim.
//!
//! Codex (0.171) ignores `SHELL` and PATH for its commands: it runs each one as `SHELL_OF_THE
//! ACCOUNT -lc CMD` by absolute path (`codex-rs/core/src/shell.rs`, `getpwuid`), and the login
//! shell's /etc/profile resets PATH. What it does offer is hooks: a `PreToolUse` hook may
//! answer `permissionDecision: allow` with `updatedInput.command`, and Codex runs that instead
//! (`with_updated_hook_input` in `codex-rs/core/src/tools/handlers/unified_exec.rs`). So
//! `tether agent -- codex ARGS` starts `codex -c HOOK -c TRUST --add-dir SESSION_DIR ARGS`,
//! with Codex's PATH and SHELL left as they are (it reads neither for its commands):
//!
//! - `hooks.PreToolUse`, in the session-flags layer (`-c`), runs `tether codex-hook` for the
//!   `Bash` tool (Codex's name for `exec_command` and `shell_command` in hooks);
//! - `hooks.state` marks that one hook trusted: Codex runs a non-managed hook only when the
//!   `trusted_hash` recorded for its key equals the hash of its definition
//!   (`codex-rs/hooks/src/engine/discovery.rs`), and reads that state from the session flags
//!   too (`codex-rs/hooks/src/config_rules.rs`). Nothing is written to the user's files and no
//!   other hook is trusted (`--dangerously-bypass-hook-trust` would trust them all);
//! - `--add-dir` makes the session's journal directory writable in Codex's sandbox, where a
//!   sandboxed command's broker runs (its read-only sandbox opens nothing: see [`rewrite`]).
//!
//! The hook turns `CMD` into `exec SHIMS/"${0##*/}" -c 'CMD' "$0"`: the shell Codex started
//! (its account's shell, or the one the model named) reads the profile as it would, then
//! becomes the shim of that same shell, which runs the real one with `-c` under a broker,
//! journaled in the agent's session. The environment and PATH are the login shell's, as
//! without tether, and `$0` (which a shell's own error messages begin with) is passed on as
//! the command's name, in a form every POSIX shell reads (`exec -a` is not one).

use std::io::Read;
use std::path::Path;

use sha2::{Digest, Sha256};

use crate::config::naming::shell_quoted;

/// The subcommand Codex runs as its hook.
const HOOK_SUBCOMMAND: &str = "codex-hook";

/// The hook's tool: Codex calls its shell tools `Bash` in hooks (`HookToolName::bash()`).
const MATCHER: &str = "^Bash$";

/// Codex's default hook timeout, part of the trusted definition (`timeout_sec.unwrap_or(600)`).
const TIMEOUT_SECS: u64 = 600;

/// The key Codex files the first `PreToolUse` hook of the `-c` layer under:
/// `<key source>:<event>:<group>:<handler>`, the key source of that layer being a fixed
/// synthetic path.
const HOOK_KEY: &str = "/<session-flags>/config.toml:pre_tool_use:0:0";

/// The most of a hook event read from stdin; a command past it runs unrewritten.
const MAX_EVENT_BYTES: u64 = 16 << 20;

/// Whether the agent program is Codex (`codex`, `/usr/lib/node_modules/.bin/codex`).
pub fn is_codex(program: impl AsRef<Path>) -> bool {
    program
        .as_ref()
        .file_name()
        .is_some_and(|name| name == "codex")
}

/// The arguments put right after `codex`: the hook and its trust, for this run only, and the
/// session's journal directory made writable in Codex's sandbox (`--add-dir`, which adds to
/// the user's writable roots): a sandboxed command's broker, forked inside the sandbox, must
/// write its journal there. Outside a sandbox it changes nothing.
pub fn config_overrides(tether: &Path, shims: &Path, session_dir: Option<&Path>) -> Vec<String> {
    let command = hook_command(tether, shims, session_dir);
    let writable =
        session_dir.map(|dir| ["--add-dir".to_string(), dir.to_string_lossy().into_owned()]);
    let mut overrides = vec![
        "-c".into(),
        format!(
            "hooks.PreToolUse=[{{matcher={}, hooks=[{{type=\"command\", command={}}}]}}]",
            toml_string(MATCHER),
            toml_string(&command)
        ),
        "-c".into(),
        format!(
            "hooks.state={{{}={{trusted_hash={}}}}}",
            toml_string(HOOK_KEY),
            toml_string(&trust_hash(MATCHER, &command))
        ),
    ];
    overrides.extend(writable.into_iter().flatten());
    overrides
}

/// The hook as Codex runs it (through a shell: quoted).
fn hook_command(tether: &Path, shims: &Path, journal: Option<&Path>) -> String {
    let mut command = format!(
        "{} {HOOK_SUBCOMMAND} --shims {}",
        shell_quoted(&tether.to_string_lossy()),
        shell_quoted(&shims.to_string_lossy())
    );
    if let Some(journal) = journal {
        command.push_str(" --journal ");
        command.push_str(&shell_quoted(&journal.to_string_lossy()));
    }
    command
}

/// A TOML basic string: JSON's escapes are TOML's (`\"`, `\\`, `\n`, `\uXXXX`).
fn toml_string(text: &str) -> String {
    serde_json::Value::from(text).to_string()
}

/// The hash Codex trusts a command hook by: SHA-256 of the canonical JSON (keys sorted, no
/// spaces) of `{event_name, matcher, hooks: [the handler, normalized]}`, fields that are
/// unset left out (`command_hook_hash` in `codex-rs/hooks/src/engine/discovery.rs`,
/// `version_for_toml` in `codex-rs/config/src/fingerprint.rs`).
fn trust_hash(matcher: &str, command: &str) -> String {
    // Written in sorted key order, which is also the order serde_json keeps.
    let identity = serde_json::json!({
        "event_name": "pre_tool_use",
        "hooks": [{
            "async": false,
            "command": command,
            "timeout": TIMEOUT_SECS,
            "type": "command",
        }],
        "matcher": matcher,
    });
    let digest = Sha256::digest(identity.to_string().as_bytes());
    let hex: String = digest.iter().map(|byte| format!("{byte:02x}")).collect();
    format!("sha256:{hex}")
}

/// `tether codex-hook --shims DIR [--journal DIR]`: reads Codex's `PreToolUse` event on
/// stdin and answers with the command rewritten through the shim. Anything it cannot read
/// gets no answer (exit 0, nothing printed), and Codex runs the command as it is.
pub fn hook_main(shims: &Path, journal: Option<&Path>) -> i32 {
    let mut event = String::new();
    if std::io::stdin()
        .take(MAX_EVENT_BYTES)
        .read_to_string(&mut event)
        .is_err()
    {
        return 0;
    }
    if let Some(answer) = answer(&event, shims, journal) {
        println!("{answer}");
    }
    0
}

/// The hook's answer to `event`, or `None` to leave the command alone.
fn answer(event: &str, shims: &Path, journal: Option<&Path>) -> Option<String> {
    let event: serde_json::Value = serde_json::from_str(event).ok()?;
    let command = event.get("tool_input")?.get("command")?.as_str()?;
    Some(
        serde_json::json!({
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "allow",
                "updatedInput": { "command": rewrite(command, shims, journal) },
            }
        })
        .to_string(),
    )
}

/// `CMD` run by the shim of the shell that runs this line, found by that shell's own name
/// (`$0`: `/bin/bash`, `/usr/bin/sh`, `/bin/zsh`, the only shells Codex runs on Linux), which
/// is passed on as the command's `$0`.
///
/// With `journal`, the session's directory: where the command runs cannot write it (Codex's
/// read-only sandbox, which `--add-dir` does not open), the shell runs `CMD` itself, as
/// without tether, rather than through a shim that could journal nothing and would say so in
/// the command's output. The choice is made by the command's own shell, inside the sandbox:
/// the hook runs outside it.
///
/// What the command leaves running (`server &`, `nohup`) is stopped when it returns
/// (`TETHER_LEFTOVERS=stop`), as Codex does without tether: it kills the command's process
/// group once the command returns, so such a process never outlived its command bare.
fn rewrite(command: &str, shims: &Path, journal: Option<&Path>) -> String {
    let shim = format!("{}/\"${{0##*/}}\"", shell_quoted(&shims.to_string_lossy()));
    let command = shell_quoted(command);
    let leftovers = format!("{}=stop", crate::exec::LEFTOVERS_ENV);
    // A shell the shims have no link for (`ksh`) runs the command itself, as without tether,
    // rather than failing it with 127.
    let usable = match journal {
        None => "[ -x \"$1\" ]".to_string(),
        Some(journal) => format!(
            "[ -x \"$1\" ] && [ -w {} ]",
            shell_quoted(&journal.to_string_lossy())
        ),
    };
    format!("set -- {shim}; {usable} || set -- \"$0\"; {leftovers} exec \"$1\" -c {command} \"$0\"")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codex_by_its_program_name() {
        assert!(is_codex("codex"));
        assert!(is_codex("/opt/node/bin/codex"));
        assert!(!is_codex("claude"));
        assert!(!is_codex("codex-tui"));
    }

    #[test]
    fn the_trust_hash_is_the_one_codex_accepted() {
        // Recorded from Codex 0.171.0: a `-c` hook with this command and matcher ran with
        // this `trusted_hash`, and did not with another.
        assert_eq!(
            trust_hash("^Bash$", "/tmp/cx/hook.py"),
            "sha256:a9e0490fcef8c84fed972df1dc87e8a04e8b22739458bea77b3a36af13a7034b"
        );
    }

    #[test]
    fn the_overrides_name_tether_and_the_shims_by_absolute_path() {
        let overrides = config_overrides(
            Path::new("/opt/tether it/tether"),
            Path::new("/run/user/1/tether/agent-1"),
            Some(Path::new("/home/u/.local/state/tether/sessions/codex-1")),
        );
        let command = "'/opt/tether it/tether' codex-hook --shims /run/user/1/tether/agent-1 --journal /home/u/.local/state/tether/sessions/codex-1";
        assert_eq!(
            overrides,
            [
                "-c".to_string(),
                r#"hooks.PreToolUse=[{matcher="^Bash$", hooks=[{type="command", command="'/opt/tether it/tether' codex-hook --shims /run/user/1/tether/agent-1 --journal /home/u/.local/state/tether/sessions/codex-1"}]}]"#
                    .to_string(),
                "-c".to_string(),
                format!(
                    "hooks.state={{\"/<session-flags>/config.toml:pre_tool_use:0:0\"={{trusted_hash=\"{}\"}}}}",
                    trust_hash("^Bash$", command)
                ),
                "--add-dir".to_string(),
                "/home/u/.local/state/tether/sessions/codex-1".to_string(),
            ]
        );
    }

    #[test]
    fn toml_strings_escape_what_toml_needs() {
        assert_eq!(toml_string(r#"a "b" \c"#), r#""a \"b\" \\c""#);
        assert_eq!(toml_string("x\ny"), r#""x\ny""#);
    }

    #[test]
    fn commands_run_through_the_shim_of_the_same_shell_with_the_same_zero() {
        assert_eq!(
            rewrite("echo 'hi' $0", Path::new("/run/s"), None),
            r#"set -- /run/s/"${0##*/}"; [ -x "$1" ] || set -- "$0"; TETHER_LEFTOVERS=stop exec "$1" -c 'echo '\''hi'\'' $0' "$0""#
        );
        assert_eq!(
            rewrite("ls", Path::new("/run/my shims"), None),
            r#"set -- '/run/my shims'/"${0##*/}"; [ -x "$1" ] || set -- "$0"; TETHER_LEFTOVERS=stop exec "$1" -c ls "$0""#
        );
        assert_eq!(
            rewrite(
                "ls",
                Path::new("/run/s"),
                Some(Path::new("/st/sessions/c 1"))
            ),
            r#"set -- /run/s/"${0##*/}"; [ -x "$1" ] && [ -w '/st/sessions/c 1' ] || set -- "$0"; TETHER_LEFTOVERS=stop exec "$1" -c ls "$0""#
        );
    }

    #[test]
    fn the_rewritten_line_runs_in_sh_and_bash_alike() {
        // Each shell runs the line as Codex would (`SHELL -c LINE`); a stand-in for the shim
        // prints what it was given. (zsh reads `${0##*/}`, `set --` and `"$0"` the same way.)
        let shims = tether_os::testing::private_tempdir();
        let script = "#!/bin/sh\nprintf 'shim '; printf '%s|' \"${0##*/}\" \"$@\"\n";
        for name in ["sh", "bash"] {
            let path = shims.path().join(name);
            crate::testing::write_script(&path, script, 0o700);
        }
        let writable = shims.path();
        let unwritable = shims.path().join("no such directory");
        for shell in ["/bin/sh", "/bin/bash"] {
            let name = shell.rsplit('/').next().unwrap();
            let run = |journal: Option<&Path>| {
                let line = rewrite("echo \"[$0]\" 'a b'", shims.path(), journal);
                let out = std::process::Command::new(shell)
                    .args(["-c", &line])
                    .output()
                    .unwrap();
                String::from_utf8_lossy(&out.stdout).into_owned()
            };
            let through_shim = format!("shim {name}|-c|echo \"[$0]\" 'a b'|{shell}|");
            assert_eq!(run(None), through_shim, "{shell}");
            assert_eq!(run(Some(writable)), through_shim, "{shell}");
            // Not writable: the shell itself runs the command, with the same `$0`.
            assert_eq!(
                run(Some(&unwritable)),
                format!("[{shell}] a b\n"),
                "{shell}"
            );
        }
        // A shell with no link among the shims (here: none at all) runs it itself too.
        let empty = tether_os::testing::private_tempdir();
        let line = rewrite("echo \"[$0]\"", empty.path(), None);
        let out = std::process::Command::new("/bin/sh")
            .args(["-c", &line])
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "[/bin/sh]\n");
    }

    #[test]
    fn the_hook_answers_a_bash_event_and_nothing_else() {
        // Codex 0.171.0's event for `exec_command {"cmd": "exit 3"}`, trimmed.
        let event = r#"{"session_id":"01a2","turn_id":"01a3","cwd":"/tmp/cx/work","hook_event_name":"PreToolUse","model":"mock-model","permission_mode":"bypassPermissions","tool_name":"Bash","tool_input":{"command":"exit 3"},"tool_use_id":"call_3"}"#;
        let answer: serde_json::Value =
            serde_json::from_str(&answer(event, Path::new("/run/s"), None).unwrap()).unwrap();
        assert_eq!(
            answer,
            serde_json::json!({"hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "allow",
                "updatedInput": {"command": r#"set -- /run/s/"${0##*/}"; [ -x "$1" ] || set -- "$0"; TETHER_LEFTOVERS=stop exec "$1" -c 'exit 3' "$0""#},
            }})
        );
        for unreadable in ["", "not json", "{}", r#"{"tool_input":{"command":["ls"]}}"#] {
            assert_eq!(answer_of(unreadable), None, "{unreadable}");
        }
    }

    fn answer_of(event: &str) -> Option<String> {
        answer(event, Path::new("/run/s"), None)
    }
}
