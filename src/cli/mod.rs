//! The binary's commands about the command line itself: shell completions, the man page,
//! `tether init`, and clap's "similar subcommand" tip kept to the subcommands users see.
//! They all read the one definition of the command line (`Cli` in main.rs), handed in as a
//! `clap::Command`.

pub mod completions;
pub mod init;
pub mod man;
pub mod suggestions;

/// `cmd` without its hidden subcommands (`broker`, `session-owner`, ...): what completions
/// offer and typos are matched against. clap cannot remove a subcommand, so the top level is
/// built again from what `Cli` sets (name, version, the texts around its help, arguments and
/// groups) and the visible subcommands; a setting added to `Cli` is added here too.
pub fn visible(cmd: clap::Command) -> clap::Command {
    let mut visible = clap::Command::new(cmd.get_name().to_string())
        .args(cmd.get_arguments().cloned())
        .groups(cmd.get_groups().cloned())
        .subcommands(cmd.get_subcommands().filter(|s| !s.is_hide_set()).cloned());
    if let Some(version) = cmd.get_version() {
        visible = visible.version(version.to_string());
    }
    if let Some(about) = cmd.get_about() {
        visible = visible.about(about.clone());
    }
    if let Some(about) = cmd.get_long_about() {
        visible = visible.long_about(about.clone());
    }
    if let Some(text) = cmd.get_before_help() {
        visible = visible.before_help(text.clone());
    }
    if let Some(text) = cmd.get_after_help() {
        visible = visible.after_help(text.clone());
    }
    if let Some(text) = cmd.get_after_long_help() {
        visible = visible.after_long_help(text.clone());
    }
    visible
}
