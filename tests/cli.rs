//! The command line as users meet it: completions loaded in bash, zsh and fish (subcommands,
//! and session ids from a state directory that `tether exec` filled), the man pages, `tether
//! init`, `tether run --procfile`'s errors, and hidden subcommands never suggested.

use crate::common;

use std::fs;
use std::path::Path;
use std::process::{Command, Output};

use common::tmux::Tmux;
use common::{BIN, TestEnv, run_to_end, wait_until};

/// The subcommands users never type: never completed, never suggested.
const HIDDEN: [&str; 3] = ["session-owner", "agent-hook", "broker"];

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Two finished sessions in the test's state directory, `cli-older` started first.
fn two_sessions(env: &TestEnv) {
    for session in ["cli-older", "cli-newer"] {
        let run = env.exec(&["--session", session, "-n", "job"], &["true"]);
        assert_eq!(run.code(), 0, "{}", run.stderr_text());
    }
}

/// `shell ARGS` with the state directory and a home of the test's own: completions read
/// the sessions from `TETHER_STATE_DIR`, as `tether sessions` does without `--state-dir`.
fn in_shell(env: &TestEnv, shell: &str, args: &[&str]) -> Output {
    let home = env.path("home");
    fs::create_dir_all(&home).unwrap();
    let mut command = Command::new(shell);
    command
        .args(args)
        .env("TETHER_BIN", BIN)
        .env("TETHER_STATE_DIR", env.state_dir())
        .env("HOME", &home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("XDG_DATA_HOME", home.join(".local/share"))
        .env_remove("TETHER_SESSION")
        .env_remove("TETHER_COMPLETE");
    let out = run_to_end(env, command, shell);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{shell}: {}\n{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    out
}

/// The value after `label: ` on its own line of `out`, split at spaces.
fn candidates(out: &str, label: &str) -> Vec<String> {
    let line = (out.lines())
        .find_map(|line| line.strip_prefix(&format!("{label}:")))
        .unwrap_or_else(|| panic!("no `{label}:` line in {out}"));
    line.split_whitespace().map(str::to_string).collect()
}

/// bash as it completes: the words so far, the cursor at the end, the function `complete
/// -p` names called as bash calls it; prints COMPREPLY on one line.
const BASH_COMPLETE: &str = r#"
source <("$TETHER_BIN" completions bash) || exit 3
complete -p tether || exit 4
comp() {
    local label=$1; shift
    COMP_WORDS=("$@"); COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
    COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}; COMPREPLY=()
    local function=$(complete -p tether | sed -n 's/.* -F \([^ ]*\) .*/\1/p')
    "$function" tether "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
    echo "$label: ${COMPREPLY[*]}"
}
comp se tether se
comp session tether session-
comp brok tether brok
comp open tether open ''
comp grep tether grep pattern cli-n
comp stop tether stop ''
comp stop-command tether stop cli-newer/
comp exec-session tether exec --session ''
"#;

#[test]
fn bash_loads_the_completions_and_completes_subcommands_and_session_ids() {
    let env = TestEnv::new("cli_bash");
    two_sessions(&env);
    let out = text(&in_shell(&env, "bash", &["-c", BASH_COMPLETE]).stdout);
    assert!(
        out.contains("-F _clap_complete_tether tether"),
        "complete -p tether: {out}"
    );
    assert_eq!(candidates(&out, "se"), ["sessions"], "{out}");
    assert_eq!(candidates(&out, "session"), [""; 0], "{out}");
    assert_eq!(candidates(&out, "brok"), [""; 0], "{out}");
    // Session ids newest first, then the options.
    let open = candidates(&out, "open");
    assert_eq!(open[..2], ["cli-newer", "cli-older"], "{out}");
    assert!(open.contains(&"--search".to_string()), "{out}");
    assert_eq!(candidates(&out, "grep"), ["cli-newer"], "{out}");
    assert_eq!(
        candidates(&out, "stop")[..2],
        ["cli-newer", "cli-older"],
        "{out}"
    );
    assert_eq!(candidates(&out, "stop-command"), ["cli-newer/job"], "{out}");
    assert_eq!(
        candidates(&out, "exec-session"),
        ["cli-newer", "cli-older"],
        "{out}"
    );
    env.finish();
}

/// Directories under `sessions/` that no session name could be (bash's script splits and
/// globs the candidates: `*` would be every file of the directory completing), and a
/// command run twice (a directory per run): only the real names, each once.
#[test]
fn bash_completes_only_names_a_session_or_command_could_have_each_once() {
    let env = TestEnv::new("cli_bash_names");
    two_sessions(&env);
    let run = env.exec(&["--session", "cli-newer", "-n", "job"], &["true"]);
    assert_eq!(run.code(), 0, "{}", run.stderr_text());
    let sessions = env.state_dir().join("sessions");
    for hostile in ["$(touch pwned)", "*", "a b"] {
        fs::create_dir(sessions.join(hostile)).unwrap();
    }
    fs::create_dir(sessions.join("cli-newer/09-$(touch pwned)")).unwrap();
    let script = BASH_COMPLETE.replace("comp se tether se", "cd \"$TETHER_STATE_DIR\"");
    let out = text(&in_shell(&env, "bash", &["-c", &script]).stdout);
    assert_eq!(
        candidates(&out, "stop")
            .into_iter()
            .filter(|c| !c.starts_with('-'))
            .collect::<Vec<_>>(),
        ["cli-newer", "cli-older"],
        "{out}"
    );
    assert_eq!(candidates(&out, "stop-command"), ["cli-newer/job"], "{out}");
    assert!(!env.state_dir().join("pwned").exists());
    env.finish();
}

#[test]
fn zsh_loads_the_completions_and_they_answer_by_the_engines_protocol() {
    let env = TestEnv::new("cli_zsh");
    two_sessions(&env);
    // compinit -D: no dump file written.
    let script = r#"autoload -U compinit && compinit -D -u || exit 3
source <("$TETHER_BIN" completions zsh) || exit 4
print -r -- "registered: ${_comps[tether]}"
whence -w _clap_dynamic_completer_tether"#;
    let out = text(&in_shell(&env, "zsh", &["-f", "-c", script]).stdout);
    assert!(
        out.contains("registered: _clap_dynamic_completer_tether"),
        "{out}"
    );
    assert!(
        out.contains("_clap_dynamic_completer_tether: function"),
        "{out}"
    );
    // What the registered function runs, as zsh runs it (`$CURRENT - 1` is the index).
    let ask = r#"TETHER_COMPLETE=zsh _CLAP_IFS=$'\n' _CLAP_COMPLETE_INDEX=2 "$TETHER_BIN" -- tether open ''
echo ---
TETHER_COMPLETE=zsh _CLAP_IFS=$'\n' _CLAP_COMPLETE_INDEX=1 "$TETHER_BIN" -- tether se"#;
    let out = text(&in_shell(&env, "zsh", &["-f", "-c", ask]).stdout);
    let (open, se) = out.split_once("---\n").expect("both answers");
    let open: Vec<&str> = open.lines().collect();
    assert_eq!(open[..2], ["cli-newer", "cli-older"], "{out}");
    assert!(
        se.lines().next().is_some_and(|l| l.starts_with("sessions")),
        "{out}"
    );
    assert!(HIDDEN.iter().all(|h| !se.contains(h)), "{out}");
    env.finish();
}

#[test]
fn fish_loads_the_completions_and_completes_subcommands_and_session_ids() {
    let env = TestEnv::new("cli_fish");
    two_sessions(&env);
    let script = r#""$TETHER_BIN" completions fish | source
echo "se: "(complete -C 'tether se' | string split -f1 \t | string join ' ')
echo "open: "(complete -C 'tether open ' | string split -f1 \t | string join ' ')"#;
    let out = text(&in_shell(&env, "fish", &["--no-config", "-c", script]).stdout);
    assert_eq!(candidates(&out, "se"), ["sessions"], "{out}");
    assert_eq!(
        candidates(&out, "open")[..2],
        ["cli-newer", "cli-older"],
        "{out}"
    );
    env.finish();
}

#[test]
fn a_typo_never_suggests_a_hidden_subcommand() {
    let env = TestEnv::new("cli_typo");
    for (typo, suggested) in [
        ("sesion-owner", Some("sessions")),
        ("session-ownr", Some("sessions")),
        ("sessio", Some("sessions")),
        ("agent-hok", Some("agent")),
        ("brokr", None),
        ("broke", None),
    ] {
        let out = run_to_end(&env, env.tether(&[typo]), typo);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{typo}: {stderr}");
        assert!(
            stderr.contains(&format!("unrecognized subcommand '{typo}'")),
            "{typo}: {stderr}"
        );
        let tip = stderr.lines().find(|l| l.contains("tip:")).unwrap_or("");
        for hidden in HIDDEN {
            assert!(!tip.contains(hidden), "{typo} suggests {hidden}: {stderr}");
        }
        match suggested {
            Some(name) => assert!(tip.contains(&format!("'{name}'")), "{typo}: {stderr}"),
            None => assert_eq!(tip, "", "{typo}: {stderr}"),
        }
    }
    env.finish();
}

/// An option of subcommands given before any: clap's look-alike (`--version`) and a usage
/// line made of it gave way to tether's usage and the subcommands that have it.
#[test]
fn an_unknown_option_names_the_subcommands_that_have_it_under_the_real_usage() {
    let env = TestEnv::new("cli_unknown_option");
    let out = run_to_end(&env, env.tether(&["--session", "x"]), "--session");
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(
            "tip: 'tether run --session', 'tether exec --session', 'tether agent --session' exist"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains("Usage: tether [OPTIONS] [COMMAND]"),
        "{stderr}"
    );
    assert!(!stderr.contains("--version"), "{stderr}");
    env.finish();
}

#[test]
fn the_man_page_and_one_page_per_visible_subcommand() {
    let env = TestEnv::new("cli_man");
    let out = run_to_end(&env, env.tether(&["man"]), "tether man");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let page = text(&out.stdout);
    assert!(page.contains("\n.TH tether 1 "), "{page}");
    for listed in [
        "tether\\-run(1)",
        "tether\\-completions(1)",
        "tether\\-init(1)",
    ] {
        assert!(page.contains(listed), "{listed} in {page}");
    }
    for hidden in HIDDEN {
        let listed = format!("tether\\-{}(1)", hidden.replace('-', "\\-"));
        assert!(!page.contains(&listed), "{listed}: {page}");
    }

    let dir = env.path("man/man1");
    let out = run_to_end(
        &env,
        env.tether(&["man", "--dir", dir.to_str().unwrap()]),
        "tether man --dir",
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let run = fs::read_to_string(dir.join("tether-run.1")).expect("tether-run.1");
    assert!(
        run.contains("\n.TH tether\\-run 1 ") || run.contains("\n.TH tether-run 1 "),
        "{run}"
    );
    for name in [
        "tether.1",
        "tether-init.1",
        "tether-man.1",
        "tether-completions.1",
    ] {
        assert!(dir.join(name).exists(), "{name}");
    }
    for hidden in HIDDEN {
        assert!(!dir.join(format!("tether-{hidden}.1")).exists(), "{hidden}");
    }
    assert!(!dir.join("tether-help.1").exists());
    // Private whatever the umask, as everything tether writes.
    assert_eq!(mode_of(&dir), 0o700);
    assert_eq!(mode_of(&dir.join("tether.1")), 0o600);
    env.finish();
}

/// A help that sends the reader to a document names one that exists and says what it is
/// sent for: `sessions --json`'s fields are in docs/exports.md, not the README.
#[test]
fn the_help_names_the_documents_that_hold_what_it_sends_the_reader_to() {
    let env = TestEnv::new("cli_help_docs");
    let out = run_to_end(
        &env,
        env.tether(&["sessions", "--help"]),
        "tether sessions --help",
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let help = text(&out.stdout);
    let json = help
        .split("--json")
        .nth(1)
        .unwrap_or_else(|| panic!("no --json in {help}"));
    assert!(json.contains("docs/exports.md"), "{help}");
    assert!(!help.contains("README"), "{help}");
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/exports.md");
    let exports = fs::read_to_string(&docs).expect("docs/exports.md");
    assert!(
        exports.contains("### `tether sessions --json`"),
        "{exports}"
    );
    env.finish();
}

/// A file's permission bits.
fn mode_of(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// `tether ARGS` run in `dir`.
fn tether_in(env: &TestEnv, dir: &Path, args: &[&str]) -> Output {
    let mut command = env.tether(args);
    command.current_dir(dir);
    run_to_end(env, command, &format!("tether {args:?}"))
}

#[test]
fn init_writes_an_example_that_parses_and_keeps_an_existing_one() {
    let env = TestEnv::new("cli_init");
    let project = env.path("project");
    fs::create_dir(&project).unwrap();
    let file = project.join("tether.toml");

    let out = tether_in(&env, &project, &["init"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("wrote ./tether.toml"),
        "{}",
        text(&out.stdout)
    );
    let written = fs::read_to_string(&file).unwrap();
    assert_eq!(mode_of(&file), 0o600, "a tether.toml holds environments");
    let config = tether::config::parse(&written, "tether.toml").expect("the example parses");
    assert!(config.commands.len() >= 2, "{config:?}");
    assert!(
        written
            .lines()
            .filter(|l| l.trim_start().starts_with('#'))
            .count()
            > 10
    );

    fs::write(&file, "# mine\n").unwrap();
    let out = tether_in(&env, &project, &["init"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("already exists"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(fs::read_to_string(&file).unwrap(), "# mine\n");

    let out = tether_in(&env, &project, &["init", "--force"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(fs::read_to_string(&file).unwrap(), written);

    // A FIFO in its place is not waited on for a reader (it was, for ever).
    fs::remove_file(&file).unwrap();
    nix::unistd::mkfifo(&file, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let out = tether_in(&env, &project, &["init", "--force"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("FIFO"), "{}", text(&out.stderr));
    // A socket is called one.
    fs::remove_file(&file).unwrap();
    let _socket = std::os::unix::net::UnixListener::bind(&file).unwrap();
    let out = tether_in(&env, &project, &["init", "--force"]);
    assert_eq!(out.status.code(), Some(1));
    let said = text(&out.stderr);
    assert!(
        said.contains("it is a socket") && !said.contains("FIFO"),
        "{said}"
    );
    env.finish();
}

#[test]
fn run_procfile_reports_a_bad_line_at_its_place_before_anything_starts() {
    let env = TestEnv::new("cli_procfile");
    let project = env.path("project");
    fs::create_dir(&project).unwrap();
    fs::write(project.join("Procfile"), "web: serve\nnot a process\n").unwrap();

    let out = tether_in(&env, &project, &["run", "--procfile"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("Procfile:2:1: expected `name: command`"),
        "{}",
        text(&out.stderr)
    );

    // A Procfile that is not there is called one, whatever its name.
    let out = tether_in(&env, &project, &["run", "--procfile", "nonexist"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("cannot read Procfile nonexist: "),
        "{}",
        text(&out.stderr)
    );

    fs::write(project.join("Procfile"), "web: serve\n").unwrap();
    fs::write(project.join(".env"), "PORT=5000\nbad line\n").unwrap();
    let out = tether_in(&env, &project, &["run", "--procfile", "Procfile"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains(".env:2:1: expected `KEY=VALUE`"),
        "{}",
        text(&out.stderr)
    );

    let out = tether_in(&env, &project, &["run", "--procfile", "-c", "true"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "conflicts: {}",
        text(&out.stderr)
    );
    env.finish();
}

#[test]
fn run_procfile_launches_each_process_with_the_dotenv_in_the_procfiles_directory() {
    let env = TestEnv::new("cli_procfile_run");
    let project = env.path("project");
    fs::create_dir(&project).unwrap();
    let script =
        "web: echo \"web $GREETING in $(pwd)\"\n# a comment\n\nworker: echo worker $PORT\n";
    fs::write(project.join("Procfile"), script).unwrap();
    fs::write(project.join(".env"), "GREETING='from .env'\nPORT=5000\n").unwrap();

    let tmux = Tmux::start(&env, 200, 50);
    tmux.type_line(
        &env,
        &format!(
            "cd {} && exec {BIN} --state-dir {} run --procfile project/Procfile",
            env.path("").display(),
            env.state_dir().display()
        ),
    );
    let stdout_of = |name: &str| {
        (env.command_dirs().iter())
            .find(|dir| dir.ends_with(name))
            .and_then(|dir| fs::read_to_string(dir.join("stdout.log")).ok())
            .unwrap_or_default()
    };
    wait_until(&env, "both processes' output journaled", || {
        stdout_of("01-web").contains("web from .env in")
            && stdout_of("02-worker").contains("worker 5000")
    });
    let project = fs::canonicalize(&project).unwrap();
    assert!(
        stdout_of("01-web").contains(&format!("in {}", project.display())),
        "{}",
        stdout_of("01-web")
    );
    tmux.wait_screen(&env, "both ended", |s| s.matches("exit 0").count() == 2);
    tmux.keys(&env, &["q"]);
    drop(tmux);
    env.finish();
}

/// `tether run` without a command says what to give and, beside a tether.toml, that plain
/// `tether` runs its commands: the operator who typed `run` there meant those.
#[test]
fn run_without_a_command_points_to_plain_tether_beside_a_config() {
    let env = TestEnv::new("cli_run_nothing");
    let project = env.path("project");
    fs::create_dir(&project).unwrap();
    let out = tether_in(&env, &project, &["run"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.starts_with("tether: nothing to run: give `-c 'shell command'`, `-- CMD ARGS`"),
        "{stderr}"
    );
    assert!(
        stderr.contains("`tether -f FILE` runs the commands of a config"),
        "{stderr}"
    );

    fs::write(
        project.join("tether.toml"),
        "[[command]]\nname = \"a\"\nshell = \"true\"\n",
    )
    .unwrap();
    let out = tether_in(&env, &project, &["run"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("to run the commands of ./tether.toml, run `tether` alone"),
        "{stderr}"
    );

    // `-f` with a subcommand was dropped without a word: it is refused, saying what runs it.
    let out = tether_in(&env, &project, &["-f", "tether.toml", "run", "--", "true"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("run `tether -f tether.toml`"), "{stderr}");
    env.finish();
}

/// A FIFO at `path`, the owner's alone.
fn mkfifo(path: &Path) {
    rustix::fs::mknodat(
        rustix::fs::CWD,
        path,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .expect("mkfifo");
}

/// Every file the operator names is refused at once when it is a FIFO, said as one, exit 2:
/// opened as before, each of these waited in open(2) for a writer until killed (run_to_end
/// fails past its deadline). The user config, read by every `tether exec`, is said not to
/// apply and the command runs.
#[test]
fn a_fifo_named_as_a_config_procfile_or_dotenv_is_refused_without_waiting() {
    let env = TestEnv::new("cli_fifo");
    let project = env.path("project");
    fs::create_dir(&project).unwrap();
    mkfifo(&project.join("fifo.toml"));
    let refused = |args: &[&str], what: &str| {
        let out = tether_in(&env, &project, args);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains(&format!(
                "cannot read {what}: it is a FIFO (named pipe) that nothing writes to, not a regular file; "
            )),
            "{args:?}: {stderr}"
        );
        assert!(
            stderr.contains("write the text to a regular file"),
            "{args:?}: {stderr}"
        );
    };
    refused(&["-f", "fifo.toml"], "config file fifo.toml");
    refused(&["run", "--procfile", "fifo.toml"], "Procfile fifo.toml");

    // ./tether.toml, read by plain `tether`.
    mkfifo(&project.join("tether.toml"));
    refused(&[], "config file tether.toml");

    // The .env beside a Procfile.
    let app = project.join("app");
    fs::create_dir(&app).unwrap();
    fs::write(app.join("Procfile"), "web: serve\n").unwrap();
    mkfifo(&app.join(".env"));
    refused(&["run", "--procfile", "app/Procfile"], ".env file app/.env");

    // The user config.
    let user_config = env.path("config").join("tether");
    fs::create_dir_all(&user_config).unwrap();
    mkfifo(&user_config.join("config.toml"));
    let mut exec = env.exec_command(&["--no-pty"], &["echo", "ran"]);
    exec.env("XDG_CONFIG_HOME", env.path("config"));
    let run = env.spawn_captured(exec).wait(&env);
    assert_eq!(run.code(), 0, "{}", run.stderr_text());
    assert_eq!(text(&run.stdout()), "ran\n");
    assert!(
        run.stderr_text()
            .contains("it is a FIFO (named pipe) that nothing writes to, not a regular file"),
        "{}",
        run.stderr_text()
    );
    env.finish();
}
