use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{CommandFactory, Parser, Subcommand};

use tether::app::{Launch, run_tui};
use tether::config::{self, CommandConfig, naming};
use tether::control;
use tether::exec::{self, EXIT_TETHER_FAILED, ExecOptions, SignalMode};
use tether::exit::{EXIT_USAGE, OrExit, exit_code};
use tether::journal::paths::chosen_session;
use tether::journal::{SessionName, state_dir};
use tether::postmortem;
use tether::protocol::{CommandSpec, DEFAULT_READY_INTERVAL, Limits, Readiness, ReadyProbe};
use tether::units::{parse_age, parse_duration, parse_size};

mod cli;

use cli::completions::{session_ids, targets};

/// The config plain `tether` reads when it is there and no `-f` is given.
const DEFAULT_CONFIG: &str = "tether.toml";

/// A terminal process monitor for commands that must not run away.
///
/// Without a subcommand, tether opens the TUI with the commands of ./tether.toml, or with
/// an empty session and a prompt to launch one.
#[derive(Parser)]
#[command(name = "tether", version, about)]
struct Cli {
    /// Where journals go (default: $TETHER_STATE_DIR, $XDG_STATE_HOME/tether or
    /// ~/.local/state/tether).
    #[arg(long, global = true)]
    state_dir: Option<PathBuf>,
    /// The config file to run when no subcommand is given (default: ./tether.toml when it
    /// exists); refused with a subcommand, which would not read it.
    #[arg(long, short = 'f')]
    file: Option<PathBuf>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Open the TUI with a built-in demo of every feature.
    Demo,
    /// Serve the Model Context Protocol on stdin/stdout: agents run commands through
    /// tether's brokers by tool call (`run`, `output`, `signal`, `list`). The session is
    /// $TETHER_SESSION, or a new one named `mcp-<UTC time>`.
    #[cfg_attr(
        not(feature = "mcp"),
        command(
            about = "Serve the Model Context Protocol on stdin/stdout: not in this build, \
                     which was made without the cargo feature `mcp`.",
            long_about = None
        )
    )]
    Mcp,
    /// Open the TUI with the given commands launched.
    Run(RunArgs),
    /// Run one command through a broker without the TUI: its output is copied byte for
    /// byte and journaled, and its exit status becomes tether's.
    Exec(ExecArgs),
    /// List the journaled sessions, oldest first: one line each (id, start, duration, how
    /// many commands ran, failed, were killed or still run, the first failures), fitted to
    /// the terminal's width; to a file or a pipe, whole, unless COLUMNS gives a width.
    Sessions {
        /// One session (an id, an id prefix or a directory): its line and its commands'.
        #[arg(add = session_ids())]
        session: Option<String>,
        /// A line for each command too: start (from the session's start), duration, state,
        /// CPU time, peak memory and command line.
        #[arg(long)]
        long: bool,
        /// Print one JSON document instead (its fields: docs/exports.md).
        #[arg(long)]
        json: bool,
    },
    /// Write a journaled session in a format other tools read (default: the latest session;
    /// give an id, an id prefix or a session directory).
    Export {
        #[arg(conflicts_with = "follow", add = session_ids())]
        session: Option<String>,
        /// chrome-trace (Perfetto, chrome://tracing), jsonl (every event), text (a report
        /// for a bug) or otlp (OpenTelemetry OTLP/JSON).
        #[arg(long, value_enum, default_value = "text", conflicts_with = "follow")]
        format: tether::export::Format,
        /// Write to FILE (created 0600, a link is refused) instead of stdout.
        #[arg(
            short = 'o',
            long = "output",
            value_name = "FILE",
            conflicts_with = "follow"
        )]
        output: Option<PathBuf>,
        #[command(flatten)]
        live: tether::export::cli::FollowFlags,
    },
    /// Remove whole sessions, oldest first, until every rule holds; never one in which
    /// anything may still run. Without a rule, applies [retention] from
    /// $XDG_CONFIG_HOME/tether/config.toml.
    Prune {
        /// Remove sessions that ended longer ago than this (e.g. 12h, 30d, 2w).
        #[arg(long, value_parser = parse_age, value_name = "AGE")]
        older_than: Option<Duration>,
        /// Keep at most this many sessions (live ones count, and stay).
        #[arg(long, value_name = "N")]
        keep: Option<usize>,
        /// Keep the sessions' total size on disk at most this (e.g. 500M, 2G).
        #[arg(long, value_parser = parse_size, value_name = "SIZE")]
        max_size: Option<u64>,
        /// Print what would be removed; remove nothing.
        #[arg(long)]
        dry_run: bool,
        /// Apply retention as it runs after each command: [retention]'s rules, or its
        /// default (14 days, 5 GiB) when none is set; nothing when `enabled = false`. Quiet.
        #[arg(long, conflicts_with_all = ["older_than", "keep", "max_size", "dry_run"])]
        retention: bool,
        /// With --retention: a session never removed (the shim's own).
        #[arg(long, requires = "retention", hide = true, value_name = "SESSION")]
        protect: Option<String>,
    },
    /// Search what commands printed (their stored stdout and stderr) with a regex, in every
    /// session or the given ones. Exit status as grep's: 0 matched, 1 nothing, 2 error.
    Grep(GrepArgs),
    /// Open a journaled session in the TUI, read-only, as it looked live (default: the
    /// latest; give an id from `tether sessions` or a session directory).
    Open {
        #[arg(add = session_ids())]
        session: Option<String>,
        /// Open at the first line whose output shows PATTERN (first command first, stdout
        /// then stderr), with the pane's search (`/`) set to it: plain text, ASCII letters in
        /// either case.
        #[arg(long, value_name = "PATTERN")]
        search: Option<String>,
    },
    /// Run `sh -c CMD [NAME ARGS...]` through a broker, as /bin/sh would run it: the shell
    /// shim (also what tether does when started through a link named sh, bash or zsh).
    #[command(disable_help_flag = true)]
    Sh {
        /// The arguments /bin/sh gets; only -c (and -l) is brokered, anything else runs
        /// /bin/sh directly.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<OsString>,
    },
    /// Create the links DIR/sh, DIR/bash and DIR/zsh to tether: the shell shim for whoever
    /// finds them first on PATH.
    Shims { dir: PathBuf },
    /// Run an agent (claude, goose, ...) in this terminal, as `exec` runs a command, with
    /// every command it runs through a shell journaled in its session: CLAUDE_CODE_SHELL,
    /// GOOSE_SHELL and SHELL point at the shim of the shell each would run, a private shims
    /// directory comes first on PATH (Codex, which reads none of these, is given a hook on
    /// its command line instead). The agent owns the session: when it exits, whatever its
    /// commands left running is stopped. Its exit status becomes tether's.
    Agent {
        /// The session (default: the agent's name and the UTC time, e.g.
        /// claude-20261201T201500Z).
        #[arg(long, value_name = "NAME", add = session_ids())]
        session: Option<String>,
        /// The agent and its arguments.
        #[arg(last = true, required = true, value_name = "AGENT")]
        argv: Vec<String>,
    },
    /// Internal: the agent's first moments, started by `tether agent`.
    #[command(name = "session-owner", hide = true)]
    SessionOwner {
        #[arg(long)]
        shims: PathBuf,
        /// An argument tether gives the agent (Claude Code's hook, Codex's), put right after
        /// its program: apart from the operator's own, so that the agent's row reads as the
        /// operator typed it.
        #[arg(long = "agent-arg", allow_hyphen_values = true)]
        agent_args: Vec<OsString>,
        #[arg(last = true)]
        argv: Vec<OsString>,
    },
    /// Internal: Claude Code's `Notification` hook under `tether agent`, which tells the
    /// agent's broker that it waits for its human.
    #[command(name = "agent-hook", hide = true)]
    AgentHook,
    /// Codex's `PreToolUse` hook: reads the event on stdin and answers with the shell command
    /// rewritten to run through the shim in DIR (`tether shims DIR`), journaled. `tether agent
    /// -- codex` sets it up by itself; for Codex without it, see docs/agents.md.
    #[command(name = "codex-hook")]
    CodexHook {
        /// The shims directory (absolute).
        #[arg(long, value_name = "DIR")]
        shims: PathBuf,
        /// The session's journal directory: where a command cannot write it (a read-only
        /// sandbox), the command runs as without tether, unjournaled.
        #[arg(long, value_name = "DIR")]
        journal: Option<PathBuf>,
    },
    /// The live TUI over the commands of this user, whoever started them (`tether exec`,
    /// agents, other tethers): every session that has a live command or whose last command
    /// ended less than an hour ago, each listed whole (ended commands included), and the
    /// sessions that start while it runs.
    ///
    /// With SESSION: that session alone, whole, live or not. Changes are seen as they
    /// happen (inotify); where inotify is unavailable the journals are read twice a second,
    /// as the status bar says.
    Watch {
        /// A session to show whole, from its first command.
        #[arg(add = session_ids())]
        session: Option<String>,
    },
    /// Internal: the per-command broker, started by tether itself.
    #[command(hide = true)]
    Broker,
    /// List the live brokered commands of this user, from every session or one: broker and
    /// command pids, state, runtime, CPU, memory, process count, whether it is controllable;
    /// fitted to the terminal's width, or, to a file or a pipe, whole unless COLUMNS gives one.
    Ps {
        /// Print one JSON array instead of a table.
        #[arg(long)]
        json: bool,
        /// Only this session's commands.
        #[arg(add = session_ids())]
        session: Option<String>,
    },
    /// Stop live commands' whole trees (SIGTERM, the grace period, SIGKILL) and wait until
    /// nothing of them is left.
    Stop(TargetArgs),
    /// SIGKILL live commands' whole trees.
    Kill(TargetArgs),
    /// Send a signal (TERM, INT, HUP, 15, RTMIN+1, ...) to live commands' whole trees.
    Signal {
        signal: tether::protocol::ProcessSignal,
        #[command(flatten)]
        target: TargetArgs,
    },
    /// Print the shell code that completes tether's subcommands, options and session ids:
    /// `source <(tether completions bash)` in ~/.bashrc, `source <(tether completions zsh)`
    /// in ~/.zshrc (after compinit), `tether completions fish | source` in
    /// ~/.config/fish/config.fish. It asks tether for each completion, so it stays current.
    Completions {
        #[arg(value_enum)]
        shell: cli::completions::Shell,
    },
    /// Print the manual page tether(1) as roff (`tether man | man -l -`), or write it and a
    /// page per subcommand into DIR: `tether man --dir ~/.local/share/man/man1`.
    Man {
        /// Write tether.1 and tether-SUBCOMMAND.1 here (made if missing) instead.
        #[arg(long, value_name = "DIR", value_hint = clap::ValueHint::DirPath)]
        dir: Option<PathBuf>,
    },
    /// Write a commented example tether.toml in the current directory, to edit and start
    /// with `tether`.
    Init {
        /// Replace an existing tether.toml.
        #[arg(long)]
        force: bool,
    },
}

/// `tether run`.
#[derive(clap::Args)]
struct RunArgs {
    /// Name a command (default: the first program it runs, made unique: `echo`,
    /// `echo-2`). With several commands, give one -n per command, in the order the
    /// commands come (each -c, then the one after `--`).
    #[arg(long = "name", short = 'n', value_name = "NAME")]
    names: Vec<String>,
    /// A shell command to launch (repeatable).
    #[arg(short = 'c', value_name = "SHELL")]
    shell: Vec<String>,
    #[command(flatten)]
    options: CommandOptions,
    /// Give each command a pseudo-terminal for stdout (also its stdin, typed into with
    /// `i`) and one for stderr: the default.
    #[arg(long, overrides_with = "no_pty")]
    pty: bool,
    /// Pipes for stdout and stderr and /dev/null for stdin instead of terminals.
    #[arg(long, overrides_with = "pty")]
    no_pty: bool,
    /// A command and its arguments.
    #[arg(last = true)]
    argv: Vec<String>,
    /// Launch the processes of a Procfile (default ./Procfile; `name: command` lines, as
    /// Foreman reads them) with the variables of the .env beside it.
    #[arg(
        long,
        value_name = "PATH",
        num_args = 0..=1,
        default_missing_value = "Procfile",
        conflicts_with_all = ["names", "shell", "argv"]
    )]
    procfile: Option<PathBuf>,
}

/// `tether grep`.
#[derive(clap::Args)]
struct GrepArgs {
    /// A regular expression (Rust regex syntax), matched against each line's bytes.
    pattern: String,
    /// Session ids (or prefixes, or directories); default: every session.
    #[arg(add = session_ids())]
    sessions: Vec<String>,
    /// Search only this stream.
    #[arg(long, value_enum)]
    stream: Option<GrepStream>,
    /// Print one JSON object per matching line.
    #[arg(long)]
    json: bool,
    /// Ignore case.
    #[arg(long, short = 'i')]
    ignore_case: bool,
    /// Highlight matches: auto (on a terminal), always, never.
    #[arg(long, value_enum, default_value_t = tether::grep::Color::Auto)]
    color: tether::grep::Color,
    /// Select the lines that do not match.
    #[arg(long, short = 'v')]
    invert_match: bool,
    /// Print how many lines each command selected (`session/command:N`), not the lines.
    #[arg(long, short = 'c', conflicts_with_all = ["files_with_matches", "json"])]
    count: bool,
    /// Print the commands with a selected line (`session/command`), not the lines.
    #[arg(long, short = 'l', conflicts_with = "json")]
    files_with_matches: bool,
    /// Print N lines of context around each selected line.
    #[arg(long, short = 'C', value_name = "N")]
    context: Option<usize>,
    /// Print N lines of context after each selected line.
    #[arg(long, short = 'A', value_name = "N")]
    after_context: Option<usize>,
    /// Print N lines of context before each selected line.
    #[arg(long, short = 'B', value_name = "N")]
    before_context: Option<usize>,
    /// Only the commands whose name (`cargo_test`) or directory (`03-cargo_test`) matches
    /// NAME, a glob (`*` any characters, `?` one); exact without them.
    #[arg(long, value_name = "NAME")]
    name: Option<String>,
    /// Accepted for grep's sake: line numbers are always shown.
    #[arg(long = "line-number", short = 'n', hide = true)]
    line_number: bool,
    /// Also show the lines of an agent's terminal that echo what its commands printed, or
    /// that redraw what it showed a moment before (by default such a line is shown once).
    #[arg(long)]
    echoes: bool,
}

impl GrepArgs {
    fn main(self, state_dir: Option<&Path>) -> i32 {
        use tether::grep::{GrepOptions, Report, Scan};
        let options = GrepOptions {
            pattern: self.pattern,
            sessions: self.sessions,
            stream: self.stream.map(|s| match s {
                GrepStream::Stdout => tether::protocol::Stream::Stdout,
                GrepStream::Stderr => tether::protocol::Stream::Stderr,
            }),
            json: self.json,
            ignore_case: self.ignore_case,
            color: self.color,
            // As grep: -A and -B win over -C for their side.
            scan: Scan {
                invert: self.invert_match,
                before: self.before_context.or(self.context).unwrap_or(0),
                after: self.after_context.or(self.context).unwrap_or(0),
            },
            report: if self.count {
                Report::Count
            } else if self.files_with_matches {
                Report::Names
            } else {
                Report::Lines
            },
            name: self.name,
            echoes: self.echoes,
        };
        tether::grep::main(state_dir, &options)
    }
}

/// `tether exec`.
#[derive(clap::Args)]
struct ExecArgs {
    /// Print lifecycle events as JSON lines instead of the command's output.
    #[arg(long)]
    json: bool,
    /// Name the command in the journal (default: the program name).
    #[arg(long, short = 'n')]
    name: Option<String>,
    #[command(flatten)]
    options: CommandOptions,
    /// The command's journal cap, stdout and stderr together (e.g. 64M, 1G); beyond it bytes
    /// are counted, not stored, never cut from what is printed. Default: TETHER_MAX_OUTPUT,
    /// else the user config's [journal] max_output, else 1G.
    #[arg(long, value_parser = parse_size)]
    max_output: Option<u64>,
    /// Give the command /dev/null as stdin instead of tether's own.
    #[arg(long)]
    no_stdin: bool,
    /// Pipes for the command's stdout and stderr even where tether's own are a terminal
    /// (by default each gets a pseudo-terminal there).
    #[arg(long)]
    no_pty: bool,
    /// Keep processes the command leaves running (a server started with `&`) once it
    /// exits, until the process that ran tether exits, `tether stop`, or
    /// $TETHER_LEFTOVERS_MAX; by default nothing outlives the command.
    #[arg(long)]
    keep_leftovers: bool,
    /// When the command cannot be run under a broker (the journal cannot be created: a
    /// full disk, a read-only state directory), run it directly, unjournaled, after one
    /// line on stderr, instead of failing with 125 (what the shell shim always does).
    #[arg(long)]
    fail_open: bool,
    /// The command and its arguments.
    #[arg(last = true, required = true)]
    argv: Vec<String>,
}

impl RunArgs {
    fn main(self, state_dir: Option<&Path>) -> i32 {
        let options = &self.options;
        exit_code(|| {
            let session = chosen_session(options.session.as_deref()).or_exit(EXIT_USAGE)?;
            let with_options = |command: CommandConfig| CommandConfig {
                grace: options.grace,
                no_output_timeout: options.no_output_timeout,
                drain_on: options.drain_on.clone(),
                drain: options.drain,
                pty: !self.no_pty,
                limits: options.limits(),
                budgets: options.budgets(),
                ..command
            };
            if let Some(procfile) = self.procfile {
                let commands = config::procfile::load(&procfile)
                    .map(|procfile| config::Config {
                        commands: procfile.commands.into_iter().map(with_options).collect(),
                        ..procfile
                    })
                    .map_err(|err| err.to_string());
                return Ok(tui(state_dir, session, commands));
            }
            let mut specs: Vec<CommandSpec> =
                self.shell.into_iter().map(CommandSpec::Shell).collect();
            if !self.argv.is_empty() {
                specs.push(CommandSpec::Argv(self.argv));
            }
            if specs.is_empty() {
                let config_here = Path::new(DEFAULT_CONFIG).exists();
                return Err((EXIT_USAGE, nothing_to_run(config_here)));
            }
            let names = naming::assign_names(&specs, &self.names).or_exit(EXIT_USAGE)?;
            let commands = specs
                .into_iter()
                .zip(names)
                .map(|(spec, name)| with_options(CommandConfig::new(name, spec)))
                .collect();
            let config = config::Config {
                commands,
                ordered_shutdown: false,
            };
            Ok(tui(state_dir, session, Ok(config)))
        })
    }
}

/// `tether run` with no command: what to give, and that a config's commands are run by
/// plain `tether` (the operator who typed `run` beside a tether.toml meant those).
fn nothing_to_run(config_here: bool) -> String {
    let give = "nothing to run: give `-c 'shell command'`, `-- CMD ARGS` or `--procfile`";
    if config_here {
        format!(
            "{give}; to run the commands of ./{DEFAULT_CONFIG}, run `tether` alone (`tether -f \
             FILE` for another config)"
        )
    } else {
        format!("{give}; `tether -f FILE` runs the commands of a config (`tether init` writes one)")
    }
}

impl ExecArgs {
    fn main(self, state_dir: Option<PathBuf>) -> i32 {
        let options = self.options;
        match (
            chosen_session(options.session.as_deref()),
            exec::LeftoversChoice::for_exec(self.keep_leftovers),
        ) {
            (Ok(session), Ok(leftovers)) => exec::main(ExecOptions {
                json: self.json,
                name: self.name,
                grace: options.grace,
                no_output_timeout: options.no_output_timeout,
                limits: options.limits(),
                budgets: options.budgets(),
                ready: options.ready.readiness(),
                drain_on: options.drain_on,
                drain: options.drain,
                max_output: self.max_output,
                state_dir,
                session,
                argv: self.argv,
                arg0: None,
                signals: SignalMode::Stop,
                no_stdin: self.no_stdin,
                pty: !self.no_pty,
                leftovers,
                die_by_signal: false,
                agents_command: false,
                agent: false,
                fail_open: self.fail_open,
                retention: exec::RetentionRun::AtSessionEnd,
                relay_keys: false,
            }),
            (Err(err), _) => usage_error(&err),
            (_, Err(err)) => usage_error(&err.to_string()),
        }
    }
}

/// What `run` and `exec` share: how a command is stopped, watched and limited, and the
/// session it is journaled in.
#[derive(clap::Args)]
struct CommandOptions {
    /// Time between SIGTERM and SIGKILL when stopping (e.g. 500ms, 2s).
    #[arg(long, value_parser = parse_duration)]
    grace: Option<Duration>,
    /// Stop the command when it prints nothing for this long.
    #[arg(long, value_parser = parse_duration)]
    no_output_timeout: Option<Duration>,
    /// A regex for the command's final line of stdout: once a line matches, the command has
    /// --drain to exit, then it is stopped and counts as finished (`exec` exits 0).
    #[arg(long, value_name = "REGEX", value_parser = parse_drain_on)]
    drain_on: Option<String>,
    /// How long the command may take to exit after its --drain-on line (default 5s).
    #[arg(long, value_parser = parse_duration, requires = "drain_on")]
    drain: Option<Duration>,
    /// Journal in this named session, joined by every tether that names it (default:
    /// $TETHER_SESSION, else a new session).
    #[arg(long, value_name = "NAME", add = session_ids())]
    session: Option<String>,
    /// Limit the command's cgroup to this many processes (pids.max), where the pids
    /// controller is available; otherwise the journal says so and it runs unlimited.
    #[arg(long, value_name = "N")]
    max_procs: Option<u64>,
    /// Limit the command's cgroup to this much memory (memory.max, e.g. 512M), where the
    /// memory controller is available; otherwise the journal says so.
    #[arg(long, value_parser = parse_size, value_name = "SIZE")]
    max_memory: Option<u64>,
    #[command(flatten)]
    ready: ReadyArgs,
    /// Budget: stop the command once this long has passed since it started (e.g. 30s, 10m),
    /// as timeout(1) would; `off`: none. Default: $TETHER_MAX_TIME, else the user config's
    /// [budgets] max_time.
    #[arg(long, value_parser = time_limit, value_name = "DURATION|off")]
    max_time: Option<Limit<Duration>>,
    /// Budget: stop the command once its whole process tree used this much CPU time, user
    /// and system (e.g. 1s, 5m); `off`: none. Default: $TETHER_MAX_CPU, else the user
    /// config's [budgets] max_cpu.
    #[arg(long, value_parser = time_limit, value_name = "DURATION|off")]
    max_cpu: Option<Limit<Duration>>,
    /// Budget: stop the command once it printed more than this, stdout and stderr together
    /// (e.g. 64M); `off`: none. Unlike --max-output (what the journal stores), this stops
    /// it. Default: $TETHER_OUTPUT_BUDGET, else the user config's [budgets] max_output.
    #[arg(long, value_parser = size_limit, value_name = "SIZE|off")]
    output_budget: Option<Limit<u64>>,
}

/// A budget given on the command line: a limit, or `off` (`None`).
#[derive(Clone, Copy)]
struct Limit<T>(Option<T>);

fn time_limit(text: &str) -> Result<Limit<Duration>, String> {
    tether::config::budgets::parse_time_limit(text).map(Limit)
}

fn size_limit(text: &str) -> Result<Limit<u64>, String> {
    tether::config::budgets::parse_size_limit(text).map(Limit)
}

impl CommandOptions {
    fn limits(&self) -> Limits {
        Limits {
            max_procs: self.max_procs,
            max_memory: self.max_memory,
        }
    }

    /// The budgets the command line sets (the rest from the variables and the user config).
    fn budgets(&self) -> tether::config::budgets::BudgetSettings {
        tether::config::budgets::BudgetSettings {
            max_time: self.max_time.map(|l| l.0),
            max_cpu: self.max_cpu.map(|l| l.0),
            max_output: self.output_budget.map(|l| l.0),
        }
    }
}

/// A readiness probe (`ready_*` in tether.toml): at most one of the four, each checked as
/// the broker will use it, so that a bad one is a usage error before anything starts.
#[derive(clap::Args)]
#[group(skip)]
struct ReadyArgs {
    /// Ready once a line of stdout or stderr matches this regex (journaled as `ready`).
    #[arg(long, value_name = "REGEX", value_parser = parse_ready_log, group = "ready_probe")]
    ready_log: Option<String>,
    /// Ready once a GET of this plain http:// URL answers 2xx.
    #[arg(long, value_name = "URL", value_parser = parse_ready_http, group = "ready_probe")]
    ready_http: Option<String>,
    /// Ready once a TCP connection to PORT (on 127.0.0.1) or HOST:PORT is accepted.
    #[arg(long, value_name = "PORT|HOST:PORT", value_parser = parse_ready_tcp, group = "ready_probe")]
    ready_tcp: Option<(String, u16)>,
    /// Ready once this shell command exits 0 (sh -c, tried every --ready-interval).
    #[arg(long, value_name = "SHELL", value_parser = parse_ready_exec, group = "ready_probe")]
    ready_exec: Option<String>,
    /// Give up (journaled as `not_ready`; the command runs on) after this long.
    #[arg(long, value_parser = parse_positive_duration, requires = "ready_probe")]
    ready_timeout: Option<Duration>,
    /// Time between two tries of the probe (default 500ms).
    #[arg(long, value_parser = parse_positive_duration, requires = "ready_probe")]
    ready_interval: Option<Duration>,
}

impl ReadyArgs {
    fn readiness(&self) -> Option<Readiness> {
        let probe = if let Some(pattern) = &self.ready_log {
            ReadyProbe::Log {
                pattern: pattern.clone(),
            }
        } else if let Some(url) = &self.ready_http {
            ReadyProbe::Http { url: url.clone() }
        } else if let Some((host, port)) = &self.ready_tcp {
            ReadyProbe::Tcp {
                host: host.clone(),
                port: *port,
            }
        } else {
            ReadyProbe::Exec {
                shell: self.ready_exec.clone()?,
            }
        };
        Some(Readiness {
            probe,
            interval: self.ready_interval.unwrap_or(DEFAULT_READY_INTERVAL),
            timeout: self.ready_timeout,
        })
    }
}

fn parse_ready_log(pattern: &str) -> Result<String, String> {
    tether::broker::probes::log_pattern(pattern).map(|_| pattern.to_string())
}

fn parse_ready_http(url: &str) -> Result<String, String> {
    let checked = tether::broker::probes::target::http_target(url);
    checked.map(|_| url.to_string()).map_err(|e| e.to_string())
}

/// As `ready_exec` in tether.toml.
fn parse_ready_exec(shell: &str) -> Result<String, String> {
    config::ready::exec_probe(shell).map(|()| shell.to_string())
}

/// As `ready_timeout` and `ready_interval` in tether.toml: a duration above 0.
fn parse_positive_duration(text: &str) -> Result<Duration, String> {
    match parse_duration(text).map_err(|e| e.to_string())? {
        Duration::ZERO => Err("must be above 0".into()),
        duration => Ok(duration),
    }
}

fn parse_ready_tcp(text: &str) -> Result<(String, u16), String> {
    tether::broker::probes::target::tcp_target(text).map_err(|e| e.to_string())
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum GrepStream {
    Stdout,
    Stderr,
}

/// What `stop`, `kill` and `signal` act on.
#[derive(clap::Args)]
struct TargetArgs {
    /// SESSION/NAME (one command; NAME, its NN-name id or its number NN), or SESSION (all its live commands).
    #[arg(required_unless_present = "pid", add = targets())]
    target: Option<String>,
    /// The command whose process tree holds this pid.
    #[arg(long, conflicts_with = "target")]
    pid: Option<i32>,
}

impl TargetArgs {
    fn parse(&self) -> Result<control::Target, String> {
        match (&self.target, self.pid) {
            (_, Some(pid)) => Ok(control::Target::Pid(pid)),
            (Some(text), None) => control::Target::parse(text),
            (None, None) => Err("give SESSION/NAME, SESSION or --pid PID".into()),
        }
    }
}

/// `tether stop|kill|signal`: exit 2 for a target that cannot be read.
fn act(state: Option<&Path>, action: control::cli::Action, target: &TargetArgs) -> i32 {
    match target.parse() {
        Ok(target) => control::cli::act(state, action, target),
        Err(err) => usage_error(&err),
    }
}

/// `--drain-on`: checked here, so that a bad pattern is a usage error before anything starts.
fn parse_drain_on(pattern: &str) -> Result<String, String> {
    tether::broker::final_drain::compile(pattern)
        .map(|_| pattern.to_string())
        .map_err(|e| e.to_string())
}

fn main() {
    // Started through a link named like a shell: the shim, before any option parsing (the
    // arguments are the shell's).
    if let Some(shell) = tether::shim::invoked_as_shell() {
        tether::sys::exit_now(tether::shim::main_as_link(shell));
    }
    // `tether broker` as the front end starts it, before clap builds every subcommand's
    // parser: it is on the path of every brokered command. Anything else (`broker --help`)
    // goes through clap.
    let mut args = std::env::args_os().skip(1);
    if let (Some(first), None) = (args.next(), args.next())
        && first == "broker"
    {
        std::process::exit(tether::broker::main());
    }
    cli::completions::answer_if_asked(Cli::command);
    let cli: Cli = cli::suggestions::parse();
    let state = cli.state_dir.as_deref();
    // `-f` names the config that plain `tether` runs: with a subcommand it would be
    // dropped without a word (`tether -f x.toml run` ran nothing of x.toml).
    if let (Some(file), Some(_)) = (&cli.file, &cli.command) {
        std::process::exit(usage_error(&format!(
            "-f {} names the config that `tether` alone runs, and is not read with a subcommand: run `tether -f {}`",
            file.display(),
            file.display()
        )));
    }
    let code = match cli.command {
        Some(Command::Broker) => tether::broker::main(),
        Some(Command::Mcp) => mcp(state.map(PathBuf::from)),
        Some(Command::Exec(args)) => args.main(state.map(PathBuf::from)),
        Some(Command::Sh { args }) => tether::shim::main_subcommand(args, state.map(PathBuf::from)),
        Some(Command::Shims { dir }) => tether::shim::install(&dir),
        Some(Command::Agent { session, argv }) => {
            match session.as_deref().map(SessionName::parse).transpose() {
                Ok(session) => tether::agent::main(tether::agent::AgentOptions {
                    session,
                    state_dir: state.map(PathBuf::from),
                    argv,
                }),
                Err(err) => usage_error(&format!("--session: {err}")),
            }
        }
        Some(Command::SessionOwner {
            shims,
            agent_args,
            argv,
        }) => tether::agent::become_session_owner(&shims, &agent_args, &argv),
        Some(Command::AgentHook) => tether::agent::agent_hook_main(),
        Some(Command::CodexHook { shims, journal }) => {
            tether::agent::codex_hook_main(&shims, journal.as_deref())
        }
        Some(Command::Sessions {
            session,
            long,
            json: false,
        }) => postmortem::list(state, session.as_deref(), long),
        Some(Command::Sessions {
            session,
            json: true,
            ..
        }) => tether::export::cli::sessions_json(state, session.as_deref()),
        Some(Command::Export { live, .. }) if live.follow => {
            tether::export::cli::follow(state, live)
        }
        Some(Command::Export {
            session,
            format,
            output,
            ..
        }) => tether::export::cli::export(state, session.as_deref(), format, output.as_deref()),
        Some(Command::Prune {
            retention: true,
            protect,
            ..
        }) => match tether::journal::state_dir(state) {
            Ok(state) => tether::prune::detached::main(&state, protect.as_deref()),
            Err(err) => usage_error(&err.to_string()),
        },
        Some(Command::Prune {
            older_than,
            keep,
            max_size,
            dry_run,
            ..
        }) => {
            let rules = tether::prune::Rules {
                older_than,
                keep,
                max_size,
            };
            tether::prune::main(state, rules, dry_run)
        }
        Some(Command::Grep(args)) => args.main(state),
        Some(Command::Ps { json, session }) => control::cli::ps(state, json, session.as_deref()),
        Some(Command::Stop(target)) => act(state, control::cli::Action::Stop, &target),
        Some(Command::Kill(target)) => act(
            state,
            control::cli::Action::Signal(tether::protocol::ProcessSignal::KILL),
            &target,
        ),
        Some(Command::Signal { signal, target }) => {
            act(state, control::cli::Action::Signal(signal), &target)
        }
        Some(Command::Open { session, search }) => {
            match postmortem::resolve(state, session.as_deref()) {
                Ok(session_dir) => open_tui(Launch::Recorded {
                    session_dir,
                    search,
                }),
                Err(err) => usage_error(&err.to_string()),
            }
        }
        Some(Command::Watch { session }) => exit_code(|| {
            let state_dir = state_dir(state).or_exit(EXIT_TETHER_FAILED)?;
            Ok(open_tui(Launch::Watch { state_dir, session }))
        }),
        Some(Command::Demo) => tui(state, None, Ok(config::demo())),
        Some(Command::Run(args)) => args.main(state),
        Some(Command::Completions { shell }) => cli::completions::print(shell),
        Some(Command::Man { dir: None }) => cli::man::print(Cli::command()),
        Some(Command::Man { dir: Some(dir) }) => cli::man::write_pages(Cli::command(), &dir),
        Some(Command::Init { force }) => cli::init::main(force),
        None => {
            let default = Path::new(DEFAULT_CONFIG);
            let commands = match cli.file.as_deref() {
                Some(file) => config::load(file),
                None if default.exists() => config::load(default),
                None => Ok(config::Config::default()),
            };
            let session = match chosen_session(None) {
                Ok(session) => session,
                Err(err) => std::process::exit(usage_error(&err)),
            };
            tui(state, session, commands.map_err(|e| e.to_string()))
        }
    };
    // A reclaim at work (the TUI's, `exec`'s) ends between two signals, never between a
    // signal and its line in the journal.
    tether::supervisor::abandoned::settle();
    std::process::exit(code);
}

/// `tether mcp`. A build without the cargo feature `mcp` still lists the subcommand (its help
/// says it is not in the build) and refuses it with exit code 2, so that an agent configured
/// to start it logs why, rather than a usage error that reads as a typo.
#[cfg(feature = "mcp")]
fn mcp(state: Option<PathBuf>) -> i32 {
    tether::mcp::main(state)
}

#[cfg(not(feature = "mcp"))]
fn mcp(_state: Option<PathBuf>) -> i32 {
    usage_error(
        "this tether was built without the MCP server (cargo feature `mcp`); \
         build it with the default features (`cargo install --path .`) to serve MCP",
    )
}

/// A bad option value: says so, exit code 2.
fn usage_error(message: &str) -> i32 {
    eprintln!("tether: {message}");
    2
}

fn tui(
    state: Option<&Path>,
    session: Option<SessionName>,
    config: Result<config::Config, String>,
) -> i32 {
    exit_code(|| {
        let config = config.or_exit(EXIT_USAGE)?;
        let state_dir = state_dir(state).or_exit(EXIT_TETHER_FAILED)?;
        Ok(open_tui(Launch::Live {
            commands: config.commands,
            state_dir,
            session,
            ordered_shutdown: config.ordered_shutdown,
        }))
    })
}

/// The TUI, drawn on this terminal until it quits: its exit code, or tether's failure.
fn open_tui(launch: Launch) -> i32 {
    match run_tui(launch, tether::ui::draw) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("tether: {err:#}");
            EXIT_TETHER_FAILED
        }
    }
}
