//! clap's tips, kept to what users can type: its "a similar subcommand exists" without the
//! hidden subcommands (clap matches a typo against every subcommand's name, so `tether
//! sesion-owner` suggested the internal `session-owner`; clap has no setting for it), and
//! for an unknown option the command line's real usage, with the subcommands that have the
//! option named (clap showed `tether --session x` the look-alike `--version` and a usage
//! line made of it, `Usage: tether --version`).

use clap::Parser;
use clap::builder::StyledStr;
use clap::error::{ContextKind, ContextValue, ErrorKind};

/// The parsed command line, or clap's error (help, version, a usage error) printed and the
/// process ended, as `T::parse()` does, with hidden subcommands left out of suggestions.
pub fn parse<T: Parser>() -> T {
    match T::try_parse() {
        Ok(parsed) => parsed,
        // The typo is matched again against the visible subcommands alone, for clap's own
        // message: their closest names, or none.
        Err(err) if err.kind() == ErrorKind::InvalidSubcommand => {
            match super::visible(T::command()).try_get_matches_from(std::env::args_os()) {
                Err(visible) => visible.exit(),
                Ok(_) => err.exit(),
            }
        }
        Err(mut err) if err.kind() == ErrorKind::UnknownArgument => {
            let args: Vec<String> = std::env::args_os()
                .skip(1)
                .map(|a| a.to_string_lossy().into_owned())
                .collect();
            unknown_option(&mut err, super::visible(T::command()), &args);
            err.exit()
        }
        Err(err) => err.exit(),
    }
}

/// Rewrites clap's error for an unknown argument of `cmd`'s line `args`: the usage of the
/// (sub)command it was given to, and as the tip the visible subcommands that have the option
/// when some do, else clap's look-alike if it is a visible option there.
fn unknown_option(err: &mut clap::Error, mut cmd: clap::Command, args: &[String]) {
    let Some(ContextValue::String(invalid)) = err.get(ContextKind::InvalidArg).cloned() else {
        return;
    };
    cmd.build();
    // The subcommands named before the unknown argument: the one it was given to.
    let mut path: Vec<String> = Vec::new();
    let mut current = &cmd;
    for arg in args.iter().take_while(|arg| **arg != invalid) {
        if let Some(sub) = current.find_subcommand(arg) {
            path.push(sub.get_name().to_string());
            current = sub;
        }
    }
    let mut target = &mut cmd;
    for name in &path {
        let Some(sub) = target.find_subcommand_mut(name) else {
            return;
        };
        target = sub;
    }
    err.insert(
        ContextKind::Usage,
        ContextValue::StyledStr(target.render_usage()),
    );
    let visible_long = |cmd: &clap::Command, long: &str| {
        cmd.get_arguments()
            .any(|arg| !arg.is_hide_set() && arg.get_long() == Some(long))
    };
    let Some(long) = invalid.strip_prefix("--") else {
        return;
    };
    let long = long.split_once('=').map_or(long, |(name, _)| name);
    let owners: Vec<String> = target
        .get_subcommands()
        .filter(|sub| visible_long(sub, long))
        .map(|sub| {
            format!(
                "'{} --{long}'",
                sub.get_bin_name().unwrap_or(sub.get_name())
            )
        })
        .collect();
    if !owners.is_empty() {
        err.remove(ContextKind::SuggestedArg);
        let tip = format!(
            "{} {}",
            owners.join(", "),
            if owners.len() == 1 { "exists" } else { "exist" }
        );
        err.insert(
            ContextKind::Suggested,
            ContextValue::StyledStrs(vec![StyledStr::from(tip)]),
        );
    } else if let Some(ContextValue::String(flag)) = err.get(ContextKind::SuggestedArg)
        && !flag
            .strip_prefix("--")
            .is_some_and(|flag| visible_long(target, flag))
    {
        err.remove(ContextKind::SuggestedArg);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cli() -> clap::Command {
        clap::Command::new("tool")
            .version("1")
            .arg(clap::arg!(--"state-dir" <DIR>))
            .subcommand(clap::Command::new("agent").arg(clap::arg!(--session <NAME>)))
            .subcommand(clap::Command::new("exec").arg(clap::arg!(--session <NAME>)))
            .subcommand(clap::Command::new("ps").arg(clap::arg!(--json)))
    }

    fn rendered(args: &[&str]) -> String {
        let mut err = cli().try_get_matches_from(args).expect_err("an error");
        assert_eq!(err.kind(), ErrorKind::UnknownArgument);
        let args: Vec<String> = args[1..].iter().map(|a| a.to_string()).collect();
        unknown_option(&mut err, cli(), &args);
        err.render().to_string()
    }

    #[test]
    fn an_option_of_subcommands_names_them_under_the_real_usage() {
        let shown = rendered(&["tool", "--session", "x"]);
        assert!(
            shown.contains("unexpected argument '--session' found"),
            "{shown}"
        );
        assert!(
            shown.contains("tip: 'tool agent --session', 'tool exec --session' exist"),
            "{shown}"
        );
        assert!(!shown.contains("--version"), "{shown}");
        assert!(shown.contains("Usage: tool [OPTIONS] [COMMAND]"), "{shown}");
    }

    #[test]
    fn a_look_alike_option_is_kept_with_the_real_usage() {
        let shown = rendered(&["tool", "--stat-dir", "x"]);
        assert!(
            shown.contains("tip: a similar argument exists: '--state-dir'"),
            "{shown}"
        );
        assert!(shown.contains("Usage: tool [OPTIONS] [COMMAND]"), "{shown}");
        let shown = rendered(&["tool", "ps", "--jsn"]);
        assert!(shown.contains("Usage: tool ps [OPTIONS]"), "{shown}");
    }
}
