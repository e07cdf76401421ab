use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};

use tether::exec::{self, ExecOptions};
use tether::units::{parse_duration, parse_size};

/// A terminal process monitor for commands that must not run away.
#[derive(Parser)]
#[command(name = "tether", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
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
        /// Where journals go (default: $TETHER_STATE_DIR, $XDG_STATE_HOME/tether or
        /// ~/.local/state/tether).
        #[arg(long)]
        state_dir: Option<PathBuf>,
        /// The command and its arguments.
        #[arg(last = true, required = true)]
        argv: Vec<String>,
    },
    /// Internal: the per-command broker, started by tether itself.
    #[command(hide = true)]
    Broker,
}

fn main() {
    let cli = Cli::parse();
    let code = match cli.command {
        Command::Exec {
            json,
            name,
            grace,
            no_output_timeout,
            max_output,
            state_dir,
            argv,
        } => exec::main(ExecOptions {
            json,
            name,
            grace,
            no_output_timeout,
            max_output,
            state_dir,
            argv,
        }),
        Command::Broker => tether::broker::main(),
    };
    std::process::exit(code);
}
