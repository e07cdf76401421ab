use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Parser, Subcommand};

use tether::app::{Launch, run_tui};
use tether::config::{self, CommandConfig};
use tether::exec::{self, EXIT_TETHER_FAILED, ExecOptions};
use tether::journal::state_dir;
use tether::postmortem;
use tether::protocol::CommandSpec;
use tether::units::{parse_duration, parse_size};

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
    /// The config file to read when no subcommand is given (default: ./tether.toml when
    /// it exists).
    #[arg(long, short = 'f')]
    file: Option<PathBuf>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Open the TUI with a built-in demo of every feature.
    Demo,
    /// Open the TUI with the given commands launched.
    Run {
        /// Name of the command given after `--`.
        #[arg(long, short = 'n')]
        name: Option<String>,
        /// A shell command to launch (repeatable).
        #[arg(short = 'c', value_name = "SHELL")]
        shell: Vec<String>,
        /// Time between SIGTERM and SIGKILL when stopping (e.g. 500ms, 2s).
        #[arg(long, value_parser = parse_duration)]
        grace: Option<Duration>,
        /// Stop a command when it prints nothing for this long.
        #[arg(long, value_parser = parse_duration)]
        no_output_timeout: Option<Duration>,
        /// A command and its arguments.
        #[arg(last = true)]
        argv: Vec<String>,
    },
    /// Run one command through a broker without the TUI: its output is copied byte for
    /// byte and journaled, and its exit status becomes tether's.
    Exec {
        /// Print lifecycle events as JSON lines instead of the command's output.
        #[arg(long)]
        json: bool,
        /// Name the command in the journal (default: the program name).
        #[arg(long, short = 'n')]
        name: Option<String>,
        /// Time between SIGTERM and SIGKILL when stopping (e.g. 500ms, 2s).
        #[arg(long, value_parser = parse_duration)]
        grace: Option<Duration>,
        /// Stop the command when it prints nothing for this long.
        #[arg(long, value_parser = parse_duration)]
        no_output_timeout: Option<Duration>,
        /// Per-stream storage cap (e.g. 64M, 1G); beyond it bytes are counted, not stored.
        #[arg(long, value_parser = parse_size)]
        max_output: Option<u64>,
        /// The command and its arguments.
        #[arg(last = true, required = true)]
        argv: Vec<String>,
    },
    /// List the journaled sessions, oldest first.
    Sessions,
    /// Open a journaled session in the TUI, read-only, as it looked live (default: the
    /// latest; give an id from `tether sessions` or a session directory).
    Open { session: Option<String> },
    /// The live TUI over every live brokered command of this user, from every session (or
    /// one), whoever started it: `tether exec`, agents, other tethers.
    Watch { session: Option<String> },
    /// Internal: the per-command broker, started by tether itself.
    #[command(hide = true)]
    Broker,
}

fn main() {
    let cli = Cli::parse();
    let code = match cli.command {
        Some(Command::Broker) => tether::broker::main(),
        Some(Command::Exec {
            json,
            name,
            grace,
            no_output_timeout,
            max_output,
            argv,
        }) => exec::main(ExecOptions {
            json,
            name,
            grace,
            no_output_timeout,
            max_output,
            state_dir: cli.state_dir,
            argv,
        }),
        Some(Command::Sessions) => postmortem::list(cli.state_dir.as_deref()),
        Some(Command::Open { session }) => {
            match postmortem::resolve(cli.state_dir.as_deref(), session.as_deref()) {
                Ok(session_dir) => match run_tui(Launch::Recorded { session_dir }) {
                    Ok(code) => code,
                    Err(err) => {
                        eprintln!("tether: {err:#}");
                        EXIT_TETHER_FAILED
                    }
                },
                Err(err) => {
                    eprintln!("tether: {err}");
                    2
                }
            }
        }
        Some(Command::Watch { session }) => match state_dir(cli.state_dir.as_deref()) {
            Ok(state_dir) => match run_tui(Launch::Watch { state_dir, session }) {
                Ok(code) => code,
                Err(err) => {
                    eprintln!("tether: {err:#}");
                    EXIT_TETHER_FAILED
                }
            },
            Err(err) => {
                eprintln!("tether: {err}");
                EXIT_TETHER_FAILED
            }
        },
        Some(Command::Demo) => tui(cli.state_dir.as_deref(), Ok(config::demo().commands)),
        Some(Command::Run {
            name,
            shell,
            grace,
            no_output_timeout,
            argv,
        }) => {
            let mut commands: Vec<CommandConfig> = shell
                .iter()
                .map(|s| command(s.clone(), CommandSpec::Shell(s.clone())))
                .collect();
            if !argv.is_empty() {
                let label = name.unwrap_or_else(|| argv[0].clone());
                commands.push(command(label, CommandSpec::Argv(argv)));
            }
            for c in &mut commands {
                c.grace = grace;
                c.no_output_timeout = no_output_timeout;
            }
            if commands.is_empty() {
                eprintln!("tether: nothing to run: give `-c 'shell command'` or `-- CMD ARGS`");
                std::process::exit(2);
            }
            tui(cli.state_dir.as_deref(), Ok(commands))
        }
        None => {
            let default = Path::new("tether.toml");
            let commands = match cli.file.as_deref() {
                Some(file) => config::load(file).map(|c| c.commands),
                None if default.exists() => config::load(default).map(|c| c.commands),
                None => Ok(Vec::new()),
            };
            tui(
                cli.state_dir.as_deref(),
                commands.map_err(|e| e.to_string()),
            )
        }
    };
    std::process::exit(code);
}

fn command(name: String, command: CommandSpec) -> CommandConfig {
    let name = name
        .split_whitespace()
        .next()
        .unwrap_or("command")
        .rsplit('/')
        .next()
        .unwrap_or("command")
        .to_string();
    CommandConfig::new(name, command)
}

fn tui(state: Option<&Path>, commands: Result<Vec<CommandConfig>, String>) -> i32 {
    let commands = match commands {
        Ok(commands) => commands,
        Err(err) => {
            eprintln!("tether: {err}");
            return 2;
        }
    };
    let state_dir = match state_dir(state) {
        Ok(dir) => dir,
        Err(err) => {
            eprintln!("tether: {err}");
            return EXIT_TETHER_FAILED;
        }
    };
    match run_tui(Launch::Live {
        commands,
        state_dir,
    }) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("tether: {err:#}");
            EXIT_TETHER_FAILED
        }
    }
}
