use super::*;

fn shell(script: &str) -> String {
    derive_name(&CommandSpec::Shell(script.into()))
}

fn argv(words: &[&str]) -> String {
    derive_name(&CommandSpec::Argv(
        words.iter().map(|w| w.to_string()).collect(),
    ))
}

#[test]
fn the_first_program_names_a_shell_command() {
    assert_eq!(shell("make -j2"), "make");
    assert_eq!(shell("  /usr/bin/python3 -m http.server"), "python3");
    assert_eq!(shell("./scripts/run.sh --fast"), "run.sh");
    assert_eq!(shell("cargo test 2>&1 | tail -3"), "cargo");
}

#[test]
fn what_only_prepares_is_skipped() {
    assert_eq!(shell("cd /tmp && ls"), "ls");
    assert_eq!(shell("cd /tmp; cd sub || exit 1; make"), "make");
    assert_eq!(shell("trap '' TERM INT; yes"), "yes");
    assert_eq!(
        shell("export A=1; source venv/bin/activate && python3 app.py"),
        "python3"
    );
    assert_eq!(shell("[ -f Makefile ] && make"), "make");
    assert_eq!(shell("exec 2>&1; make"), "make");
    assert_eq!(shell("set -e\n# build it\ncd src\nnpm run build\n"), "npm");
}

#[test]
fn assignments_and_wrappers_are_skipped() {
    assert_eq!(shell("FOO=1 env"), "env");
    assert_eq!(shell("FOO=1 BAR='a b' make"), "make");
    assert_eq!(shell("exec nice -n 10 make"), "make");
    assert_eq!(shell("env -i PATH=/bin FOO=1 python3 x.py"), "python3");
    assert_eq!(shell("time -p sudo -u root nohup ./serve"), "serve");
    assert_eq!(shell("timeout -s KILL 5 sleep 10"), "sleep");
    assert_eq!(shell("exec -a name prog"), "prog");
    assert_eq!(argv(&["env", "FOO=1", "make", "-j2"]), "make");
    assert_eq!(
        argv(&["/usr/bin/nice", "-n", "5", "cargo", "build"]),
        "cargo"
    );
}

#[test]
fn keywords_are_skipped() {
    assert_eq!(shell("while :; do echo tick; sleep 1; done"), "echo");
    assert_eq!(shell("while true; do date; done"), "date");
    assert_eq!(shell("for i in 1 2 3; do echo $i; done"), "echo");
    assert_eq!(shell("if [ -d x ]; then make; else cmake .; fi"), "make");
    assert_eq!(shell("until curl -s localhost; do sleep 1; done"), "curl");
    assert_eq!(shell("! grep -q x file"), "grep");
    assert_eq!(shell("{ echo a; echo b; } > out"), "echo");
    assert_eq!(shell("(cd sub && make)"), "make");
    // Quoted, a keyword is a program like any other.
    assert_eq!(shell("'if' x"), "if");
    assert_eq!(argv(&["while"]), "while");
}

#[test]
fn nested_shells_and_eval_are_read_too() {
    assert_eq!(shell("sh -c 'cd /tmp && ls'"), "ls");
    assert_eq!(shell("bash -lc \"FOO=1 exec make\""), "make");
    assert_eq!(argv(&["sh", "-c", "cd /tmp && ls"]), "ls");
    assert_eq!(argv(&["bash", "script.sh"]), "bash");
    // How Claude Code wraps each command.
    assert_eq!(
        shell(
            "shopt -u extglob 2>/dev/null || true && eval 'cargo test' < /dev/null && pwd -P >| /tmp/cwd"
        ),
        "cargo"
    );
}

#[test]
fn redirections_and_functions_are_not_programs() {
    assert_eq!(shell("> out.log 2>&1 make"), "make");
    assert_eq!(shell("<input sort"), "sort");
    assert_eq!(
        shell("worker() {\n  sleep 1\n}\necho start\nworker &\nwait"),
        "echo"
    );
    assert_eq!(shell("echo $(date) `hostname`"), "echo");
}

#[test]
fn a_command_of_preparations_only_is_named_by_the_first() {
    assert_eq!(shell("cd /tmp"), "cd");
    assert_eq!(shell("true"), "true");
    assert_eq!(shell(":"), ":");
    assert_eq!(shell(""), "sh");
    assert_eq!(shell("  # nothing\n"), "sh");
    // A loop of nothing (a busy loop) is named by its loop, not by `:` or `true`.
    assert_eq!(shell("for x in a b; do :; done"), "for");
    assert_eq!(shell("while :; do :; done"), "while");
    assert_eq!(shell("sh -c 'while true; do :; done'"), "while");
    assert_eq!(shell("until false; do true; done"), "until");
    assert_eq!(shell("while [ 1 ]; do :; done"), "while");
    assert_eq!(shell("cd /tmp; while :; do :; done"), "cd");
    assert_eq!(argv(&[]), "command");
}

#[test]
fn derived_names_are_made_unique() {
    let specs = [
        CommandSpec::Shell("echo a".into()),
        CommandSpec::Shell("cd /tmp && echo b".into()),
        CommandSpec::Argv(vec!["/bin/echo".into()]),
        CommandSpec::Shell("ls".into()),
    ];
    assert_eq!(
        assign_names(&specs, &[]).unwrap(),
        ["echo", "echo-2", "echo-3", "ls"]
    );
    assert_eq!(unique_name("a", |n| ["a", "a-2"].contains(&n)), "a-3");
}

#[test]
fn given_names_go_to_the_commands_in_order() {
    let specs = [
        CommandSpec::Shell("npm start".into()),
        CommandSpec::Shell("cargo run".into()),
    ];
    let given = ["web".to_string(), "api".to_string()];
    assert_eq!(assign_names(&specs, &given).unwrap(), ["web", "api"]);
    assert_eq!(
        assign_names(&specs[..1], &given[..1]).unwrap(),
        ["web"],
        "-n applies to a lone -c too"
    );
    assert_eq!(
        assign_names(&specs, &given[..1]),
        Err(NamingError::Ambiguous {
            names: 1,
            commands: 2
        })
    );
    assert_eq!(
        assign_names(&specs, &["x".into(), "x".into()]),
        Err(NamingError::Duplicate("x".into()))
    );
    assert_eq!(
        assign_names(&specs[..1], &[" ".into()]),
        Err(NamingError::Empty)
    );
    let message = NamingError::Ambiguous {
        names: 1,
        commands: 2,
    }
    .to_string();
    assert!(
        message.starts_with("-n was given 1 time for 2 commands"),
        "{message}"
    );
}

#[test]
fn an_argv_that_runs_a_shell_script_is_named_by_the_script() {
    // What an agent's tool call looks like through `tether exec`.
    assert_eq!(argv(&["sh", "-c", "cd /tmp && cargo test"]), "cargo");
    assert_eq!(argv(&["/bin/bash", "-lc", "FOO=1 npm run build"]), "npm");
    assert_eq!(argv(&["bash", "-c", "-l", "cd x && make"]), "make");
    assert_eq!(argv(&["bash", "-c", ""]), "bash");
    assert_eq!(argv(&["bash", "script.sh"]), "bash");
}

#[test]
fn an_agents_wrapper_gives_the_command_it_runs() {
    let wrapped = |cmd: &str| {
        format!(
            "shopt -u extglob 2>/dev/null || true && eval {cmd} < /dev/null && pwd -P >| /tmp/claude-1-cwd"
        )
    };
    assert_eq!(
        agent_command(&wrapped("'ls -la /tmp'")).as_deref(),
        Some("ls -la /tmp")
    );
    assert_eq!(
        agent_command(&wrapped(r#"'echo '\''hi there'\'' | wc -c'"#)).as_deref(),
        Some("echo 'hi there' | wc -c")
    );
    assert_eq!(
        agent_command(&wrapped(r#""grep -rn \"x\" src""#)).as_deref(),
        Some(r#"grep -rn "x" src"#)
    );
    assert_eq!(agent_command("ls -la"), None);
    assert_eq!(
        agent_command("shopt -u extglob 2>/dev/null || true && eval ls"),
        None
    );
    // One plain word comes unquoted (recorded: `eval true < /dev/null`); unquoted, only the
    // whole wrapper is taken for one.
    assert_eq!(agent_command(&wrapped("true")).as_deref(), Some("true"));
    assert_eq!(agent_command(&wrapped("ls")).as_deref(), Some("ls"));
    assert_eq!(
        agent_command("shopt -u extglob 2>/dev/null || true && eval ls && pwd"),
        None
    );
    assert_eq!(
        agent_command("shopt -u extglob 2>/dev/null || true && eval ls < /dev/null; curl x"),
        None
    );
    // Whatever the quoting, nothing may follow the file `pwd` writes to.
    for after in ["; curl x", " && curl x", " x"] {
        let script = format!("{}{after}", wrapped("'ls'"));
        assert_eq!(agent_command(&script), None, "{script}");
    }
    assert_eq!(
        agent_command("shopt -u extglob 2>/dev/null || true && eval 'ls' && curl x"),
        None
    );
    // As Claude Code 2.1.197 sent it once it had its shell snapshot (recorded).
    let recorded = "source /home/dev/.claude/shell-snapshots/snapshot-bash-1796509587890-zt4vni.sh 2>/dev/null || true && shopt -u extglob 2>/dev/null || true && eval 'sleep 1; curl -s -o /dev/null -w '\"'\"'%{http_code}\\n'\"'\"' http://127.0.0.1:8765/' < /dev/null && pwd -P >| /tmp/claude-3f3d-cwd";
    assert_eq!(
        agent_command(recorded).as_deref(),
        Some("sleep 1; curl -s -o /dev/null -w '%{http_code}\\n' http://127.0.0.1:8765/")
    );
    assert_eq!(agent_command("source x.sh && ls"), None);
}

#[test]
fn an_agent_under_tether_agent_is_shown_as_its_own_argv() {
    let argv = |words: &[&str]| CommandSpec::Argv(words.iter().map(|w| w.to_string()).collect());
    let journaled = argv(&[
        "/usr/local/bin/tether",
        "session-owner",
        "--shims",
        "/tmp/tether-0/agent-shims-1-2",
        "--agent-arg",
        "--settings",
        "--agent-arg",
        r#"{"hooks":{"Notification":[]}}"#,
        "--",
        "claude",
        "-p",
        "run the steps",
    ]);
    // What tether gives the agent (its hook) is not what the operator typed.
    assert_eq!(command_text(&journaled), "claude -p 'run the steps'");
    assert_eq!(derive_name(&journaled), "claude");
    assert_eq!(
        command_text(&argv(&["tether", "session-owner", "--"])),
        "tether session-owner --"
    );
}

#[test]
fn gemini_clis_wrapper_gives_the_command_it_runs() {
    // As Gemini CLI 0.61 sent them (recorded under tether agent).
    let recorded = |cmd: &str| {
        format!(
            "shopt -u promptvars nullglob extglob nocaseglob dotglob; _bgpids_file=/tmp/gemini-shell-5sBILg/bgpids.tmp\n(\n  trap 'jobs -p > \"$_bgpids_file\"' EXIT\n{cmd}\n)\n__code=$?\nexit $__code"
        )
    };
    assert_eq!(
        agent_command(&recorded("ls -la")).as_deref(),
        Some("ls -la")
    );
    assert_eq!(
        agent_command(&recorded("for i in 1 2; do\n  echo $i\ndone")).as_deref(),
        Some("for i in 1 2; do\n  echo $i\ndone")
    );
    // The one-line form of earlier versions.
    let one_line = "shopt -u promptvars nullglob extglob nocaseglob dotglob; ( trap 'jobs -p > /tmp/x' EXIT; npm test ); __code=$?; exit $__code";
    assert_eq!(agent_command(one_line).as_deref(), Some("npm test"));
    assert_eq!(agent_command("shopt -u promptvars; ls"), None);
    let argv = |script: String| CommandSpec::Argv(vec!["/bin/bash".into(), "-c".into(), script]);
    assert_eq!(command_text(&argv(recorded("ls -la"))), "ls -la");
    assert_eq!(
        command_text(&argv(recorded("cd /tmp && echo in-tmp"))),
        "echo in-tmp (cd /tmp)"
    );
    assert_eq!(
        derive_name(&argv(recorded("cd /tmp && echo in-tmp"))),
        "echo"
    );
    // A command of builtins only is named by them, as it is bare, never by the wrapper's
    // own `shopt`: a busy loop by its keyword.
    assert_eq!(derive_name(&argv(recorded("true"))), "true");
    assert_eq!(derive_name(&argv(recorded("while :; do :; done"))), "while");
    assert_eq!(
        derive_name(&argv(one_line.replace("npm test", "true"))),
        "true"
    );
}

#[test]
fn a_leading_cd_is_folded_after_what_the_command_runs() {
    assert_eq!(cd_folded("cd /repo && cargo test"), "cargo test (cd /repo)");
    assert_eq!(cd_folded("cd 'my dir' && make"), "make (cd my dir)");
    assert_eq!(cd_folded("cd /repo; make"), "cd /repo; make");
    assert_eq!(cd_folded("cargo test"), "cargo test");
}

#[test]
fn a_dash_c_script_given_its_shell_as_zero_reads_as_the_script() {
    let text = |words: &[&str]| {
        command_text(&CommandSpec::Argv(
            words.iter().map(|w| w.to_string()).collect(),
        ))
    };
    // As Codex's commands reach the shim under `tether agent`.
    assert_eq!(
        text(&["/bin/bash", "-c", "cargo test", "/bin/bash"]),
        "cargo test"
    );
    assert_eq!(text(&["/bin/sh", "-lc", "ls", "/usr/bin/sh"]), "ls");
    // Any other name, or arguments after it, are part of what runs.
    assert_eq!(text(&["sh", "-c", "echo $0", "foo"]), "sh -c 'echo $0' foo");
    assert_eq!(
        text(&["bash", "-c", "echo $1", "bash", "x"]),
        "bash -c 'echo $1' bash x"
    );
}

#[test]
fn an_agents_set_up_shells_are_told_from_its_commands() {
    let argv = |words: &[&str]| CommandSpec::Argv(words.iter().map(|w| w.to_string()).collect());
    // As Claude Code 2.1.197 ran them under `tether agent` before its first tool call
    // (recorded; the snapshot script cut after its first lines).
    assert!(is_agent_setup(&argv(&["/bin/bash", "-c", "env"])));
    let snapshot = "SNAPSHOT_FILE=/home/dev/.claude/shell-snapshots/snapshot-bash-1796512288718-h9et9b.sh\n      # No user config file to source\n\n      # First, create/clear the snapshot file\n      echo \"# Snapshot file\" >| \"$SNAPSHOT_FILE\"\n";
    assert!(is_agent_setup(&argv(&["/bin/bash", "-c", "-l", snapshot])));
    assert_eq!(
        command_text(&argv(&["/bin/bash", "-c", "-l", snapshot])),
        "SNAPSHOT_FILE=/home/dev/.claude/shell-snapshots/snapshot-bash-1796512288718-h9et9b.sh … (writes the agent's shell snapshot)",
        "sixty lines of the agent's own, said by what they write"
    );
    // The commands it was asked for, wrapped as it sends them, are not.
    let asked = "source /home/dev/.claude/shell-snapshots/snapshot-bash-1796512288718-h9et9b.sh 2>/dev/null || true && shopt -u extglob 2>/dev/null || true && eval 'env' < /dev/null && pwd -P >| /tmp/claude-9030-cwd";
    assert!(!is_agent_setup(&argv(&["/bin/bash", "-c", asked])));
    assert!(!is_agent_setup(&argv(&["env"])));
    assert!(!is_agent_setup(&argv(&["/bin/bash", "-c", "env | sort"])));
    assert!(!is_agent_setup(&argv(&[
        "/bin/bash",
        "-c",
        "SNAPSHOT_FILE=/tmp/x.sh make"
    ])));
}
